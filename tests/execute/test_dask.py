"""Sessions on a Dask cluster: a LocalCluster of two worker processes on loopback, real kernels."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import re
import shutil
import socket
import time
from io import StringIO
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import psutil
import pytest
from sphinx.errors import SphinxError
from sphinx.testing.util import SphinxTestApp

import timing
from conftest import kernel_processes
from helpers import build_site, cells, outputs, said, soup, survivors
from paths import EXT

distributed = pytest.importorskip("distributed")

from livecells.config import read_config  # noqa: E402
from livecells.execute.dask.cluster import check_executor  # noqa: E402
from livecells.execute.dask.scheduler import DaskScheduler  # noqa: E402
from livecells.execute.devices import GPU  # noqa: E402
from livecells.execute.executors import ExecutorError  # noqa: E402
from livecells.execute.forkserver.forked import MARKER  # noqa: E402
from livecells.execute.scheduler import SessionJob, cell_listener  # noqa: E402
from livecells.execute.worker import WorkerKernels, own_gpus  # noqa: E402
from livecells.model.frameworks import FrameworkSpec  # noqa: E402
from livecells.model.plans import CellPlan, PageSettings, SessionPlan  # noqa: E402

# The workers start real kernels too.
pytestmark = [pytest.mark.cluster, pytest.mark.kernel]

PAGES = ["index", "one", "sub/two"]


def worker_templates(client) -> dict[str, list[int]]:
    """Each worker's template pids."""
    def pids(dask_worker) -> list[int]:
        kernels = WorkerKernels.of(dask_worker, make=False)
        return kernels.template_pids if kernels is not None else []

    return client.run(pids)


def parent_of(pid: int) -> int:
    return psutil.Process(pid).ppid()


#: A cell that kills the worker running it: the nearest ancestor that is no kernel or template
#: (a forked kernel's parent is its template, whose parent is the worker).
KILL_WORKER = (
    "import os, signal\n"
    "def parent(pid):\n"
    "    return int(open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[1])\n"
    "def worker():\n"
    "    pid = parent(os.getpid())\n"
    f"    while {MARKER.encode()!r} in open(f'/proc/{{pid}}/cmdline', 'rb').read():\n"
    "        pid = parent(pid)\n"
    "    return pid\n"
)


@pytest.fixture(scope="module", autouse=True)
def _quiet_monitors():
    """Every cluster of this module, with its own monitors slowed down: the workers' statistical
    profiler (a stack sample every 10 ms), the event loops' tick (every 20 ms, to warn of a
    blocked loop), the memory monitors (every 100 ms) and the system monitors (every 500 ms,
    for the dashboard) cost CPU for as long as a cluster lives, and watch nothing these tests
    check. Worker processes get the nanny's config."""
    import dask

    with dask.config.set({
        "distributed.worker.profile.enabled": False,
        "distributed.admin.tick.interval": "1s",
        "distributed.worker.memory.monitor-interval": "1s",
        "distributed.admin.system-monitor.interval": "1s",
    }):
        yield


@pytest.fixture(scope="module")
def cluster():
    """Two single-threaded worker processes; yields the cluster and a client of it."""
    from distributed import Client, LocalCluster

    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0",
    ) as local, Client(local, set_as_default=False) as client:
        yield local, client


@pytest.fixture(scope="module")
def built(cluster, tmp_path_factory, rootdir):
    """Build tests/roots/test-dask once against the cluster."""
    local, client = cluster
    worker_pids = client.run(os.getpid)
    src = tmp_path_factory.mktemp("dask") / "src"
    shutil.copytree(rootdir / "test-dask", src)
    app, warnings = build_site(src, confoverrides={"livecells_executor": local.scheduler_address})
    templates = worker_templates(client)
    return {
        "app": app,
        "src": src,
        "pages": {name: soup(app.outdir / f"{name}.html") for name in PAGES},
        "warnings": warnings,
        "worker_pids": worker_pids,
        "templates": templates,
        # The workers' templates wait for the next build; no kernel may be left.
        "kernels_left": [
            p for p in kernel_processes() if p.pid not in {t for ts in templates.values() for t in ts}
        ],
    }


