"""Notebook downloads: each page with cells as one Jupyter notebook per framework it uses.

While a page is written (from the render post-transform, in the main process, so ``-j`` is
safe), HTML builders get ``_downloads/livecells/<docname>.<framework>.ipynb``: the page's prose
as markdown cells, that framework's code cells in order with the outputs the page shows (the
stored results that still match the page's code, see :mod:`.results`), and the framework's
kernelspec. The render stage puts the returned "Download notebook" paragraph near the page's
first tab set.
"""

from __future__ import annotations

import copy
import functools
import json
import posixpath
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import quote

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.builders.html import StandaloneHTMLBuilder

from livecells.config import get_config
from livecells.model.frameworks import FrameworkSpec
from livecells.model.plans import PagePlan
from livecells.model.records import CellRecord, SessionRecord
from livecells.model.vocabulary import CellStatus
from livecells.read.collect import plans
from livecells.read.nodes import live_cell, live_recorded, live_settings, live_text
from livecells.read.values import live_value
from livecells.render.launch import launch_nodes
from livecells.render.outputs import page_url
from livecells.render.results import Matched

DOWNLOAD_DIR = "_downloads/livecells"

#: ``(kind, value, framework)``: see :func:`page_pieces`.
Piece = tuple[str, Any, str | None]
#: An image's URL in a notebook, from its URI in the doctree (a path from the source folder, or
#: a remote URL); None: the notebook shows its text alone.
ImageURL = Callable[[str, nodes.Element], "str | None"]

#: Nodes that say nothing in a notebook.
_SKIPPED = (
    nodes.comment, nodes.raw, nodes.target, nodes.system_message, nodes.substitution_definition,
    live_recorded, live_settings, addnodes.toctree, addnodes.start_of_file,
)


#: The keys nbformat v4 allows in each kind of output.
_OUTPUT_KEYS = {
    "stream": ("name", "text"),
    "error": ("ename", "evalue", "traceback"),
    "execute_result": ("data", "metadata", "execution_count"),
    "display_data": ("data", "metadata"),
}


def writes_notebooks(app: Sphinx) -> bool:
    """HTML-like builders only: an epub or a PDF has nowhere to link a download to."""
    from sphinx.builders._epub_base import EpubBuilder

    builder = app.builder
    return isinstance(builder, StandaloneHTMLBuilder) and not isinstance(builder, EpubBuilder)


def notebook_path(docname: str, framework: str) -> str:
    """Where a page's notebook lies, relative to the output folder."""
    return f"{DOWNLOAD_DIR}/{docname}.{framework}.ipynb"


def download_links(
    app: Sphinx,
    root: nodes.Element,
    docname: str,
    sessions: dict[str, SessionRecord],
    matched: Matched,
) -> nodes.paragraph | None:
    """Write the page's notebooks and return the paragraph that links them (None: no notebooks).

    ``root`` holds the page's content: its doctree, or its part of an assembled one; ``sessions``
    and ``matched`` are the page's stored sessions and the results the page shows.
    """
    if not writes_notebooks(app):
        return None
    from livecells.render.hosted import write_hosted

    plan = plans(app.env).get(docname)
    if plan is None:
        return None
    config = get_config(app.env)
    pieces = page_pieces(root)
    collapsed = collapsed_cells(root)
    title = _page_title(app, docname)
    para = nodes.paragraph("", "", classes=["livecells-downloads"])
    para += nodes.Text("Download notebook: ")
    for session in plan.sessions(config.framework_names(), app.tags):
        spec = config.frameworks[session.framework]
        record = sessions.get(spec.name)
        kernelspec = (record.provenance.kernelspec if record is not None else {}) or {
            "name": spec.kernel,
            "display_name": f"{spec.label} ({spec.kernel})",
            "language": "python",
        }
        path = notebook_path(docname, spec.name)
        # The page's notebook of the framework, with images at the URLs a function of its gives.
        make = functools.partial(build_notebook, plan, spec, matched, pieces, title, kernelspec, collapsed)
        write_json(Path(app.builder.outdir) / path, make(site_images(app, path)))
        write_hosted(app, docname, spec.name, kernelspec, make, first=len(para) == 1)
        if len(para) > 1:
            para += nodes.Text(" · ")
        uri = page_url(app.builder, docname, notebook_path(docname, spec.name))
        para += nodes.reference(spec.label, spec.label, refuri=uri, classes=["livecells-download"])
        para += launch_nodes(app, docname, spec.name, notebook_path(docname, spec.name))
    return para if len(para) > 1 else None


