"""Writes d2lbook-cells.json: d2lbook's own per-tab code cells of the chapters here.

Run with d2lbook 1.0.3 installed (and setuptools<81, d2l-notedown), from this folder:
``python make_oracle.py``. For each chapter and tab it does what ``d2lbook build eval --tab TAB``
does to a markdown source before executing it (``build._process_and_eval_notebook``):
``notebook.read_markdown``, ``split_markdown_cell``, ``get_tab_notebook(nb, TAB, "pytorch")``,
and keeps each code cell's source, stripped, leaving out empty ones. The d2l alias rewriting and
isort formatting that d2lbook applies next are left out: livecells runs the code as written.
"""
import json
from pathlib import Path

from d2lbook import notebook

TABS = ("pytorch", "mxnet")
here = Path(__file__).parent
cells = {}
for path in sorted(here.glob("chapter_*/*.md")):
    page = path.relative_to(here).with_suffix("").as_posix()
    cells[page] = {}
    for tab in TABS:
        nb = notebook.split_markdown_cell(notebook.read_markdown(path.read_text(encoding="utf-8")))
        nb = notebook.get_tab_notebook(nb, tab, TABS[0])
        code = [c.source.strip() for c in nb.cells if c.cell_type == "code"] if nb else []
        cells[page][tab] = [c for c in code if c]
(here / "d2lbook-cells.json").write_text(json.dumps(cells, indent=1) + "\n", encoding="utf-8")
