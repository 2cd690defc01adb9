"""Executors: where a build's sessions run, chosen by ``livecells_executor``.

An :class:`Executor` is asked two things by the build: :meth:`~Executor.check`, when the build
starts and before any page is read (can sessions run, and with how many GPUs each), and
:meth:`~Executor.scheduler`, after reading (the :class:`~.scheduler.Scheduler` that runs this
build's sessions). ``runs_locally`` says whether its sessions are kernels on the build's own
machine, which the build then prepares (a fork server's templates start while Sphinx reads).

:func:`executor_for` turns the config value into an executor: ``"local"``, an address whose
scheme names an executor (:func:`known_schemes`), a function that returns a Dask client, or an
executor object (or class) itself. A new executor is a package of its own: a class taking the
address, named for its scheme in the ``livecells.executors`` entry-point group (as livecells
names its own, :data:`SCHEMES`), with no edit of livecells. Nothing here imports an executor's
module until it is chosen, nor jupyter_client.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from livecells.errors import ExecutorError
from livecells.model.frameworks import FrameworkSpec

if TYPE_CHECKING:
    from livecells.execute.devices import GPU
    from livecells.execute.forkserver.server import ForkServer
    from livecells.execute.scheduler import Scheduler
    from livecells.kernel_side.reaper import Guard


@dataclass(frozen=True)
class Capacity:
    """What an executor says when the build starts."""

    #: The most GPUs one session can lease; None: the build's own machine's, which it detects.
    gpus_per_session: int | None = None
    #: One line for the build's log (empty: nothing to say).
    description: str = ""
    #: Set-ups that will give noisy timings, for the build to warn about.
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Resources:
    """What the build hands an executor to make its scheduler from."""

    #: The build machine's GPUs that sessions may lease (none with ``livecells_device = 'cpu'``,
    #: or when the executor's :class:`Capacity` said how many a session gets elsewhere).
    gpus: Sequence[GPU] = ()
    #: ``livecells_jobs``: the most sessions at once; None for ``'auto'`` (the executor's choice).
    jobs: int | None = None
    #: ``livecells_fork_kernels``: start kernels by forking a template that imported the framework.
    fork: bool = True
    #: The build's fork server and guard, each made on its first call: for kernels on this machine.
    fork_server: Callable[[], ForkServer] | None = field(default=None, compare=False)
    guard: Callable[[], Guard] | None = field(default=None, compare=False)


@runtime_checkable
class Executor(Protocol):
    """Where sessions run: see the module's docstring."""

    #: Sessions run in kernels on the build's machine, started from the build's fork server.
    runs_locally: bool

    def check(self, warm: Sequence[FrameworkSpec]) -> Capacity:
        """Whether sessions can run (else :class:`ExecutorError`), before any page is read;
        ``warm``: frameworks whose kernels the executor may start preparing meanwhile."""
        ...

    def scheduler(self, resources: Resources) -> Scheduler:
        """The scheduler that runs this build's sessions."""
        ...


@dataclass(frozen=True)
class LocalExecutor:
    """``"local"``: kernels on the build's machine, over its GPUs, forked from the build's fork
    server (with ``livecells_fork_kernels``) and watched by its guard."""

    address: str = "local"
    runs_locally = True

    def check(self, warm: Sequence[FrameworkSpec]) -> Capacity:
        return Capacity()

    def scheduler(self, resources: Resources) -> Scheduler:
        from livecells.execute.scheduler import LocalScheduler

        jobs = resources.jobs or max(1, len(resources.gpus))
        server = resources.fork_server() if resources.fork and resources.fork_server else None
        guard = resources.guard() if resources.guard else None
        return LocalScheduler(resources.gpus, jobs, fork_server=server, guard=guard)


#: livecells' own executors of each address scheme (``scheme://...``), as ``"module:class"``; the
#: class is called with the address. Dask's schemes; an address without one is Dask's
#: (``tcp://``). The same entries are livecells' in the :data:`ENTRY_POINTS` group (pyproject.toml).
SCHEMES: dict[str, str] = {
    "local": "livecells.execute.executors:LocalExecutor",
    **{
        scheme: "livecells.execute.dask:DaskExecutor"
        for scheme in ("tcp", "tls", "ws", "wss", "ucx", "inproc")
    },
}
#: The scheme of an address written without one (``host:8786``).
DEFAULT_SCHEME = "tcp"
#: What a function given as ``livecells_executor`` is taken for: one that returns a Dask client.
FACTORY = "livecells.execute.dask:DaskExecutor"
#: Where installed packages name their executors: ``scheme = "module:Class"``.
ENTRY_POINTS = "livecells.executors"


def known_schemes() -> dict[str, list[str]]:
    """Each scheme's executors: livecells' own (:data:`SCHEMES`), then those that installed
    packages name in :data:`ENTRY_POINTS` (a package cannot take a scheme of livecells'; two
    packages naming one scheme are both listed, and using it is an error that names them)."""
    from importlib.metadata import entry_points

    found = {scheme: [target] for scheme, target in SCHEMES.items()}
    for entry in entry_points(group=ENTRY_POINTS):
        scheme = entry.name.lower()
        if scheme in SCHEMES:
            continue  # livecells' own line (pyproject.toml), or a package that would replace it
        if entry.value not in found.setdefault(scheme, []):
            found[scheme].append(entry.value)
    return found


def _load(target: str) -> Callable[..., Executor]:
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def scheme_of(address: str) -> str:
    """``tcp`` of ``tcp://host:8786``; ``local`` of ``local``; the default of ``host:8786``."""
    if address == "local":
        return "local"
    scheme, found, _ = address.partition("://")
    return scheme.lower() if found else DEFAULT_SCHEME


def executor_for(value: Any) -> Executor:
    """The executor ``livecells_executor`` names; :class:`ExecutorError` when none. An executor
    class is made with no arguments (a class defined in conf.py cannot be pickled; Sphinx leaves
    classes out of the environment it pickles, not instances)."""
    if isinstance(value, type) and callable(getattr(value, "scheduler", None)):
        value = value()
    if isinstance(value, Executor):
        return value
    if isinstance(value, str):
        scheme = scheme_of(value.strip())
        if "://" not in value and scheme != "local" and not re.fullmatch(r"\S+:\d+", value.strip()):
            # Neither "local", nor "scheme://...", nor "host:port" (a typo such as "locla"):
            # not taken for a Dask address, which would stop the build as unreachable.
            raise ExecutorError("not 'local', an address 'scheme://host:port', nor 'host:port'")
        if scheme in SCHEMES:  # livecells' own: no package can name another (known_schemes)
            return _load(SCHEMES[scheme])(value.strip())
        schemes = known_schemes()
        if scheme not in schemes:
            known = ", ".join(f"'{s}'" if s == "local" else f"'{s}://'" for s in schemes)
            raise ExecutorError(f"no executor for the scheme '{scheme}://' (livecells knows {known})")
        if len(schemes[scheme]) > 1:
            named = ", ".join(schemes[scheme])
            raise ExecutorError(f"installed packages name more than one executor for '{scheme}://': {named}")
        (target,) = schemes[scheme]
        try:  # another package's: what is wrong with it names it
            executor = _load(target)
        except (ImportError, AttributeError) as err:
            raise ExecutorError(f"the executor for '{scheme}://' ({target}) cannot be loaded: {err}") from err
        return executor(value.strip())
    if callable(value):
        return _load(FACTORY)(value)
    raise ExecutorError(
        f"a {type(value).__name__} is not an executor (one has runs_locally, check and scheduler)"
    )
