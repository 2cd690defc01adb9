"""How a livecells build grows with the book: the cost of each extra session, and Sphinx's memory.

Run: ``.venv/bin/python bench/scale.py [--pages 8 32 128] [--chart docs/_static/scale.png]``.

Builds the light book of ``book.py`` (``--frameworks`` sessions per page, ``--cells`` light
cells each) at each size, with livecells' defaults and a fresh store, and plain Sphinx at the
same sizes (the cells as code blocks). Each build runs ``sphinx-build`` in a process that
reports its own peak resident memory (``ru_maxrss``: the Sphinx process alone, not its kernels).
Prints, from the least-squares line through the sizes, the cost of one extra session (livecells
minus plain Sphinx, per session) and the peak memory per size, which must not grow with the
number of sessions beyond what plain Sphinx needs for the extra pages. ``--chart`` draws the
build times and the extra cost per session (matplotlib, PNG) for ``docs/performance.rst``.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import benchlib
from book import FRAMEWORKS, Book, write_book

# sphinx-build, then its own peak RSS (KiB on Linux) on the last line of stderr.
MEASURED_BUILD = (
    "import resource, sys\n"
    "from sphinx.cmd.build import main\n"
    "code = main(sys.argv[1:])\n"
    "print(f'peak-rss-kib {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}', file=sys.stderr)\n"
    "sys.exit(code)\n"
)


def build(src: Path, timeout: float, jobs: str | None = None) -> tuple[float, float]:
    """Seconds and the Sphinx process's peak MiB of one quiet HTML build of ``src``."""
    command = benchlib.sphinx_build(src, jobs=jobs)
    result = benchlib.run([command[0], "-c", MEASURED_BUILD, *command[3:]], timeout=timeout)
    result.check(f"build of {src.name}")
    if result.leftovers:
        raise SystemExit(f"the build of {src.name} left processes running: {result.leftovers}")
    peak = [line for line in result.stderr.splitlines() if line.startswith("peak-rss-kib ")]
    return result.seconds, int(peak[-1].split()[1]) / 1024


def stored_sessions(src: Path) -> dict[str, str]:
    """Each stored session's status, from the store livecells wrote under ``src``."""
    found = {}
    for path in sorted((src / "_livecells").glob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for name, record in data["sessions"].items():
            found[f"{path.stem}:{name}"] = record.get("status", "?")
    return found


def slope(xs: list[float], ys: list[float]) -> float:
    """The least-squares slope of ys against xs."""
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)


