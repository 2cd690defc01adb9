"""The processes a build owns beside Sphinx for sessions on its machine: fork server, guard.

An executor whose sessions run here (``"local"``) asks for a guard
(:mod:`livecells.kernel_side.reaper`), which makes this process a subreaper and kills every session's
processes if the build dies, however; with ``livecells_fork_kernels``, for a fork server, which
keeps a template per framework. Both are made on first use and closed when the build finishes,
or on the way out of an interrupted one; with ``livecells_keep_warm``, the templates live on for
the next build of the book (:mod:`livecells.execute.forkserver.warm`). SIGTERM stops execution
as Ctrl-C does, so that every
kernel is shut down.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sphinx.util import logging

from livecells.sphinx_util import conf_location

if TYPE_CHECKING:  # the execute stage (jupyter_client) is imported only by builds that run cells
    from livecells.execute.forkserver.server import ForkServer
    from livecells.kernel_side.reaper import Guard

logger = logging.getLogger(__name__)


def probe_folder(doctreedir: str | None) -> str | None:
    """Where templates keep their preload probe's answers (``kernel_side/sharing.cached_probe``):
    ``$LIVECELLS_CACHE_DIR``, else the user's cache (``$XDG_CACHE_HOME``, ``~/.cache``), under
    ``livecells/probes``. An answer rests on the interpreter, its environment, ``sys.path`` and
    the state of every file the probe imported, not on the book: one user's books, checkouts and
    fresh build folders share it, and the first build of each no longer imports its frameworks
    twice. Where that folder cannot be written, the doctree folder (or None)."""
    base = os.environ.get("LIVECELLS_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "livecells"
    )
    folder = os.path.join(base, "probes")
    try:
        os.makedirs(folder, mode=0o700, exist_ok=True)
        if os.access(folder, os.W_OK | os.X_OK):
            return folder
    except OSError:
        pass
    return os.path.join(doctreedir, "livecells-probe") if doctreedir else None


@dataclass
class Processes:
    """The build's own processes, for sessions on this machine (none until an executor asks)."""

    server: ForkServer | None = None
    watcher: Guard | None = None

    def guard(self) -> Guard:
        """The guard, made on first use; this process becomes a subreaper."""
        if self.watcher is None:
            from livecells.kernel_side.reaper import Guard, set_subreaper

            set_subreaper()  # orphans of kernels that died come here, not to PID 1
            self.watcher = Guard()
            # Ctrl-C ends a build without build-finished: close it on the way out too.
            atexit.register(self.close)
        return self.watcher

    def fork_server(
        self, env_drop: Sequence[str], confdir: str | None = None, keep_warm: float | str = 0.0,
        doctreedir: str | None = None,
    ) -> ForkServer:
        """The fork server, made on first use; its templates drop the variables ``env_drop``
        names (livecells_env_drop) from their environment, and its notes on preloads point at the
        line of ``confdir``'s conf.py that names them. ``keep_warm``: livecells_keep_warm (seconds
        its templates may idle after the build, 0 or ``'auto'``, see ``KeepWarm.chosen``), the
        templates recorded in ``doctreedir`` for the next build; their preload probe's answers
        go to :func:`probe_folder`."""
        if self.server is None:
            from livecells.execute.forkserver.server import ForkServer
            from livecells.execute.forkserver.warm import KeepWarm

            where = conf_location(confdir, "livecells_frameworks")
            warm = KeepWarm.chosen(os.path.join(doctreedir, "livecells-warm"), keep_warm) if doctreedir else None
            self.server = ForkServer(
                warn=lambda message: logger.info(f"livecells: {message}"),
                note=lambda message: logger.info(f"livecells: {message}", location=where),
                tell=lambda message: logger.verbose(f"livecells: {message}"),
                env_drop=env_drop,
                keep_warm=warm,
                probe_cache=probe_folder(doctreedir),
            )
            # Ctrl-C ends a build without build-finished: close the templates on the way out too.
            atexit.register(self.close)
        return self.server

    def close(self) -> None:
        """End the fork server and the guard (every session has been shut down by now)."""
        if self.server is not None:
            self.server.close()
            self.server = None
        if self.watcher is not None:
            from livecells.kernel_side.reaper import set_subreaper

            self.watcher.close()
            self.watcher = None
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
