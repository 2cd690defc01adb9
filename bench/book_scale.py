"""livecells at the size of d2l-en: 192 pages, four tabs, against Sphinx with execution off, and how
its no-op rebuild grows with the number of pages against plain Sphinx's.

    .venv/bin/python bench/book_scale.py [--pages 24 48 96 192] [--jobs 1] [--repeat 3] [--rounds 1]

The book is made of real page texts: the d2l corpus's eight sections (``../shared/d2l-corpus``,
through ``python -m livecells convert``), repeated and renamed (a folder per copy, each copy's
labels given a suffix so that no two pages define one) until there are ``--pages`` pages, one of
them the references page (``sphinxcontrib-bibtex``, ``d2l.bib``, as d2l-en has). Each page keeps its
prose, figures, equations and recorded outputs; each cell's code is replaced by a light one (a few
small tensor ops), and after every MXNet cell come a JAX and a TensorFlow cell, so that each tab
group has four tabs as d2l-en's do. JAX and TensorFlow are not installed here: their tabs run
numpy stand-ins (``livecells_frameworks``: ``preload = ["numpy"]``), in sessions and kernels of
their own like any framework's. ``--pages`` gives the sizes: each is the first N pages of the
largest, built three ways from a fresh copy:

- ``livecells``: ``extensions = ["livecells", "sphinxcontrib.bibtex"]``, the four frameworks,
  ``livecells_jobs = --jobs``, ``sphinx-build -j --jobs``, fresh store;
- ``execoff``: the same pages with ``-D livecells_execute=off`` (no kernel);
- ``plain``: the same pages without livecells (cells as ``code-block``, framework prose as
  ``container``), ``extensions = ["sphinxcontrib.bibtex"]``;
- ``noguess`` (``--without-guess``, at the largest size only): ``livecells`` with the guess
  (``pipeline/guess.py``) replaced by one that guesses nothing, as ``removals.py`` does; each
  template then starts with its first session. Printed: its cold and edit beside livecells'.

Each: cold, then ``--repeat`` no-op rebuilds; at the largest size also a rebuild after one PyTorch
cell of one page is edited. Checked from livecells' store and summary line (cold: every session
ran, every cell ok; no-op: none ran, all from the store; edit: the edited session alone) and from
Sphinx's own count of what it read (execution off and plain: every page cold, none in a no-op, the
edited one after the edit). Prints, at the largest size, cold ÷ floor (execution-off cold + the
frameworks' imports once each in a fresh Python + the cells' in-kernel time from livecells' store,
on N slots the makespan bound), no-op ÷ execution-off no-op, edit ÷ (the edited session's cells +
the execution-off rebuild after the same edit); and the no-op time at each size against the
smallest's, beside the ratio of pages, with the least-squares seconds per page of each way.
"""

from __future__ import annotations

import argparse
import math
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
import floor
import peers_d2l
from benchlib import PYTHON, REPO, Run, median, run
from book import TEMPLATES
from removals import NO_GUESS
from scale import slope

#: The corpus's sections that hold cells, in the order pages are made of them: peers_d2l's six
#: (those that run on a CPU) and the two that ask for GPUs (the light cells do not).
SECTIONS = (*peers_d2l.SECTIONS, "chapter_builders-guide/use-gpu", "chapter_computational-performance/multiple-gpus")
REFERENCES = "chapter_references/zreferences"
FRAMEWORKS = ("pytorch", "mxnet", "jax", "tensorflow")
#: The stand-ins' template: MXNet's light cells with numpy in place of mxnet.np.
NUMPY_TEMPLATES = tuple(t.replace("from mxnet import np, npx\nnpx.set_np()\n", "import numpy as np\n")
                        for t in TEMPLATES["mxnet"])
LIGHT = {"pytorch": TEMPLATES["pytorch"], "mxnet": TEMPLATES["mxnet"],
         "jax": NUMPY_TEMPLATES, "tensorflow": NUMPY_TEMPLATES}
