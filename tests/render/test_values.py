"""Values, times and ratios quoted in prose (``:live-value:``, ``.. live-value::``, ``:live-time:``,
``:live-ratio:``; docs/values.rst).

The naming and formatting rules are pure (:mod:`livecells.model.values`). The root
tests/roots/test-values (RST and MyST pages) runs on :class:`helpers.FakeKernels` (the subject
is what the page quotes, not kernels): an HTML build runs it, LaTeX and text builds read the
store. Real python3 kernels name a value and a matplotlib figure the way a book's kernels do.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from livecells.model.records import CellRecord, SessionRecord
from livecells.model.values import (
    format_plain,
    format_ratio,
    hidden,
    page_values,
    parse_reference,
    value_data,
    value_name,
)
from livecells.render.timing import format_seconds

from helpers import FAKE_HOST, FakeKernels, build_site, cell_with, one_page_book, outputs, soup

# -- the rules, pure -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "spec", "shown"),
    [
        ("0.6666666666666666", ".3f", "0.667"),
        ("0.25", ".1%", "25.0%"),
        ("7", "04d", "0007"),
        ("7.0", "d", "7"),
        ("'a string'", "", "a string"),  # the quotes of a str's repr are taken off
        ("'abc'", ">5s", "  abc"),
        ("np.float64(0.993712)", ".2f", "0.99"),  # NumPy 2's repr of a scalar
        ("tensor(0.0025, device='cuda:0')", ".1e", "2.5e-03"),
        ("array(3)", "d", "3"),
        ("tensor([1., 2.])", "", "tensor([1., 2.])"),  # no number: the text as it is
        ("tensor(1.5000)", "", "tensor(1.5000)"),  # no spec: the text as it is
        ("'1e3'", ".0f", "1000"),
    ],
)
def test_a_value_is_formatted_as_its_spec_asks(text, spec, shown):
    assert format_plain(text, spec) == shown


@pytest.mark.parametrize(
    ("text", "spec"), [("tensor([1., 2.])", ".2f"), ("2.5", "d"), ("'x'", "q"), ("f(" + "1" * 100_000 + "x", ".2f")]
)
def test_a_value_that_cannot_be_formatted_says_why(text, spec):
    with pytest.raises(ValueError, match="cannot format"):
        format_plain(text, spec)


def test_a_reference_names_an_optional_framework_a_name_and_an_optional_spec():
    frameworks = ["pytorch", "mxnet"]
    assert parse_reference("t:.2f", frameworks) == parse_reference(" t:.2f ", frameworks)
    ref = parse_reference("pytorch/t:.2f", frameworks)
    assert (ref.framework, ref.name, ref.spec) == ("pytorch", "t", ".2f")
    # A slash after something that is no framework is part of the name.
    ref = parse_reference("a/b", frameworks)
    assert (ref.framework, ref.name, ref.spec) == (None, "a/b", "")


def test_outputs_name_values_by_metadata_livecells_or_myst_nb():
    mine = {"output_type": "display_data", "data": {"text/plain": "1"}, "metadata": {"livecells": {"name": "x"}}}
    assert value_name(mine) == "x" and hidden(mine)
    prefix = "application/papermill.record/"
    glued = {
        "output_type": "display_data",
        "data": {prefix + "text/plain": "2"},
        "metadata": {"scrapbook": {"name": "y", "mime_prefix": prefix}},
    }
    assert value_name(glued) == "y" and hidden(glued) and value_data(glued) == {"text/plain": "2"}
    shown = {**glued, "data": {"text/plain": "2"}, "metadata": {"scrapbook": {"name": "y", "mime_prefix": ""}}}
    assert value_name(shown) == "y" and not hidden(shown)
    for other in (
        {"output_type": "stream", "name": "stdout", "text": "x", "metadata": {"livecells": {"name": "x"}}},
        {"output_type": "display_data", "data": {}, "metadata": {"livecells": {"name": ""}}},
        {"output_type": "display_data", "data": {}, "metadata": {"livecells": "x"}},
        {"output_type": "display_data", "data": {}, "metadata": []},
        "not an output",
        None,
    ):
        assert value_name(other) is None and not hidden(other)


def _result(index: int, *outputs: dict, status: str = "ok") -> CellRecord:
    return CellRecord(status=status, outputs=list(outputs), index=index)  # type: ignore[arg-type]


def _named(name: str, text: str) -> dict:
    return {"output_type": "display_data", "data": {"text/plain": text}, "metadata": {"livecells": {"name": name}}}


def test_page_values_last_name_stands_and_problems_are_located_at_their_cell():
    session = SessionRecord("alpha", "k", "e", "ok")  # type: ignore[arg-type]
    result = {"output_type": "execute_result", "data": {"text/plain": "42"}, "metadata": {}, "execution_count": 3}
    results = [
        (0, "alpha", _result(0, _named("x", "1"), _named("x", "2")), session),  # twice in one cell: no problem
        (1, "alpha", _result(1, _named("x", "3")), session),
        (2, "alpha", _result(2, result), session),
        (3, "alpha", _result(3), session),
        (4, "alpha", _result(4, status="error"), session),
    ]
    page = page_values(results, {2: "answer", 3: "none", 4: "failed"})
    assert page.values[("alpha", "x")].data == {"text/plain": "3"}
    assert page.values[("alpha", "answer")].data == {"text/plain": "42"}
    assert [(index, fw) for index, fw, _ in page.problems] == [(1, "alpha"), (3, "alpha")]
    assert "named before, by cell 1" in page.problems[0][2] and ":value: none" in page.problems[1][2]


def test_ratios_keep_the_digits_they_are_worth():
    assert [format_ratio(r) for r in (464.2, 46.42, 2.514, 0.01234)] == ["464", "46.4", "2.51", "0.0123"]


# -- the root, on fake kernels -------------------------------------------------------------------

VALUE = "span.livecells-value"


def _warnings_at(warnings: str, where: str) -> list[str]:
    return [line for line in warnings.splitlines() if f"{where}: WARNING" in line]


@pytest.fixture(scope="module")
def site(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("values") / "src"
    shutil.copytree(rootdir / "test-values", src)
    kernels = FakeKernels()
    html, warnings = build_site(src, kernels=kernels)
    ran = kernels.take()
    latex, latex_warnings = build_site(
        src, "latex", builddir=src / "_latex", kernels=kernels, confoverrides={"livecells_execute": "cache"}
    )
    text, _ = build_site(src, "text", builddir=src / "_text", kernels=kernels, confoverrides={"livecells_execute": "cache"})
    cached, _ = build_site(src, builddir=src / "_cached", kernels=kernels, confoverrides={"livecells_execute": "cache"})
    off, off_warnings = build_site(src, builddir=src / "_off", kernels=kernels, confoverrides={"livecells_execute": "off"})
    return {
        "src": src,
        "ran": ran,
        "ran_later": kernels.take(),
        "warnings": warnings,
        "index": soup(html.outdir / "index.html"),
        "md": soup(html.outdir / "md.html"),
        "bad": soup(html.outdir / "bad.html"),
        "latex": next(latex.outdir.glob("*.tex")).read_text(encoding="utf-8"),
        "latex_warnings": latex_warnings,
        "text": (text.outdir / "index.txt").read_text(encoding="utf-8"),
        "cached": soup(cached.outdir / "index.html"),
        "off": {name: soup(off.outdir / f"{name}.html") for name in ("index", "md", "bad")},
        "off_warnings": off_warnings,
        "notebooks": {
            fw: json.loads((html.outdir / "_downloads" / "livecells" / f"index.{fw}.ipynb").read_text())
            for fw in ("alpha", "beta")
        },
    }


def _quotes(paragraph) -> list[str]:
    return [span.get_text() for span in paragraph.select(VALUE)]


def _paragraph(page, text: str):
    found = [p for p in page.select("p") if text in p.get_text()]
    assert len(found) == 1, (text, found)
    return found[0]


def test_values_are_quoted_formatted_as_asked(site):
    first = _paragraph(site["index"], "Alpha’s total is")
    quotes = _quotes(first)
    assert quotes[:5] == ["0.667", "25.0%", "7", "0007", "<b>bold</b> & <script>alert(1)</script>"]
    # A cell's text is text: the markup is escaped, never markup of the page.
    assert first.select("script") == [] and first.select("b") == []
    assert all("livecells-live" in span["class"] for span in first.select(VALUE))
    # Each says where it was made, as the timing line does.
    assert first.select(VALUE)[1]["title"].startswith("Beta · ")


def test_times_and_ratios_name_the_device(site):
    quotes = _quotes(_paragraph(site["index"], "Slow took"))
    device = site["index"].select_one("p.livecells-meta").get_text().split(" · ")[1]
    store = json.loads((site["src"] / "_livecells" / "index.json").read_text())
    [alpha] = [s for s in store["sessions"].values() if s["framework"] == "alpha"]
    slow, fast = (cell["time"] for cell in alpha["cells"])  # the page's cells 1 and 3
    assert slow >= 0.02  # it sleeps 20 ms
    assert quotes[-2:] == [f"{format_seconds(slow)} on {device}", f"{format_ratio(slow / fast)}× on {device}"]


def test_prose_of_a_framework_quotes_that_frameworks_value(site):
    assert _quotes(_paragraph(site["index"], "In alpha prose")) == ["0.67"]
    assert _quotes(_paragraph(site["index"], "In beta prose")) == ["0.25"]
    # Prose of both frameworks: each tab's copy quotes its own framework's value.
    shared = [p for p in site["index"].select("p") if "In shared prose" in p.get_text()]
    assert sorted(_quotes(p)[0] for p in shared) == ["0.25", "0.67"]
    for p in shared:
        panel = p.find_parent(class_="livecells-text")
        expected = "0.67" if "livecells-alpha" in panel["class"] else "0.25"
        assert _quotes(p) == [expected]


def test_a_title_quotes_a_value_and_its_table_of_contents_the_role(site, tmp_path):
    heading = next(h for h in site["index"].select("h2") if "in a title" in h.get_text())
    assert _quotes(heading) == ["0.67"]
    # The page's own table of contents (in the sidebar, copied while reading) shows the role's
    # text: the page is written, not failed on an unknown node.
    toc = site["index"].select_one("div.sphinxsidebar")
    assert "Total alpha/total:.2f in a title" in toc.get_text()


def test_named_displays_are_not_shown_at_their_cell_but_value_results_are(site):
    cell = cell_with(site["index"], 'print("VISIBLE")')
    assert outputs(cell).strip() == "VISIBLE"
    assert "0.6666" in outputs(cell_with(site["index"], "total = 2 / 3"))


def test_the_directive_shows_the_whole_output_as_a_cell_would(site):
    blocks = site["index"].select("div.livecells-value-block")
    assert len(blocks) == 2
    table, markup = blocks
    # livecells_allow_html is False in the root: the HTML table is its text, escaped.
    assert table.select("table") == [] and "IPython.core.display.HTML object" in table.get_text()
    assert markup.select("script") == [] and "<script>" in markup.get_text()
    assert table.select_one("p.livecells-meta").get_text().startswith("Alpha · ")


def test_quotes_work_in_myst_markdown(site):
    md = site["md"]
    assert _quotes(_paragraph(md, "The answer is"))[0] == "42"
    assert re.fullmatch(r"0\.\d{4} s on .+", _quotes(_paragraph(md, "The answer is"))[1])
    block = md.select_one("div.livecells-value-block")
    assert "[1, 2, 3]" in block.get_text()
    assert "[1, 2, 3]" not in outputs(cell_with(md, "listed"))
    assert _paragraph(md, "Missing in MyST").select_one(".livecells-value-missing").get_text() == "??"
    assert _quotes(_paragraph(md, "In MyST prose of alpha")) == ["42.0", "??"]


def test_bad_quotes_are_located_warnings_and_the_rest_of_the_page_stands(site):
    warnings, src = site["warnings"], site["src"]
    assert [w for w in warnings.splitlines() if "WARNING" in w and "[livecells.value]" not in w] == []
    at = {line: _warnings_at(warnings, f"{src / 'bad.rst'}:{line}") for line in (11, 22, 27, 28)}
    assert len(at[11]) == 1 and ":value: nothing names the cell's result" in at[11][0]
    assert len(at[22]) == 1 and "'twice' was named before, by cell 3" in at[22][0]
    assert [re.search(r"WARNING: (\S+)", w).group(1) for w in at[27]] == [
        ":live-value:`shared`:", ":live-value:`absent`:", ":live-value:`alpha/shared:q`:"
    ]
    assert "named in alpha, beta: quoting alpha's" in at[27][0] and "no value named 'absent'" in at[27][1]
    assert [re.search(r"WARNING: (\S+)", w).group(1) for w in at[28]] == [
        ":live-time:`nocell`:", ":live-time:`both`:", ":live-ratio:`both/both`:"
    ]
    missing = _warnings_at(warnings, f"{src / 'md.md'}:23")
    assert len(missing) == 1 and "no value named 'nowhere'" in missing[0]
    # MyST: on the role's own line, the second of its paragraph.
    missing = _warnings_at(warnings, f"{src / 'md.md'}:27")
    assert len(missing) == 1 and "no value named 'gone' on this page for alpha" in missing[0]
    assert warnings.count("[livecells.value]") == 10
    quotes = _quotes(_paragraph(site["bad"], "Ambiguous"))
    assert quotes[0] == "1" and quotes[-1] == "3"  # ambiguous: the first framework's; twice: the last
    assert len(site["bad"].select(".livecells-value-missing")) == 3


def test_a_build_from_the_store_quotes_stored_values_and_says_so(site):
    assert site["ran"] and site["ran_later"] == []  # the LaTeX, text and cached builds ran nothing
    first = _paragraph(site["cached"], "Alpha’s total is")
    spans = first.select(VALUE)
    assert all("livecells-stored" in span["class"] for span in spans)
    assert spans[0].get_text().startswith("0.667 (stored 20")
    assert "stored result from" in spans[0]["title"]
    assert "Alpha's total is 0.667 (stored 20" in " ".join(site["text"].split())


def test_a_stored_quote_names_no_host_unless_show_host_says(site):
    """A stored value's title says where it was made as the cell's own line does: without the
    build machine's name, which livecells_show_host (off) keeps out of the published page."""
    host = f" on {FAKE_HOST}"
    titles = [span["title"] for span in site["cached"].select(VALUE) if span.has_attr("title")]
    assert titles and any("stored result from" in t for t in titles)
    assert not [t for t in titles if host in t], titles
    lines = [p.get_text() for p in site["cached"].select("p.livecells-meta")]
    assert lines and not [line for line in lines if host in line]


