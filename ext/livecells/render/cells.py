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

import base64
import hashlib
import io
import json
import posixpath
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform
from sphinx.util import logging
from sphinx.util.images import guess_mimetype
from sphinx.util.osutil import relative_uri

from livecells.config import WARNING_TYPE, app_of, get_config
from livecells.read.directives import ALL, live_cell, live_group, live_recorded, live_settings, live_text
from livecells.render.ansi import ansi_to_html
from livecells.model.text import strip_ansi
from livecells.render.notebooks import download_links
from livecells.model.mime import IMAGE_TYPES, MAX_IMAGE_BYTES
from livecells.read.collect import plans
from livecells.model.records import CellRecord, SessionRecord, outcome_of
from livecells.render.results import format_seconds, groups_by_page, matched_results, page_records
from livecells.store import Invalid, check_output, shown_output
from livecells.model.text import css_name, one_line
from livecells.model.streams import shown_outputs

logger = logging.getLogger(__name__)



def _mime_order(builder_format: str, allow_html: bool) -> list[str]:
    """The representations a builder can show, best first (JupyterLab's order where it has one)."""
    if builder_format == "html":
        first = ["text/html"] if allow_html else []
        return [
            *first, "text/markdown", "text/latex", "image/svg+xml", "image/png", "image/jpeg",
            "image/gif", "image/webp", "application/json", "text/plain",
            *([] if allow_html else ["text/html"]),
        ]
    if builder_format == "latex":
        return ["text/markdown", "text/latex", "image/png", "image/jpeg", "application/json", "text/plain"]
    return ["text/markdown", "text/latex", "application/json", "text/plain"]


