"""Execute stage on a Dask cluster, the client's side: each session is one Dask task that runs
its kernel on a worker.

:class:`DaskScheduler` is the :class:`~.scheduler.Scheduler` that ``livecells_executor =
"tcp://host:port"`` (or a function returning a ``distributed.Client``) selects. Each job becomes
one task, :func:`.dask_worker.run_on_worker`, which runs the session's kernel on the worker in the
page's folder (the source tree must be reachable there at the same path; the task checks), runs
the cells with :func:`~.scheduler.run_session` and returns the session's record. Records come
back to the Sphinx process, which alone writes the store (through ``on_done``).

Warm kernels: when livecells connects, it registers :class:`.dask_worker.KernelsPlugin` on the
cluster, so that every worker keeps a template per framework that has imported it, and forks each
session's kernel from it (:mod:`.forkserver`), as a local build does; the templates start while
Sphinx reads the pages, and live as long as the worker (``livecells_fork_kernels = False``: fresh
kernels).

Devices: a job leasing GPUs asks for the worker resource ``GPU=n``; the worker lends it that many
of its own GPUs (those ``CUDA_VISIBLE_DEVICES`` pins for the worker process). CPU jobs ask for a
``livecells-slot`` when workers declare one, else rely on workers started with ``--nthreads 1``.

Faults: a session whose worker dies is started once more elsewhere; if that worker dies too, the
session is reported as a crash. Cancelling :meth:`DaskScheduler.run` (Ctrl-C) cancels the
cluster's tasks, and a cancelled task stops its kernel.

Its size (about 500 lines) is the client side of one protocol: connecting and checking the
cluster, one task per session with its resources, retries after a lost worker, cancellation,
and the records of sessions that could not run; the worker side is :mod:`.dask_worker`.
"""

from __future__ import annotations

import asyncio
import re
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from dataclasses import dataclass, replace
from typing import Any

from livecells.execute.devices import Lease
from livecells.execute.scheduler import OnDone, OnStart, SessionJob, session_record
from livecells.model.frameworks import FrameworkSpec
from livecells.model.records import CellRecord, Probe, SessionRecord
from livecells.model.vocabulary import CellStatus

GPU_RESOURCE = "GPU"
#: Declared by workers that have more threads than CPU sessions they should run at once.
SLOT_RESOURCE = "livecells-slot"
#: Starts of one session: the first, and one more after its worker died.
MAX_ATTEMPTS = 2
#: How often a running task looks whether it was cancelled (seconds).
WATCH_INTERVAL = 0.5
#: The name of the worker plugin that keeps each worker's templates.
PLUGIN_NAME = "livecells-kernels"

Executor = str | Callable[[], Any]


class ExecutorProblem(RuntimeError):
    """The cluster cannot be used: ``distributed`` is missing, the scheduler cannot be reached, or
    it has no workers. What :func:`check_executor` and :meth:`DaskScheduler.run` raise, with a
    message that names ``livecells_executor``; the build turns it into Sphinx's errors."""


def _distributed() -> Any:
    """The ``distributed`` package (importing it also loads its part of Dask's configuration)."""
    try:
        import distributed
    except ImportError:
        raise ExecutorProblem(
            "running sessions on a Dask cluster needs dask.distributed: "
            "pip install 'livecells[dask]'"
        ) from None
    return distributed


@dataclass(frozen=True)
class ClusterInfo:
    """What the scheduler says about its workers when livecells connects."""

    address: str
    workers: int
    threads: int
    #: The most GPUs any one worker declares (``--resources GPU=k``): the most a session can get.
    gpus_per_worker: int
    total_gpus: int
    #: Whether workers declare ``livecells-slot`` (then each CPU session takes one).
    slots: bool
    #: Set-ups that will give noisy timings, for the build to warn about.
    notes: tuple[str, ...] = ()

    def describe(self) -> str:
        gpus = f", {self.total_gpus} GPU(s)" if self.total_gpus else ", no GPU resources"
        return (
            f"Dask cluster at {self.address}: {self.workers} worker(s), "
            f"{self.threads} thread(s){gpus}"
        )


