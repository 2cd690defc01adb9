"""A cell's stored outputs as docutils nodes for the current builder.

Outputs are the kernel's data: each is checked again (:func:`livecells.store.check_output`) and
shown alone, so that one that cannot be shown is a located warning and a note, never a broken
page. Streams are joined as JupyterLab joins them (:func:`livecells.model.streams.shown_outputs`);
text keeps ANSI colours only as escaped spans; ``text/html`` passes as markup only where
``livecells_allow_html`` says; images are written beside the page, within one size limit.
"""

from __future__ import annotations

import base64
import hashlib
import json
import posixpath
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

from docutils import nodes
from sphinx.util import logging

from livecells.config import WARNING_TYPE, LivecellsConfig
from livecells.errors import StoreEntryError, UnsafeMathError
from livecells.model.mime import MAX_IMAGE_BYTES, MIME_TYPES, MimeType, mime_priority
from livecells.model.records import RENDER_WARNED, CellRecord
from livecells.model.streams import shown_outputs
from livecells.model.text import css_name, one_line, strip_ansi, xml_text
from livecells.model.values import hidden
from livecells.model.vocabulary import StderrMode, WarningSubtype
from livecells.read.nodes import live_cell
from livecells.render import mime_plugins
from livecells.render.ansi import ansi_to_html, ansi_to_latex, has_colours
from livecells.render.markup import MATHJAX_PROCESS, checked_math, latex_nodes, markdown_nodes, text_block
from livecells.store import check_output, shown_output

logger = logging.getLogger(__name__)


