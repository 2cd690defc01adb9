"""Book-scale scheduling: makespan / lower bound for document order and for livecells' order.

Generates a book of sleep sessions with heavy-tailed lengths: ``--short`` pages whose session
sleeps 0.5-1.5 s, then ``--long`` pages (the last of the document) whose session sleeps much
longer (``--long-s``, each a little shorter than the one before). Every session has the same two
cells (an import, the sleep), so a build without history starts them in document order, as
livecells did before it used stored durations. It builds the book twice on ``--slots`` local CPU
slots (``livecells_jobs``; sleeps need no cores):

1. fresh store: no session has history, so they start in document order;
2. ``livecells_execute = 'force'``: every session runs again, ordered by the durations the first
   build stored.

For each build: the makespan (livecells' own "s executing" figure: from the first session's
start to the last one's end, template readiness included) divided by the lower bound of any
order, ``max(total work / slots, longest session)``, the work being the session durations that
build stored (kernel start included). The goal for the second build: <= 1.10.

    .venv/bin/python bench/schedule.py                  # 24 short + 3 long sessions, 4 slots
    .venv/bin/python bench/schedule.py --long-s 12 --short 16
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import PYTHON, describe, machine, run, table, verdict, write_json  # noqa: E402

CONF = """extensions = ["livecells"]
project = "schedule"
exclude_patterns = ["_build", "_livecells"]
livecells_frameworks = {{"python": {{"label": "Python", "kernel": "python3"}}}}
livecells_device = "cpu"
livecells_jobs = {slots}
livecells_timeout = 600
"""

GOAL = 1.10


def lengths(short: int, long: int, long_s: float, seed: int = 7) -> list[float]:
    """Sleep seconds per page, in document order: the short ones, then the long ones."""
    draw = random.Random(seed)
    shorts = [round(draw.uniform(0.5, 1.5), 2) for _ in range(short)]
    longs = [round(long_s * (1 - 0.2 * n), 2) for n in range(long)]
    return shorts + longs


def write_book(root: Path, sleeps: list[float], slots: int) -> None:
    root.mkdir(parents=True)
    (root / "conf.py").write_text(CONF.format(slots=slots), encoding="utf-8")
    names = [f"page{n:02d}" for n in range(len(sleeps))]
    toctree = "\n".join(f"   {name}" for name in names)
    (root / "index.rst").write_text(f"Book\n====\n\n.. toctree::\n\n{toctree}\n", encoding="utf-8")
    for name, seconds in zip(names, sleeps):
        (root / f"{name}.rst").write_text(
            f"{name}\n{'=' * len(name)}\n\n.. live-cell:: python\n\n   import time\n\n"
            f".. live-cell:: python\n\n   time.sleep({seconds})\n",
            encoding="utf-8",
        )


def build(src: Path, force: bool) -> float:
    """Build ``src``; the seconds livecells spent executing (its summary line)."""
    cmd = [PYTHON, "-m", "sphinx", "-b", "html"]
    if force:
        cmd += ["-D", "livecells_execute=force"]
    done = run([*cmd, str(src), str(src / "_build" / "html")]).check("sphinx-build")
    if done.leftovers:
        raise SystemExit(f"the build left processes running: {done.leftovers}")
    found = re.search(r"livecells: .*?([\d.]+) s executing", done.stdout)
    if not found:
        raise SystemExit(f"no 'livecells: ... s executing' line in the build's output:\n{done.stdout[-3000:]}")
    return float(found.group(1))


def stored_durations(src: Path, pages: int) -> list[float]:
    """Each session's duration as the build stored it; every page must have run."""
    durations = []
    for path in sorted((src / "_livecells").glob("page*.json")):
        session = json.loads(path.read_text(encoding="utf-8"))["sessions"]["python"]
        if session["status"] != "ok":
            raise SystemExit(f"{path.name}: the session's status is {session['status']!r}")
        durations.append(float(session["duration"]))
    if len(durations) != pages:
        raise SystemExit(f"{len(durations)} stored sessions, expected {pages}")
    return durations


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--short", type=int, default=24, help="short sessions (0.5-1.5 s), first")
    parser.add_argument("--long", type=int, default=3, help="long sessions, last in the document")
    parser.add_argument("--long-s", type=float, default=15.0, help="the longest session's sleep")
    parser.add_argument("--slots", type=int, default=4, help="livecells_jobs")
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()

    info = machine()
    print(describe(info))
    sleeps = lengths(args.short, args.long, args.long_s)
    rows, figures = [], {}
    with tempfile.TemporaryDirectory(prefix="livecells-schedule-") as work:
        src = Path(work) / "book"
        write_book(src, sleeps, args.slots)
        for name, force in (("document order (no history)", False), ("stored durations (force)", True)):
            makespan = build(src, force)
            durations = stored_durations(src, len(sleeps))
            bound = max(sum(durations) / args.slots, max(durations))
            ratio = makespan / bound
            rows.append([name, makespan, sum(durations), max(durations), bound, ratio])
            figures[name] = {"makespan": makespan, "work": sum(durations), "longest": max(durations),
                             "lower_bound": bound, "ratio": ratio}
    print(f"{args.short} short + {args.long} long sessions (sleeps {sum(sleeps):.1f} s), {args.slots} slots")
    print(table(rows, ["order", "makespan (s)", "work (s)", "longest (s)", "lower bound (s)", "ratio"]))
    second = rows[-1][-1]
    print(f"\nstored-duration order: makespan / lower bound = {second:.3f} "
          f"(goal <= {GOAL}): {verdict(second, GOAL)}")
    write_json(args.json, {"machine": info, "sleeps": sleeps, "slots": args.slots, "builds": figures})


if __name__ == "__main__":
    main()
