"""The processes a build owns beside Sphinx: the fork server, the guard, the Dask cluster check.

Local execution makes this process a subreaper and starts a guard (:mod:`livecells.execute.reaper`)
that kills every session's processes if the build dies, however; with
``livecells_fork_kernels`` a fork server keeps a template per framework. Both are made on first
use and closed when the build finishes, or on the way out of an interrupted one. SIGTERM stops
execution as Ctrl-C does, so that every kernel is shut down.
"""

from __future__ import annotations

import atexit
import contextlib
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sphinx.util import logging

from livecells.config import conf_location

if TYPE_CHECKING:  # the execute stage (jupyter_client) is imported only by builds that run cells
    from livecells.config import LivecellsConfig
    from livecells.execute.forkserver import ForkServer
    from livecells.execute.reaper import Guard

logger = logging.getLogger(__name__)


@dataclass
class Processes:
    """The build's own processes (none until a build needs them)."""

    fork_server: ForkServer | None = None
    guard: Guard | None = None

    def guard_for(self, config: LivecellsConfig) -> Guard | None:
        """The guard (local execution), made on first use; this process becomes a subreaper."""
        if self.guard is None and config.executor == "local":
            from livecells.execute.reaper import Guard, set_subreaper

            set_subreaper()  # orphans of kernels that died come here, not to PID 1
            self.guard = Guard()
            # Ctrl-C ends a build without build-finished: close it on the way out too.
            atexit.register(self.close)
        return self.guard

    def fork_server_for(self, config: LivecellsConfig, confdir: str | None = None) -> ForkServer | None:
        """The fork server (local execution with livecells_fork_kernels), made on first use; its
        notes on preloads point at the line of ``confdir``'s conf.py that names them."""
        if not config.fork_kernels or config.executor != "local":
            return None
        if self.fork_server is None:
            from livecells.execute.forkserver import ForkServer

            where = conf_location(confdir, "livecells_frameworks")
            self.fork_server = ForkServer(
                warn=lambda message: logger.info(f"livecells: {message}"),
                note=lambda message: logger.info(f"livecells: {message}", location=where),
            )
            # Ctrl-C ends a build without build-finished: close the templates on the way out too.
            atexit.register(self.close)
        return self.fork_server

    def close(self) -> None:
        """End the fork server and the guard (every session has been shut down by now)."""
        if self.fork_server is not None:
            self.fork_server.close()
            self.fork_server = None
        if self.guard is not None:
            from livecells.execute.reaper import set_subreaper

            self.guard.close()
            self.guard = None
            set_subreaper(False)  # a process that builds again (a test run) is itself again


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops execution like Ctrl-C does, so every kernel is shut down on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
