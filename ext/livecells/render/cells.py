"""Render stage: a post-transform that puts each cell's best known output into the page.

Until here the doctree is the same for every builder. For each :class:`live_group` this makes a
sphinx-design tab set (one tab per framework, in configured order, sync group ``framework``, sync
id = the framework's name) or, for LaTeX, the chosen framework's cells one after another. A
group's framework prose (``live-text``) goes into its framework's panel, in document order. Each
cell shows its code, then its output — live from this build, else stored (with its date and
device), else recorded in the source (marked so) — and a short timing line. Outputs are Jupyter
mime bundles; each builder gets the representation it can show.
"""

from __future__ import annotations

import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.images import guess_mimetype
from sphinx_design.shared import create_component

from livecells.config import get_config
from livecells.model.mime import IMAGE_TYPES
from livecells.model.records import CellRecord, SessionRecord, outcome_of
from livecells.model.values import hidden
from livecells.model.vocabulary import CellStatus, Origin
from livecells.read.collect import plans
from livecells.read.nodes import ALL, live_cell, live_group, live_recorded, live_settings, live_text
from livecells.render.display import (
    code_block,
    collapsed,
    figure_number,
    output_figure,
    place_code_below,
    setup_display,
    sized_images,
)
from livecells.render.markup import MATHJAX_IGNORE
from livecells.render.notebooks import download_links
from livecells.render.outputs import Outputs, note
from livecells.render.results import groups_by_page, matched_results, page_records
from livecells.render.timing import devices_line, no_result_line, timing_line
from livecells.sphinx_util import app_of

logger = logging.getLogger(__name__)


@dataclass
class Shown:
    """The output one cell shows for one framework, and where it came from."""

    origin: Origin  # recorded: no result, the page's recorded outputs (if any)
    result: CellRecord | None = None
    session: SessionRecord | None = None


