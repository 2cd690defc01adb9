"""The whole d2l-en book through ``python -m livecells convert``, checked against d2lbook itself.

``python bench/d2l_book/check.py D2L_EN_DIR --d2lbook-python /work/venvs/d2lbook/bin/python``
(livecells' Python, ``PYTHONPATH=ext``). D2L_EN_DIR is a checkout of d2l-ai/d2l-en; d2lbook's
Python is one with ``d2lbook==1.0.3`` installed, and pandoc on PATH (d2lbook's RST goes through it).

1. d2lbook's side (``d2lbook_oracle.py``, run with d2lbook's Python): per page and per tab of the
   book's ``config.ini``, the code cells d2lbook runs, and the RST ``d2lbook build rst`` writes.
2. livecells' side: the book converted (markdown route, ``convert_tree(..., markdown=True)``), then built by
   Sphinx with execution off (myst-parser, sphinxcontrib-bibtex, the conf of
   docs/migrating-d2l.rst's markdown section), each page's plan and doctree read.
3. Compared: every tab's cells, in order; and what a reader sees of d2lbook's RST: figures with a
   caption, display equations (labelled or not), tables with a caption, and each label on the
   same kind of thing (section, figure, table, equation). Every difference is a loss, listed
   with its page; Sphinx's warnings of the build are listed by kind.

Prints the figures and exits 1 on any difference (0 when every cell is equal and nothing is lost).
"""

from __future__ import annotations

import argparse
import configparser
import io
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
EXCLUDED = ("README", "STYLE_GUIDE", "INFO", "CODE_OF_CONDUCT", "CONTRIBUTING", "contrib")


def oracle(src: Path, tabs: list[str], python: str, cache: Path) -> dict:
    if not cache.exists():
        subprocess.run(
            [python, str(HERE / "d2lbook_oracle.py"), str(src), str(cache), ",".join(tabs)],
            check=True, stderr=subprocess.DEVNULL,
        )
    return json.loads(cache.read_text(encoding="utf-8"))


# -- d2lbook's RST, read line by line ------------------------------------------------------------

_UNDERLINE = re.compile(r"^([=~_\-^\"'`#*+])\1+\s*$")


#: Where d2lbook's own RST puts a label elsewhere than its source means (checked by hand).
INTENDED = {
    # "#### Recommender Systems" then the label: d2lbook moves labels only up to titles
    # underlined with = ~ _ -, so this one, under a level-4 title (^), labels the figure before.
    "subsec_recommender_systems": "section",
}


def source_labels(text: str) -> set[str]:
    """The labels a d2lbook markdown page defines (``:label:`` and ``:eqlabel:`` marks)."""
    return {m.lower() for m in re.findall(r":(?:eq)?label:`([^`]+)`", text)}


def rst_facts(text: str) -> dict:
    """Figures (captioned), display equations, captioned tables, and each label's kind."""
    lines = text.split("\n")
    facts = {"figures": 0, "captions": 0, "equations": 0, "tables": 0, "labels": {}}

    def body(i: int) -> list[str]:
        """A directive's body: the lines indented deeper than it (a list item's are indented too)."""
        depth = len(lines[i]) - len(lines[i].lstrip())
        out = []
        for line in lines[i + 1:]:
            if line.strip() and len(line) - len(line.lstrip()) <= depth:
                break
            out.append(line)
        return out

    for i, full in enumerate(lines):
        line = full.lstrip()
        if line.startswith(".. figure::"):
            facts["figures"] += 1
            content = [x for x in body(i) if x.strip() and not x.strip().startswith(":")]
            facts["captions"] += bool(content)
        elif line.startswith(".. math::"):
            facts["equations"] += 1
            for option in body(i):
                if option.strip().startswith(":label:"):
                    facts["labels"][option.split(":label:")[1].strip().lower()] = "equation"
        elif line.startswith(".. table::") and line[len(".. table::"):].strip():
            facts["tables"] += 1
            garbled = re.match(r"^\.\. table:: label:``([^`]+)``", line)
            if garbled:
                # d2lbook's own output when the label line sits between caption and table:
                # pandoc takes the label for the caption (d2l.ai shows "label:tab_x", and
                # :numref: to it fails). What the source means: a table with its label.
                facts["labels"][garbled[1].lower()] = "table"
        elif m := re.match(r"^\.\. _([^:`]+):\s*$", line):
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or re.match(r"^\.\. _[^:]+:\s*$", lines[j])):
                j += 1
            nxt = lines[j] if j < len(lines) else ""
            if nxt.startswith(".. figure::"):
                kind = "figure"
            elif nxt.startswith(".. table::"):
                kind = "table"
            elif j + 1 < len(lines) and _UNDERLINE.match(lines[j + 1]) and nxt.strip():
                kind = "section"
            else:
                kind = "other"
            facts["labels"][m[1].lower()] = kind
    return facts


# -- livecells' side: the converted book built by Sphinx -------------------------------------------