def build_notebook(
    plan: PagePlan,
    spec: FrameworkSpec,
    matched: Matched,
    pieces: list[Piece],
    title: str,
    kernelspec: dict[str, str],
    collapsed: dict[int, dict[str, Any]] | None = None,
    image_url: ImageURL | None = None,
) -> dict[str, Any]:
    """One framework's notebook of the page (nbformat 4.5, as plain JSON data): markdown prose,
    images (at ``image_url``'s URLs; none without it), code cells (with ``collapsed``'s metadata,
    by cell index), their outputs. Built as data rather than through nbformat, whose
    constructors validate every cell: the tests validate the files instead."""
    cells_by_index = {c.index: c for c in plan.cells if spec.name in c.frameworks}
    notebook: dict[str, Any] = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    markdown: list[str] = []
    if not pieces or pieces[0][0] != "md" or not str(pieces[0][1]).startswith("# "):
        markdown.append(f"# {title}")

    def flush() -> None:
        if markdown:
            notebook["cells"].append(
                {"cell_type": "markdown", "metadata": {}, "source": "\n\n".join(markdown)}
            )
            markdown.clear()

    known = set(plan.frameworks)
    for kind, value, framework in pieces:
        if kind in {"md", "image"} and not (framework is None or framework == spec.name or framework not in known):
            continue
        if kind == "md":
            markdown.append(value)
            continue
        if kind == "image":
            url = image_url(value[0], value[2]) if image_url is not None else None
            if url is not None:
                markdown.append(f"![{_alt(value[1])}]({url})")
            elif value[1]:
                markdown.append(value[1])
            continue
        cell = cells_by_index.get(value)
        if cell is None:
            continue
        flush()
        result = matched.get((cell.index, spec.name), (None, None))[0]
        code = {
            "cell_type": "code",
            "execution_count": None,
            "metadata": copy.deepcopy((collapsed or {}).get(cell.index, {})),
            "outputs": [],
            "source": cell.code,
        }
        if result is not None:
            code["execution_count"] = result.execution_count
            code["outputs"] = notebook_outputs(result)
        notebook["cells"].append(code)
    flush()
    for number, cell in enumerate(notebook["cells"]):
        cell["id"] = f"cell-{number}"  # stable ids: the same page gives the same file
    notebook["metadata"] = {
        "kernelspec": dict(kernelspec),
        "language_info": {"name": "python"},
        "livecells": {"page": plan.docname, "framework": spec.name},
    }
    return notebook


def notebook_outputs(result: CellRecord) -> list[dict[str, Any]]:
    """A stored cell result's outputs as nbformat v4 outputs."""
    outputs = []
    for output in result.outputs:
        kind = output.get("output_type", "")
        keys = _OUTPUT_KEYS.get(kind)
        if keys is not None:  # stored outputs are nbformat's; livecells' own keys are left out
            item = {"output_type": kind, **{k: output[k] for k in keys if k in output}}
            if kind in {"execute_result", "display_data"}:
                item.setdefault("metadata", {})
            outputs.append(item)
    if result.status in {CellStatus.TIMEOUT, CellStatus.DIED}:
        outputs.append(
            {"output_type": "error", "ename": result.ename or "Error", "evalue": result.evalue, "traceback": []}
        )
    return outputs


