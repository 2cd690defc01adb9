"""MyST Markdown pages (tests/roots/test-myst, beside one RST page) and d2lbook markdown conversion.

The root's sessions run on :class:`helpers.FakeKernels` (Markdown pages, not kernels, are the
subject): one HTML build runs every session, the LaTeX build reads the store, and an
``execute = "off"`` build shows the recorded outputs. A converted d2l-en chapter runs in real
torch and mxnet kernels.
"""

from __future__ import annotations

import configparser
import json
import os
import re
import shutil
from collections import Counter
from pathlib import Path

import nbformat
import pytest

from conftest import kernel_processes
from helpers import FakeKernels, build_site, cell_with, cells, d2l_corpus, meta, outputs, soup
from paths import DATA, DOCS


def _build(src: Path, builder: str = "html", builddir: Path | None = None, kernels=None, **overrides):
    return build_site(
        src, builder, builddir=builddir, kernels=kernels,
        confoverrides={f"livecells_{k}": v for k, v in overrides.items()},
    )


def _line_of(path: Path, text: str) -> int:
    """The 1-based line of the only line of ``path`` that holds ``text``."""
    found = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


@pytest.fixture(scope="module")
def myst(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("myst") / "src"
    shutil.copytree(rootdir / "test-myst", src)
    kernels = FakeKernels()
    html, warnings = _build(src, kernels=kernels)
    ran = kernels.take()
    latex, latex_warnings = _build(src, "latex", src / "_latex", kernels=kernels, execute="cache")
    off, off_warnings = _build(src, "html", src / "_off", kernels=kernels, execute="off")
    return {
        "src": src,
        "html": html.outdir,
        "index": soup(html.outdir / "index.html"),
        "warnings": warnings,
        "latex": next(latex.outdir.glob("*.tex")).read_text(encoding="utf-8"),
        "latex_warnings": latex_warnings,
        "off": soup(off.outdir / "index.html"),
        "off_warnings": off_warnings,
        "ran": ran,
        "ran_later": kernels.take(),
        "plans": _page_plans(html),
    }


def _page_plans(app):
    from livecells.read.collect import plans

    return plans(app.env)


def test_page_settings_in_markdown(myst):
    assert myst["plans"]["index"].settings.timeout == 20
    assert myst["plans"]["sub/page"].settings.timeout is None


def test_live_output_replaces_both_forms_of_recorded_output(myst):
    page = myst["index"]
    assert "STATIC-" not in page.get_text()
    assert "'alphaalpha'" in outputs(cell_with(page, 'NAME = "alpha"'))
    assert "'betabeta'" in outputs(cell_with(page, 'NAME = "beta"'))


def test_recorded_outputs_are_shown_when_nothing_runs(myst):
    page = myst["off"]
    alpha, beta = cell_with(page, 'NAME = "alpha"'), cell_with(page, 'NAME = "beta"')
    assert outputs(alpha).strip() == "STATIC-ALPHA-OUTPUT"  # the ```output fence
    assert outputs(beta).strip() == "STATIC-BETA-OUTPUT"  # the {parsed-literal} with :class: output
    assert any("recorded output" in line for line in meta(alpha))
    # Neither recorded block is left beside its cell as well.
    assert page.get_text().count("STATIC-ALPHA-OUTPUT") == 1
    assert myst["off_warnings"].count("WARNING") == 2, myst["off_warnings"]  # only the gamma ones


def test_cells_of_a_markdown_page_form_synced_tabs_and_share_state(myst):
    page = myst["index"]
    tab_set = page.select_one("div.sd-tab-set")
    labels = tab_set.select("label.sd-tab-label")
    assert [label.get_text(strip=True) for label in labels] == ["Alpha", "Beta"]
    assert {label["data-sync-group"] for label in labels} == {"framework"}
    assert "ALPHA" in outputs(cell_with(page, "NAME.upper()"))
    everyone = cell_with(page, '"everyone"')
    assert everyone.find_parent("div", class_="sd-tab-set") is None
    assert "everyone alpha" in outputs(everyone) and "everyone beta" in outputs(everyone)


def test_options_work_in_markdown(myst):
    page = myst["index"]
    hidden = [c for c in cells(page) if "SHOWN-OUTPUT-OF-HIDDEN-CODE" in c.get_text()]
    assert len(hidden) == 1 and hidden[0].select_one(".livecells-input") is None
    raised = cell_with(page, "1 / 0")
    assert "ZeroDivisionError" in outputs(raised)
    assert not any(re.search(r"\d s\b", line) for line in meta(raised))  # :no-timing:
    assert "ZeroDivisionError" not in myst["warnings"]
    timed = cell_with(page, "NAME.upper()")
    assert re.match(r"\d+\.\d+ s", meta(timed)[0])
    # :name: makes a target that {ref} resolves.
    link = page.find("a", string=re.compile("the upper cell"))
    assert link is not None and link["href"].startswith("#")


def test_framework_prose_joins_its_panel_or_forms_its_own_tabs(myst):
    page = myst["index"]
    panels = page.select("div.sd-tab-content")
    alpha = next(p for p in panels if "ALPHAPROSE" in p.get_text())
    assert "BETAPROSE" not in alpha.get_text() and "'alphaalpha'" in alpha.get_text()
    beta = next(p for p in panels if "BETAPROSE" in p.get_text())
    assert "'betabeta'" in beta.get_text()
    assert alpha.select_one("a[href='https://example.org']") is not None  # MyST markup is parsed
    alone = next(p for p in panels if "STANDALONEPROSE" in p.get_text())
    label = alone.find_previous_sibling("label")
    assert label["data-sync-group"] == "framework" and label["data-sync-id"] == "alpha"


def test_recorded_figure_and_literal_text_in_markdown(myst):
    live, off = myst["index"], myst["off"]
    assert "output_index_abc123_9_0" not in str(cell_with(live, "figure cell"))
    recorded = cell_with(off, "figure cell")
    assert recorded.select_one("img[src*='output_index_abc123_9_0']") is not None
    assert "recorded output" in " ".join(meta(recorded))
    literal = cell_with(off, 'print("literal")')
    assert outputs(literal).strip() == "dense1_ ( *not emphasis* `tick"
    assert literal.select_one(".livecells-output em") is None


def test_output_is_text_not_markup(myst):
    cell = cell_with(myst["index"], "not bold")
    assert "<b>not bold</b> & *not emphasis*" in outputs(cell)
    assert cell.select_one(".livecells-output b") is None


def test_warnings_point_at_the_failing_line_of_the_markdown_file(myst):
    warnings, src = myst["warnings"], myst["src"]
    index_line = _line_of(src / "index.md", "undefined_in_markdown")
    assert re.search(rf"index\.md:{index_line}: WARNING: live-cell \[alpha\]: NameError: .*undefined_in_markdown", warnings), warnings
    page_line = _line_of(src / "sub" / "page.md", 'raise ValueError')
    assert re.search(rf"sub/page\.md:{page_line}: WARNING: live-cell \[beta\]: ValueError: third line", warnings), warnings
    # Directive problems are located at the fence's line.
    gamma_line = _line_of(src / "sub" / "page.md", "{live-cell} gamma")
    assert re.search(rf"sub/page\.md:{gamma_line}: WARNING: live-cell: unknown framework 'gamma'", warnings), warnings
    prose_line = _line_of(src / "sub" / "page.md", "{live-text} gamma")
    assert re.search(rf"sub/page\.md:{prose_line}: WARNING: live-text: unknown framework 'gamma'", warnings), warnings


def test_rst_and_markdown_pages_in_one_book(myst):
    warnings, src = myst["warnings"], myst["src"]
    rst_line = _line_of(src / "other.rst", "undefined_in_rst")
    assert re.search(rf"other\.rst:{rst_line}: WARNING: live-cell \[beta\]: NameError", warnings), warnings
    other = soup(myst["html"] / "other.html")
    assert "rst alpha" in outputs(cell_with(other, '"rst alpha"'))
    nested = soup(myst["html"] / "sub" / "page.html")
    assert "cwd: sub" in outputs(cell_with(nested, "os.getcwd"))  # the page's own folder
    stored = sorted(p.relative_to(src / "_livecells").as_posix() for p in (src / "_livecells").rglob("*.json"))
    assert [s for s in stored if not s.startswith("_")] == ["index.json", "other.json", "sub/page.json"]
    # Exactly the expected warnings: nothing from MyST itself.
    assert len(re.findall(r"WARNING", warnings)) == 5, warnings


def test_notebooks_of_a_markdown_page(myst):
    path = myst["html"] / "_downloads" / "livecells" / "index.alpha.ipynb"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code[0].source == 'NAME = "alpha"\nNAME * 2'
    assert code[0].outputs[0]["data"]["text/plain"] == "'alphaalpha'"
    assert any("MyST page" in c.source for c in notebook.cells if c.cell_type == "markdown")


def test_latex_of_a_markdown_page_shows_the_first_framework(myst):
    tex = myst["latex"]
    assert "alphaalpha" in tex and "betabeta" not in tex
    assert "ALPHAPROSE" in tex and "BETAPROSE" not in tex
    assert "STATIC-" not in tex


def test_the_html_build_runs_every_session_and_the_others_none(myst):
    assert myst["ran"] == [(page, fw) for page in ("index", "other", "sub/page") for fw in ("alpha", "beta")]
    assert myst["ran_later"] == []


# -- d2lbook markdown sources: real d2l-en chapters -----------------------------------------------

D2L_MD = DATA / "d2l-md"
CHAPTERS = sorted(p.relative_to(D2L_MD).as_posix() for p in D2L_MD.glob("chapter_*/*.md"))
FRAMEWORKS = ("pytorch", "mxnet")


def _corpus() -> Path:
    """d2lbook's RST of the same chapters (:func:`helpers.d2l_corpus`)."""
    corpus = d2l_corpus()
    if corpus is None:
        if os.environ.get("CI"):
            raise RuntimeError("the d2l corpus is missing (CI must provide shared/d2l-corpus)")
        pytest.skip("no d2l corpus (shared/d2l-corpus)")
    return corpus


def _aliases(framework: str) -> set[str]:
    """The d2l names that d2lbook rewrites in ``framework``'s code: config.ini's
    ``[library-<framework>]`` simple_alias, fluent_alias and reverse_alias entries."""
    config = configparser.ConfigParser()
    config.read(D2L_MD / "config.ini", encoding="utf-8")
    section = config[f"library-{framework}"]
    names = set()
    for key in ("simple_alias", "fluent_alias"):
        for item in re.split(r"[,\n]", section.get(key, "")):
            if item.strip():
                names.add(re.match(r"\s*(\w+)", item)[1])
    names.update(re.findall(r"d2l\.(\w+)", section.get("reverse_alias", "")))
    return names


_IMPORT = re.compile(r"^(import \S|from \S+ import )")


def _isorted(lines: list[str]) -> list[str]:
    """Each run of import lines sorted, and the names of each ``from m import a, b`` sorted: the
    order isort gives, which d2lbook runs on every cell (``library.format_code``)."""
    out: list[str] = []
    run: list[str] = []
    for line in [*lines, ""]:
        if _IMPORT.match(line):
            head, _, names = line.partition(" import ")
            run.append(f"{head} import {', '.join(sorted(n.strip() for n in names.split(',')))}")
            continue
        out.extend(sorted(run))
        run = []
        out.append(line)
    return out[:-1]


def _session(plan, framework: str) -> tuple[list[str], list[int]]:
    """A session's code as non-blank lines (trailing spaces cut), and where each cell ends."""
    lines: list[str] = []
    ends: list[int] = []
    for cell in plan.session(framework).cells:
        lines.extend(line.rstrip() for line in cell.code.splitlines() if line.strip())
        ends.append(len(lines))
    return _isorted(lines), ends


def _plans(src: Path, builder: str):
    """Build ``src`` (nothing run) with sphinxcontrib-bibtex. Plans, warnings and the output folder."""
    from livecells.read.collect import plans

    extensions = ["myst_parser", "livecells", "sphinxcontrib.bibtex"]
    shutil.copy(_corpus() / "d2l.bib", src / "d2l.bib")
    (src / "conf.py").write_text(
        # An explicit source_suffix: without one, myst-parser's ".md" leaks into Sphinx's default.
        f"extensions = {extensions!r}\nsource_suffix = {{'.rst': 'restructuredtext', '.md': 'markdown'}}\n"
        "livecells_execute = 'off'\nnumfig = True\n"
        "math_numfig = True\nmyst_enable_extensions = ['dollarmath']\nbibtex_bibfiles = ['d2l.bib']\n"
    )
    pages = sorted(p.relative_to(src).with_suffix("").as_posix() for p in src.glob("chapter_*/*.*"))
    (src / "index.rst").write_text("Index\n=====\n\n.. toctree::\n   :numbered:\n\n" + "".join(f"   {p}\n" for p in pages))
    app, warnings = build_site(src, builder)
    return plans(app.env), warnings, app.outdir


@pytest.fixture(scope="module")
def both(tmp_path_factory):
    """The corpus chapters converted from d2l-en's markdown and from d2lbook's RST, each read by
    Sphinx (nothing run): every page's plan."""
    from livecells.convert.tree import convert_tree

    corpus = _corpus()
    tmp = tmp_path_factory.mktemp("d2l-both")
    md, rst = tmp / "md", tmp / "rst"
    md_results = convert_tree(D2L_MD, md, markdown=True)
    shutil.copytree(corpus, tmp / "corpus", ignore=shutil.ignore_patterns("_make", "d2l", "img", "index.rst"))
    convert_tree(tmp / "corpus", rst)
    shutil.copytree(corpus / "img", md / "img")
    md_plans, md_warnings, md_html = _plans(md, "html")
    rst_plans, _, _ = _plans(rst, "dummy")
    return {"md": md_plans, "rst": rst_plans, "md_warnings": md_warnings, "results": md_results, "html": md_html}


@pytest.mark.slow
def test_markdown_and_rst_of_a_chapter_run_the_same_cells(both):
    """Per page and framework, the session of the chapter converted from markdown runs the same
    code, in the same order, as the one converted from d2lbook's RST: the same non-blank lines,
    where a line may differ only by a d2l alias that d2lbook resolved in the RST (the markdown
    line names ``d2l.X`` for an X of config.ini's aliases, and the RST line no longer does), with
    imports in isort's order; and every RST block is one or more whole markdown cells (d2lbook
    joins a cell without output to the next one in its tab)."""
    assert sorted(both["md"]) == sorted(both["rst"]) == [c[:-3] for c in CHAPTERS if "references" not in c]
    resolved = 0
    for page in both["md"]:
        for framework in FRAMEWORKS:
            aliases = _aliases(framework)
            md_lines, md_ends = _session(both["md"][page], framework)
            rst_lines, rst_ends = _session(both["rst"][page], framework)
            where = f"{page} [{framework}]"
            assert len(md_lines) == len(rst_lines), where
            for md_line, rst_line in zip(md_lines, rst_lines):
                if md_line == rst_line:
                    continue
                named = [n for n in re.findall(r"\bd2l\.(\w+)", md_line) if n in aliases]
                assert named, f"{where}: {md_line!r} != {rst_line!r}"
                assert not any(f"d2l.{n}" in rst_line for n in named), f"{where}: {rst_line!r}"
                resolved += 1
            assert set(rst_ends) <= set(md_ends), where
            assert len(md_ends) >= len(rst_ends)
    assert resolved > 20  # the rewrites d2lbook made are there, and were recognised


@pytest.mark.slow
def test_markdown_and_rst_infer_the_same_gpus(both):
    for page, plan in both["md"].items():
        assert plan.settings.gpus == both["rst"][page].settings.gpus, page
    assert both["md"]["chapter_builders-guide/use-gpu"].settings.gpus == 2


#: The references of these chapters to other sections of the book, which dangle here: the same
#: 18 labels and 2 equations as a build of d2lbook's RST of them (shared/d2l-corpus/README.md).
DANGLING = {
    "sec_mlp", "oo-design-utilities", "tab_intro_decade", "subsec_oo-design-models",
    "subsec_broadcasting", "sec_multi_gpu_concise", "sec_minibatch_sgd", "sec_linear_regression",
    "sec_lenet", "sec_batch_norm", "sec_autograd", "sec_auto_para", "oo-design-training",
    "oo-design-data", "eq_mse", "eq_linreg-y-vec",
}


@pytest.mark.slow
def test_converted_markdown_builds_with_only_the_dangling_references_warned(both):
    warnings = both["md_warnings"].splitlines()
    undefined = [re.search(r"(?:undefined label|equation not found): '?([\w-]+)", w) for w in warnings]
    assert {m[1] for m in undefined if m} == DANGLING
    assert sum(1 for m in undefined if m) == 20
    assert [w for w, m in zip(warnings, undefined) if not m and w.strip()] == []
    assert all(r.warnings == [] for r in both["results"].values())


@pytest.mark.slow
def test_converted_marks_resolve(both):
    """:label: on an image → a numbered figure; :eqlabel: → a numbered equation; :cite: and
    :bibliography: → sphinxcontrib-bibtex citations; no d2lbook mark is left in the text."""
    page = soup(both["html"] / "chapter_builders-guide" / "model-construction.html")
    figure = page.select_one("figure#fig-blocks")
    assert figure is not None and figure.select_one("img[src$='blocks.svg']") is not None
    assert re.fullmatch(r"Fig\. \d+\.\d+", page.select_one("a[href='#fig-blocks'] .std-numref").get_text())
    algebra = soup(both["html"] / "chapter_preliminaries" / "linear-algebra.html")
    assert algebra.select_one("#equation-eq-vec-def") is not None
    refs = soup(both["html"] / "chapter_references" / "zreferences.html")
    assert len(refs.select(".citation")) >= 14  # each work these chapters cite
    # In APA style (pybtex-apa-style), as d2lbook asks: "Surname, I., & Surname, I. (Year)."
    entries = [c.get_text(" ", strip=True) for c in refs.select(".citation")]
    assert sum(bool(re.search(r"[A-Z]\., & [A-Z][\w-]+, [A-Z]\..* \(\d{4}\)\.", e)) for e in entries) >= 5, entries
    for name in ("model-construction", "use-gpu", "parameters"):
        text = soup(both["html"] / "chapter_builders-guide" / f"{name}.html").get_text()
        assert not re.search(r":(numref|label|eqref|cite|citet|begin_tab|end_tab):", text), name
        assert "[**" not in text and "**]" not in text



HELDOUT = DATA / "d2l-md-heldout"


@pytest.mark.slow
def test_held_out_chapters_run_the_cells_of_d2lbooks_own_tab_notebooks(tmp_path):
    """Chapters nobody here converted, with d2lbook 1.0.3 as the oracle (d2lbook-cells.json, from
    make_oracle.py): per framework, the session of the converted chapter runs exactly the code
    cells, in order, of the notebook that ``d2lbook build eval --tab FRAMEWORK`` makes of it."""
    from livecells.convert.tree import convert_tree
    from livecells.read.collect import plans

    oracle = json.loads((HELDOUT / "d2lbook-cells.json").read_text(encoding="utf-8"))
    src = tmp_path / "src"
    results = convert_tree(HELDOUT, src, markdown=True, tabs=TABS)
    assert all(r.warnings == [] for r in results.values())
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'livecells']\nsource_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}\n"
        "livecells_execute = 'off'\nmyst_enable_extensions = ['dollarmath']\nsuppress_warnings = ['myst.xref_missing']\n"
    )
    (src / "index.rst").write_text("Index\n=====\n\n.. toctree::\n\n" + "".join(f"   {p}\n" for p in sorted(oracle)))
    app, _ = build_site(src, "dummy")
    built = plans(app.env)
    assert sorted(built) == sorted(oracle)
    for page, tabs in oracle.items():
        for framework, expected in tabs.items():
            ours = [cell.code.strip() for cell in built[page].session(framework).cells]
            assert ours == expected, f"{page} [{framework}]"
    # What the fixes made right: mxnet's Module has no tab.selected left, and mxnet runs the
    # chapter whose cells are all ``#@tab all``.
    assert not any("tab.selected" in c for c in oracle["chapter_linear-regression/oo-design"]["mxnet"])
    assert len(built["chapter_natural-language-processing-pretraining/subword-embedding"].session("mxnet").cells) == 9

