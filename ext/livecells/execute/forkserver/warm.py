"""Templates kept warm between builds (``livecells_keep_warm``), for edit loops.

A build that keeps its templates warm leaves each one running when it ends, named by a *record*
in the book's doctree folder (``livecells-warm/<digest>.json``, the digest of the template's key
and environment); the next build of the book adopts it instead of importing the framework again.
The rules that hold a build's own templates hold these too:

- **Owner.** A template kept warm serves while its owner lives: the session leader of the build
  that started it (the terminal's shell, the edit loop started in its own session), else that
  build's parent; with ``'auto'``, the sphinx-autobuild that runs the build (:func:`edit_loop`);
  and at most ``idle`` seconds with no request and no kernel running (:mod:`.lifetime`). Each
  kernel still dies with the build that asked for it.
- **Staleness.** A template is adopted only if its key (kernel python, preload, kernelspec env)
  and the environment it imported with are this build's, its program files (``template.py`` and
  what it loads) are unchanged, and so is every file it imported and every installed folder
  (an install or uninstall): else it is stopped and a new one starts.
- **One build at a time.** A build holds a record's lock (``flock``, released by the kernel when
  the build dies, however) from adoption or start to its end; a second build that finds it held
  starts a template of its own, which ends with it, as without keep-warm.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import signal
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from livecells.errors import ForkServerError
from livecells.execute.forkserver.forked import TIMESTAMP_SLACK_NS, AdoptedProcess, Template, changed_file
from livecells.kernel_side import lifetime, reaper, sharing
from livecells.kernel_side import template as program
from livecells.kernel_side.reaper import process_start

#: The files a template runs besides what it imports: a change to one means a new template.
PROGRAM_FILES = (program.__file__, sharing.__file__, lifetime.__file__, reaper.__file__)


#: How long a template may idle under an edit loop with ``livecells_keep_warm = 'auto'``.
EDIT_LOOP_IDLE = 600.0


def edit_loop() -> int | None:
    """The sphinx-autobuild that runs this build: this process or its nearest ancestor whose
    program is ``sphinx-autobuild`` (its script, or ``python -m sphinx_autobuild``; this process
    where an older release builds in its own process); None when no edit loop runs this build.
    Having imported ``sphinx_autobuild`` does not count. Read from ``/proc`` (the fork server is
    Linux's alone)."""
    pid = os.getpid()
    if _is_edit_loop(pid):
        return pid
    for _ in range(64):  # ancestors; a loop in /proc cannot happen, a bound costs nothing
        status = reaper.process_status(pid)
        if status is None or status[1] <= 1:
            return None
        pid = status[1]
        if _is_edit_loop(pid):
            return pid
    return None


def _is_edit_loop(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            argv = handle.read().split(b"\0")
    except OSError:
        return False
    # `sphinx-autobuild ...` as the kernel shows a script: its interpreter, then its path.
    if any(os.path.basename(word) == b"sphinx-autobuild" for word in argv[:2]):
        return True
    return argv[1:3] == [b"-m", b"sphinx_autobuild"]


@dataclass(frozen=True)
class KeepWarm:
    """Where a build's warm templates are recorded, how long they may idle, and their owner."""

    folder: str
    idle: float
    owner: int
    owner_start: int | None

    @classmethod
    def here(cls, folder: str, idle: float, owner: int | None = None) -> KeepWarm:
        """Templates for this process's builds: owned by ``owner``, else its session leader
        (else its parent)."""
        if owner is None:
            try:
                owner = os.getsid(0)
            except OSError:
                owner = 0
            if owner in (0, 1, os.getpid()):  # no session of its own to outlive this build
                owner = os.getppid()
        return cls(folder, float(idle), owner, process_start(owner))

    @classmethod
    def chosen(cls, folder: str, setting: float | str) -> KeepWarm | None:
        """What ``livecells_keep_warm`` asks for: ``'auto'``, kept :data:`EDIT_LOOP_IDLE`
        seconds for the sphinx-autobuild that runs this build (and no longer than it lives),
        else not at all; seconds, as long as the session lives; 0: not kept."""
        if setting == "auto":
            loop = edit_loop()
            return cls.here(folder, EDIT_LOOP_IDLE, owner=loop) if loop is not None else None
        return cls.here(folder, float(setting)) if setting else None

    def settings(self, record: str) -> dict[str, Any]:
        """What the template is told (see :class:`~livecells.kernel_side.lifetime.Lifetime`)."""
        return {"idle": self.idle, "owner": self.owner, "owner_start": self.owner_start, "record": record}


def record_name(key: Sequence[Any], env: Mapping[str, str]) -> tuple[str, str]:
    """The name of the record for a template of ``key`` that imports with ``env``, and the part
    of it that names the key alone (the records of one key in other environments share it)."""
    text = json.dumps([key[0], list(key[1]), [list(p) for p in key[2]]])
    prefix = hashlib.sha256(text.encode()).hexdigest()[:16]
    return f"{prefix}-{env_digest(env)[:12]}", prefix


def env_digest(env: Mapping[str, str]) -> str:
    return hashlib.sha256(json.dumps(sorted(env.items())).encode()).hexdigest()


def program_state() -> dict[str, list[int]]:
    return {path: sharing.file_state(os.stat(path)) for path in PROGRAM_FILES}


class Slot:
    """One record of a book's warm templates, and its lock (held by one build at a time)."""

    def __init__(self, keep: KeepWarm, key: Sequence[Any], env: Mapping[str, str]) -> None:
        self.keep = keep
        name, self.prefix = record_name(key, env)
        self.record = os.path.join(keep.folder, f"{name}.json")
        self.lock_path = os.path.join(keep.folder, f"{name}.lock")
        self._fd: int | None = None

    def take(self) -> bool:
        """Hold the record's lock for this build; False while another build holds it."""
        os.makedirs(self.keep.folder, mode=0o700, exist_ok=True)
        fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            return False
        self._fd = fd
        return True

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # the lock goes with the descriptor
            self._fd = None

    def read(self) -> dict[str, Any] | None:
        try:
            with open(self.record, encoding="utf-8") as handle:
                found = json.load(handle)
        except (OSError, ValueError):
            return None
        return found if isinstance(found, dict) else None

    def write(self, template: Template) -> None:
        """Name a template that has just become ready to later builds (atomically)."""
        info = {
            "pid": template.process.pid,
            "start": process_start(template.process.pid),
            "python": template.python,
            "preload": list(template.preload),
            "env": env_digest(template.env),  # never the variables themselves (secrets)
            "path": template.path,
            "log_path": template.log_path,
            "started_ns": template.started_ns,
            "files": template.files,
            "left": template.left,
            "installed": template.installed,
            "program": template.program,
        }
        temporary = f"{self.record}.{os.getpid()}.tmp"
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump(info, handle)
        os.replace(temporary, self.record)

    def remove(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self.record)


def stale(info: Mapping[str, Any], key: Sequence[Any], env: Mapping[str, str]) -> str:
    """Why the recorded template may not serve this build (or ""); a record of the wrong shape
    (edited, or written by another livecells) serves none."""
    try:
        return _stale(info, key, env)
    except (TypeError, ValueError, AttributeError) as err:
        return f"its record is damaged ({type(err).__name__}: {err})"


def _stale(info: Mapping[str, Any], key: Sequence[Any], env: Mapping[str, str]) -> str:
    if [info.get("python"), tuple(info.get("preload") or ())] != [key[0], tuple(key[1])]:
        return "it was started for another kernel python or preload"
    if info.get("env") != env_digest(env):
        return "it imported with another environment"
    if info.get("program") != program_state():
        return "livecells' template program changed"
    since = int(info.get("started_ns") or 0) - TIMESTAMP_SLACK_NS
    installed = info.get("installed") or {}
    for files in (info.get("files") or {}, installed.get("files") or {}, installed.get("folders") or {}):
        changed = changed_file(files, since)
        if changed is not None:
            return f"{changed} changed since it was imported"
    return ""


def adopt(slot: Slot, key: Sequence[Any], env: Mapping[str, str]) -> tuple[Template | None, str]:
    """The template the slot's record names, if it lives, answers and is not stale; else None and
    why (a stale or stopped one is ended and its record removed). The slot's lock is held."""
    info = slot.read()
    if info is None:
        return None, ""
    pid, start = info.get("pid"), info.get("start")
    process = AdoptedProcess(pid, start) if isinstance(pid, int) and start is not None else None
    damaged = damage(info)
    if damaged:  # names no template this build may use, or stop (its folder is removed then)
        slot.remove()
        return None, f"its record is damaged ({damaged})"
    why = "it is gone" if process is None or process.poll() is not None else stale(info, key, env)
    template = None
    if not why:
        template = Template.adopted(process, info, dict(env))  # type: ignore[arg-type]
        try:
            answer = template.request({"op": "hello"}, timeout=5)
            why = "" if answer.get("pid") == pid else f"another process answers: {answer}"
        except (ForkServerError, TimeoutError, OSError) as err:
            why = str(err) or type(err).__name__
    if why:
        if process is not None and process.poll() is None:
            (template or Template.adopted(process, info, dict(env))).close()
        slot.remove()
        return None, why
    return template, ""


def damage(info: Mapping[str, Any]) -> str:
    """What is wrong with a record's shape ("": nothing): a template is adopted, and stopped, as
    its record says, and stopping one removes its socket's folder, so that folder must be one
    of :func:`socket_folder`'s."""
    path, log_path = info.get("path"), info.get("log_path")
    if not isinstance(path, str) or not os.path.basename(os.path.dirname(path)).startswith(SOCKET_PREFIX):
        return f"its socket {str(path)[:200]!r} is in no folder of livecells' own"
    if not isinstance(log_path, str) or not isinstance(info.get("python"), str):
        return "log_path and python must be strings"
    if not isinstance(info.get("preload"), list) or not isinstance(info.get("files"), dict):
        return "preload must be a list and files a mapping"
    if type(info.get("started_ns")) is not int:
        return "started_ns must be an integer"
    if not all(isinstance(info.get(name) or {}, dict) for name in ("left", "installed", "program")):
        return "left, installed and program must be mappings"
    return ""


#: How the name of a warm template's socket folder starts.
SOCKET_PREFIX = "livecells-warm-"


def socket_folder() -> str:
    """A folder of its own for a warm template's socket and log (mode 0700; short, as AF_UNIX
    paths must be), which the template removes when it ends."""
    base = None if len(tempfile.gettempdir()) < 60 else "/tmp"
    return tempfile.mkdtemp(prefix=SOCKET_PREFIX, dir=base)


def stop_all(folder: str, prefix: str = "", but: str = "", timeout: float = 10.0) -> list[int]:
    """Stop every template recorded in ``folder`` (whose record's name starts with ``prefix``,
    except the record ``but``) that no build holds; the pids stopped. A new template of a key
    stops those of the key kept for another environment; tests stop them all."""
    stopped = []
    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return []
    for name in names:
        record = os.path.join(folder, name)
        if not name.endswith(".json") or not name.startswith(prefix) or record == but:
            continue
        lock = os.open(record[: -len(".json")] + ".lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a build holds it
            os.close(lock)
            continue
        try:
            stopped += _stop(record, timeout)
        finally:
            os.close(lock)
    return stopped


def _stop(record: str, timeout: float) -> list[int]:
    """Stop the template ``record`` names (SIGTERM: it kills its kernels' trees; SIGKILL after
    ``timeout``) and remove the record; its pid, if it was running."""
    stopped = []
    try:
        with open(record, encoding="utf-8") as handle:
            info = json.load(handle)
        pid, start = int(info["pid"]), info["start"]
    except (OSError, ValueError, KeyError, TypeError):
        pid, start = 0, None
    if pid and process_start(pid) == start:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + timeout
        while process_start(pid) == start and time.monotonic() < deadline:
            time.sleep(0.02)
        if process_start(pid) == start:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        stopped.append(pid)
    with contextlib.suppress(OSError):
        os.unlink(record)
    return stopped