def connect_timeout() -> float:
    """Dask's own connection timeout (``distributed.comm.timeouts.connect``), in seconds."""
    _distributed()
    import dask
    from dask.utils import parse_timedelta

    return float(parse_timedelta(dask.config.get("distributed.comm.timeouts.connect"), "s"))


#: Seconds to wait for the scheduler's port to answer before Dask's own (longer) handshake.
PROBE_TIMEOUT = 5.0
ADDRESS = re.compile(r"^(?:(?P<scheme>tcp|tls|ws|wss)://)?(?P<host>\[[^\]]+\]|[^:/\[\]]+):(?P<port>\d+)/?$")


def _probe_address(address: str, timeout: float) -> None:
    """Fail within ``timeout`` when nothing answers at a ``tcp://host:port`` address.

    Dask retries a refused connection until its connect timeout (30 s by default, and the wait
    for workers after it); a wrong address or a cluster that is down is said at once instead.
    Addresses of other forms are left to Dask.
    """
    match = ADDRESS.match(address.strip())
    if match is None:
        return
    host = match.group("host").strip("[]")
    try:
        with socket.create_connection((host, int(match.group("port"))), timeout=timeout):
            pass
    except OSError as err:
        timed_out = isinstance(err, (socket.timeout, TimeoutError))
        why = f"no answer within {timeout:g} s" if timed_out else (err.strerror or str(err))
        raise ExecutorProblem(f"the Dask scheduler at {address} cannot be reached ({why})") from None


def connect(executor: Executor, timeout: float) -> tuple[Any, bool]:
    """A client of the cluster, and whether livecells owns it (and so closes it)."""
    Client = _distributed().Client  # noqa: N806

    if callable(executor):
        try:
            client = executor()
        except Exception as err:  # noqa: BLE001 - the user's factory: any failure is reported
            raise ExecutorProblem(f"the factory failed: {type(err).__name__}: {err}") from None
        if not isinstance(client, Client):
            raise ExecutorProblem(
                f"the factory returned {type(client).__name__}, not a distributed.Client"
            )
        return client, False
    _probe_address(executor, min(timeout, PROBE_TIMEOUT))
    try:
        client = Client(executor, timeout=timeout, set_as_default=False)
    except Exception as err:  # noqa: BLE001 - OSError, TimeoutError, ValueError for a bad address
        raise ExecutorProblem(
            f"the Dask scheduler at {executor} cannot be reached: {err or type(err).__name__}"
        ) from None
    return client, True


def cluster_info(client: Any, timeout: float) -> ClusterInfo:
    """Wait (up to ``timeout``) for a worker, then describe the cluster's workers."""
    address = client.scheduler.address
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception:  # noqa: BLE001 - TimeoutError; older versions raise others
        raise ExecutorProblem(
            f"the Dask scheduler at {address} has no workers (waited {timeout:g} s)"
        ) from None
    try:
        info = client.scheduler_info(n_workers=-1)
    except TypeError:  # distributed before 2025 always lists every worker
        info = client.scheduler_info()
    workers = info.get("workers", {})
    gpus = [int(w.get("resources", {}).get(GPU_RESOURCE, 0)) for w in workers.values()]
    slots = any(SLOT_RESOURCE in w.get("resources", {}) for w in workers.values())
    notes = []
    for name, worker in sorted(workers.items()):
        threads = int(worker.get("nthreads", 1))
        resources = worker.get("resources", {})
        if threads > 1 and SLOT_RESOURCE not in resources:
            notes.append(
                f"worker {name} has {threads} threads and no {SLOT_RESOURCE} resource: up to "
                f"{threads} CPU sessions may share it, and their timings will be noisy"
            )
    return ClusterInfo(
        address=address,
        workers=len(workers),
        threads=sum(int(w.get("nthreads", 1)) for w in workers.values()),
        gpus_per_worker=max(gpus, default=0),
        total_gpus=sum(gpus),
        slots=slots,
        notes=tuple(notes),
    )


