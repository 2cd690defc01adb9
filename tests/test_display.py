"""The display options of ``live-cell``: line numbers, emphasised lines, code below its output,
collapsed code and output.

tests/roots/test-display uses each of them in tab sets, ``all`` cells, a MyST page and with bad
values; its sessions run on :class:`helpers.FakeKernels` (how a cell is shown is the subject).
Sphinx's HTML and LaTeX writers draw what the options ask for; these tests read what they wrote.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers import FakeKernels, build_site, built_page, cell_with


@pytest.fixture(scope="module")
def site(tmp_path_factory, rootdir) -> dict[str, Any]:
    """The root built to HTML, then to LaTeX; the pages, the warnings, the sessions that ran."""
    src = tmp_path_factory.mktemp("display") / "src"
    shutil.copytree(rootdir / "test-display", src)
    kernels = FakeKernels()
    app, warnings = build_site(src, kernels=kernels)
    ran = kernels.take()
    latex_app, latex_warnings = build_site(src, "latex", kernels=kernels)
    return {
        "src": src,
        "html": Path(app.outdir),
        "warnings": warnings,
        "ran": ran,
        "tex": (Path(latex_app.outdir) / "projectnamenotset.tex").read_text(encoding="utf-8"),
        "latex_warnings": latex_warnings,
    }


def page(site: dict[str, Any], name: str) -> Any:
    return built_page(site["html"] / f"{name}.html")


def numbered_lines(cell: Any) -> tuple[list[str], list[str]]:
    """The line numbers a cell's code shows, and the text of its emphasised lines."""
    code = cell.select_one(".livecells-input pre")
    numbers = [n.get_text().strip() for n in code.select("span.linenos")]
    emphasised = [h.get_text().strip() for h in code.select("span.hll")]
    return numbers, emphasised


def parts(cell: Any) -> list[str]:
    """What a rendered cell shows, in order: code, output, output tabs, collapsed code or output, meta."""
    found = []
    for child in cell.find_all(recursive=False):
        classes = child.get("class", [])
        if "livecells-collapsed-code" in classes:
            found.append("collapsed-code")
        elif "livecells-collapsed-output" in classes:
            found.append("collapsed-output")
        elif "livecells-input" in classes:
            found.append("code")
        elif "sd-tab-set" in classes:
            found.append("tabs")
        elif "livecells-output" in classes:
            found.append("output")
        elif "livecells-meta" in classes:
            found.append("meta")
    return found


def test_the_book_builds_with_warnings_only_for_its_bad_values(site):
    assert site["ran"] == [("bad", "alpha"), ("index", "alpha"), ("index", "beta"), ("md", "alpha")]
    said = [line for line in site["warnings"].splitlines() if "WARNING" in line or "ERROR" in line]
    assert said and all("bad.rst:" in line for line in said), said
    assert [line for line in site["latex_warnings"].splitlines() if "index.rst" in line or "md.md" in line] == []


def test_line_numbers_and_emphasis_as_code_block_draws_them(site):
    index = page(site, "index")
    assert numbered_lines(cell_with(index, 'FRAMEWORK = "alpha"')) == (
        ["1", "2", "3", "4", "5"], ["2a = 1", "4c = 3", '5print("tabbed", FRAMEWORK)']
    )
    # :lineno-start: alone numbers the lines (as code-block); in a tab, and in an `all` cell.
    assert numbered_lines(cell_with(index, 'FRAMEWORK = "beta"')) == (["7", "8"], [])
    assert numbered_lines(cell_with(index, "same everywhere")) == (["10", "11"], ['10print("same everywhere")'])
    assert numbered_lines(cell_with(index, "a table, say")) == ([], [])  # no option: as before


def test_code_below_puts_the_code_after_the_output(site):
    index = page(site, "index")
    assert parts(cell_with(index, 'FRAMEWORK = "beta"')) == ["collapsed-output", "collapsed-code", "meta"]
    assert parts(cell_with(index, '"differs"')) == ["tabs", "collapsed-code", "meta", "meta"]
    assert parts(cell_with(index, 'FRAMEWORK = "alpha"')) == ["code", "output", "meta"]


