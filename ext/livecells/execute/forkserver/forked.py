"""The launcher's handles on a fork server's processes: a template, and a kernel forked from one.

:class:`Template` is one template process (the program of :mod:`livecells.kernel_side.template`, run
by the kernel's own Python): its start, its ready line (the files its imports read, the preloads
it left to each kernel), requests over its socket, and its end with every kernel it forked.
:class:`ForkedProcess` is a forked kernel as jupyter_client's ``Popen``: its status read from
``/proc`` or asked of its template, so that a stopped, busy or dead template never holds up a
status check. :class:`~livecells.execute.forkserver.server.ForkServer` decides which template serves
which launch; this module only talks to processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from livecells.errors import ForkServerError
from livecells.kernel_side import sharing
from livecells.kernel_side import template as program
from livecells.kernel_side.reaper import process_start, process_status

#: In every template's (and so every forked kernel's) command line, so tools that look for
#: kernels by "ipykernel" in the command line (tests/conftest.py) find them too.
MARKER = "livecells-ipykernel-forkserver"
#: What every kernel imports while it initialises; imported once in the template instead
# (ipykernel.debugger, through debugpy, is the largest of them).
KERNEL_MODULES = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "ipykernel.comm",
    "IPython.core.completer",
    # Imported by the kernel's shell as it starts.
    "IPython.core.completerlib",
    "IPython.core.debugger",
    "IPython.core.logger",
    "IPython.core.oinspect",
    "IPython.extensions.storemagic",
    "IPython.utils.wildcard",
    "faulthandler",
    "sqlite3",
    "tornado.platform.asyncio",
)
# Not matplotlib: imported before the kernel's shell exists, figures would no longer be shown.
#: A file time this close to a template's start (or later) may be an edit its imports missed:
#: file times lag the clock by up to a timer tick (coarse timestamps).
TIMESTAMP_SLACK_NS = 20_000_000
logger = logging.getLogger(__name__)


class Template:
    """One template process and the socket it listens on."""

    def __init__(
        self,
        python: str,
        preload: Sequence[str],
        workdir: str,
        env: dict[str, str],
        warm: Mapping[str, Any] | None = None,
        probe_cache: str | None = None,
    ) -> None:
        self.python = python
        self.preload = tuple(preload)
        self.env = env  # what the imports saw
        self.path = os.path.join(workdir, f"t-{uuid.uuid4().hex[:8]}.sock")
        self.log_path = self.path[: -len(".sock")] + ".log"
        modules = {"kernel": list(KERNEL_MODULES), "preload": list(self.preload), "warm": warm}
        if probe_cache:  # the preload probe's answer, kept between builds (template.shareable)
            # One file per interpreter, preload and environment: builds of other books (or with
            # other variables) keep their own answers beside it.
            name = hashlib.sha256(json.dumps([python, self.preload, sorted(env.items())]).encode()).hexdigest()[:16]
            modules["probe_cache"] = os.path.join(probe_cache, f"{name}.json")
        #: Before any import: a file changed after this may have been read old or new.
        self.started_ns = time.time_ns()
        #: The files its imports read outside the interpreter's own folders, as it read them.
        self.files: dict[str, list[int]] = {}
        #: Kept warm (``warm``): its record's slot (see :mod:`.warm`), what else its imports
        #: read (installed files and folders), and its own program files as they were at start.
        self.slot: Any = None
        self.kept = warm is not None
        self.installed: dict[str, Any] = {}
        self.program: dict[str, list[int]] = {}
        #: Called with the template once it is ready (a warm one is recorded for later builds).
        self.on_ready: Callable[[Template], None] | None = None
        # The template's program is a file, run by the kernel's Python (see kernel_side/template.py).
        command = [python, "-c", program.BOOT, program.__file__, MARKER, self.path, str(os.getpid())]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [*command, json.dumps(modules)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,  # a Ctrl-C at the terminal is the launcher's to handle
            )
        self._ready: bool | None = None
        self._problem = ""
        #: The preloads left to each kernel, with why (the template's probe, see template.py).
        self.left: dict[str, str] = {}
        self._lock = threading.Lock()
        self.launched: list[int] = []
        #: Each launched kernel's start time (with its pid, it names one process).
        self.starts: dict[int, int | None] = {}

    def wait_ready(self, timeout: float) -> None:
        """Block until the template has imported all; :class:`ForkServerError` if it failed."""
        with self._lock:
            if self._ready is None:
                self._ready, self._problem = self._read_ready(timeout)
                if self._ready and self.on_ready is not None:
                    self.on_ready(self)
        if not self._ready:
            raise ForkServerError(self._problem)
        if self.process.poll() is not None:
            raise ForkServerError(f"the template exited with status {self.process.returncode}")

    async def wait_ready_async(self, timeout: float) -> None:
        """:meth:`wait_ready` that a cancellation (Ctrl-C) ends at once, even mid-import."""
        deadline = time.monotonic() + timeout
        while self._ready is None and time.monotonic() < deadline:
            stream = self.process.stdout
            try:
                if stream is None or select.select([stream], [], [], 0)[0]:
                    break
            except (OSError, ValueError):
                break
            if self.process.poll() is not None:
                break
            await asyncio.sleep(0.01)
        else:
            with self._lock:
                if self._ready is None:
                    self._ready, self._problem = False, f"the template was not ready within {timeout:g} s"
        self.wait_ready(max(0.0, deadline - time.monotonic()))

    def _read_ready(self, timeout: float) -> tuple[bool, str]:
        assert self.process.stdout is not None
        stream = self.process.stdout
        try:
            readable, _, _ = select.select([stream], [], [], timeout)
            line = stream.readline() if readable else b""
            stream.close()
        except (OSError, ValueError):  # closed under us: close() ran
            return False, "the fork server was closed"
        if not readable:
            return False, f"the template was not ready within {timeout:g} s"
        try:
            ready = json.loads(line)
            problem = ready["error"]
            files = ready.get("files") or {}
            self.files = {str(path): list(state) for path, state in files.items()}
            self.left = dict(ready.get("left") or {})
            self.installed = dict(ready.get("installed") or {})
        except (ValueError, KeyError, TypeError, AttributeError):
            problem = f"the template failed to start: {self._log_tail()}"
        return problem is None, problem or ""

    def changed_file(self) -> str | None:
        """A file the template imported that has changed since, or may have as it was read:
        its kernels would run old code under a session key made from the new."""
        return changed_file(self.files, self.started_ns - TIMESTAMP_SLACK_NS)

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                return log.read()[-2000:].decode(errors="replace").strip() or "(no output)"
        except OSError:
            return "(no log)"

    def request(
        self, payload: Mapping[str, Any], fds: Sequence[int] = (), timeout: float = 30
    ) -> dict[str, Any]:
        """One request on a connection of its own (callers may be in several threads); given up
        at once when the template dies or is stopped (a stopped one would answer never)."""
        deadline = time.monotonic() + timeout
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(0.05)
                data = b""
                sent = False
                while not data.endswith(b"\n"):
                    if why := self.gone():
                        raise ForkServerError(f"cannot talk to the template: {why}")
                    if time.monotonic() > deadline:
                        raise TimeoutError(f"no answer within {timeout:g} s")
                    try:
                        if not sent:
                            sock.connect(self.path)
                            socket.send_fds(sock, [(json.dumps(payload) + "\n").encode()], list(fds))
                            sent = True
                        chunk = sock.recv(65536)
                    except socket.timeout:
                        continue
                    if not chunk:
                        break
                    data += chunk
            reply = json.loads(data)
        except (OSError, ValueError) as err:
            why = self.gone() or str(err)
            raise ForkServerError(f"cannot talk to the template: {why}") from err
        return reply

    def gone(self) -> str:
        """Why the template can answer no more (it exited, or was stopped), or ""."""
        if self.process.poll() is not None:
            return f"the template exited with status {self.process.returncode}"
        status = process_status(self.process.pid)
        if status is not None and status[0] in ("T", "t"):
            return "the template was stopped"
        return ""

    def abandon(self) -> None:
        """End this template alone (it died or was stopped): the kernels it forked live on, each
        until its session ends (:meth:`close` still kills them at the end of the build)."""
        if self.process.poll() is None:
            self.process.kill()  # a stopped process dies of SIGKILL too
            self.process.wait()
        for pid, start in self.starts.items():  # those that ended while it was stopped
            _reap_adopted(pid, start)
        if self.process.stdout is not None:
            self.process.stdout.close()
        with contextlib.suppress(OSError):
            os.unlink(self.path)
        self._forget()

    def close(self) -> None:
        """End the template, and with it every kernel forked here (by process group)."""
        clean = False
        if self.process.poll() is None and self._ready is not True:
            self.process.kill()  # still importing (or failed): nothing to wait for
            self.process.wait()
        elif self.process.poll() is None and self.gone():  # stopped: a SIGTERM would wait
            self.process.kill()
            self.process.wait()
        elif self.process.poll() is None:
            self.process.terminate()  # it kills the process group of each child still alive
            try:
                clean = self.process.wait(5) == 0
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if not clean:
            # Its kernels died with it (PR_SET_PDEATHSIG), what they started may not have.
            for pid in self.launched:
                _killpg(pid, signal.SIGKILL)
        _killpg(self.process.pid, signal.SIGKILL)  # anything a preload started
        if self.process.stdout is not None:
            self.process.stdout.close()
        self._forget()

    def let_go(self) -> None:
        """No later build may adopt this warm template (its record and lock go); it lives on."""
        if self.slot is not None:
            self.slot.remove()
            self.slot.release()
            self.slot = None

    def _forget(self) -> None:
        """A warm template ended: no later build may find it, and its own folder goes."""
        self.let_go()
        if self.kept:
            shutil.rmtree(os.path.dirname(self.path), ignore_errors=True)

    def detach(self) -> None:
        """The build ends, a warm template lives on for the next: the kernels it forked for this
        build end now (its sessions have shut them down already), its lock goes."""
        for pid in self.launched:
            if process_start(pid) == self.starts.get(pid):
                _killpg(pid, signal.SIGKILL)
        if self.slot is not None:
            self.slot.release()
            self.slot = None

    @classmethod
    def adopted(cls, process: AdoptedProcess, info: Mapping[str, Any], env: dict[str, str]) -> Template:
        """The template an earlier build kept warm, as its record ``info`` describes it (its
        environment ``env``: the record keeps only its digest)."""
        template = cls.__new__(cls)
        template.python, template.preload = info["python"], tuple(info["preload"])
        template.env, template.path, template.log_path = env, info["path"], info["log_path"]
        template.started_ns, template.files = int(info["started_ns"]), dict(info["files"])
        template.left, template.installed = dict(info.get("left") or {}), dict(info.get("installed") or {})
        template.program, template.slot, template.on_ready = dict(info.get("program") or {}), None, None
        template.kept = True
        template.process = process  # type: ignore[assignment]
        template._ready, template._problem, template._lock = True, "", threading.Lock()
        template.launched, template.starts = [], {}
        return template


class AdoptedProcess:
    """A Popen-like handle on a template that an earlier build started (its exit status is not
    this process's to read: 1 once it has ended)."""

    stdin = stdout = stderr = None

    def __init__(self, pid: int, start: int) -> None:
        self.pid, self.start = pid, start
        self.returncode: int | None = None

    def poll(self) -> int | None:
        status = process_status(self.pid)
        if self.returncode is None and (status is None or status[2] != self.start or status[0] in "ZX"):
            self.returncode = 1
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        return _polled(self, timeout)

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            with contextlib.suppress(OSError):
                os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def changed_file(files: Mapping[str, Sequence[int]], since_ns: int) -> str | None:
    """The first of ``files`` (path -> :func:`~.sharing.file_state` as read) that is gone, is
    not as read, or was written at ``since_ns`` or later (so perhaps after it was read)."""
    for path, state in files.items():
        try:
            now = sharing.file_state(os.stat(path))
        except OSError:
            return path
        if now != list(state) or max(now[0], now[1]) >= since_ns:
            return path
    return None


def _killpg(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class ForkedProcess:
    """A Popen-like handle on a forked kernel. Its status is read from ``/proc`` (a zombie's exit
    status too) and, once its template has collected it, asked of the template: a template that
    is stopped, busy or dead never holds up a status check."""

    stdin = stdout = stderr = None

    def __init__(self, template: Template, pid: int) -> None:
        self.template = template
        self.pid = pid
        self.returncode: int | None = None
        status = process_status(pid)
        self._start = status[2] if status is not None else None  # which process the pid names
        #: Why the exit status is unknown (then :attr:`returncode` only says that it ended), or "".
        self.unknown = ""

    def poll(self) -> int | None:
        if self.returncode is None:
            self.returncode = self._status()
        return self.returncode

    def _status(self) -> int | None:
        status = process_status(self.pid)
        if status is not None and status[2] == self._start:
            state, parent, _, code = status
            if state not in ("Z", "X"):
                return None
            if parent == os.getpid():  # its template died: it came to this process (a subreaper)
                collected = _collect(self.pid)
                code = collected if collected is not None else code
            if code is not None:
                return _returncode(code)
        # Collected by its template (which keeps its status), or by no one this process can ask.
        try:
            return int(self.template.request({"op": "status", "pid": self.pid}, timeout=5)["returncode"])
        except (ForkServerError, KeyError, TypeError, ValueError) as err:
            self.unknown = f"its exit status is unknown: {err}"
            return 1

    def wait(self, timeout: float | None = None) -> int:
        code = _polled(self, timeout)
        _reap_adopted(self.pid, self._start)
        return code

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            _killpg(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def killed(self) -> None:
        """The caller saw this kernel die of its SIGKILL: no need to ask the template (which
        collects the zombie in its loop; or this process, if it adopted the kernel)."""
        if self.returncode is None:
            self.returncode = -signal.SIGKILL
        _reap_adopted(self.pid, self._start)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _polled(process: Any, timeout: float | None) -> int:
    """Popen's ``wait`` for a process that is not this one's child: its ``poll`` until it ends."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while (code := process.poll()) is None:
        if deadline is not None and time.monotonic() > deadline:
            raise subprocess.TimeoutExpired([str(process.pid)], timeout or 0)
        time.sleep(0.02)
    return int(code)


def _reap_adopted(pid: int, start: int | None) -> None:
    """Collect the kernel ``pid`` (started at ``start``) if it is a zombie of this process: a
    subreaper adopts the kernels of a template that died, and no one else collects them."""
    status = process_status(pid)
    if status is not None and status[0] == "Z" and status[1] == os.getpid() and status[2] == start:
        _collect(pid)


def _collect(pid: int) -> int | None:
    """``waitpid`` a zombie child of this process; its status, or None. A zombie thread-group
    leader is collected only once its other threads are gone too: a second at most."""
    deadline = time.monotonic() + 1.0
    while True:
        try:
            done, status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return None
        if done:
            return status
        if time.monotonic() > deadline:
            return None
        time.sleep(0.001)


def _returncode(status: int) -> int:
    """A ``waitpid`` status in Popen's convention: -signal, or the exit code."""
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