def describe_executor(executor: Executor) -> str:
    """How messages name the executor: the address, or the factory's name."""
    if callable(executor):
        return f"{getattr(executor, '__qualname__', type(executor).__name__)}()"
    return repr(executor)


def check_executor(
    executor: Executor, timeout: float | None = None, *, warm: Sequence[FrameworkSpec] = ()
) -> ClusterInfo:
    """Connect once and describe the cluster; an unreachable one is an :class:`ExecutorProblem`.

    Meant for ``builder-inited``, so that a wrong address stops the build before any page is read.
    With ``warm``, the workers start those frameworks' templates meanwhile (:func:`start_kernels`,
    in a thread of its own: the build goes on reading while the workers import).
    """
    try:
        timeout = connect_timeout() if timeout is None else timeout
        client, owned = connect(executor, timeout)
    except ExecutorProblem as err:
        raise _named(executor, err) from None
    try:
        info = cluster_info(client, timeout)
    except ExecutorProblem as err:
        if owned:
            client.close()
        raise _named(executor, err) from None
    if not warm:
        if owned:
            client.close()
        return info

    def register() -> None:
        try:
            start_kernels(client, warm)  # failures come back when the sessions are run
        finally:
            if owned:
                client.close()

    threading.Thread(target=register, name="livecells-warm-workers", daemon=True).start()
    return info


def _named(executor: Executor, problem: ExecutorProblem) -> ExecutorProblem:
    return ExecutorProblem(f"livecells_executor = {describe_executor(executor)}: {problem}")


def start_kernels(client: Any, frameworks: Sequence[FrameworkSpec]) -> str | None:
    """Have every worker (also those that join later) keep warm kernels, and start the templates
    of ``frameworks`` now, in the background; why not, if it failed (sessions then start their
    own templates, or fresh kernels)."""
    from livecells.execute.dask_worker import KernelsPlugin

    try:
        client.register_plugin(KernelsPlugin(frameworks), name=PLUGIN_NAME)
    except Exception as err:  # noqa: BLE001 - workers without livecells, an old distributed, ...
        return f"the workers could not start warm kernels: {type(err).__name__}: {err}"
    return None


def job_resources(job: SessionJob, slots: bool) -> dict[str, float] | None:
    """The worker resources one session holds while it runs."""
    if job.gpus:
        return {GPU_RESOURCE: job.gpus}
    return {SLOT_RESOURCE: 1} if slots else None


def _task_key(job: SessionJob) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{job.plan.docname}-{job.plan.framework}")
    return f"livecells-{name}-{uuid.uuid4().hex[:12]}"


def _results(job: SessionJob, first: CellRecord | None, reason: str) -> dict[int, CellRecord]:
    results = {
        cell.index: CellRecord(
            status=CellStatus.NOT_RUN, error={"ename": "NotRun", "evalue": reason, "traceback": []}
        )
        for cell in job.plan.cells
    }
    if first is not None and job.plan.cells:
        results[job.plan.cells[0].index] = first
    return results


def failed_record(job: SessionJob, message: str, duration: float = 0.0) -> SessionRecord:
    """The record of a session that could not run at all (status ``failed``)."""
    record = session_record(job, Lease(()), _results(job, None, message), Probe(), message, duration)
    record.provenance = replace(record.provenance, device="", host="", device_kind="")
    return record