def test_a_build_that_runs_nothing_quotes_recorded_outputs_and_warns_only_of_mistakes(site):
    md = site["off"]["md"]
    answer = _paragraph(md, "The answer is").select(VALUE)[0]
    assert answer.get_text() == "41 (recorded)" and "livecells-recorded" in answer["class"]
    assert answer["title"] == "recorded output, from the page's source"
    assert set(_quotes(_paragraph(site["off"]["index"], "Alpha’s total is"))) == {"??"}  # no recorded text
    # Missing values are no mistake when nothing runs by choice; a name of no cell, a cell of
    # two frameworks and a ratio without spaces are.
    said = [line for line in site["off_warnings"].splitlines() if "WARNING" in line]
    assert len(said) == 3 and all(":live-time:" in w or ":live-ratio:" in w for w in said), said


@pytest.mark.parametrize("how", ["exclude", "execute-off"])
def test_a_page_that_runs_nothing_by_choice_quotes_without_warnings(tmp_path, rootdir, how):
    """An excluded page (livecells_execute_exclude, or its own :execute: off) is as a build with
    livecells_execute = "off": a quote missing because its cell did not run is no mistake; a
    name of no cell still is."""
    settings = ".. live-settings::\n   :execute: off\n\n" if how == "execute-off" else ""
    src = one_page_book(
        tmp_path, rootdir / "test-values" / "conf.py",
        f"Slow\n====\n\n{settings}.. live-cell:: alpha\n   :name: slow\n   :value: total\n\n   6 * 7\n\n"
        "Took :live-time:`slow`, a ratio :live-ratio:`slow / slow`, the total :live-value:`total`, "
        "and :live-time:`no-such-cell`, :live-ratio:`no-such-cell / no-such-cell`.\n"
    )
    overrides = {"livecells_execute_exclude": ["index"]} if how == "exclude" else {}
    kernels = FakeKernels()
    app, warnings = build_site(src, kernels=kernels, confoverrides=overrides)
    assert kernels.take() == []
    said = [line for line in warnings.splitlines() if "WARNING" in line]
    # A name of no cell is said once per quote, a / a too.
    assert len(said) == 2 and all("no-such-cell" in w for w in said), said
    quotes = _quotes(_paragraph(soup(Path(app.outdir) / "index.html"), "Took"))
    assert quotes == ["??"] * 5, quotes