class RenderLiveCells(SphinxPostTransform):
    """Replace live_group/live_cell nodes with code, outputs and tabs for the current builder."""

    default_priority = 100  # before sphinx-design's tab transform (200)

    def run(self, **kwargs: Any) -> None:
        for node in list(self.document.findall(live_settings)):
            node.parent.remove(node)
        groups = list(self.document.findall(live_group))
        if not groups:
            return
        self.config_ = get_config(self.env)
        self.format = _app(self).builder.format
        self.outcome = outcome_of(self.env)
        # LaTeX and singlehtml assemble many pages into one tree: each page uses its own plan.
        for root, docname, page_groups in groups_by_page(self.document, groups, self.env.docname):
            self.docname = docname
            plan = plans(self.env).get(docname)
            self.cell_plans = {c.index: c for c in plan.cells} if plan is not None else {}
            self.outputs = Outputs(_app(self).builder, self.config_, self.env.docname)
            # The page's store file is read and matched once, for the page and its notebooks.
            sessions = page_records(self.outcome, plan) if plan is not None else {}
            matched = matched_results(plan, self.outcome, sessions, _app(self).tags) if plan is not None else {}
            self.shown = {
                (index, fw): Shown(self._origin(docname, fw), result, session)
                for (index, fw), (result, session) in matched.items()
            }
            links = download_links(_app(self), root, docname, sessions, matched)
            if links is not None:
                page_groups[0].parent.insert(page_groups[0].parent.index(page_groups[0]), links)
            for group in page_groups:
                group.replace_self(self._render_group(group))

    def _origin(self, docname: str, framework: str) -> Origin:
        """Where a result shown comes from (this build, or the store), as the build's outcome says."""
        session = self.outcome.session(docname, framework)
        return Origin.RUN if session is not None and session.origin == Origin.RUN else Origin.STORE

    # -- structure -----------------------------------------------------------------------------

    def _frameworks_of(self, member: nodes.Element) -> list[str]:
        """The frameworks a cell runs in (``all`` resolved, from the page's plan), or that a
        piece of prose is for."""
        if isinstance(member, live_text):
            return list(member["frameworks"])
        plan_cell = self.cell_plans.get(member["index"])
        return list(plan_cell.frameworks) if plan_cell else []

    def _render_group(self, group: live_group) -> list[nodes.Node]:
        order = self.config_.framework_names()
        members = [m for m in group.children if isinstance(m, (live_cell, live_text))]
        cells = [m for m in members if isinstance(m, live_cell)]
        if cells and all(ALL in c["frameworks"] for c in cells):
            out: list[nodes.Node] = []
            for cell in cells:
                out.extend(self._render_all_cell(cell))
            return out
        present = [fw for fw in order if any(fw in self._frameworks_of(m) for m in members)]
        orphans = [c for c in cells if not self._frameworks_of(c)]
        if orphans:
            # Cells naming no known framework (warned about while reading): code and a note.
            out = []
            for cell in orphans:
                box = self._cell_container(cell, None)
                names = ", ".join(cell.get("unknown", [])) or "none"
                box += note(f"not run: unknown framework ({names})", "livecells-not-run")
                out.append(box)
            if len(orphans) == len(members):
                return out
            return [*out, *self._render_group_known(group, [m for m in members if m not in orphans], present)]
        return self._render_group_known(group, members, present)

    def _render_member(self, member: nodes.Element, framework: str, described: set[str]) -> list[nodes.Node]:
        if isinstance(member, live_text):
            return [self._render_text(member, framework)]
        return self._render_cell(member, framework, described)

    def _render_group_known(
        self, group: live_group, members: list[nodes.Element], present: list[str]
    ) -> list[nodes.Node]:
        described: set[str] = set()  # frameworks whose device and version a line named (once per tab)
        if self.format == "latex":
            wanted = [fw for fw in self.config_.latex_frameworks if fw in present]
            out = []
            for framework in wanted:
                if len(wanted) > 1:
                    out.append(
                        nodes.rubric("", self.config_.frameworks[framework].label, classes=["livecells-label"])
                    )
                for member in members:
                    if framework in self._frameworks_of(member):
                        out.extend(self._render_member(member, framework, described))
            return out
        tab_set = _tab_set()
        tab_set.source, tab_set.line = group.source, group.line
        for framework in present:
            children: list[nodes.Node] = []
            for member in members:
                if framework in self._frameworks_of(member):
                    children.extend(self._render_member(member, framework, described))
            item = self._tab_item(framework, children)
            item.source, item.line = group.source, group.line
            tab_set += item
        # Targets (:name:) stay reachable: sphinx-design keeps non-item children of a tab set.
        return [tab_set]

    def _tab_item(self, framework: str, children: Sequence[nodes.Node]) -> nodes.container:
        """One framework's tab, as sphinx-design's tab transform reads it (synced by framework)."""
        label_text = self.config_.frameworks[framework].label
        label = nodes.rubric(label_text, label_text, classes=["sd-tab-label"])
        label["sync_id"] = framework
        label["sync_group"] = "framework"
        content = create_component("tab-content", classes=["sd-tab-content"], children=children)
        return create_component("tab-item", classes=["sd-tab-item"], children=[label, content])

    def _render_text(self, text: live_text, framework: str) -> nodes.container:
        """The prose itself the first time (its labels and equations stay where references
        point), a copy without ids for any further framework it is for."""
        box = nodes.container(classes=["livecells-text", f"livecells-{framework}", *text.get("classes", [])])
        box.source, box.line = text.source, text.line
        if text.get("rendered"):
            for child in text.children:
                copy = child.deepcopy()
                for element in copy.findall(nodes.Element):
                    element["ids"] = []
                box += copy
        else:
            text["rendered"] = True
            box.extend(list(text.children))
        return box

    def _cell_container(self, cell: live_cell, framework: str | None) -> nodes.container:
        classes = ["livecells-cell", *cell.get("classes", [])]
        if framework:
            classes.append(f"livecells-{framework}")
        # What a cell shows is no math for MathJax (a stored device name, a note), but for the
        # outputs and math nodes that checked_math marks.
        classes += MATHJAX_IGNORE
        box = nodes.container(classes=classes)
        box.source, box.line = cell.source, cell.line
        box["ids"] = list(cell["ids"])
        cell["ids"] = []
        if not cell["hide_code"]:
            box.extend(collapsed([code_block(cell)], cell.get("collapse_code"), "code", self.format))
        return box

    def _shown_outputs(
        self, cell: live_cell, shown: list[nodes.Node], framework: str, result: CellRecord | None
    ) -> list[nodes.Node]:
        """A cell's outputs as its display options ask: images sized, in a figure, collapsed."""
        sized_images(shown, cell, self.config_.image_options)
        # A result that shows nothing (not a cell left unrun by choice: livecells_execute = "off").
        if not shown and result is not None and any(isinstance(child, nodes.figure) for child in cell.children):
            said = ":figure-caption:/:figure-name: the cell shows no output: a figure of its caption alone"
            self.outputs.warn(cell, framework, said)
        number = figure_number(self.env, self.docname, cell, self.config)
        shown = output_figure(cell, shown, self.format, number, framework)
        return collapsed(shown, cell.get("collapse_output"), "output", self.format)

    def _render_cell(self, cell: live_cell, framework: str, described: set[str]) -> list[nodes.Node]:
        box = self._cell_container(cell, framework)
        if self.format == "latex":
            # Each framework prints its own copy; the ids belong to the first.
            cell["ids"] = []
        shown = self.shown.get((cell["index"], framework), Shown(Origin.RECORDED))
        if not cell["hide_output"]:
            outputs = self._fit_recorded(self._outputs(cell, shown, framework))
            box.extend(self._shown_outputs(cell, outputs, framework, shown.result))
        if cell.get("code_below"):
            place_code_below(box)
        line = self._timing_line(cell, shown, framework, described)
        if line is not None:
            box += line
        box.extend(self._devices_line(cell, shown, framework))
        return [box]

    def _render_all_cell(self, cell: live_cell) -> list[nodes.Node]:
        box = self._cell_container(cell, None)
        frameworks = self._frameworks_of(cell)
        if self.format == "latex":
            frameworks = [fw for fw in frameworks if fw in self.config_.latex_frameworks] or frameworks[:1]
        shown = {fw: self.shown.get((cell["index"], fw), Shown(Origin.RECORDED)) for fw in frameworks}
        signatures = {fw: _signature(s.result) for fw, s in shown.items()}
        if not cell["hide_output"]:
            if len(set(signatures.values())) <= 1 or self.format == "latex":
                first = frameworks[0] if frameworks else ""
                chosen = shown.get(first, Shown(Origin.RECORDED))
                outputs = self._fit_recorded(self._outputs(cell, chosen, first))
                box.extend(self._shown_outputs(cell, outputs, first, chosen.result))
            else:
                # The frameworks disagree: show each one's output, in synced tabs.
                tab_set = _tab_set()
                for framework in frameworks:
                    outputs = self._fit_recorded(self._outputs(cell, shown[framework], framework))
                    tab_set += self._tab_item(framework, outputs)
                box.extend(self._shown_outputs(cell, [tab_set], ALL, None))
        if cell.get("code_below"):
            place_code_below(box)
        described: set[str] = set()  # an `all` cell is a group of its own
        for framework in frameworks:
            line = self._timing_line(cell, shown[framework], framework, described, prefix=len(frameworks) > 1)
            if line is not None:
                box += line
            box.extend(self._devices_line(cell, shown[framework], framework))
        return [box]

    def _fit_recorded(self, shown: list[nodes.Node]) -> list[nodes.Node]:
        """A recorded figure in a format the builder cannot show (an SVG in LaTeX without an
        image converter, any image in plain text) becomes a note naming its file."""
        supported = set(getattr(_app(self).builder, "supported_image_types", []))
        out = []
        for node in shown:
            recorded = isinstance(node, nodes.Element) and "livecells-recorded" in node["classes"]
            image = next(iter(node.findall(nodes.image)), None) if recorded else None
            if image is not None and not _image_types(image) & supported:
                name = posixpath.basename(image["uri"])
                out.append(note(f"recorded figure {name}: not shown in this format", "livecells-recorded"))
                continue
            out.append(node)
        return out

    # -- outputs -------------------------------------------------------------------------------

    def _outputs(self, cell: live_cell, shown: Shown, framework: str) -> list[nodes.Node]:
        if shown.origin == Origin.RECORDED or shown.result is None:
            return _recorded_blocks(cell)
        result = shown.result
        out = self.outputs.render(cell, result, framework)
        if shown.origin == Origin.STORE and out and self.format == "html":
            # Marked as stored by an earlier build (the stylesheet sets them apart).
            out = [nodes.container("", *out, classes=["livecells-from-store"])]
        if result.status == CellStatus.NOT_RUN:
            out.append(note(result.evalue or "not run", "livecells-not-run"))
            out.extend(_recorded_blocks(cell))
        elif result.status in {CellStatus.TIMEOUT, CellStatus.DIED}:
            out.append(self.outputs.text(f"{result.ename or 'Error'}: {result.evalue}", ["livecells-error"]))
        return out

    # -- the timing line -----------------------------------------------------------------------

    def _timing_line(
        self, cell: live_cell, shown: Shown, framework: str, described: set[str], prefix: bool = False
    ) -> nodes.Node | None:
        """The line under the cell (see :mod:`.timing`). ``described``: the frameworks whose
        device and version an earlier line of the same tab named; this line adds its own."""
        session = self.outcome.session(self.docname, framework)
        if shown.origin == Origin.RECORDED:
            recorded = not cell["hide_output"] and any(isinstance(n, live_recorded) for n in cell.children)
            line = no_result_line(session.reason if session is not None else "", recorded)
        elif shown.session is None or shown.result is None:
            return None
        else:
            spec = self.config_.frameworks[framework]
            stored = shown.origin == Origin.STORE
            line = timing_line(
                None if cell["no_timing"] else shown.result.time,
                shown.session.provenance,
                spec.version_module,
                label=spec.label if prefix else "",
                environment=framework not in described,
                stored=stored,
                stale=stored and session is not None and cell["index"] in session.shown.stale,
                host=self.config_.show_host,
                samples=shown.result.samples,
                floor=shown.session.floor,
            )
            described.add(framework)
        return None if line is None else note(line.text, *line.classes)

    def _devices_line(self, cell: live_cell, shown: Shown, framework: str) -> list[nodes.Node]:
        """``:timings: all-devices``: the cell's time on each device the store holds for it."""
        if not cell.get("all_devices") or shown.session is None or shown.result is None:
            return []
        line = devices_line(
            shown.session.all_devices(),
            shown.result.index,
            shown.result.code_sha,
            self.config_.frameworks[framework].version_module,
            first=shown.session.provenance.device,
        )
        return [] if line is None else [note(line.text, *line.classes)]