CONF = """\
import os, sys
sys.path.insert(0, os.path.abspath("."))  # the book's d2l package, for its API page
extensions = ["myst_parser", "livecells", "sphinx.ext.autodoc"]
autodoc_mock_imports = ["torchvision"]  # d2l.torch imports it; livecells' venv does not have it
source_suffix = {{".rst": "restructuredtext", ".md": "markdown"}}
root_doc = "index"
exclude_patterns = {excluded!r}
numfig = True
math_numfig = True
myst_enable_extensions = ["dollarmath"]
if os.path.exists("d2l.bib"):
    extensions.append("sphinxcontrib.bibtex")
    bibtex_bibfiles = ["d2l.bib"]
livecells_execute = "off"
livecells_frameworks = {frameworks!r}
livecells_slides = {{}}
"""


def build(src: Path, out: Path, tabs: list[str], parallel: int = 2):
    from docutils import nodes
    from sphinx.application import Sphinx
    from sphinx.util.docutils import docutils_namespace

    from livecells.config import get_config
    from livecells.convert.tree import convert_tree
    from livecells.model.slides import SlideProse
    from livecells.read.collect import plans
    from livecells.read.slides import page_slides
    from livecells.render.slides import page_decks

    book = out / "book"
    results = convert_tree(src, book, markdown=True, tabs=tabs)
    frontpage = src / "static" / "frontpage" / "frontpage.html"
    if frontpage.is_file():  # d2l-en's build_html.sh copies it beside index.md, which includes it
        shutil.copy(frontpage, book / "frontpage.html")
    if not (book / "index.md").exists():
        pages = sorted(p.relative_to(book).with_suffix("").as_posix() for p in book.rglob("*.md"))
        (book / "index.md").write_text("# Index\n\n```{toctree}\n" + "\n".join(pages) + "\n```\n", encoding="utf-8")
    excluded = [f"{x}.md" for x in EXCLUDED[:-1]] + ["contrib/**", "_build/**", "img/**"]
    frameworks = {t: {"kernel": "python3"} for t in tabs}
    (book / "conf.py").write_text(CONF.format(excluded=excluded, frameworks=frameworks), encoding="utf-8")
    # docutils_namespace: the nodes, roles and directives this build registers are gone after it
    # (sphinx-build does the same), so that later in-process builds start clean.
    with docutils_namespace():
        warnings = io.StringIO()
        app = Sphinx(book, book, out / "_build", out / "_doctrees", "dummy",
                     status=None, warning=warnings, freshenv=True, parallel=parallel)
        app.build()
        docs = {}
        std, math = app.env.domains["std"], app.env.domains["math"]
        for docname in sorted(app.env.found_docs):
            tree = app.env.get_doctree(docname)
            ids = {i: n for n in tree.findall(nodes.Element) for i in n.get("ids", [])}
            docs[docname] = {
                "figures": sum(1 for _ in tree.findall(nodes.figure)),
                "captions": sum(1 for f in tree.findall(nodes.figure) if any(isinstance(c, nodes.caption) for c in f)),
                "equations": sum(1 for _ in tree.findall(nodes.math_block)),
                "tables": sum(1 for t in tree.findall(nodes.table) if any(isinstance(c, nodes.title) for c in t)),
                "eval_rst": sum(1 for b in tree.findall(nodes.literal_block) if b.get("language") == "eval_rst"),
                "ids": ids,
            }
        labels = {}
        kinds = {nodes.section: "section", nodes.figure: "figure", nodes.table: "table"}
        # A label on a section, a captioned figure or table is in std.labels; others only in anonlabels.
        for name, (docname, labelid, *_) in [*std.anonlabels.items(), *std.labels.items()]:
            node = docs.get(docname, {}).get("ids", {}).get(labelid)
            labels[name] = (docname, kinds.get(type(node), "other"))
        for name, (docname, _) in math.equations.items():
            labels[name.lower()] = (docname, "equation")
        # Each page's decks, as an HTML build writes them, and how many slide marks it kept.
        settings = get_config(app.env).slides
        for docname, page in page_slides(app.env).items():
            docs[docname]["marks"] = sum(len(item.marks) for item in page if isinstance(item, SlideProse))
            docs[docname]["slides"] = {
                tab: [[c["cell_type"], c["metadata"].get("slideshow", {}).get("slide_type", ""), c["source"]]
                      for c in deck["cells"]]
                for tab, deck in page_decks(app, docname, page, settings)
            }
        return results, plans(app.env), docs, labels, re.sub(r"\x1b\[[0-9;]*m", "", warnings.getvalue())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("d2l_en", type=Path)
    parser.add_argument("--d2lbook-python", required=True)
    parser.add_argument("--work", type=Path, default=Path("/tmp/livecells-d2l-book"))
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    src = args.d2l_en.resolve()
    ini = configparser.ConfigParser()
    ini.read(src / "config.ini", encoding="utf-8")
    tabs = [t.strip() for t in ini.get("build", "tabs").split(",")]
    args.work.mkdir(parents=True, exist_ok=True)
    expected = oracle(src, tabs, args.d2lbook_python, args.work / "d2lbook.json")
    summary, losses, kinds, warnings, results = compare(src, args.work, tabs, expected)
    spacing = summary.pop("slide_decks_spacing")
    summary["slide_decks_spacing"] = len(spacing)
    print(json.dumps(summary, indent=1))
    for difference in spacing:
        print("SPACING", difference)
    for loss in losses:
        print("LOSS", loss)
    for kind, n in kinds.most_common():
        print(f"WARNINGS {n:5d} {kind}")
    if args.verbose:
        print(warnings)
        for r in results.values():
            for w in r.warnings:
                print(w)
    return 1 if losses else 0