def _printed_ppids(built) -> dict[str, int]:
    seen: dict[str, int] = {}
    for page in built["pages"].values():
        for cell in cells(page):
            for label, ppid in re.findall(r"page (\S+) ppid (\d+)", outputs(cell)):
                seen[label] = int(ppid)
    return seen


def test_every_session_ran_in_a_kernel_forked_from_its_workers_template(built):
    seen = _printed_ppids(built)
    assert set(seen) == {"index", "one-alpha", "one-beta", "two"}
    # alpha and beta are the same kernel with nothing preloaded: one template per worker, which
    # every session on that worker forked from (a second session reuses it).
    templates = built["templates"]
    assert sorted(map(len, templates.values())) == [1, 1], templates
    owner = {pids[0]: built["worker_pids"][address] for address, pids in templates.items()}
    assert set(seen.values()) <= set(owner)
    for template, worker in owner.items():
        assert parent_of(template) == worker
    # Four sessions over two free single-threaded workers: both take some.
    assert set(seen.values()) == set(owner)


def test_later_sessions_on_a_worker_reuse_its_template(built, cluster, tmp_path):
    local, client = cluster
    ppid = "import os\nprint(os.getppid())"
    jobs = [_job(tmp_path / f"again{n}.rst", ppid) for n in range(4)]
    for job in jobs:
        Path(job.plan.source).write_text("again\n", encoding="utf-8")
    records = _run(local.scheduler_address, jobs)
    parents = {int(r.cells[0].outputs[0]["text"]) for r in records.values()}
    # The same templates as during the build: none was started again.
    assert worker_templates(client) == built["templates"]
    assert parents <= {pids[0] for pids in built["templates"].values()}


def test_the_kernel_runs_in_the_page_folder(built):
    assert "cwd sub" in outputs(cells(built["pages"]["sub/two"])[0])


def test_the_store_is_written_with_the_worker_that_ran_each_session(built):
    addresses = set(built["worker_pids"])
    workers = set()
    for name in PAGES:
        data = json.loads((built["src"] / "_livecells" / f"{name}.json").read_text(encoding="utf-8"))
        for session in data["sessions"].values():
            assert session["status"] == "ok", session
            assert session["provenance"]["host"] == socket.gethostname()
            workers.add(session["provenance"]["worker"])
    assert workers == addresses


def test_pages_render_without_warnings_and_no_kernel_is_left(built):
    assert "livecells" not in built["warnings"], built["warnings"]
    assert built["kernels_left"] == []


def test_an_unreachable_scheduler_is_a_clear_error(rootdir, tmp_path):
    import dask

    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        address = f"tcp://127.0.0.1:{probe.getsockname()[1]}"
    with pytest.raises(ExecutorError, match="cannot be reached"):
        check_executor(address, timeout=1)
    shutil.copytree(rootdir / "test-dask", tmp_path / "src")
    # Whether the build checks the address when it starts or when sessions run, it stops cleanly.
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}), pytest.raises(
        SphinxError, match=f"{address}.*cannot be reached"
    ):
        app = SphinxTestApp(
            "html", srcdir=tmp_path / "src", status=StringIO(), warning=StringIO(),
            confoverrides={"livecells_executor": address},
        )
        try:
            app.build()
        finally:
            app.cleanup()


def test_a_client_factory_is_accepted(cluster):
    local, client = cluster
    warnings: list[str] = []
    config = read_config({"executor": lambda: client}, said(warnings))
    assert callable(config.executor) and not warnings
    info = check_executor(config.executor, timeout=10)
    assert (info.workers, info.threads, info.gpus_per_worker, info.slots) == (2, 2, 0, False)
    with pytest.raises(ExecutorError, match="not a distributed.Client"):
        check_executor(lambda: "tcp://nowhere", timeout=1)