def crash_record(
    job: SessionJob, lost: Sequence[dict[str, str]], duration: float
) -> SessionRecord:
    """A session whose workers died on every attempt: reported like a dying kernel."""
    where = " and ".join(f"{w['worker']} ({w['host']})" for w in lost)
    died = CellRecord(
        status=CellStatus.DIED,
        error={
            "ename": "DeadKernelError",
            "evalue": f"the Dask worker running this session died, {len(lost)} time(s) "
            f"(on {where}); it is not run again",
            "traceback": [],
        },
    )
    results = _results(job, died, "not run: the worker running the session died")
    record = session_record(job, Lease(()), results, Probe(), None, duration)
    last = lost[-1] if lost else {"worker": "", "host": ""}
    record.provenance = replace(record.provenance, device="", device_kind="", host=last["host"])
    record.provenance.extra.update(
        worker=last["worker"], attempts=len(lost), lost_workers=[w["worker"] for w in lost]
    )
    return record


class DaskScheduler:
    """Runs sessions as Dask tasks on the workers of a cluster; see the module's docstring."""

    def __init__(
        self,
        executor: Executor,
        jobs: int | str = "auto",
        *,
        timeout: float | None = None,
        fork: bool = True,
    ) -> None:
        self.executor = executor
        #: The most sessions submitted at once ('auto': all; the cluster's resources bound them).
        self.jobs = jobs if isinstance(jobs, int) else None
        self.timeout = timeout
        #: Kernels forked from each worker's templates (livecells_fork_kernels), else fresh ones.
        self.fork = fork

    async def run(
        self, jobs: Sequence[SessionJob], on_done: OnDone, on_start: OnStart | None = None
    ) -> None:
        if not jobs:
            return
        try:
            timeout = connect_timeout() if self.timeout is None else self.timeout
            client, owned = await asyncio.to_thread(connect, self.executor, timeout)
        except ExecutorProblem as err:
            raise _named(self.executor, err) from None
        plugin: asyncio.Future[str | None] | None = None
        try:
            info = await asyncio.to_thread(cluster_info, client, timeout)
            if self.fork:
                # Again (workers may have joined, or the build did not connect before), beside
                # the sessions: a task whose worker has no template yet starts it itself.
                frameworks = {job.framework.name: job.framework for job in jobs}
                plugin = asyncio.ensure_future(
                    asyncio.to_thread(start_kernels, client, list(frameworks.values()))
                )
            batch = _ClusterRun(client, info, asyncio.get_running_loop(), on_start, self.fork)
            await batch.run(jobs, on_done, self.jobs)
        except ExecutorProblem as err:
            raise _named(self.executor, err) from None
        finally:
            if plugin is not None:
                with suppress(Exception):
                    await plugin
            if owned:
                client.close()