@dataclass
class Shown:
    """The output one cell shows for one framework, and where it came from."""

    source: str  # "live", "stored", "recorded", "none"
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
        self.config_ = get_config(_app(self))
        self.format = _app(self).builder.format
        self.meta_done: set[tuple[int, str]] = set()
        self.outcome = outcome_of(self.env)
        # LaTeX and singlehtml assemble many pages into one tree: each page uses its own plan.
        for root, docname, page_groups in groups_by_page(self.document, groups, self.env.docname):
            self.docname = docname
            plan = plans(self.env).get(docname)
            self.cell_plans = {c.index: c for c in plan.cells} if plan is not None else {}
            # The page's store file is read and matched once, for the page and its notebooks.
            sessions = page_records(self.outcome, docname) if plan is not None else {}
            matched = matched_results(plan, sessions, _app(self).tags) if plan is not None else {}
            self.shown = {
                key: Shown("live" if session.run_id == self.outcome.run_id else "stored", result, session)
                for key, (result, session) in matched.items()
            }
            links = download_links(_app(self), root, docname, sessions, matched)
            if links is not None:
                page_groups[0].parent.insert(page_groups[0].parent.index(page_groups[0]), links)
            for group in page_groups:
                group.replace_self(self._render_group(group))

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
                box += _note(f"not run: unknown framework ({names})", "livecells-not-run")
                out.append(box)
            if len(orphans) == len(members):
                return out
            return [*out, *self._render_group_known(group, [m for m in members if m not in orphans], present)]
        return self._render_group_known(group, members, present)

    def _render_member(self, member: nodes.Element, framework: str) -> list[nodes.Node]:
        if isinstance(member, live_text):
            return [self._render_text(member, framework)]
        return self._render_cell(member, framework)

    def _render_group_known(
        self, group: live_group, members: list[nodes.Element], present: list[str]
    ) -> list[nodes.Node]:
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
                        out.extend(self._render_member(member, framework))
            return out
        tab_set = _component("tab-set", classes=["sd-tab-set", "livecells-tabs"])
        tab_set.source, tab_set.line = group.source, group.line
        for framework in present:
            spec = self.config_.frameworks[framework]
            content = _component("tab-content", classes=["sd-tab-content"])
            for member in members:
                if framework in self._frameworks_of(member):
                    content.extend(self._render_member(member, framework))
            label = nodes.rubric(spec.label, spec.label, classes=["sd-tab-label"])
            label["sync_id"] = framework
            label["sync_group"] = "framework"
            item = _component("tab-item", classes=["sd-tab-item"], children=[label, content])
            item.source, item.line = group.source, group.line
            tab_set += item
        # Targets (:name:) stay reachable: sphinx-design keeps non-item children of a tab set.
        return [tab_set]

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
        box = nodes.container(classes=classes)
        box.source, box.line = cell.source, cell.line
        box["ids"] = list(cell["ids"])
        cell["ids"] = []
        if not cell["hide_code"]:
            code = nodes.literal_block(cell["code"], cell["code"], classes=["livecells-input"])
            code["language"] = "ipython3"  # IPython's lexer: !cmd, %magic and %%cell magics
            box += code
        return box

    def _render_cell(self, cell: live_cell, framework: str) -> list[nodes.Node]:
        box = self._cell_container(cell, framework)
        if self.format == "latex":
            # Each framework prints its own copy; the ids belong to the first.
            cell["ids"] = []
        shown = self.shown.get((cell["index"], framework), Shown("none"))
        if not cell["hide_output"]:
            box.extend(self._fit_recorded(self._outputs(cell, shown, framework)))
        meta = self._meta_line(cell, shown, framework)
        if meta is not None:
            box += meta
        return [box]

    def _render_all_cell(self, cell: live_cell) -> list[nodes.Node]:
        box = self._cell_container(cell, None)
        frameworks = self._frameworks_of(cell)
        if self.format == "latex":
            frameworks = [fw for fw in frameworks if fw in self.config_.latex_frameworks] or frameworks[:1]
        shown = {fw: self.shown.get((cell["index"], fw), Shown("none")) for fw in frameworks}
        signatures = {fw: _signature(s.result) for fw, s in shown.items()}
        if not cell["hide_output"]:
            if len(set(signatures.values())) <= 1 or self.format == "latex":
                first = frameworks[0] if frameworks else ""
                box.extend(self._fit_recorded(self._outputs(cell, shown.get(first, Shown("none")), first)))
            else:
                # The frameworks disagree: show each one's output, in synced tabs.
                tab_set = _component("tab-set", classes=["sd-tab-set", "livecells-tabs"])
                for framework in frameworks:
                    spec = self.config_.frameworks[framework]
                    content = _component(
                        "tab-content", classes=["sd-tab-content"],
                        children=self._fit_recorded(self._outputs(cell, shown[framework], framework)),
                    )
                    label = nodes.rubric(spec.label, spec.label, classes=["sd-tab-label"])
                    label["sync_id"] = framework
                    label["sync_group"] = "framework"
                    tab_set += _component("tab-item", classes=["sd-tab-item"], children=[label, content])
                box += tab_set
        for framework in frameworks:
            meta = self._meta_line(cell, shown[framework], framework, prefix=len(frameworks) > 1)
            if meta is not None:
                box += meta
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
                out.append(_note(f"recorded figure {name}: not shown in this format", "livecells-recorded"))
                continue
            out.append(node)
        return out

    # -- outputs -------------------------------------------------------------------------------

    def _outputs(self, cell: live_cell, shown: Shown, framework: str) -> list[nodes.Node]:
        if shown.source == "none" or shown.result is None:
            return _recorded_blocks(cell)
        result = shown.result
        out: list[nodes.Node] = []
        # Consecutive streams of one name are one text, as in JupyterLab's output area; an
        # output of the wrong shape is left out where it stands, with a warning.
        run: list[dict[str, Any]] = []
        for position, output in enumerate(result.outputs):
            try:
                check_output(output, f"output {position + 1}")
            except Invalid as err:
                out.extend(self._shown_run(cell, run, framework))
                run = []
                out.extend(self._left_out(cell, framework, str(err)))
                continue
            run.append(output)
        out.extend(self._shown_run(cell, run, framework))
        if result.status == "not-run":
            out.append(_note(result.evalue or "not run", "livecells-not-run"))
            out.extend(_recorded_blocks(cell))
        elif result.status in {"timeout", "died"}:
            out.append(self._text(f"{result.ename or 'Error'}: {result.evalue}", ["livecells-error"]))
        return out

    def _isolated_output(
        self, cell: live_cell, output: Any, position: int, framework: str
    ) -> list[nodes.Node]:
        """One output's nodes; one that cannot be shown is a located warning and a note."""
        try:
            output = shown_output(output, self.config_.output_limit, f"output {position + 1}")
            name = output.get("name")
            if output["output_type"] == "stream" and css_name(name) != name:
                # The name goes into a class attribute: a cell can set sys.stdout.name.
                shown_as = css_name(name)
                why = f"a stream named {one_line(repr(name), 60)} is shown as {shown_as!r}"
                _output_warning(cell, framework, why)
                output = {**output, "name": shown_as}
            return self._output_nodes(cell, output)
        except Exception as err:  # noqa: BLE001 - one output never ends the build
            why = str(err) if isinstance(err, Invalid) else f"{type(err).__name__}: {err}"
            return self._left_out(cell, framework, why)

    def _shown_run(self, cell: live_cell, run: list[dict[str, Any]], framework: str) -> list[nodes.Node]:
        """The nodes of a run of well-formed outputs, streams joined as JupyterLab joins them."""
        out: list[nodes.Node] = []
        for position, output in enumerate(shown_outputs(run)):
            out.extend(self._isolated_output(cell, output, position, framework))
        return out

    def _left_out(self, cell: live_cell, framework: str, why: str) -> list[nodes.Node]:
        why = one_line(why, 200)
        _output_warning(cell, framework, f"an output was left out: {why}")
        return [_note(f"[an output was left out: {why}]", "livecells-refused")]

    def _output_nodes(self, cell: live_cell, output: dict[str, Any]) -> list[nodes.Node]:
        kind = output.get("output_type")
        if kind == "stream":
            name = output.get("name")
            if name == "stderr" and cell.get("stderr") == "hide":
                return []
            text = str(output.get("text", ""))  # already as JupyterLab shows it (shown_outputs)
            if not text:
                return []
            classes = ["livecells-stream", f"livecells-{css_name(name)}"]  # safe: see _isolated_output
            result: list[nodes.Node] = [self._text(text, classes)]
            if output.get("truncated"):
                result.append(
                    _note(
                        f"Output truncated at {self.config_.output_limit:,} characters "
                        "(livecells_output_limit).",
                        "livecells-truncated",
                    )
                )
            return result
        if kind == "error":
            traceback = "\n".join(str(t) for t in output.get("traceback", []))
            if not traceback:
                traceback = f"{output.get('ename')}: {output.get('evalue')}"
            return [self._text(traceback, ["livecells-error"])]
        if kind in {"execute_result", "display_data"}:
            data = output.get("data")
            return self._mime_nodes(cell, data if isinstance(data, dict) else {})
        return []

    def _text(self, text: str, classes: Sequence[str]) -> nodes.Element:
        """A preformatted output block; HTML keeps ANSI colours as escaped spans, others drop them.

        For HTML the markup is what Sphinx writes for an unhighlighted block, made here: output is
        plain text, and a pygments pass per output block costs more than the rest of the render.
        The text's trailing newlines are kept, so that the page shows the blank lines JupyterLab
        shows (a browser shows no line after a ``<pre>``'s last newline, and drops one newline
        right after ``<pre>``, which the markup puts back).
        """
        if self.format == "html":
            names = " ".join(["output", "livecells-output", *classes, "highlight-none", "notranslate"])
            lead = "\n" if text.startswith("\n") else ""
            markup = (
                f'<div class="{names}"><div class="highlight"><pre>{lead}{ansi_to_html(text)}</pre></div></div>\n'
            )
            return nodes.raw("", markup, format="html")
        plain = strip_ansi(text)
        return _text_block(plain[:-1] if plain.endswith("\n") else plain, classes)

    def _mime_nodes(self, cell: live_cell, data: dict[str, Any]) -> list[nodes.Node]:
        for mime in _mime_order(self.format, self.config_.allow_html):
            if mime not in data:
                continue
            value = data[mime]
            if isinstance(value, list) and mime != "application/json":
                value = "".join(str(v) for v in value)
            try:
                rendered = self._mime_node(mime, value)
            except (ValueError, TypeError) as err:  # binascii.Error is a ValueError
                logger.warning(
                    f"a {mime} output could not be shown ({type(err).__name__}: {err}); "
                    "the next representation is shown instead",
                    type=WARNING_TYPE, subtype="output", location=cell,
                )
                continue
            if rendered:
                return rendered
        return []

    def _mime_node(self, mime: str, value: Any) -> list[nodes.Node]:
        """One representation as nodes for this builder ([] when it has nothing to show)."""
        if mime == "text/html":
            if not isinstance(value, str):
                raise TypeError("text/html is not a string")
            if not self.config_.allow_html or self.format != "html":
                return [self._text(value, ["livecells-result"])]
            markup = f'<div class="output livecells-output livecells-html">\n{value}\n</div>\n'
            return [nodes.raw("", markup, format="html")]
        if mime in IMAGE_TYPES:
            if not isinstance(value, str):
                raise TypeError(f"{mime} is not a string")
            node = self._image(mime, value)
            return [node] if node is not None else []
        if mime == "text/markdown":
            box = _output_box(markdown_nodes(str(value), self.format, self.config_.allow_html), "livecells-markdown")
            return [_checked_math(box, self.format)]
        if mime == "text/latex":
            return [_checked_math(_output_box(latex_nodes(str(value)), "livecells-latex"), self.format)]
        if mime == "application/json":
            if isinstance(value, str):
                value = json.loads(value)
            text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
            return [self._text(text, ["livecells-result", "livecells-json"])]
        return [self._text(str(value), ["livecells-result"])]

    def _image(self, mime: str, value: str) -> nodes.Node | None:
        raw = value.encode() if mime == "image/svg+xml" else base64.b64decode(value, validate=False)
        if len(raw) > MAX_IMAGE_BYTES:
            return _note(
                f"An image of {len(raw) / 2**20:.1f} MiB was left out (limit "
                f"{MAX_IMAGE_BYTES // 2**20} MiB).",
                "livecells-refused",
            )
        name = f"livecells-{hashlib.sha256(raw).hexdigest()[:20]}{IMAGE_TYPES[mime]}"
        builder = _app(self).builder
        if self.format == "latex":
            target = Path(builder.outdir) / name
            uri = name
        else:
            imagedir = getattr(builder, "imagedir", "_images")
            target = Path(builder.outdir) / imagedir / name
            try:
                base = builder.get_target_uri(self.env.docname)
            except Exception:
                base = self.env.docname
            uri = relative_uri(base, f"{imagedir}/{name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_bytes(raw)
        image = nodes.image(uri=uri, candidates={"?": uri}, classes=["livecells-image"], alt="output")
        return nodes.container("", image, classes=["livecells-output", "livecells-figure"])

    # -- the timing and provenance line -----------------------------------------------------------

    def _meta_line(
        self, cell: live_cell, shown: Shown, framework: str, prefix: bool = False
    ) -> nodes.Node | None:
        spec = self.config_.frameworks[framework]
        if shown.source == "none":
            recorded = any(isinstance(n, live_recorded) for n in cell.children)
            outcome = self.outcome.session(self.docname, framework)
            reason = outcome.reason if outcome is not None else ""
            if recorded and not cell["hide_output"]:
                why = f"not run: {reason}" if reason else "not run in this build"
                return _note(f"recorded output, from the page's source ({why})", "livecells-meta")
            if reason:
                return _note(f"not run: {reason}", "livecells-not-run")
            return None
        if shown.session is None or shown.result is None:
            return None
        provenance = shown.session.provenance
        parts = []
        if prefix:
            parts.append(spec.label)
        if shown.result.time is not None and not cell["no_timing"]:
            parts.append(format_seconds(shown.result.time))
        key = (id(cell.parent), framework)
        if key not in self.meta_done or shown.source == "stored":
            self.meta_done.add(key)
            if provenance.device:
                parts.append(provenance.device)
            version = provenance.framework_version
            if version:
                parts.append(f"{spec.version_module} {version}")
        if shown.source == "stored":
            when = provenance.date.replace("T", " ").replace("+00:00", " UTC")
            host = provenance.host
            parts.append(f"stored result from {when}" + (f" on {host}" if host else ""))
        if not parts:
            return None
        classes = ["livecells-meta", f"livecells-{shown.source}"]
        return _note(" · ".join(parts), *classes)


def _app(transform: SphinxPostTransform) -> Sphinx:
    return app_of(transform.env)


def _output_warning(cell: live_cell, framework: str, message: str) -> None:
    logger.warning(
        f"live-cell [{framework}]: {message}", type=WARNING_TYPE, subtype="output",
        location=f"{cell.source}:{cell.line}",
    )


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
    ]
    return repr(kept)


