"""Slides (``livecells_slides``) against d2lbook's own, on two real d2l-en pages; the ``slide`` role.

tests/data/d2l-slides holds d2l-en's ``ndarray`` and ``linear-algebra`` pages and what d2lbook
1.0.3 makes of them (``d2lbook-slides.json``, by its ``make_fixtures.py``): ``d2lbook slides PAGE
--tab TAB`` (the unevaluated deck) and ``d2lbook build slides`` (evaluated by real kernels: cells
with outputs are not merged with the next). The pages are converted (``convert``'s markdown route)
and built with the slides on: first with execution off, against the first; then with real torch
and mxnet kernels, against the second.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import nbformat
import pytest

import paths
from helpers import build_site, one_page_book

DATA = paths.DATA / "d2l-slides"
PAGES = ["chapter_preliminaries/ndarray", "chapter_preliminaries/linear-algebra"]
TABS = ["pytorch", "mxnet"]
RECORDED = json.loads((DATA / "d2lbook-slides.json").read_text(encoding="utf-8"))


#: What the book's conf.py has besides what ``convert`` carries from config.ini.
CONF = """
extensions = ["myst_parser", "livecells"]
myst_enable_extensions = ["dollarmath"]
numfig = True
"""


def _converted(tmp_path: Path) -> Path:
    """The pages converted; conf.py gets config.ini's [slides] (and [build] tabs) from ``convert``."""
    from livecells.convert.tree import convert_tree

    book = tmp_path / "book"
    book.mkdir()
    (book / "conf.py").write_text(CONF, encoding="utf-8")
    results = convert_tree(DATA, book, markdown=True)
    assert all(not r.warnings for r in results.values())
    return book


def test_convert_carries_d2l_ens_slides_settings_into_conf_py(tmp_path):
    from livecells.convert.book_conf import BEGIN

    conf = _converted(tmp_path) / "conf.py"
    namespace: dict = {}
    exec(conf.read_text(encoding="utf-8"), namespace)
    assert BEGIN in conf.read_text(encoding="utf-8")
    assert namespace["livecells_slides"] == {
        "top_right": "<img height=80px src='http://d2l.ai/_static/logo-with-text.png'/>",
        "github_repo": {"pytorch": "d2l-ai/d2l-pytorch-slides"},
    }
    assert namespace["livecells_frameworks"] == {"pytorch": {}, "mxnet": {}}


def _deck(path: Path) -> dict:
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    return {
        "metadata": {k: notebook["metadata"].get(k) for k in ("celltoolbar", "rise")},
        "cells": [
            [c["cell_type"], c["metadata"].get("slideshow", {}).get("slide_type", ""), c["source"],
             [o["output_type"] for o in c.get("outputs", [])]]
            for c in notebook["cells"]
        ],
    }


def _line_ends_cut(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.split("\n"))


@pytest.fixture(scope="module")
def unevaluated(tmp_path_factory):
    book = _converted(tmp_path_factory.mktemp("slides"))
    app, warnings = build_site(book, confoverrides={"livecells_execute": "off"})
    return Path(app.outdir) / "_slides", warnings


def test_each_deck_is_d2lbooks_of_the_page(unevaluated):
    """Every cell, its slide type, its text, and the deck's RISE settings as ``d2lbook slides``
    writes them; the one difference is a space at a line's end that d2lbook keeps from the
    source and markdown-it drops (Markdown shows none)."""
    folder, _ = unevaluated
    spaced = []
    for page in PAGES:
        for tab in TABS:
            want, have = RECORDED["cli"][page][tab], _deck(folder / tab / f"{page}.ipynb")
            assert have["metadata"] == want["metadata"]
            assert len(have["cells"]) == len(want["cells"]), (page, tab)
            for theirs, ours in zip(want["cells"], have["cells"]):
                assert ours[:2] + [_line_ends_cut(ours[2])] == theirs[:2] + [_line_ends_cut(theirs[2])]
                assert ours[3] == theirs[3] == []  # nothing ran
                if ours[2] != theirs[2]:
                    spaced.append((page, tab, theirs[2]))
    assert spaced == [
        (PAGES[0], tab, "To assign multiple elements the same value,\nwe apply the indexing on the left-hand side \n"
         "of the assignment operation") for tab in TABS
    ]
    rise = RECORDED["cli"][PAGES[0]]["pytorch"]["metadata"]["rise"]
    assert "<img height=80px src='http://d2l.ai/_static/logo-with-text.png'/>" in rise["overlay"]