def compare(src: Path, work: Path, tabs: list[str], expected: dict, parallel: int = 2):
    """Convert and build ``src`` in ``work``; compare with d2lbook's ``expected`` (the oracle's).

    Returns the figures, the losses (one line each), Sphinx's warnings by kind and in full, and
    convert's results."""
    results, built, docs, labels, warnings = build(src, work, tabs, parallel)
    losses: list[str] = []
    cells = equal = 0
    for page, entry in sorted(expected.items()):
        for tab, want in entry["cells"].items():
            have = [c.code.strip() for c in built[page].session(tab).cells] if page in built else []
            cells += len(want or [])
            equal += sum(a == b for a, b in zip(want or [], have)) if len(want or []) == len(have) else 0
            if (want or []) != have:
                losses.append(f"{page} [{tab}]: cells differ ({len(want or [])} d2lbook, {len(have)} here)")
    decks = decks_equal = marks = 0
    spacing: list[str] = []  # decks that differ in white space alone
    for page, entry in sorted(expected.items()):
        ours = docs.get(page, {})
        marks += entry["marks"]
        if ours.get("marks", 0) != entry["marks"]:
            losses.append(f"{page}: slide marks: {entry['marks']} in d2lbook's, {ours.get('marks', 0)} here")
        for tab, want in entry["slides"].items():
            if isinstance(want, str):
                continue  # d2lbook stops on this page (the error is its own)
            have = ours.get("slides", {}).get(tab)
            decks += want is not None
            if _deck(want) == _deck(have):
                decks_equal += want is not None
            elif _deck(want, loose=True) == _deck(have, loose=True):
                spacing.append(f"{page} [{tab}]: {_first_difference(want, have)}")
            else:
                losses.append(f"{page} [{tab}]: slides differ ({_first_difference(want, have)})")
    totals: Counter[str] = Counter()
    for page, entry in sorted(expected.items()):
        theirs, ours = rst_facts(entry["rst"]), docs.get(page)
        if ours is None:
            losses.append(f"{page}: not built")
            continue
        for key in ("captions", "equations", "tables"):
            totals[key] += theirs[key]
            if ours[key] != theirs[key]:
                losses.append(f"{page}: {key}: {theirs[key]} in d2lbook's, {ours[key]} here")
        if ours["eval_rst"]:
            losses.append(f"{page}: {ours['eval_rst']} eval_rst blocks left as code")
        mine = source_labels((src / f"{page}.md").read_text(encoding="utf-8"))
        for name, kind in theirs["labels"].items():
            if name not in mine:
                continue  # pandoc's own targets (a title's id), not the author's
            kind = INTENDED.get(name, kind)
            totals["labels"] += 1
            docname, have = labels.get(name, (None, "missing"))
            if (docname, have) != (page, kind):
                losses.append(f"{page}: label {name}: on a {kind} in d2lbook's, {have} here")
    kinds = Counter(
        re.sub(r"[`'\"][^`'\"]*[`'\"]", "X", m[1])[:60]
        for m in re.finditer(r"(?:WARNING|ERROR|CRITICAL|SEVERE): (.*)", warnings)
    )
    summary = {
        "pages": len(expected), "cells": cells, "cells_equal": equal, "losses": len(losses),
        "slide_marks": marks, "slide_decks": decks, "slide_decks_equal": decks_equal,
        "slide_decks_spacing": spacing,
        "d2lbook_counts": dict(totals),
        "convert_warnings": sum(len(r.warnings) for r in results.values()),
        "sphinx_warnings": sum(kinds.values()),
    }
    return summary, losses, kinds, warnings, results


def _deck(cells: list | None, loose: bool = False) -> list | None:
    """A deck's cells, each line's trailing spaces cut: markdown-it drops them from the page's
    text (Markdown shows none), d2lbook keeps its source's. ``loose``: every run of white space
    one space (where d2lbook's deck differs in white space alone: see bench/README.md)."""
    if cells is None:
        return None
    if loose:
        return [[kind, slide, " ".join(text.split())] for kind, slide, text in cells]
    return [[kind, slide, "\n".join(line.rstrip() for line in text.split("\n"))] for kind, slide, text in cells]


def _first_difference(want: list | None, have: list | None) -> str:
    if want is None or have is None:
        counts = ["no deck" if deck is None else f"{len(deck)} cells" for deck in (want, have)]
        return f"{counts[0]} in d2lbook's, {counts[1]} here"
    for number, (a, b) in enumerate(zip(_deck(want), _deck(have))):
        if a != b:
            return f"cell {number}: {a!r:.120} in d2lbook's, {b!r:.120} here"
    return f"{len(want)} cells in d2lbook's, {len(have)} here"


if __name__ == "__main__":
    sys.exit(main())
