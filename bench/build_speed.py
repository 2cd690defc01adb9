"""Build speed: livecells vs jupyter-sphinx vs plain Sphinx vs the in-process limit, one run.

    .venv/bin/python bench/build_speed.py [--pages 8 --frameworks 2 --cells 5 --repeat 1]

Generates one book (``book.py``) in every flavour and builds each from a fresh copy, with
``sphinx-build -q -b html``:

- livecells with its defaults (fresh store), then on the same copy a no-op rebuild ``-E`` (store
  present) and, after editing one cell, an ordinary rebuild that must run exactly one session;
- jupyter-sphinx 0.5.3 (one kernel per page and framework) with ``-j 1`` and ``-j auto``;
- plain Sphinx (cells as code blocks), and its ``-E`` rebuild;
- the in-process limit: one interpreter that imports the frameworks once and runs every cell.

Prints each build's median wall time and the ratios the Speed issue sets goals for. Only ratios
measured in the same run mean anything on a shared machine.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import benchlib
from benchlib import Run, fresh_copy, median, run, sphinx_build
from book import FRAMEWORKS, Book, edit_cell, write_book

SUMMARY = re.compile(r"livecells: (\d+) session\(s\) run")
StoreRuns = dict[tuple[str, str], dict[str, Any]]
BUILDS = ("plain", "livecells", "jupyter-sphinx-auto", "jupyter-sphinx-1", "inprocess")


def store_runs(src: Path) -> StoreRuns:
    """(page, framework) -> {run_id, status} of every session in a livecells store."""
    found = {}
    for path in sorted((src / "_livecells").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for framework, record in data["sessions"].items():
            found[(path.stem, framework)] = {
                "run_id": record.get("run_id"),
                "status": record.get("status"),
            }
    return found


def new_runs(before: StoreRuns, after: StoreRuns) -> list[str]:
    """The sessions that a build between ``before`` and ``after`` ran."""
    return [
        f"{page}/{fw}"
        for (page, fw), rec in sorted(after.items())
        if before.get((page, fw), {}).get("run_id") != rec["run_id"]
    ]


class Bench:
    """One benchmark run: the generated book, a work folder, and the times gathered so far."""

    def __init__(self, book: Book, work: Path, timeout: float) -> None:
        self.book = book
        self.work = work
        self.timeout = timeout
        self.sources = write_book(book, work / "templates")
        self.times: dict[str, list[float]] = {}
        self.notes: list[str] = []
        self.edit_sessions: list[dict[str, Any]] = []

    def record(self, name: str, result: Run, what: str) -> Run:
        result.check(what)
        self.times.setdefault(name, []).append(result.seconds)
        for leftover in result.leftovers:
            self.notes.append(f"{what}: left a process running (ended by the bench): {leftover}")
        warnings = result.warnings
        if warnings:
            self.notes.append(f"{what}: {len(warnings)} warning(s), first: {warnings[0][:160]}")
        print(f"  {what}: {result.seconds:.2f} s", flush=True)
        return result

    def build(self, flavour: str, rep: int, **options: Any) -> tuple[Path, Run]:
        src = fresh_copy(self.sources[flavour], self.work, f"{flavour}-{rep}")
        return src, run(sphinx_build(src, **options), timeout=self.timeout)

    def plain(self, rep: int) -> None:
        src, result = self.build("plain", rep)
        self.record("plain", result, "plain sphinx")
        rebuild = run(sphinx_build(src, fresh_env=True), timeout=self.timeout)
        self.record("plain -E", rebuild, "plain sphinx -E")

    def livecells(self, rep: int) -> None:
        src, result = self.build("livecells", rep)
        self.record("livecells", result, "livecells (fresh store)")
        stored = store_runs(src)
        bad = {k: v["status"] for k, v in stored.items() if v["status"] != "ok"}
        if len(stored) != self.book.sessions() or bad:
            raise SystemExit(
                f"livecells stored {len(stored)} of {self.book.sessions()} sessions; not ok: {bad}"
            )

        noop = run(sphinx_build(src, fresh_env=True), timeout=self.timeout)
        self.record("livecells -E (no-op)", noop, "livecells -E, store present")
        ran = new_runs(stored, store_runs(src))
        if ran:
            self.notes.append(f"no-op rebuild ran {len(ran)} session(s): {', '.join(ran)}")

        before = store_runs(src)
        page = self.book.pages // 2
        edit_cell(src, self.book, page, self.book.frameworks[0], min(2, self.book.cells - 1))
        edited = run(sphinx_build(src, quiet=False), timeout=self.timeout)
        self.record("livecells, one cell edited", edited, "livecells after editing one cell")
        match = SUMMARY.search(edited.stdout + edited.stderr)
        self.edit_sessions.append(
            {
                "summary_line": int(match.group(1)) if match else None,
                "store": new_runs(before, store_runs(src)),
            }
        )

    def jupyter_sphinx(self, rep: int, jobs: str) -> None:
        src, result = self.build("jupyter-sphinx", rep, jobs=jobs)
        self.record(f"jupyter-sphinx -j {jobs}", result, f"jupyter-sphinx -j {jobs}")
        notebooks = list((src / "_build" / "jupyter_execute").rglob("*.ipynb"))
        if len(notebooks) != self.book.sessions():
            raise SystemExit(
                f"jupyter-sphinx ran {len(notebooks)} notebooks (kernels), expected "
                f"{self.book.sessions()}: one per page and framework"
            )

    def inprocess(self, rep: int) -> None:
        script = Path(__file__).with_name("inprocess.py")
        result = run([benchlib.PYTHON, str(script), str(self.sources["cells"])], timeout=self.timeout)
        self.record("in-process limit", result, "in-process limit")


def report(bench: Bench, args: argparse.Namespace, info: dict[str, Any]) -> dict[str, Any]:
    times = {name: median(values) for name, values in bench.times.items()}
    rows = [
        [name, times[name], " ".join(f"{v:.2f}" for v in values)]
        for name, values in bench.times.items()
    ]
    print()
    print(f"book: {args.pages} pages x {args.frameworks} framework(s) x {args.cells} cells "
          f"= {bench.book.sessions()} sessions, {bench.book.sessions() * args.cells} cells; "
          f"median of {args.repeat}")
    print(f"machine: {benchlib.describe(info)}")
    print()
    print(benchlib.table(rows, ["build", "median s", "runs s"]))

    def ratio(a: str, b: str) -> float | None:
        return times[a] / times[b] if a in times and b in times and times[b] else None

    checks: list[tuple[str, float | None, str, Callable[[float], str]]] = [
        ("livecells / jupyter-sphinx -j auto", ratio("livecells", "jupyter-sphinx -j auto"),
         "<= 0.60 (aim 0.20)", lambda v: benchlib.verdict(v, 0.60, 0.20)),
        ("livecells / in-process limit", ratio("livecells", "in-process limit"),
         "aim <= 2.0", lambda v: benchlib.verdict(v, 2.0)),
        ("no-op rebuild -E / plain -E", ratio("livecells -E (no-op)", "plain -E"),
         "<= 1.30 (aim 1.10)", lambda v: benchlib.verdict(v, 1.30, 1.10)),
        ("livecells / jupyter-sphinx -j 1", ratio("livecells", "jupyter-sphinx -j 1"), "",
         lambda v: ""),
        ("jupyter-sphinx -j auto / -j 1",
         ratio("jupyter-sphinx -j auto", "jupyter-sphinx -j 1"), "", lambda v: ""),
        ("livecells / plain", ratio("livecells", "plain"), "", lambda v: ""),
    ]
    ratio_rows = [
        [name, value, goal, judge(value)] for name, value, goal, judge in checks if value is not None
    ]
    print()
    print(benchlib.table(ratio_rows, ["ratio", "value", "goal", "verdict"]))

    results: dict[str, Any] = {
        "book": {"pages": args.pages, "frameworks": args.frameworks, "cells": args.cells},
        "repeat": args.repeat,
        "machine": info,
        "seconds": bench.times,
        "median": times,
        "ratios": {row[0]: row[1] for row in ratio_rows},
    }
    if bench.edit_sessions:
        counts = [e["summary_line"] for e in bench.edit_sessions]
        stores = [len(e["store"]) for e in bench.edit_sessions]
        ok = all(c == 1 for c in counts) and all(s == 1 for s in stores)
        print()
        print(f"editing one cell: sessions run per rebuild {counts} (summary line), "
              f"{stores} (new run ids in the store) -> "
              f"{'exactly one kernel: yes' if ok else 'MISSES goal: exactly one kernel'}")
        results["edit_one_cell"] = bench.edit_sessions
    if bench.notes:
        print()
        print("notes:")
        for note in bench.notes:
            print(f"  - {note}")
    results["notes"] = bench.notes
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, default=8)
    parser.add_argument("--frameworks", type=int, default=2, choices=range(1, len(FRAMEWORKS) + 1))
    parser.add_argument("--cells", type=int, default=5, help="cells per framework per page")
    parser.add_argument("--repeat", type=int, default=1, help="builds of each kind; the median is reported")
    parser.add_argument("--skip", action="append", default=[], choices=BUILDS,
                        help="leave out a build (its ratios are then not printed)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per build")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--keep", action="store_true", help="keep the work folder and say where")
    args = parser.parse_args(argv)
    if args.pages < 1 or args.cells < 1 or args.repeat < 1:
        parser.error("--pages, --cells and --repeat must be at least 1")

    book = Book(args.pages, FRAMEWORKS[: args.frameworks], args.cells)
    info = benchlib.machine()
    work = Path(tempfile.mkdtemp(prefix="livecells-bench-"))
    bench = Bench(book, work, args.timeout)
    try:
        for rep in range(args.repeat):
            print(f"round {rep + 1} of {args.repeat}", flush=True)
            if "plain" not in args.skip:
                bench.plain(rep)
            if "livecells" not in args.skip:
                bench.livecells(rep)
            if "jupyter-sphinx-auto" not in args.skip:
                bench.jupyter_sphinx(rep, "auto")
            if "jupyter-sphinx-1" not in args.skip:
                bench.jupyter_sphinx(rep, "1")
            if "inprocess" not in args.skip:
                bench.inprocess(rep)
        benchlib.write_json(args.json, report(bench, args, info))
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            import shutil

            shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
