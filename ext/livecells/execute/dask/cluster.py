"""Connecting to a Dask cluster and checking it, from the build's side.

:func:`check_executor` connects once when the build starts, waits for a worker and describes the
cluster (:class:`ClusterInfo`); with frameworks to warm, it registers the worker plugin that keeps
each worker's kernel templates (:func:`start_kernels`, :class:`.worker.KernelsPlugin`). A
``tcp://host:port`` where nothing answers is said within seconds (:func:`_probe_address`), not
after Dask's own connection timeout.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from livecells.errors import ExecutorError
from livecells.model.frameworks import FrameworkSpec

GPU_RESOURCE = "GPU"
#: Declared by workers that have more threads than CPU sessions they should run at once.
SLOT_RESOURCE = "livecells-slot"
#: The name of the worker plugin that keeps each worker's templates.
PLUGIN_NAME = "livecells-kernels"

#: A scheduler's address, or a function that returns a ``distributed.Client``.
ClusterAddress = str | Callable[[], Any]


def _distributed() -> Any:
    """The ``distributed`` package (importing it also loads its part of Dask's configuration)."""
    try:
        import distributed
    except ImportError:
        raise ExecutorError(
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
        raise ExecutorError(f"the Dask scheduler at {address} cannot be reached ({why})") from None


def connect(executor: ClusterAddress, timeout: float) -> tuple[Any, bool]:
    """A client of the cluster, and whether livecells owns it (and so closes it)."""
    Client = _distributed().Client

    if callable(executor):
        try:
            client = executor()
        except Exception as err:  # the user's factory: any failure is reported
            raise ExecutorError(f"the factory failed: {type(err).__name__}: {err}") from None
        if not isinstance(client, Client):
            raise ExecutorError(
                f"the factory returned {type(client).__name__}, not a distributed.Client"
            )
        return client, False
    _probe_address(executor, min(timeout, PROBE_TIMEOUT))
    try:
        client = Client(executor, timeout=timeout, set_as_default=False)
    except Exception as err:  # OSError, TimeoutError, ValueError for a bad address
        raise ExecutorError(
            f"the Dask scheduler at {executor} cannot be reached: {err or type(err).__name__}"
        ) from None
    return client, True


def cluster_info(client: Any, timeout: float) -> ClusterInfo:
    """Wait (up to ``timeout``) for a worker, then describe the cluster's workers."""
    address = client.scheduler.address
    try:
        client.wait_for_workers(1, timeout=timeout)
    except Exception:  # TimeoutError; older versions raise others
        raise ExecutorError(
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


def describe_executor(executor: ClusterAddress) -> str:
    """How messages name the executor: the address, or the factory's name."""
    if callable(executor):
        return f"{getattr(executor, '__qualname__', type(executor).__name__)}()"
    return repr(executor)


def check_executor(
    executor: ClusterAddress, timeout: float | None = None, *, warm: Sequence[FrameworkSpec] = ()
) -> ClusterInfo:
    """Connect once and describe the cluster; an unreachable one is an :class:`ExecutorError`.

    Meant for ``builder-inited``, so that a wrong address stops the build before any page is read.
    With ``warm``, the workers start those frameworks' templates meanwhile (:func:`start_kernels`,
    in a thread of its own: the build goes on reading while the workers import).
    """
    try:
        timeout = connect_timeout() if timeout is None else timeout
        client, owned = connect(executor, timeout)
    except ExecutorError as err:
        raise named(executor, err) from None
    try:
        info = cluster_info(client, timeout)
    except ExecutorError as err:
        if owned:
            client.close()
        raise named(executor, err) from None
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


def named(executor: ClusterAddress, problem: ExecutorError) -> ExecutorError:
    """The problem, said of ``livecells_executor``."""
    return ExecutorError(f"livecells_executor = {describe_executor(executor)}: {problem}")


def start_kernels(client: Any, frameworks: Sequence[FrameworkSpec]) -> str | None:
    """Have every worker (also those that join later) keep warm kernels, and start the templates
    of ``frameworks`` now, in the background; why not, if it failed (sessions then start their
    own templates, or fresh kernels)."""
    from livecells.execute.dask.worker import KernelsPlugin

    try:
        client.register_plugin(KernelsPlugin(frameworks), name=PLUGIN_NAME)
    except Exception as err:  # workers without livecells, an old distributed, ...
        return f"the workers could not start warm kernels: {type(err).__name__}: {err}"
    return None
