"""Sessions on a Dask cluster: a LocalCluster of two worker processes on loopback, real kernels."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import socket
import time
from io import StringIO
from pathlib import Path
from typing import Any

import psutil
import pytest
from sphinx.errors import ConfigError, SphinxError
from sphinx.testing.util import SphinxTestApp

from conftest import kernel_processes
from helpers import build_site, cells, outputs, soup

distributed = pytest.importorskip("distributed")

from livecells.model.frameworks import FrameworkSpec  # noqa: E402
from livecells.config import read_config  # noqa: E402
from livecells.execute.dask import DaskScheduler, check_executor, own_gpus  # noqa: E402
from livecells.execute.devices import GPU  # noqa: E402
from livecells.execute.scheduler import SessionJob  # noqa: E402
from livecells.model.plans import CellPlan, PageSettings, SessionPlan  # noqa: E402

PAGES = ["index", "one", "sub/two"]


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
    return {
        "app": app,
        "src": src,
        "pages": {name: soup(app.outdir / f"{name}.html") for name in PAGES},
        "warnings": warnings,
        "worker_pids": worker_pids,
        "kernels_left": kernel_processes(),
    }


def test_every_session_ran_in_a_kernel_started_by_a_worker(built):
    seen: dict[str, int] = {}
    for name, page in built["pages"].items():
        for cell in cells(page):
            for label, ppid in re.findall(r"page (\S+) ppid (\d+)", outputs(cell)):
                seen[label] = int(ppid)
    assert set(seen) == {"index", "one-alpha", "one-beta", "two"}
    workers = set(built["worker_pids"].values())
    assert set(seen.values()) <= workers
    # Four sessions over two free single-threaded workers: both take some.
    assert set(seen.values()) == workers


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
    with pytest.raises(ConfigError, match="cannot be reached"):
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
    config = read_config({"executor": lambda: client}, warnings.append)
    assert callable(config.executor) and not warnings
    info = check_executor(config.executor, timeout=10)
    assert (info.workers, info.threads, info.gpus_per_worker, info.slots) == (2, 2, 0, False)
    with pytest.raises(ConfigError, match="not a distributed.Client"):
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


def _run(executor: str, jobs: list[SessionJob]) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}

    def on_done(job: SessionJob, record: dict[str, Any]) -> None:
        records[job.plan.docname] = record

    asyncio.run(DaskScheduler(executor, timeout=10).run(jobs, on_done))
    return records


def _gone(pids: list[int], within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        alive = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
        if not alive:
            return True
        time.sleep(0.2)
    return False


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
        deadline = time.monotonic() + 60
        while not pid_file.exists() and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run

    started = time.monotonic()
    asyncio.run(main())
    assert pid_file.exists()
    assert _gone([int(p) for p in pid_file.read_text().split()], within=10)
    assert client.run_on_scheduler(lambda dask_scheduler: len(dask_scheduler.tasks)) == 0
    assert time.monotonic() - started < 40


def test_a_session_whose_workers_die_is_retried_once_then_reported_as_a_crash(cluster, tmp_path):
    local, client = cluster
    page = tmp_path / "crash.rst"
    page.write_text("crash\n", encoding="utf-8")
    kill = "import os, signal\nopen('pids.txt', 'a').write(f'{os.getpid()}\\n')\nos.kill(os.getppid(), signal.SIGKILL)"
    try:
        record = _run(local.scheduler_address, [_job(page, kill, "print('never')")])["crash"]
    finally:
        client.wait_for_workers(2, timeout=60)
    assert record.status == "crashed"
    first, second = record.cells
    assert first.status == "died"
    assert "died, 2 time(s)" in first.evalue
    assert second.status == "not-run"
    pids = [int(p) for p in (tmp_path / "pids.txt").read_text().split()]
    assert 2 <= len(pids) <= 3  # a third start is cancelled, perhaps after its kernel started
    assert _gone(pids, within=10)  # orphaned kernels notice their worker is gone and exit


def test_a_session_whose_worker_dies_once_is_run_again_elsewhere(cluster, tmp_path):
    local, client = cluster
    page = tmp_path / "once.rst"
    page.write_text("once\n", encoding="utf-8")
    kill_once = (
        "import os, signal\n"
        "if not os.path.exists('died'):\n"
        "    open('died', 'w').close()\n"
        "    os.kill(os.getppid(), signal.SIGKILL)\n"
        "print('survived')"
    )
    try:
        record = _run(local.scheduler_address, [_job(page, kill_once)])["once"]
    finally:
        client.wait_for_workers(2, timeout=60)
    assert record.status == "ok"
    assert record.cells[0].outputs[0]["text"] == "survived\n"
    provenance = record.provenance.extra
    assert provenance["attempts"] == 2
    assert len(provenance["lost_workers"]) == 1
    assert provenance["worker"] not in provenance["lost_workers"]


def test_a_gpu_session_goes_to_a_worker_declaring_gpus_which_must_see_them(tmp_path):
    from distributed import LocalCluster

    page = tmp_path / "gpu.rst"
    page.write_text("gpu\n", encoding="utf-8")
    # The worker is pinned to no GPU, so it sees none, whatever this machine has.
    with LocalCluster(
        n_workers=1, threads_per_worker=1, processes=True, host="127.0.0.1",
        dashboard_address="127.0.0.1:0", resources={"GPU": 1}, env={"CUDA_VISIBLE_DEVICES": ""},
    ) as local:
        info = check_executor(local.scheduler_address, timeout=10)
        assert (info.gpus_per_worker, info.total_gpus) == (1, 1)
        record = _run(local.scheduler_address, [_job(page, "1", gpus=1)])["gpu"]
    assert record.status == "failed"
    assert "cannot lend GPUs: it declares GPU=1 but sees 0 GPU(s)" in record.message, record.message