def test_beside_the_decks_rise_css_and_the_readme_of_the_framework_with_a_repository(unevaluated):
    folder, _ = unevaluated
    for tab in TABS:
        assert (folder / tab / "chapter_preliminaries" / "rise.css").read_text() == RECORDED["rise.css"]
    # d2lbook's README: the repository as its title, then each deck in nbviewer, in the book's order.
    theirs, ours = RECORDED["readme"]["pytorch"], (folder / "pytorch" / "README.md").read_text()
    assert ours.splitlines()[0] == theirs.splitlines()[0] == "# d2l-ai/d2l-pytorch-slides"
    links = [line for line in theirs.splitlines() if line.startswith(" - [")]
    assert len(links) == 2 and [line for line in ours.splitlines() if line.startswith(" - [")] == links
    assert RECORDED["readme"]["mxnet"] is None and not (folder / "mxnet" / "README.md").exists()


def test_the_page_shows_the_marked_text_as_d2lbook_does(unevaluated):
    """As d2lbook's page: the text of ``[**…**]`` as text, no mark; ``(~~or one~~)`` not at all."""
    folder, warnings = unevaluated
    html = (folder.parent / "chapter_preliminaries" / "ndarray.html").read_text(encoding="utf-8")
    assert "We can construct a tensor with all elements set to 0 \nand a shape of (2, 3, 4)" in html
    assert "or one" not in html and "[**" not in html and "slide" not in html.replace("slideshow", "")
    assert "livecells.slide" not in warnings


@pytest.mark.slow
@pytest.mark.kernel
@pytest.mark.frameworks
def test_with_outputs_each_deck_is_d2lbooks_build_slides(tmp_path):
    """Evaluated by real torch and mxnet kernels, as ``d2lbook build slides`` evaluates its pages:
    a cell with outputs ends its slide's code (d2lbook merges only cells without outputs). The
    code differs only where d2lbook's evaluation runs isort over a cell, which adds a blank line
    after the imports (livecells runs the code as written)."""
    book = _converted(tmp_path)
    app, warnings = build_site(book)
    assert "[livecells" not in warnings  # every cell ran cleanly
    folder = Path(app.outdir) / "_slides"
    for tab in TABS:
        for page in PAGES:
            want, have = RECORDED["build"][tab][page], _deck(folder / tab / f"{page}.ipynb")
            assert have["metadata"] == want["metadata"]
            assert [c[:2] + [c[3]] for c in have["cells"]] == [c[:2] + [c[3]] for c in want["cells"]], (tab, page)
            for theirs, ours in zip(want["cells"], have["cells"]):
                if ours[0] == "markdown":
                    assert _line_ends_cut(ours[2]) == _line_ends_cut(theirs[2])
                else:
                    assert [x for x in ours[2].splitlines() if x] == [x for x in theirs[2].splitlines() if x]
            assert any(c[3] for c in have["cells"])


# -- the slide role, in RST -----------------------------------------------------------------------

RST_CONF = 'extensions = ["livecells"]\nlivecells_execute = "off"\nlivecells_slides = {"top_left": "<b>L</b>"}\n'


def _rst_book(tmp_path: Path, page: str, conf: str = RST_CONF) -> Path:
    return one_page_book(tmp_path, conf, page)


PAGE = """\
Title
=====

:slide:`[**`\\ Tensors *hold* <script>x</script>\\ :slide:`**]` and more :slide:`(~~`\\ slide only\\ :slide:`~~)`.

.. live-cell:: pytorch

   x = 1  # a comment
   x

:slide:`(**`\\ the end\\ :slide:`**)`
"""


def test_rst_page_marks_become_a_deck_and_plain_text(tmp_path):
    src = _rst_book(tmp_path, PAGE)
    app, warnings = build_site(src)
    assert "livecells" not in warnings
    html = (Path(app.outdir) / "index.html").read_text(encoding="utf-8")
    assert "Tensors <em>hold</em> &lt;script&gt;x&lt;/script&gt; and more ." in html
    assert "slide only" not in html
    deck = nbformat.read(Path(app.outdir) / "_slides" / "pytorch" / "index.ipynb", as_version=4)
    nbformat.validate(deck)
    cells = [(c.cell_type, c.metadata.get("slideshow", {}).get("slide_type"), c.source) for c in deck.cells]
    # Page text is escaped: no HTML of a page reaches the slides; the overlay is conf.py's.
    assert cells == [
        ("markdown", "slide", "# Title\n\nTensors *hold* &lt;script&gt;x&lt;/script&gt;\nslide only"),
        ("code", None, "x = 1\nx"),
        ("markdown", "-", "The end"),
    ]
    assert deck.metadata.rise.overlay == "<div class='my-top-right'></div><div class='my-top-left'><b>L</b></div>"
    assert deck.metadata.kernelspec.name == "python3" and deck.metadata.livecells.framework == "pytorch"