def collapsed_cells(root: nodes.Element) -> dict[int, dict[str, Any]]:
    """The notebook metadata of each cell whose code or output the page collapses
    (``:collapse-code:``, ``:collapse-output:``), by cell index: Jupyter's ``source_hidden`` and
    ``outputs_hidden``, and the ``hide-input``/``hide-output`` tags of MyST-NB and Jupyter Book."""
    found: dict[int, dict[str, Any]] = {}
    for cell in root.findall(live_cell):
        parts = [(key, tag) for attribute, key, tag in _COLLAPSED if cell.get(attribute) is not None]
        if parts:
            found[cell["index"]] = {
                "jupyter": {key: True for key, _ in parts},
                "tags": [tag for _, tag in parts],
            }
    return found


#: A cell's collapse attribute, its key in Jupyter's cell metadata, its MyST-NB tag.
_COLLAPSED = (
    ("collapse_code", "source_hidden", "hide-input"),
    ("collapse_output", "outputs_hidden", "hide-output"),
)


# -- the page's prose as markdown ------------------------------------------------------------------


def page_pieces(root: nodes.Element) -> list[Piece]:
    """The page in order: ``("md", text, framework)`` for prose (framework: ``None`` unless it
    is a ``live-text`` or sits in a tab synced to one framework), ``("cell", index, None)`` for
    each cell."""
    pieces: list[Piece] = []
    _walk(root, 0, None, pieces)
    return pieces


def _walk(node: nodes.Element, depth: int, framework: str | None, pieces: list[Piece]) -> None:
    for child in node.children:
        if isinstance(child, live_cell):
            pieces.append(("cell", child["index"], None))
        elif isinstance(child, live_text):
            # Framework prose (live-text): in the notebook of each framework it is for.
            for name in child["frameworks"]:
                _walk(child, depth, name, pieces)
        elif isinstance(child, _SKIPPED) or not isinstance(child, nodes.Element):
            continue
        elif isinstance(child, nodes.section):
            _walk(child, depth + 1, framework, pieces)
        elif isinstance(child, nodes.figure):
            caption = next((c for c in child.children if isinstance(c, nodes.caption)), None)
            text = _inline(caption, framework) if caption is not None else ""
            for image in child.findall(nodes.image):
                pieces.append(("image", (image_uri(image), image.get("alt") or text, image), framework))
            for legend in child.findall(nodes.legend):
                _walk(legend, depth, framework, pieces)
        elif isinstance(child, nodes.image):
            pieces.append(("image", (image_uri(child), child.get("alt", ""), child), framework))
        elif isinstance(child, nodes.title):
            pieces.append(("md", "#" * max(1, min(depth, 6)) + " " + _inline(child, framework), framework))
        elif isinstance(child, nodes.paragraph):
            if "livecells-downloads" not in child["classes"]:
                pieces.append(("md", _inline(child, framework), framework))
        elif isinstance(child, nodes.literal_block):
            pieces.append(("md", "```\n" + child.astext() + "\n```", framework))
        elif isinstance(child, nodes.math_block):
            pieces.append(("md", "$$\n" + child.astext() + "\n$$", framework))
        elif isinstance(child, (nodes.bullet_list, nodes.enumerated_list)):
            ordered = isinstance(child, nodes.enumerated_list)
            lines = [
                (f"{n}. " if ordered else "- ") + " ".join(item.astext().split())
                for n, item in enumerate(child.children, start=1)
            ]
            pieces.append(("md", "\n".join(lines), framework))
        elif child.get("design_component") == "tab-item" and len(child) and "sync_id" in child[0]:
            # A prose tab of a tab set synced by framework (d2lbook's per-framework text).
            _walk(child, depth, child[0]["sync_id"], pieces)
        else:
            _walk(child, depth, framework, pieces)