def test_own_gpus_of_a_worker():
    gpus = [GPU(i, "G") for i in range(4)]
    assert own_gpus(0, gpus, pinned=False) == ([], None)
    # dask-cuda pins every GPU, the worker's own first.
    assert own_gpus(1, [gpus[2], gpus[3], gpus[0], gpus[1]], pinned=True) == ([gpus[2]], None)
    assert own_gpus(4, gpus, pinned=False) == (gpus, None)
    assert "CUDA_VISIBLE_DEVICES is not set" in (own_gpus(1, gpus, pinned=False)[1] or "")
    assert "sees 1 GPU" in (own_gpus(2, gpus[:1], pinned=True)[1] or "")


# -- the scheduler alone, with jobs made by hand ---------------------------------------------------


def _job(page: Path, *codes: str, gpus: int = 0) -> SessionJob:
    cells = tuple(
        CellPlan(index=i, frameworks=("alpha",), code=code, line=i + 1, code_line=i + 2)
        for i, code in enumerate(codes)
    )
    plan = SessionPlan(str(page.stem), "alpha", str(page), cells, PageSettings())
    framework = FrameworkSpec(name="alpha", label="Alpha")
    return SessionJob(plan, framework, "key", "env", gpus, 30.0, 10_000)


def _run(executor: str, jobs: list[SessionJob], fork: bool = True) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}

    def on_done(job: SessionJob, record: dict[str, Any]) -> None:
        records[job.plan.docname] = record

    asyncio.run(DaskScheduler(executor, timeout=10, fork=fork).run(jobs, on_done))
    return records


def test_sessions_start_on_the_cluster_in_the_local_order_longest_stored_first(cluster, tmp_path):
    """The same order as the local scheduler (livecells.execute.scheduler.run_order): the two
    sessions that took longest last time, last in the document, are the first two to start.

    The long sessions take a while after they note their start, as long ones do: otherwise a
    worker whose kernel starts slowly under load could note its start after the other worker had
    finished its own and noted the next."""
    local, _ = cluster
    names = ["s1", "s2", "s3", "s4", "long1", "long2"]
    estimates = [1.0, 2.0, 1.5, 1.0, 40.0, 30.0]
    jobs = []
    for name, estimate in zip(names, estimates):
        page = tmp_path / f"{name}.rst"
        page.write_text(f"{name}\n", encoding="utf-8")
        last = "import time; time.sleep(3)" if name.startswith("long") else "None"
        job = _job(page, f"open('order.txt', 'a').write('{name}\\n')", last)
        jobs.append(dataclasses.replace(job, estimate=estimate))
    records = _run(local.scheduler_address, jobs)
    assert all(r.status == "ok" for r in records.values()), records
    started = (tmp_path / "order.txt").read_text().split()
    assert sorted(started) == sorted(names)
    assert set(started[:2]) == {"long1", "long2"}, started


def test_the_build_hears_of_each_cell_a_session_sends_on_a_worker(cluster, tmp_path):
    """The progress line's "cell n of m" for a cluster's sessions: the worker's events."""
    local, _ = cluster
    page = tmp_path / "cells.rst"
    page.write_text("cells\n", encoding="utf-8")
    heard: list[tuple[str, int, int]] = []
    token = cell_listener.set(lambda job, n, m: heard.append((job.plan.docname, n, m)))
    try:
        records = _run(local.scheduler_address, [_job(page, "1", "import time; time.sleep(2)")])
    finally:
        cell_listener.reset(token)
    assert records["cells"].status == "ok"
    assert heard == [("cells", 1, 2), ("cells", 2, 2)]


def _gone(pids: list[int], within: float) -> bool:
    """Whether all of ``pids`` end (or are zombies) within ``within`` seconds."""
    return not survivors(pids, within)


def test_a_worker_that_cannot_serve_a_session_gives_a_failed_record(cluster, tmp_path):
    local, _ = cluster
    records = _run(
        local.scheduler_address,
        [_job(tmp_path / "elsewhere" / "lost.rst", "1"), _job(tmp_path / "gpu.rst", "1", gpus=1)],
    )
    lost = records["lost"]
    assert lost.status == "failed"
    assert "cannot see the source tree" in lost.message and "elsewhere" in lost.message
    assert lost.provenance.extra["worker"] in local.scheduler_info["workers"]
    assert records["gpu"].status == "failed"
    assert "declares 1 GPU" in records["gpu"].message


