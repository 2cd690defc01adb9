"""Where a cell is (issue 12, class 6): every cell is located in its own file (an included file,
a table's cell, a list-table), and runs only where the page shows it (``.. only::``), for HTML
and LaTeX. Where a cell is, and whether it runs, is the subject: its sessions run on
:class:`helpers.FakeKernels` (test_core locates a real kernel's error)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import FakeKernels, build_site, line_of, procs_site

LOCATED = """
Para.

.. include:: part.txt

+--------------------------+---------+
| .. live-cell:: alpha     | b       |
|                          |         |
|    x = 1                 |         |
|    raise KeyError("t")   |         |
+--------------------------+---------+

.. list-table::

   * - .. live-cell:: alpha

          raise OSError("l")

.. only:: latex

   .. live-cell:: alpha

      open("ran-latex", "w").close()

.. only:: html

   .. live-cell:: alpha

      open("ran-html", "w").close()
"""
PART = """Included text.

.. live-cell:: alpha

   y = 2
   raise ValueError("in include")
"""


@pytest.mark.parametrize("builder", ["html", "latex"])
def test_cells_are_located_in_their_own_file_and_run_only_where_shown(tmp_path, rootdir, builder):
    src = procs_site(tmp_path, rootdir, {"page1.rst": LOCATED})
    (src / "part.txt").write_text(PART)
    page = (src / "page1.rst").read_text()
    # Where a cell is, and whether it is run, is the subject: its sessions run on FakeKernels
    # (test_core locates a real kernel's error).
    app, warnings = build_site(src, builder, kernels=FakeKernels())
    assert f"part.txt:{line_of(PART, 'ValueError')}: WARNING: live-cell [alpha]: ValueError" in warnings
    assert f"page1.rst:{line_of(page, 'KeyError')}: WARNING: live-cell [alpha]: KeyError" in warnings
    assert f"page1.rst:{line_of(page, 'OSError')}: WARNING: live-cell [alpha]: OSError" in warnings
    assert (src / "ran-html").exists() == (builder == "html")
    assert (src / "ran-latex").exists() == (builder == "latex")
    if builder == "html":
        # The notebook download holds the cells the page shows, not the LaTeX-only one.
        notebooks = [p.read_text() for p in Path(app.outdir).rglob("page1*.ipynb")]
        assert notebooks and all("ran-latex" not in nb and "ran-html" in nb for nb in notebooks)
