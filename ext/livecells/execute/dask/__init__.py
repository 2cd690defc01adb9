"""The Dask executor: each session that runs is one task on a worker of a Dask cluster.

``livecells_executor = "tcp://host:port"`` (or ``tls://``, ``ws://``, ... ; or a function returning
a ``distributed.Client``) selects :class:`DaskExecutor`. The build's side is :mod:`.cluster`
(connecting, checking, registering the workers' plugin) and :mod:`.scheduler` (one task per
session, retries after a lost worker, cancellation); the worker's side is :mod:`.worker`, over
the executor-independent :mod:`livecells.execute.worker` (GPU lending, warm kernels, the guard).

Warm kernels: when livecells connects, it registers :class:`.worker.KernelsPlugin` on the cluster,
so that every worker keeps a template per framework that has imported it, and forks each session's
kernel from it, as a local build does; the templates start while Sphinx reads the pages, and live
as long as the worker (``livecells_fork_kernels = False``: fresh kernels).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from livecells.execute.dask.cluster import ClusterAddress, check_executor
from livecells.execute.executors import Capacity, Resources
from livecells.model.frameworks import FrameworkSpec

if TYPE_CHECKING:
    from livecells.execute.dask.scheduler import DaskScheduler


@dataclass(frozen=True)
class DaskExecutor:
    """Sessions on the workers of the Dask cluster at ``address`` (or that a client factory
    connects to); kernels start there, from each worker's own templates and GPUs."""

    address: ClusterAddress
    runs_locally = False

    def check(self, warm: Sequence[FrameworkSpec]) -> Capacity:
        info = check_executor(self.address, warm=warm)
        return Capacity(gpus_per_session=info.gpus_per_worker, description=info.describe(), notes=info.notes)

    def scheduler(self, resources: Resources) -> DaskScheduler:
        from livecells.execute.dask.scheduler import DaskScheduler

        return DaskScheduler(self.address, jobs=resources.jobs or "auto", fork=resources.fork)