def test_a_value_whose_cell_failed_is_warned_of_with_the_error(tmp_path, rootdir):
    """The name exists, the cell raised: the warning says so, not only that no value is named."""
    src = one_page_book(
        tmp_path, rootdir / "test-values" / "conf.py",
        "Failed\n======\n\n.. live-cell:: alpha\n   :value: total\n   :raises:\n\n   raise ValueError('no total')\n\n"
        "The total is :live-value:`total`.\n"
    )
    app, warnings = build_site(src, kernels=FakeKernels())
    said = [line for line in warnings.splitlines() if ":live-value:" in line]
    assert len(said) == 1, warnings
    assert "no value named 'total'" in said[0] and "ended with ValueError: no total" in said[0], said


def test_latex_quotes_values_as_text(site):
    latex = site["latex"]
    # Sphinx 8.0 writes an inline's classes as one \DUrole{a,b}, later Sphinx nests them.
    roles = r"\\DUrole\{livecells-value(?:,livecells-stored|\}\{\\DUrole\{livecells-stored)\}"
    assert re.search(rf"Alpha’s total is {roles}\{{0\.667 \(stored", latex)
    assert r"\textless{}script\textgreater{}" in latex and "<script>" not in latex
    assert r"\DUrole{mathjax_ignore}" not in latex  # an HTML matter
    assert site["latex_warnings"].count("[livecells.value]") == 10  # the same, at the same lines


