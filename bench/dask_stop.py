"""How long a Dask cluster of ``dask worker`` processes takes to stop, by the order it is stopped in.

Starts ``dask scheduler`` and ``--workers`` single-threaded ``dask worker`` processes (``--no-nanny``
unless ``--nanny``) on loopback, builds a small book against them (one page per worker, so that each
worker has its livecells kernel template; ``--no-build``: none, and no livecells on the workers),
then stops the cluster one way (``--order``):

- ``together``: SIGTERM to the scheduler and every worker at the same moment;
- ``workers-first``: SIGTERM to every worker, wait until they have exited, then to the scheduler;
- ``shutdown``: ``Client.shutdown()`` (the scheduler closes its workers, then itself).

Each try reports how long until every process of the cluster had exited, or which were still
alive after ``--cap`` seconds (then their Python and asyncio stacks are written to their logs,
and they are killed), and how many kernel templates or kernels of those workers were still alive
then. A worker still alive at the cap is *hung*: nothing ends it later (see docs/cluster.rst).

    .venv/bin/python bench/dask_stop.py --order together --tries 8
    .venv/bin/python bench/dask_stop.py --order workers-first --tries 8 --json /tmp/stop.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import PYTHON, describe, machine, run, sphinx_build, write_json  # noqa: E402
from dask_speed import start, write_site  # noqa: E402

#: A ``dask worker`` that, on SIGUSR1, writes every thread's stack and every asyncio task's to its log.
WORKER = """\
import asyncio, faulthandler, io, signal, sys
def tasks(*_):
    for task in list(asyncio.tasks._all_tasks):
        out = io.StringIO()
        task.print_stack(file=out)
        sys.stderr.write(f"TASK {task!r:.300}\\n{out.getvalue()}")
    sys.stderr.flush()
