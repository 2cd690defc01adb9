"""What two reviewed parts of the execution cost or save, each against itself without them.

Run: ``.venv/bin/python bench/removals.py [--rounds 5] [--pages 4] [--kernels 10]``. Issue #34 names
candidates for removal; this measures two of them, paired, in one run:

- **the guess** (``pipeline/guess.py``): before Sphinx reads, the frameworks whose cells changed
  start their fork-server template (the framework's import), so the import overlaps the reading.
  Two copies of the same book (``book.py``; pytorch and mxnet), one as it is, one whose conf.py
  replaces the guess by one that guesses nothing (the scheduler then starts each template when
  its first session starts, as it does for any session the guess missed). Each round, in
  alternating order, builds each cold from a fresh copy, then again after one pytorch cell is
  edited; each build's summary line must say it ran every session (cold) or one (edit).
- **the IOPub pipe's move** (``kernel_side/hook.iopub_pipe_to_ipc``): ipykernel listens for
  forked children's output on a TCP port of 127.0.0.1; livecells' hook moves it to an IPC
  socket, so that a kernel listens on no TCP port (docs/errors.rst, "Network sockets"). In
  ``--kernels`` fresh ``python3`` kernels (IPC transport, as livecells starts them), the time of
  the start and, loaded by its path as the kernel loads it, the move itself.

Prints medians of each and the ratios; ``--json`` writes them.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tempfile
import time
from pathlib import Path

import benchlib
from book import Book, edit_cell, write_book

SUMMARY = re.compile(r"livecells: (\d+) session\(s\) run")
#: Appended to the conf.py of the copy without the guess: it guesses that nothing will run.
NO_GUESS = (
    "\nimport livecells.pipeline.events as _events\n"
    "_events.changed_frameworks = lambda text, stored, names: set()\n"
)
HOOK = benchlib.REPO / "ext" / "livecells" / "kernel_side" / "hook.py"
MOVE = f"""
import importlib.util, time
_spec = importlib.util.spec_from_file_location("_bench_hook", {str(HOOK)!r})
_hook = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_hook)
_notes = []
_t = time.perf_counter()
_address = _hook.iopub_pipe_to_ipc(_notes)
print(repr((time.perf_counter() - _t, _address, _notes)))
"""


def build(src: Path, want: int) -> float:
    run = benchlib.run(benchlib.sphinx_build(src, quiet=False)).check(f"build of {src.name}")
    found = SUMMARY.search(run.stdout + run.stderr)
    ran = int(found.group(1)) if found else -1
    if ran != want:
        raise SystemExit(f"{src.name}: ran {ran} session(s), expected {want}")
    if run.leftovers:
        raise SystemExit(f"{src.name}: processes outlived the build: {run.leftovers}")
    return run.seconds


def guess_rounds(rounds: int, pages: int, work: Path) -> dict[str, dict[str, list[float]]]:
    book = Book(pages=pages, frameworks=("pytorch", "mxnet"), cells=3)
    template = write_book(book, work / "template")["livecells"]
    times: dict[str, dict[str, list[float]]] = {m: {"cold": [], "edit": []} for m in ("guess", "no guess")}
    for r in range(rounds):
        modes = ["guess", "no guess"] if r % 2 == 0 else ["no guess", "guess"]
        for mode in modes:
            src = benchlib.fresh_copy(template, work, mode.replace(" ", "-"))
            if mode == "no guess":
                with open(src / "conf.py", "a", encoding="utf-8") as conf:
                    conf.write(NO_GUESS)
            times[mode]["cold"].append(build(src, book.sessions()))
            edit_cell(src, book, page=0, framework="pytorch", cell=1)
            times[mode]["edit"].append(build(src, 1))
        done = (f"{m} {times[m]['cold'][-1]:.2f}/{times[m]['edit'][-1]:.2f}" for m in modes)
        print(f"round {r + 1} (cold/edit, s): " + ", ".join(done), flush=True)
    return times


def pipe_kernels(kernels: int) -> dict[str, list[float]]:
    from jupyter_client.manager import KernelManager

    starts, moves = [], []
    for _ in range(kernels):
        km = KernelManager(kernel_name="python3", transport="ipc")
        t = time.perf_counter()
        km.start_kernel()
        kc = km.client()
        kc.start_channels()
        try:
            kc.wait_for_ready(timeout=60)
            starts.append(time.perf_counter() - t)
            printed = []
            kc.execute_interactive(MOVE, timeout=60, output_hook=lambda m: printed.append(m["content"].get("text", "")))
            seconds, address, notes = ast.literal_eval("".join(printed))
            if not address or notes:
                raise SystemExit(f"the move did not happen: {address!r} {notes}")
            moves.append(seconds)
        finally:
            kc.stop_channels()
            km.shutdown_kernel(now=True)
    return {"start": starts, "move": moves}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--kernels", type=int, default=10)
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    info = benchlib.machine()
    print(benchlib.describe(info))
    with tempfile.TemporaryDirectory(prefix="livecells-removals-") as tmp:
        guess = guess_rounds(args.rounds, args.pages, Path(tmp))
    pipe = pipe_kernels(args.kernels)
    med = benchlib.median
    rows = [
        [kind, med(guess["guess"][kind]), med(guess["no guess"][kind]),
         med([b / a for a, b in zip(guess["guess"][kind], guess["no guess"][kind])])]
        for kind in ("cold", "edit")
    ]
    header = [f"build ({args.pages} pages, pytorch + mxnet)", "guess (s)", "no guess (s)", "no guess / guess, paired"]
    print(benchlib.table(rows, header))
    print(f"IOPub pipe move: median {med(pipe['move']) * 1000:.1f} ms in {len(pipe['move'])} kernels "
          f"(max {max(pipe['move']) * 1000:.1f} ms), kernel start median {med(pipe['start']):.3f} s: "
          f"{med(pipe['move']) / med(pipe['start']):.1%} of a start")
    benchlib.write_json(args.json_path, {"machine": info, "guess": guess, "pipe": pipe})
    return 0


if __name__ == "__main__":
    sys.exit(main())
