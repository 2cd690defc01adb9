"""Real d2lbook chapters, converted and built with real torch and mxnet kernels.

The chapters come from the d2l corpus (real d2lbook 1.0.3 output, with the real ``d2l`` package,
figures and ``d2l.bib``; see its README), converted at test time with ``python -m livecells
convert``'s own code. One HTML build runs parameters, model-construction, probability and
linear-regression-scratch (eight sessions, about 15 s on two cores, mostly the imports of torch,
mxnet and d2l in the two templates, and the training); the other builds read its store or run nothing. Framework prose (``live-text``) and
recorded outputs are also checked on ``tests/roots/test-d2l-text``, a small site on plain python3
kernels.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import docutils
import pytest

from livecells.convert.rst import convert_text

import timing
from conftest import kernel_processes
from helpers import build_site, built_page, d2l_corpus

# pybtex-apa-style, d2l's bibliography style, still writes pybtex's old `href [url, text]` form.
pytestmark = [
    pytest.mark.kernel,
    pytest.mark.filterwarnings(r"ignore:href \[url, text\] is deprecated:DeprecationWarning"),
]


CORPUS = d2l_corpus()

CHAPTERS = [
    "chapter_builders-guide/parameters",
    "chapter_builders-guide/model-construction",
    "chapter_preliminaries/probability",
    "chapter_linear-regression/linear-regression-scratch",
    "chapter_references/zreferences",
]
CONF = """\
extensions = ["livecells", "sphinxcontrib.bibtex"]
project = "d2l corpus"
numfig = True
math_numfig = True
bibtex_bibfiles = ["d2l.bib"]
livecells_depends = ["d2l/*.py"]
livecells_timeout = 300
# As the migration guide advises: each framework's template imports the book's d2l module too.
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "preload": ["torch", "d2l.torch"]},
    "mxnet": {"label": "MXNet", "preload": ["mxnet", "d2l.mxnet"]},
}
"""
INDEX = "d2l corpus\n==========\n\n.. toctree::\n   :numbered:\n\n" + "".join(f"   {c}\n" for c in CHAPTERS)
#: Warnings a plain Sphinx build of these chapters gives too: references into chapters that are
#: not in the corpus (its README lists them) or not in this build (synthetic-regression-data).
DANGLING = {
    ("model-construction.rst", "sec_mlp"),
    ("model-construction.rst", "sec_autograd"),
    *(("linear-regression-scratch.rst", label) for label in (
        "sec_linear_regression", "sec_synthetic-regression-data", "subsec_broadcasting",
        "oo-design-training", "oo-design-utilities", "subsec_oo-design-models",
        "eq_linreg-y-vec", "eq_mse",
    )),
}
DANGLING_WARNING = re.compile(r"([\w-]+\.rst):\d+: WARNING: (?:undefined label: '([\w-]+)'|equation not found: ([\w-]+))")


def _site(target: Path) -> Path:
    target.mkdir(parents=True)
    for folder in ("d2l", "img"):
        shutil.copytree(CORPUS / folder, target / folder)
    shutil.copy(CORPUS / "d2l.bib", target)
    for chapter in CHAPTERS:
        source = CORPUS / f"{chapter}.rst"
        out = target / f"{chapter}.rst"
        out.parent.mkdir(parents=True, exist_ok=True)
        text = convert_text(source.read_text(encoding="utf-8"), source=str(source)).text
        out.write_text(text, encoding="utf-8")
        for figure in source.parent.glob(f"output_{source.stem}_*"):
            shutil.copy(figure, out.parent)
    (target / "conf.py").write_text(CONF)
    (target / "index.rst").write_text(INDEX)
    return target


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    if CORPUS is None:
        if os.environ.get("CI"):
            pytest.fail("the d2l corpus (../shared/d2l-corpus) is missing on CI")
        pytest.skip("the d2l corpus (../shared/d2l-corpus) is not here")
    src = _site(tmp_path_factory.mktemp("d2l") / "src")
    # The chapters import the book's d2l package, as d2l-en's CI makes it importable (it runs
    # `pip install .`); here the kernels find it on PYTHONPATH, as the migration guide says.
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])))
        app, warnings = build_site(src, "html")
    off, off_warnings = build_site(src, "html", builddir=src / "_off", confoverrides={"livecells_execute": "off"})
    latex, latex_warnings = build_site(src, "latex", builddir=src / "_latex", confoverrides={"livecells_execute": "cache"})
    return {
        "src": src,
        "html": app.outdir,
        "warnings": warnings,
        "off": off.outdir,
        "off_warnings": off_warnings,
        "latex": latex.outdir,
        "latex_warnings": latex_warnings,
        "kernels_left": kernel_processes(),
    }


def _page(book, chapter: str, which: str = "html"):
    return built_page(book[which] / f"{chapter}.html")


def _warning_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if "WARNING" in line or "ERROR" in line]


def _dangling(line: str) -> tuple[str, str] | None:
    match = DANGLING_WARNING.search(line)
    return (match[1], match[2] or match[3]) if match else None


def _unexpected(text: str) -> list[str]:
    return [line for line in _warning_lines(text) if _dangling(line) not in DANGLING]


@pytest.mark.frameworks
def test_only_the_corpus_dangling_references_warn(book):
    """-W clean but for references to chapters outside the corpus: no 'Unknown target name' from
    mxnet's `dense1_ (` printouts, nothing from prose, figures, citations or the cells."""
    assert _unexpected(book["warnings"]) == []
    assert {_dangling(line) for line in _warning_lines(book["warnings"])} == DANGLING
    assert book["kernels_left"] == []