def test_the_page_notebooks_quote_values(site):
    prose = {
        fw: "".join("".join(c["source"]) for c in notebook["cells"] if c["cell_type"] == "markdown")
        for fw, notebook in site["notebooks"].items()
    }
    assert "In alpha prose the total is" in prose["alpha"] and "alpha/total:.3f" not in prose["alpha"]
    assert ">0.667</span>" in prose["alpha"]
    # Prose of both frameworks: each notebook quotes its own framework's value.
    assert re.search(r"In shared prose the total is <span [^>]*>0\.67</span>", prose["alpha"])
    assert re.search(r"In shared prose the total is <span [^>]*>0\.25</span>", prose["beta"])


@pytest.mark.slow
def test_naming_a_value_does_not_change_what_runs(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-values", src)
    kernels = FakeKernels()
    build_site(src, kernels=kernels, freshenv=True)
    assert kernels.take()
    page = src / "md.md"
    page.write_text(page.read_text().replace(":value: answer\n", "").replace("{live-value}`answer`", "?"))
    _, warnings = build_site(src, kernels=kernels)
    assert kernels.take() == [], "removing :value: ran the page again"
    # bad.rst was not read again, but its quotes warned: it is written again, and warns again.
    assert len(_warnings_at(warnings, f"{src / 'bad.rst'}:27")) == 3, warnings
    page.write_text(page.read_text().replace("6 * 7\n", ":value: again\n6 * 7\n").replace("?,", "{live-value}`again`,"))
    app, _ = build_site(src, kernels=kernels)
    assert kernels.take() == []
    assert _quotes(_paragraph(soup(Path(app.outdir) / "md.html"), "The answer is"))[0].startswith("42")


# -- real kernels --------------------------------------------------------------------------------

KERNEL_PAGE = '''\
Real kernel
===========

.. live-cell:: py
   :name: plot
   :value: mean

   import statistics
   import matplotlib.pyplot as plt
   from IPython.display import HTML, display
   fig, ax = plt.subplots(figsize=(2, 1))
   ax.plot([1, 2, 3])
   display(fig, metadata={"livecells": {"name": "curve"}})
   plt.close(fig)
   display(0.125, metadata={"livecells": {"name": "share"}})
   display(HTML("<table><tr><td>KERNELTABLE</td></tr></table>"), metadata={"livecells": {"name": "table"}})
   statistics.mean([1, 2, 4])

.. live-cell:: py
   :value: tensor-mean

   import numpy, torch
   display(numpy.float64(0.5), metadata={"livecells": {"name": "numpy-half"}})
   torch.arange(4.0).mean()

The mean is :live-value:`mean:.3f`, the share :live-value:`share:.0%`, the plot took :live-time:`plot`.

Torch's mean is :live-value:`tensor-mean:.2f` (:live-value:`tensor-mean`), NumPy's half :live-value:`numpy-half:.1%`.

.. live-value:: curve

.. live-value:: table
'''


@pytest.fixture(scope="module")
def kernel_site(tmp_path_factory):
    src = tmp_path_factory.mktemp("kernel-values") / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        'extensions = ["livecells"]\n'
        'livecells_frameworks = {"py": {"label": "Python", "kernel": "python3"}}\n'
        "livecells_timeout = 120\n"
    )
    (src / "index.rst").write_text(KERNEL_PAGE)
    html, warnings = build_site(src)
    latex, latex_warnings = build_site(src, "latex", builddir=src / "_latex", confoverrides={"livecells_execute": "cache"})
    return {
        "page": soup(html.outdir / "index.html"),
        "outdir": Path(html.outdir),
        "warnings": warnings + latex_warnings,
        "latex": next(latex.outdir.glob("*.tex")).read_text(encoding="utf-8"),
        "latex_dir": Path(latex.outdir),
        "store": json.loads(next((src / "_livecells").rglob("*.json")).read_text()),
    }