@pytest.mark.parametrize("suffix", [".rst", ".md"])
def test_a_mark_that_pairs_with_none_is_warned_at_its_line_and_its_text_stays(tmp_path, suffix):
    role = ":slide:" if suffix == ".rst" else "{slide}"
    page = (
        "Title\n=====\n\nSome text,\nover lines\n" + role + "`[**`\\ open only.\n\n"
        "A " + role + "`**)` close only\nand " + role + "`[+` odd.\n"
    ).replace("\\ ", " " if suffix == ".md" else "\\ ")
    src = _rst_book(tmp_path, "", RST_CONF.replace('["livecells"]', '["myst_parser", "livecells"]'))
    (src / "index.rst").unlink()
    (src / f"index{suffix}").write_text(page)
    app, warnings = build_site(src)
    found = re.findall(rf"index\{suffix}:(\d+): WARNING: (.*) \[livecells\.slide\]", warnings)
    assert [(int(line), text.split(":")[0]) for line, text in found] == [
        (8, "slide mark **) closes no (**"), (9, "slide role '[+'"), (6, "slide mark [** never closed"),
    ], warnings
    html = (Path(app.outdir) / "index.html").read_text(encoding="utf-8")
    assert "open only." in html and "close only\nand  odd." in html
    assert not (Path(app.outdir) / "_slides").exists()  # no mark left: no deck


@pytest.mark.slow
def test_a_page_that_loses_its_marks_loses_its_decks_and_slides_off_remove_them(tmp_path):
    src = _rst_book(tmp_path, PAGE)
    build_site(src)
    (src / "other.rst").write_text("Other\n=====\n\n:slide:`[**`\\ more\\ :slide:`**]`\n\n.. toctree::\n")
    (src / "index.rst").write_text(PAGE + "\n.. toctree::\n\n   other\n")
    app, _ = build_site(src)
    slides = Path(app.outdir) / "_slides"
    assert sorted(p.relative_to(slides).as_posix() for p in slides.rglob("*")) == [
        "mxnet", "mxnet/other.ipynb", "mxnet/rise.css",
        "pytorch", "pytorch/index.ipynb", "pytorch/other.ipynb", "pytorch/rise.css",
    ]
    (src / "index.rst").write_text(PAGE.replace(":slide:", ":emphasis:") + "\n.. toctree::\n\n   other\n")
    build_site(src)
    assert sorted(p.name for p in slides.rglob("*.ipynb")) == ["other.ipynb", "other.ipynb"]
    (src / "conf.py").write_text(RST_CONF.replace('livecells_slides = {"top_left": "<b>L</b>"}', ""))
    build_site(src)
    assert not slides.exists()


def test_bad_settings_are_warned_at_their_conf_line_and_left_out(tmp_path):
    conf = (
        'extensions = ["livecells"]\nlivecells_execute = "off"\n'
        'livecells_slides = {"top_right": 3, "colour": "red", "github_repo": {"mxnet": "not a repo", '
        '"jax": "a/b", "pytorch": "d2l-ai/d2l-pytorch-slides"}}\n'
    )
    src = _rst_book(tmp_path, PAGE, conf)
    app, warnings = build_site(src)
    found = re.findall(r"conf\.py:3: WARNING: livecells_slides: (.*?); that entry is ignored", warnings)
    assert found == [
        "top_right: must be a string (HTML)", "'colour': not one of top_left, top_right, github_repo",
        "github_repo 'mxnet': 'not a repo' is not a GitHub 'owner/name'",
        "github_repo 'jax': not a framework in livecells_frameworks (pytorch, mxnet)",
    ], warnings
    slides = Path(app.outdir) / "_slides"
    assert (slides / "pytorch" / "README.md").read_text().startswith("# d2l-ai/d2l-pytorch-slides\n")


def test_myst_marks_keep_links_and_references_as_d2lbook_wrote_them(tmp_path):
    """A mark's text is d2lbook's Markdown: a link with its URL (percent-encoded where a URL
    cannot hold a character), a reference as d2lbook's mark (``{eq}`` was ``:eqref:``). Slide-only
    text across markup stays in the page, with a warning, and is on the slide."""
    page = (
        "# T\n\n{slide}`[**`See [the docs](<https://x.org/a b\"c>) and {eq}`e1`.{slide}`**]`\n"
        "{slide}`(~~`gone *here{slide}`~~)` still* shown.\n\n```{math}\n:label: e1\nx = 1\n```\n"
    )
    src = _rst_book(tmp_path, "", RST_CONF.replace('["livecells"]', '["myst_parser", "livecells"]'))
    (src / "index.rst").unlink()
    (src / "index.md").write_text(page)
    app, warnings = build_site(src)
    assert re.findall(r"index\.md:(\d+): WARNING: (.*) \[livecells\.slide\]", warnings) == [
        ("4", "slide-only text ((~~…~~)) across markup: kept in the page"),
    ]
    deck = nbformat.read(Path(app.outdir) / "_slides" / "pytorch" / "index.ipynb", as_version=4)
    assert [c.source for c in deck.cells] == ["# T\n\nSee [the docs](https://x.org/a%20b%22c) and :eqref:`e1`.\nGone *here"]
    assert "still</em> shown" in (Path(app.outdir) / "index.html").read_text(encoding="utf-8")