def test_cancelling_the_run_cancels_the_cluster_tasks_and_their_kernels(cluster, tmp_path):
    local, client = cluster
    page = tmp_path / "slow.rst"
    page.write_text("slow\n", encoding="utf-8")
    pid_file = tmp_path / "pids.txt"
    job = _job(page, "import os, time\nopen('pids.txt', 'a').write(f'{os.getpid()}\\n')\ntime.sleep(60)")

    async def main() -> None:
        run = asyncio.ensure_future(DaskScheduler(local.scheduler_address).run([job], lambda j, r: None))
        deadline = time.monotonic() + timing.REACH
        while not pid_file.exists() and time.monotonic() < deadline:
            await asyncio.sleep(timing.POLL)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    started = time.monotonic()
    asyncio.run(main())
    assert pid_file.exists()
    assert _gone([int(p) for p in pid_file.read_text().split()], within=timing.CANCELLED_GONE)
    assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    assert time.monotonic() - started < 40


def test_a_session_whose_workers_die_is_retried_once_then_reported_as_a_crash(cluster, tmp_path):
    local, client = cluster
    page = tmp_path / "crash.rst"
    page.write_text("crash\n", encoding="utf-8")
    kill = KILL_WORKER + (
        # A daemon in a session of its own: it too must die with the worker.
        "import subprocess, sys\n"
        "d = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        "open('daemons.txt', 'a').write(f'{d.pid}\\n')\n"
        "open('pids.txt', 'a').write(f'{os.getpid()} {os.getppid()}\\n')\n"
        "open('workers.txt', 'a').write(f'{worker()}\\n')\n"
        "os.kill(worker(), signal.SIGKILL)"
    )
    workers = set(client.run(os.getpid).values())
    try:
        record = _run(local.scheduler_address, [_job(page, kill, "print('never')")])["crash"]
    finally:
        client.wait_for_workers(2, timeout=timing.CLUSTER)
    killed = [int(p) for p in (tmp_path / "workers.txt").read_text().split()]
    assert killed[0] in workers
    assert record.status == "crashed"
    first, second = record.cells
    assert first.status == "died"
    assert "died, 2 time(s)" in first.evalue
    assert second.status == "not-run"
    lines = [line.split() for line in (tmp_path / "pids.txt").read_text().splitlines()]
    assert 2 <= len(lines) <= 3  # a third start is cancelled, perhaps after its kernel started
    kernels, parents = [int(k) for k, _ in lines], {int(p) for _, p in lines}
    assert parents.isdisjoint(killed)  # forked kernels: the parent is the template
    # The kernels and the templates of the killed workers die with them.
    daemons = [int(p) for p in (tmp_path / "daemons.txt").read_text().split()]
    everything = kernels + sorted(parents) + daemons
    assert _gone(everything, within=timing.CANCELLED_GONE), _alive(everything)


def _alive(pids: list[int]) -> list[str]:
    """What still runs of ``pids``, for the failure message."""
    found = []
    for pid in pids:
        try:
            process = psutil.Process(pid)
            found.append(f"{pid} {process.status()} ppid={process.ppid()} {' '.join(process.cmdline())[:120]}")
        except psutil.Error:
            continue
    return found


def test_a_session_whose_worker_dies_once_is_run_again_elsewhere(cluster, tmp_path):
    local, client = cluster
    page = tmp_path / "once.rst"
    page.write_text("once\n", encoding="utf-8")
    kill_once = KILL_WORKER + (
        "if not os.path.exists('died'):\n"
        "    open('died', 'w').close()\n"
        "    os.kill(worker(), signal.SIGKILL)\n"
        "print('survived')"
    )
    try:
        record = _run(local.scheduler_address, [_job(page, kill_once)])["once"]
    finally:
        client.wait_for_workers(2, timeout=timing.CLUSTER)
    assert record.status == "ok"
    assert record.cells[0].outputs[0]["text"] == "survived\n"
    provenance = record.provenance.extra
    assert provenance["attempts"] == 2
    assert len(provenance["lost_workers"]) == 1
    assert provenance["worker"] not in provenance["lost_workers"]