def _app(transform: SphinxPostTransform) -> Sphinx:
    return app_of(transform.env)


def _recorded_blocks(cell: live_cell) -> list[nodes.Node]:
    """Copies of the cell's recorded outputs, marked as recorded: text blocks never highlighted,
    a figure as its image (a figure node would float away from its cell in LaTeX)."""
    blocks: list[nodes.Node] = []
    for node in cell.children:
        if isinstance(node, live_recorded):
            for block in node.children:
                copy = block.deepcopy()
                if isinstance(copy, nodes.figure):
                    image = copy[0]
                    image["classes"] = [*image.get("classes", []), "livecells-image"]
                    image.setdefault("alt", "recorded output")
                    classes = ["livecells-output", "livecells-figure", "livecells-recorded"]
                    blocks.append(nodes.container("", image, classes=classes))
                    continue
                copy["classes"] = [*copy.get("classes", []), "livecells-output", "livecells-recorded"]
                if isinstance(copy, nodes.literal_block):
                    copy["language"] = "none"
                blocks.append(copy)
    return blocks


def _image_types(image: nodes.image) -> set[str]:
    """The mime types an image node offers (after any image converter has run)."""
    candidates = image.get("candidates", {})
    types = set(candidates) - {"*", "?"}
    if "*" in candidates:
        types.add(guess_mimetype(image["uri"]) or "")
    if "?" in candidates:
        types.update(IMAGE_TYPES)  # a remote image: the writer links it
    return types


def _signature(result: CellRecord | None) -> str:
    if result is None:
        return ""
    kept = [
        {k: v for k, v in o.items() if k not in {"execution_count", "metadata"}}
        for o in result.outputs
        if not hidden(o)
    ]
    return repr(kept)


def _tab_set() -> nodes.container:
    return create_component("tab-set", classes=["sd-tab-set", "livecells-tabs"])


def setup_render(app: Sphinx) -> None:
    app.add_post_transform(RenderLiveCells)
    app.add_css_file("livecells.css")
    setup_display(app)