@pytest.mark.frameworks
def test_every_cell_runs_live_and_replaces_its_recorded_output(book):
    for chapter in CHAPTERS[:4]:
        page = _page(book, chapter)
        cells = page.select("div.livecells-cell")
        assert cells, chapter
        for cell in cells:
            code = cell.select_one(".livecells-input").get_text()
            meta = " ".join(p.get_text() for p in cell.select("p.livecells-meta"))
            assert cell.select("p.livecells-live"), f"{chapter}: not live: {code[:60]!r} ({meta})"
            assert not cell.select(".livecells-recorded"), f"{chapter}: recorded beside live: {code[:60]!r}"
            assert not cell.select(".livecells-error"), f"{chapter}: failed: {code[:60]!r}"


@pytest.mark.frameworks
@pytest.mark.parametrize("chapter", ["chapter_preliminaries/probability", "chapter_linear-regression/linear-regression-scratch"])
def test_figures_are_live_images_in_place_of_the_recorded_svgs(book, chapter):
    page = _page(book, chapter)
    images = [img["src"] for img in page.select("div.livecells-cell img")]
    assert len(images) == 2 and all("livecells-" in src for src in images)
    assert not page.select('img[src*="output_"]')
    # The figures do not split the tab set: the plotting cells of both frameworks share one.
    plotting = [ts for ts in page.select("div.sd-tab-set") if ts.select("div.livecells-cell img")]
    assert len(plotting) == 1 and len(plotting[0].select("div.livecells-cell img")) == 2


@pytest.mark.frameworks
def test_shared_cells_run_in_both_sessions(book):
    """d2lbook writes a cell that is the same in both tabs (and has no output) once, outside the
    tabs: it runs after each framework's earlier cells, and the training after it works."""
    page = _page(book, "chapter_linear-regression/linear-regression-scratch")
    shared = [c for c in page.select("div.livecells-cell") if not c.find_parent("div", class_="sd-tab-set")]
    assert [c.select_one(".livecells-input").get_text().split("\n")[1] for c in shared] == [
        "def loss(self, y_hat, y):", "def configure_optimizers(self):"]
    for cell in shared:
        assert len(cell.select("p.livecells-live")) == 2  # one timing line per framework


def test_tabs_are_synced_sphinx_design_tab_sets(book):
    for chapter in CHAPTERS[:4]:
        page = _page(book, chapter)
        assert not page.select(".mdl-tabs"), chapter  # no d2lbook tab HTML left
        tab_sets = page.select("div.sd-tab-set")
        assert tab_sets, chapter
        for tab_set in tab_sets:
            labels = tab_set.select("label.sd-tab-label")
            assert [lab["data-sync-group"] for lab in labels] == ["framework"] * len(labels)
            assert {lab["data-sync-id"] for lab in labels} <= {"pytorch", "mxnet"}


