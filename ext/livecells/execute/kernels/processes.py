"""How a session's kernel ends, seen from the build: its processes killed, its death told in words.

:class:`~livecells.execute.kernels.session.KernelSession` owns one kernel and everything it started.
:func:`kill_session` kills that tree (also what left the kernel's process group or session, and the
orphans of a kernel that died before, found by the session's token) without ever signalling a pid
that now names another process; :func:`dead` waits until the kernel's teardown is over, so that it
never runs beside the next session's cells; :func:`death_reason` says why a kernel died.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from typing import Any

from livecells.kernel_side.reaper import Guard, kill_adopted, kill_tree, process_start, process_table


def kill_session(
    pid: int | None, pid_start: int | None, token: str, guard: Guard | None
) -> tuple[list[int], bool]:
    """Kill the kernel ``pid`` (the process that started at ``pid_start``) and every process it
    started, also those that left its process group or session (they stay in its tree: the kernel
    is a subreaper), and orphans of a kernel that died before (they carry the session's ``token``).

    Returns the other processes killed, and whether the kernel itself was.
    """
    if pid and (pid_start is None or process_start(pid) != pid_start):
        # Gone (or never seen): its pid is not signalled, in case it names another process
        # now; orphans it left are found below by the session's token.
        if guard is not None:
            guard.unwatch(pid)
        pid = None
    if pid:  # stopped before /proc is read: nothing it forks later is missed
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGSTOP)
    table = process_table()  # one walk of /proc for both: orphans are there from before
    killed = kill_tree(pid, table=table) if pid else []
    killed += kill_adopted(token, exclude=[pid, *killed] if pid else killed, table=table)
    if pid and guard is not None:
        guard.unwatch(pid)
    return [p for p in killed if p != pid], bool(pid) and pid in killed


async def dead(pid: int, timeout: float) -> bool:
    """Wait until ``pid`` is gone or a zombie (a killed process's teardown is over); False if
    it is still running after ``timeout`` seconds (or /proc cannot say)."""
    deadline = time.monotonic() + timeout
    delay = 0.0005
    while True:
        try:
            with open(f"/proc/{pid}/stat", "rb") as handle:
                stat = handle.read()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        if stat[stat.rfind(b")") + 2 :][:1] in (b"Z", b"X"):
            return True
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.01)


def death_reason(process: Any) -> str:
    """Why the kernel whose Popen-like ``process`` ended died, in words."""
    code = process.poll() if process is not None else None
    if code is None:
        return "the kernel died"
    if getattr(process, "unknown", ""):  # a forked kernel whose template is gone
        return f"the kernel died ({process.unknown})"
    if code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = f"signal {-code}"
        hint = " (killed, perhaps for lack of memory)" if name == "SIGKILL" else ""
        return f"the kernel died of {name}{hint}"
    return f"the kernel exited with status {code}"
