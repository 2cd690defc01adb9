"""Editing one ``#@save`` definition of a book whose library livecells makes: which sessions rerun.

``PYTHONPATH=ext .venv/bin/python bench/library_deps.py BOOK [--limit N] [--json PATH]``

BOOK is a converted book with ``livecells_library`` in its conf.py (``python -m livecells convert``
of the d2l corpus or of d2l-en). Its pages are read as the library reads them, the library made
(:func:`livecells.library.make_library`, in memory), and every session's key computed by the
build's own function (:func:`livecells.plan.keys.session_keys`, the library files as helper
modules, each framework preloading its library module as docs/migrating-d2l.rst advises). Then,
one at a time, each top-level ``def``/``class`` that a ``#@save`` cell saves gets a statement
added at the top of its body, in that cell; the library is made again and the keys compared:
a session whose key changed is one ``livecells_execute = "auto"`` reruns. The baseline is
``livecells_depends_granularity = "files"`` (every session's key covers the whole library file of
its framework, as d2lbook's regenerated file would make every page run again).
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import statistics
import sys
import time
from dataclasses import replace
from pathlib import Path

from livecells.library import book_pages, make_library
from livecells.library.pages import ALL, BookPage, PageCell
from livecells.model.frameworks import FrameworkSpec
from livecells.model.library import library_settings
from livecells.model.plans import CellPlan, PagePlan
from livecells.plan.helpers import Helpers
from livecells.plan.keys import RunSettings, session_keys
from livecells.plan.modules import read_module


def plans(pages: list[BookPage], frameworks: list[str]) -> list[PagePlan]:
    """The pages' plans as the collector makes them (an ``all`` cell: the page's frameworks)."""
    out = []
    for page in pages:
        cells = page.cells()
        named = [f for c in cells for f in c.frameworks if f != ALL]
        on_page = [f for f in frameworks if f in named] or frameworks[:1]
        plan_cells = tuple(
            CellPlan(i, tuple(on_page) if ALL in c.frameworks else tuple(f for f in c.frameworks if f in frameworks),
                     c.code, c.line, c.code_line)
            for i, c in enumerate(cells)
        )
        if plan_cells:
            out.append(PagePlan(page.docname, str(page.path), plan_cells))
    return out


#: What each session's code reaches, kept between the edits (the build keeps it so too).
USAGES: dict = {}


def keys(book: Path, pages: list[BookPage], settings, frameworks: list[str], specs) -> dict[str, str]:
    library = make_library(book, settings, frameworks, pages, book / "_no_output_")
    assert not library.kept, [p.message for p in library.problems]
    modules = [
        read_module(f.module, f.lib_file, hashlib.sha256(library.texts[f.lib_file].encode()).hexdigest(),
                    library.texts[f.lib_file])
        for f in settings.files if f.lib_file in library.texts
    ]
    helpers = Helpers(modules, USAGES)
    run = RunSettings(frameworks=specs)
    found = {}
    for plan in plans(pages, frameworks):
        page_keys, _ = session_keys(plan, frameworks, None, "", None, run, helpers)
        found.update({f"{plan.docname} [{fw}]": key for fw, key in page_keys.items()})
    return found


def edits(pages: list[BookPage]) -> list[tuple[int, int, str, str]]:
    """(page index, item index, definition name, edited code) for each definition a saved cell saves."""
    found = []
    for p, page in enumerate(pages):
        for i, item in enumerate(page.items):
            if not isinstance(item, PageCell) or "@save" not in item.code:
                continue
            try:
                tree = ast.parse(item.code)
            except SyntaxError:
                continue
            lines = item.code.split("\n")
            for node in tree.body:
                if not isinstance(node, (ast.FunctionDef, ast.ClassDef)) or "@save" not in "\n".join(
                    lines[node.lineno - 1 - len(node.decorator_list) : node.body[0].lineno]
                ):
                    continue
                first = node.body[0]
                start = min([first.lineno, *(d.lineno for d in getattr(first, "decorator_list", []))])
                indent = " " * first.col_offset
                edited = lines[: start - 1] + [f"{indent}_edited_by_bench = 1"] + lines[start - 1 :]
                ast.parse("\n".join(edited))  # still Python
                found.append((p, i, node.name, "\n".join(edited)))
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("book", type=Path)
    parser.add_argument("--limit", type=int, default=0, help="edit only the first N definitions")
    parser.add_argument("--every", type=int, default=1, help="edit every Nth definition (a sample of the book)")
    parser.add_argument("--json")
    args = parser.parse_args()
    conf: dict = {}
    exec((args.book / "conf.py").read_text(), conf)  # the converted book's JSON-like values
    frameworks = list(conf["livecells_frameworks"])
    settings, problems = library_settings(conf["livecells_library"])
    assert not problems, problems
    specs = {}
    for fw in frameworks:
        spec = FrameworkSpec.from_settings(fw, conf["livecells_frameworks"][fw])
        module = next(f.module for f in settings.files if f.framework == fw)
        specs[fw] = replace(spec, preload=(*spec.preload, module))
    pages, _ = book_pages(args.book)
    started = time.perf_counter()
    before = keys(args.book, pages, settings, frameworks, specs)
    todo = edits(pages)[:: args.every][: args.limit or None]
    rows = []
    for p, i, name, code in todo:
        page = pages[p]
        items = list(page.items)
        items[i] = replace(items[i], code=code)
        edited = [*pages[:p], replace(page, items=tuple(items)), *pages[p + 1 :]]
        after = keys(args.book, edited, settings, frameworks, specs)
        rerun = sorted(s for s in before if after.get(s) != before[s])
        own = [s for s in rerun if s.startswith(page.docname + " [")]
        cell_frameworks = pages[p].items[i].frameworks
        # "files": each session of a framework whose file changed (every one, as d2lbook reruns all).
        touched = {f.framework for f in settings.files} if ALL in cell_frameworks else set(cell_frameworks)
        per_file = [s for s in before if s.rsplit("[", 1)[1].rstrip("]") in touched]
        rows.append({"page": page.docname, "name": name, "rerun": len(rerun), "own_page": len(own),
                     "others": len(rerun) - len(own), "per_file": len(per_file), "sessions": rerun})
    seconds = time.perf_counter() - started
    counts = [r["rerun"] for r in rows]
    files = [r["per_file"] for r in rows]
    summary = {
        "book": str(args.book), "pages": len(pages), "sessions": len(before), "edits": len(rows),
        "definitions": len(edits(pages)),
        "rerun_median": statistics.median(counts), "rerun_mean": round(statistics.mean(counts), 2),
        "rerun_max": max(counts), "per_file_median": statistics.median(files),
        "edits_rerunning_only_their_page": sum(1 for r in rows if r["others"] == 0),
        "seconds": round(seconds, 1),
    }
    print(json.dumps(summary, indent=1))
    for r in sorted(rows, key=lambda r: -r["rerun"])[:5]:
        others = f"{r['others']} of other pages"
        print(f"  {r['page']}: {r['name']}: {r['rerun']} sessions ({others}), per file {r['per_file']}")
    if args.json:
        Path(args.json).write_text(json.dumps({"summary": summary, "edits": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