# -- the markdown reader on small inputs -------------------------------------------------------------------

TABS = ["pytorch", "mxnet"]


def _md(text: str, **kwargs):
    from livecells.convert.markdown import convert_markdown

    return convert_markdown(text, tabs=kwargs.pop("tabs", TABS), source="ch.md", **kwargs)


def _cells(text: str) -> list[tuple[str, str]]:
    """(argument, body) of each live-cell fence of a converted text."""
    return [(m[1], m[2]) for m in re.finditer(r"^```\{live-cell\} (.*)\n((?:.*\n)*?)```$", text, re.M)]


def test_tab_markers_become_framework_arguments():
    source = (
        "```{.python .input}\n%load_ext d2lbook.tab\ntab.interact_select(['mxnet', 'pytorch'])\n```\n\n"
        "```{.python .input}\n#@tab all\nx = 1\n```\n\n"
        "```{.python .input  n=3}\n%%tab pytorch, mxnet, jax\ny = 2\n```\n\n"
        "```{.python .input}\n%%tab tensorflow\nz = 3\n```\n\n"
        "```{.python .input}\n# @tab mxnet\nw = 4\n```\n\n"
        "```{.python .input}\nno_marker = 5\n```\n\n"
        "```python\nnot_a_cell = 6\n```\n"
    )
    result = _md(source)
    assert _cells(result.text) == [
        ("all", "x = 1\n"), ("pytorch, mxnet", "y = 2\n"), ("mxnet", "w = 4\n"), ("pytorch", "no_marker = 5\n"),
    ]
    assert "interact_select" not in result.text and "z = 3" not in result.text
    assert "```python\nnot_a_cell = 6\n```" in result.text
    assert result.cells == 4 and result.warnings == []