def test_a_gpu_session_goes_to_a_worker_declaring_gpus_which_must_see_them(tmp_path, monkeypatch):
    from distributed import LocalCluster

    page = tmp_path / "gpu.rst"
    page.write_text("gpu\n", encoding="utf-8")
    # The worker is pinned to no GPU, so it sees none, whatever this machine has. It runs in
    # this process (no process of its own to start: the session fails before any kernel), and
    # reads this process's CUDA_VISIBLE_DEVICES, as a worker process reads its own.
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=False, host="127.0.0.1", protocol="tcp",
        dashboard_address="127.0.0.1:0", resources={"GPU": 1},
    ) as local:
        info = check_executor(local.scheduler_address, timeout=10)
        assert (info.gpus_per_worker, info.total_gpus) == (1, 1)
        record = _run(local.scheduler_address, [_job(page, "1", gpus=1)])["gpu"]
    assert record.status == "failed"
    assert "cannot lend GPUs: it declares GPU=1 but sees 0 GPU(s)" in record.message, record.message


def test_without_fork_kernels_a_worker_starts_a_fresh_kernel(cluster, tmp_path):
    local, client = cluster
    page = tmp_path / "fresh.rst"
    page.write_text("fresh\n", encoding="utf-8")
    record = _run(local.scheduler_address, [_job(page, "import os\nprint(os.getppid())")], fork=False)
    assert int(record["fresh"].cells[0].outputs[0]["text"]) in client.run(os.getpid).values()


def test_a_workers_secrets_reach_none_of_its_kernels(cluster, tmp_path):
    local, client = cluster
    client.run(lambda: os.environ.update(GITHUB_TOKEN="ghs_worker"))  # as a CI runner's worker has
    try:
        page = tmp_path / "secrets.rst"
        page.write_text("secrets\n", encoding="utf-8")
        code = 'import os\nprint(os.getppid(), "GITHUB_TOKEN" in os.environ, b"ghs_" in open("/proc/self/environ", "rb").read())'
        for fork in (True, False):
            record = _run(local.scheduler_address, [_job(page, code)], fork=fork)["secrets"]
            ppid, in_environ, at_start = record.cells[0].outputs[0]["text"].split()
            assert (in_environ, at_start) == ("False", "False"), fork
            parents = {t for ts in worker_templates(client).values() for t in ts} if fork else client.run(os.getpid).values()
            assert int(ppid) in parents, fork  # forked from a worker's template; or fresh
    finally:
        client.run(lambda: os.environ.pop("GITHUB_TOKEN", None))


@pytest.mark.parametrize("processes", [True, False], ids=["worker-process", "worker-in-this-process"])
def test_a_workers_templates_and_kernels_die_when_it_closes(tmp_path, processes):
    from distributed import Client, LocalCluster

    page = tmp_path / "idle.rst"
    page.write_text("idle\n", encoding="utf-8")
    # In this process, only the worker's close (its plugin's teardown) can end the template.
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=processes, host="127.0.0.1", protocol="tcp",
        dashboard_address="127.0.0.1:0",
    ) as local, Client(local, set_as_default=False) as client:
        # A daemon that leaves the kernel's session: it too must end with the worker.
        daemon = (
            "import os, subprocess, sys\n"
            "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
            "print(os.getppid(), p.pid)"
        )
        record = _run(local.scheduler_address, [_job(page, daemon)])["idle"]
        template, orphan = map(int, record.cells[0].outputs[0]["text"].split())
        (worker,) = client.run(os.getpid).values()
        assert worker_templates(client) == {next(iter(local.scheduler_info["workers"])): [template]}
        assert parent_of(template) == worker
    # The session's shutdown killed the daemon; closing the worker ends its template.
    assert _gone([orphan, template] + ([worker] if processes else []), within=timing.KILLED_WORKER_GONE)