# Real kernels that import torch and matplotlib.
@pytest.mark.kernel
@pytest.mark.frameworks
def test_a_real_kernel_names_values_without_livecells(kernel_site, no_kernel_left):
    page = kernel_site["page"]
    assert "WARNING" not in kernel_site["warnings"], kernel_site["warnings"]
    quotes = _quotes(_paragraph(page, "The mean is"))
    assert quotes[:2] == ["2.333", "12%"]
    assert re.fullmatch(r"\d+\.\d+ s on \S.*", quotes[2]), quotes[2]
    # The reprs of a torch tensor and a NumPy scalar, as the kernel gave them, read as numbers.
    assert _quotes(_paragraph(page, "s mean is")) == ["1.50", "tensor(1.5000)", "50.0%"]
    cell = cell_with(page, "statistics.mean")
    # The named displays are not shown at the cell (no figure, no table); its result is.
    assert cell.select("img") == [] and cell.select("table") == []
    assert "HTML object" not in outputs(cell) and "0.125" not in outputs(cell)
    assert "2.3333333333333335" in outputs(cell)


# Real kernels that import torch and matplotlib.
@pytest.mark.kernel
@pytest.mark.frameworks
def test_a_figure_and_an_html_table_are_values_of_a_real_kernel(kernel_site):
    figure, table = kernel_site["page"].select("div.livecells-value-block")
    image = figure.select_one("img")
    assert image is not None and (kernel_site["outdir"] / image["src"]).is_file()
    # livecells_allow_html is on (its default): the table is HTML, as at a cell.
    assert table.select_one("table td").get_text() == "KERNELTABLE"
    assert re.search(r"\\sphinxincludegraphics.*\{\{?livecells-[0-9a-f]{20}\}?\.png\}", kernel_site["latex"])
    # LaTeX shows the table's text/plain, never its HTML.
    assert "IPython.core.display.HTML object" in kernel_site["latex"] and "<table>" not in kernel_site["latex"]


# Real kernels that import torch and matplotlib.
@pytest.mark.kernel
@pytest.mark.frameworks
def test_the_store_keeps_the_named_outputs(kernel_site):
    [session] = kernel_site["store"]["sessions"].values()
    outputs_ = session["cells"][0]["outputs"]
    names = [o["metadata"]["livecells"]["name"] for o in outputs_ if "livecells" in o.get("metadata", {})]
    assert names == ["curve", "share", "table"]