def test_tab_selected_branches_are_resolved_per_framework():
    source = (
        "```{.python .input}\n%%tab all\ndef f():\n    if tab.selected('pytorch'):\n        return 'torch'\n"
        "    elif tab.selected('mxnet'):\n        return 'mx'\n    else:\n        return 'other'\n```\n\n"
        "```{.python .input}\n%%tab all\nx = 1\nif tab.selected('tensorflow'):\n    x = 2\nprint(x)\n```\n"
    )
    # No cell or prose names mxnet: d2lbook makes no mxnet notebook (tab.selected does not count).
    assert _cells(_md(source).text) == [("all", "def f():\n    return 'torch'\n"), ("all", "x = 1\nprint(x)\n")]
    source += "\n```{.python .input}\n#@tab mxnet\nm = 0\n```\n"
    cells = _cells(_md(source).text)
    assert cells == [
        ("pytorch", "def f():\n    return 'torch'\n"),
        ("mxnet", "def f():\n    return 'mx'\n"),
        ("all", "x = 1\nprint(x)\n"),  # the same code for every framework of the book: one cell
        ("mxnet", "m = 0\n"),
    ]
    assert _cells(_md(source, tabs=["pytorch", "mxnet", "jax"]).text)[2] == ("all", "x = 1\nprint(x)\n")
    assert _cells(_md(source.replace("mxnet\nm", "tensorflow\nm"), tabs=["pytorch", "tensorflow"]).text)[2:4] == [
        ("pytorch", "x = 1\nprint(x)\n"), ("tensorflow", "x = 1\nx = 2\nprint(x)\n"),
    ]