def _panel_of(page, text: str) -> str:
    """The sync id of the tab panel whose content holds ``text``."""
    for tab_set in page.select("div.sd-tab-set"):
        for label in tab_set.select("label.sd-tab-label"):
            content = label.find_next_sibling("div", class_="sd-tab-content")
            if text in content.get_text():
                return label["data-sync-id"]
    raise AssertionError(f"{text!r} is in no tab panel")


def test_framework_prose_is_in_its_own_frameworks_panel(book):
    page = _page(book, "chapter_builders-guide/parameters")
    # d2lbook's :begin_tab: prose "Parameters are complex objects...", one copy per framework,
    # sits between two cells of its framework's panel, as in the source.
    tab_set = next(ts for ts in page.select("div.sd-tab-set") if "Parameters are complex objects" in ts.get_text())
    panels = {
        label["data-sync-id"]: [el.get_text() for el in label.find_next_sibling("div").select(":scope > div")]
        for label in tab_set.select("label.sd-tab-label")
    }
    assert list(panels) == ["pytorch", "mxnet"]
    for framework, first, last in [("pytorch", "net[2].bias.data", "net[2].weight.grad =="),
                                   ("mxnet", "net[1].bias.data()", "net[1].weight.grad()")]:
        assert len(panels[framework]) == 3, panels[framework]
        assert first in panels[framework][0] and last in panels[framework][2]
        assert "Parameters are complex objects" in panels[framework][1]
    # Each section ends with a per-framework "Discussions" link: a prose-only tab set.
    assert _panel_of(page, "Discussions") == "pytorch"
    links = {
        label["data-sync-id"]: [a["href"] for a in label.find_next_sibling("div").select("a.reference.external")]
        for ts in page.select("div.sd-tab-set") if "Discussions" in ts.get_text()
        for label in ts.select("label.sd-tab-label")
    }
    assert links == {"pytorch": ["https://discuss.d2l.ai/t/57"], "mxnet": ["https://discuss.d2l.ai/t/56"]}
    # Labels and numbered figures in prose that follows the tabs still resolve.
    construction = _page(book, "chapter_builders-guide/model-construction")
    assert construction.select_one('a[href="#fig-blocks"]').get_text(strip=True) == "Fig. 2.1"


def test_bibliography_is_d2ls_apa_page_and_every_citation_links_into_it(book):
    """zreferences.rst as d2lbook wrote it (``:style: apa``, the book extra's pybtex-apa-style):
    APA labels and entries for exactly the works these chapters cite, each citation a link to its
    entry."""
    page = _page(book, "chapter_references/zreferences")
    entries = {div["id"]: div.get_text(" ", strip=True) for div in page.select("div.citation")}
    assert len(entries) == 6  # the works cited by the four chapters, not the whole d2l.bib
    # APA's "Authors (Year). Title." (pybtex's default style gives "Kaiming He, Xiangyu Zhang, ...")
    assert "He, K., Zhang, X., Ren, S., & Sun, J. (2016). Deep residual learning" in " ".join(entries.values())
    cited = {}
    for chapter in CHAPTERS[:4]:
        for link in _page(book, chapter).select('a[href^="../chapter_references/zreferences.html#"]'):
            cited[link.get_text(strip=True)] = link["href"].split("#")[1]
    assert set(cited) == {
        "He et al., 2016", "Kolmogorov, 1933", "DerKiureghian & Ditlevsen, 2009",
        "Revels et al., 2016", "Mangram, 2013", "Vapnik, 1992",
    }
    for label, target in cited.items():
        assert entries[target].startswith(f"[ {label} ]"), (label, entries[target])


def test_recorded_outputs_are_shown_literally_when_nothing_runs(book):
    assert _unexpected(book["off_warnings"]) == []
    page = _page(book, "chapter_builders-guide/parameters", "off")
    recorded = [b.get_text() for b in page.select(".livecells-recorded")]
    assert any(text.startswith("dense1_ (\n  Parameter dense1_weight") for text in recorded)
    assert any(text.startswith("sequential0_ (") for text in recorded)
    figures = _page(book, "chapter_preliminaries/probability", "off")
    shown = [img["src"] for img in figures.select(".livecells-recorded img")]
    assert [Path(src).name for src in shown] == ["output_probability_245b7d_48_0.svg", "output_probability_245b7d_51_0.svg"]
    assert all((book["off"] / "chapter_preliminaries" / src).is_file() for src in shown)