ALL_CELL = "shared_{k} = {k} * 2\nshared_{k}"
#: What each framework's template imports before its sessions fork: the floor's imports.
IMPORTS = ("torch", "mxnet", "numpy")
TOOLS = ("livecells", "execoff", "plain")
KINDS = ("cold", "noop", "edit")
D2L_EN_PAGES = 192

CONF_COMMON = (
    'project = "d2l-sized book"\n'
    'bibtex_bibfiles = ["d2l.bib"]\n'
    "numfig = True\n"
    'exclude_patterns = ["_build", "_livecells"]\n'
)
CONF_LIVECELLS = (
    'extensions = ["livecells", "sphinxcontrib.bibtex"]\n'
    "livecells_frameworks = {\n"
    '    "pytorch": {}, "mxnet": {},\n'
    '    "jax": {"preload": ["numpy"], "version_of": "numpy"},\n'
    '    "tensorflow": {"preload": ["numpy"], "version_of": "numpy"},\n'
    "}\n"
)
CONF_PLAIN = 'extensions = ["sphinxcontrib.bibtex"]\n'

DIRECTIVE = re.compile(r"^\.\. ([a-z-]+)::\s*(.*)$")
LABEL = re.compile(r"^\.\. _([^:`\n]+):[ \t]*$", re.M)
MATH_LABEL = re.compile(r"^([ \t]+:label:[ \t]*)(\S+)[ \t]*$", re.M)
ROLE = re.compile(r":(numref|ref|eq):`([^`]*)`")


@dataclass
class Block:
    """A top-level piece of a page: a directive with its indented body, or anything else."""

    text: str
    directive: str = ""
    argument: str = ""


def blocks(text: str) -> list[Block]:
    """The page cut at each top-level directive; a directive's block ends at the next line that
    is not blank and not indented."""
    found: list[Block] = []
    lines = text.split("\n")
    i = 0
    while i < len(lines):
        match = DIRECTIVE.match(lines[i])
        if match:
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j][:1].isspace()):
                j += 1
            # Trailing blank lines go to the next block, not into the directive's body.
            while j > i + 1 and not lines[j - 1].strip():
                j -= 1
            found.append(Block("\n".join(lines[i:j]) + "\n", match.group(1), match.group(2).strip()))
            i = j
        else:
            found.append(Block(lines[i] + "\n"))
            i += 1
    return found


def cell(framework: str, code: str) -> str:
    return f".. live-cell:: {framework}\n\n" + "".join(f"   {line}\n" for line in code.split("\n"))


@dataclass
class Page:
    """One page of the book: where it goes, its livecells text, its plain text, its sessions."""

    name: str
    livecells: str
    plain: str
    cells: dict[str, int]  # cells per framework (a shared cell counted in each)
    first_pytorch: str  # the code of its first PyTorch cell (the edit's target)


def make_page(text: str, number: int, copy: int) -> tuple[str, dict[str, int], str]:
    """A section's text with light cells and four tabs, and its labels renamed for ``copy``."""
    own = {fw: 0 for fw in FRAMEWORKS}
    shared = 0
    first = ""
    out: list[str] = []

    def light(framework: str) -> str:
        k = number * 1000 + sum(own.values()) + shared
        code = LIGHT[framework][own[framework] % len(LIGHT[framework])].format(k=k)
        own[framework] += 1
        return code

    parts = blocks(text)
    for n, block in enumerate(parts):
        if block.directive == "live-settings":
            continue  # GPU counts the light cells do not need
        if block.directive != "live-cell":
            out.append(block.text)
            continue
        if block.argument == "all":
            shared += 1
            out.append(cell("all", ALL_CELL.format(k=number * 1000 + sum(own.values()) + shared)))
            continue
        code = light(block.argument)
        if block.argument == "pytorch" and not first:
            first = code
        out.append(cell(block.argument, code))
        if block.argument == "mxnet":
            # After the cell's recorded outputs (they belong to it), the two stand-in tabs.
            end = n + 1
            while end < len(parts) and (parts[end].directive in ("parsed-literal", "figure")
                                        or not parts[end].text.strip()):
                end += 1
            parts[end - 1].text += "\n" + "\n".join(cell(fw, light(fw)) for fw in ("jax", "tensorflow")) + "\n"
    page = "".join(out)
    if copy:
        page = rename_labels(page, f"-c{copy}")
    cells = {fw: own[fw] + shared for fw in FRAMEWORKS}
    return page, cells, first