def test_nested_tab_selected_branches_are_resolved():
    """oo-design.md's Module: a tab.selected branch inside a kept one (d2lbook drops it for mxnet).

    As d2lbook's ``_clean_if_branches`` has it (its output for this input, run by hand): each
    kept line is dedented once, so ``self.training`` stays in ``__init__``; the line after the
    nested branch ends it and is kept as it is."""
    source = (
        "```{.python .input}\n%%tab mxnet, tensorflow\nclass Module:\n"
        "    if tab.selected('mxnet', 'tensorflow'):\n        def __init__(self):\n            self.board = 1\n"
        "        if tab.selected('tensorflow'):\n            self.training = None\n        after = 2\n\n"
        "    if tab.selected('jax'):\n        field: int = 3\n    def loss(self):\n        pass\n```\n"
    )
    cells = _cells(_md(source, tabs=["mxnet", "tensorflow"]).text)
    body = "class Module:\n    def __init__(self):\n        self.board = 1\n{}        after = 2\n\n    def loss(self):\n        pass\n"
    assert cells == [("mxnet", body.format("")), ("tensorflow", body.format("        self.training = None\n"))]


def test_tabs_named_only_in_prose_still_get_the_all_cells():
    """subword-embedding.md: every cell is ``#@tab all`` and mxnet is named only in tab prose; d2lbook
    still makes an mxnet notebook of those cells, so the converted cells name both frameworks
    (livecells' ``all`` would mean only the frameworks the page's cells name)."""
    all_cells = "```{.python .input}\n#@tab all\nx = 1\n```\n\n```{.python .input}\n#@tab all\nprint(x)\n```\n\n"
    prose = ":begin_tab:`mxnet`\nMX prose.\n:end_tab:\n"
    assert [a for a, _ in _cells(_md(all_cells + prose).text)] == ["pytorch, mxnet"] * 2
    assert [a for a, _ in _cells(_md(all_cells).text)] == ["all"] * 2  # d2lbook: the first tab only
    mx_only = all_cells + "```{.python .input}\n#@tab mxnet\ny = 2\n```\n"  # and the first tab runs too
    assert [a for a, _ in _cells(_md(mx_only).text)] == ["pytorch, mxnet", "pytorch, mxnet", "mxnet"]
    assert [a for a, _ in _cells(_md(mx_only + "\n```{.python .input}\n#@tab pytorch\nz = 3\n```\n").text)][:2] == ["all"] * 2


