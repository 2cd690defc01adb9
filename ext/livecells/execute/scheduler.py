"""Execute stage: run the sessions that are left after the store was consulted.

A :class:`Scheduler` takes :class:`SessionJob` s and reports each finished one as a plain-data
record (the same shape the store keeps). :class:`LocalScheduler` runs them on this machine over
device leases: one executing session per GPU, or one at a time on CPU, so that timings stay
honest; the longest sessions go first (:func:`run_order`). Nothing here knows Sphinx.
"""

from __future__ import annotations

import asyncio
import contextvars
import datetime as dt
import functools
import os
import socket
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Protocol

from jupyter_client.kernelspec import NoSuchKernel

from livecells._version import __version__
from livecells.execute.devices import GPU, DevicePool, Lease, cpu_name
from livecells.execute.kernels.session import KernelSession
from livecells.model.environ import DEFAULT_ENV_DROP
from livecells.model.frameworks import FrameworkSpec
from livecells.model.plans import CellPlan, SessionPlan
from livecells.model.records import CellRecord, Probe, Provenance, SessionRecord, session_status
from livecells.model.timings import FLOOR_CODE, FLOOR_SAMPLES, FLOOR_WARMUP, median
from livecells.model.vocabulary import CellStatus

if TYPE_CHECKING:
    from livecells.execute.forkserver.server import ForkServer
    from livecells.kernel_side.reaper import Guard


@dataclass(frozen=True)
class SessionJob:
    """One session to run, with everything the runner needs and nothing of Sphinx."""

    plan: SessionPlan
    framework: FrameworkSpec
    key: str
    environment: str  # the environment fingerprint's hash
    gpus: int  # devices to lease
    default_timeout: float
    output_limit: int
    log_path: str | None = None
    run_id: str = ""  # the build's: every record says which build made it
    env_drop: tuple[str, ...] = DEFAULT_ENV_DROP  # names of variables kept from the kernel
    #: Seconds the session took the last time it ran (its stored record, whatever its key);
    #: None: no history (a new page or framework, or its last try could not run).
    estimate: float | None = None


def run_order(jobs: Sequence[SessionJob]) -> list[SessionJob]:
    """The order sessions start in, for every scheduler: longest first by their stored durations
    (LPT: with n slots the build ends within 4/3 of the best order's makespan), and sessions
    without history before all of them, most cells first.

    An unknown session may be the longest of the book: started last, it would stretch the build
    by its whole length, while started first a short one costs the others only its own length.
    Equal durations: more cells first; full ties keep document order.
    """
    return sorted(
        jobs, key=lambda j: (j.estimate is not None, -(j.estimate or 0.0), -len(j.plan.cells))
    )


OnDone = Callable[[SessionJob, SessionRecord], None]
OnStart = Callable[[SessionJob], None]
#: Told ``(job, n, m)`` when a session sends its cell n of m, in the build's process (the
#: progress line); set by the build around a scheduler's run, unset on a cluster's workers.
OnCell = Callable[[SessionJob, int, int], None]
cell_listener: contextvars.ContextVar[OnCell | None] = contextvars.ContextVar(
    "livecells_cell_listener", default=None
)


class Scheduler(Protocol):
    """Runs jobs and hands each finished job's record to ``on_done`` as soon as it is ready."""

    async def run(
        self, jobs: Sequence[SessionJob], on_done: OnDone, on_start: OnStart | None = None
    ) -> None: ...


