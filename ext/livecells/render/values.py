"""Render stage: values, times and ratios quoted in prose, from the results the page shows.

Post-transforms around :class:`~livecells.render.cells.RenderLiveCells` (before it, so that
the page's notebooks quote values too; after it for prose of several frameworks, once each copy
sits in its framework's panel) replace each pending
:class:`~livecells.read.values.live_value` and ``live_value_block`` by the value of the page's
results: this build's, or the store's, exactly those the cells show (the same matching as
:mod:`.results`). A value from the store says so, as a stored output's line does; a name that
is missing or ambiguous is a ``livecells.value`` warning at the role's line, and the page shows
``??`` in its place. Text from a cell is text (escaped by the writer, or here for the one span of
HTML this makes); whole outputs go through :class:`~livecells.render.outputs.Outputs`, so HTML
passes only as ``livecells_allow_html`` says.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass, field
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging

from livecells.config import WARNING_TYPE, get_config
from livecells.model.plans import CellPlan
from livecells.model.records import CellRecord, Provenance, SessionRecord, outcome_of
from livecells.model.text import strip_ansi, xml_text
from livecells.model.values import (
    PageValues,
    Value,
    cell_seconds,
    format_plain,
    format_ratio,
    page_values,
    parse_reference,
    plain_text,
    split_framework,
)
from livecells.model.vocabulary import CellStatus, ExecuteMode, Origin, WarningSubtype
from livecells.read.collect import plans
from livecells.read.values import PageNames, live_value, live_value_block, page_names
from livecells.render.markup import MATHJAX_IGNORE
from livecells.render.outputs import Outputs, note
from livecells.render.results import matched_results, page_records
from livecells.render.timing import format_date, format_seconds, timing_line
from livecells.sphinx_util import app_of

logger = logging.getLogger(__name__)

MISSING = "??"


@dataclass
class Page:
    """What one page's quotes are resolved against (built once per page and builder)."""

    docname: str
    cells: dict[int, CellPlan] = field(default_factory=dict)
    names: PageNames = field(default_factory=PageNames)
    matched: dict[tuple[int, str], tuple[CellRecord, SessionRecord]] = field(default_factory=dict)
    values: PageValues = field(default_factory=PageValues)
    outputs: Outputs | None = None


@dataclass
class Timed:
    """A cell's run time as prose quotes it, and the session it was measured in."""

    seconds: float
    framework: str
    index: int
    session: SessionRecord


