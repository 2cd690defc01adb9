"""Sessions as Dask tasks, from the build's side: :class:`DaskScheduler`.

Each job becomes one task, :func:`.worker.run_on_worker`, which runs the session's kernel on a
worker in the page's folder (the source tree must be reachable there at the same path; the task
checks), runs the cells with :func:`~livecells.execute.scheduler.run_session` and returns the
session's record. Records come back to the Sphinx process, which alone writes the store (through
``on_done``).

Devices: a job leasing GPUs asks for the worker resource ``GPU=n``; the worker lends it that many
of its own GPUs. CPU jobs ask for a ``livecells-slot`` when workers declare one, else rely on
workers started with ``--nthreads 1``.

Faults: the policy every executor shares (:mod:`livecells.execute.attempts`): a session whose
worker dies is started once more elsewhere; if that worker dies too, the session is reported as
a crash. Cancelling :meth:`DaskScheduler.run` (Ctrl-C) cancels the
cluster's tasks, and a cancelled task stops its kernel.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import Callable, Sequence
from contextlib import nullcontext, suppress
from typing import Any

from livecells.errors import ExecutorError
from livecells.execute.attempts import RETRIES, Attempts, Start, crash_record, note_lost
from livecells.execute.dask.cluster import (
    GPU_RESOURCE,
    SLOT_RESOURCE,
    ClusterAddress,
    ClusterInfo,
    cluster_info,
    connect,
    connect_timeout,
    named,
    start_kernels,
)
from livecells.execute.scheduler import OnDone, OnStart, SessionJob, cell_listener, failed_record, run_order
from livecells.model.records import SessionRecord


def job_resources(job: SessionJob, slots: bool) -> dict[str, float] | None:
    """The worker resources one session holds while it runs."""
    if job.gpus:
        return {GPU_RESOURCE: job.gpus}
    return {SLOT_RESOURCE: 1} if slots else None


def _task_key(job: SessionJob) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{job.plan.docname}-{job.plan.framework}")
    return f"livecells-{name}-{uuid.uuid4().hex[:12]}"


class DaskScheduler:
    """Runs sessions as Dask tasks on the workers of a cluster; see the module's docstring."""

    def __init__(
        self,
        executor: ClusterAddress,
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
        except ExecutorError as err:
            raise named(self.executor, err) from None
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
        except ExecutorError as err:
            raise named(self.executor, err) from None
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
        self.attempts = Attempts()
        self.announced: set[str] = set()
        self.gave_up: set[str] = set()
        #: Told of each cell a session sends (the build's progress line), from the workers' events.
        self.on_cell = cell_listener.get()

    async def run(self, jobs: Sequence[SessionJob], on_done: OnDone, at_once: int | None) -> None:
        limit = asyncio.Semaphore(at_once) if at_once else None
        self.client.subscribe_topic(self.topic, self._on_event)
        # Submitted in the local order, each with its rank as its priority: the cluster's
        # scheduler starts the highest first wherever a worker is free.
        ordered = run_order(jobs)
        tasks = [
            asyncio.ensure_future(self._one(job, on_done, limit, len(ordered) - rank))
            for rank, job in enumerate(ordered)
        ]
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

    async def _one(
        self, job: SessionJob, on_done: OnDone, limit: asyncio.Semaphore | None, priority: int
    ) -> None:
        token = _task_key(job)
        self.jobs[token] = job
        async with limit if limit is not None else nullcontext():
            record = await self._execute(job, token, priority)
        self._announce(token)
        on_done(job, record)

    async def _execute(self, job: SessionJob, token: str, priority: int) -> SessionRecord:
        started = time.perf_counter()
        if job.gpus > self.info.gpus_per_worker:
            return failed_record(
                job,
                f"no worker of the Dask cluster declares {job.gpus} GPU(s) "
                f"(start workers with --resources {GPU_RESOURCE}=N)",
            )
        from livecells.execute.dask.worker import run_on_worker

        self.done[token] = self.loop.create_future()
        future = self.client.submit(
            run_on_worker,
            job,
            token,
            self.topic,
            self.fork,
            key=token,
            resources=job_resources(job, self.info.slots),
            retries=RETRIES,
            priority=priority,
            pure=False,
        )
        self.futures[token] = future
        future.add_done_callback(lambda _: self._threadsafe(self._finish, token))
        await self.done[token]
        duration = time.perf_counter() - started
        if token in self.gave_up:
            return crash_record(job, self.attempts.allowed(token), duration, "Dask")
        lost = self.attempts.lost(token)
        return note_lost(await self._outcome(job, token, future, duration), lost)

    async def _outcome(
        self, job: SessionJob, token: str, future: Any, duration: float
    ) -> SessionRecord:
        """The record a finished task returned, or one that says why there is none."""
        from distributed import KilledWorker

        status = future.status
        if status == "finished":
            try:
                return await asyncio.to_thread(future.result, 60)  # type: ignore[no-any-return]
            except Exception as err:  # the data could not be fetched
                message = f"its result could not be fetched from the cluster: {err}"
                return failed_record(job, message, duration)
        if status == "error":
            error = await asyncio.to_thread(future.exception, 60)
            if isinstance(error, KilledWorker):
                lost = self.attempts.starts.get(token) or [Start("?", "?")]
                return crash_record(job, lost, duration, "Dask")
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
            self._threadsafe(self._cell if "cell" in message else self._started, message)

    def _cell(self, message: dict[str, Any]) -> None:
        job = self.jobs.get(message["token"])
        if job is not None and self.on_cell is not None and isinstance(message["cell"], int):
            self.on_cell(job, message["cell"], len(job.plan.cells))

    def _started(self, message: dict[str, str]) -> None:
        token = message["token"]
        if token not in self.jobs or token in self.gave_up:
            return
        too_many = self.attempts.started(token, str(message.get("worker")), str(message.get("host")))
        self._announce(token)
        if too_many:
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