def _output_box(children: list[nodes.Node], kind: str) -> nodes.container:
    return nodes.container("", *children, classes=["output", "livecells-output", "livecells-result", kind])


# Math in a text/latex output, as MathJax finds it in JupyterLab: display math, environments and
# inline math; the text around it is text.
_LATEX_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$|\\\[(?P<bd>.+?)\\\]|(?P<env>\\begin\{(?P<name>[A-Za-z]+\*?)\}.+?\\end\{(?P=name)\})"
    r"|(?<![\\$])\$(?P<di>[^$]+?)\$|\\\((?P<bi>.+?)\\\)",
    re.DOTALL,
)


# TeX that reads or writes files, runs commands, or changes how TeX reads what follows: math
# from a cell never carries it into a .tex file (MathJax, in HTML, has no such primitives).
_UNSAFE_TEX = re.compile(
    r"\\(?:input|include|InputIfFileExists|IfFileExists|openin|openout|read|readline|write|"
    r"immediate|newwrite|newread|special|catcode|lccode|uccode|def|edef|gdef|xdef|let|futurelet|"
    r"csname|expandafter|noexpand|makeatletter|makeatother|usepackage|RequirePackage|"
    r"documentclass|directlua|luaexec|pdfshellescape|ShellEscape|jobname|typeout|message|"
    r"errmessage|endinput|end(?!\s*\{))(?![A-Za-z])|\^\^|\\[A-Za-z]*@"
)


