"""No process outlives its session or the build: subreapers, tree kills and a build guard.

Process groups and sessions do not hold a kernel's processes together: a cell may start a daemon
that calls ``setsid()``, double-forks, or changes its process group, and ``killpg`` misses it.
What does hold them together on Linux is ancestry, once orphans cannot escape it:

* every kernel makes itself a *child subreaper* (``PR_SET_CHILD_SUBREAPER``, in the kernel hook),
  so an orphaned descendant is re-parented to the kernel instead of PID 1, and stays in the
  kernel's tree as long as the kernel lives;
* a session's shutdown stops the kernel (``SIGSTOP``: it can start nothing more), kills every
  descendant found by walking ``/proc`` until none is left, then kills the kernel (:func:`kill_tree`);
* a build that executes cells starts one :class:`Guard` process that holds a pidfd of each running
  kernel and of each fork-server template, and reads a pipe from the Sphinx process. When the
  pipe closes, however Sphinx ended (``kill -9`` included), the guard kills every tree still
  registered. It runs no user code, so a cell holding the GIL cannot delay it;
* the Sphinx process itself is a subreaper while it executes cells, so the orphans of a kernel
  that died on its own (out of memory, ``os._exit`` in a cell) come to it, and are killed by the
  session token they carry in their environment (:func:`kill_adopted`).

This module uses the standard library only: the guard runs it as a file (``python -I -S
reaper.py``, see the end), and a fork-server template, in a kernel's Python that need not have
livecells, loads it by its path (:mod:`livecells.kernel_side.template`).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
#: The environment variable that marks every process of a session (value: build id, session id).
SESSION_VARIABLE = "LIVECELLS_SESSION"


def prctl(option: int, value: int) -> bool:
    """Linux's ``prctl(option, value)``, for this process; False where it is not possible (then
    the callers' other watches, of their parent's pid, still hold)."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        return ctypes.CDLL(None, use_errno=True).prctl(option, value, 0, 0, 0) == 0
    except Exception:  # no libc prctl
        return False


def set_subreaper(on: bool = True) -> bool:
    """Make this process a child subreaper (Linux), or no longer one; False where that is not
    possible (orphans go to PID 1 as usual)."""
    return prctl(PR_SET_CHILD_SUBREAPER, int(on))


def die_with_parent(signum: int) -> bool:
    """Have ``signum`` sent to this process when its parent dies (``PR_SET_PDEATHSIG``)."""
    return prctl(PR_SET_PDEATHSIG, signum)


def _stat_fields(pid: int | str) -> list[bytes] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state first), or None."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read()
    except OSError:
        return None
    return stat[stat.rfind(b")") + 2 :].split()  # the command name may hold spaces and ")"


def process_table() -> dict[int, tuple[int, str]]:
    """Every visible process: pid -> (parent pid, state letter), from ``/proc/<pid>/stat``."""
    table = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        rest = _stat_fields(name)
        if rest is not None and len(rest) >= 2 and rest[1].isdigit():
            table[int(name)] = (int(rest[1]), rest[0].decode(errors="replace"))
    return table


def process_start(pid: int) -> int | None:
    """When ``pid`` started (clock ticks since boot, ``/proc/<pid>/stat``), or None if it is gone
    (or a zombie). With the pid, it names one process: a pid can be reused once its process is
    reaped (soon, where ``pid_max`` is 32768), its start time not."""
    rest = _stat_fields(pid)  # state is rest[0]; starttime (field 22) is rest[19]
    if rest is None or len(rest) < 20 or rest[0] in (b"Z", b"X"):
        return None
    return int(rest[19])