class _FakeServer:
    """Records when templates import; the imports take ``delay`` seconds."""

    def __init__(self, log: list[str], delay: float = 0.3) -> None:
        self.log, self.delay, self.templates = log, delay, {}

    def prepare(self, framework: FrameworkSpec) -> None:
        self.log.append(f"import {framework.name}")
        self.templates[framework.name] = SimpleNamespace(process=SimpleNamespace(pid=-len(self.templates)))

    async def ready(self, framework: FrameworkSpec) -> bool:
        await asyncio.sleep(self.delay)
        self.log.append(f"ready {framework.name}")
        return True

    def manager(self, framework: FrameworkSpec) -> None:
        return None

    def close(self) -> None:
        self.log.append("closed")

    # The guard's part.
    def watch(self, pid: int) -> None:
        self.log.append(f"watch {pid}")

    unwatch = watch


def test_a_template_imports_only_while_none_of_the_workers_sessions_runs():
    import threading

    log: list[str] = []
    fake = _FakeServer(log)
    kernels = WorkerKernels(fake, fake)  # type: ignore[arg-type]
    alpha, beta = FrameworkSpec("alpha", "A", preload=("a",)), FrameworkSpec("beta", "B", preload=("b",))
    kernels.warm([alpha])
    assert log == ["import alpha", "watch 0", "ready alpha"]
    kernels.warm([alpha])  # once per worker
    assert log == ["import alpha", "watch 0", "ready alpha"]

    def session(name: str, framework: FrameworkSpec, hold: float) -> None:
        with kernels.session(framework, True, lambda: True):
            log.append(f"start {name}")
            time.sleep(hold)
            log.append(f"end {name}")

    first = threading.Thread(target=session, args=("one", alpha, 0.5))
    first.start()
    time.sleep(timing.SETTLE)
    # A second thread of the worker gets a beta session: its template waits for the first
    # session to end, and a third session waits for the import.
    second = threading.Thread(target=session, args=("two", beta, 0))
    second.start()
    time.sleep(timing.SETTLE)
    third = threading.Thread(target=session, args=("three", alpha, 0))
    third.start()
    for thread in (first, second, third):
        thread.join(10)
    assert log[3:8] == ["start one", "end one", "import beta", "watch -1", "ready beta"], log
    assert sorted(log[8:]) == sorted(["start two", "end two", "start three", "end three"]), log
    kernels.close()
    kernels.close()
    assert log.count("closed") == 2  # the server and the guard, once


def test_waiting_for_a_template_ends_when_the_task_is_cancelled():
    import threading

    from livecells.errors import TaskCancelledError

    fake = _FakeServer([], delay=0)
    kernels = WorkerKernels(fake, fake)  # type: ignore[arg-type]
    alpha, beta = FrameworkSpec("alpha", "A", preload=("a",)), FrameworkSpec("beta", "B", preload=("b",))
    wanted = threading.Event()
    wanted.set()
    with kernels.session(alpha, True, lambda: True):
        # beta's template cannot import while the alpha session runs; its task is cancelled.
        threading.Timer(0.3, wanted.clear).start()
        with pytest.raises(TaskCancelledError):
            kernels.warm([beta], wanted.is_set)
    kernels.warm([beta])  # started by the next one that asks
    assert sorted(fake.templates) == ["alpha", "beta"]
    kernels.close()


def test_a_worker_and_a_local_build_lend_gpus_by_one_rule():
    from livecells.errors import DeviceError
    from livecells.execute.devices import DevicePool
    from livecells.execute.worker import WorkerDevices

    gpus = [GPU(2, "G"), GPU(0, "G"), GPU(1, "G")]  # CUDA's order: the worker's own GPU first

    def worker_leases() -> list[tuple[GPU, ...]]:
        devices, seen = WorkerDevices(gpus), []
        with devices.lease(2) as first:
            seen.append(first.gpus)
            with pytest.raises(DeviceError, match=r"2 GPU\(s\) asked for, 1 free"), devices.lease(2):
                pass
        with devices.lease(1) as second, devices.lease(2) as third:
            seen += [second.gpus, third.gpus]
        return seen

    async def pool_leases() -> list[tuple[GPU, ...]]:
        pool, seen = DevicePool(gpus, jobs=2), []
        async with pool.lease(2) as first:
            seen.append(first.gpus)
        async with pool.lease(1) as second, pool.lease(2) as third:
            seen += [second.gpus, third.gpus]
        return seen

    expected = [(gpus[0], gpus[1]), (gpus[0],), (gpus[1], gpus[2])]
    assert worker_leases() == asyncio.run(pool_leases()) == expected


