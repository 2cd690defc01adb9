"""The in-process limit: import the frameworks once, then exec() every cell of a generated book.

``python bench/inprocess.py CELLS.json`` runs each (page, framework) session's cells in a fresh
namespace of its own, in order, the way a kernel would: stdout is captured, and the value of a
last bare expression is taken with ``repr`` as a notebook would display it. It prints one JSON
line with its import and execution times. The wall time of the whole command (interpreter start
included) is what ``build_speed.py`` compares a build against.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import sys
import time
from typing import Any

MODULES = {"pytorch": "torch", "mxnet": "mxnet"}


def run_cell(code: str, namespace: dict[str, Any]) -> str:
    """Execute one cell; return what a notebook would show (stdout, then the last value's repr)."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown):
        exec(compile(tree, "<cell>", "exec"), namespace)
        if last is not None:
            value = eval(compile(ast.Expression(last.value), "<cell>", "eval"), namespace)
            if value is not None:
                shown.write(repr(value) + "\n")
    return shown.getvalue()


def main(argv: list[str]) -> int:
    started = time.perf_counter()
    with open(argv[0], encoding="utf-8") as handle:
        book = json.load(handle)
    for framework in book["frameworks"]:
        __import__(MODULES[framework])
    imported = time.perf_counter()
    cells = 0
    for page in book["pages"]:
        for framework, codes in page["sessions"].items():
            namespace: dict[str, Any] = {"__name__": "__main__"}
            for code in codes:
                run_cell(code, namespace)
                cells += 1
    done = time.perf_counter()
    print(json.dumps({"imports": imported - started, "cells": done - imported, "count": cells}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
