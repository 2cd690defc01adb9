"""A generated book of light, d2l-like cells, written out in several flavours from one cell list.

The flavours share pages, prose and code; only the way cells are executed differs:

- ``livecells``: adjacent ``.. live-cell:: pytorch`` / ``mxnet`` cells (one tab group per cell),
  livecells' default configuration;
- ``jupyter-sphinx``: each framework's cells in a section of their own that starts with
  ``.. jupyter-kernel:: python3``. jupyter-sphinx 0.5.3 (``ExecuteJupyterCells.apply``) splits a
  page's cell nodes at every ``JupyterKernelNode`` and executes each part as one notebook in a new
  kernel, so this is exactly one kernel per (page, framework);
- ``plain``: the same cells as ``.. code-block:: python``, nothing executed;
- ``cells.json``: the cell list itself, for the in-process limit (``inprocess.py``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

FRAMEWORKS = ("pytorch", "mxnet")
LABELS = {"pytorch": "PyTorch", "mxnet": "MXNet"}

# Small tensor ops, a print, a last expression: the shape of most cells in d2l's early chapters.
TEMPLATES: dict[str, tuple[str, ...]] = {
    "pytorch": (
        "import torch\nx = torch.arange(12, dtype=torch.float32) + {k}\nx",
        "X = x.reshape(3, 4)\nprint('shape:', X.shape)\nX.sum() - {k}",
        "Y = torch.ones((3, 4)) * {k}\nZ = X + Y\nprint('mean:', Z.mean())\nZ[1:, :2]",
        "A = torch.randn(4, 4)\nB = A @ A.T + {k}\nprint(B.shape)\nB.sum(dim=0) > 0",
        "torch.exp(X / {k}).max()",
    ),
    "mxnet": (
        "from mxnet import np, npx\nnpx.set_np()\nx = np.arange(12) + {k}\nx",
        "X = x.reshape(3, 4)\nprint('shape:', X.shape)\nX.sum() - {k}",
        "Y = np.ones((3, 4)) * {k}\nZ = X + Y\nprint('mean:', Z.mean())\nZ[1:, :2]",
        "A = np.random.normal(size=(4, 4))\nB = np.dot(A, A.T) + {k}\nprint(B.shape)\nB.sum(axis=0) > 0",
        "np.exp(X / {k}).max()",
    ),
}

PROSE = (
    "A paragraph of prose between cells, as a book has: it explains what the next cell does and "
    "why, and it costs Sphinx a little parsing."
)

CONF = {
    "livecells": 'extensions = ["livecells"]\n',
    "jupyter-sphinx": 'extensions = ["jupyter_sphinx"]\n',
    "plain": "extensions = []\n",
}
CONF_COMMON = 'project = "bench"\nexclude_patterns = ["_build", "_livecells"]\n'


@dataclass(frozen=True)
class Book:
    """Which cells each (page, framework) session runs."""

    pages: int
    frameworks: tuple[str, ...]
    cells: int

    def page_name(self, page: int) -> str:
        return f"page{page + 1:02d}"

    def code(self, page: int, framework: str, cell: int) -> str:
        """The code of one cell: different on every page and cell, so every session is its own."""
        template = TEMPLATES[framework][cell % len(TEMPLATES[framework])]
        return template.format(k=(page + 1) * 100 + cell + 1)

    def sessions(self) -> int:
        return self.pages * len(self.frameworks)


def _block(directive: str, code: str, options: tuple[str, ...] = ()) -> str:
    lines = [f".. {directive}"] + [f"   {o}" for o in options] + [""]
    lines += [f"   {line}" if line else "" for line in code.splitlines()]
    return "\n".join(lines) + "\n"


def _index(book: Book) -> str:
    entries = "\n".join(f"   {book.page_name(p)}" for p in range(book.pages))
    return f"Bench book\n==========\n\n.. toctree::\n\n{entries}\n"


def _title(book: Book, page: int) -> str:
    title = f"Page {page + 1}"
    return f"{title}\n{'=' * len(title)}\n\n{PROSE}\n\n"


def tabbed_page(book: Book, page: int, flavour: str) -> str:
    """A page whose cells alternate frameworks, as d2l's tabs do (``livecells`` or ``plain``)."""
    parts = [_title(book, page)]
    for cell in range(book.cells):
        parts.append(PROSE + "\n\n")
        for framework in book.frameworks:
            code = book.code(page, framework, cell)
            directive = f"live-cell:: {framework}" if flavour == "livecells" else "code-block:: python"
            parts.append(_block(directive, code) + "\n")
    return "".join(parts)


def jupyter_sphinx_page(book: Book, page: int) -> str:
    """A page with one section, and so one kernel, per framework."""
    parts = [_title(book, page)]
    for framework in book.frameworks:
        label = LABELS[framework]
        parts.append(f"{label}\n{'-' * len(label)}\n\n")
        kernel_id = f":id: {book.page_name(page)}-{framework}"
        parts.append(_block("jupyter-kernel:: python3", "", (kernel_id,)) + "\n")
        for cell in range(book.cells):
            parts.append(PROSE + "\n\n")
            # :stderr: only silences the warning about mxnet's start-up message on stderr.
            parts.append(_block("jupyter-execute::", book.code(page, framework, cell), (":stderr:",)) + "\n")
    return "".join(parts)


def write_book(book: Book, root: Path) -> dict[str, Path]:
    """Write every flavour under ``root``; return the source folder of each (and the cell list)."""
    written: dict[str, Path] = {}
    for flavour in ("livecells", "jupyter-sphinx", "plain"):
        src = root / flavour
        src.mkdir(parents=True)
        (src / "conf.py").write_text(CONF_COMMON + CONF[flavour], encoding="utf-8")
        (src / "index.rst").write_text(_index(book), encoding="utf-8")
        for page in range(book.pages):
            if flavour == "jupyter-sphinx":
                text = jupyter_sphinx_page(book, page)
            else:
                text = tabbed_page(book, page, flavour)
            (src / f"{book.page_name(page)}.rst").write_text(text, encoding="utf-8")
        written[flavour] = src
    cells = {
        "frameworks": list(book.frameworks),
        "pages": [
            {
                "name": book.page_name(p),
                "sessions": {
                    fw: [book.code(p, fw, c) for c in range(book.cells)] for fw in book.frameworks
                },
            }
            for p in range(book.pages)
        ],
    }
    written["cells"] = root / "cells.json"
    written["cells"].write_text(json.dumps(cells, indent=1), encoding="utf-8")
    return written


def edit_cell(src: Path, book: Book, page: int, framework: str, cell: int) -> None:
    """Change one cell's code in a ``livecells`` source tree (a number in it), in place."""
    path = src / f"{book.page_name(page)}.rst"
    text = path.read_text(encoding="utf-8")
    old = book.code(page, framework, cell)
    k = str((page + 1) * 100 + cell + 1)
    new = old.replace(k, k + ".5")
    old_block, new_block = _block(f"live-cell:: {framework}", old), _block(f"live-cell:: {framework}", new)
    if text.count(old_block) != 1 or old == new:
        raise RuntimeError(f"cannot find the cell to edit in {path}")
    path.write_text(text.replace(old_block, new_block), encoding="utf-8")