def test_hide_marks_become_options_and_save_stays():
    source = (
        "```{.python .input}\ndef f():  #@save\n    pass\n```\n\n"
        "```{.python .input}\nx = 1  #@hide\n```\n\n"
        "```{.python .input}\n#@hide_code\ny = 2\n```\n\n"
        "```{.python .input}\n#@hide_output\nz = 3\n```\n\n"
        "```{.python .input}\n#@hide_all\na = 4\n```\n\n"
        "```{.python .input}\nb = 5\n```\n"
    )
    text = _md(source).text
    assert "```{live-cell} pytorch\ndef f():  #@save\n    pass\n```" in text
    assert "```{live-cell} pytorch\n:hide-code:\n:hide-output:\nx = 1  #@hide\n```" in text
    assert "```{live-cell} pytorch\n:hide-code:\n#@hide_code\ny = 2\n```" in text
    assert "```{live-cell} pytorch\n:hide-output:\n#@hide_output\nz = 3\n```" in text
    assert "```{live-cell} pytorch\n:hide-code:\n:hide-output:\nb = 5\n```" in text  # after #@hide_all


def test_tab_prose_becomes_framework_prose():
    source = (
        ":begin_tab:`pytorch`\nTorch prose with ```code```.\n\n```bash\npip install torch\n```\n:end_tab:\n\n"
        ":begin_tab:`mxnet, tensorflow`\nMX prose.\n:end_tab:\n\n"
        ":begin_tab:`jax`\nJAX prose.\n:end_tab:\n\n"
        ":begin_tab:`all`\nEveryone.\n:end_tab:\n"
    )
    text = _md(source).text
    assert text == (
        "````{live-text} pytorch\nTorch prose with ```code```.\n\n```bash\npip install torch\n```\n````\n\n"
        "```{live-text} mxnet\nMX prose.\n```\n\nEveryone.\n"
    )