class LocalScheduler:
    """Runs sessions in local kernels, each holding an exclusive device lease.

    With ``fork`` (the default), kernels are forked from a template process per framework that
    has already imported it (:mod:`livecells.execute.forkserver.server`): the imports happen
    once per build, in parallel,
    and before the first session is timed, never while one is.

    When sessions run one at a time (``jobs`` 1, as on a CPU machine), the kernels of the next
    ``prestart`` CPU sessions are started together, in parallel, in the gap before a session's
    first cell: kernel start-up uses every core, and nothing runs beside a timed cell (an idle
    kernel waits in ``poll``). Default: the number of cores, at most 4; 1 turns it off.
    """

    def __init__(
        self,
        gpus: Sequence[GPU],
        jobs: int,
        *,
        fork_server: ForkServer | None = None,
        guard: Guard | None = None,
        prestart: int | None = None,
        session_class: Callable[..., KernelSession] = KernelSession,
    ) -> None:
        self.pool = DevicePool(gpus, jobs)
        self.session_class = session_class
        self.prestart = max(1, min(os.cpu_count() or 1, 4) if prestart is None else prestart)
        #: Owned by the build (it may have started templates while Sphinx read the pages).
        self.fork_server = fork_server
        #: Owned by the build: kills the sessions' processes if the build dies (see .reaper).
        self.guard = guard

    async def run(
        self, jobs: Sequence[SessionJob], on_done: OnDone, on_start: OnStart | None = None
    ) -> None:
        ordered = run_order(jobs)
        server = self.fork_server
        factory: Callable[..., KernelSession] = functools.partial(self.session_class, guard=self.guard)
        if server is not None:
            factory = functools.partial(factory, manager_factory=server.manager)
        tasks: list[asyncio.Future[None]] = []
        ahead = _Prestarts(ordered, factory, self.prestart if self.pool.jobs == 1 else 1)

        async def one(job: SessionJob) -> None:
            async with self.pool.lease(job.gpus) as lease:
                if on_start is not None:
                    on_start(job)
                kernel = await ahead.take(job, lease)
                record = await run_session(job, lease, session_factory=factory, kernel=kernel)
            on_done(job, record)

        try:
            if server is not None:
                frameworks = {job.framework.name: job.framework for job in ordered}
                await asyncio.gather(*(server.ready(fw) for fw in frameworks.values()))
            tasks = [asyncio.ensure_future(one(job)) for job in ordered]
            await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await ahead.close()


class _Prestarts:
    """Kernels started ahead of their sessions, a batch at a time, only while the one session
    that may run (``size`` > 1 only when sessions run one at a time) has not begun its cells.

    Only sessions that lease no GPU are started ahead: their devices are known (none).
    """

    def __init__(
        self, jobs: Sequence[SessionJob], factory: Callable[..., KernelSession], size: int
    ) -> None:
        self.pending = {id(job): job for job in jobs}  # in the scheduler's order
        self.factory = factory
        self.size = size
        self.started: dict[int, asyncio.Task[KernelSession]] = {}

    async def take(self, job: SessionJob, lease: Lease) -> asyncio.Task[KernelSession] | None:
        """The job's kernel (being) started, or None: the session starts its own."""
        self.pending.pop(id(job), None)
        task = self.started.pop(id(job), None)
        if task is None and (self.size <= 1 or job.gpus or lease.gpus):
            return None
        if task is None:
            batch = [job] + [
                other for key, other in self.pending.items()
                if not other.gpus and key not in self.started
            ][: self.size - 1]
            tasks = [
                asyncio.ensure_future(start_session(other, Lease(()), self.factory))
                for other in batch
            ]
            task = tasks[0]
            self.started.update((id(other), t) for other, t in zip(batch[1:], tasks[1:]))
            # Every kernel of the batch is ready (idle) before this session's first cell.
            await asyncio.wait(tasks)
        return task

    async def close(self) -> None:
        """Shut down the kernels started for sessions that never ran (cancelled builds)."""
        tasks, self.started = list(self.started.values()), {}
        for task in tasks:
            task.cancel()
        for result in await asyncio.gather(*tasks, return_exceptions=True):
            if not isinstance(result, BaseException):  # a started session
                await result.shutdown()


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).replace(microsecond=0).isoformat()


def _not_run(reason: str) -> CellRecord:
    return CellRecord(status=CellStatus.NOT_RUN, error={"ename": "NotRun", "evalue": reason, "traceback": []})


def not_run_results(job: SessionJob, reason: str, first: CellRecord | None = None) -> dict[int, CellRecord]:
    """Every cell of the session not run for ``reason``; its first cell ``first``, if given."""
    results = {cell.index: _not_run(reason) for cell in job.plan.cells}
    if first is not None and job.plan.cells:
        results[job.plan.cells[0].index] = first
    return results


