"""Themes, parallel builds and other builders, over tests/roots/test-alabaster (two pages).

One ``-j 1`` HTML build under alabaster is shared by the tests below; a ``-j 2`` build of a fresh
copy must give the same pages; the text, dirhtml and singlehtml builders then build the first
copy from its store (nothing runs again). Themes and builders are the subject, not kernels: the
sessions run on :class:`helpers.FakeKernels`.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from bs4 import BeautifulSoup

from helpers import FakeKernels, build_site, cells, outputs, soup

PAGES = ("index", "second")
# Each cell prints "<page>-<set> <framework>", so a cell's output can be checked against its code.
MARK = re.compile(r'"(\w+-(?:one|two))"')


def _build(src: Path, buildername: str = "html", **kwargs: Any) -> dict[str, Any]:
    # SphinxTestApp swaps alabaster for "basic" unless the theme is given as an override.
    kernels = FakeKernels()
    app, warnings = build_site(
        src, buildername, kernels=kernels, confoverrides={"html_theme": "alabaster"}, **kwargs
    )
    return {
        "app": app,
        "ran": kernels.take(),
        "outdir": Path(app.outdir),
        "warnings": warnings,
    }


def _copy_root(tmp_path_factory, rootdir: Path, name: str) -> Path:
    src = tmp_path_factory.mktemp(name) / "src"
    shutil.copytree(rootdir / "test-alabaster", src)
    return src


@pytest.fixture(scope="module")
def serial(tmp_path_factory, rootdir) -> dict[str, Any]:
    """The alabaster root built with ``-j 1``."""
    src = _copy_root(tmp_path_factory, rootdir, "alabaster-j1")
    return {"src": src, **_build(src)}


def main_content(path: Path) -> str:
    """The page's main content with the run times (the only volatile part) blanked."""
    body = soup(path).select_one("div.body")
    assert body is not None, path
    return re.sub(r"\b\d+\.\d+ s\b", "# s", str(body))


def assert_own_outputs(page: BeautifulSoup, page_name: str) -> int:
    """Every cell of ``page_name`` shows the output of its own code; the number of such cells."""
    checked = 0
    for cell in cells(page):
        code = cell.select_one(".livecells-input")
        mark = MARK.search(code.get_text()) if code is not None else None
        if mark is None or not mark.group(1).startswith(page_name + "-"):
            continue
        framework = next(c for c in ("pytorch", "mxnet") if f"livecells-{c}" in cell["class"])
        assert f"{mark.group(1)} {framework}" in outputs(cell), (page_name, code.get_text(), outputs(cell))
        checked += 1
    return checked


def test_alabaster_builds_and_shows_tabs(serial):
    assert "WARNING" not in serial["warnings"], serial["warnings"]
    assert len(serial["ran"]) == 4
    assert serial["app"].config.html_theme == "alabaster"
    for name in PAGES:
        page = soup(serial["outdir"] / f"{name}.html")
        assert page.select_one('link[href^="_static/alabaster.css"]') is not None
        assert page.select_one('link[href^="_static/sphinx-design.min.css"]') is not None
        assert page.select_one('script[src^="_static/design-tabs.js"]') is not None
        tab_sets = page.select("div.body div.sd-tab-set")
        assert tab_sets
        for tab_set in tab_sets:
            labels = tab_set.select(":scope > label.sd-tab-label")
            assert [label.get_text(strip=True) for label in labels] == ["PyTorch", "MXNet"]
            assert len(tab_set.select(":scope > input[type=radio][checked]")) == 1
        assert assert_own_outputs(page, name) == 2 * len(tab_sets)
    assert (serial["outdir"] / "_static" / "design-tabs.js").is_file()


@pytest.mark.slow
def test_parallel_build_gives_the_same_pages(serial, tmp_path_factory, rootdir):
    src = _copy_root(tmp_path_factory, rootdir, "alabaster-j2")
    parallel = _build(src, parallel=2)
    app = parallel["app"]
    assert app.parallel == 2 and app.is_parallel_allowed("read") and app.builder.parallel_ok
    assert "WARNING" not in parallel["warnings"], parallel["warnings"]
    assert len(parallel["ran"]) == 4
    for name in PAGES:
        one = main_content(serial["outdir"] / f"{name}.html")
        two = main_content(parallel["outdir"] / f"{name}.html")
        assert one.count('class="sd-tab-set') == (1 if name == "index" else 2)
        assert one == two, name


@pytest.mark.slow
@pytest.mark.parametrize("buildername", ["text", "dirhtml", "singlehtml"])
def test_other_builders_give_sensible_output(serial, buildername, tmp_path):
    built = _build(serial["src"], buildername, builddir=tmp_path)
    assert "WARNING" not in built["warnings"], built["warnings"]
    state = built["app"].env.livecells_outcome
    assert built["ran"] == [] and (state.ran, state.cached) == (0, 4)  # everything from the store
    out = built["outdir"]
    if buildername == "text":
        text = {name: (out / f"{name}.txt").read_text(encoding="utf-8") for name in PAGES}
        for mark in ("index-one", "second-one", "second-two"):
            page = text[mark.split("-")[0]]
            assert f"{mark} pytorch" in page and f"{mark} mxnet" in page, page
        assert "PyTorch" in text["second"] and "MXNet" in text["second"]
        assert text["index"].count("index-everyone") == 2  # the all cell: its code, its output once
    elif buildername == "dirhtml":
        for name, path in (("index", "index.html"), ("second", "second/index.html")):
            assert assert_own_outputs(soup(out / path), name) == 2 * (1 if name == "index" else 2)
        assert soup(out / "index.html").select_one('a[href="second/#second-cell"]') is not None
    else:
        page = soup(out / "index.html")
        assert assert_own_outputs(page, "index") == 2
        assert assert_own_outputs(page, "second") == 4
        ids = [tab["id"] for tab in page.select("div.sd-tab-set > input")]
        assert len(ids) == 6 and len(set(ids)) == 6