def test_collapsed_parts_are_details_elements_with_a_summary(site):
    index = page(site, "index")
    beta = cell_with(index, 'FRAMEWORK = "beta"')
    output, code = beta.select("details")
    # The author's summary is text (markup in it too); the default says what opening does.
    assert output.summary.get_text() == "What <b>beta</b> printed" and output.summary.b is None
    assert "tabbed beta" in output.get_text() and not output.has_attr("open")
    assert [s.get_text() for s in code.summary.select("span")] == ["Show code", "Hide code"]
    assert code.select_one("span.livecells-when-closed").get_text() == "Show code"
    assert code.select_one(".livecells-input") is not None
    # Inside the tab set of its group, and for an `all` cell (its output collapsed, once).
    assert beta.find_parent("div", class_="sd-tab-set") is not None
    shared = cell_with(index, "same everywhere")
    assert [d["class"] for d in shared.select("details")] == [["livecells-collapsed", "livecells-collapsed-output"]]
    assert shared.select_one("details summary").get_text() == "Show outputHide output"
    assert cell_with(index, '"differs"').select_one("details summary").get_text() == "The loop"


def test_myst_pages_take_the_same_options(site):
    md = page(site, "md")
    cell = cell_with(md, "md_value")
    assert numbered_lines(cell) == (["1", "2"], ['2print("myst", md_value + 1)'])
    assert parts(cell) == ["collapsed-code", "collapsed-output", "meta"]


def test_latex_prints_everything_with_sphinx_line_numbers(site):
    tex = site["tex"]
    assert "details" not in tex and "Show code" not in tex and "What <b>" not in tex
    # Line numbers and emphasis through Sphinx's own literal-block machinery.
    assert r"\fvset{hllines={, 2, 4, 5,}}" in tex
    assert "numbers=left,firstnumber=10" in tex and r"\fvset{hllines={, 1,}}" in tex
    # Collapsed parts printed in full (the MyST page's collapsed code and output).
    assert r"\PYG{n}{md\PYGZus{}value} \PYG{o}{=} \PYG{l+m+mi}{41}" in tex and "\nmyst 42\n" in tex


def test_bad_values_are_located_warnings_and_the_cell_still_runs(site):
    said = site["warnings"]
    text = (site["src"] / "bad.rst").read_text()
    first = text.splitlines().index(".. live-cell:: alpha") + 1
    for message in (
        ":lineno-start: must be a whole number, not 'soon'",
        ":emphasize-lines: invalid line number spec: '2-x'",
        ":emphasize-lines: line number spec is out of range (1-1): '1, 9'",
        ":collapse-output: has no effect with :hide-output:",
    ):
        line = next(line for line in said.splitlines() if message in line)
        assert re.search(r"bad\.rst:\d+: WARNING: live-cell: ", line) and "[livecells.config]" in line, line
    assert f"bad.rst:{first}: WARNING: live-cell: :lineno-start:" in said
    bad = page(site, "bad")
    still = cell_with(bad, "still runs")
    assert "still runs" in still.select_one(".livecells-output").get_text()
    assert numbered_lines(still) == (["1"], [])
    assert numbered_lines(cell_with(bad, "one line")) == ([], ['print("one line")'])
    hidden = cell_with(bad, '"hidden"')
    assert hidden.select("details, .livecells-output") == []


def test_display_options_do_not_run_a_page_again(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-display", src)
    for name in ("md.md", "bad.rst"):
        (src / name).unlink()
    index = src / "index.rst"
    index.write_text(index.read_text().replace("   md\n   bad\n", ""))
    kernels = FakeKernels()
    build_site(src, kernels=kernels)
    assert kernels.take() == [("index", "alpha"), ("index", "beta")]
    text = index.read_text()
    # Every display option off, changed or added; the code and the options that run stay.
    changed = re.sub(r"   :(linenos|code-below|collapse-code|collapse-output|emphasize-lines|lineno-start):.*\n", "", text)
    changed = changed.replace(".. live-cell:: alpha\n", ".. live-cell:: alpha\n   :linenos:\n   :collapse-code:\n")
    assert changed != text
    index.write_text(changed)
    _, warnings = build_site(src, kernels=kernels)
    assert kernels.take() == []  # nothing ran again
    page = built_page(Path(src / "_build" / "html" / "index.html"))
    assert "tabbed alpha" in page.get_text() and page.select("span.linenos") != []
    assert len(page.select("details.livecells-collapsed-code")) == 2  # the two alpha-only cells