class Outputs:
    """Renders outputs for one builder (its format, its image folder) and one page."""

    def __init__(self, builder: Any, config: LivecellsConfig, docname: str) -> None:
        self.builder = builder
        self.format = builder.format
        self.config = config
        self.docname = docname
        #: The representations this builder shows, best first (the mime renderers' overrides,
        #: then the book's: see render/mime_plugins.py).
        self.priority = mime_priority(
            builder.name, builder.format, (*mime_plugins.priority_overrides(), *config.mime_priority),
            html_as_markup=config.allow_html,
        )

    def warn(self, cell: live_cell, framework: str, message: str) -> None:
        _output_warning(cell, framework, message)
        self.warned()

    def warned(self) -> None:
        """Note that writing this page gave a warning: the next build writes it again, although
        nothing changed, so that its warnings (and ``-W``) are given again (see RENDER_WARNED)."""
        folder = getattr(self.builder, "doctreedir", None)
        if folder is None:
            return
        try:  # one short line, appended: safe from the processes of a parallel write
            with open(Path(folder) / RENDER_WARNED, "a", encoding="utf-8") as handle:
                handle.write(self.docname + "\n")
        except OSError:
            pass  # the page is not written again by itself: as before

    def render(self, cell: live_cell, result: CellRecord, framework: str) -> list[nodes.Node]:
        """The nodes of a cell's outputs, in order."""
        out: list[nodes.Node] = []
        # Consecutive streams of one name are one text, as in JupyterLab's output area; an
        # output of the wrong shape is left out where it stands, with a warning.
        run: list[dict[str, Any]] = []
        for position, output in enumerate(result.outputs):
            if hidden(output):  # a named value the cell does not show (render/values.py quotes it)
                continue
            try:
                check_output(output, f"output {position + 1}")
            except StoreEntryError as err:
                out.extend(self.render_run(cell, run, framework))
                run = []
                out.extend(self.refused_note(cell, framework, str(err)))
                continue
            run.append(output)
        out.extend(self.render_run(cell, run, framework))
        return out

    def render_one(
        self, cell: live_cell, output: Any, position: int, framework: str
    ) -> list[nodes.Node]:
        """One output's nodes; one that cannot be shown is a located warning and a note."""
        try:
            output = shown_output(output, self.config.output_limit, f"output {position + 1}")
            name = output.get("name")
            if output["output_type"] == "stream" and css_name(name) != name:
                # The name goes into a class attribute: a cell can set sys.stdout.name.
                shown_as = css_name(name)
                why = f"a stream named {one_line(repr(name), 60)} is shown as {shown_as!r}"
                self.warn(cell, framework, why)
                output = {**output, "name": shown_as}
            return self._output_nodes(cell, output)
        except Exception as err:  # one output never ends the build
            why = str(err) if isinstance(err, StoreEntryError) else f"{type(err).__name__}: {err}"
            return self.refused_note(cell, framework, why)

    def render_run(self, cell: live_cell, run: list[dict[str, Any]], framework: str) -> list[nodes.Node]:
        """The nodes of a run of well-formed outputs, streams joined as JupyterLab joins them."""
        out: list[nodes.Node] = []
        for position, output in enumerate(shown_outputs(run)):
            out.extend(self.render_one(cell, output, position, framework))
        return out

    def refused_note(self, cell: live_cell, framework: str, why: str) -> list[nodes.Node]:
        """A located warning, and the note the page shows where the output would have been."""
        why = one_line(why, 200)
        self.warn(cell, framework, f"an output was left out: {why}")
        return [note(f"[an output was left out: {why}]", "livecells-refused")]

    def _output_nodes(self, cell: live_cell, output: dict[str, Any]) -> list[nodes.Node]:
        kind = output.get("output_type")
        if kind == "stream":
            name = output.get("name")
            if name == "stderr" and not StderrMode(cell.get("stderr", StderrMode.SHOW)).shown:
                return []
            text = str(output.get("text", ""))  # already as JupyterLab shows it (shown_outputs)
            if not text:
                return []
            classes = ["livecells-stream", f"livecells-{css_name(name)}"]  # safe: see render_one
            result: list[nodes.Node] = [self.text(text, classes)]
            if output.get("truncated"):
                result.append(
                    note(
                        f"Output truncated at {self.config.output_limit:,} characters "
                        "(livecells_output_limit).",
                        "livecells-truncated",
                    )
                )
            return result
        if kind == "error":
            traceback = "\n".join(str(t) for t in output.get("traceback", []))
            if not traceback:
                traceback = f"{output.get('ename')}: {output.get('evalue')}"
            return [self.text(traceback, ["livecells-error"])]
        if kind in {"execute_result", "display_data"}:
            data = output.get("data")
            return self._mime_nodes(cell, data if isinstance(data, dict) else {})
        return []

    def text(self, text: str, classes: Sequence[str]) -> nodes.Element:
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
        if self.format == "latex" and has_colours(text):
            # Coloured text as Sphinx's verbatim with xcolor commands, in the output cells' style
            # (which render.latex gives the literal blocks).
            body = ansi_to_latex(text[:-1] if text.endswith("\n") else text)
            return nodes.raw(
                "",
                "\n\\begingroup\\livecellsstyleoutputcell\n"
                "\\begin{sphinxVerbatim}[commandchars=\\\\\\{\\}]\n"
                f"{body}\n\\end{{sphinxVerbatim}}\n\\endgroup\n",
                format="latex",
                classes=["output", "livecells-output", *classes],
            )
        plain = strip_ansi(text)
        return text_block(plain[:-1] if plain.endswith("\n") else plain, classes)

    def _mime_nodes(self, cell: live_cell, data: dict[str, Any]) -> list[nodes.Node]:
        """The nodes of the best representation that a mime renderer shows (livecells' own
        first); one that fails is a located warning, and the next is tried."""
        refused = ""  # math refused by the allowlist: shown as text when nothing else is
        for mime in self.priority:
            if mime not in data:
                continue
            for renderer in mime_plugins.renderers():
                try:
                    rendered = renderer.handle_mime(self, mime, data[mime])
                except UnsafeMathError as err:
                    self.warned()
                    logger.warning(
                        f"a {mime} output is not shown as math: {err}; the next representation (or "
                        "its source, as text) is shown instead",
                        type=WARNING_TYPE, subtype=WarningSubtype.OUTPUT, location=cell_location(cell),
                    )
                    refused = refused or str(data[mime])
                    break
                except Exception as err:  # binascii.Error is a ValueError; another package's anything
                    self.warned()
                    by = "" if renderer.name == "livecells" else f" by the mime renderer {renderer.name!r}"
                    logger.warning(
                        f"a {mime} output could not be shown{by} ({type(err).__name__}: {one_line(str(err), 200)}); "
                        "the next representation is shown instead",
                        type=WARNING_TYPE, subtype=WarningSubtype.OUTPUT, location=cell_location(cell),
                    )
                    continue
                if rendered:
                    return list(rendered)
        return [self.text(refused, ["livecells-result"])] if refused else []

    # One method per way of showing a representation (MimeType.shown_as); each gives the nodes
    # for this builder, [] when it has nothing to show.

    def _html(self, kind: MimeType, value: Any) -> list[nodes.Node]:
        if not isinstance(value, str):
            raise TypeError("text/html is not a string")
        if not self.config.allow_html or self.format != "html":
            return [self.text(value, ["livecells-result"])]
        process = " ".join(MATHJAX_PROCESS)  # its math is typeset, as in JupyterLab
        markup = f'<div class="output livecells-output livecells-html {process}">\n{value}\n</div>\n'
        return [nodes.raw("", markup, format="html")]

    def _image_nodes(self, kind: MimeType, value: Any) -> list[nodes.Node]:
        if not isinstance(value, str):
            raise TypeError(f"{kind.name} is not a string")
        node = self._image(kind, value)
        return [node] if node is not None else []

    def _markdown(self, kind: MimeType, value: Any) -> list[nodes.Node]:
        box = _output_box(markdown_nodes(str(value), self.format, self.config.allow_html), "livecells-markdown")
        return [checked_math(box, self.format, self.config.allow_html)]

    def _latex(self, kind: MimeType, value: Any) -> list[nodes.Node]:
        box = _output_box(latex_nodes(str(value)), "livecells-latex")
        return [checked_math(box, self.format, self.config.allow_html)]

    def _json(self, kind: MimeType, value: Any) -> list[nodes.Node]:
        if isinstance(value, str):
            value = json.loads(value)
        text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)
        return [self.text(text, ["livecells-result", "livecells-json"])]

    def _plain(self, kind: MimeType, value: Any) -> list[nodes.Node]:
        return [self.text(str(value), ["livecells-result"])]

    def _image(self, kind: MimeType, value: str) -> nodes.Node | None:
        raw = kind.decoded(value)
        if len(raw) > MAX_IMAGE_BYTES:
            return note(
                f"An image of {len(raw) / 2**20:.1f} MiB was left out (limit "
                f"{MAX_IMAGE_BYTES // 2**20} MiB).",
                "livecells-refused",
            )
        name = f"livecells-{hashlib.sha256(raw).hexdigest()[:20]}{kind.suffix}"
        builder = self.builder
        if kind.name == "image/svg+xml" and not self.config.allow_html:
            # An SVG can hold scripts: as a file of the site, a reader who opens it runs them on
            # the site's origin. Inside the page as a data: URI it is only ever an <img> (no
            # script runs there, and browsers open no data: URL as a page).
            uri = "data:image/svg+xml;base64," + base64.b64encode(raw).decode("ascii")
            image = nodes.image(uri=uri, candidates={"?": uri}, classes=["livecells-image"], alt="output")
            return nodes.container("", image, classes=["livecells-output", "livecells-figure"])
        if self.format == "latex":
            target = Path(builder.outdir) / name
            uri = name
        else:
            imagedir = getattr(builder, "imagedir", "_images")
            target = Path(builder.outdir) / imagedir / name
            uri = page_url(builder, self.docname, f"{imagedir}/{name}")
        target.parent.mkdir(parents=True, exist_ok=True)
        if not target.exists():
            target.write_bytes(raw)
        image = nodes.image(uri=uri, candidates={"?": uri}, classes=["livecells-image"], alt="output")
        return nodes.container("", image, classes=["livecells-output", "livecells-figure"])


