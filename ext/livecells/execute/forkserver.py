"""Fast kernel starts: kernels forked from a template process that imported the framework once.

A fresh kernel costs each session the interpreter's and ipykernel's start-up plus its
framework's import (``import torch`` alone takes seconds). A *template* process per (kernel
python, preload, kernelspec env) pays both once, then forks a kernel per launch request
(``docs/performance.rst`` has the figures). The fork happens
before the kernel app starts, never from a running kernel (an event loop cannot survive a fork;
ipykernel PR #410). A template whose imports touched CUDA refuses to serve: CUDA state does not
survive a fork, and each child must meet CUDA only after its ``CUDA_VISIBLE_DEVICES`` is set.

jupyter_client stays in charge of everything else: :class:`ForkServerProvisioner` only replaces
the ``Popen`` of :class:`~jupyter_client.provisioning.LocalProvisioner` by a request to the
template and hands back a Popen-like :class:`ForkedProcess`; :class:`ForkedKernelManager`
installs it without any kernelspec change. Any failure falls back to the normal launch.

This module is the launcher's side; the template's program is :mod:`livecells.execute.template`,
a file that the kernel's own Python runs. Its parts are the launcher's half of one protocol:
:class:`Template` (one template process: start, readiness, requests, close),
:class:`ForkedProcess` (a forked kernel as jupyter_client's Popen), :class:`ForkServer` (a
template per key, the environment check, the fallbacks said once) and the jupyter_client glue
(provisioner and manager).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import select
import shutil
import signal
import socket
import string
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from jupyter_client.connect import KernelConnectionInfo
from jupyter_client.manager import AsyncKernelManager
from jupyter_client.provisioning import LocalProvisioner

from livecells.execute import template as program
from livecells.execute.environment import kernel_python
from livecells.execute.kernel import KERNEL_ARGUMENTS
from livecells.execute.reaper import SESSION_VARIABLE, process_status
from livecells.model.environ import DEFAULT_ENV_DROP, kept_environ

if TYPE_CHECKING:
    from livecells.model.frameworks import FrameworkSpec

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
LAUNCHERS = ("ipykernel_launcher", "ipykernel")
#: Variables a session may set differently from its template: none is read at import time.
PER_SESSION_ENV = (
    "CUDA_VISIBLE_DEVICES",
    "JPY_PARENT_PID",
    "JPY_SESSION_NAME",
    "MPLBACKEND",
    "PAGER",
    "PYDEVD_DISABLE_FILE_VALIDATION",
    "PYTEST_CURRENT_TEST",
    SESSION_VARIABLE,
)
Key = tuple[str, tuple[str, ...], tuple[tuple[str, str], ...]]  # python, preload, kernelspec env
#: A file time this close to a template's start (or later) may be an edit its imports missed:
#: file times lag the clock by up to a timer tick (coarse timestamps).
TIMESTAMP_SLACK_NS = 20_000_000
#: A template that dies or is stopped after it served (a cell killed its parent, say) is replaced
#: this many times per key; then that key's kernels start normally.
MAX_REPLACEMENTS = 3
logger = logging.getLogger(__name__)


class ForkServerError(RuntimeError):
    """The template could not be started or talked to; the session falls back to a normal launch."""


class Template:
    """One template process and the socket it listens on."""

    def __init__(
        self,
        python: str,
        preload: Sequence[str],
        workdir: str,
        env: dict[str, str],
        kernel_arguments: Sequence[str] | None = None,
    ) -> None:
        self.python = python
        self.preload = tuple(preload)
        self.env = env  # what the imports saw
        self.path = os.path.join(workdir, f"t-{uuid.uuid4().hex[:8]}.sock")
        self.log_path = self.path[: -len(".sock")] + ".log"
        modules = {"kernel": list(KERNEL_MODULES), "preload": list(self.preload)}
        #: Before any import: a file changed after this may have been read old or new.
        self.started_ns = time.time_ns()
        #: The files its imports read outside the interpreter's own folders, as it read them.
        self.files: dict[str, list[int]] = {}
        # The template's program is a file, run by the kernel's Python (see execute/template.py).
        command = [python, "-c", program.BOOT, program.__file__, MARKER, self.path, str(os.getpid())]
        # With the kernels' arguments, the template pre-initialises their app and shell.
        if kernel_arguments is not None:
            command_tail = [json.dumps(modules), json.dumps(list(kernel_arguments))]
        else:
            command_tail = [json.dumps(modules)]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [*command, *command_tail],
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


def changed_file(files: Mapping[str, Sequence[int]], since_ns: int) -> str | None:
    """The first of ``files`` (path -> :func:`~.template.file_state` as read) that is gone, is
    not as read, or was written at ``since_ns`` or later (so perhaps after it was read)."""
    for path, state in files.items():
        try:
            now = program.file_state(os.stat(path))
        except OSError:
            return path
        if now != list(state) or max(now[0], now[1]) >= since_ns:
            return path
    return None


def own_copy(preload: Sequence[str], cwd: str, imported: Mapping[str, Any]) -> str | None:
    """A preloaded package or module that the page's folder ``cwd`` has a copy of, other than
    the file the template imported (``imported``: its files outside the installed folders). A
    fresh kernel has its folder on ``sys.path`` before site-packages, so it imports that copy."""
    read = {os.path.realpath(path) for path in imported}
    for top in dict.fromkeys(name.split(".")[0] for name in preload):
        for path in (os.path.join(cwd, top, "__init__.py"), os.path.join(cwd, f"{top}.py")):
            if os.path.isfile(path):
                if os.path.realpath(path) not in read:
                    return path
                break
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
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        _reap_adopted(self.pid, self._start)
        return self.returncode

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


def _stream_fd(value: Any, default: int) -> int | None:
    """The fd a Popen ``stdout=``/``stderr=`` value stands for (None: /dev/null in the child)."""
    if value is None:
        return default  # Popen's None: inherit the launcher's stream
    if value == subprocess.DEVNULL:
        return None
    if isinstance(value, int) and value >= 0:
        return value
    if hasattr(value, "fileno"):
        return int(value.fileno())
    raise ForkServerError(f"cannot hand {value!r} to a forked kernel")


class ForkServer:
    """Owns a build's templates: started lazily or by :meth:`prepare`, ended by :meth:`close`.

    A template imports with the build's environment plus the kernelspec's ``env``; a session
    whose environment differs elsewhere than in :data:`PER_SESSION_ENV` (and ``per_session_env``)
    is launched normally, since its preload might read those variables at import.

    ``kernel_arguments``: what every launch passes after ``-f CONNECTION_FILE``; a template
    pre-initialises its kernels' app and shell for them (:mod:`.preinit`; None: it does not).
    A launch with other arguments, or a session environment that differs from the template's
    outside :data:`PER_SESSION_ENV`, gets the full ipykernel start-up in its forked child.
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 120.0,
        warn: Callable[[str], None] | None = None,
        note: Callable[[str], None] | None = None,
        enabled: bool | None = None,
        per_session_env: Sequence[str] = (),
        kernel_arguments: Sequence[str] | None = KERNEL_ARGUMENTS,
        env_drop: Sequence[str] = DEFAULT_ENV_DROP,
    ) -> None:
        self.startup_timeout = startup_timeout
        #: Variables the templates (and so their kernels) never get: as a session's, see KernelSession.
        self.env_drop = tuple(env_drop)
        self.kernel_arguments = None if kernel_arguments is None else tuple(kernel_arguments)
        self.warn = warn or logging.getLogger(__name__).warning
        #: Says which preloads each kernel imports itself, and why (default: ``warn``).
        self.note = note or self.warn
        self.enabled = sys.platform.startswith("linux") if enabled is None else enabled
        self.per_session_env = frozenset(PER_SESSION_ENV) | frozenset(per_session_env)
        self.templates: dict[Key, Template] = {}
        #: Templates whose imported files changed: no more forks; closed once their kernels end.
        self.retired: list[Template] = []
        #: The first reason each key launched normally (said once through ``warn``).
        self.fallbacks: dict[Key, str] = {}
        self._broken: set[Key] = set()
        self.left_said: set[Key] = set()
        self._workdir: str | None = None
        #: Templates that died or were stopped after they served, and how many per key.
        self._abandoned: list[Template] = []
        self._replaced: dict[Key, int] = {}

    def prepare(self, framework: FrameworkSpec) -> None:
        """Start the framework's template if need be, and return: its imports overlap other work."""
        key = _key_of(framework)
        if key is not None:
            try:
                self._template(key)
            except ForkServerError as err:
                self._fallback(key, str(err), broken=True)

    async def ready(self, framework: FrameworkSpec) -> bool:
        """Start the framework's template if need be and wait until it can fork (False: never)."""
        key = _key_of(framework)
        if key is None:
            return False
        try:
            template = self._template(key)
            await template.wait_ready_async(self.startup_timeout)
        except ForkServerError as err:
            self._fallback(key, str(err), broken=True)
            return False
        self._say_left(key, template)
        return True

    def manager(self, framework: FrameworkSpec) -> AsyncKernelManager:
        """A manager for ``KernelSession(manager_factory=...)`` whose kernels fork from here."""
        return ForkedKernelManager(
            kernel_name=framework.kernel, fork_server=self, preload=framework.preload,
            framework_env=framework.kernel_env(os.environ),
        )

    def _template(self, key: Key) -> Template:
        if not self.enabled:
            raise ForkServerError(f"forking kernels needs Linux, not {sys.platform}")
        if key in self._broken:
            raise ForkServerError(self.fallbacks[key])
        template = self.templates.get(key)
        if template is not None and template._ready and (why := template.gone()):
            self._abandon(key, template, why)
            template = None
        if template is None:
            if self._workdir is None:  # mode 0700; AF_UNIX paths must stay short
                base = None if len(tempfile.gettempdir()) < 60 else "/tmp"
                self._workdir = tempfile.mkdtemp(prefix="livecells-fork-", dir=base)
            env = kept_environ(os.environ, (*self.env_drop, "PYTEST_CURRENT_TEST"))
            env.update({k: string.Template(v).safe_substitute(env) for k, v in key[2]})
            try:
                template = Template(key[0], key[1], self._workdir, env, self.kernel_arguments)
            except OSError as err:
                raise ForkServerError(f"cannot start the template: {err}") from err
            self.templates[key] = template
        return template

    def _abandon(self, key: Key, template: Template, why: str) -> None:
        """Put a template that served and then died or was stopped aside (its kernels live on
        with their sessions); the next launch starts another, up to :data:`MAX_REPLACEMENTS`."""
        del self.templates[key]
        self._abandoned.append(template)
        template.abandon()
        self._replaced[key] = self._replaced.get(key, 0) + 1
        if self._replaced[key] > MAX_REPLACEMENTS:
            raise ForkServerError(f"{why}, for the {self._replaced[key]}th time")
        logger.info("livecells: a fork-server template is replaced: %s", why)

    def _fallback(self, key: Key, reason: str, *, broken: bool) -> None:
        if broken:
            self._broken.add(key)
        if key not in self.fallbacks:
            self.fallbacks[key] = reason
            self.warn(f"kernels for {key[0]} {list(key[1])} start normally: {reason}")

    def _say_left(self, key: Key, template: Template) -> None:
        """Say once which preloads each kernel imports itself, and why."""
        if template.left and key not in self.left_said:
            self.left_said.add(key)
            for name, why in template.left.items():
                self.note(
                    f"preload {name!r} ({key[0]}) is imported by each kernel, not shared by forking: "
                    f"{why}; the modules it imports that do not are shared"
                )

    async def launch(
        self,
        cmd: Sequence[str],
        *,
        preload: Sequence[str],
        spec_env: Mapping[str, str],
        cwd: str,
        env: Mapping[str, str],
        stdout: Any = None,
        stderr: Any = None,
    ) -> ForkedProcess:
        """Fork a kernel for ``python -m ipykernel_launcher ...``, or raise ForkServerError."""
        if len(cmd) < 3 or cmd[1] != "-m" or cmd[2] not in LAUNCHERS:
            raise ForkServerError(f"not an ipykernel command: {list(cmd)}")  # by design: not said
        key = _key(cmd[0], spec_env, preload)
        fds = [fd for fd in (_stream_fd(stdout, 1), _stream_fd(stderr, 2)) if fd is not None]
        if len(fds) == 1:
            raise ForkServerError("stdout and stderr must both go to files or both to /dev/null")
        fds = fds[:1] if len(fds) == 2 and fds[0] == fds[1] else fds
        try:
            template = self._template(key)
            await template.wait_ready_async(self.startup_timeout)
            changed = template.changed_file()
            if changed is not None:
                # Its kernels would run the old code: a new template reads the files again.
                self._retire(key, template)
                template = self._template(key)
                await template.wait_ready_async(self.startup_timeout)
                changed = template.changed_file()
        except ForkServerError as err:
            self._fallback(key, str(err), broken=True)
            raise
        if changed is not None:
            why = f"{changed} changed as the template imported it"
            self._retire(key, template)
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        self._say_left(key, template)
        differs = sorted(
            name
            for name in set(env) | set(template.env)
            if name not in self.per_session_env and env.get(name) != template.env.get(name)
        )
        if differs:
            why = f"the session's environment differs from the template's in {', '.join(differs)}"
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        own = own_copy(template.preload, cwd, template.files)
        if own is not None:
            why = f"the page's folder has its own {own}, which a fresh kernel imports"
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        payload = {
            "op": "launch", "module": cmd[2], "args": list(cmd[3:]), "cwd": cwd,
            # What a template's pre-initialised app may ignore (not a user's additions).
            "per_session_env": list(PER_SESSION_ENV),
        }
        try:
            reply = await asyncio.to_thread(template.request, dict(payload, env=dict(env)), fds)
        except ForkServerError as err:
            if not template.gone():  # else: this kernel starts normally, the next launch's
                self._fallback(key, str(err), broken=True)  # template is a new one
            raise
        if "pid" not in reply:  # this session only (a missing cwd, say)
            raise ForkServerError(reply.get("error", "no pid"))
        template.launched.append(reply["pid"])
        process = ForkedProcess(template, reply["pid"])
        template.starts[process.pid] = process._start
        return process

    def _retire(self, key: Key, template: Template) -> None:
        """Fork no more from ``template`` (its kernels live on); close the retired templates
        whose kernels have all ended."""
        if self.templates.get(key) is template:
            del self.templates[key]
            self.retired.append(template)
        for old in list(self.retired):
            if all(ForkedProcess(old, pid).poll() is not None for pid in old.launched):
                self.retired.remove(old)
                old.close()

    def close(self) -> None:
        """Kill every template and every kernel forked from one; safe to call twice."""
        templates, self.templates = [*self.templates.values(), *self.retired, *self._abandoned], {}
        self.retired, self._abandoned = [], []
        for template in templates:
            template.close()
        if self._workdir is not None:
            shutil.rmtree(self._workdir, ignore_errors=True)
            self._workdir = None

    def __enter__(self) -> ForkServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _key_of(framework: FrameworkSpec) -> Key | None:
    from jupyter_client.kernelspec import KernelSpecManager

    try:
        spec = KernelSpecManager().get_kernel_spec(framework.kernel)
    except Exception:  # no such kernel: the session itself will say so
        return None
    return _key(spec.argv[0], {**framework.kernel_env(os.environ), **spec.env}, framework.preload)