def rename_labels(text: str, suffix: str) -> str:
    """Every label the page defines (targets, equations) and the references to it, with ``suffix``."""
    names = set(LABEL.findall(text)) | {m.group(2) for m in MATH_LABEL.finditer(text)}
    text = LABEL.sub(lambda m: f".. _{m.group(1)}{suffix}:" if m.group(1) in names else m.group(0), text)
    text = MATH_LABEL.sub(lambda m: f"{m.group(1)}{m.group(2)}{suffix}", text)

    def role(match: re.Match[str]) -> str:
        body = match.group(2)
        if body.endswith(">") and "<" in body:
            title, target = body[:-1].rsplit("<", 1)
            if target in names:
                body = f"{title}<{target}{suffix}>"
        elif body in names:
            body += suffix
        return f":{match.group(1)}:`{body}`"

    return ROLE.sub(role, text)


def plain_text(page: str) -> str:
    """The page without livecells: cells as code blocks, framework prose as containers."""
    page = re.sub(r"^\.\. live-cell:: (\w+)$", r".. code-block:: python\n   :class: \1", page, flags=re.M)
    return re.sub(r"^\.\. live-text:: (\w+)$", r".. container:: live-text-\1", page, flags=re.M)


class BookSources:
    """The converted corpus, and the book's pages made of it (the largest size; smaller are its start)."""

    def __init__(self, corpus: Path, work: Path, pages: int) -> None:
        raw = work / "corpus-rst"
        for section in (*SECTIONS, REFERENCES):
            target = raw / f"{section}.rst"
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(corpus / f"{section}.rst", target)
            for figure in corpus.glob(f"{section.split('/')[0]}/output_{section.split('/')[1]}_*"):
                shutil.copy(figure, target.parent / figure.name)  # figures d2lbook recorded from cells
        shutil.copytree(corpus / "img", raw / "img")
        self.converted = work / "converted"
        run([PYTHON, "-m", "livecells", "convert", str(raw), "-o", str(self.converted)]).check("convert")
        self.corpus = corpus
        self.pages: list[Page] = []
        texts = {s: (self.converted / f"{s}.rst").read_text(encoding="utf-8") for s in SECTIONS}
        for number in range(pages - 1):  # and the references page
            section = SECTIONS[number % len(SECTIONS)]
            copy = number // len(SECTIONS)
            chapter, stem = section.split("/")
            text, cells, first = make_page(texts[section], number + 1, copy)
            self.pages.append(Page(f"c{copy:02d}-{chapter}/{stem}", text, plain_text(text), cells, first))
        refs = (self.converted / f"{REFERENCES}.rst").read_text(encoding="utf-8")
        self.pages.append(Page(REFERENCES, refs, refs, {}, ""))

    def write(self, root: Path, pages: int, flavour: str) -> Path:
        """The first ``pages`` pages (the references page always among them) as a source tree."""
        chosen = self.pages[: pages - 1] + [self.pages[-1]]
        root.mkdir(parents=True)
        (root / "conf.py").write_text(CONF_COMMON + (CONF_PLAIN if flavour == "plain" else CONF_LIVECELLS),
                                      encoding="utf-8")
        toc = "".join(f"   {p.name}\n" for p in chosen)
        index = f"A d2l-sized book\n================\n\n.. toctree::\n   :maxdepth: 1\n   :numbered:\n\n{toc}"
        (root / "index.rst").write_text(index, encoding="utf-8")
        shutil.copy(self.corpus / "d2l.bib", root / "d2l.bib")
        shutil.copytree(self.converted / "img", root / "img")
        for page in chosen:
            path = root / f"{page.name}.rst"
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(page.plain if flavour == "plain" else page.livecells, encoding="utf-8")
            chapter = page.name.split("/")[0].split("-", 1)[-1]
            for figure in (self.converted / chapter).glob("*.svg"):
                if not (path.parent / figure.name).exists():
                    shutil.copy(figure, path.parent / figure.name)
        return root

    def sessions(self, pages: int) -> int:
        chosen = self.pages[: pages - 1] + [self.pages[-1]]
        return sum(1 for p in chosen for n in p.cells.values() if n)

    def edit_page(self, pages: int) -> Page:
        """The page whose first PyTorch cell the edit changes: the middle one among the first ``pages``."""
        candidates = [p for p in self.pages[: pages - 1] if p.first_pytorch]
        return candidates[len(candidates) // 2]


def edit(src: Path, page: Page, flavour: str) -> None:
    """Change the page's first PyTorch cell (a number in its first line), in place."""
    path = src / f"{page.name}.rst"
    text = path.read_text(encoding="utf-8")
    old = page.first_pytorch
    new = old.replace(" + ", " + 0.5 + ", 1)
    indent = lambda code: "".join(f"   {line}\n" for line in code.split("\n"))  # noqa: E731
    if text.count(indent(old)) != 1 or old == new:
        raise SystemExit(f"{path}: cannot find the cell to edit once")
    path.write_text(text.replace(indent(old), indent(new)), encoding="utf-8")


class Bench:
    def __init__(self, args: argparse.Namespace, sources: BookSources, work: Path) -> None:
        self.args = args
        self.sources = sources
        self.work = work
        self.env = {name: "1" for name in peers_d2l.THREADS}

    def build(self, tool: str, src: Path) -> Run:
        jobs = str(self.args.jobs)
        extra = {"livecells": ["-D", f"livecells_jobs={jobs}"], "noguess": ["-D", f"livecells_jobs={jobs}"],
                 "execoff": ["-D", "livecells_execute=off"], "plain": []}[tool]
        # Not -q: Sphinx's count of what it read, and livecells' summary line.
        result = run([PYTHON, "-m", "sphinx", "-b", "html", "-j", jobs, *extra, str(src), str(src / "_build/html")],
                     env=self.env, timeout=self.args.timeout)
        result.check(f"{tool} build of {src.name}")
        if result.leftovers:
            raise SystemExit(f"{tool} build of {src.name} left processes running: {result.leftovers}")
        return result

    def check(self, tool: str, kind: str, pages: int, result: Run, before: dict[str, floor.StoredSession],
              after: dict[str, floor.StoredSession], edited: Page | None) -> list[str]:
        """The sessions the build ran; raise if it is not what it should be."""
        output = result.stdout + result.stderr
        if tool not in ("livecells", "noguess"):
            problem = floor.check_execution_off(kind, output, after, pages + 1)
            if problem:
                raise SystemExit(f"{tool} {kind}, {pages} pages: {problem}")
            return []
        ran = floor.ran_between(before, after)
        sessions = self.sources.sessions(pages)
        bad = [k for k in ran if after[k].status != "ok" or after[k].ok != after[k].cells]
        counts = floor.summary(output)
        problem = ""
        if bad:
            problem = f"not every cell ran without error in {bad[:5]} ({len(bad)} sessions)"
        elif kind == "cold" and len(ran) != sessions:
            problem = f"ran {len(ran)} sessions, expected all {sessions}"
        elif kind == "noop" and ran:
            problem = f"a no-op rebuild ran {len(ran)} sessions: {ran[:5]}"
        elif kind == "edit" and (edited is None or ran != [f"{edited.name}/pytorch"]):
            problem = f"after one PyTorch cell of {edited and edited.name} was edited, ran {ran}"
        elif counts is None or counts[0] != len(ran):
            problem = f"summary line says {counts and counts[0]} run, the store {len(ran)}"
        elif kind == "noop" and counts[1] != sessions:
            problem = f"summary line says {counts[1]} from the store, expected {sessions}"
        if problem:
            raise SystemExit(f"{tool} {kind}, {pages} pages: {problem}")
        return ran

    def size(self, pages: int, order: list[str], largest: bool, round_no: int) -> list[dict[str, Any]]:
        """Every tool's builds of the book's first ``pages`` pages."""
        done = []
        edited = self.sources.edit_page(pages) if largest else None
        for tool in order:
            src = self.work / f"r{round_no}-p{pages}-{tool}"
            if src.exists():
                shutil.rmtree(src)
            self.sources.write(src, pages, "plain" if tool == "plain" else "livecells")
            if tool == "noguess":
                with open(src / "conf.py", "a", encoding="utf-8") as conf:
                    conf.write(NO_GUESS)
            kinds = ["cold", *["noop"] * self.args.repeat, *(["edit"] if largest else [])]
            for kind in kinds:
                if kind == "edit":
                    edit(src, edited, tool)
                before = floor.stored_sessions(src)
                result = self.build(tool, src)
                after = floor.stored_sessions(src)
                ran = self.check(tool, kind, pages, result, before, after, edited)
                try:
                    cells = {k: after[k].seconds for k in ran}
                except ValueError as err:
                    raise SystemExit(f"{tool} {kind}, {pages} pages: {err}: no floor") from None
                done.append({"round": round_no, "pages": pages, "tool": tool, "kind": kind,
                             "seconds": result.seconds, "ran": len(ran), "session_seconds": cells,
                             "warnings": len(result.warnings)})
                cell_time = f", {sum(cells.values()):.2f} s in the kernels" if tool in ("livecells", "noguess") else ""
                print(f"  {pages} pages, {label(tool, self.args.jobs)} {kind}: {result.seconds:.2f} s, "
                      f"{len(ran)} session(s) run{cell_time}, {len(result.warnings)} warning(s)", flush=True)
        return done


def label(tool: str, jobs: int) -> str:
    return {
        "livecells": f"livecells [livecells_jobs={jobs}, -j {jobs}]",
        "execoff": f"execution off [livecells_execute=off, -j {jobs}]",
        "plain": f"plain Sphinx [no livecells, -j {jobs}]",
        "noguess": f"livecells without the guess [livecells_jobs={jobs}, -j {jobs}]",
    }[tool]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[24, 48, 96, D2L_EN_PAGES],
                        help="book sizes in pages; the largest also gets the edit and the floor ratios")
    parser.add_argument("--jobs", type=int, default=1, help="livecells_jobs and sphinx-build -j (all three ways)")
    parser.add_argument("--repeat", type=int, default=3, help="no-op rebuilds per build (median)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds of every size, the ways' order rotating")
    parser.add_argument("--corpus", default=str(REPO.parent / "shared/d2l-corpus"))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per build")
    parser.add_argument("--without-guess", action="store_true",
                        help="at the largest size, also livecells without the guess (pipeline/guess.py)")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.pages))
    if len(sizes) < 2 or sizes[0] < 2:
        parser.error("--pages needs at least two different sizes of 2 pages or more")
    if args.jobs < 1 or args.repeat < 1 or args.rounds < 1:
        parser.error("--jobs, --repeat and --rounds must be 1 or more")
    info = benchlib.machine()
    print(f"machine: {benchlib.describe(info)}", flush=True)
    print(f"bytecode compiled ({benchlib.compile_environment(PYTHON, REPO / 'ext'):.1f} s)", flush=True)
    work = Path(tempfile.mkdtemp(prefix="book-scale-"))
    records: list[dict[str, Any]] = []
    imports: list[dict[str, float]] = []
    try:
        sources = BookSources(Path(args.corpus), work, sizes[-1])
        bench = Bench(args, sources, work)
        book = sources.pages
        cells = {fw: sum(p.cells.get(fw, 0) for p in book) for fw in FRAMEWORKS}
        print(f"book: {len(book)} pages ({len(SECTIONS)} corpus sections repeated, and the references page), "
              f"{sources.sessions(sizes[-1])} sessions, cells per tab {cells} (d2l-en: {D2L_EN_PAGES} pages, "
              f"4 tabs); sizes {sizes}", flush=True)
        for tool in TOOLS:
            print(f"  {label(tool, args.jobs)}")
        for n in range(args.rounds):
            imports.append({m: floor.import_seconds(PYTHON, m, bench.env) for m in IMPORTS})
            print(f"round {n + 1}: imports {', '.join(f'{m} {s:.2f} s' for m, s in imports[-1].items())}", flush=True)
            for i, pages in enumerate(sizes):
                ways = TOOLS + (("noguess",) if args.without_guess and pages == sizes[-1] else ())
                shift = (n + i) % len(ways)
                order = list(ways[shift:] + ways[:shift])
                records += bench.size(pages, order, pages == sizes[-1], n + 1)
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(args, info, sizes, records, imports)
    return 0


