"""A whole book: notebook downloads, the live-report page, LaTeX of one framework, other builders.

tests/roots/test-book names its light frameworks pytorch and mxnet: one HTML build runs its four
sessions, on :class:`helpers.FakeKernels` (notebooks, the report and LaTeX are the subject, not
kernels); every other builder reads them from the store.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import nbformat
import pytest
from sphinx.testing.util import SphinxTestApp

from livecells.convert.rst import convert_text

import paths
import timing
from helpers import FakeKernels, build_site, soup

DATA = paths.DATA / "convert"


def _build(
    src: Path, builder: str, builddir: Path | None = None, kernels: FakeKernels | None = None, **overrides
) -> tuple[SphinxTestApp, str]:
    return build_site(
        src, builder, builddir=builddir, kernels=kernels,
        confoverrides={f"livecells_{k}": v for k, v in overrides.items()},
    )


@pytest.fixture(scope="module")
def book(tmp_path_factory, rootdir):
    """Build the book with html (running its cells), then every other builder from the store."""
    src = tmp_path_factory.mktemp("book") / "src"
    shutil.copytree(rootdir / "test-book", src)
    kernels = FakeKernels()
    html, html_warnings = _build(src, "html", kernels=kernels)
    result = {
        "ran": kernels.take(),
        "src": src,
        "html": html.outdir,
        "html_warnings": html_warnings,
        "report": (html.outdir / "report.html").read_text(encoding="utf-8"),
    }
    stored = src / "_other"  # builders that only read the store share their own doctrees
    for builder in ("latex", "text", "dirhtml", "epub"):
        app, warnings = _build(src, builder, stored, kernels, execute="cache")
        result[builder], result[f"{builder}_warnings"] = app.outdir, warnings
    app, _ = _build(src, "latex", src / "_all", kernels, execute="cache", latex_framework="all")
    result["latex_all"] = app.outdir
    result["ran_by_others"] = kernels.take()

    # One page changes: only its session runs, and the report page (unchanged) is written anew.
    other = src / "other.rst"
    other.write_text(other.read_text().replace('"torch" + "other"', '"torch" + "changed"'))
    rebuilt, _ = _build(src, "html", kernels=kernels)
    result["report_after"] = (rebuilt.outdir / "report.html").read_text(encoding="utf-8")
    result["state_after"] = rebuilt.env.livecells_outcome
    result["ran_after"] = kernels.take()
    return result


def _tex(outdir: Path) -> str:
    return (outdir / "book.tex").read_text(encoding="utf-8")


# -- notebooks -------------------------------------------------------------------------------------


def _notebook(outdir: Path, docname: str, framework: str) -> nbformat.NotebookNode:
    path = outdir / "_downloads" / "livecells" / f"{docname}.{framework}.ipynb"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_notebooks_hold_each_frameworks_cells_and_outputs(book):
    torch = _notebook(book["html"], "index", "pytorch")
    code = [c for c in torch.cells if c.cell_type == "code"]
    assert len(code) == 3
    assert "torchcode1" in code[0].source and "mxnet" not in "".join(c.source for c in code)
    assert code[0].outputs[0].output_type == "stream" and code[0].outputs[0].text == "torchout1\n"
    assert code[1].outputs[0].output_type == "display_data" and "image/png" in code[1].outputs[0].data
    assert code[2].outputs[0].text == "everywhere\n"  # the `all` cell is in every notebook
    assert [c.execution_count for c in code] == [1, 2, 3]
    assert torch.metadata.kernelspec.name == "python3"
    assert torch.metadata.livecells == {"page": "index", "framework": "pytorch"}
    markdown = [c.source for c in torch.cells if c.cell_type == "markdown"]
    assert markdown[0].startswith("# Book") and "`inline code`" in markdown[0]
    assert "Between the groups." in markdown[1]

    mx = _notebook(book["html"], "index", "mxnet")
    mx_code = [c for c in mx.cells if c.cell_type == "code"]
    assert ["mxnetcode1" in mx_code[0].source, "mxnetcode2" in mx_code[1].source] == [True, True]
    assert mx_code[1].outputs[0].output_type == "execute_result"
    assert mx_code[1].outputs[0].data["text/plain"] == "42"
    # Stable ids: the same page gives the same file.
    assert [c.id for c in mx.cells] == [f"cell-{n}" for n in range(len(mx.cells))]


def test_download_links_sit_before_the_first_tab_set_and_resolve(book):
    for outdir, page in ((book["html"], "index.html"), (book["dirhtml"], "index.html"),
                         (book["html"], "other.html"), (book["dirhtml"], "other/index.html")):
        path = outdir / page
        html = soup(path)
        links = html.select("p.livecells-downloads a")
        assert [a.get_text() for a in links] == ["PyTorch", "MXNet"], path
        for a in links:
            assert (path.parent / a["href"]).resolve().is_file(), a["href"]
        paragraph = html.select_one("p.livecells-downloads")
        tab_set = html.select_one("div.sd-tab-set")
        assert paragraph.find_next("div", class_="sd-tab-set") is tab_set


IMAGE_CELL = """
.. live-cell:: pytorch

   import base64
   from IPython.display import Image, display
   display(Image(data=base64.b64decode(
       "iVBORw0KGgoAAAANSUhEUgAAAAQAAAAECAIAAAAmkwkpAAAAEElEQVR4nGP438AARwzEcQB+ohfxXaFgBQAAAABJRU5ErkJggg=="
   )))
