"""Cuts this folder's fixtures from d2l-en and records what d2lbook makes of them.

``python make_fixtures.py D2L_EN_CHECKOUT D2LBOOK_PYTHON`` (with livecells' Python or any other),
where the checkout is d2l-ai/d2l-en at the commit below and D2LBOOK_PYTHON has d2lbook==1.0.3
(pandoc on PATH: d2lbook's RST goes through it). For each fixture it writes ``NAME.md``: the
listed line ranges of one d2l-en page, joined by a blank line, byte for byte otherwise (each
starts with the page's title, so a label has the section d2lbook would move it to). Then
``d2lbook.json``, from ``bench/d2l_book/d2lbook_oracle.py`` on this folder: per fixture, each of
d2l-en's four tabs' code cells as d2lbook runs them, its slides (``d2lbook slides``), its slide
marks, and the RST ``d2lbook build rst`` writes.
"""

import subprocess
import sys
from pathlib import Path

COMMIT = "23d7a5aecceee57d1292c56e90cce307f183bb0a"
TABS = "pytorch,mxnet,jax,tensorflow"
#: fixture: (d2l-en page, [(first line, last line), ...]) — what each one shows.
FIXTURES = {
    # A tab.selected branch nested in a kept one: TensorFlow's self.training stays in __init__.
    "oo-design": ("chapter_linear-regression/oo-design.md", [(1, 7), (184, 323)]),
    # Labels a blank line below their section title.
    "attention-pooling": ("chapter_attention-mechanisms-and-transformers/attention-pooling.md", [(1, 12)]),
    "minibatch-sgd": ("chapter_optimization/minibatch-sgd.md", [(1, 2), (205, 224)]),
    # Figures: image, blank line, label, then the next section; captions over two lines.
    "lstm": ("chapter_recurrent-modern/lstm.md", [(1, 2), (196, 210)]),
    "bert": ("chapter_natural-language-processing-pretraining/bert.md", [(1, 2), (178, 186)]),
    "queries-keys-values": ("chapter_attention-mechanisms-and-transformers/queries-keys-values.md", [(6, 7), (38, 46)]),
    # Images with a caption and no label.
    "gp-intro": ("chapter_gaussian-processes/gp-intro.md", [(1, 19)]),
    # $$…$$ inside a paragraph, in list items, and runs of one-line equations.
    "gp-inference": ("chapter_gaussian-processes/gp-inference.md", [(7, 8), (17, 20), (24, 24), (70, 78)]),
    "linear-algebra": ("chapter_preliminaries/linear-algebra.md", [(6, 7), (941, 956)]),
    "linear-regression-concise": ("chapter_linear-regression/linear-regression-concise.md", [(6, 7), (415, 422)]),
    # d2l's table captions: before the table, with the label beside it or after the table.
    "hardware": ("chapter_computational-performance/hardware.md", [(1, 2), (152, 202)]),
    "aws": ("chapter_appendix-tools-for-deep-learning/aws.md", [(1, 2), (60, 72)]),
    "glove": ("chapter_natural-language-processing-pretraining/glove.md", [(1, 2), (196, 212)]),
    # eval_rst fences inside framework prose.
    "d2l": ("chapter_appendix-tools-for-deep-learning/d2l.md", [(1, 42)]),
    # Slide marks: around a labelled equation; over a paragraph and an equation; on lines of
    # their own around one; in a section title, under a page title with "--" (a dash to smart
    # quotes, not to d2lbook); slide-only text (~~), one ending with a space.
    "calculus": ("chapter_preliminaries/calculus.md", [(6, 7), (84, 93)]),
    "anchor": ("chapter_computer-vision/anchor.md", [(1, 2), (432, 452)]),
    "softmax-regression-scratch": ("chapter_linear-classification/softmax-regression-scratch.md", [(6, 7), (64, 76)]),
    "custom-layer": ("chapter_builders-guide/custom-layer.md", [(6, 7), (53, 101)]),
    "encoder-decoder": ("chapter_recurrent-modern/encoder-decoder.md", [(6, 7), (66, 73)]),
    "image-classification-dataset": (
        "chapter_linear-classification/image-classification-dataset.md", [(6, 9), (139, 152)],
    ),
}


def main() -> None:
    checkout, python = Path(sys.argv[1]), sys.argv[2]
    here = Path(__file__).resolve().parent
    for name, (page, ranges) in FIXTURES.items():
        lines = (checkout / page).read_text(encoding="utf-8").split("\n")
        parts = ["\n".join(lines[first - 1 : last]) for first, last in ranges]
        (here / f"{name}.md").write_text("\n\n".join(parts) + "\n", encoding="utf-8")
    oracle = here.parents[2] / "bench" / "d2l_book" / "d2lbook_oracle.py"
    subprocess.run([python, str(oracle), str(here), str(here / "d2lbook.json"), TABS], check=True)


if __name__ == "__main__":
    main()
