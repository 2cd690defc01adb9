"""Template side: how long a fork-server template serves, and its kernels with it.

A build's own template serves while the build that started it (its parent) lives. A template
kept warm (``livecells_keep_warm``) outlives that build, so that the next build adopts it instead
of importing the framework again; then it serves while its *owner* lives (the session leader of the
build that started it: the terminal's shell, or the process that runs the edit loop) and at most
``idle`` seconds with no request and no kernel running. Either way each kernel dies with the build
that asked for it (its *launcher*): the template kills the tree of a kernel whose launcher is gone,
as the launcher's guard does.

It runs in the kernel's own Python, loaded by path beside ``template.py``: standard library only
(the reaper is handed in).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from typing import Any


class Lifetime:
    """When the template's loop ends, and which kernels lost their launcher.

    ``warm``: None for a build's own template; else ``{"idle": seconds, "owner": pid,
    "owner_start": its start time, "record": the file that names the template to later builds}``.
    """

    def __init__(self, parent: int, warm: Mapping[str, Any] | None, reaper: Any) -> None:
        self.parent = parent
        self.warm = dict(warm) if warm else None
        self.reaper = reaper
        self.last = time.monotonic()
        #: Each kernel's launcher: pid -> (the launcher's pid, its start time).
        self.launchers: dict[int, tuple[int, int | None]] = {}

    def goes_on(self, children: Mapping[int, int | None]) -> bool:
        """Whether the template serves on: its launcher lives (a build's own), or its owner lives
        and a kernel runs or a request came less than ``idle`` seconds ago (kept warm)."""
        if self.warm is None:
            return os.getppid() == self.parent
        if self.reaper.process_start(self.warm["owner"]) != self.warm["owner_start"]:
            return False
        if any(code is None for code in children.values()):
            self.last = time.monotonic()
        return time.monotonic() - self.last < float(self.warm["idle"])

    def used(self) -> None:
        """A request came: the idle time starts again."""
        self.last = time.monotonic()

    def launched(self, pid: int, request: Mapping[str, Any]) -> None:
        """Kernel ``pid`` was forked for ``request``, whose launcher it must not outlive."""
        launcher = request.get("launcher")
        if isinstance(launcher, int):
            self.launchers[pid] = (launcher, request.get("launcher_start"))

    def orphaned(self, children: Mapping[int, int | None]) -> list[int]:
        """Kill the process tree of each running kernel whose launcher is gone; their pids."""
        killed = []
        for pid, (launcher, start) in list(self.launchers.items()):
            if children.get(pid, 0) is not None:
                del self.launchers[pid]  # ended: nothing to watch
            elif self.reaper.process_start(launcher) != start:
                self.reaper.kill_tree(pid)
                killed.append(pid)
                del self.launchers[pid]
        return killed

    def close(self, path: str) -> None:
        """A warm template's last act: its socket's folder, log and record go with it (the
        record only while it still names this template)."""
        if self.warm is None:
            return
        record = self.warm.get("record")
        try:
            with open(record, encoding="utf-8") as handle:
                if json.load(handle).get("pid") == os.getpid():
                    os.unlink(record)
        except (OSError, ValueError, TypeError, AttributeError):
            pass
        for leftover in (path, path[: -len(".sock")] + ".log"):
            try:
                os.unlink(leftover)
            except OSError:
                pass
        try:
            os.rmdir(os.path.dirname(path))
        except OSError:
            pass
