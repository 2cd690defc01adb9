"""The worker side of the Dask executor: what runs inside a Dask worker process.

:func:`run_on_worker` is the task of one session. It runs the session's kernel on the worker,
in the page's folder, with the worker's own devices (:class:`WorkerDevices`), and returns the
session's record.

Warm kernels: each worker keeps a :class:`WorkerKernels`, made on first use and kept for the
worker's life. It holds a :class:`~.forkserver.ForkServer`, whose templates (one per framework)
import the framework once per worker, so that a session's kernel is forked in milliseconds, as
in a local build; and a :class:`~.reaper.Guard`, which kills the kernels' process trees if the
worker dies without closing them. :class:`KernelsPlugin`, which the build registers when it
connects, starts the build's templates while Sphinx reads the pages, and closes the worker's
kernels when the worker closes. Templates import only while none of the worker's sessions runs:
nothing runs beside a timed cell, also on a worker with several threads.

This module imports ``distributed`` (a worker has it) and never Sphinx.

Its size (about 410 lines) is what one worker process owns for its life: its devices, its fork
server and guard, the plugin that starts and ends them, and the task of one session.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from distributed import get_worker
from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

from livecells.execute.dask import (
    GPU_RESOURCE,
    PLUGIN_NAME,
    WATCH_INTERVAL,
    failed_record,
)
from livecells.execute.devices import GPU, DeviceLedger, Lease, detect_gpus
from livecells.execute.forkserver import ForkServer
from livecells.execute.kernel import KernelSession
from livecells.execute.reaper import Guard
from livecells.execute.scheduler import SessionJob, run_session
from livecells.model.frameworks import FrameworkSpec

_DEVICES_ATTRIBUTE = "_livecells_devices"
_KERNELS_ATTRIBUTE = "_livecells_kernels"
_MADE = threading.Lock()  # making a worker's devices or kernels: once per worker
logger = logging.getLogger("livecells.dask")  # the worker's log


# -- devices ----------------------------------------------------------------------------------


class DeviceProblem(RuntimeError):
    """The worker cannot lend the GPUs a session asks for."""


def own_gpus(declared: int, visible: Sequence[GPU], pinned: bool) -> tuple[list[GPU], str | None]:
    """A worker's own GPUs: the first ``declared`` of those it sees, or why that is unclear.

    ``visible`` is already limited by the worker's ``CUDA_VISIBLE_DEVICES`` (``pinned``), which
    dask-cuda sets with the worker's own GPU first.
    """
    if declared <= 0:
        return [], None
    if declared > len(visible):
        return [], f"it declares {GPU_RESOURCE}={declared} but sees {len(visible)} GPU(s)"
    if len(visible) > declared and not pinned:
        return [], (
            f"it declares {GPU_RESOURCE}={declared} but sees {len(visible)} GPUs and "
            "CUDA_VISIBLE_DEVICES is not set, so which are its own is unknown: pin each worker "
            "to its GPUs with CUDA_VISIBLE_DEVICES (or use dask-cuda)"
        )
    return list(visible[:declared]), None


class WorkerDevices:
    """The GPUs of one worker, each lent to one of its running sessions at a time (by the
    :class:`~.devices.DeviceLedger` rule a local build uses). Dask's ``GPU`` resource already
    keeps a worker from taking more GPU sessions than it declares; this lends the GPUs themselves."""

    def __init__(self, gpus: Sequence[GPU], problem: str | None = None) -> None:
        self.ledger = DeviceLedger(gpus)
        self.problem = problem

    @classmethod
    def of(cls, worker: Any) -> WorkerDevices:
        """The worker's devices, found once per worker and kept on the worker."""
        with _MADE:
            devices = getattr(worker, _DEVICES_ATTRIBUTE, None)
            if devices is None:
                declared = int(worker.state.total_resources.get(GPU_RESOURCE, 0))
                pinned = os.environ.get("CUDA_VISIBLE_DEVICES") is not None
                gpus, problem = own_gpus(declared, detect_gpus() if declared else [], pinned)
                devices = cls(gpus, problem)
                setattr(worker, _DEVICES_ATTRIBUTE, devices)
        return devices  # type: ignore[no-any-return]

    @contextmanager
    def lease(self, count: int) -> Iterator[Lease]:
        if count <= 0:
            yield Lease(())
            return
        if self.problem:
            raise DeviceProblem(self.problem)
        taken = self.ledger.take(count)
        if taken is None:
            raise DeviceProblem(f"{count} GPU(s) asked for, {self.ledger.free} free")
        try:
            yield Lease(taken)
        finally:
            self.ledger.give_back(taken)


# -- warm kernels -------------------------------------------------------------------------------


class Cancelled(Exception):
    """The task was cancelled while it waited for a template or for the worker's other sessions."""


_SPAWNER: ThreadPoolExecutor | None = None


