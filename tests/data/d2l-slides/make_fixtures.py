"""Copies this folder's two d2l-en pages and records the slides d2lbook 1.0.3 makes of them.

``python make_fixtures.py D2L_EN_CHECKOUT D2LBOOK_BIN`` with livecells' Python (its torch, mxnet
and ipykernel run the notebooks d2lbook evaluates), where the checkout is d2l-ai/d2l-en at the
commit below and D2LBOOK_BIN the ``bin`` folder of a venv with d2lbook==1.0.3. It writes:

- ``chapter_preliminaries/{ndarray,linear-algebra}.md``: the pages, byte for byte;
  ``config.ini``: d2l-en's, its ``tabs`` cut to pytorch, mxnet (as shared/d2l-corpus's);
  ``index.md``: a table of contents of the two pages, d2lbook's ``toc`` fence.
- ``d2lbook-slides.json``, made in a copy of this folder:
  ``cli``: per page and tab, what ``d2lbook slides PAGE --tab TAB`` writes (the deck of the
  page's unevaluated notebook); ``build``: per tab, what ``d2lbook build slides [--tab mxnet]``
  writes, its notebooks evaluated by a Jupyter kernel of this Python (the decks, the README of
  the tab with a ``github_repo``, ``rise.css``). A deck is its notebook's ``celltoolbar`` and
  ``rise`` metadata and, per cell, [cell type, slide type, source, its outputs' types].
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "23d7a5aecceee57d1292c56e90cce307f183bb0a"
PAGES = ["chapter_preliminaries/ndarray", "chapter_preliminaries/linear-algebra"]
TABS = ["pytorch", "mxnet"]
INDEX = "# Slides\n\n```toc\n:maxdepth: 2\n\n" + "\n".join(PAGES) + "\n```\n"


def deck(path: Path) -> dict:
    notebook = json.loads(path.read_text(encoding="utf-8"))
    return {
        "metadata": {k: notebook["metadata"].get(k) for k in ("celltoolbar", "rise")},
        "cells": [
            [
                cell["cell_type"],
                cell["metadata"].get("slideshow", {}).get("slide_type", ""),
                "".join(cell["source"]),
                [output["output_type"] for output in cell.get("outputs", [])],
            ]
            for cell in notebook["cells"]
        ],
    }


def main() -> None:
    checkout, bin_dir = Path(sys.argv[1]), Path(sys.argv[2])
    here = Path(__file__).resolve().parent
    for page in PAGES:
        (here / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(checkout / f"{page}.md", here / f"{page}.md")
    ini = (checkout / "config.ini").read_text(encoding="utf-8")
    assert "tabs = pytorch, mxnet, jax, tensorflow" in ini
    (here / "config.ini").write_text(ini.replace("tabs = pytorch, mxnet, jax, tensorflow", "tabs = pytorch, mxnet"))
    (here / "index.md").write_text(INDEX, encoding="utf-8")
    result: dict = {"cli": {}, "build": {}, "readme": {}}
    with tempfile.TemporaryDirectory() as tmp:
        book = Path(tmp) / "book"
        shutil.copytree(here, book, ignore=shutil.ignore_patterns("*.py", "*.json", "*.txt"))
        # The kernel d2lbook's evaluation starts (its notebooks name none: python3) is this Python.
        kernel = Path(tmp) / "jupyter" / "kernels" / "python3"
        kernel.mkdir(parents=True)
        (kernel / "kernel.json").write_text(json.dumps({
            "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3", "language": "python",
        }))
        env = {**os.environ, "JUPYTER_PATH": str(kernel.parents[1]), "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
        d2lbook = str(bin_dir / "d2lbook")
        for page in PAGES:
            result["cli"][page] = {}
            for tab in TABS:
                subprocess.run([d2lbook, "slides", f"{page}.md", "--tab", tab], cwd=book, env=env, check=True)
                result["cli"][page][tab] = deck(book / f"{page}_{tab}_slides.ipynb")
        for tab in TABS:
            folder = book / "_build" / ("slides" if tab == TABS[0] else f"slides_{tab}")
            subprocess.run([d2lbook, "build", "slides", "--tab", tab], cwd=book, env=env, check=True)
            result["build"][tab] = {page: deck(folder / f"{page}.ipynb") for page in PAGES}
            readme = folder / "README.md"
            result["readme"][tab] = readme.read_text(encoding="utf-8") if readme.exists() else None
        result["rise.css"] = (book / "_build" / "slides" / "chapter_preliminaries" / "rise.css").read_text(encoding="utf-8")
    (here / "d2lbook-slides.json").write_text(json.dumps(result, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
