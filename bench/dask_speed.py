"""Sleep-bound pages built locally vs on a Dask cluster of worker processes started by hand.

Generates ``--pages`` pages, each one ``time.sleep(S)`` cell that prints its kernel's parent pid,
on a light framework (plain python3 kernel, nothing preloaded). Builds them once with the local
executor (CPU: one session at a time), then twice against a scheduler and ``--workers`` single-
threaded workers started with the ``dask`` command line on loopback: the first build on fresh
workers (they start their kernel templates during it), and a later one on the same workers (which
keep their templates between builds). Each build is of a fresh copy.
Checks that every page of the cluster build was run by a kernel forked from a template of a
worker process (whose parent is the worker), and prints the ratio cluster / local (goal: <= 0.40;
the Speed issue checks <= 0.45).

    .venv/bin/python bench/dask_speed.py                 # 4 pages x 4 s, 4 workers
    .venv/bin/python bench/dask_speed.py --pages 8 --sleep 2 --workers 4
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from benchlib import (  # noqa: E402
    PYTHON,
    Run,
    child_environment,
    describe,
    fresh_copy,
    machine,
    run,
    sphinx_build,
    table,
    verdict,
    write_json,
)

CONF = '''extensions = ["livecells"]
project = "dask-speed"
exclude_patterns = ["_build", "_livecells"]
livecells_frameworks = {"python": {"label": "Python", "kernel": "python3"}}
livecells_timeout = 600
'''


def write_site(root: Path, pages: int, sleep: float) -> None:
    root.mkdir(parents=True)
    (root / "conf.py").write_text(CONF, encoding="utf-8")
    names = [f"page{n}" for n in range(pages)]
    toctree = "\n".join(f"   {name}" for name in names)
    (root / "index.rst").write_text(f"Sleep\n=====\n\n.. toctree::\n\n{toctree}\n", encoding="utf-8")
    for name in names:
        (root / f"{name}.rst").write_text(
            f"{name}\n{'=' * len(name)}\n\n.. live-cell:: python\n\n"
            f"   import os, time\n   time.sleep({sleep})\n   print('{name} ppid', os.getppid())\n",
            encoding="utf-8",
        )


def start(cmd: list[str], log: Path) -> subprocess.Popen[bytes]:
    """A child in a session of its own, so that it and its children can be ended together."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            cmd, stdout=out, stderr=subprocess.STDOUT, env=child_environment(), start_new_session=True
        )


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def start_cluster(work: Path, workers: int) -> tuple[str, list[subprocess.Popen[bytes]]]:
    """``dask scheduler`` and ``dask worker --nworkers N --nthreads 1`` on loopback."""
    scheduler_file = work / "scheduler.json"
    procs = [
        start(
            [PYTHON, "-m", "dask", "scheduler", "--host", "127.0.0.1", "--port", "0",
             "--no-dashboard", "--dashboard-address", "127.0.0.1:0",
             "--scheduler-file", str(scheduler_file)],
            work / "scheduler.log",
        )
    ]
    deadline = time.monotonic() + 60
    while not scheduler_file.exists():
        if time.monotonic() > deadline or procs[0].poll() is not None:
            raise SystemExit(f"the scheduler did not start; see {work / 'scheduler.log'}")
        time.sleep(0.1)
    address = json.loads(scheduler_file.read_text())["address"]
    procs.append(
        start(
            [PYTHON, "-m", "dask", "worker", address, "--host", "127.0.0.1", "--nworkers",
             str(workers), "--nthreads", "1", "--no-dashboard"],
            work / "workers.log",
        )
    )
    return address, procs


def worker_pids(address: str, workers: int) -> dict[str, int]:
    from distributed import Client

    with Client(address, set_as_default=False, timeout=30) as client:
        client.wait_for_workers(workers, timeout=120)
        return client.run(os.getpid)  # type: ignore[no-any-return]