def test_what_a_worker_imports_needs_no_sphinx():
    import subprocess
    import sys

    code = (
        "import sys, livecells.execute.dask.worker\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'sphinx', 'docutils'}))"
    )
    env = dict(os.environ, PYTHONPATH=str(EXT))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


# -- stopping a cluster of `dask worker --no-nanny` processes -------------------------------------


class _ProcessCluster:
    """``dask scheduler`` and one ``dask worker --no-nanny`` on loopback, as processes of their own
    (each in a session of its own); :meth:`kill` ends them and every process they started."""

    def __init__(self, work: Path) -> None:
        import subprocess
        import sys

        self.work = work
        self.procs: list[Any] = []
        self.started: list[psutil.Process] = []
        scheduler_file = work / "scheduler.json"

        def start(args: list[str], log: str) -> Any:
            with open(work / log, "wb") as out:
                proc = subprocess.Popen(
                    [sys.executable, "-m", "dask", *args], stdout=out, stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            self.procs.append(proc)
            return proc

        self.scheduler = start(
            ["scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
             "--scheduler-file", str(scheduler_file)], "scheduler.log",
        )
        try:
            deadline = time.monotonic() + timing.REACH
            while not scheduler_file.exists():
                assert time.monotonic() < deadline and self.scheduler.poll() is None, (work / "scheduler.log").read_text()
                time.sleep(timing.POLL)
            self.address = json.loads(scheduler_file.read_text())["address"]
            # Two threads: the session's task and the stubborn one below run side by side.
            self.worker = start(
                ["worker", self.address, "--host", "127.0.0.1", "--no-nanny", "--nthreads", "2",
                 "--no-dashboard"], "worker.log",
            )
        except BaseException:
            self.kill()
            raise

    def remember_children(self) -> None:
        """Note every process the worker started so far (kernels, templates, its guard)."""
        for proc in self.procs:
            with contextlib.suppress(psutil.Error):
                self.started += psutil.Process(proc.pid).children(recursive=True)

    def kill(self) -> None:
        self.remember_children()
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, 9)
            proc.wait()
        for child in self.started:
            with contextlib.suppress(psutil.Error):
                child.kill()


def _busy_worker(cluster: _ProcessCluster, tmp_path: Path, stall: float) -> dict[str, int]:
    """Give the cluster's worker a livecells template, a session whose kernel sleeps, and an async
    task that takes ``stall`` seconds to end once cancelled, so that the worker's close waits for it
    (Dask gives async tasks that time) before it gets to its plugins. The pids of the template and
    the kernel; the file ``closing`` appears when the worker starts to close, ``cancelled-again``
    when the stubborn task is cancelled a second time."""
    from distributed import Client, fire_and_forget

    from livecells.execute.dask.cluster import start_kernels
    from livecells.execute.dask.worker import run_on_worker

    marks = tmp_path

    async def stubborn() -> None:
        try:
            await asyncio.sleep(600)
        except asyncio.CancelledError:
            (marks / "closing").touch()
            try:
                await asyncio.sleep(stall)
            except asyncio.CancelledError:
                (marks / "cancelled-again").touch()
            raise

    page = tmp_path / "sleeper.rst"
    page.write_text("sleeper\n", encoding="utf-8")
    job = _job(page, "import os, time\nopen('kernel.pid', 'w').write(str(os.getpid()))\ntime.sleep(600)")
    with Client(cluster.address, set_as_default=False, timeout=timing.CLUSTER) as client:
        client.wait_for_workers(1, timeout=timing.CLUSTER)
        assert start_kernels(client, [job.framework]) is None
        # Both tasks stay on the worker when this client leaves.
        fire_and_forget(client.submit(run_on_worker, job, "sleeper", "livecells-stop-test", key="sleeper", pure=False))
        fire_and_forget(client.submit(stubborn, key="stubborn", pure=False))
        deadline = time.monotonic() + timing.REACH
        while not (tmp_path / "kernel.pid").exists():
            assert time.monotonic() < deadline, (cluster.work / "worker.log").read_text()[-3000:]
            time.sleep(timing.POLL)
        (template,) = next(iter(worker_templates(client).values()))
    cluster.remember_children()
    kernel = int((tmp_path / "kernel.pid").read_text())
    assert parent_of(kernel) == template and parent_of(template) == cluster.worker.pid
    return {"template": template, "kernel": kernel}


