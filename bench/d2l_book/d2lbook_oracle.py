"""What d2lbook 1.0.3 makes of d2lbook markdown pages: per-tab code cells and the page's RST.

Run with d2lbook's own Python (d2lbook==1.0.3, pandoc on PATH), never livecells':
``python d2lbook_oracle.py SRC_DIR OUT.json TAB[,TAB...] [PAGE.md ...]`` (no pages: every
``*.md`` and ``*/*.md`` of SRC_DIR, as d2l-en's ``config.ini`` ``notebooks`` says, less its
exclusions). For each page:

- ``cells``: per tab, the code cells of the notebook ``d2lbook build eval --tab TAB`` makes
  (``build._process_and_eval_notebook``: ``read_markdown``, ``split_markdown_cell``,
  ``get_tab_notebook``), each stripped, empty ones left out; None where d2lbook makes no
  notebook for that tab. The alias rewriting and isort formatting that follow are left out:
  livecells runs the code as written.
- ``slides``: per tab, the cells of the deck ``d2lbook slides PAGE --tab TAB`` makes
  (``slides._generate_slides`` of that tab's notebook): ``[cell type, slide type, source]``
  each; None where it makes none (no notebook, or no slide mark in it), or the error d2lbook
  stops with (a string). ``marks``: the slide marks of the page's markdown cells
  (``slides._match_slide_marks``), every tab's prose included.
- ``rst``: the RST ``d2lbook build rst`` writes for the page's prose (``build.ipynb2rst``:
  ``remove_slide_marks`` then ``rst.convert_notebook``, i.e. pandoc and ``rst._process_rst``), made
  from the notebook of all tabs' cells unevaluated, so every framework's prose is in it.
"""
import fnmatch
import json
import sys
from pathlib import Path

from d2lbook import notebook, rst, slides
from d2lbook.build import remove_slide_marks

EXCLUDED = ["README.md", "STYLE_GUIDE.md", "INFO.md", "CODE_OF_CONDUCT.md", "CONTRIBUTING.md", "contrib/*md"]


def main() -> None:
    src, out, tabs = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3].split(",")
    pages = sys.argv[4:] or sorted(
        p.relative_to(src).as_posix() for p in [*src.glob("*.md"), *src.glob("*/*.md")]
        if not any(fnmatch.fnmatch(p.relative_to(src).as_posix(), x) for x in EXCLUDED)
        and not p.relative_to(src).as_posix().startswith(".")  # glob.glob, d2lbook's, skips them
    )
    result = {}
    for page in pages:
        text = (src / page).read_text(encoding="utf-8")
        entry = {"cells": {}, "slides": {}}
        for tab in tabs:
            nb = notebook.split_markdown_cell(notebook.read_markdown(text))
            nb = notebook.get_tab_notebook(nb, tab, tabs[0])
            code = [c.source.strip() for c in nb.cells if c.cell_type == "code"] if nb else None
            entry["cells"][tab] = [c for c in code if c] if code is not None else None
            entry["slides"][tab] = deck(nb)
        cells = notebook.split_markdown_cell(notebook.read_markdown(text)).cells
        entry["marks"] = sum(len(slides._match_slide_marks(c.source)) for c in cells if c.cell_type == "markdown")
        nb = remove_slide_marks(notebook.split_markdown_cell(notebook.read_markdown(text)))
        entry["rst"], _ = rst.convert_notebook(nb, {"unique_key": "oracle"})
        result[page[:-3]] = entry
        print(page, file=sys.stderr)
    out.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")


def deck(nb):
    """d2lbook's deck of a tab's notebook, as [cell type, slide type, source] per cell."""
    if nb is None:
        return None
    try:
        made = slides._generate_slides(nb)
    except (AssertionError, IndexError) as err:  # unpaired marks; a sentence d2lbook cannot capitalize
        return f"{type(err).__name__}: {err}"[:200]
    if made is None:
        return None
    return [
        [c.cell_type, c.metadata.get("slideshow", {}).get("slide_type", ""), c.source] for c in made.cells
    ]


if __name__ == "__main__":
    main()