def process_status(pid: int) -> tuple[str, int, int, int | None] | None:
    """``pid``'s state letter, parent pid, start time and, once it is a zombie, its exit status
    as ``waitpid`` gives it (None before, or where /proc does not say); None if it is gone.
    Read from ``/proc`` alone: it never waits on the process's parent."""
    rest = _stat_fields(pid)  # state, ppid, ... starttime (field 22) ... exit_code (field 52)
    if rest is None or len(rest) < 20:
        return None
    code = int(rest[49]) if len(rest) > 49 and rest[0] in (b"Z", b"X") else None
    return rest[0].decode(errors="replace"), int(rest[1]), int(rest[19]), code


def descendants(root: int, table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """Living (not zombie) descendants of ``root``, parents before children."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], list(children.get(root, []))
    while todo:
        pid = todo.pop()
        if table[pid][1] not in "ZX":
            found.append(pid)
        todo.extend(children.get(pid, []))
    return found


def kill_tree(
    root: int,
    include_root: bool = True,
    rounds: int = 200,
    table: dict[int, tuple[int, str]] | None = None,
) -> list[int]:
    """Stop ``root``, SIGKILL its descendants until none is left, then kill ``root`` too.

    ``root`` should be a subreaper (its orphans then stay in its tree); a process that forks
    while the walk runs is found in the next round. ``table``: a :func:`process_table` read
    after ``root`` was stopped, for the first round. Returns every pid signalled.

    However the walk ends, ``root`` is killed: a walk that fails is tried again in the next
    round (the error is raised at the end if the last one failed too), and an exception from
    outside (a signal handler's) still kills ``root`` on its way out. A root left stopped would
    hold its tree's last processes, and itself, alive with no one left to kill them.
    """
    killed: list[int] = []
    try:
        os.kill(root, signal.SIGSTOP)
    except OSError:
        include_root = False  # gone already: what is left of its tree went to a subreaper above
    failure: Exception | None = None
    try:
        for _ in range(rounds):
            try:
                found = [pid for pid in descendants(root, table) if pid != os.getpid()]
                failure = None
            except Exception as err:  # /proc changed under the walk: walk again
                found, failure = [], err
            table = None
            if not found and failure is None:
                break
            for pid in found:
                try:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                except OSError:
                    pass
            time.sleep(0.001)
    finally:
        if include_root:
            try:
                os.kill(root, signal.SIGKILL)
                killed.append(root)
            except OSError:
                pass
    if failure is not None:
        raise failure
    return killed


def reap(pids: Iterable[int]) -> None:
    """Collect the exit status of those ``pids`` that are this process's children (no zombies)."""
    for pid in set(pids):
        try:
            os.waitpid(pid, os.WNOHANG)
        except (ChildProcessError, OSError):
            pass


def _guard_main(argv: list[str]) -> None:
    """The guard: ``+PID [TOKEN]`` / ``-PID`` lines on stdin; at EOF, kill every tree still
    registered, and every process that carries a registered kernel's session token, wherever
    it went."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the build's to handle
    watched: dict[int, int | None] = {}  # pid -> pidfd (None: no pidfd_open on this system)
    tokens: dict[int, bytes] = {}  # pid -> its SESSION_VARIABLE entry (kernels have one)
    for line in sys.stdin:
        head, _, token = line.strip().partition(" ")
        if not head[1:].isdigit():
            continue
        pid = int(head[1:])
        if head[0] == "+":
            try:
                watched[pid] = os.pidfd_open(pid)
            except (AttributeError, OSError):
                watched[pid] = None
            if token:  # a forked kernel's /proc environ is its template's: the token comes here
                tokens[pid] = f"{SESSION_VARIABLE}={token}".encode()
        elif head[0] == "-" and pid in watched:
            fd = watched.pop(pid)
            tokens.pop(pid, None)
            if fd is not None:
                os.close(fd)
    for pid, fd in watched.items():
        if fd is not None:
            try:  # still the process registered (not a reused pid)?
                signal.pidfd_send_signal(fd, 0)
            except OSError:
                continue
        _surviving(kill_tree, pid)  # one tree that cannot be walked does not spare the next
    # A kernel that died first (its template died with the build, say) left its descendants to
    # whichever subreaper was still alive, or PID 1: they still carry its session's token.
    _surviving(kill_carrying, set(tokens.values()))


def _surviving(kill: Callable[..., object], what: object) -> None:
    """``kill(what)``, in the guard: an error (written to its stderr, /dev/null in a build) does
    not end the guard, which goes on to the next tree."""
    try:
        kill(what)
    except Exception:  # the guard's last duty is to kill all it can
        import traceback

        traceback.print_exc()


def session_entry(pid: int) -> bytes | None:
    """The ``SESSION_VARIABLE=...`` entry of ``pid``'s environment, if it has one."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            entries = handle.read().split(b"\0")
    except OSError:
        return None
    prefix = f"{SESSION_VARIABLE}=".encode()
    return next((e for e in entries if e.startswith(prefix)), None)


def kill_carrying(entries: set[bytes]) -> list[int]:
    """Kill (with their trees) every process that carries one of these session entries."""
    if not entries:
        return []
    me = os.getpid()
    killed: list[int] = []
    for pid, (_, state) in process_table().items():
        if pid != me and state not in "ZX" and session_entry(pid) in entries:
            killed += kill_tree(pid)
    return killed


class Guard:
    """The build's guard process (see the module's notes). ``close`` ends it; safe twice."""

    def __init__(self) -> None:
        self.process: subprocess.Popen[bytes] | None = None
        if not sys.platform.startswith("linux"):
            return
        try:
            self.process = subprocess.Popen(
                # This file, run by path (-I: its folder is not put on sys.path, no user site).
                [sys.executable, "-I", "-S", os.path.abspath(__file__), "livecells-guard"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:
            self.process = None

    def _send(self, line: str) -> None:
        if self.process is None or self.process.stdin is None:
            return
        try:
            self.process.stdin.write(line.encode() + b"\n")
            self.process.stdin.flush()
        except (OSError, ValueError):
            pass

    def watch(self, pid: int, token: str = "") -> None:
        """Kill ``pid``'s tree if the build dies; and every process that carries ``token`` as its
        :data:`SESSION_VARIABLE` (what is left of a kernel that died first)."""
        self._send(f"+{pid} {token}" if token.isalnum() else f"+{pid}")

    def unwatch(self, pid: int) -> None:
        self._send(f"-{pid}")

    def close(self) -> None:
        process, self.process = self.process, None
        if process is None:
            return
        if process.stdin is not None:
            try:
                process.stdin.close()
            except OSError:
                pass
        try:
            process.wait(5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _environ_has(pid: int, entry: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as handle:
            return entry in handle.read().split(b"\0")
    except OSError:
        return False


def kill_adopted(
    token: str, exclude: Iterable[int] = (), table: dict[int, tuple[int, str]] | None = None
) -> list[int]:
    """Kill (with their trees) every process that carries ``token`` as its
    :data:`SESSION_VARIABLE`, wherever it hangs, and reap those that are this process's children:
    orphans of a session's kernel that died before its shutdown (``table``: a
    :func:`process_table` read since it died, or None to read one). Not only this process's
    children: a kernel killed by a signal shows as dead before the kernel releases its children,
    which for a while still hang under it, or under a process of theirs."""
    if not sys.platform.startswith("linux"):
        return []
    entry = f"{SESSION_VARIABLE}={token}".encode()
    skip = set(exclude) | {os.getpid()}
    killed: list[int] = []
    for _ in range(3):  # again, for any that were being handed to a new parent as we looked
        table = process_table() if table is None else table
        carriers = [
            pid for pid, (_, state) in table.items()
            if pid not in skip and pid not in killed and state not in "ZX" and _environ_has(pid, entry)
        ]
        if not carriers:
            break
        for pid in carriers:
            if pid not in killed:
                killed += kill_tree(pid)
        table = None
    reap(killed)
    return killed


if __name__ == "__main__":  # the guard (see Guard)
    _guard_main(sys.argv[1:])