def _wait_for(path: Path, within: float) -> bool:
    deadline = time.monotonic() + within
    while not path.exists() and time.monotonic() < deadline:
        time.sleep(timing.POLL)
    return path.exists()


def _exits(proc: Any, within: float) -> bool:
    import subprocess

    try:
        proc.wait(within)
    except subprocess.TimeoutExpired:
        return False
    return True


@pytest.mark.process
def test_a_closing_workers_kernels_end_even_if_its_close_never_reaches_the_plugins(tmp_path):
    """The report's hang, made certain: SIGTERM to the scheduler and to a ``--no-nanny`` worker
    at once, while the worker's close (the scheduler's order) is under way, cancels that close
    half-way and the worker never exits (Dask's own: docs/cluster.rst). Its kernel and template
    must still end as soon as it starts to close; a second SIGTERM then ends the worker."""
    cluster = _ProcessCluster(tmp_path)
    try:
        pids = _busy_worker(cluster, tmp_path, stall=60)
        cluster.scheduler.send_signal(15)
        assert _wait_for(tmp_path / "closing", within=timing.REACH)  # the worker is closing
        cluster.worker.send_signal(15)
        assert _gone([pids["kernel"], pids["template"]], within=timing.CLOSING_WORKER_GONE), "the closing worker's kernels live on"
        assert _exits(cluster.scheduler, within=timing.DASK_EXIT)
        if _wait_for(tmp_path / "cancelled-again", within=timing.MAY_HAPPEN):  # the worker's loop is shutting down
            cluster.worker.send_signal(15)  # Dask put back the default action: this one ends it
        assert _exits(cluster.worker, within=timing.DASK_EXIT)
        assert _gone([p.pid for p in cluster.started], within=timing.CLOSING_WORKER_GONE)
    finally:
        cluster.kill()


@pytest.mark.process
@pytest.mark.parametrize("order", ["workers-first", "client-shutdown"])
def test_a_cluster_stopped_in_the_documented_order_ends_with_its_kernels(tmp_path, order):
    """docs/cluster.rst's ways to stop a cluster of ``--no-nanny`` workers: SIGTERM to the workers,
    then (once they have exited) to the scheduler; or ``Client.shutdown()``. Every process ends,
    kernels and templates included, also while a slow task holds the worker's close up."""
    cluster = _ProcessCluster(tmp_path)
    try:
        pids = _busy_worker(cluster, tmp_path, stall=3)
        if order == "workers-first":
            cluster.worker.send_signal(15)
            assert _exits(cluster.worker, within=timing.WORKER_EXIT)
            cluster.scheduler.send_signal(15)
        else:
            from distributed import Client

            with Client(cluster.address, set_as_default=False, timeout=timing.CLUSTER) as client:
                client.shutdown()
        assert _exits(cluster.worker, within=timing.WORKER_EXIT) and _exits(cluster.scheduler, within=timing.DASK_EXIT)
        assert _gone([pids["kernel"], pids["template"], *(p.pid for p in cluster.started)], within=timing.CLOSING_WORKER_GONE)
    finally:
        cluster.kill()