def report(args: argparse.Namespace, info: dict[str, Any], sizes: list[int], records: list[dict[str, Any]],
           imports: list[dict[str, float]]) -> None:
    def seconds(tool: str, kind: str, pages: int) -> float:
        return median([r["seconds"] for r in records if (r["tool"], r["kind"], r["pages"]) == (tool, kind, pages)])

    largest = sizes[-1]
    print()
    print(benchlib.table(
        [[pages, *(seconds(t, k, pages) for t in TOOLS for k in ("cold", "noop"))] for pages in sizes],
        ["pages", *(f"{t} {k}" for t in TOOLS for k in ("cold", "noop"))]))
    # The floor at the largest size, per round, then the median.
    parts: dict[str, list[float]] = {k: [] for k in ("execoff_cold", "imports", "cells_total", "longest_session",
                                                     "cells_makespan", "edited_cells", "execoff_noop",
                                                     "execoff_edit", "cold", "noop", "edit")}
    for n, round_imports in enumerate(imports, 1):
        mine = [r for r in records if r["round"] == n and r["pages"] == largest]
        pick = {(r["tool"], r["kind"]): r for r in mine if r["kind"] != "noop"}
        noops = [r["seconds"] for r in mine if r["tool"] == "execoff" and r["kind"] == "noop"]
        cells = list(pick["livecells", "cold"]["session_seconds"].values())
        values = {
            "execoff_cold": pick["execoff", "cold"]["seconds"], "imports": sum(round_imports.values()),
            "cells_total": sum(cells), "longest_session": max(cells),
            "cells_makespan": floor.makespan_bound(cells, args.jobs),
            "edited_cells": sum(pick["livecells", "edit"]["session_seconds"].values()),
            "execoff_noop": median(noops), "execoff_edit": pick["execoff", "edit"]["seconds"],
        }
        values["cold"] = values["execoff_cold"] + values["imports"] + values["cells_makespan"]
        values["noop"] = values["execoff_noop"]
        values["edit"] = values["edited_cells"] + values["execoff_edit"]
        for name, value in values.items():
            parts[name].append(value)
    floors = {k: median(v) for k, v in parts.items()}
    ours = {k: seconds("livecells", k, largest) for k in KINDS}
    print()
    print(f"floor at {largest} pages, median (s): execution off cold {floors['execoff_cold']:.2f} + imports "
          f"{floors['imports']:.2f} + cells {floors['cells_makespan']:.2f} on {args.jobs} slot(s) (total "
          f"{floors['cells_total']:.2f}, longest session {floors['longest_session']:.2f}) = {floors['cold']:.2f}; "
          f"edit: edited session's cells {floors['edited_cells']:.3f} + execution off edit "
          f"{floors['execoff_edit']:.2f} = {floors['edit']:.2f}")
    floor_label = f"floor [execution off -j {args.jobs} + imports + cells on {args.jobs} slot(s)]"
    names = {"cold": floor_label, "noop": label("execoff", args.jobs) + " no-op",
             "edit": f"edited session's cells + {label('execoff', args.jobs)} edit"}
    ratios = {k: ours[k] / floors[k] for k in KINDS}
    print(benchlib.table([[f"{label('livecells', args.jobs)} {k} / {names[k]}", ours[k], floors[k], ratios[k]]
                          for k in KINDS], [f"{largest} pages", "livecells s", "baseline s", "ratio"]))
    # Growth of the no-op rebuild with the number of pages.
    smallest = sizes[0]
    rows = []
    for pages in sizes:
        growth_of = [seconds(t, "noop", pages) / seconds(t, "noop", smallest) for t in TOOLS]
        rows.append([pages, pages / smallest, *growth_of])
    print()
    print(benchlib.table(rows, ["pages", "pages ratio", *(f"{t} no-op ratio" for t in TOOLS)]))
    per_page = {t: slope([float(p) for p in sizes], [seconds(t, "noop", p) for p in sizes]) for t in TOOLS}
    growth = {t: math.log(seconds(t, "noop", largest) / seconds(t, "noop", smallest)) / math.log(largest / smallest)
              for t in TOOLS}
    for t in TOOLS:
        print(f"{label(t, args.jobs)} no-op: {per_page[t] * 1000:.2f} ms per page (least squares), "
              f"time grows as pages^{growth[t]:.2f}")
    extra = per_page["livecells"] - per_page["plain"]
    if per_page["plain"] > 0:
        ratio = per_page["livecells"] / per_page["plain"]
        print(f"no-op seconds per page, livecells / plain Sphinx: {ratio:.2f} (goal <= 1: grows no faster; "
              f"{benchlib.verdict(ratio, 1.0)}); livecells - plain: {extra * 1000:.2f} ms per page")
    else:
        ratio = float("nan")
        print(f"no-op seconds per page: plain Sphinx's did not grow ({per_page['plain'] * 1000:.2f} ms per page): "
              f"no ratio (noise, or sizes too close); livecells - plain: {extra * 1000:.2f} ms per page")
    guess = guess_ratios(records, largest) if args.without_guess else {}
    benchlib.write_json(args.json, {
        "machine": info, "jobs": args.jobs, "sizes": sizes, "imports": imports, "runs": records,
        "floor": {"parts": parts, **floors}, "livecells": ours, "ratios": ratios,
        "noop_per_page_s": per_page, "noop_growth_exponent": growth, "noop_per_page_ratio": ratio,
        "configurations": {t: label(t, args.jobs) for t in (*TOOLS, *(("noguess",) if guess else ()))},
        "without_guess": guess,
    })


def guess_ratios(records: list[dict[str, Any]], pages: int) -> dict[str, Any]:
    """Cold and edit of livecells without the guess against with it, per round and their median."""
    found: dict[str, Any] = {}
    print()
    for kind in ("cold", "edit"):
        pairs = []
        for n in sorted({r["round"] for r in records}):
            pick = {r["tool"]: r["seconds"] for r in records
                    if (r["round"], r["pages"], r["kind"]) == (n, pages, kind)
                    and r["tool"] in ("livecells", "noguess")}
            if len(pick) == 2:
                pairs.append((pick["livecells"], pick["noguess"]))
        if not pairs:
            continue
        ratios = [without / with_ for with_, without in pairs]
        found[kind] = {"with": [p[0] for p in pairs], "without": [p[1] for p in pairs], "ratios": ratios,
                       "median_ratio": median(ratios)}
        print(f"{pages} pages, {kind}: livecells {median([p[0] for p in pairs]):.2f} s, without the guess "
              f"{median([p[1] for p in pairs]):.2f} s; without / with, per round "
              f"{', '.join(f'{r:.3f}' for r in ratios)}, median {median(ratios):.3f}")
    return found


if __name__ == "__main__":
    sys.exit(main())