def _checked_math(box: nodes.Element, builder_format: str) -> nodes.Element:
    """``box`` unchanged, unless it is for LaTeX and its math holds TeX that is not math."""
    if builder_format == "latex":
        for node in box.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
            found = _UNSAFE_TEX.search(node.astext())
            if found:
                raise ValueError(f"its math holds {found.group(0)!r}, which LaTeX output never carries")
    return box


def latex_nodes(text: str) -> list[nodes.Node]:
    """A text/latex output as math nodes (MathJax in HTML, native math in LaTeX) and text."""
    out: list[nodes.Node] = []
    para = nodes.paragraph()
    at = 0
    for match in _LATEX_MATH.finditer(text):
        before = text[at : match.start()]
        if before.strip():
            para += nodes.Text(before)
        at = match.end()
        display = match.group("dd") or match.group("bd")
        if display is not None or match.group("env"):
            if len(para):
                out.append(para)
                para = nodes.paragraph()
            body = match.group("env") or display or ""
            block = nodes.math_block(body, body, nowrap=bool(match.group("env")), number=None, label=None)
            out.append(block)
        else:
            inline = match.group("di") or match.group("bi") or ""
            para += nodes.math(inline, inline)
    rest = text[at:]
    if rest.strip():
        para += nodes.Text(rest)
    if len(para):
        out.append(para)
    return out