def _in_spawner(function: Callable[..., Any], *args: Any) -> Any:
    """Call ``function`` in this process's one long-lived thread, which starts every template.

    A template dies with the *thread* that started it (``PR_SET_PDEATHSIG`` follows the parent
    thread), and Dask's task threads come and go (``secede``/``rejoin``).
    """
    global _SPAWNER
    with _MADE:
        if _SPAWNER is None:
            _SPAWNER = ThreadPoolExecutor(1, thread_name_prefix="livecells-templates")
    return _SPAWNER.submit(function, *args).result()


TemplateKey = tuple[str, tuple[str, ...]]


def _template_key(framework: FrameworkSpec) -> TemplateKey:
    return framework.kernel, tuple(framework.preload)


class WorkerKernels:
    """One worker's kernels: its fork server and guard, and the rule that templates import only
    while none of the worker's sessions runs (see the module's docstring)."""

    def __init__(self, server: ForkServer | None = None, guard: Guard | None = None) -> None:
        self.server = server or ForkServer(warn=lambda message: logger.info("livecells: %s", message))
        self.guard = guard or Guard()
        self.closed = False
        self._changed = threading.Condition()
        #: Sessions of this worker between their kernel's start and its shutdown.
        self._sessions = 0
        #: Templates importing now.
        self._importing = 0
        #: A template per framework key: set once it is ready, or known not to be possible.
        self._templates: dict[TemplateKey, threading.Event] = {}
        self._watched: set[int] = set()

    @classmethod
    def of(cls, worker: Any, *, make: bool = True) -> WorkerKernels | None:
        """The worker's kernels, made on first use (with ``make``) and kept on the worker."""
        with _MADE:
            kernels = getattr(worker, _KERNELS_ATTRIBUTE, None)
            if kernels is None and make:
                kernels = cls()
                setattr(worker, _KERNELS_ATTRIBUTE, kernels)
                # Without the plugin (or a worker that never closes cleanly): at the latest when
                # the process exits. A killed worker's templates die with it (PR_SET_PDEATHSIG),
                # and its guard kills what they started.
                atexit.register(kernels.close)
        return kernels

    @property
    def template_pids(self) -> list[int]:
        """The pid of each template started here (for tests and logs)."""
        return [template.process.pid for template in list(self.server.templates.values())]

    def warm(self, frameworks: Sequence[FrameworkSpec], wanted: Callable[[], bool] = lambda: True) -> None:
        """Return once the frameworks' templates are ready (or cannot be); start those missing,
        all at once, when none of the worker's sessions runs. :class:`Cancelled` when ``wanted``
        says no more."""
        while True:
            with self._changed:
                if self.closed:
                    return
                mine: dict[TemplateKey, FrameworkSpec] = {}
                others: dict[TemplateKey, threading.Event] = {}
                for framework in frameworks:
                    key = _template_key(framework)
                    if key in self._templates:
                        others[key] = self._templates[key]
                    elif key not in mine:
                        mine[key] = framework
                        self._templates[key] = threading.Event()
                if mine:
                    self._importing += 1
            if mine:
                self._start(mine, wanted)
            for event in others.values():
                while not event.wait(WATCH_INTERVAL):
                    if not wanted():
                        raise Cancelled
            with self._changed:
                # A template whose starter was cancelled before it began is for us to start.
                if all(self._templates.get(key) is event for key, event in others.items()):
                    return

    def _start(self, frameworks: dict[TemplateKey, FrameworkSpec], wanted: Callable[[], bool]) -> None:
        started = False
        try:
            with self._changed:
                while self._sessions and not self.closed:
                    self._changed.wait(WATCH_INTERVAL)
                    if not wanted():
                        raise Cancelled
                started = not self.closed
            if started:
                try:
                    self._prepare(list(frameworks.values()))
                except Exception:  # its sessions start fresh kernels instead
                    logger.exception("livecells: the kernel templates could not be started")
        finally:
            with self._changed:
                self._importing -= 1
                for key in frameworks:
                    event = self._templates[key] if started else self._templates.pop(key)
                    event.set()
                self._changed.notify_all()

    def _prepare(self, frameworks: list[FrameworkSpec]) -> None:
        for framework in frameworks:  # their imports run in parallel
            _in_spawner(self.server.prepare, framework)
        self._watch_templates()

        async def ready() -> None:
            await asyncio.gather(*(self.server.ready(f) for f in frameworks))

        asyncio.run(ready())  # a template that failed is said by the server (warn)

    def _watch_templates(self) -> None:
        for pid in self.template_pids:
            if pid not in self._watched:
                self._watched.add(pid)
                self.guard.watch(pid)

    @contextmanager
    def session(
        self, framework: FrameworkSpec, fork: bool, wanted: Callable[[], bool]
    ) -> Iterator[Callable[..., KernelSession]]:
        """Count a session as running while the body runs; yields its ``session_factory``.

        With ``fork``, its framework's template is ready first. The session waits while any
        template imports, and no template starts importing until it has ended.
        """
        if fork:
            self.warm([framework], wanted)
        with self._changed:
            while self._importing:
                self._changed.wait(WATCH_INTERVAL)
                if not wanted():
                    raise Cancelled
            self._sessions += 1
        try:
            manager = self.server.manager if fork and not self.closed else None
            yield functools.partial(KernelSession, guard=self.guard, manager_factory=manager)
        finally:
            with self._changed:
                self._sessions -= 1
                self._changed.notify_all()

    def close(self) -> None:
        """Kill every template and kernel of the worker, and end its guard; safe twice."""
        with self._changed:
            if self.closed:
                return
            self.closed = True
            self._changed.notify_all()
        self.server.close()
        self.guard.close()