def draw(path: Path, rows: list[dict[str, Any]], per_session: float, info: dict[str, Any]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sessions = [row["sessions"] for row in rows]
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.4), dpi=110)
    left.plot(sessions, [r["livecells_s"] for r in rows], "o-", label="livecells (fresh store)")
    left.plot(sessions, [r["plain_s"] for r in rows], "s--", label="plain Sphinx")
    left.set_xlabel("sessions (pages × frameworks)")
    left.set_ylabel("build, s")
    left.set_title(f"build time; +{per_session * 1000:.0f} ms per extra session")
    left.legend(loc="upper left", fontsize=8)
    left.grid(alpha=0.3)
    right.plot(sessions, [r["livecells_mib"] for r in rows], "o-", label="livecells")
    right.plot(sessions, [r["plain_mib"] for r in rows], "s--", label="plain Sphinx")
    right.set_xlabel("sessions (pages × frameworks)")
    right.set_ylabel("peak RSS of the Sphinx process, MiB")
    right.set_title("memory of the Sphinx process")
    right.legend(loc="upper left", fontsize=8)
    right.grid(alpha=0.3)
    fig.suptitle(f"{benchlib.describe(info)}; one run", fontsize=7)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pages", type=int, nargs="+", default=[8, 32, 128])
    parser.add_argument("--frameworks", type=int, default=2, choices=range(1, len(FRAMEWORKS) + 1))
    parser.add_argument("--cells", type=int, default=5, help="cells per framework per page")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per build")
    parser.add_argument("--chart", metavar="PNG", help="draw the curves into this file")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    parser.add_argument("--parallel-read", action="store_true",
                        help="also build the largest book with -j auto (Sphinx reads in parallel)")
    args = parser.parse_args(argv)
    sizes = sorted(set(args.pages))
    if len(sizes) < 2 or sizes[0] < 1:
        parser.error("--pages needs at least two different sizes of 1 page or more")

    info = benchlib.machine()
    print(f"machine: {benchlib.describe(info)}", flush=True)
    work = Path(tempfile.mkdtemp(prefix="livecells-scale-"))
    rows: list[dict[str, Any]] = []
    try:
        for pages in sizes:
            book = Book(pages, FRAMEWORKS[: args.frameworks], args.cells)
            sources = write_book(book, work / f"p{pages}")
            plain_s, plain_mib = build(sources["plain"], args.timeout)
            live_s, live_mib = build(sources["livecells"], args.timeout)
            stored = stored_sessions(sources["livecells"])
            bad = {k: v for k, v in stored.items() if v != "ok"}
            if len(stored) != book.sessions() or bad:
                raise SystemExit(f"{pages} pages: {len(stored)} of {book.sessions()} sessions stored; not ok: {bad}")
            rows.append({
                "pages": pages, "sessions": book.sessions(), "livecells_s": live_s,
                "plain_s": plain_s, "livecells_mib": live_mib, "plain_mib": plain_mib,
            })
            print(f"  {pages} pages, {book.sessions()} sessions: livecells {live_s:.2f} s "
                  f"({live_mib:.0f} MiB), plain {plain_s:.2f} s ({plain_mib:.0f} MiB)", flush=True)
        if args.parallel_read:
            src = benchlib.fresh_copy(sources["livecells"], work, "parallel")
            shutil.rmtree(src / "_build", ignore_errors=True)
            shutil.rmtree(src / "_livecells", ignore_errors=True)
            auto_s, _ = build(src, args.timeout, jobs="auto")
            stored = stored_sessions(src)
            if len(stored) != book.sessions() or any(v != "ok" for v in stored.values()):
                raise SystemExit(f"-j auto: {len(stored)} of {book.sessions()} sessions stored ok")
            rows[-1]["livecells_j_auto_s"] = auto_s
            print(f"  {pages} pages with -j auto: {auto_s:.2f} s "
                  f"(-j auto / -j 1: {auto_s / rows[-1]['livecells_s']:.2f}, goal <= 1)", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    sessions = [float(r["sessions"]) for r in rows]
    per_session = slope(sessions, [r["livecells_s"] - r["plain_s"] for r in rows])
    per_session_total = slope(sessions, [r["livecells_s"] for r in rows])
    memory = slope(sessions, [r["livecells_mib"] - r["plain_mib"] for r in rows])
    print()
    print(benchlib.table(
        [[r["pages"], r["sessions"], r["livecells_s"], r["plain_s"], r["livecells_mib"], r["plain_mib"]]
         for r in rows],
        ["pages", "sessions", "livecells s", "plain s", "livecells MiB", "plain MiB"],
    ))
    print()
    print(f"cost per extra session (livecells - plain Sphinx): {per_session * 1000:.1f} ms "
          f"(goal <= 50 ms, checked <= 80 ms: {benchlib.verdict(per_session, 0.08, 0.05)})")
    print(f"per extra session, whole build: {per_session_total * 1000:.1f} ms")
    print(f"Sphinx peak memory per extra session beyond plain Sphinx's: {memory * 1024:.0f} KiB")
    if args.chart:
        draw(Path(args.chart), rows, per_session, info)
        print(f"chart: {args.chart}")
    benchlib.write_json(args.json, {
        "machine": info, "cells": args.cells, "frameworks": args.frameworks, "rows": rows,
        "per_session_s": per_session, "per_session_total_s": per_session_total,
        "memory_per_session_mib": memory,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())