def test_slide_marks_and_references():
    source = (
        "# Title\n:label:`sec_t`\n\n"
        "We [**show this**] and (**this**) but [~~not this~~] nor (~~this~~); [**a link**](https://x.org).\n"
        "See :numref:`fig_x`, :eqref:`eq_y`, :ref:`sec_t`, :cite:`A2020,B2021`, :citet:`C2019`, :citep:`D`.\n\n"
        "![A caption.](../img/x.svg)\n:width:`400px`\n:label:`fig_x`\n\n"
        "$$y = x^2.$$\n:eqlabel:`eq_y`\n\n"
        "| a | b |\n|---|---|\n| 1 | 2 |\n:label:`tab_z`\n"
    )
    result = _md(source)
    assert result.text == (
        "(sec_t)=\n# Title\n\n"
        "We {slide}`[**`show this{slide}`**]` and {slide}`(**`this{slide}`**)` but {slide}`[~~`not this{slide}`~~]` "
        "nor {slide}`(~~`this{slide}`~~)`; [**a link**](https://x.org).\n"
        "See {numref}`fig_x`, {eq}`eq_y`, {ref}`sec_t`, {cite}`A2020,B2021`, {cite:t}`C2019`, {cite:p}`D`.\n\n"
        "```{figure} ../img/x.svg\n:name: fig_x\n:width: 400px\n\nA caption.\n```\n\n"
        "```{math}\n:label: eq_y\n\ny = x^2.\n```\n\n"
        "(tab_z)=\n| a | b |\n|---|---|\n| 1 | 2 |\n"
    )
    assert result.warnings == []



