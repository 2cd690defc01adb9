"""The worker side of the Dask executor: what runs inside a Dask worker process.

:func:`run_on_worker` is the task of one session: it runs the session's kernel on the worker, in
the page's folder, with the worker's own GPUs (:class:`~livecells.execute.worker.WorkerDevices`)
and warm kernels (:class:`~livecells.execute.worker.WorkerKernels`), both kept on Dask's
``Worker``, and returns the session's record. :class:`KernelsPlugin`, which the build registers
when it connects, starts the build's templates while Sphinx reads the pages, and closes the
worker's kernels as soon as the worker starts to close.

This module imports ``distributed`` (a worker has it) and never Sphinx.
"""

from __future__ import annotations

import asyncio
import functools
import socket
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from distributed import get_worker
from distributed.core import Status
from distributed.diagnostics.plugin import WorkerPlugin

from livecells.errors import DeviceError, TaskCancelledError
from livecells.execute.dask.cluster import GPU_RESOURCE, PLUGIN_NAME
from livecells.execute.scheduler import SessionJob, cell_listener, failed_record
from livecells.execute.worker import (
    WorkerDevices,
    WorkerKernels,
    run_watched,
    source_problem,
    with_reachable_log,
)
from livecells.model.frameworks import FrameworkSpec
from livecells.model.records import SessionRecord


class KernelsPlugin(WorkerPlugin):  # type: ignore[misc]
    """Keeps each worker's :class:`~livecells.execute.worker.WorkerKernels` for the worker's life.

    ``setup`` (on every worker, also those that join later) starts the templates of
    ``frameworks`` in the background, and has the worker's templates and kernels killed as soon as
    its status says it is closing: a close can wait long before it gets to the plugins' teardown,
    or be cancelled before (a ``--no-nanny`` worker that gets SIGTERM while it closes). A build
    registers the plugin again under the same name: the old one's ``teardown`` then leaves the
    templates to the worker.
    """

    name = PLUGIN_NAME

    def __init__(self, frameworks: Sequence[FrameworkSpec] = ()) -> None:
        self.frameworks = tuple(frameworks)

    def setup(self, worker: Any) -> None:
        kernels = WorkerKernels.of(worker)
        if kernels is None:
            return
        kernels.close_when(functools.partial(_closing, weakref.ref(worker)))
        if self.frameworks:
            threading.Thread(
                target=kernels.warm_quietly, args=(self.frameworks,), name="livecells-warm", daemon=True
            ).start()

    def teardown(self, worker: Any) -> None:
        if worker.status in CLOSING:
            kernels = WorkerKernels.of(worker, make=False)
            if kernels is not None:
                kernels.close_soon()  # not on the worker's event loop, which goes on closing


#: The states of a worker that is closing or closed: its kernels end, its sessions stop.
CLOSING = frozenset({Status.closing, Status.closed, Status.failed})


def _closing(worker: weakref.ref[Any]) -> bool:
    """Whether the worker has started to close (or is gone)."""
    alive = worker()
    return alive is None or alive.status in CLOSING


def _still_wanted(worker: Any, key: str) -> bool:
    """Whether the scheduler still wants the task ``key`` that this thread runs (a closing
    worker wants none: it will not hand the result back)."""
    if getattr(worker, "status", None) in CLOSING:
        return False
    tasks = getattr(getattr(worker, "state", None), "tasks", None)
    if tasks is None:
        return True
    task = tasks.get(key)
    return task is not None and task.state not in {"cancelled", "released", "forgotten"}


def run_on_worker(job: SessionJob, key: str, topic: str, fork: bool = True) -> SessionRecord:
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
        kernels.close_when(functools.partial(_closing, weakref.ref(worker)))  # also without the plugin
        declared = int(worker.state.total_resources.get(GPU_RESOURCE, 0))
        # Each cell the session sends, told to the build (its progress line) as an event.
        told = cell_listener.set(lambda _, number, cells: worker.log_event(topic, {"token": key, "cell": number}))
        try:
            with WorkerDevices.of(worker, declared, GPU_RESOURCE).lease(job.gpus) as lease, kernels.session(
                job.framework, fork, wanted
            ) as factory:
                record = asyncio.run(run_watched(with_reachable_log(job), lease, wanted, factory))
        except DeviceError as err:
            problem = f"the Dask worker {worker.address} on {host} cannot lend GPUs: {err}"
        except TaskCancelledError:
            pass
        finally:
            cell_listener.reset(told)
        if record is None and problem is None:
            problem = "the session was cancelled"
    if record is None:
        record = failed_record(job, problem or "not run", time.perf_counter() - started)
    record.provenance.extra["worker"] = worker.address
    record.provenance.host = host
    return record