def worker_templates(address: str) -> dict[int, int]:
    """Template pid -> the pid of the worker whose template it is."""
    from distributed import Client

    def templates(dask_worker) -> list[int]:  # type: ignore[no-untyped-def]
        from livecells.execute.worker import WorkerKernels

        kernels = WorkerKernels.of(dask_worker, make=False)
        return kernels.template_pids if kernels is not None else []

    with Client(address, set_as_default=False, timeout=30) as client:
        pids = client.run(os.getpid)
        found = client.run(templates)
    return {template: pids[worker] for worker, listed in found.items() for template in listed}


def page_ppids(src: Path) -> dict[str, int]:
    """Each page's printed parent pid, read from the store."""
    found = {}
    for path in sorted((src / "_livecells").glob("page*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for session in data["sessions"].values():
            for cell in session["cells"]:
                for output in cell["outputs"]:
                    for name, pid in re.findall(r"(page\d+) ppid (\d+)", output.get("text", "")):
                        found[name] = int(pid)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=4)
    parser.add_argument("--sleep", type=float, default=4.0, help="seconds each page's cell sleeps")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--json", help="also write the figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()

    info = machine()
    print(f"machine: {describe(info)}")
    work = Path(tempfile.mkdtemp(prefix="livecells-dask-speed-"))
    template = work / "template"
    write_site(template, args.pages, args.sleep)

    local_src = fresh_copy(template, work, "local")
    local = run(sphinx_build(local_src)).check("the local build")

    address, procs = start_cluster(work, args.workers)
    builds: list[tuple[Path, Run]] = []
    try:
        pids = worker_pids(address, args.workers)
        # The first build on fresh workers (their templates start during it), then a later one
        # on the same workers, which keep their templates between builds.
        for name in ("dask-first", "dask-later"):
            dask_src = fresh_copy(template, work, name)
            cmd = sphinx_build(dask_src) + ["-D", f"livecells_executor={address}"]
            builds.append((dask_src, run(cmd).check(f"the cluster build {name}")))
        templates = worker_templates(address)
    finally:
        for proc in reversed(procs):
            stop(proc)

    workers = set(pids.values())
    forked = used = 0
    for dask_src, _ in builds:
        ppids = page_ppids(dask_src)
        missing = [f"page{n}" for n in range(args.pages) if f"page{n}" not in ppids]
        strangers = {
            page: pid for page, pid in ppids.items() if pid not in workers and pid not in templates
        }
        if missing or strangers:
            raise SystemExit(f"pages not run by a worker's kernel: missing {missing}, other parents {strangers}")
        forked += sum(pid in templates for pid in ppids.values())
        used = max(used, len({templates.get(pid, pid) for pid in ppids.values()}))

    (_, first), (_, later) = builds
    ratio, ratio_later = first.seconds / local.seconds, later.seconds / local.seconds
    print(f"{args.pages} pages x time.sleep({args.sleep:g}); {args.workers} workers at {address}")
    print(
        table(
            [
                ["local (one session at a time)", local.seconds, 1.0],
                [f"Dask, {args.workers} fresh workers ({used} used)", first.seconds, ratio],
                ["Dask, the same workers again (templates kept)", later.seconds, ratio_later],
            ],
            ["build", "seconds", "ratio"],
        )
    )
    print(
        f"cluster / local = {ratio:.2f} on fresh workers ({verdict(ratio, 0.40)}: goal <= 0.40), "
        f"{ratio_later:.2f} on workers that built before ({verdict(ratio_later, 0.40)})"
    )
    print(
        f"every page ran in a kernel of a worker: {forked} of {2 * args.pages} forked from the "
        f"worker's template, the others started afresh"
    )
    for leftover in local.leftovers + first.leftovers + later.leftovers:
        print(f"left running by a build (ended): {leftover}")
    write_json(
        args.json,
        {
            "machine": info,
            "pages": args.pages,
            "sleep": args.sleep,
            "workers": args.workers,
            "local_seconds": local.seconds,
            "dask_seconds": first.seconds,
            "ratio": ratio,
            "dask_later_seconds": later.seconds,
            "ratio_later": ratio_later,
            "workers_used": used,
            "pages_forked": forked,
        },
    )
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work folder kept: {work}")


if __name__ == "__main__":
    main()