"""
# Names a URL must quote; a folder of them too (its links go up: "../").
ODD_PAGES = ["c#-interop", "100%", "why?", "a b", "ünï", "c#dir/p%20q"]


@pytest.mark.slow
def test_download_and_image_urls_of_pages_with_odd_names_are_quoted_and_resolve(tmp_path, rootdir):
    from urllib.parse import unquote, urlsplit

    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-book", src)
    (src / "report.rst").unlink()
    toctree = "".join(f"   {name}\n" for name in ODD_PAGES)
    (src / "index.rst").write_text(f"Odd\n===\n\n.. toctree::\n\n{toctree}{IMAGE_CELL}")
    (src / "other.rst").unlink()
    for name in ODD_PAGES:
        (src / f"{name}.rst").parent.mkdir(parents=True, exist_ok=True)
        (src / f"{name}.rst").write_text(f"Page\n====\n{IMAGE_CELL}")
    kernels = FakeKernels()
    for builder in ("html", "dirhtml"):
        app, warnings = _build(src, builder, src / f"_{builder}", kernels, execute="auto" if builder == "html" else "cache")
        assert "WARNING" not in warnings, warnings
        for name in ODD_PAGES:
            path = app.outdir / (f"{name}.html" if builder == "html" else f"{name}/index.html")
            html = soup(path)
            urls = [a["href"] for a in html.select("p.livecells-downloads a")]
            urls += [img["src"] for img in html.select(".livecells-output img")]
            assert len(urls) == 2, (path, urls)
            for url in urls:
                assert urlsplit(url).path == url and url.isascii() and " " not in url, url  # no "#", "?"
                assert re.fullmatch(r"([^%]|%[0-9A-F]{2})*", url), url
                assert (path.parent / unquote(url)).resolve().is_file(), (path, url)


def test_epub_text_latex_have_no_notebooks(book):
    for builder in ("epub", "text", "latex"):
        assert not list(book[builder].rglob("*.ipynb")), builder
    assert "livecells-downloads" not in (book["epub"] / "index.xhtml").read_text(encoding="utf-8")


# -- the report ------------------------------------------------------------------------------------


def _report_rows(page: str) -> list[list[str]]:
    from bs4 import BeautifulSoup

    table = BeautifulSoup(page, "html.parser").select_one("table.livecells-report")
    return [[td.get_text(" ", strip=True) for td in tr.select("td")] for tr in table.select("tbody tr")]


def test_report_lists_every_session_with_a_chart(book):
    rows = _report_rows(book["report"])
    assert [(r[0], r[1], r[2], r[3], r[7]) for r in rows] == [
        ("Book", "PyTorch", "ok", "3", "this build"),
        ("Book", "MXNet", "ok", "3", "this build"),
        ("Other <page> & “co”", "PyTorch", "ok", "1", "this build"),
        ("Other <page> & “co”", "MXNet", "ok", "1", "this build"),
    ]
    assert all(re.fullmatch(r"\d+\.\d+\s+s", r[4]) for r in rows)
    summary = "4 sessions on 2 pages: 4 run in this build, 0 from the store, 0 not run; 0 failed"
    assert summary in book["report"]
    assert 'href="other.html"' in book["report"]
    svg = re.search(r"<svg.*?</svg>", book["report"], re.S).group(0)
    assert svg.count("<rect") == 4
    assert "Other &lt;page&gt; &amp;" in svg and "<page>" not in svg


def test_report_is_rewritten_when_a_session_runs(book):
    assert book["state_after"].ran == 1 and book["ran_after"] == [("other", "pytorch")]
    rows = _report_rows(book["report_after"])
    assert [r[7] for r in rows] == ["store", "store", "this build", "store"]
    assert "4 sessions on 2 pages: 1 run in this build, 3 from the store" in book["report_after"]


def test_report_in_text_and_latex_without_chart(book):
    text = (book["text"] / "report.txt").read_text(encoding="utf-8")
    assert "0 run in this build, 4 from the store" in text
    assert re.search(r"\| Book\s+\| MXNet\s+\| ok\s+\| 3", text)
    assert "<svg" not in text and "<svg" not in _tex(book["latex"])
    assert "4 from the store" in _tex(book["latex"])


# -- LaTeX -----------------------------------------------------------------------------------------


def test_latex_prints_the_chosen_frameworks_cells_styled(book):
    tex = _tex(book["latex"])
    assert "torchcode1" in tex and "torchout1" in tex
    assert "mxnetcode1" not in tex and "mxnetout1" not in tex and "mxnetother" not in tex
    # Each page's cells with that page's results (LaTeX assembles every page into one tree).
    assert "torchother" in tex
    assert r"\usepackage{livecells}" in tex and (book["latex"] / "livecells.sty").is_file()
    code = tex.index("torchcode1")
    assert tex.rfind(r"\begingroup\livecellsstyleinputcell", 0, code) > tex.rfind(r"\endgroup", 0, code)
    output = tex.index("torchout1")
    assert tex.rfind(r"\begingroup\livecellsstyleoutputcell", 0, output) > code
    image = re.search(r"\\sphinxincludegraphics\{\{(livecells-[0-9a-f]+)\}\.png\}", tex)
    assert image and (book["latex"] / f"{image.group(1)}.png").is_file()


def test_latex_all_prints_every_framework_labelled(book):
    tex = _tex(book["latex_all"])
    torch, mx = tex.index("torchcode1"), tex.index("mxnetcode1")
    assert torch < mx
    labels = re.findall(r"\\subsubsection\*\{(PyTorch|MXNet)\}", tex[:torch])
    assert labels[-1] == "PyTorch"
    assert re.findall(r"\\subsubsection\*\{(PyTorch|MXNet)\}", tex[torch:mx]) == ["MXNet"]
    assert "mxnetout1" in tex and "mxnetother" in tex


@pytest.mark.skipif(shutil.which("latexmk") is None, reason="latexmk (TeX) is not installed")
def test_latex_compiles_to_pdf(book, tmp_path):
    outdir = tmp_path / "latex"
    shutil.copytree(book["latex"], outdir)
    done = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", "book.tex"],
        cwd=outdir, capture_output=True, text=True, timeout=timing.PROCESS,
    )
    assert done.returncode == 0, done.stdout[-3000:]
    assert (outdir / "book.pdf").stat().st_size > 10_000


def test_other_builders_build_cleanly_from_the_store(book):
    assert book["ran"] == [(page, fw) for page in ("index", "other") for fw in ("mxnet", "pytorch")]
    assert book["ran_by_others"] == []
    for builder in ("text", "dirhtml", "epub"):
        assert "Traceback" not in book[f"{builder}_warnings"], book[f"{builder}_warnings"]
        assert "livecells" not in book[f"{builder}_warnings"], book[f"{builder}_warnings"]
    assert "torchout1" in (book["text"] / "index.txt").read_text(encoding="utf-8")
    assert "livecells" not in book["html_warnings"], book["html_warnings"]


# -- a converted d2lbook chapter -------------------------------------------------------------------


def test_converted_d2lbook_chapter_builds_with_downloads_and_one_framework_in_latex(tmp_path, rootdir):
    """The converter's d2lbook fixture, converted and built without running (it needs d2l)."""
    converted = convert_text((DATA / "async-computation.d2lbook.rst").read_text(encoding="utf-8"))
    src = tmp_path / "chapter"
    src.mkdir()
    shutil.copy(rootdir / "test-book" / "conf.py", src / "conf.py")
    (src / "index.rst").write_text(converted.text, encoding="utf-8")
    html, _ = _build(src, "html", execute="off")
    page = soup(html.outdir / "index.html")
    assert [a.get_text() for a in page.select("p.livecells-downloads a")] == ["PyTorch", "MXNet"]
    notebook = _notebook(html.outdir, "index", "pytorch")
    sources = "".join(c.source for c in notebook.cells if c.cell_type == "code")
    assert "from d2l import torch as d2l" in sources and "mxnet" not in sources
    assert all(not c.outputs for c in notebook.cells if c.cell_type == "code")  # nothing ran
    latex, _ = _build(src, "latex", execute="off")
    tex = _tex(latex.outdir)
    assert "{torch}" in tex and "0.0019" in tex  # the code, and its recorded output
    assert "npx" not in tex and "0.0222" not in tex  # nor MXNet's