class _ClusterRun:
    """One :meth:`DaskScheduler.run`: its tasks, their start events, and their outcomes."""

    def __init__(
        self,
        client: Any,
        info: ClusterInfo,
        loop: asyncio.AbstractEventLoop,
        on_start: OnStart | None,
        fork: bool = True,
    ) -> None:
        self.fork = fork
        self.client = client
        self.info = info
        self.loop = loop
        self.on_start = on_start
        self.topic = f"livecells-start-{uuid.uuid4().hex}"
        self.jobs: dict[str, SessionJob] = {}
        self.futures: dict[str, Any] = {}
        self.done: dict[str, asyncio.Future[None]] = {}
        self.starts: dict[str, list[dict[str, str]]] = {}
        self.announced: set[str] = set()
        self.gave_up: set[str] = set()

    async def run(self, jobs: Sequence[SessionJob], on_done: OnDone, at_once: int | None) -> None:
        limit = asyncio.Semaphore(at_once) if at_once else None
        self.client.subscribe_topic(self.topic, self._on_event)
        tasks = [asyncio.ensure_future(self._one(job, on_done, limit)) for job in jobs]
        try:
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            pending = [f for f in self.futures.values() if not f.done()]
            if pending:
                with suppress(Exception):
                    self.client.cancel(pending, force=True)
            with suppress(Exception):
                self.client.unsubscribe_topic(self.topic)

    async def _one(self, job: SessionJob, on_done: OnDone, limit: asyncio.Semaphore | None) -> None:
        token = _task_key(job)
        self.jobs[token] = job
        async with limit if limit is not None else nullcontext():
            record = await self._execute(job, token)
        self._announce(token)
        on_done(job, record)

    async def _execute(self, job: SessionJob, token: str) -> SessionRecord:
        started = time.perf_counter()
        if job.gpus > self.info.gpus_per_worker:
            return failed_record(
                job,
                f"no worker of the Dask cluster declares {job.gpus} GPU(s) "
                f"(start workers with --resources {GPU_RESOURCE}=N)",
            )
        from livecells.execute.dask_worker import run_on_worker

        self.done[token] = self.loop.create_future()
        future = self.client.submit(
            run_on_worker,
            job,
            token,
            self.topic,
            self.fork,
            key=token,
            resources=job_resources(job, self.info.slots),
            retries=1,
            priority=job.weight,
            pure=False,
        )
        self.futures[token] = future
        future.add_done_callback(lambda _: self._threadsafe(self._finish, token))
        await self.done[token]
        duration = time.perf_counter() - started
        if token in self.gave_up:
            return crash_record(job, self.starts[token][:MAX_ATTEMPTS], duration)
        lost = self.starts.get(token, [])[:-1]
        record = await self._outcome(job, token, future, duration)
        if lost:
            record.provenance.extra.update(attempts=len(lost) + 1, lost_workers=[w["worker"] for w in lost])
        return record

    async def _outcome(
        self, job: SessionJob, token: str, future: Any, duration: float
    ) -> SessionRecord:
        """The record a finished task returned, or one that says why there is none."""
        from distributed import KilledWorker

        status = future.status
        if status == "finished":
            try:
                return await asyncio.to_thread(future.result, 60)  # type: ignore[no-any-return]
            except Exception as err:  # noqa: BLE001 - the data could not be fetched
                message = f"its result could not be fetched from the cluster: {err}"
                return failed_record(job, message, duration)
        if status == "error":
            error = await asyncio.to_thread(future.exception, 60)
            if isinstance(error, KilledWorker):
                lost = self.starts.get(token) or [{"worker": "?", "host": "?"}]
                return crash_record(job, lost, duration)
            message = f"the Dask task failed: {type(error).__name__}: {error}"
            return failed_record(job, message, duration)
        message = f"the Dask task ended as {status!r} (was the scheduler lost?)"
        return failed_record(job, message, duration)

    # -- events from the client's thread --------------------------------------------------------

    def _threadsafe(self, callback: Callable[..., None], *args: Any) -> None:
        with suppress(RuntimeError):  # the loop is closed: the run was cancelled
            self.loop.call_soon_threadsafe(callback, *args)

    def _on_event(self, event: tuple[float, Any]) -> None:
        _, message = event
        if isinstance(message, dict) and "token" in message:
            self._threadsafe(self._started, message)

    def _started(self, message: dict[str, str]) -> None:
        token = message["token"]
        if token not in self.jobs or token in self.gave_up:
            return
        attempts = self.starts.setdefault(token, [])
        attempts.append({"worker": str(message.get("worker")), "host": str(message.get("host"))})
        self._announce(token)
        if len(attempts) > MAX_ATTEMPTS:
            # Both workers died under it: stop here instead of letting Dask kill a third one.
            self.gave_up.add(token)
            future = self.futures.get(token)
            if future is not None:
                self.loop.run_in_executor(None, lambda: future.cancel(force=True))
            self._finish(token)

    def _finish(self, token: str) -> None:
        done = self.done.get(token)
        if done is not None and not done.done():
            done.set_result(None)

    def _announce(self, token: str) -> None:
        if token in self.announced:
            return
        self.announced.add(token)
        if self.on_start is not None:
            self.on_start(self.jobs[token])