def failed_record(job: SessionJob, message: str, duration: float = 0.0) -> SessionRecord:
    """The record of a session that could not run at all (status ``failed``), on no device."""
    record = session_record(job, Lease(()), not_run_results(job, message), Probe(), message, duration)
    record.provenance = replace(record.provenance, device="", host="", device_kind="")
    return record


def lost_record(job: SessionJob, why: str, duration: float, host: str = "") -> SessionRecord:
    """A session whose process died under it, outside the kernel (an executor's worker):
    reported like a dying kernel, at its first cell; ``host``: where it was lost."""
    died = CellRecord(status=CellStatus.DIED, error={"ename": "DeadKernelError", "evalue": why, "traceback": []})
    results = not_run_results(job, "not run: the worker running the session died", died)
    record = session_record(job, Lease(()), results, Probe(), None, duration)
    record.provenance = replace(record.provenance, device="", device_kind="", host=host)
    return record


async def start_session(
    job: SessionJob, lease: Lease, session_factory: Callable[..., KernelSession] = KernelSession
) -> KernelSession:
    """A started kernel for ``job`` on ``lease`` (shut down again if it failed to start)."""
    kernel = session_factory(
        job.framework,
        cwd=job.plan.cwd,
        devices=lease.cuda_visible_devices,
        log_path=job.log_path,
        output_limit=job.output_limit,
        env_drop=job.env_drop,
    )
    try:
        await kernel.start()
    except BaseException:
        await kernel.shutdown()
        raise
    return kernel


async def run_session(
    job: SessionJob,
    lease: Lease,
    *,
    session_factory: Callable[..., KernelSession] = KernelSession,
    kernel: Awaitable[KernelSession] | None = None,
) -> SessionRecord:
    """Run every cell of one session in a fresh kernel (``kernel``: one started ahead for it)
    and return the session's record; the kernel is shut down at the end."""
    plan = job.plan
    started = time.perf_counter()
    results: dict[int, CellRecord] = {}
    probe = Probe()
    message: str | None = None
    budget = plan.settings.timeout  # the page's budget for its cells, if it set one
    floor: list[float] | None = None  # the empty cell's samples, once a cell repeats
    listener = cell_listener.get()
    try:
        session = await (kernel if kernel is not None else start_session(job, lease, session_factory))
        try:
            ready = time.perf_counter()
            for number, cell in enumerate(plan.cells, 1):
                if session.broken:
                    results[cell.index] = _not_run(f"not run: {session.broken}")
                    continue
                timeout = cell.timeout or job.default_timeout
                if budget is not None:
                    left = budget - (time.perf_counter() - ready)
                    if left <= 0:
                        results[cell.index] = _not_run("not run: the page's time budget is spent")
                        continue
                    timeout = min(timeout, left)
                last = number == len(plan.cells)  # the probe comes with its reply
                if listener is not None:
                    listener(job, number, len(plan.cells))
                if cell.repeat > 1:
                    if floor is None:
                        floor = await _floor(session)
                    deadline = None if budget is None else ready + budget
                    results[cell.index] = await _repeated(session, cell, timeout, last, deadline)
                else:
                    results[cell.index] = await session.run_cell(cell.code, timeout, last=last)
            if not session.broken:
                probe = await session.probe()
            probe = replace(probe, kernelspec=session.kernelspec)
        finally:
            await session.shutdown()
    except NoSuchKernel:
        message = f"no kernelspec named {job.framework.kernel!r} (see `jupyter kernelspec list`)"
    except (RuntimeError, OSError, asyncio.TimeoutError) as err:
        what = "failed during the session" if results else "could not be started"
        message = f"the {job.framework.name} kernel {what}: {err or type(err).__name__}"
    except Exception as err:  # a problem of one session must not end the build
        message = f"livecells could not run the session: {type(err).__name__}: {err}"
    for cell in plan.cells:
        results.setdefault(cell.index, _not_run(message or "not run"))
    record = session_record(job, lease, results, probe, message, time.perf_counter() - started)
    if floor:
        record.floor, record.floor_samples = median(floor), floor
    return record


