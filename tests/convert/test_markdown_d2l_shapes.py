"""``convert`` on the shapes of d2l-en that a whole-book run found lost, with d2lbook as the oracle.

The fixtures (tests/data/d2l-md-shapes) are cut from d2l-en's own pages by ``make_fixtures.py``,
which also recorded what d2lbook 1.0.3 makes of them (``d2lbook.json``: each tab's code cells and
slides, and the RST ``d2lbook build rst`` writes). They are converted for d2l-en's four tabs and
built by Sphinx with execution off, then compared by bench/d2l_book/check.py's own comparison, the
one the whole-book run uses: every tab's cells, figures with captions, display equations,
captioned tables, what each label is on, the slide marks and each tab's slides. The whole book: bench/d2l_book/check.py (test at the end,
skipped without a d2l-en checkout and d2lbook).
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path

import pytest

from paths import DATA, REPO

SHAPES = DATA / "d2l-md-shapes"
TABS = ["pytorch", "mxnet", "jax", "tensorflow"]


def _check_module():
    spec = importlib.util.spec_from_file_location("d2l_book_check", REPO / "bench" / "d2l_book" / "check.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


check = _check_module()


@pytest.fixture(scope="module")
def compared(tmp_path_factory):
    expected = json.loads((SHAPES / "d2lbook.json").read_text(encoding="utf-8"))
    work = tmp_path_factory.mktemp("shapes")
    summary, losses, kinds, warnings, results = check.compare(SHAPES, work, TABS, expected, parallel=1)
    return {"summary": summary, "losses": losses, "warnings": warnings, "results": results, "book": work / "book"}


def test_every_cell_and_everything_a_reader_sees_as_d2lbook_has_it(compared):
    summary = compared["summary"]
    assert compared["losses"] == []
    assert summary["cells"] == summary["cells_equal"] > 0
    # What the comparison covered, counted in d2lbook's RST of the fixtures.
    counts = summary["d2lbook_counts"]
    assert counts["captions"] == 6 and counts["equations"] == 14 and counts["tables"] == 4, counts
    assert counts["labels"] == 27, counts


def test_every_slide_mark_kept_and_every_deck_as_d2lbook_makes_it(compared):
    """Each tab's slides (``d2lbook slides``) of the fixtures with slide marks: equal, but for
    the anchor excerpt's, where d2lbook keeps a space at a line's end that markdown-it drops
    (so d2lbook's sentence split reads ". " where livecells' reads ".\n")."""
    summary = compared["summary"]
    assert summary["slide_marks"] == 9
    assert summary["slide_decks"] == 25 and summary["slide_decks_equal"] == 21
    assert [d.split(":")[0] for d in summary["slide_decks_spacing"]] == [
        f"anchor [{tab}]" for tab in TABS
    ]


def test_the_build_has_no_undefined_reference(compared):
    bad = [w for w in compared["warnings"].splitlines() if re.search(r"undefined label|equation not found|number is not assigned", w)]
    # Only what these excerpts cite of the rest of the book.
    assert {re.search(r"'([^']+)'|assigned: (\S+)", w).group(1) for w in bad} <= {"sec_attention", "subsec_skipgram-global", "sec_model_construction"}


def test_nested_branch_of_tensorflow_stays_in_init(compared):
    """oo-design's Module, TensorFlow: ``self.training = None`` in ``__init__`` (d2lbook dedents a
    nested branch once, line by line), so the class works and later cells can use it."""
    expected = json.loads((SHAPES / "d2lbook.json").read_text(encoding="utf-8"))
    module = next(c for c in expected["oo-design"]["cells"]["tensorflow"] if c.startswith("class Module"))
    assert "\n        self.training = None\n" in module
    text = (compared["book"] / "oo-design.md").read_text(encoding="utf-8")
    assert "\n        self.training = None\n" in text
    namespace: dict = {}
    exec(compile(module.replace("(d2l.nn_Module, d2l.HyperParameters)", ""), "oo-design", "exec"), {"d2l": None, "tf": None, "ProgressBoard": lambda: None}, namespace)
    assert "training" in namespace["Module"].__init__.__code__.co_names


def test_shapes_in_the_converted_text(compared):
    def read(name: str) -> str:
        return (compared["book"] / f"{name}.md").read_text(encoding="utf-8")

    # A label a blank line below its title labels the section.
    assert re.search(r"^\(sec_attention-pooling\)=\n# Attention Pooling", read("attention-pooling"), re.M)
    assert re.search(r"^\(sec_minibatches\)=\n## Minibatches", read("minibatch-sgd"), re.M)
    # Image, blank line, label: the figure's, not the next section's.
    lstm = read("lstm")
    assert re.search(r"^\(fig_lstm_2\)=\n\n```\{figure\} \.\./img/lstm-2\.svg", lstm, re.M)
    assert not re.search(r"^\(fig_lstm_2\)=\n#", lstm, re.M)
    # A caption over two lines; a caption and no label.
    assert re.search(r"```\{figure\} \.\./img/bert-input\.svg\n:name: fig_bert-input\n\nThe embeddings", read("bert"))
    assert read("gp-intro").count("```{figure}") == 3
    # $$ in a paragraph: a display block of its own, the paragraph's text around it.
    assert "inputs\n\n$$X_* = x_{*1},x_{*2},\\dots,x_{*m}.$$\n\nThen we want" in read("gp-inference")
    # Table captions, referenceable; eval_rst inside framework prose is RST.
    assert "```{table} Common Latency Numbers.\n:name: table_latency_numbers\n" in read("hardware")
    assert "~~~{table} Word-word" in read("glove")
    assert "```eval_rst" not in read("d2l") and read("d2l").count("```{eval-rst}") >= 4


def test_the_report_counts_what_it_placed(compared):
    results = compared["results"]
    hardware = results[Path("hardware.md")]
    assert hardware.counts["tables"] == 2 and hardware.counts["labels"] == 3
    line = hardware.summary("hardware.md")
    assert "2 captioned tables" in line and "3 labels" in line
    assert results[Path("gp-intro.md")].counts["captions"] == 3


def test_a_caption_with_no_table_is_kept_as_written_and_located():
    from livecells.convert.markdown import convert_markdown

    source = "# T\n\nText.\n\n:A caption\n:label:`tab_x`\n\nMore text.\n\n: not one,\n  two lines\n\nEnd.\n"
    result = convert_markdown(source, tabs=TABS, source="ch.md")
    assert result.warnings == [f"ch.md:{n}: WARNING: table caption with no table after it: kept as text" for n in (5, 10)]
    assert "(tab_x)=\n:A caption\n\nMore text.\n\n: not one,\n  two lines\n\nEnd.\n" in result.text
    assert result.counts["tables"] == 0


def test_a_labelled_image_without_caption_is_a_figure_with_a_located_note():
    from livecells.convert.markdown import convert_markdown

    result = convert_markdown("# T\n\n![](../img/x.svg)\n:label:`fig_x`\n", tabs=TABS, source="ch.md")
    assert result.text == "# T\n\n```{figure} ../img/x.svg\n:name: fig_x\n```\n"
    assert result.warnings == ["ch.md:3: WARNING: image labelled fig_x has no caption: a reference to it gets no number"]


def test_math_in_code_spans_is_text():
    from livecells.convert.markdown import convert_markdown

    result = convert_markdown("# T\n\nWrite `$$x$$` for display math, as $$y$$ here.\n", tabs=TABS)
    assert result.text == "# T\n\nWrite `$$x$$` for display math, as\n\n$$y$$\n\nhere.\n"
    assert result.counts["equations"] == 1


def test_converting_a_converted_excerpt_changes_nothing(compared):
    from livecells.convert.markdown import convert_markdown

    for path in sorted(SHAPES.glob("*.md")):
        once = (compared["book"] / path.name).read_text(encoding="utf-8")
        twice = convert_markdown(once, tabs=TABS)
        assert (twice.text, twice.warnings) == (once, []), path.name


D2L_EN = os.environ.get("LIVECELLS_D2L_EN")
D2LBOOK_PYTHON = os.environ.get("LIVECELLS_D2LBOOK_PYTHON")


@pytest.mark.slow
@pytest.mark.skipif(
    not (D2L_EN and Path(D2L_EN, "config.ini").is_file() and D2LBOOK_PYTHON and Path(D2LBOOK_PYTHON).is_file()),
    reason="the whole-book check needs LIVECELLS_D2L_EN (a d2l-en checkout) and LIVECELLS_D2LBOOK_PYTHON "
    "(a Python with d2lbook==1.0.3, and pandoc on PATH)",
)
def test_the_whole_d2l_en_book(tmp_path):
    """Every page of d2l-en, every tab: each cell as d2lbook's, nothing a reader sees lost."""
    import subprocess

    run = subprocess.run(
        [sys.executable, str(REPO / "bench" / "d2l_book" / "check.py"), D2L_EN, "--d2lbook-python", D2LBOOK_PYTHON, "--work", str(tmp_path)],
        capture_output=True, text=True, env={**os.environ, "PYTHONPATH": str(REPO / "ext")},
    )
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]