def _key(python: str, spec_env: Mapping[str, str], preload: Sequence[str]) -> Key:
    """What a template is for: its python (as jupyter_client runs it), the environment a
    kernel gets beyond the build's (the framework's ``env``, then the kernelspec's), preload."""
    return (kernel_python(python), tuple(preload), tuple(sorted(spec_env.items())))


class ForkServerProvisioner(LocalProvisioner):  # type: ignore[misc]
    """LocalProvisioner whose launch asks the fork server; any failure launches normally."""

    fork_server: ForkServer | None = None
    preload: tuple[str, ...] = ()
    framework_env: dict[str, str] = {}  # replaced per kernel, never changed in place

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        if self.fork_server is None:
            return await super().launch_kernel(cmd, **kwargs)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            process = await self.fork_server.launch(
                cmd,
                preload=self.preload,
                spec_env={**self.framework_env, **(self.kernel_spec.env if self.kernel_spec else {})},
                cwd=cwd,
                env=kwargs.get("env") or dict(os.environ),
                stdout=kwargs.get("stdout"),
                stderr=kwargs.get("stderr"),
            )
        except ForkServerError as err:
            self.log.debug("launching the kernel normally: %s", err)
            return await super().launch_kernel(cmd, **kwargs)
        # Popen-like: LocalProvisioner's poll/wait/signal/kill/terminate work on it unchanged.
        self.process = process  # type: ignore[assignment]
        # setsid() made it a session and process group leader: signals go to the whole group.
        self.pid = self.pgid = process.pid
        self.cwd = cwd
        return self.connection_info


class ForkedKernelManager(AsyncKernelManager):
    """An AsyncKernelManager whose kernels come from a :class:`ForkServer`."""

    def __init__(
        self,
        *,
        fork_server: ForkServer,
        preload: Sequence[str] = (),
        framework_env: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.fork_server = fork_server
        self.preload = tuple(preload)
        self.framework_env = dict(framework_env or {})

    async def _async_pre_start_kernel(self, **kw: Any) -> tuple[list[str], dict[str, Any]]:
        metadata = self.kernel_spec.metadata if self.kernel_spec else {}
        own = metadata.get("kernel_provisioner", {}).get("provisioner_name")
        if self.provisioner is None and own in {None, "local-provisioner"}:
            # Kept on restarts; a kernelspec that names a provisioner of its own keeps it.
            self.kernel_id = self.kernel_id or kw.pop("kernel_id", str(uuid.uuid4()))
            provisioner = ForkServerProvisioner(
                kernel_id=self.kernel_id, kernel_spec=self.kernel_spec, parent=self
            )
            provisioner.fork_server = self.fork_server
            provisioner.preload = self.preload
            provisioner.framework_env = self.framework_env
            self.provisioner = provisioner
        return await super()._async_pre_start_kernel(**kw)