async def _floor(session: KernelSession) -> list[float]:
    """The measurement floor's samples: an empty cell timed as the others, after a warm-up
    (no samples if the kernel could not time it)."""
    samples = []
    for run in range(FLOOR_WARMUP + FLOOR_SAMPLES):
        result = await session.run_cell(FLOOR_CODE, 30)
        if result.status != CellStatus.OK or result.time is None:
            return []
        if run >= FLOOR_WARMUP:
            samples.append(result.time)
    return samples


async def _repeated(
    session: KernelSession, cell: CellPlan, timeout: float, last: bool, deadline: float | None = None
) -> CellRecord:
    """A cell run ``warmup + repeat`` times in its session, each run timed by the hook: the last
    run's result, with every run's time (its ``time``: the median of the timed runs). A run that
    fails, or that the hook could not time, ends the repeats: its result is the cell's. Each run
    has the cell's ``timeout``, within the page's budget (``deadline``, on ``perf_counter``):
    once it is spent, the runs made so far are the cell's."""
    runs = cell.warmup + cell.repeat
    times: list[float] = []
    result = CellRecord(status=CellStatus.NOT_RUN)
    for run in range(runs):
        limit = timeout if deadline is None else min(timeout, deadline - time.perf_counter())
        if run and limit <= 0:
            break
        result = await session.run_cell(cell.code, limit, last=last and run == runs - 1)
        if result.status != CellStatus.OK or result.time is None:
            return result
        times.append(result.time)
    samples = times[cell.warmup:] or times[-1:]  # the budget ended the warm-up: its last run
    warmup = times[: len(times) - len(samples)]
    return replace(result, time=median(samples), samples=samples, warmup=warmup)


def session_record(
    job: SessionJob,
    lease: Lease,
    results: dict[int, CellRecord],
    probe: Probe,
    message: str | None,
    duration: float,
) -> SessionRecord:
    """The record of a finished session."""
    plan = job.plan
    # The framework's sync code failed after these cells (by execution count): their time may
    # leave out queued device work.
    sync_errors: dict[int, str] = {}
    for count, error in probe.sync_errors:
        sync_errors.setdefault(count, error)
    cells = []
    for cell in plan.cells:
        result = results[cell.index]
        count = result.execution_count
        cells.append(
            replace(
                result,
                index=cell.index,
                code_sha=cell.code_sha,
                sync_error=sync_errors.get(count) if isinstance(count, int) else None,
                expected=result.status == CellStatus.ERROR and cell.expects(result.ename),
            )
        )
    gpu_used = probe.gpu_used is True and bool(lease.gpus)
    # A framework that cannot say whether it used its leased GPU names no device (not the CPU).
    unknown = bool(lease.gpus) and probe.gpu_used is None
    device = "" if unknown else ", ".join(_gpu_names(lease.gpus)) if gpu_used else cpu_name()
    return SessionRecord(
        framework=job.framework.name,
        key=job.key,
        environment=job.environment,
        status=session_status(cells, message),
        message=message,
        duration=round(duration, 4),
        cells=cells,
        run_id=job.run_id,
        provenance=Provenance(
            date=now_iso(),
            host=probe.host or socket.gethostname(),
            device=device,
            device_kind="" if unknown else "gpu" if gpu_used else "cpu",
            device_count=len(lease.gpus) if gpu_used else 0,
            framework_version=probe.framework_version,
            python=probe.python,
            kernel=job.framework.kernel,
            kernelspec=dict(probe.kernelspec),
            livecells=__version__,
            devices_leased=job.gpus,
            fallbacks=list(probe.fallbacks),
        ),
    )


def _gpu_names(gpus: Sequence[GPU]) -> list[str]:
    names: dict[str, int] = {}
    for gpu in gpus:
        names[gpu.name] = names.get(gpu.name, 0) + 1
    return [name if n == 1 else f"{n}× {name}" for name, n in names.items()]


def run_async(main: Callable[[], Awaitable[None]]) -> None:
    """Run the scheduler's coroutine to the end from synchronous Sphinx code."""
    asyncio.run(main())