faulthandler.register(signal.SIGUSR1, all_threads=True, chain=False)
signal.signal(signal.SIGUSR2, tasks)
from distributed.cli.dask_worker import main
sys.argv[0] = "dask-worker"
main()
"""


Procs = list[subprocess.Popen[bytes]]


def start_cluster(work: Path, workers: int, nanny: bool) -> tuple[str, subprocess.Popen[bytes], Procs]:
    scheduler_file = work / "scheduler.json"
    scheduler = start(
        [PYTHON, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
         "--scheduler-file", str(scheduler_file)],
        work / "scheduler.log",
    )
    deadline = time.monotonic() + 60
    while not scheduler_file.exists():
        if time.monotonic() > deadline or scheduler.poll() is not None:
            raise SystemExit(f"the scheduler did not start; see {work / 'scheduler.log'}")
        time.sleep(0.1)
    address = json.loads(scheduler_file.read_text())["address"]
    procs = [
        start(
            [PYTHON, "-c", WORKER, address, "--host", "127.0.0.1", "--nthreads", "1", "--no-dashboard",
             "--name", f"w{n}", "--nanny" if nanny else "--no-nanny"],
            work / f"worker{n}.log",
        )
        for n in range(workers)
    ]
    return address, scheduler, procs


def descendants(procs: list[subprocess.Popen[bytes]]) -> dict[int, list[psutil.Process]]:
    found = {}
    for proc in procs:
        try:
            found[proc.pid] = psutil.Process(proc.pid).children(recursive=True)
        except psutil.Error:
            found[proc.pid] = []
    return found


def wait_all(procs: list[subprocess.Popen[bytes]], started: float, cap: float) -> dict[int, float]:
    """Seconds from ``started`` until each process exited (those still alive at ``cap``: absent)."""
    ended: dict[int, float] = {}
    while len(ended) < len(procs) and time.monotonic() - started < cap:
        for proc in procs:
            if proc.pid not in ended and proc.poll() is not None:
                ended[proc.pid] = time.monotonic() - started
        time.sleep(0.05)
    return ended


def one_try(work: Path, args: argparse.Namespace) -> dict[str, object]:
    address, scheduler, workers = start_cluster(work, args.workers, args.nanny)
    everything = [scheduler, *workers]
    children: dict[int, list[psutil.Process]] = {}
    try:
        from distributed import Client

        with Client(address, set_as_default=False, timeout=30) as client:
            client.wait_for_workers(args.workers, timeout=120)
        if not args.no_build:
            src = work / "src"
            write_site(src, args.workers, 1.0)
            run(sphinx_build(src) + ["-D", f"livecells_executor={address}"], timeout=600).check("the build")
        children = descendants(workers)
        started = time.monotonic()
        if args.order == "together":
            for proc in everything:
                os.kill(proc.pid, signal.SIGTERM)
            ended = wait_all(everything, started, args.cap)
        elif args.order == "workers-first":
            for proc in workers:
                os.kill(proc.pid, signal.SIGTERM)
            ended = wait_all(workers, started, args.cap)
            os.kill(scheduler.pid, signal.SIGTERM)
            ended.update(wait_all([scheduler], started, args.cap))
        else:
            with Client(address, set_as_default=False, timeout=30) as client:
                client.shutdown()
            ended = wait_all(everything, started, args.cap)
        hung = [n for n, proc in enumerate(workers) if proc.pid not in ended]
        kernels_left = sum(
            1 for n in hung for child in children[workers[n].pid]
            if child.is_running() and "ipykernel" in " ".join(child.cmdline())
        )
        for n in hung:  # stacks into its log, for the reader
            os.kill(workers[n].pid, signal.SIGUSR1)
            time.sleep(0.3)
            os.kill(workers[n].pid, signal.SIGUSR2)
        time.sleep(0.5)
        return {
            "seconds": max(ended.values()) if len(ended) == len(everything) else None,
            "hung_workers": len(hung),
            "scheduler_hung": scheduler.pid not in ended,
            "kernels_left_in_hung_workers": kernels_left,
        }
    finally:
        for proc in everything:
            with_kill(proc)
        for listed in children.values():
            for child in listed:
                with_kill(child)


def with_kill(proc: subprocess.Popen[bytes] | psutil.Process) -> None:
    try:
        if isinstance(proc, subprocess.Popen):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        else:
            proc.kill()
    except (ProcessLookupError, psutil.Error):
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--order", choices=["together", "workers-first", "shutdown"], default="together")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--tries", type=int, default=5)
    parser.add_argument("--cap", type=float, default=30.0, help="seconds after which a process is hung")
    parser.add_argument("--nanny", action="store_true", help="workers with a nanny (default: --no-nanny)")
    parser.add_argument("--no-build", action="store_true", help="no book built: no livecells on the workers")
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folders (workers' logs, stacks)")
    args = parser.parse_args()

    info = machine()
    print(f"machine: {describe(info)}")
    kind = f"{args.workers} workers ({'nanny' if args.nanny else '--no-nanny'}), " + (
        "no livecells" if args.no_build else "after a livecells build"
    )
    print(f"stop order {args.order!r}, {kind}, {args.tries} tries, hung = alive after {args.cap:g} s")
    results = []
    for number in range(args.tries):
        work = Path(tempfile.mkdtemp(prefix="livecells-dask-stop-"))
        result = one_try(work, args)
        results.append(result)
        seconds = result["seconds"]
        print(
            f"try {number + 1}: "
            + (f"every process exited in {seconds:.1f} s" if seconds is not None else
               f"{result['hung_workers']} worker(s) hung{', the scheduler hung' if result['scheduler_hung'] else ''}, "
               f"{result['kernels_left_in_hung_workers']} kernel process(es) of theirs alive")
            + (f" ({work})" if args.keep else ""),
            flush=True,
        )
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    done = [r["seconds"] for r in results if r["seconds"] is not None]
    print(
        f"{len(done)} of {len(results)} tries ended within {args.cap:g} s"
        + (f" (slowest {max(done):.1f} s)" if done else "")
        + f"; {sum(int(r['hung_workers']) for r in results)} hung worker(s) in all"
    )
    write_json(args.json, {"machine": info, "order": args.order, "workers": args.workers,
                           "nanny": args.nanny, "build": not args.no_build, "cap": args.cap, "tries": results})


if __name__ == "__main__":
    main()
