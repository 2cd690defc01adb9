"""``.. live-report::``: the execution table of the whole site, with a chart of run times.

The directive leaves a placeholder; when the page is written (a post-transform) it becomes a
table with one row per (page, framework) session — status, cells, run time, device, when and
where it ran, and whether this build ran it or it came from the store — a summary line, and (for
HTML) an SVG bar chart of run time per page and framework. The page holding the report is
rewritten whenever what it would show changes, although its source did not.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from html import escape
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.environment.collectors import EnvironmentCollector
from sphinx.errors import NoUri
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import make_refnode

from livecells.config import get_config
from livecells.model.device_report import device_chart, device_rows, device_table
from livecells.model.records import SessionOutcome, outcome_of
from livecells.model.text import one_line
from livecells.model.vocabulary import ExecuteMode, Origin, SessionStatus
from livecells.read.env_state import env_state
from livecells.render.markup import MATHJAX_IGNORE
from livecells.render.timing import format_date, format_seconds
from livecells.sphinx_util import app_of

#: Bar colours, one per framework in configured order (colour-blind safe).
PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377")


class live_report(nodes.General, nodes.Element):
    """Where the execution report goes; replaced when the page is written."""


class LiveReportDirective(SphinxDirective):
    """``.. live-report::`` (no arguments, no content)."""

    has_content = False

    def run(self) -> list[nodes.Node]:
        node = live_report()
        self.set_source_info(node)
        return [node]


def report_rows(app: Sphinx) -> list[SessionOutcome]:
    """Every session of the site, as the build's outcome has it, in page order; the machines'
    names left out unless ``livecells_show_host`` says."""
    sessions = outcome_of(app.env).sessions.values()
    if not get_config(app.env).show_host:
        sessions = [dataclasses.replace(s, host="") for s in sessions]
    return sorted(sessions, key=lambda s: (s.page, _order(app, s.framework)))


def shown_row(session: SessionOutcome) -> tuple[str, ...]:
    """What the table shows of a session past its page and framework: status (with its cells
    the page shows failed, not run, or stored for other code), cells, device, when and where it
    last ran, and where that record comes from."""
    if session.record_status is None:
        status = "store damaged" if session.store_damaged else "not run"
        return (status, str(session.cells), "—", "—", "—")
    status = _shown(session.record_status)
    if session.errors:
        status += f", {session.errors} cell error(s)"
    if session.not_run:
        status += f", {session.not_run} not run"
    if session.stale:
        status += f" (code changed since; {session.current} of {session.cells} cells shown)"
    when = format_date(_shown(session.date))
    host = _shown(session.host)
    ran = f"{when} on {host}" if host and when else when
    origin = session.latest_origin.label
    return (status, str(session.cells), _shown(session.device) or "—", ran or "—", origin or "—")


def _order(app: Sphinx, framework: str) -> int:
    names = get_config(app.env).framework_names()
    return names.index(framework) if framework in names else len(names)


def _shown(value: Any) -> str:
    """A stored value as one line of the table: no control characters, not too long."""
    return one_line(str(value), 120)


def summary_line(rows: list[SessionOutcome], execute: str) -> str:
    """``N sessions on P pages: R run in this build, S from the store, ...; total cell time``."""
    ran = sum(1 for r in rows if r.latest_origin == Origin.RUN)
    stored = sum(1 for r in rows if r.latest_origin == Origin.STORE)
    not_run = sum(1 for r in rows if r.latest_origin == Origin.RECORDED)
    failed = sum(1 for r in rows if r.errors or r.record_status == SessionStatus.FAILED)
    total = sum(r.seconds or 0.0 for r in rows)
    pages = len({r.page for r in rows})
    errors, cells_not_run, stale = (sum(getattr(r, k) for r in rows) for k in ("errors", "not_run", "stale_cells"))
    text = (
        f"{len(rows)} sessions on {pages} pages: {ran} run in this build, {stored} from the store, "
        f"{not_run} not run; {failed} failed; the pages show {errors} cell error(s), {cells_not_run} "
        f"cell(s) not run, {stale} stale; total cell time {format_seconds(total)}."
    )
    if execute == ExecuteMode.OFF:
        text += " (livecells_execute = 'off': the pages show their recorded outputs.)"
    return text


def chart_svg(rows: list[SessionOutcome], labels: dict[str, str], titles: dict[str, str]) -> str:
    """A horizontal bar chart of run time per page and framework, as standalone SVG text."""
    timed = [r for r in rows if r.seconds is not None]
    colours = {fw: PALETTE[i % len(PALETTE)] for i, fw in enumerate(labels)}
    bar, gap, left, width, value_room = 16, 6, 260, 640, 80
    height = 30 + len(timed) * (bar + gap)
    longest = max((r.seconds or 0.0 for r in timed), default=0.0) or 1.0
    scale = (width - left - value_room) / longest
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" role="img" '
        f'width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
        f'font-family="sans-serif" font-size="12">',
        "<title>Run time per page and framework</title>",
    ]
    for n, row in enumerate(timed):
        y = 10 + n * (bar + gap)
        label = f"{titles.get(row.page, row.page)} · {labels.get(row.framework, row.framework)}"
        shown = label if len(label) <= 40 else label[:39] + "…"
        length = max(1.0, (row.seconds or 0.0) * scale)
        value = format_seconds(row.seconds or 0.0)
        parts.append(
            f'<text x="{left - 6}" y="{y + bar - 4}" text-anchor="end" fill="currentColor">'
            f"<title>{escape(label)}</title>{escape(shown)}</text>"
        )
        parts.append(
            f'<rect x="{left}" y="{y}" width="{length:.1f}" height="{bar}" '
            f'fill="{colours.get(row.framework, PALETTE[0])}">'
            f"<title>{escape(label)}: {escape(value)}</title></rect>"
        )
        parts.append(
            f'<text x="{left + length + 4:.1f}" y="{y + bar - 4}" fill="currentColor">{escape(value)}</text>'
        )
    axis_y = 10 + len(timed) * (bar + gap)
    parts.append(f'<line x1="{left}" y1="4" x2="{left}" y2="{axis_y}" stroke="currentColor"/>')
    parts.append("</svg>")
    return "\n".join(parts)


class RenderLiveReport(SphinxPostTransform):
    """Replace each ``live_report`` placeholder by the table, the summary and the chart."""

    default_priority = 120

    def run(self, **kwargs: Any) -> None:
        placeholders = list(self.document.findall(live_report))
        if not placeholders:
            return
        app = app_of(self.env)
        config = get_config(self.env)
        rows = report_rows(app)
        labels = {name: spec.label for name, spec in config.frameworks.items()}
        titles = {d: t.astext() for d, t in self.env.titles.items()}
        summary = summary_line(rows, outcome_of(self.env).execute)
        for placeholder in placeholders:
            out: list[nodes.Node] = [nodes.paragraph("", summary, classes=["livecells-report-summary"])]
            if rows:
                out.append(self._table(app, rows, labels, titles))
                if app.builder.format == "html" and any(r.seconds is not None for r in rows):
                    svg = chart_svg(rows, labels, titles)
                    out.append(nodes.raw("", svg, format="html", classes=["livecells-report-chart"]))
                out.extend(self._devices(app))
            placeholder.replace_self(out)

    def _devices(self, app: Sphinx) -> list[nodes.Node]:
        """Once the store holds timings of two devices or more: a session × device table of
        the cells' summed times, and (HTML) its chart (see :mod:`livecells.model.device_report`)."""
        found = device_rows(outcome_of(self.env).records)
        if not device_table(found):
            return []
        devices, rows = found
        table = nodes.table(classes=["livecells-report", "livecells-report-devices", *MATHJAX_IGNORE])
        group = nodes.tgroup(cols=len(devices) + 1)
        table += group
        for width in [30, *([14] * len(devices))]:
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += _row([nodes.Text(h) for h in ["Session", *devices]])
        group += head
        body = nodes.tbody()
        for name, times in rows:
            shown = [
                "—" if (t := times.get(d)) is None else format_seconds(t).replace(" ", "\u00a0") for d in devices
            ]
            body += _row([nodes.Text(text) for text in (name, *shown)])
        group += body
        out: list[nodes.Node] = [table]
        chart = device_chart(found)
        if app.builder.format == "html" and chart is not None:
            out.append(nodes.raw("", chart, format="html", classes=["livecells-report-chart"]))
        return out

    def _table(
        self, app: Sphinx, rows: list[SessionOutcome], labels: dict[str, str], titles: dict[str, str]
    ) -> nodes.table:
        headers = ["Page", "Framework", "Status", "Cells", "Run time", "Device", "Ran", "From"]
        widths = [22, 10, 10, 5, 9, 12, 22, 10]  # in characters, for the text builder
        # Stored text (a device's name, a reason) is no math for MathJax.
        table = nodes.table(classes=["livecells-report", *MATHJAX_IGNORE])
        group = nodes.tgroup(cols=len(headers))
        table += group
        for width in widths:
            group += nodes.colspec(colwidth=width)
        head = nodes.thead()
        head += _row([nodes.Text(h) for h in headers])
        group += head
        body = nodes.tbody()
        for row in rows:
            status, cells, device, ran, origin = shown_row(row)
            seconds = "—" if row.seconds is None else format_seconds(row.seconds).replace(" ", "\u00a0")
            body += _row(
                [
                    self._page_link(app, row.page, titles.get(row.page, row.page)),
                    nodes.Text(labels.get(row.framework, row.framework)),
                    *(nodes.Text(text) for text in (status, cells, seconds, device, ran, origin)),
                ]
            )
        group += body
        return table

    def _page_link(self, app: Sphinx, docname: str, title: str) -> nodes.Node:
        try:
            return make_refnode(app.builder, self.env.docname, docname, "", nodes.inline("", title), title)
        except NoUri:
            return nodes.Text(title)