def test_marks_where_real_chapters_put_them():
    """Shapes of d2l-en chapters (mdp.md, integral-calculus.md, gp-priors.md,
    natural-language-inference-attention.md) that d2lbook's rst.py reads as marks."""
    source = (
        "# MDP\n:label:`sec_mdp`\nIn this section.\n\n"  # text right after the label line
        "In expanded form as\n$$f(x).$$\n:eqlabel:`eq_ftc`\n\n"  # text, then the equation
        "Any function\n\n$$g(x),$$ :eqlabel:`eq_gp`\n\n"  # the mark on the equation's line
        "$$h(x).$$\n\n:eqlabel:`eq_nli`\n\n"  # a blank line between equation and mark
        "![](../img/mdp.png)\n:width:`250px`\n"  # a width and no label
    )
    result = _md(source)
    assert result.text == (
        "(sec_mdp)=\n# MDP\n\nIn this section.\n\n"
        "In expanded form as\n\n```{math}\n:label: eq_ftc\n\nf(x).\n```\n\n"
        "Any function\n\n```{math}\n:label: eq_gp\n\ng(x),\n```\n\n"
        "```{math}\n:label: eq_nli\n\nh(x).\n```\n\n"
        "```{figure} ../img/mdp.png\n:width: 250px\n```\n"
    )
    assert result.warnings == []
    assert _md(":eqlabel:`eq_x`\n").warnings == ["ch.md:1: WARNING: :eqlabel: mark with no $$ equation before it: dropped"]

def test_project_fences_and_bibliography():
    source = "```toc\n:maxdepth: 2\n\nintro\n```\n\n```eval_rst\n.. only:: html\n```\n\n:bibliography:`../d2l.bib`\n"
    assert _md(source).text == (
        "```{toctree}\n:maxdepth: 2\n\nintro\n```\n\n```{eval-rst}\n.. only:: html\n```\n\n"
        "```{bibliography} ../d2l.bib\n:style: apa\n```\n"
    )


def test_problems_are_kept_and_located():
    source = "Text.\n\n:end_tab:\n\n:wat:`x`\n\n```{.python .input}\nx = 1\n"
    result = _md(source)
    assert result.warnings == [
        "ch.md:3: WARNING: :end_tab: without :begin_tab: dropped",
        "ch.md:7: WARNING: code fence never closed: kept to the end of the file",
        "ch.md:5: WARNING: mark :wat: not understood: kept",
    ]
    # A line of inline marks only is text (glove.md, multihead-attention.md), not a dropped mark line.
    text = _md("Using layers,\n:numref:`fig_mha`\ndescribes it.\n\n:numref:`fig_x`\nexplains.\n").text
    assert text == "Using layers,\n{numref}`fig_mha`\ndescribes it.\n\n{numref}`fig_x`\nexplains.\n"
    assert _cells(result.text) == [("pytorch", "x = 1\n")]


def test_converting_converted_text_changes_nothing():
    from livecells.convert.markdown import convert_markdown

    for chapter in CHAPTERS:
        once = convert_markdown((D2L_MD / chapter).read_text(encoding="utf-8"), tabs=TABS)
        twice = convert_markdown(once.text, tabs=TABS)
        assert twice.text == once.text, chapter
        assert twice.warnings == []


def test_real_chapters_convert_without_warnings():
    from livecells.convert.markdown import book_tabs, convert_markdown
    from livecells.convert.md_blocks import is_d2lbook_markdown

    assert book_tabs(D2L_MD / "chapter_builders-guide") == TABS  # d2lbook's config.ini above
    counts = {}
    for chapter in CHAPTERS:
        text = (D2L_MD / chapter).read_text(encoding="utf-8")
        result = convert_markdown(text, tabs=TABS, source=chapter)
        assert result.warnings == [], chapter
        assert is_d2lbook_markdown(text) == ("references" not in chapter)
        assert not re.search(r"^```\{\.python|^:(begin|end)_tab:|^:label:`|%%tab|#@tab", result.text, re.M), chapter
        counts[chapter] = Counter(a for a, _ in _cells(result.text))
    # One cell per framework where the chapter has one per tab; jax and tensorflow cells dropped.
    assert counts["chapter_builders-guide/parameters.md"] == {"pytorch": 7, "mxnet": 7}
    # Its 22 cells: 3 of mxnet (one of them "mxnet, tensorflow"), 3 of pytorch, 3 of "pytorch, mxnet[,
    # tensorflow]" of which two pick tab.selected branches (one cell per framework each), 4 "all"
    # (configure_optimizers' branches give the same code in both: one cell), 9 of jax/tensorflow.
    assert counts["chapter_linear-regression/linear-regression-scratch.md"] == {
        "pytorch": 5, "mxnet": 5, "pytorch, mxnet": 1, "all": 4,
    }


def test_command_line_converts_markdown_files_and_trees(tmp_path, capsys):
    from livecells.cli.main import main

    chapter = D2L_MD / "chapter_builders-guide" / "use-gpu.md"
    assert main(["convert", str(chapter)]) == 0
    out, err = capsys.readouterr()
    assert out.startswith("(sec_use_gpu)=\n# GPUs\n\n% livecells convert inferred the live-settings below")
    assert "```{live-settings}\n:gpus: 2\n```" in out
    assert err.strip().endswith(  # as for an RST chapter: the index past the others is named
        "try_gpu(1) (lines 320, 326, 363, 433), .cuda(1) (lines 370, 438); "
        "not counted as devices: try_gpu(10) (line 227)"
    )
    assert main(["convert", str(D2L_MD), "-o", str(tmp_path / "out")]) == 0
    converted = sorted(p.relative_to(tmp_path / "out").as_posix() for p in (tmp_path / "out").rglob("*.md"))
    assert converted == CHAPTERS
    assert (tmp_path / "out" / "config.ini").is_file()  # other files are copied
    assert main(["convert", str(D2L_MD)]) == 2  # a tree needs -o


