"""Slides: with ``livecells_slides`` set, each page with slide marks as a deck per framework.

As d2lbook's ``slides`` makes them: a RISE notebook (reveal.js slides in Jupyter; nbviewer shows
them at ``/format/slides/``) of the page's slide marks and code cells (see
:func:`livecells.model.slides.slide_notebook`), with ``rise.css`` beside it, and per framework
that has a ``github_repo`` a ``README.md`` that lists the decks in the book's order, linked in
nbviewer, as d2lbook writes for the repository it pushes them to. An HTML build writes them at
its end, for every page (each page's slide prose is kept from when it was read), into
``_slides/<framework>/<docname>.ipynb`` of the output folder; files of pages that have no slides
any more go. The code cells and outputs are the page's notebook's (:mod:`.notebooks`): the
results the page shows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from urllib.parse import quote

from sphinx.application import Sphinx

from livecells.config import get_config
from livecells.model.records import outcome_of
from livecells.model.slides import RISE_CSS, PageSlides, SlidesSettings, rise_metadata, slide_notebook
from livecells.read.collect import plans
from livecells.read.slides import page_slides
from livecells.render.notebooks import _write, build_notebook, writes_notebooks
from livecells.render.results import matched_results, page_records

SLIDES_DIR = "_slides"
_NBVIEWER = "https://nbviewer.jupyter.org/format/slides/github"


def write_slides(app: Sphinx, exception: BaseException | None) -> None:
    """Write every page's decks (and each framework's README), and remove those of no page."""
    if exception is not None or not writes_notebooks(app):
        return
    folder = Path(app.builder.outdir) / SLIDES_DIR
    settings = get_config(app.env).slides
    written: set[Path] = set()
    if settings is not None:
        for docname, page in sorted(page_slides(app.env).items()):
            if docname not in app.env.all_docs:
                continue
            for framework, deck in page_decks(app, docname, page, settings):
                path = folder / framework / f"{docname}.ipynb"
                _write(path, json.dumps(deck, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
                _write(path.parent / "rise.css", RISE_CSS)
                written |= {path, path.parent / "rise.css"}
        for framework, repo in settings.github_repo:
            decks = [d for d in book_order(app) if folder / framework / f"{d}.ipynb" in written]
            if decks:
                _write(folder / framework / "README.md", readme(repo, [f"{d}.ipynb" for d in decks]))
                written.add(folder / framework / "README.md")
    _prune(folder, written)


def page_decks(
    app: Sphinx, docname: str, page: PageSlides, settings: SlidesSettings
) -> list[tuple[str, dict[str, Any]]]:
    """The page's decks: (framework, notebook) for each framework it has slides for."""
    config = get_config(app.env)
    plan = plans(app.env).get(docname)
    decks = []
    if plan is None:  # prose only: d2lbook makes it a deck in every tab
        metadata = {"language_info": {"name": "python"}, **rise_metadata(settings)}
        for framework in config.framework_names():
            deck = slide_notebook(page, framework, {}, metadata)
            decks += [(framework, deck)] if deck is not None else []
        return decks
    outcome = outcome_of(app.env)
    sessions = page_records(outcome, plan)
    matched = matched_results(plan, outcome, sessions, app.tags)
    title = app.env.titles[docname].astext() if docname in app.env.titles else docname
    for session in plan.sessions(config.framework_names(), app.tags):
        spec = config.frameworks[session.framework]
        record = sessions.get(spec.name)
        kernelspec = (record.provenance.kernelspec if record is not None else {}) or {
            "name": spec.kernel, "display_name": f"{spec.label} ({spec.kernel})", "language": "python",
        }
        # The page's notebook of its cells alone: its code cells are the session's, in order.
        order = [cell.index for cell in session.cells]
        notebook = build_notebook(plan, spec, matched, [("cell", i, None) for i in order], title, kernelspec)
        code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
        metadata = {**notebook["metadata"], **rise_metadata(settings)}
        deck = slide_notebook(page, spec.name, dict(zip(order, code)), metadata)
        decks += [(spec.name, deck)] if deck is not None else []
    return decks


def readme(repo: str, paths: list[str]) -> str:
    """The README of a framework's decks, for the GitHub repository ``repo`` they are pushed to."""
    items = [f" - [{p}]({_NBVIEWER}/{repo}/blob/main/{quote(p)})" for p in paths]
    return (
        f"# {repo}\n\nThis repository holds the book's slides, one notebook per page. To show "
        "them locally, install the [RISE](https://rise.readthedocs.io/en/stable/) extension of "
        "Jupyter.\n\nThey can also be seen in nbviewer:\n\n" + "\n".join(items) + "\n"
    )


def book_order(app: Sphinx) -> list[str]:
    """The book's pages in the order of its tables of contents, from the root page."""
    seen: dict[str, None] = {}

    def visit(docname: str) -> None:
        if docname not in seen:
            seen[docname] = None
            for child in app.env.toctree_includes.get(docname, []):
                visit(child)

    visit(app.config.root_doc)
    return [*seen, *sorted(set(app.env.all_docs) - set(seen))]


def _prune(folder: Path, written: set[Path]) -> None:
    """Every file of the slides' folder that this build did not write removed (decks of pages
    that have none any more, a README of a repository no longer named), and empty folders."""
    if not folder.is_dir():
        return
    for path in sorted(folder.rglob("*"), reverse=True):
        if path.is_file() and path not in written:
            path.unlink(missing_ok=True)
        elif path.is_dir() and not any(path.iterdir()):
            path.rmdir()
    if not any(folder.iterdir()):
        folder.rmdir()


def setup_slides(app: Sphinx) -> None:
    app.connect("build-finished", write_slides)