class ReportCollector(EnvironmentCollector):
    """Keeps the pages that hold a report in the environment (:func:`report_pages`)."""

    def clear_doc(self, app: Sphinx, env: BuildEnvironment, docname: str) -> None:
        report_pages(env).discard(docname)

    def merge_other(
        self, app: Sphinx, env: BuildEnvironment, docnames: set[str], other: BuildEnvironment
    ) -> None:
        report_pages(env).update(report_pages(other) & docnames)

    def process_doc(self, app: Sphinx, doctree: nodes.document) -> None:
        if any(True for _ in doctree.findall(live_report)):
            report_pages(app.env).add(app.env.docname)


def report_pages(env: BuildEnvironment) -> set[str]:
    return env_state(env).reports


def on_env_updated(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """The report pages, when what they would show differs from what they were written with."""
    pages = report_pages(env)
    if not pages:
        return []
    shown = [
        (row.page, row.framework, row.seconds, row.errors, row.not_run, row.stale_cells, *shown_row(row))
        for row in report_rows(app)
    ]
    digest = hashlib.sha256(json.dumps([shown, get_config(app.env).execute], sort_keys=True).encode()).hexdigest()
    # Per builder: builders that share one environment each write their own copy of the page.
    digests = env_state(env).report_digests
    if digests.get(app.builder.name) == digest:
        return []
    digests[app.builder.name] = digest
    return sorted(pages)


def _row(cells: list[nodes.Node]) -> nodes.row:
    row = nodes.row()
    for content in cells:
        row += nodes.entry("", nodes.paragraph("", "", content))
    return row


def _skip(self: Any, node: nodes.Node) -> None:
    raise nodes.SkipNode


def setup_report(app: Sphinx) -> None:
    app.add_directive("live-report", LiveReportDirective)
    skip = (_skip, None)
    app.add_node(live_report, html=skip, latex=skip, text=skip, man=skip, texinfo=skip)
    app.add_env_collector(ReportCollector)
    # After the build's handler (livecells.pipeline.events, priority 500) has run this build's sessions.
    app.connect("env-updated", on_env_updated, priority=600)
    app.add_post_transform(RenderLiveReport)