_SHOWN_AS = {
    "html": Outputs._html,
    "image": Outputs._image_nodes,
    "markdown": Outputs._markdown,
    "latex": Outputs._latex,
    "json": Outputs._json,
    "text": Outputs._plain,
}


def page_url(builder: Any, docname: str, target: str) -> str:
    """The URL of ``target`` (a path under the output folder) from the HTML page of ``docname``,
    quoted: pages and folders named with "#", "%", "?", spaces or non-ASCII link right. From
    where the page is written, not from ``get_target_uri`` (quoted by html, not by dirhtml)."""
    page = builder.config.root_doc if builder.name == "singlehtml" else docname
    try:
        folder = Path(builder.get_outfilename(page)).parent.relative_to(builder.outdir).as_posix()
    except (AttributeError, ValueError):
        folder = posixpath.dirname(page) or "."
    return quote(posixpath.relpath(target, folder))


def cell_location(cell: live_cell) -> str:
    """``file:line`` of the cell's directive: the same place the build's warnings name
    (:meth:`livecells.model.plans.CellPlan.location`)."""
    return f"{cell.source}:{cell.line}"


def _output_warning(cell: live_cell, framework: str, message: str) -> None:
    logger.warning(
        f"live-cell [{framework}]: {message}",
        type=WARNING_TYPE, subtype=WarningSubtype.OUTPUT, location=cell_location(cell),
    )


def _output_box(children: list[nodes.Node], kind: str) -> nodes.container:
    return nodes.container("", *children, classes=["output", "livecells-output", "livecells-result", kind])



def note(text: str, *classes: str) -> nodes.paragraph:
    """A line of livecells' own about a cell (stored text in it loses its escapes and controls)."""
    text = strip_ansi(text)  # it may hold stored text (a device, a date, a reason)
    return nodes.paragraph(text, text, classes=list(classes))


class Builtin:
    """livecells' own mime renderer, the first of ``livecells.mime_renderers`` (see
    render/mime_plugins.py): the types of :data:`~livecells.model.mime.MIME_TYPES`, in the
    builders' orders of :data:`~livecells.model.mime.PRIORITIES`."""

    mime_priority_overrides: tuple[tuple[str, str, int | None], ...] = ()

    @staticmethod
    def handle_mime(outputs: Outputs, mime: str, value: Any) -> list[nodes.Node] | None:
        kind = MIME_TYPES.get(mime)
        if kind is None:
            return None
        if isinstance(value, list) and kind.shown_as != "json":
            value = "".join(str(v) for v in value)
        if isinstance(value, str):  # text that no page (HTML, XHTML, LaTeX) can hold goes
            value = xml_text(value)
        return _SHOWN_AS[kind.shown_as](outputs, kind, value)
