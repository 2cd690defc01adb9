"""What a machine that runs sessions for an executor keeps, whatever the executor.

An executor whose sessions run in worker processes (Dask's, or another's) keeps, per worker:

- :class:`WorkerDevices`: the worker's own GPUs, each lent to one of its running sessions at a
  time, by the :class:`~.devices.DeviceLedger` rule a local build uses;
- :class:`WorkerKernels`: a :class:`~.forkserver.ForkServer`, whose templates (one per framework)
  import the framework once per worker, so that a session's kernel is forked in milliseconds, as
  in a local build; and a :class:`~.reaper.Guard`, which kills the kernels' process trees if the
  worker dies without closing them. Templates import only while none of the worker's sessions
  runs: nothing runs beside a timed cell, also on a worker with several threads.

Both are kept on the object that stands for the worker process (``of(owner)``: Dask's ``Worker``),
made on first use. :func:`source_problem`, :func:`with_reachable_log` and :func:`run_watched` are
the parts of one session's task that do not depend on the executor. Nothing here imports Sphinx
or an executor's package.
"""

from __future__ import annotations

import asyncio
import atexit
import functools
import logging
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager, suppress
from dataclasses import replace
from pathlib import Path
from typing import Any

from livecells.errors import DeviceError, TaskCancelledError
from livecells.execute.devices import GPU, DeviceLedger, Lease, detect_gpus
from livecells.execute.forkserver.server import ForkServer
from livecells.execute.kernels.session import KernelSession
from livecells.execute.scheduler import SessionJob, run_session
from livecells.kernel_side.reaper import Guard
from livecells.model.frameworks import FrameworkSpec
from livecells.model.records import SessionRecord

#: How often a waiting or running task looks whether it was cancelled (seconds).
WATCH_INTERVAL = 0.5
_DEVICES_ATTRIBUTE = "_livecells_devices"
_KERNELS_ATTRIBUTE = "_livecells_kernels"
_MADE = threading.Lock()  # making a worker's devices or kernels: once per worker
logger = logging.getLogger("livecells.worker")  # the worker's log


# -- devices ----------------------------------------------------------------------------------


def own_gpus(
    declared: int, visible: Sequence[GPU], pinned: bool, resource: str = "GPU"
) -> tuple[list[GPU], str | None]:
    """A worker's own GPUs: the first ``declared`` of those it sees, or why that is unclear.

    ``visible`` is already limited by the worker's ``CUDA_VISIBLE_DEVICES`` (``pinned``), which
    dask-cuda sets with the worker's own GPU first. ``resource``: how the worker declares GPUs.
    """
    if declared <= 0:
        return [], None
    if declared > len(visible):
        return [], f"it declares {resource}={declared} but sees {len(visible)} GPU(s)"
    if len(visible) > declared and not pinned:
        return [], (
            f"it declares {resource}={declared} but sees {len(visible)} GPUs and "
            "CUDA_VISIBLE_DEVICES is not set, so which are its own is unknown: pin each worker "
            "to its GPUs with CUDA_VISIBLE_DEVICES (or use dask-cuda)"
        )
    return list(visible[:declared]), None


class WorkerDevices:
    """The GPUs of one worker, each lent to one of its running sessions at a time. The executor
    already keeps a worker from taking more GPU sessions than it declares; this lends the GPUs
    themselves."""

    def __init__(self, gpus: Sequence[GPU], problem: str | None = None) -> None:
        self.ledger = DeviceLedger(gpus)
        self.problem = problem

    @classmethod
    def of(cls, owner: Any, declared: int, resource: str = "GPU") -> WorkerDevices:
        """The worker's devices (it declares ``declared`` GPUs), found once and kept on ``owner``."""
        with _MADE:
            devices = getattr(owner, _DEVICES_ATTRIBUTE, None)
            if devices is None:
                pinned = os.environ.get("CUDA_VISIBLE_DEVICES") is not None
                gpus, problem = own_gpus(declared, detect_gpus() if declared else [], pinned, resource)
                devices = cls(gpus, problem)
                setattr(owner, _DEVICES_ATTRIBUTE, devices)
        return devices  # type: ignore[no-any-return]

    @contextmanager
    def lease(self, count: int) -> Iterator[Lease]:
        if count <= 0:
            yield Lease(())
            return
        if self.problem:
            raise DeviceError(self.problem)
        taken = self.ledger.take(count)
        if taken is None:
            raise DeviceError(f"{count} GPU(s) asked for, {self.ledger.free} free")
        try:
            yield Lease(taken)
        finally:
            self.ledger.give_back(taken)


# -- warm kernels -------------------------------------------------------------------------------


_SPAWNER: ThreadPoolExecutor | None = None