def _has_lexer(name: str) -> bool:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    if name in {"none", "default"}:
        return True
    try:
        get_lexer_by_name(name)
    except ClassNotFound:
        return False
    return True


def markdown_nodes(text: str, builder_format: str, allow_html: bool) -> list[nodes.Node]:
    """A text/markdown output as formatted nodes, parsed by myst-parser (CommonMark, $math$).

    Headings become rubrics (an output is no section of the page), ids are dropped (they would
    clash with the page's), HTML in the Markdown stays HTML only where text/html would, and
    images that a LaTeX build cannot include show their alt text. Without myst-parser the
    Markdown is shown as text.
    """
    try:
        from docutils.core import publish_doctree
        from myst_parser.parsers.docutils_ import Parser
    except ImportError:
        return [_text_block(text, ["livecells-result"])]
    document = publish_doctree(
        text,
        parser=Parser(),
        settings_overrides={
            "myst_enable_extensions": ["dollarmath", "strikethrough"],  # as JupyterLab's GFM
            "doctitle_xform": False,
            "report_level": 5,
            "halt_level": 5,
            "warning_stream": io.StringIO(),
            "file_insertion_enabled": False,
            "raw_enabled": True,  # HTML in the Markdown: kept below, or made text
        },
    )
    _strike_through(document)
    for node in list(document.findall(nodes.Element)):
        for attribute in ("ids", "names", "dupnames", "backrefs"):
            if attribute in node:
                node[attribute] = []
        if isinstance(node, nodes.system_message):
            node.parent.remove(node)
        elif isinstance(node, nodes.raw):
            if not (allow_html and builder_format == "html" and node.get("format") == "html"):
                node.replace_self(nodes.Text(node.astext()))
        elif isinstance(node, nodes.math_block):
            node["number"] = None
        elif isinstance(node, nodes.literal_block):
            # A fence's language (myst names it in the classes) where Pygments knows it, else text.
            named = [c for c in node["classes"] if c != "code"]
            language = node.get("language") or (named[0] if named else "none")
            node["language"] = language if _has_lexer(language) else "none"
        elif isinstance(node, nodes.image) and builder_format == "latex":
            node.replace_self(nodes.Text(node.get("alt", "")))
    for section in list(document.findall(nodes.section)):
        title = section.next_node(nodes.title)
        replacement: list[nodes.Node] = []
        for child in section.children:
            if child is title:
                replacement.append(nodes.rubric("", "", *title.children))
            else:
                replacement.append(child)
        section.replace_self(replacement)
    return list(document.children)