class RenderLiveValues(SphinxPostTransform):
    """Replace the pending quotes of values, times and ratios by their text or output.

    In two passes: this one, before :class:`~livecells.render.cells.RenderLiveCells` (so that
    the page's notebooks quote the values too), takes every quote whose framework the prose
    does not leave open, and warns about the page's names; :class:`RenderLiveValuesInTabs`
    takes the quotes in prose of several frameworks, once each copy is in its framework's panel.
    """

    default_priority = 99  # before RenderLiveCells (100), which writes the notebooks
    early = True
    #: While set: the framework a quote is for, and no warnings (see :meth:`_texts`).
    forced: str | None = None

    def run(self, **kwargs: Any) -> None:
        found = list(self.document.findall(lambda n: isinstance(n, (live_value, live_value_block))))
        if not found:
            return
        self.config_ = get_config(self.env)
        self.builder = app_of(self.env).builder
        self.outcome = outcome_of(self.env)
        self.order = self.config_.framework_names()
        pages: dict[str, Page] = {}
        for node in found:
            docname = node.get("docname") or self.env.docname
            if docname not in pages:
                pages[docname] = self._page(docname)
            page = pages[docname]
            implied = [fw for fw in node.get("implied") or [] if fw in self.order]
            if self.early and len(implied) > 1:
                if isinstance(node, live_value):
                    node["texts"] = self._texts(node, page, implied)
                continue
            if isinstance(node, live_value_block):
                node.replace_self(self._block(node, page))
            else:
                node.replace_self(self._inline(node, page))

    # -- the page ------------------------------------------------------------------------------

    def _page(self, docname: str) -> Page:
        page = Page(docname, outputs=Outputs(self.builder, self.config_, docname))
        plan = plans(self.env).get(docname)
        page.names = page_names(self.env).get(docname, PageNames())
        if plan is None:
            return page
        page.cells = {c.index: c for c in plan.cells}
        sessions = page_records(self.outcome, plan)
        page.matched = matched_results(plan, self.outcome, sessions, app_of(self.env).tags)
        rank = {fw: n for n, fw in enumerate(self.order)}
        results = [
            (index, fw, result, session)
            for (index, fw), (result, session) in sorted(
                page.matched.items(), key=lambda item: (rank.get(item[0][1], len(rank)), item[0][0])
            )
        ]
        page.values = page_values(results, page.names.values)
        for index, framework, message in page.values.problems if self.early else ():
            self._warn(page, page.names.locations.get(index), f"live-cell [{framework}]: {message}")
        return page

    def _texts(self, node: live_value, page: Page, frameworks: list[str]) -> dict[str, str]:
        """A quote in prose of several frameworks, as each framework's notebook quotes it (the
        page's tabs quote it in the later pass, which warns)."""
        texts = {}
        try:
            for framework in frameworks:
                self.forced = framework
                texts[framework] = self._inline(node, page).astext()
        finally:
            self.forced = None
        return texts

    def _warn(self, page: Page, location: Any, message: str) -> None:
        if self.forced is not None:
            return
        logger.warning(message, location=location, type=WARNING_TYPE, subtype=WarningSubtype.VALUE)
        if page.outputs is not None:
            page.outputs.warned()  # the next build writes the page again, and warns again

    def _origin(self, page: Page, framework: str) -> Origin:
        session = self.outcome.session(page.docname, framework)
        return Origin.RUN if session is not None and session.origin == Origin.RUN else Origin.STORE

    def _stale(self, page: Page, framework: str, index: int) -> bool:
        session = self.outcome.session(page.docname, framework)
        return session is not None and index in session.shown.stale

    def _implied(self, node: nodes.Element) -> list[str]:
        """The frameworks of the ``live-text`` around the quote: for prose of several, the one
        whose copy (in its tab panel) holds it."""
        if self.forced is not None:
            return [self.forced]
        implied = [fw for fw in node.get("implied") or [] if fw in self.order]
        parent = node.parent
        while len(implied) > 1 and parent is not None:
            if "livecells-text" in parent.get("classes", []):
                implied = [fw for fw in implied if f"livecells-{fw}" in parent["classes"]] or implied
                break
            parent = parent.parent
        return implied

    def _why_none(self, page: Page, frameworks: list[str]) -> str:
        """Why a session shows no result, as the build said (" (...)", or "")."""
        reasons = []
        for framework in frameworks:
            session = self.outcome.session(page.docname, framework)
            if session is not None and session.origin == Origin.RECORDED:
                reasons.append(f"{framework}: {session.reason or 'not run in this build'}")
        return f" ({'; '.join(reasons)})" if reasons else ""

    def _by_choice(self, page: Page, frameworks: list[str]) -> bool:
        """Whether these sessions show no result because the build or the page runs nothing by
        choice (``livecells_execute = "off"``; ``livecells_execute_exclude``, ``:execute: off``):
        their quotes are missing without a warning, as their cells are not run without one."""
        sessions = [s for s in (self.outcome.session(page.docname, fw) for fw in frameworks) if s is not None]
        if self.outcome.execute != ExecuteMode.OFF and not (sessions and all(s.by_choice for s in sessions)):
            return False
        return all(s.origin == Origin.RECORDED for s in sessions)

    def _failed(self, page: Page, name: str, wanted: list[str]) -> str:
        """Why a ``:value: name`` cell gave no value: it ended without one (an error, a timeout)."""
        reasons = []
        for index, named in page.names.values.items():
            cell = page.cells.get(index)
            if named != name or cell is None:
                continue
            for framework in wanted or cell.frameworks:
                record = page.matched.get((index, framework), (None, None))[0]
                if record is not None and record.status != CellStatus.OK:
                    error = record.error or {}
                    status = getattr(record.status, "value", record.status)
                    said = f"{error.get('ename', status)}: {error.get('evalue', '')}".rstrip(": ")
                    reasons.append(f"the cell that names it ran in {framework} and ended with {said}")
        return f" ({'; '.join(reasons)})" if reasons else ""

    def _recorded(self, page: Page, name: str, wanted: list[str]) -> Value | None:
        """A ``:value:`` cell's recorded output (its text, from the page's source), for a
        framework in which it has no result."""
        for index, named in page.names.values.items():
            cell, text = page.cells.get(index), page.names.recorded.get(index)
            if named != name or cell is None or text is None:
                continue
            for framework in wanted or cell.frameworks:
                if framework in cell.frameworks and (index, framework) not in page.matched:
                    return Value(name, framework, {"text/plain": text}, index, None)
        return None

    # -- looking up ----------------------------------------------------------------------------

    def _value(self, node: nodes.Element, page: Page, target: str, where: str) -> tuple[Value | None, str]:
        """The value a quote names, and its format spec; None (after a warning) if there is none."""
        ref = parse_reference(target, self.order)
        if not ref.name:
            self._warn(page, node, f"{where}: names no value ([framework/]name[:format])")
            return None, ref.spec
        implied = self._implied(node)
        named = page.values.frameworks_of(ref.name)
        wanted = [ref.framework] if ref.framework else implied or [fw for fw in self.order if fw in named]
        found = [page.values.values[(fw, ref.name)] for fw in wanted if (fw, ref.name) in page.values.values]
        if not found:
            recorded = self._recorded(page, ref.name, wanted)
            if recorded is not None:
                return recorded, ref.spec
            if self._by_choice(page, wanted or self.order):
                return None, ref.spec
            scope = f" for {', '.join(wanted)}" if wanted else ""
            others = [fw for fw in named if fw not in wanted]
            hint = f"; {', '.join(others)} names it (write {others[0]}/{ref.name})" if others else ""
            why = self._why_none(page, wanted or self.order) + self._failed(page, ref.name, wanted)
            self._warn(page, node, f"{where}: no value named {ref.name!r} on this page{scope}{hint}{why}")
            return None, ref.spec
        if len(found) > 1:
            self._warn(
                page, node,
                f"{where}: {ref.name!r} is named in {', '.join(v.framework for v in found)}: quoting "
                f"{found[0].framework}'s (write {found[0].framework}/{ref.name} to choose)",
            )
        return found[0], ref.spec

    def _timed(self, node: nodes.Element, page: Page, target: str, where: str) -> Timed | None:
        """A named cell's run time (see :func:`~livecells.model.values.cell_seconds`)."""
        framework, label = split_framework(target, self.order)
        index = page.names.labels.get(nodes.fully_normalize_name(label))
        cell = page.cells.get(index) if index is not None else None
        if cell is None:
            self._warn(page, node, f"{where}: no cell named {label!r} on this page (a cell's :name: names it)")
            return None
        if framework is not None and framework not in cell.frameworks:
            runs = ", ".join(cell.frameworks)
            self._warn(page, node, f"{where}: cell {label!r} does not run in {framework} (it runs in {runs})")
            return None
        implied = [fw for fw in self._implied(node) if fw in cell.frameworks]
        wanted = [framework] if framework else implied or list(cell.frameworks)
        if len(wanted) > 1:
            self._warn(
                page, node,
                f"{where}: cell {label!r} runs in {', '.join(wanted)}: quoting {wanted[0]}'s "
                f"(write {wanted[0]}/{label} to choose)",
            )
        chosen = wanted[0]
        result, session = page.matched.get((cell.index, chosen), (None, None))
        seconds = cell_seconds(result) if result is not None else None
        if result is None and self._by_choice(page, [chosen]):
            return None
        if result is None or session is None or seconds is None:
            why = self._why_none(page, [chosen]) if result is None else " (it has no run time)"
            self._warn(page, node, f"{where}: cell {label!r} [{chosen}] has no result in this build{why}")
            return None
        return Timed(seconds, chosen, cell.index, session)

    # -- making nodes --------------------------------------------------------------------------

    def _device(self, framework: str, provenance: Provenance) -> str:
        """``NVIDIA H200 (torch 2.13.0)``: where a time was measured."""
        spec = self.config_.frameworks.get(framework)
        version = ""
        if spec is not None and provenance.framework_version:
            version = f"{spec.version_module} {provenance.framework_version}"
        if provenance.device and version:
            return f"{provenance.device} ({version})"
        return provenance.device or version

    def _provenance(
        self, page: Page, framework: str, index: int, session: SessionRecord | None
    ) -> tuple[str, Origin]:
        """The line an output of the same origin has under its cell, and that origin (a value
        without a session is the cell's recorded output)."""
        if session is None:
            return "recorded output, from the page's source", Origin.RECORDED
        spec = self.config_.frameworks.get(framework)
        origin = self._origin(page, framework)
        stored = origin == Origin.STORE
        line = timing_line(
            None, session.provenance, spec.version_module if spec else framework,
            label=spec.label if spec else framework, stored=stored,
            stale=stored and self._stale(page, framework, index), host=self.config_.show_host,
        )
        return (line.text if line is not None else ""), origin

    def _inline(self, node: live_value, page: Page) -> nodes.Node:
        kind, target = node.get("kind", "value"), str(node.get("target", ""))
        where = f":live-{kind}:`{target}`"
        made: list[tuple[str, int, SessionRecord | None]] = []  # (framework, cell, session) behind it
        text = None
        if kind == "value":
            value, spec = self._value(node, page, target, where)
            if value is not None:
                made.append((value.framework, value.index, value.session))
                text = self._value_text(node, page, value, spec, where)
        elif kind == "time":
            timed = self._timed(node, page, target, where)
            if timed is not None:
                made.append((timed.framework, timed.index, timed.session))
                device = self._device(timed.framework, timed.session.provenance)
                text = format_seconds(timed.seconds) + (f" on {device}" if device else "")
        else:
            text = self._ratio_text(node, page, target, where, made)
        if text is None:
            return nodes.inline(MISSING, MISSING, classes=["livecells-value", "livecells-value-missing"])
        lines = [self._provenance(page, fw, index, session) for fw, index, session in made]
        origins = {origin for _, origin in lines}
        stored = [session for (_, _, session), (_, origin) in zip(made, lines) if session and origin == Origin.STORE]
        suffix, origin = "", Origin.RUN
        if Origin.RECORDED in origins:
            suffix, origin = " (recorded)", Origin.RECORDED
        elif stored:
            dates = sorted({format_date(s.provenance.date)[:10] for s in stored if s.provenance.date})
            suffix, origin = (f" (stored {', '.join(dates)})" if dates else " (stored)"), Origin.STORE
        return self._text_node(text, suffix, " / ".join(dict.fromkeys(t for t, _ in lines if t)), origin)

    def _value_text(self, node: nodes.Element, page: Page, value: Value, spec: str, where: str) -> str | None:
        plain = plain_text(value.data)
        if plain is None:
            self._warn(
                page, node,
                f"{where}: the value has no text/plain to quote (it has "
                f"{', '.join(sorted(value.data)) or 'nothing'}): quote it with the live-value directive",
            )
            return None
        try:
            return format_plain(plain, spec)
        except ValueError as err:
            self._warn(page, node, f"{where}: {err}; its text is quoted as it is")
            return plain

    def _ratio_text(
        self,
        node: nodes.Element,
        page: Page,
        target: str,
        where: str,
        made: list[tuple[str, int, SessionRecord | None]],
    ) -> str | None:
        parts = re.split(r"\s+/\s+", target.strip())
        if len(parts) != 2 or not all(parts):
            self._warn(page, node, f"{where}: no ratio: write `a / b` (cell names, spaces around /)")
            return None
        timed = {part: self._timed(node, page, part, where) for part in dict.fromkeys(parts)}  # a / a: one warning
        first, second = timed[parts[0]], timed[parts[1]]
        if first is None or second is None:
            return None
        if second.seconds <= 0:
            self._warn(page, node, f"{where}: cell {parts[1]!r} took no measurable time: no ratio")
            return None
        made.extend([(t.framework, t.index, t.session) for t in (first, second)])
        devices = [self._device(t.framework, t.session.provenance) for t in (first, second)]
        ratio = format_ratio(first.seconds / second.seconds) + "×"
        if devices[0] == devices[1]:
            return ratio + (f" on {devices[0]}" if devices[0] else "")
        return f"{ratio} ({devices[0] or '?'} / {devices[1] or '?'})"

    def _text_node(self, text: str, suffix: str, title: str, origin: Origin) -> nodes.Node:
        """The quote: text, for HTML in a span whose title says where it was made."""
        text, suffix, title = (xml_text(strip_ansi(t)) for t in (text, suffix, title))
        classes = ["livecells-value", origin.css_class]
        if self.builder.format == "html":
            classes += MATHJAX_IGNORE
            note_ = f'<span class="livecells-value-note">{html.escape(suffix)}</span>' if suffix else ""
            markup = f'<span class="{" ".join(classes)}" title="{html.escape(title)}">{html.escape(text)}{note_}</span>'
            return nodes.raw("", markup, format="html")
        return nodes.inline("", text + suffix, classes=classes)

    def _block(self, node: live_value_block, page: Page) -> nodes.Node:
        target = str(node.get("target", ""))
        box = nodes.container(classes=["livecells-value-block", *MATHJAX_IGNORE, *node.get("classes", [])])
        box.source, box.line = node.source, node.line
        where = f"live-value {target}"
        value, spec = self._value(node, page, target, where)
        if value is not None and spec:
            self._warn(page, node, f"{where}: the directive shows the whole output; a format spec is for the role")
        if value is None or page.outputs is None:
            box += note(f"[no value {target}]", "livecells-value-missing")
            return box
        output = {"output_type": "display_data", "data": value.data, "metadata": {}}
        box.extend(page.outputs.render_one(node, output, 0, value.framework))
        text, origin = self._provenance(page, value.framework, value.index, value.session)
        if text:
            box += note(text, "livecells-meta", origin.css_class)
        return box


class RenderLiveValuesInTabs(RenderLiveValues):
    """The quotes left: in prose of several frameworks, each copy in its framework's panel."""

    default_priority = 150  # after RenderLiveCells (100), before sphinx-design's tabs (200)
    early = False


def setup_values_render(app: Sphinx) -> None:
    app.add_post_transform(RenderLiveValues)
    app.add_post_transform(RenderLiveValuesInTabs)