@pytest.mark.kernel
@pytest.mark.frameworks
@pytest.mark.slow
def test_a_converted_chapter_runs_in_real_kernels_with_warnings_in_the_markdown(tmp_path):
    """parameters.md, converted and built with real torch and mxnet (the sample book's d2l package
    beside it): every (cell, framework) pair runs, and an error points at its line of the .md."""
    from livecells.convert.markdown import convert_markdown

    source = (D2L_MD / "chapter_builders-guide" / "parameters.md").read_text(encoding="utf-8")
    broken = "X = torch.rand(size=(2, 4))\nnet(X).shape\n"
    assert broken in source
    source = source.replace(broken, broken + "print(undefined_in_chapter)\n")
    src = tmp_path / "src"
    page = src / "chapter" / "parameters.md"
    page.parent.mkdir(parents=True)
    page.write_text(convert_markdown(source, tabs=TABS).text, encoding="utf-8")
    shutil.copytree(DOCS / "d2l", page.parent / "d2l")
    (src / "conf.py").write_text(
        "extensions = ['myst_parser', 'livecells']\nmyst_enable_extensions = ['dollarmath']\n"
        "source_suffix = {'.rst': 'restructuredtext', '.md': 'markdown'}\n"
        "exclude_patterns = ['chapter/d2l']\nlivecells_timeout = 120\n"
    )
    (src / "index.md").write_text("# Book\n\n```{toctree}\nchapter/parameters\n```\n")
    app, warnings = build_site(src)
    line = _line_of(page, "print(undefined_in_chapter)")
    assert re.search(rf"chapter/parameters\.md:{line}: WARNING: live-cell \[pytorch\]: NameError: .*undefined_in_chapter", warnings), warnings
    assert len(re.findall("WARNING", warnings)) == 2, warnings  # and the chapter's dangling numref
    assert "undefined label: 'sec_model_construction'" in warnings
    stored = json.loads((src / "_livecells" / "chapter" / "parameters.json").read_text())
    for framework in FRAMEWORKS:
        statuses = [c["status"] for c in stored["sessions"][framework]["cells"]]
        assert len(statuses) == 7, framework
        assert statuses.count("ok") == (6 if framework == "pytorch" else 7), (framework, statuses)
    html = soup(app.outdir / "chapter" / "parameters.html")
    assert "OrderedDict([('weight'," in outputs(cell_with(html, "net[2].state_dict()"))  # live, not recorded
    assert kernel_processes() == []


def test_odd_cells():
    source = (
        "```{.python .input}\n%%tab pytorch\n```\n\n"
        "```{.python .input}\n:not_an_option = 1\n```\n\n"
        "````{.python .input}\ns = '''\n```\n'''\n````\n\n"
        "```{.python .input}\r\n#@tab mxnet\r\nx = 1\r\n```\r\n"
    )
    result = _md(source)
    assert result.warnings == ["ch.md:1: WARNING: code cell with no code besides its tab marker: dropped"]
    assert result.text == (
        "```{live-cell} pytorch\n\n:not_an_option = 1\n```\n\n"
        "````{live-cell} pytorch\ns = '''\n```\n'''\n````\n\n"
        "```{live-cell} mxnet\nx = 1\n```\n"
    )
    assert _md("").text == "" and _md("").warnings == []


def test_the_book_tabs_without_a_config_ini():
    from livecells.convert.markdown import convert_markdown

    select = "```{.python .input}\n%load_ext d2lbook.tab\ntab.interact_select(['mxnet', 'pytorch'])\n```\n\n"
    cells = "```{.python .input}\nx = 1\n```\n\n```{.python .input}\n%%tab all\nif tab.selected('pytorch'):\n    y = 2\n```\n"
    # The chapter's interact_select: mxnet is the first tab, so a cell without marker is mxnet's.
    # No cell names pytorch, so (as in d2lbook) no pytorch session: its branch runs nowhere.
    assert _cells(convert_markdown(select + cells).text) == [("mxnet", "x = 1\n")]
    named = cells + "\n```{.python .input}\n#@tab pytorch\nz = 0\n```\n"
    assert _cells(convert_markdown(select + named).text) == [("mxnet", "x = 1\n"), ("pytorch", "y = 2\n"), ("pytorch", "z = 0\n")]
    # Else the tabs the chapter names; with none, the default framework.
    assert _cells(convert_markdown("```{.python .input}\n#@tab jax\nz = 3\n```\n\n" + cells).text)[0] == ("jax", "z = 3\n")
    assert _cells(convert_markdown(cells[:30], default_framework="alpha").text) == [("alpha", "x = 1\n")]


def test_the_builds_here_leave_sphinx_defaults_alone():
    """Run last in this module: a later test's Sphinx app must not read .md files as markdown."""
    from sphinx.config import Config

    assert Config.config_values["source_suffix"].default == {".rst": "restructuredtext"}