@pytest.mark.frameworks
def test_latex_has_the_first_frameworks_code_and_prose_only(book):
    assert _unexpected(book["latex_warnings"]) == []
    tex = next(book["latex"].glob("*.tex")).read_text(encoding="utf-8")
    assert tex.count("Parameters are complex objects") == 1  # the pytorch copy of the prose
    assert "LazyLinear" in tex and "npx" not in tex and "dense1" not in tex
    assert "discuss.d2l.ai/t/57" in tex and "discuss.d2l.ai/t/56" not in tex


# -- framework prose and recorded outputs on a small site (plain python3 kernels) ------------------


@pytest.fixture(scope="module")
def prose(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("prose") / "src"
    shutil.copytree(rootdir / "test-d2l-text", src)
    result = {"src": src}
    for name, builder, overrides in [
        ("html", "html", {}),
        ("off", "html", {"livecells_execute": "off"}),
        ("latex", "latex", {"livecells_execute": "cache"}),
        ("latex_off", "latex", {"livecells_execute": "off"}),
        ("latex_all", "latex", {"livecells_execute": "cache", "livecells_latex_framework": "all"}),
        ("latex_mxnet", "latex", {"livecells_execute": "cache", "livecells_latex_framework": "mxnet"}),
        ("text", "text", {"livecells_execute": "cache"}),
    ]:
        app, warnings = build_site(src, builder, builddir=src / f"_{name}", confoverrides=overrides)
        result[name], result[f"{name}_warnings"] = app.outdir, warnings
    result["kernels_left"] = kernel_processes()
    return result


def _panels(tab_set) -> dict[str, list[str]]:
    """A tab set's panels by sync id: the text of each top-level block of the panel."""
    return {
        label["data-sync-id"]: [el.get_text(" ", strip=True) for el in label.find_next_sibling("div").select(":scope > div")]
        for label in tab_set.select("label.sd-tab-label")
    }


def _tab_set_with(page, text: str):
    return next(ts for ts in page.select("div.sd-tab-set") if text in ts.get_text())


def test_prose_warnings_are_located_and_nothing_else_warns(prose):
    src = prose["src"]
    # The figure directive's line; docutils 0.20 numbers the figure node from the line after it.
    figure_line = 79 if docutils.__version_info__ >= (0, 21) else 80
    expected = {
        f"{src}/index.rst:{figure_line}: WARNING: recorded figure output_index_abc123_9_0.svg not found",
        f"{src}/index.rst:123: WARNING: live-text: unknown framework 'tensorflow'",
        f"{src}/pytorch-only.rst:8: WARNING: live-text: no cell of this page is for 'mxnet'",
    }
    for build in ("html", "off", "latex", "latex_off", "latex_all", "latex_mxnet", "text"):
        lines = _warning_lines(prose[f"{build}_warnings"])
        assert {line.split(" (")[0].split("; ")[0] for line in lines} == expected, (build, lines)
    assert prose["kernels_left"] == []


def test_prose_joins_its_frameworks_panel_before_and_after_the_cells(prose):
    page = built_page(prose["html"] / "index.html")
    panels = _panels(_tab_set_with(page, "TORCHPROSE1"))
    assert list(panels) == ["pytorch", "mxnet"]
    torch, mx = panels["pytorch"], panels["mxnet"]
    assert len(torch) == 3 and torch[0].startswith("TORCHPROSE1") and "torchout1" in torch[1]
    assert torch[2].startswith("TORCHPROSE2")
    assert len(mx) == 2 and mx[0].startswith("MXPROSE1") and "dense1_ (" in mx[1]
    # Labels, equations and numbered figures inside the prose resolve.
    assert page.select_one('a[href="#torch-fact"]') and page.select_one("#torch-fact")
    assert page.select_one('a.reference.internal[href="#equation-eq-torch"]').get_text() == "(1)"
    assert page.select_one('a[href="#fig-inside"]').get_text() == "Fig. 1"


def test_standing_alone_prose_is_a_synced_tab_set(prose):
    page = built_page(prose["html"] / "index.html")
    tab_set = _tab_set_with(page, "TORCHALONE1")
    assert not tab_set.select("div.livecells-cell")
    panels = _panels(tab_set)
    # Two live-text blocks of one framework in a row share its tab.
    assert panels == {"pytorch": ["TORCHALONE1 standing alone."],
                      "mxnet": ["MXALONE1 standing alone.", "MXALONE2 the same tab as MXALONE1."]}
    labels = tab_set.select("label.sd-tab-label")
    assert [lab["data-sync-group"] for lab in labels] == ["framework", "framework"]
    # Prose between two groups opens the next one; prose in a list item stays there.
    assert _panels(_tab_set_with(page, "TORCHBETWEEN"))["pytorch"][0].startswith("TORCHBETWEEN")
    assert "x + 10" in _panels(_tab_set_with(page, "TORCHBETWEEN"))["pytorch"][1]
    assert page.select_one("li div.sd-tab-set").get_text(" ", strip=True).endswith("MXINLIST inside a list.")
    # A page without cells; prose for a framework unknown to the book stays, as plain prose.
    assert _panels(built_page(prose["html"] / "standalone.html").select_one("div.sd-tab-set")) == {
        "pytorch": ["TORCHNOCELLS on a page without cells."], "mxnet": ["MXNOCELLS on a page without cells."]}
    tf = next(p for p in page.select("p") if "TFPROSE" in p.get_text())
    assert not tf.find_parent("div", class_="sd-tab-set")


def test_recorded_figures_are_replaced_by_live_ones_and_never_split_the_group(prose):
    page = built_page(prose["html"] / "index.html")
    plot = _tab_set_with(page, "plt.plot")
    assert [lab["data-sync-id"] for lab in plot.select("label.sd-tab-label")] == ["pytorch", "mxnet"]
    images = [img["src"] for img in plot.select("img")]
    assert len(images) == 1 and "livecells-" in images[0]
    assert not page.select(".livecells-recorded")
    # A figure with a caption after a cell is the page's own figure: after the tab set.
    captioned = page.select_one('img[src$="output_index_abc123_6_0.svg"]').find_parent("figure")
    assert "A caption" in captioned.get_text() and not captioned.find_parent("div", class_="sd-tab-set")


def test_recorded_outputs_show_literally_when_not_run(prose):
    page = built_page(prose["off"] / "index.html")
    recorded = [el.get_text() for el in page.select(".livecells-recorded")]
    assert "torchrecorded1" in recorded[0]
    assert "dense1_ (\n  Parameter dense1_weight (shape=(1, 8), dtype=float32)\n) *unbalanced `tick |sub| [1]_ anon__" in recorded[1]
    figures = [img["src"] for img in page.select(".livecells-recorded img")]
    assert figures == ["_images/output_index_abc123_3_0.svg", "_images/output_index_abc123_5_0.svg"]
    assert all((prose["off"] / src).is_file() for src in figures)
    assert "recorded figure output_index_abc123_9_0.svg: file not found" in recorded
    cell = next(c for c in page.select("div.livecells-cell") if "plt.plot" in c.get_text())
    assert "recorded output, from the page's source" in cell.get_text()


def test_latex_prints_the_chosen_frameworks_prose(prose):
    tex = (prose["latex"] / "prose.tex").read_text(encoding="utf-8")
    assert "TORCHPROSE1" in tex and "TORCHALONE1" in tex and "TORCHNOCELLS" in tex
    assert "MXPROSE1" not in tex and "MXALONE1" not in tex and "MXINLIST" not in tex
    assert "TFPROSE" in tex and r"\label{\detokenize{index:torch-fact}}" in tex
    mxnet = (prose["latex_mxnet"] / "prose.tex").read_text(encoding="utf-8")  # the MXNet book
    assert "MXPROSE1" in mxnet and "MXALONE1" in mxnet and "MXINLIST" in mxnet and "MXNOCELLS" in mxnet
    assert "TORCHPROSE1" not in mxnet and "TORCHALONE1" not in mxnet and "TORCHNOCELLS" not in mxnet
    every = (prose["latex_all"] / "prose.tex").read_text(encoding="utf-8")
    for marker in ("TORCHPROSE1", "MXPROSE1", "MXALONE2", "MXINLIST", "MXUNUSED"):
        assert every.count(marker) == 1, marker
    assert every.count(r"\label{\detokenize{index:torch-fact}}") == 1
    # LaTeX cannot include an SVG (without an image converter): a recorded SVG figure is named.
    off = (prose["latex_off"] / "prose.tex").read_text(encoding="utf-8")
    assert "recorded figure output\\_index\\_abc123\\_5\\_0.svg: not shown in this format" in off
    assert "output_index_abc123_3_0" not in off and "output_index_abc123_5_0" not in off
    assert "torchrecorded1" in off and "dense1" not in off
    text = (prose["text"] / "index.txt").read_text(encoding="utf-8")
    assert "TORCHPROSE1" in text and "MXPROSE1" in text and "[ MXNet ]" in text


def test_notebooks_hold_their_own_frameworks_prose(prose):
    import nbformat

    folder = prose["html"] / "_downloads" / "livecells"
    torch = nbformat.read(folder / "index.pytorch.ipynb", as_version=4)
    mx = nbformat.read(folder / "index.mxnet.ipynb", as_version=4)
    torch_md = "\n".join(c.source for c in torch.cells if c.cell_type == "markdown")
    mx_md = "\n".join(c.source for c in mx.cells if c.cell_type == "markdown")
    assert "TORCHPROSE1" in torch_md and "TORCHBETWEEN" in torch_md and "MXPROSE1" not in torch_md
    assert "MXPROSE1" in mx_md and "MXINLIST" in mx_md and "TORCHPROSE1" not in mx_md
    first = [c.cell_type for c in torch.cells[:3]]
    assert first[:2] == ["markdown", "code"] and "TORCHPROSE1" in torch.cells[0].source


def test_prose_for_a_comma_list_is_in_each_tab_with_its_ids_once(prose):
    page = built_page(prose["html"] / "index.html")
    assert _panels(_tab_set_with(page, "SHAREDPROSE")) == {
        "pytorch": ["SHAREDPROSE for both, see itself ."], "mxnet": ["SHAREDPROSE for both, see itself ."]}
    assert len(page.select("#shared-prose")) == 1
    assert page.select_one('a.reference.internal[href="#shared-prose"]')


def _shape(outputs: list[dict]) -> list[tuple]:
    """What a cell shows, but for numbers and pictures that differ from run to run (random
    weights, samples, losses): each output's kind, its stream or its formats, its error."""
    from livecells.model.streams import shown_outputs

    return [
        (o["output_type"], o.get("name") or o.get("ename") or sorted(o.get("data", {})))
        for o in shown_outputs(outputs)
    ]


@pytest.mark.frameworks
@pytest.mark.parametrize(
    ("chapter", "framework"),
    [
        ("chapter_preliminaries/probability", "pytorch"),
        ("chapter_linear-regression/linear-regression-scratch", "pytorch"),
        ("chapter_linear-regression/linear-regression-scratch", "mxnet"),
    ],
)
def test_the_recommended_conf_shows_what_jupyter_shows(book, chapter, framework):
    """The migration guide's conf (d2l.torch, d2l.mxnet preloaded, kernels forked) against
    Jupyter: the page's notebook (livecells' outputs) run again by nbclient in a fresh kernel. Figures
    drawn without plt.show() (d2l.plot, the ProgressBoard's) and %matplotlib inline need the
    inline backend's hooks in the kernel's own shell."""
    import nbformat
    from nbclient import NotebookClient

    ours = nbformat.read(Path(book["html"]) / "_downloads" / "livecells" / f"{chapter}.{framework}.ipynb", 4)
    theirs = nbformat.from_dict(json.loads(json.dumps(ours)))
    for cell in theirs.cells:
        if cell.cell_type == "code":
            cell.outputs = []
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(book["src"]), os.environ.get("PYTHONPATH")]))
    cwd = (book["src"] / chapter).parent
    NotebookClient(
        theirs, kernel_name="python3", timeout=timing.ORACLE_CELL, allow_errors=True, resources={"metadata": {"path": str(cwd)}}
    ).execute(env=env)
    pairs = [(a, b) for a, b in zip(ours.cells, theirs.cells) if a.cell_type == "code"]
    assert len(pairs) > 5
    differ = [
        f"{a.source[:60]!r}:\n  livecells: {_shape(a.outputs)}\n  jupyter:   {_shape(b.outputs)}"
        for a, b in pairs if _shape(a.outputs) != _shape(b.outputs)
    ]
    assert not differ, "\n".join(differ)
    assert any(o["output_type"] == "display_data" for a, _ in pairs for o in a.outputs)