def _strike_through(document: nodes.document) -> None:
    """``~~text~~`` (which myst-parser gives as raw ``<s>``...``</s>``) as struck-through text.

    Every builder gets an inline node (``livecells-strike``: a line through it in HTML, plain
    text in LaTeX), so no raw markup is needed; an ``<s>``...``</s>`` written as HTML in the
    Markdown becomes the same (and nothing else is raw any more). Unpaired markers stay raw.
    """
    def marker(node: nodes.Node, tag: str) -> bool:
        return isinstance(node, nodes.raw) and node.get("format") == "html" and node.astext() == tag

    for start in [n for n in document.findall(nodes.raw) if marker(n, "<s>")]:
        parent = start.parent
        if parent is None:
            continue
        siblings = parent.children[parent.index(start) + 1 :]
        end = next((i for i, n in enumerate(siblings) if marker(n, "</s>")), None)
        if end is None:
            continue
        inner = siblings[:end]
        for node in [*inner, siblings[end]]:
            parent.remove(node)
        start.replace_self(nodes.inline("", "", *inner, classes=["livecells-strike"]))


def _component(name: str, classes: Sequence[str] = (), children: Sequence[nodes.Node] = ()) -> nodes.container:
    node = nodes.container("", is_div=True, design_component=name, classes=list(classes))
    node.extend(children)
    return node


def _text_block(text: str, classes: Sequence[str]) -> nodes.literal_block:
    block = nodes.literal_block(text, text, classes=["output", "livecells-output", *classes])
    block["language"] = "none"
    return block


def _note(text: str, *classes: str) -> nodes.paragraph:
    text = strip_ansi(text)  # it may hold stored text (a device, a date, a reason)
    return nodes.paragraph(text, text, classes=list(classes))


def setup_render(app: Sphinx) -> None:
    app.add_post_transform(RenderLiveCells)
    app.add_css_file("livecells.css")
