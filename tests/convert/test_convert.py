"""Tests for ``python -m livecells convert`` on d2lbook RST (``livecells.convert.rst``, ``.tree``).

Fixtures in ``tests/data/convert/``:

- ``async-computation.d2lbook.rst``: a tabbed chapter in the shape d2lbook 1.0 emits
  (``d2lbook build rst --tab all``: nbconvert's RST, ``rst.py::_process_rst``, the
  ``notebook.py::add_html_tab`` HTML), with pytorch and mxnet panels, outputs, a cell with two
  outputs, a ``#@tab all`` cell, a label, a figure, math, a ``.. code:: bash`` block and the
  per-framework "Discussions" text tabs every d2l chapter ends with.
- ``async-computation.ja.d2lbook.rst``: the d2l-ja chapter of ``shared/seed``, re-indented and
  given back its tab HTML as d2lbook writes it.
- ``untabbed.d2lbook.rst``: a chapter without tabs (d2lbook then writes no tab HTML at all).
- ``*.expected.rst``: the converted chapters, reviewed by hand.
- ``heldout/oddities.d2lbook.rst``: real d2lbook 1.0.3 output (the d2l corpus's own script, run
  on ``heldout/oddities.md``, a chapter written for it) for outputs that no d2l chapter of the
  corpus has: a DataFrame (raw HTML), IPython's Math and Markdown displays, two outputs of one
  cell, stderr.

These fixtures were written by hand to look like d2lbook's output; real d2lbook output is in
``shared/d2l-corpus`` and ``test_convert_corpus.py`` converts all of it. The shapes the corpus
lacks are attacked at the end of this file.
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from livecells.cli.main import main
from livecells.convert.rst import ConvertResult, convert_text
from livecells.convert.tree import convert_tree

import paths
from helpers import build_site, soup

DATA = paths.DATA / "convert"
TABBED = DATA / "async-computation.d2lbook.rst"
JA = DATA / "async-computation.ja.d2lbook.rst"
UNTABBED = DATA / "untabbed.d2lbook.rst"


def read(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def cell_frameworks(text: str) -> list[str]:
    return re.findall(r"^\.\. live-cell:: (.+)$", text, flags=re.M)


def blocks_of(text: str, head: str, option: str = "") -> list[str]:
    """Bodies (dedented) of top-level blocks whose first line starts with ``head``."""
    lines = text.splitlines()
    found = []
    for i, line in enumerate(lines):
        if not line.startswith(head) or (option and lines[i + 1].strip() != option):
            continue
        j = i + 1
        while j < len(lines) and (not lines[j].strip() or lines[j].startswith(" ")):
            j += 1
        body = [x for x in lines[i + 1 : j] if x.strip() != option or not option]
        while body and not body[-1].strip():
            body.pop()
        while body and not body[0].strip():
            body.pop(0)
        indent = min(len(x) - len(x.lstrip()) for x in body if x.strip())
        found.append("\n".join(x[indent:] for x in body))
    return found


@pytest.fixture(scope="module")
def tabbed() -> ConvertResult:
    return convert_text(read(TABBED), source="async.rst")


# -- the tabbed chapter -------------------------------------------------------------------------


def test_tabbed_chapter_matches_reviewed_output(tabbed: ConvertResult) -> None:
    assert tabbed.text == read(DATA / "async-computation.expected.rst")
    assert tabbed.warnings == []


def test_one_live_cell_per_code_cell_with_its_panel_framework(tabbed: ConvertResult) -> None:
    source = read(TABBED)
    assert tabbed.cells == source.count("\n.. code:: python\n") == 7
    assert cell_frameworks(tabbed.text) == [
        "pytorch", "mxnet",  # imports
        "pytorch", "mxnet",  # benchmark
        "all",  # the untabbed (#@tab all) helper
        "pytorch", "mxnet",  # cells with two outputs each
    ]
    assert "\n.. code:: python" not in tabbed.text


def test_cell_code_kept_with_relative_indentation(tabbed: ConvertResult) -> None:
    source_cells = blocks_of(read(TABBED), ".. code:: python")
    assert blocks_of(tabbed.text, ".. live-cell:: ") == source_cells
    assert "   with d2l.Benchmark('numpy'):\n       for _ in range(10):\n           a = numpy" in (
        tabbed.text
    )


def test_no_d2lbook_markup_left(tabbed: ConvertResult) -> None:
    for marker in ("mdl-tabs", "tagClick", "diilbookstyle", ".. raw:: html", ".. raw:: latex"):
        assert marker not in tabbed.text


def test_recorded_outputs_kept_byte_for_byte(tabbed: ConvertResult) -> None:
    before = blocks_of(read(TABBED), ".. parsed-literal::", ":class: output")
    after = blocks_of(tabbed.text, ".. parsed-literal::", ":class: output")
    assert len(before) == 6
    assert after == before
    # Exact form, right after its cell, trailing spaces and inner blank lines included.
    assert (
        "   x * 2 + 1\n\n.. parsed-literal::\n   :class: output\n\n   ndarray (2, 2)\n"
        "     indented\n\n   after a blank line  \n\n.. parsed-literal::\n   :class: output\n\n"
        "   array([[3., 3.],\n          [3., 3.]])\n"
    ) in tabbed.text


def test_adjacent_cells_of_a_tab_group_stay_adjacent(tabbed: ConvertResult) -> None:
    pytorch_then_mxnet = (
        "   from torch import nn\n\n.. live-cell:: mxnet\n\n   from d2l import mxnet as d2l\n"
    )
    assert pytorch_then_mxnet in tabbed.text
    assert "   torch: 0.0019 sec\n\n.. live-cell:: mxnet\n" in tabbed.text


def test_prose_labels_and_other_directives_untouched(tabbed: ConvertResult) -> None:
    source = read(TABBED)
    kept = [
        ".. _sec_async:\n\nAsynchronous Computation\n========================\n\n\nToday's",
        "devices. See :numref:`fig_asyncgraph` and :eq:`eq_speedup`.\n",
        "Asynchrony via Backend\n----------------------\n\nFor a warmup",
        ".. _fig_asyncgraph:\n\n.. figure:: ../img/asyncgraph.svg\n\n"
        "   The backend tracks dependencies between various steps in the\n"
        "   computational graph.\n",
        ".. math:: S = \\frac{1}{(1 - p) + p / n}.\n   :label: eq_speedup\n",
        ".. code:: bash\n\n   nvidia-smi -l 1\n",
        "Summary\n-------\n\n-  Deep learning frameworks may decouple the Python frontend from an\n"
        "   execution backend.\n-  Excessive synchronization hurts performance.\n",
    ]
    for chunk in kept:
        assert chunk in source
        assert chunk in tabbed.text


def test_text_tabs_become_framework_prose(tabbed: ConvertResult) -> None:
    assert tabbed.text.endswith(
        ".. live-text:: pytorch\n\n   `Discussions <https://discuss.d2l.ai/t/2564>`__\n\n"
        ".. live-text:: mxnet\n\n   `Discussions <https://discuss.d2l.ai/t/361>`__\n"
    )
    assert tabbed.prose == 2


@pytest.mark.parametrize("path", [TABBED, JA, UNTABBED], ids=lambda p: p.name)
def test_idempotent(path: Path) -> None:
    once = convert_text(read(path))
    twice = convert_text(once.text)
    assert twice.text == once.text
    assert twice.warnings == []
    assert twice.cells == 0  # existing live-cells are left alone
    assert twice.kept == once.cells
    assert f"0 cells in ({once.cells} live-cells already there, kept)" in twice.summary("x")


# -- the d2l-ja seed chapter and a chapter without tabs ----------------------------------------


def test_seed_chapter_converts_to_reviewed_output() -> None:
    result = convert_text(read(JA))
    assert result.text == read(DATA / "async-computation.ja.expected.rst")
    assert result.cells == 8
    assert result.warnings == []
    assert cell_frameworks(result.text) == ["pytorch", "mxnet"] * 4
    assert blocks_of(result.text, ".. parsed-literal::", ":class: output") == blocks_of(
        read(JA), ".. parsed-literal::", ":class: output"
    )
    # Every prose line of the seed survives unchanged.
    seed_prose = read(JA).split("\n\n\n.. raw:: html")[0]
    assert result.text.startswith(seed_prose + "\n\n.. live-cell:: pytorch\n")


@pytest.mark.parametrize("framework", ["pytorch", "mxnet"])
def test_untabbed_chapter_uses_the_default_framework(framework: str) -> None:
    result = convert_text(read(UNTABBED), default_framework=framework)
    assert cell_frameworks(result.text) == [framework, framework]
    assert result.text.endswith(
        "   x\n\n.. parsed-literal::\n   :class: output\n\n"
        "   array([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11.])\n"
    )
    assert "We begin by importing the library.\n\n.. live-cell::" in result.text


def test_untabbed_cell_in_a_tabbed_chapter_runs_in_every_framework(tabbed: ConvertResult) -> None:
    assert "A helper that every framework uses:\n\n.. live-cell:: all\n\n   def show(x):" in (
        tabbed.text
    )


# -- unknown shapes -----------------------------------------------------------------------------

BAR = (
    ".. raw:: html\n\n"
    '    <div class="mdl-tabs mdl-js-tabs mdl-js-ripple-effect"><div class="mdl-tabs__tab-bar code">'
    '<a href="#pytorch-1-0" onclick="tagClick(\'pytorch\'); return false;" '
    'class="mdl-tabs__tab is-active">pytorch</a>'
    '<a href="#mxnet-1-1" onclick="tagClick(\'mxnet\'); return false;" '
    'class="mdl-tabs__tab ">mxnet</a></div>\n\n'
)
CLOSE = ".. raw:: html\n\n    </div>\n\n"


def panel(name: str, k: int, body: str) -> str:
    opener = f'.. raw:: html\n\n    <div class="mdl-tabs__panel " id="{name}-1-{k}">\n\n'
    return opener + body + CLOSE


CELL = ".. raw:: latex\n\n   \\diilbookstyleinputcell\n\n.. code:: python\n\n    x = 1\n\n"


def warned_lines(result: ConvertResult, source: str = "t.rst") -> list[int]:
    lines = []
    for warning in result.warnings:
        match = re.match(rf"{re.escape(source)}:(\d+): WARNING: ", warning)
        assert match, warning
        lines.append(int(match[1]))
    return lines


def line_of(text: str, needle: str) -> int:
    return text[: text.index(needle)].count("\n") + 1


def test_unparsable_tab_html_is_kept_and_warned() -> None:
    text = "Intro.\n\n.. raw:: html\n\n    <div class=\"mdl-tabs__panel\" data-x>\n\n" + CELL
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [3]
    assert "tab HTML not understood" in result.warnings[0]
    assert '.. raw:: html\n\n    <div class="mdl-tabs__panel" data-x>\n' in result.text


def test_unclosed_tab_group_is_kept_verbatim() -> None:
    group = BAR + panel("pytorch", 0, CELL) + '.. raw:: html\n\n    <div class="mdl-tabs__panel " id="mxnet-1-1">\n\n' + CELL
    text = "Intro.\n\n" + group
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [3]
    assert "never closed" in result.warnings[0]
    assert result.text == text
    assert result.cells == 0


def test_group_missing_its_closing_div_is_kept_verbatim() -> None:
    group = BAR + panel("pytorch", 0, CELL) + panel("mxnet", 1, CELL)
    text = group + "Next paragraph.\n"
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [1]
    assert f"line {line_of(text, 'Next paragraph.')}" in result.warnings[0]
    assert result.text == text


def test_output_without_a_cell_is_kept_and_warned() -> None:
    text = "Some prose.\n\n.. parsed-literal::\n    :class: output\n\n    42\n"
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [3]
    assert result.text == text


def test_markdown_python_block_is_static_code() -> None:
    text = "Not a cell:\n\n.. code:: python\n\n   import this\n"
    result = convert_text(text, source="t.rst")
    assert result.cells == 0
    assert warned_lines(result) == [3]
    assert result.text == text


def test_figure_output_is_a_recorded_output_of_its_cell() -> None:
    text = CELL + "\n\n.. figure:: output_plot_3a9f00_3_0.svg\n\n\nAfter.\n"
    result = convert_text(text, source="t.rst")
    assert result.text == (
        ".. live-cell:: pytorch\n\n   x = 1\n\n.. figure:: output_plot_3a9f00_3_0.svg\n\nAfter.\n"
    )
    assert result.warnings == []
    assert (result.figures, result.outputs) == (1, 0)


def test_html_output_is_kept_after_its_cell_with_a_warning() -> None:
    text = CELL + ".. raw:: html\n\n    <table><tr><td>1</td></tr></table>\n\nAfter.\n"
    result = convert_text(text, source="t.rst")
    assert result.text == (
        ".. live-cell:: pytorch\n\n   x = 1\n\n"
        ".. raw:: html\n\n    <table><tr><td>1</td></tr></table>\n\nAfter.\n"
    )
    assert warned_lines(result) == [line_of(text, ".. raw:: html")]
    assert "HTML output" in result.warnings[0]


HTML_OUT = ".. raw:: html\n\n    <table><tr><td>1</td></tr></table>\n\n"
MATH_OUT = ".. math::\n\n    \\displaystyle x^2 + y_1\n\n"


@pytest.mark.parametrize(("output", "kind"), [(HTML_OUT, "HTML"), (MATH_OUT, "math")])
def test_an_output_livecells_does_not_record_stays_in_its_tab(output: str, kind: str) -> None:
    """d2lbook writes a DataFrame's repr as raw HTML and IPython's Math as ``.. math::``, right
    after the cell. In a panel such an output stays in its framework's tab (as its prose), so
    the tab set is not split, and a warning says it is shown beside the live output."""
    text = BAR + panel("pytorch", 0, CELL + output) + panel("mxnet", 1, CELL + output) + CLOSE
    result = convert_text(text, source="t.rst")
    body = "\n".join("   " + x if x else "" for x in output.rstrip("\n").split("\n"))
    expected = f".. live-cell:: {{0}}\n\n   x = 1\n\n.. live-text:: {{0}}\n\n{body}\n"
    assert result.text == expected.format("pytorch") + "\n" + expected.format("mxnet")
    second = text.index(output, text.index(output) + 1)
    assert warned_lines(result) == [line_of(text, output), text[:second].count("\n") + 1]
    for warning, framework in zip(result.warnings, ("pytorch", "mxnet")):
        assert f"{kind} output kept as static content after its cell, shown beside its live " \
            "output" in warning
        assert warning.endswith(f"in the {framework} tab")
    assert convert_text(result.text, source="t.rst").text == result.text


def test_math_in_prose_after_a_cell_is_not_an_output() -> None:
    text = CELL + "Then\n\n.. math::\n\n    \\displaystyle x\n\n" + CELL + ".. math::\n\n    y = 1\n"
    result = convert_text(text, source="t.rst")
    assert result.warnings == []
    assert ".. math::\n\n    \\displaystyle x\n" in result.text


def test_real_d2lbook_outputs_of_other_kinds_keep_the_tab_sets_whole(tmp_path: Path) -> None:
    source = read(DATA / "heldout" / "oddities.d2lbook.rst")
    result = convert_text(source, source="oddities.rst")
    assert [w.split(": WARNING: ")[1].split(" output")[0] for w in result.warnings] == [
        "HTML", "HTML", "math", "math"]
    assert (result.cells_in, result.outputs, result.frameworks) == (8, 8, {"pytorch": 4, "mxnet": 4})
    (tmp_path / "conf.py").write_text('extensions = ["livecells"]\nlivecells_execute = "off"\n')
    (tmp_path / "index.rst").write_text(result.text, encoding="utf-8")
    _, warnings = build_site(tmp_path, freshenv=True)
    assert "WARNING" not in warnings and "ERROR" not in warnings
    page = soup(tmp_path / "_build" / "html" / "index.html")
    assert not page.select(".mdl-tabs")
    sets = page.select("div.sd-tab-set")
    assert len(sets) == source.count('<div class="mdl-tabs__tab-bar') == 4
    for tab_set in sets:
        panels = tab_set.select("div.sd-tab-content")
        assert [x["data-sync-id"] for x in tab_set.select("label")] == ["pytorch", "mxnet"]
        assert [len(p.select("div.livecells-cell")) for p in panels] == [1, 1]
    # Each framework's DataFrame and Math outputs stay in its own tab, after its cell.
    for index, block in ((1, "table.dataframe"), (3, "div.math")):
        assert [len(p.select(block)) for p in sets[index].select("div.sd-tab-content")] == [1, 1]
    # Both text outputs of the first cell (a printout and the value) are its recorded outputs.
    first = sets[0].select_one("div.livecells-cell")
    assert [x.get_text().strip() for x in first.select(".livecells-recorded pre")] == [
        "printed tensor([0, 1, 2])", "tensor([1, 2, 3])"]


def test_stray_closing_div_is_kept_and_warned() -> None:
    text = "Text.\n\n" + CLOSE + "More.\n"
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [3]
    assert "</div> outside a tab group" in result.warnings[0]
    assert result.text == text


def test_panels_interleaving_prose_and_cells_keep_their_order() -> None:
    body = "In PyTorch:\n\n" + CELL + "And then:\n\n"
    text = BAR + panel("pytorch", 0, body) + panel("mxnet", 1, CELL) + CLOSE
    result = convert_text(text, source="t.rst")
    assert result.warnings == []
    assert result.text == (
        ".. live-text:: pytorch\n\n   In PyTorch:\n\n.. live-cell:: pytorch\n\n   x = 1\n\n"
        ".. live-text:: pytorch\n\n   And then:\n\n.. live-cell:: mxnet\n\n   x = 1\n"
    )


def test_prose_before_cells_in_panels_becomes_framework_prose_then_cells() -> None:
    text = BAR + panel("pytorch", 0, "Torch prose.\n\n" + CELL) + panel("mxnet", 1, CELL) + CLOSE
    result = convert_text(text)
    assert result.warnings == []
    assert result.text == (
        ".. live-text:: pytorch\n\n   Torch prose.\n\n"
        ".. live-cell:: pytorch\n\n   x = 1\n\n.. live-cell:: mxnet\n\n   x = 1\n"
    )


def test_converted_text_is_stable_even_with_warnings() -> None:
    text = "Text.\n\n" + CLOSE + ".. code:: python\n\n   static\n\n" + CELL
    once = convert_text(text)
    assert convert_text(once.text).text == once.text


def test_empty_input() -> None:
    assert convert_text("") == ConvertResult("", 0, [])


# -- directory mode and the command line --------------------------------------------------------


def make_book(root: Path) -> None:
    (root / "chapter_perf").mkdir(parents=True)
    (root / "img").mkdir()
    (root / "chapter_perf" / "async.rst").write_text(read(TABBED), encoding="utf-8")
    (root / "index.rst").write_text(read(UNTABBED), encoding="utf-8")
    (root / "img" / "asyncgraph.svg").write_bytes(b"<svg/>\x00\xff")
    (root / "conf.py").write_text("project = 'd2l'\n", encoding="utf-8")


def test_convert_tree(tmp_path: Path) -> None:
    src, out = tmp_path / "rst_all", tmp_path / "out"
    make_book(src)
    results = convert_tree(src, out, default_framework="mxnet")
    assert set(results) == {Path("chapter_perf/async.rst"), Path("index.rst")}
    assert read(out / "chapter_perf" / "async.rst") == read(DATA / "async-computation.expected.rst")
    assert cell_frameworks(read(out / "index.rst")) == ["mxnet", "mxnet"]
    assert (out / "img" / "asyncgraph.svg").read_bytes() == b"<svg/>\x00\xff"
    assert read(out / "conf.py") == "project = 'd2l'\n"
    assert read(src / "index.rst") == read(UNTABBED)  # the source is not touched


def test_convert_tree_into_itself_and_below_itself(tmp_path: Path) -> None:
    make_book(tmp_path)
    convert_tree(tmp_path, tmp_path / "converted")
    assert not (tmp_path / "converted" / "converted").exists()
    results = convert_tree(tmp_path, tmp_path)
    assert read(tmp_path / "chapter_perf" / "async.rst") == read(
        DATA / "async-computation.expected.rst"
    )
    assert results[Path("converted/index.rst")].cells == 0


def test_convert_tree_copies_linked_folders_and_refuses_loops_and_broken_links(tmp_path: Path) -> None:
    make_book(tmp_path / "book")
    src, shared = tmp_path / "book", tmp_path / "shared-img"
    shutil.move(src / "img", shared)
    (src / "img").symlink_to("../shared-img")  # d2l's layout: images shared between trees
    (shared / "deeper").mkdir()
    (shared / "deeper" / "chapter.rst").write_text(read(UNTABBED), encoding="utf-8")
    (shared / "deeper" / "back").symlink_to("../../shared-img")  # a loop through the link
    (src / "chapter_perf" / "up").symlink_to("..")  # a loop inside the tree
    (src / "also-img").symlink_to("img")  # a second way to the same folder: copied too
    (src / "gone.svg").symlink_to("nowhere.svg")
    os.mkfifo(src / "pipe")  # a copy would fail (or wait for a writer)
    said: list[str] = []
    results = convert_tree(src, tmp_path / "out", warn=said.append)
    out = tmp_path / "out"
    for folder in ("img", "also-img"):
        assert (out / folder / "asyncgraph.svg").read_bytes() == b"<svg/>\x00\xff"
        assert not (out / folder).is_symlink()
        assert cell_frameworks(read(out / folder / "deeper" / "chapter.rst")) == ["pytorch", "pytorch"]
        assert not (out / folder / "deeper" / "back").exists()
    assert Path("img/deeper/chapter.rst") in results and not (out / "chapter_perf" / "up").exists()
    assert sorted(said) == sorted([
        f"{src}/also-img/deeper/back: a link to {shared}, which holds this folder: not followed (it would loop)",
        f"{src}/chapter_perf/up: a link to {src}, which holds this folder: not followed (it would loop)",
        f"{src}/gone.svg: a broken link: not copied",
        f"{src}/pipe: not a file (a named pipe, a socket, a device): not copied",
        f"{src}/img/deeper/back: a link to {shared}, which holds this folder: not followed (it would loop)",
    ])  # fmt: skip
    said.clear()
    convert_tree(src, src, warn=said.append)  # in place: nothing is written through a link
    assert read(shared / "deeper" / "chapter.rst") == read(UNTABBED)
    assert f"{src}/img: a link to {shared}: not converted in place (it lies outside the tree)" in said


def run(*argv: str) -> int:
    return main(["convert", *argv])


def test_cli_file_to_stdout_with_warnings_on_stderr(tmp_path: Path, capsys) -> None:
    path = tmp_path / "ch.rst"
    stray = "\nProse.\n\n.. parsed-literal::\n    :class: output\n\n    stray\n"
    path.write_text(read(UNTABBED) + stray, encoding="utf-8")
    assert run(str(path), "--default-framework", "mxnet") == 0
    captured = capsys.readouterr()
    assert cell_frameworks(captured.out) == ["mxnet", "mxnet"]
    warning, summary = captured.err.splitlines()
    assert re.fullmatch(rf"{re.escape(str(path))}:\d+: WARNING: .*", warning)
    assert summary == (
        f"{path}: 2 cells in; cells out: 2 mxnet; recorded outputs kept: 1 text, 0 figures; "
        "framework prose blocks: 0"
    )


def test_cli_file_and_directory_to_output(tmp_path: Path, capsys) -> None:
    out = tmp_path / "ch.out.rst"
    assert run(str(TABBED), "-o", str(out)) == 0
    assert read(out) == read(DATA / "async-computation.expected.rst")
    make_book(tmp_path / "book")
    assert run(str(tmp_path / "book"), "--output", str(tmp_path / "html_src")) == 0
    assert (tmp_path / "html_src" / "chapter_perf" / "async.rst").exists()
    captured = capsys.readouterr()
    assert captured.out == ""
    assert f"{TABBED}: 7 cells in; cells out: 3 pytorch, 3 mxnet, 1 all; " in captured.err


def test_cli_errors(tmp_path: Path, capsys) -> None:
    assert run(str(tmp_path / "missing.rst")) == 2
    assert run(str(tmp_path)) == 2  # a directory needs -o
    bad = tmp_path / "latin1.rst"
    bad.write_bytes("caf\xe9\n".encode("latin-1"))
    assert run(str(bad)) == 2
    book = tmp_path / "book"
    book.mkdir()
    (book / "bad.rst").write_bytes(b"\xff\xfe\xfa")
    assert run(str(book), "-o", str(tmp_path / "out")) == 2
    assert capsys.readouterr().err.count("livecells convert:") == 4


# -- attacks: shapes the corpus does not have -----------------------------------------------------

OUTPUT = (
    ".. raw:: latex\n\n   \\diilbookstyleoutputcell\n\n"
    ".. parsed-literal::\n    :class: output\n\n    1\n\n"
)
ONE_TAB_BAR = BAR.replace(
    '<a href="#mxnet-1-1" onclick="tagClick(\'mxnet\'); return false;" '
    'class="mdl-tabs__tab ">mxnet</a>', ""
)


def test_crlf_bom_and_odd_blank_runs() -> None:
    text = (
        "\ufeffTitle\n=====\n\n\n\n\n" + BAR
        + panel("pytorch", 0, CELL + "\n\n\n\n" + OUTPUT + "\n\n\n\n") + panel("mxnet", 1, CELL)
        + CLOSE + "\n\n\n\nEnd.\n"
    )
    lf = convert_text(text)
    crlf = convert_text(text.replace("\n", "\r\n"))
    assert crlf.text == lf.text
    assert lf.text == (
        "Title\n=====\n\n.. live-cell:: pytorch\n\n   x = 1\n\n"
        ".. parsed-literal::\n   :class: output\n\n   1\n\n"
        ".. live-cell:: mxnet\n\n   x = 1\n\nEnd.\n"
    )
    assert (lf.warnings, lf.outputs) == ([], 1)
    assert convert_text(lf.text).text == lf.text


def test_group_with_one_framework_and_a_prose_only_panel() -> None:
    prose = "Only for MXNet:\n\n-  a list item\n\n   .. math:: x = 1\n\n      y\n\n"
    text = ONE_TAB_BAR + panel("mxnet", 1, prose) + CLOSE + "After.\n"
    result = convert_text(text)
    assert result.warnings == []
    assert result.text == (
        ".. live-text:: mxnet\n\n   Only for MXNet:\n\n   -  a list item\n\n"
        "      .. math:: x = 1\n\n         y\n\nAfter.\n"
    )
    assert result.cells == 0 and result.prose == 1


def test_captioned_figure_and_plain_parsed_literal_are_content_not_outputs() -> None:
    body = (
        CELL + ".. figure:: output_x_abc123_3_0.svg\n\n   A caption, é ü 中.\n\n"
        ".. parsed-literal::\n\n    not *an* output\n\n"
    )
    text = BAR + panel("pytorch", 0, body) + panel("mxnet", 1, CELL) + CLOSE
    result = convert_text(text)
    assert result.warnings == []
    assert (result.outputs, result.figures) == (0, 0)
    assert result.text == (
        ".. live-cell:: pytorch\n\n   x = 1\n\n.. live-text:: pytorch\n\n"
        "   .. figure:: output_x_abc123_3_0.svg\n\n      A caption, é ü 中.\n\n"
        "   .. parsed-literal::\n\n       not *an* output\n\n.. live-cell:: mxnet\n\n   x = 1\n"
    )


def test_tabs_in_code_are_expanded_as_docutils_reads_them() -> None:
    # docutils expands tabs (8 columns) before a directive sees its content; re-indenting by 3
    # instead of 4 must not change what the code is.
    cell = CELL.replace("    x = 1", "    if x:\n    \ty = 1\n    \tz\t= 2")
    result = convert_text(cell)
    assert result.text == ".. live-cell:: pytorch\n\n   if x:\n       y = 1\n       z       = 2\n"


def test_a_section_title_in_a_panel_is_kept_outside_the_prose_with_a_warning() -> None:
    body = "Torch only\n----------\n\nText.\n\n" + CELL
    text = BAR + panel("pytorch", 0, body) + panel("mxnet", 1, CELL) + CLOSE
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [line_of(text, "Torch only")]
    assert result.text.startswith("Torch only\n----------\n\n.. live-text:: pytorch\n\n   Text.\n")


def test_outputs_without_a_cell_in_a_panel_are_kept_as_its_prose_with_a_warning() -> None:
    body = "Prose.\n\n" + OUTPUT + ".. figure:: output_a_b0c0d0_1_0.svg\n\n"
    text = BAR + panel("pytorch", 0, body) + panel("mxnet", 1, CELL) + CLOSE
    result = convert_text(text, source="t.rst")
    assert warned_lines(result) == [line_of(text, ".. parsed-literal::"), line_of(text, ".. fig")]
    assert ".. live-text:: pytorch\n\n   Prose.\n\n   .. parsed-literal::\n" in result.text
    assert "   .. figure:: output_a_b0c0d0_1_0.svg\n" in result.text


def test_nested_indentation_and_joined_cells_kept() -> None:
    code = "    %matplotlib inline\n    def f():\n        return 1\n    \n    \n    !ls -la\n    f()"
    text = "1. Item\n\n   .. math::\n\n      a\n\n   More.\n\n" + CELL.replace("    x = 1", code)
    result = convert_text(text)
    assert result.text == (
        "1. Item\n\n   .. math::\n\n      a\n\n   More.\n\n.. live-cell:: pytorch\n\n"
        "   %matplotlib inline\n   def f():\n       return 1\n\n\n   !ls -la\n   f()\n"
    )


# -- inferred page settings ---------------------------------------------------------------------


def gpu_chapter(code: str) -> str:
    return "Title\n=====\n\nIntro.\n\n" + CELL.replace("x = 1", code)


@pytest.mark.parametrize(
    ("code", "gpus"),
    [
        ("x = 1", None),
        ("d2l.try_gpu()", None),  # one device at most: the default already gives it
        ("x.cuda(0)", None),
        ("cpu(), gpu(), gpu(1)", 2),
        ("devices = [torch.device('cuda:0'), torch.device('cuda:1')]", 2),
        ("npx.gpu(3), npx.gpu(1), npx.gpu(2)", 4),
        ("train(num_gpus=2, batch_size=256, lr=0.2)", 2),
        ("devices = d2l.try_all_gpus()", 2),
        ("def try_all_gpus():\n        pass", None),  # a definition asks for nothing
        ("try_gpu(), try_gpu(10)", None),  # d2l's fall-back demo, not 11 GPUs
    ],
)
def test_gpu_settings_inferred_from_the_code(code: str, gpus: int | None) -> None:
    result = convert_text(gpu_chapter(code), source="t.rst")
    assert result.gpus == gpus
    if gpus is None:
        assert "live-settings" not in result.text
    else:
        assert " ".join(result.text.split()).startswith(
            "Title ===== .. livecells convert inferred the live-settings below: the code asks "
            f"for {gpus} devices in "
        )
        assert f"\n\n.. live-settings::\n   :gpus: {gpus}\n\nIntro.\n" in result.text
        assert f"inferred live-settings :gpus: {gpus} from " in result.summary("t.rst")
        assert "(line 12)" in result.summary("t.rst")
        again = convert_text(result.text)
        assert again.text == result.text and again.gpus is None


def test_existing_settings_are_not_changed() -> None:
    text = gpu_chapter("gpu(1)").replace("Intro.", ".. live-settings::\n   :gpus: 0\n\nIntro.")
    result = convert_text(text)
    assert result.gpus is None and result.settings_kept
    assert result.text.count("live-settings") == 1
    assert "its live-settings kept (the code asks for 2 devices)" in result.summary("t.rst")


def test_settings_without_a_title_go_first() -> None:
    result = convert_text(CELL.replace("x = 1", "gpu(1)"))
    assert result.text.startswith(".. livecells convert inferred")
    assert "   :gpus: 2\n\n.. live-cell:: pytorch\n" in result.text
