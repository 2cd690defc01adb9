"""LaTeX/PDF: input and output cells styled apart, as d2lbook's books print them.

After the render stage has laid out the cells, each cell's code block is wrapped in
``\\begingroup\\livecellsstyleinputcell`` ... ``\\endgroup`` and each output block in the output
style, as raw LaTeX nodes; the macros live in ``livecells.sty``, written beside the ``.tex``
files and loaded before the user's ``latex_elements["preamble"]``, so a book can redefine them.
Which framework's cells are printed is the render stage's business (``livecells_latex_framework``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms.post_transforms import SphinxPostTransform

PACKAGE = "livecells"
STY = r"""% livecells: how code cells and their outputs look in LaTeX/PDF.
% Each input and output block of a cell is wrapped in \begingroup<style macro> ... \endgroup,
% so other code blocks keep Sphinx's defaults. Redefine the macros in latex_elements["preamble"]
% (it comes after this package) to restyle them.
\NeedsTeXFormat{LaTeX2e}
\ProvidesPackage{livecells}[2026/01/01 livecells cell styles]
\definecolor{livecellsInputBackground}{RGB}{243,245,248}
\definecolor{livecellsInputBorder}{RGB}{180,190,205}
\definecolor{livecellsOutputBackground}{RGB}{255,255,255}
\definecolor{livecellsOutputBorder}{RGB}{222,222,222}
\newcommand{\livecellsstyleinputcell}{%
  \sphinxsetup{VerbatimColor={named}{livecellsInputBackground},%
    VerbatimBorderColor={named}{livecellsInputBorder},verbatimwithframe=true}}
\newcommand{\livecellsstyleoutputcell}{%
  \sphinxsetup{VerbatimColor={named}{livecellsOutputBackground},%
    VerbatimBorderColor={named}{livecellsOutputBorder},verbatimwithframe=false}}
\endinput
"""
STYLES = {"livecells-input": r"\livecellsstyleinputcell", "livecells-output": r"\livecellsstyleoutputcell"}


class StyleLatexCells(SphinxPostTransform):
    """Wrap each cell's input and output literal blocks in their LaTeX style."""

    default_priority = 150  # after RenderLiveCells (100)
    formats = ("latex",)

    def run(self, **kwargs: Any) -> None:
        for block in list(self.document.findall(nodes.literal_block)):
            macro = next((m for cls, m in STYLES.items() if cls in block["classes"]), None)
            if macro is None:
                continue
            parent = block.parent
            at = parent.index(block)
            parent.insert(at + 1, nodes.raw("", r"\endgroup", format="latex"))
            parent.insert(at, nodes.raw("", r"\begingroup" + macro, format="latex"))


def copy_package(app: Sphinx) -> None:
    """Put ``livecells.sty`` beside the ``.tex`` files (the LaTeX builder only)."""
    if app.builder.format != "latex":
        return
    target = Path(app.builder.outdir) / f"{PACKAGE}.sty"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(STY, encoding="utf-8")


def setup_latex(app: Sphinx) -> None:
    app.add_post_transform(StyleLatexCells)
    app.add_latex_package(PACKAGE)
    app.connect("builder-inited", copy_package)