class KernelsPlugin(WorkerPlugin):  # type: ignore[misc]
    """Keeps each worker's :class:`WorkerKernels` for the worker's life.

    ``setup`` (on every worker, also those that join later) starts the templates of
    ``frameworks`` in the background; the worker's close kills its templates and kernels. A build
    registers the plugin again under the same name: the old one's ``teardown`` then leaves the
    templates to the worker.
    """

    name = PLUGIN_NAME

    def __init__(self, frameworks: Sequence[FrameworkSpec] = ()) -> None:
        self.frameworks = tuple(frameworks)

    def setup(self, worker: Any) -> None:
        kernels = WorkerKernels.of(worker)
        if self.frameworks and kernels is not None:
            threading.Thread(
                target=_warm_quietly, args=(kernels, self.frameworks), name="livecells-warm", daemon=True
            ).start()

    def teardown(self, worker: Any) -> None:
        if worker.status in {Status.closing, Status.closed, Status.failed}:
            kernels = WorkerKernels.of(worker, make=False)
            if kernels is not None:
                kernels.close()


def _warm_quietly(kernels: WorkerKernels, frameworks: Sequence[FrameworkSpec]) -> None:
    try:
        kernels.warm(frameworks)
    except Exception:
        logger.exception("livecells: starting the kernel templates failed")


# -- the task -----------------------------------------------------------------------------------


def source_problem(job: SessionJob) -> str | None:
    """Why this machine cannot run the page (its folder or file is missing), if it cannot."""
    plan = job.plan
    if not os.path.isdir(plan.cwd):
        return f"the page's folder {plan.cwd} does not exist there"
    if not os.access(plan.source, os.R_OK):
        return f"the page {plan.source} cannot be read there"
    return None


def _with_reachable_log(job: SessionJob) -> SessionJob:
    """The job, without its kernel log if the log's folder cannot be made on this machine."""
    if not job.log_path:
        return job
    try:
        Path(job.log_path).parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return replace(job, log_path=None)
    return job


def _still_wanted(worker: Any, key: str) -> bool:
    """Whether the scheduler still wants the task ``key`` that this thread runs."""
    tasks = getattr(getattr(worker, "state", None), "tasks", None)
    if tasks is None:
        return True
    task = tasks.get(key)
    return task is not None and task.state not in {"cancelled", "released", "forgotten"}


async def _run_watched(
    job: SessionJob, lease: Lease, wanted: Callable[[], bool], factory: Callable[..., KernelSession]
) -> Any:
    """Run the session; stop it (and its kernel) if its task is cancelled meanwhile."""
    session = asyncio.ensure_future(run_session(job, lease, session_factory=factory))
    while True:
        finished, _ = await asyncio.wait({session}, timeout=WATCH_INTERVAL)
        if finished:
            return session.result()
        if not wanted():
            session.cancel()
            with suppress(asyncio.CancelledError):
                await session
            return None


def run_on_worker(job: SessionJob, key: str, topic: str, fork: bool = True) -> Any:
    """The Dask task of one session: run it on this worker (in a kernel forked from the worker's
    template of its framework, with ``fork``); return its record."""
    worker = get_worker()
    host = socket.gethostname()
    worker.log_event(topic, {"token": key, "worker": worker.address, "host": host})
    started = time.perf_counter()
    problem = source_problem(job)
    record = None
    if problem is not None:
        problem = (
            f"the Dask worker {worker.address} on {host} cannot see the source tree: {problem} "
            "(workers must reach the book's source folder at the same path, e.g. on a shared "
            "file system)"
        )
    else:
        wanted = functools.partial(_still_wanted, worker, key)
        kernels = WorkerKernels.of(worker)
        assert kernels is not None
        try:
            with WorkerDevices.of(worker).lease(job.gpus) as lease, kernels.session(
                job.framework, fork, wanted
            ) as factory:
                record = asyncio.run(_run_watched(_with_reachable_log(job), lease, wanted, factory))
        except DeviceProblem as err:
            problem = f"the Dask worker {worker.address} on {host} cannot lend GPUs: {err}"
        except Cancelled:
            pass
        if record is None and problem is None:
            problem = "the session was cancelled"
    if record is None:
        record = failed_record(job, problem or "not run", time.perf_counter() - started)
    record.provenance.extra["worker"] = worker.address
    record.provenance.host = host
    return record