def _in_spawner(function: Callable[..., Any], *args: Any) -> Any:
    """Call ``function`` in this process's one long-lived thread, which starts every template.

    A template dies with the *thread* that started it (``PR_SET_PDEATHSIG`` follows the parent
    thread), and an executor's task threads may come and go (Dask's ``secede``/``rejoin``).
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
        #: Held while :meth:`close` runs: a second caller waits until the first has ended all.
        self._closing = threading.Lock()
        self._ended = False
        self._watching = False

    @classmethod
    def of(cls, owner: Any, *, make: bool = True) -> WorkerKernels | None:
        """The worker's kernels, made on first use (with ``make``) and kept on ``owner``."""
        with _MADE:
            kernels = getattr(owner, _KERNELS_ATTRIBUTE, None)
            if kernels is None and make:
                kernels = cls()
                setattr(owner, _KERNELS_ATTRIBUTE, kernels)
                # Without a close from the executor (or a worker that never closes cleanly): at
                # the latest when the process exits. A killed worker's templates die with it
                # (PR_SET_PDEATHSIG), and its guard kills what they started.
                atexit.register(kernels.close)
        return kernels

    @property
    def template_pids(self) -> list[int]:
        """The pid of each template started here (for tests and logs)."""
        return [template.process.pid for template in list(self.server.templates.values())]

    def warm(self, frameworks: Sequence[FrameworkSpec], wanted: Callable[[], bool] = lambda: True) -> None:
        """Return once the frameworks' templates are ready (or cannot be); start those missing,
        all at once, when none of the worker's sessions runs. :class:`TaskCancelledError` when ``wanted``
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
                        raise TaskCancelledError
            with self._changed:
                # A template whose starter was cancelled before it began is for us to start.
                if all(self._templates.get(key) is event for key, event in others.items()):
                    return

    def warm_quietly(self, frameworks: Sequence[FrameworkSpec]) -> None:
        """:meth:`warm`, for a thread of its own: a failure is logged."""
        try:
            self.warm(frameworks)
        except Exception:
            logger.exception("livecells: starting the kernel templates failed")

    def _start(self, frameworks: dict[TemplateKey, FrameworkSpec], wanted: Callable[[], bool]) -> None:
        started = False
        try:
            with self._changed:
                while self._sessions and not self.closed:
                    self._changed.wait(WATCH_INTERVAL)
                    if not wanted():
                        raise TaskCancelledError
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
                    raise TaskCancelledError
            self._sessions += 1
        try:
            manager = self.server.manager if fork and not self.closed else None
            yield functools.partial(KernelSession, guard=self.guard, manager_factory=manager)
        finally:
            with self._changed:
                self._sessions -= 1
                self._changed.notify_all()

    def close(self) -> None:
        """Kill every template and kernel of the worker, and end its guard; safe twice, and from
        any thread (a call while another runs returns once that one has ended all)."""
        with self._closing:
            with self._changed:
                self.closed = True
                self._changed.notify_all()
            if self._ended:
                return
            try:
                self.server.close()
                self.guard.close()
            finally:
                self._ended = True

    def close_soon(self) -> None:
        """:meth:`close` in a thread of its own, for an event loop that must not wait for it; the
        thread is not a daemon, so the process does not exit before its kernels are killed."""
        try:
            threading.Thread(target=self.close, name="livecells-close", daemon=False).start()
        except RuntimeError:  # the interpreter is shutting down: no new thread
            self.close()

    def close_when(self, closing: Callable[[], bool]) -> None:
        """Close as soon as ``closing()`` says so (it is asked every :data:`WATCH_INTERVAL`).

        For the worker's own state (closing, closed): the kernels end when the worker starts to
        close, not only if its close gets as far as the executor's last hook, which may come late
        or never (a close that waits for other work, or is cancelled half-way). Once per worker.
        """
        with self._changed:
            if self._watching or self.closed:
                return
            self._watching = True

        def watch() -> None:
            while not self.closed:
                if closing():
                    self.close()
                    return
                with self._changed:
                    self._changed.wait(WATCH_INTERVAL)

        threading.Thread(target=watch, name="livecells-close-watch", daemon=True).start()


# -- one session's task -------------------------------------------------------------------------


def source_problem(job: SessionJob) -> str | None:
    """Why this machine cannot run the page (its folder or file is missing), if it cannot."""
    plan = job.plan
    if not os.path.isdir(plan.cwd):
        return f"the page's folder {plan.cwd} does not exist there"
    if not os.access(plan.source, os.R_OK):
        return f"the page {plan.source} cannot be read there"
    return None


def with_reachable_log(job: SessionJob) -> SessionJob:
    """The job, without its kernel log if the log's folder cannot be made on this machine."""
    if not job.log_path:
        return job
    try:
        Path(job.log_path).parent.mkdir(parents=True, exist_ok=True)
    except OSError:
        return replace(job, log_path=None)
    return job


async def run_watched(
    job: SessionJob, lease: Lease, wanted: Callable[[], bool], factory: Callable[..., KernelSession]
) -> SessionRecord | None:
    """Run the session; stop it (and its kernel) if ``wanted`` says no more meanwhile (None)."""
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