def _inline(node: nodes.Element, framework: str | None = None) -> str:
    """Text with the inline markup that markdown has (``framework``: whose prose it is)."""
    parts = []
    for child in node.children:
        if isinstance(child, live_value) and framework in child.get("texts", {}):
            parts.append(child["texts"][framework])  # a quote in prose of several frameworks
        elif isinstance(child, nodes.Text):
            parts.append(child.astext())
        elif isinstance(child, nodes.literal):
            parts.append(f"`{child.astext()}`")
        elif isinstance(child, nodes.strong):
            parts.append(f"**{_inline(child, framework)}**")
        elif isinstance(child, nodes.emphasis):
            parts.append(f"*{_inline(child, framework)}*")
        elif isinstance(child, nodes.math):
            parts.append(f"${child.astext()}$")
        elif isinstance(child, nodes.reference) and child.get("refuri", "").startswith(("http:", "https:")):
            parts.append(f"[{child.astext()}]({child['refuri']})")
        elif isinstance(child, nodes.Element):
            parts.append(_inline(child, framework))
    return "".join(parts).replace("\n", " ")


# -- images ----------------------------------------------------------------------------------------


def image_uri(node: nodes.image) -> str:
    """An image's URI: its path from the source folder (Sphinx's candidates; of several, the
    first of SVG, PNG, JPEG, GIF), or its remote URL."""
    candidates = node.get("candidates") or {}
    if "?" in candidates or "*" in candidates:
        return str(candidates.get("?", candidates.get("*")))
    for mime in ("image/svg+xml", "image/png", "image/jpeg", "image/gif"):
        if mime in candidates:
            return str(candidates[mime])
    return str(next(iter(candidates.values()), node.get("uri", "")))


def remote_image(uri: str) -> str | None:
    """A remote image's URL as a markdown link may hold it (None: not ``http(s)``)."""
    if not uri.lower().startswith(("https://", "http://")):
        return None
    return markdown_url(quote(uri, safe=":/?#[]@!$&'*+,;=%~"))


def markdown_url(url: str) -> str:
    """A quoted URL with its parentheses escaped too: markdown's ``(...)`` ends at one."""
    return url.replace("(", "%28").replace(")", "%29")


def site_images(app: Sphinx, notebook: str) -> ImageURL:
    """Images of a download notebook: the copies in the site's ``_images`` folder, relative to
    the notebook (``notebook``: its path in the output folder)."""
    images = app.env.images
    imagedir = getattr(app.builder, "imagedir", "_images")

    def url(uri: str, node: nodes.Element) -> str | None:
        if uri in images:
            target = f"{imagedir}/{images[uri][1]}"
            return markdown_url(quote(posixpath.relpath(target, posixpath.dirname(notebook))))
        return remote_image(uri)

    return url


def _alt(text: str) -> str:
    """Text as a markdown image's alt text: one line, its brackets and backslashes escaped."""
    text = " ".join(text.split())
    return text.replace("\\", "\\\\").replace("[", "\\[").replace("]", "\\]")


# -- helpers ---------------------------------------------------------------------------------------


def _page_title(app: Sphinx, docname: str) -> str:
    title = app.env.titles.get(docname)
    return title.astext() if title is not None else docname


def write_json(path: Path, notebook: dict[str, Any]) -> None:
    """A notebook's file, as the downloads and the hosted notebooks are written."""
    _write(path, json.dumps(notebook, indent=1, sort_keys=True, ensure_ascii=False) + "\n")


def _write(path: Path, text: str) -> None:
    """Write unless the file already holds exactly this (keeps its date for rsync and browsers)."""
    try:
        if path.read_text(encoding="utf-8") == text:
            return
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(path)


def prune_notebooks(app: Sphinx, exception: BaseException | None) -> None:
    """Drop notebooks of pages (or a page's frameworks) that no longer have cells."""
    if exception is not None or not writes_notebooks(app):
        return
    folder = Path(app.builder.outdir) / DOWNLOAD_DIR
    if not folder.is_dir():
        return
    config = get_config(app.env)
    wanted = {
        notebook_path(docname, session.framework)
        for docname, plan in plans(app.env).items()
        for session in plan.sessions(config.framework_names(), app.tags)
    }
    for path in folder.rglob("*.ipynb"):
        if path.relative_to(app.builder.outdir).as_posix() not in wanted:
            path.unlink(missing_ok=True)


def setup_notebooks(app: Sphinx) -> None:
    """The render post-transform calls :func:`download_links`; stale files go at the end."""
    app.connect("build-finished", prune_notebooks)
