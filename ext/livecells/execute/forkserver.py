"""Fast kernel starts: kernels forked from a template process that imported the framework once.

A fresh kernel costs each session ~0.5 s of interpreter and ipykernel start-up plus its
framework's import (``import torch`` ~1.4 s). A *template* process per (kernel python, preload,
kernelspec env) pays both once, then forks a kernel per launch request (~20 ms). The fork happens
before the kernel app starts, never from a running kernel (an event loop cannot survive a fork;
ipykernel PR #410). A template whose imports touched CUDA refuses to serve: CUDA state does not
survive a fork, and each child must meet CUDA only after its ``CUDA_VISIBLE_DEVICES`` is set.

jupyter_client stays in charge of everything else: :class:`ForkServerProvisioner` only replaces
the ``Popen`` of :class:`~jupyter_client.provisioning.LocalProvisioner` by a request to the
template and hands back a Popen-like :class:`ForkedProcess`; :class:`ForkedKernelManager`
installs it without any kernelspec change. Any failure falls back to the normal launch.
"""

from __future__ import annotations

import asyncio
import inspect
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

from livecells.execute.reaper import SESSION_VARIABLE, descendants, kill_tree, process_table

if TYPE_CHECKING:
    from livecells.model.frameworks import FrameworkSpec

#: In every template's (and so every forked kernel's) command line, so tools that look for
#: kernels by "ipykernel" in the command line (tests/conftest.py) find them too.
MARKER = "livecells-ipykernel-forkserver"
#: What every kernel imports while it initialises; imported once in the template instead
# (ipykernel.debugger alone, through debugpy, is half of a kernel's own start-up).
KERNEL_MODULES = (
    "ipykernel.kernelapp",
    "ipykernel.ipkernel",
    "ipykernel.zmqshell",
    "ipykernel.debugger",
    "ipykernel.comm",
    "IPython.core.completer",
    # Imported by the kernel's shell as it starts (measured: ~20 ms of each start).
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


class ForkServerError(RuntimeError):
    """The template could not be started or talked to; the session falls back to a normal launch."""


# --- Template side. These functions run in the kernel's own Python (their source is sent on the
# --- template's stdin), so they use only the standard library and import inside their bodies.


def _template_main(argv: list[str]) -> tuple[Any, ...] | None:
    """Import, say ready (or why not) on stdout, then serve launch requests until told to stop.

    In a forked child it returns :func:`_child`'s arguments: the child leaves the template's
    frames before it becomes a kernel, so that cells run at a normal kernel's stack depth.
    """
    import gc
    import importlib
    import json
    import os
    import signal
    import socket
    import sys
    import traceback

    path, parent, preload = argv[0], int(argv[1]), json.loads(argv[2])
    # Die with the launcher, even in the middle of a slow import; and adopt the orphans of
    # kernels that die (they are killed in _reap).
    _prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    _prctl(36, 1)  # PR_SET_CHILD_SUBREAPER
    if os.getppid() != parent:
        return
    if sys.path and sys.path[0] == "":
        del sys.path[0]  # as ipykernel_launcher does; the kernel's init_path adds the cwd back
    environ = dict(os.environ)  # what the imports saw
    # What ipykernel sets before a user imports matplotlib; a preload may import it.
    os.environ.setdefault("MPLBACKEND", "module://matplotlib_inline.backend_inline")
    problem = None
    try:
        for name in preload:
            importlib.import_module(name)
        problem = _cuda_touched()
    except BaseException:  # noqa: BLE001 - any import failure is reported, not raised
        problem = "a preload import failed:\n" + traceback.format_exc(limit=-3)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    if problem is None:
        listener.bind(path)
        listener.listen(64)
    os.write(1, (json.dumps({"error": problem}) + "\n").encode())
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 0)
    os.dup2(null, 1)
    os.close(null)
    if problem is not None:
        return
    # What the imports set in the environment (debugpy sets PYDEVD_USE_FRAME_EVAL): a fresh
    # kernel's imports would set it too. Not MPLBACKEND, the template's own (the kernel sets it).
    environ["MPLBACKEND"] = os.environ.get("MPLBACKEND")
    imported_env = {
        k: [environ.get(k), v] for k, v in os.environ.items() if environ.get(k) != v
    }
    sys.stderr.flush()  # nothing buffered may be written twice, by a child too
    gc.freeze()  # keep the imported objects' pages shared with the children
    # fds open now belong to the imported libraries (children keep them); later ones are ours.
    keep = {int(fd) for fd in os.listdir("/proc/self/fd")} - {listener.fileno()}
    keep = {fd for fd in keep if _is_open(fd)}  # not the fd that listed them

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)

    signal.signal(signal.SIGTERM, stop)
    # From now on the launcher's death ends the loop through SIGTERM, so that the kernels'
    # process trees are killed before the kernels themselves die (their PR_SET_PDEATHSIG).
    _prctl(1, signal.SIGTERM)
    if os.getppid() != parent:
        return
    children: dict[int, int | None] = {}
    template, become = os.getpid(), None
    try:
        while os.getppid() == parent:  # the launcher died without close(): go too
            _reap(children)
            if not _readable(listener, 1.0):
                continue
            conn, _ = listener.accept()
            conn.settimeout(10)  # a client that says nothing must not block the others
            with conn:
                become = _serve(conn, listener, keep, children)
            if become is not None:  # in the forked child
                become[0]["imported_env"] = imported_env
                return become
    finally:
        if os.getpid() == template:
            _stop_children(children, path)
        elif become is None:  # a child that failed on its way out: never into the template's code
            os._exit(1)
    return None


def _stop_children(children: dict[int, int | None], path: str) -> None:
    import os

    for pid, code in children.items():
        if code is None:
            kill_tree(pid)  # what left the kernel's process group too
    for pid, code in children.items():
        if code is None:
            try:
                os.waitpid(pid, 0)
            except OSError:
                pass
    try:
        os.unlink(path)
    except OSError:
        pass


def _prctl(option: int, value: int) -> None:
    import ctypes

    try:
        ctypes.CDLL(None).prctl(option, value, 0, 0, 0)
    except Exception:  # noqa: BLE001 - no prctl: the loop still watches its parent
        pass


def _readable(sock: Any, timeout: float) -> bool:
    import select

    try:
        return bool(select.select([sock], [], [], timeout)[0])
    except InterruptedError:
        return False


def _is_open(fd: int) -> bool:
    import os

    try:
        os.fstat(fd)
    except OSError:
        return False
    return True


def _cuda_touched() -> str | None:
    """Why the template may not fork (CUDA state does not survive a fork), or None."""
    import os
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "the preload initialised CUDA (torch.cuda.is_initialized())"
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia"):
                return "the preload opened a GPU device (CUDA initialised)"
        except OSError:
            continue
    return None


def _reap(children: dict[int, int | None]) -> None:
    """Collect exit statuses (Popen convention: -signal or the exit code); kill what a kernel
    that died left behind (its orphans come here: the template is a subreaper)."""
    import os

    kernel_ended = False
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            break
        if pid in children:
            kernel_ended = True
            children[pid] = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
    if kernel_ended:
        me = os.getpid()
        for pid, (ppid, state) in process_table().items():
            if ppid == me and pid not in children and state not in "ZX":
                kill_tree(pid)


def _serve(
    conn: Any, listener: Any, keep: set[int], children: dict[int, int | None]
) -> tuple[Any, ...] | None:
    """Answer one request: ``launch`` (fork a kernel) or ``status`` (of a kernel forked here).

    In the forked child it returns at once with :func:`_child`'s arguments (its own copies of
    the passed fds, which the template's copies closing here leave open).
    """
    import json
    import os
    import signal
    import socket

    data, fds, _, _ = socket.recv_fds(conn, 1 << 20, 2)
    while data and not data.endswith(b"\n"):
        chunk = conn.recv(1 << 20)
        if not chunk:
            break
        data += chunk
    try:
        request = json.loads(data)
        if request["op"] == "status":
            _reap(children)
            reply: dict[str, Any] = {"returncode": children[request["pid"]]}
        elif not os.path.isdir(request["cwd"]):
            reply = {"error": f"no such directory: {request['cwd']}"}
        else:
            template = os.getpid()
            # No SIGTERM between the fork and the bookkeeping: close() relies on the record.
            signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
            pid = os.fork()
            if pid == 0:  # the child returns only to leave the template's loop (see _template_main)
                try:
                    return (request, [os.dup(fd) for fd in fds], conn, listener, keep, template)
                except BaseException:
                    os._exit(1)
            children[pid] = None
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
            reply = {"pid": pid}
    except Exception as err:  # noqa: BLE001 - a bad request gets an answer, not a dead template
        reply = {"error": f"{type(err).__name__}: {err}"}
    finally:
        for fd in fds:
            os.close(fd)
    conn.sendall((json.dumps(reply) + "\n").encode())


def _child(
    request: dict[str, Any], fds: list[int], conn: Any, listener: Any, keep: set[int], parent: int
) -> None:
    """Become a fresh kernel: own session, env, cwd, streams and seeds; then run ipykernel."""
    import atexit
    import ctypes
    import importlib.util
    import os
    import random
    import signal
    import sys
    import traceback

    code = 1
    try:
        os.setsid()
        for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGCHLD):
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        try:  # die with the template (kernels are its children, not the launcher's)
            ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except Exception:  # noqa: BLE001 - ipykernel's parent poller still watches the template
            pass
        if os.getppid() != parent:  # it died before prctl took effect
            return
        null = os.open(os.devnull, os.O_RDWR)
        out, err = (fds + [null, null])[:2] if len(fds) != 1 else (fds[0], fds[0])
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        listener.close()
        conn.close()
        for fd in os.listdir("/proc/self/fd"):
            if int(fd) > 2 and int(fd) not in keep:
                try:
                    os.close(int(fd))
                except OSError:
                    pass
        env = dict(request["env"])
        for name, (seen, value) in request.get("imported_env", {}).items():
            if env.get(name) == seen:  # the session leaves it as the imports saw it
                env[name] = value
        env["JPY_PARENT_PID"] = str(os.getppid())
        os.environ.clear()
        os.environ.update(env)
        os.chdir(request["cwd"])
        random.seed()  # from os.urandom: no two sessions share a seed
        if "numpy.random" in sys.modules:
            sys.modules["numpy.random"].seed(int.from_bytes(os.urandom(4), "little"))
        if "torch" in sys.modules:  # seeds the (lazy) CUDA generators too, without touching CUDA
            sys.modules["torch"].manual_seed(int.from_bytes(os.urandom(8), "little") >> 1)
        spec = importlib.util.find_spec(request["module"])
        sys.argv = [spec.origin if spec and spec.origin else request["module"], *request["args"]]
        from ipykernel import kernelapp

        # The trait's default was read from the template's environment at import.
        watch = f"--IPKernelApp.parent_handle={parent}"
        kernelapp.launch_new_instance(argv=[*request["args"], watch])
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    except BaseException:  # noqa: BLE001 - report to the kernel's log, exit non-zero
        traceback.print_exc()
    finally:
        try:
            atexit._run_exitfuncs()
            sys.stdout.flush()
            sys.stderr.flush()
        finally:
            os._exit(code)


TEMPLATE_FUNCTIONS = (
    _template_main, _prctl, _stop_children, _readable, _is_open, _cuda_touched, _reap, _serve,
    _child, process_table, descendants, kill_tree,
)


def template_source() -> str:
    """The program a template runs: the functions above, then a call of ``_template_main``."""
    parts = ["from __future__ import annotations", "import sys"]
    parts += [inspect.getsource(function) for function in TEMPLATE_FUNCTIONS]
    # A forked child comes back here and becomes a kernel: three frames below ipykernel's
    # launch_new_instance, as under ``python -m ipykernel_launcher``.
    parts.append("_become = _template_main(sys.argv[2:])\nif _become is not None:\n    _child(*_become)")
    return "\n\n".join(parts) + "\n"


#: Reads the template's program from stdin, so that ``ps`` shows a short command line.
BOOT = "import sys; exec(compile(sys.stdin.read(), '<livecells-forkserver>', 'exec'))"


# --- Launcher side.


class Template:
    """One template process and the socket it listens on."""

    def __init__(
        self, python: str, preload: Sequence[str], workdir: str, env: dict[str, str]
    ) -> None:
        self.python = python
        self.preload = tuple(preload)
        self.env = env  # what the imports saw
        self.path = os.path.join(workdir, f"t-{uuid.uuid4().hex[:8]}.sock")
        self.log_path = self.path[: -len(".sock")] + ".log"
        modules = [*KERNEL_MODULES, *self.preload]
        with open(self.log_path, "wb") as log:
            self.process = subprocess.Popen(
                [python, "-c", BOOT, MARKER, self.path, str(os.getpid()), json.dumps(modules)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
                env=env,
                start_new_session=True,  # a Ctrl-C at the terminal is the launcher's to handle
            )
        assert self.process.stdin is not None
        try:
            with self.process.stdin as source:  # a few kB: fits in the pipe, never blocks
                source.write(template_source().encode())
        except OSError:
            self.process.kill()
            self.process.wait()
            raise
        self._ready: bool | None = None
        self._problem = ""
        self._lock = threading.Lock()
        self.launched: list[int] = []

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
            problem = json.loads(line)["error"]
        except (ValueError, KeyError, TypeError):
            problem = f"the template failed to start: {self._log_tail()}"
        return problem is None, problem or ""

    def _log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as log:
                return log.read()[-2000:].decode(errors="replace").strip() or "(no output)"
        except OSError:
            return "(no log)"

    def request(
        self, payload: Mapping[str, Any], fds: Sequence[int] = (), timeout: float = 30
    ) -> dict[str, Any]:
        """One request on a connection of its own (callers may be in several threads)."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(timeout)
                sock.connect(self.path)
                socket.send_fds(sock, [(json.dumps(payload) + "\n").encode()], list(fds))
                data = b""
                while not data.endswith(b"\n"):
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    data += chunk
            reply = json.loads(data)
        except (OSError, ValueError) as err:
            state = self.process.poll()
            why = f"the template exited with status {state}" if state is not None else str(err)
            raise ForkServerError(f"cannot talk to the template: {why}") from err
        return reply

    def close(self) -> None:
        """End the template, and with it every kernel forked here (by process group)."""
        clean = False
        if self.process.poll() is None and self._ready is not True:
            self.process.kill()  # still importing (or failed): nothing to wait for
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


def _killpg(pgid: int, signum: int) -> None:
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass


class ForkedProcess:
    """A Popen-like handle on a forked kernel; its exit status comes from the template."""

    stdin = stdout = stderr = None

    def __init__(self, template: Template, pid: int) -> None:
        self.template = template
        self.pid = pid
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            try:
                reply = self.template.request({"op": "status", "pid": self.pid})
                self.returncode = reply["returncode"]
            except (ForkServerError, KeyError):
                # The template is gone, and with it (PR_SET_PDEATHSIG) the kernel: re-parented
                # to this process when it is a subreaper (then its status is ours to collect),
                # else to PID 1.
                self.returncode = _orphan_status(self.pid)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        deadline = None if timeout is None else time.monotonic() + timeout
        while self.poll() is None:
            if deadline is not None and time.monotonic() > deadline:
                raise subprocess.TimeoutExpired([str(self.pid)], timeout or 0)
            time.sleep(0.02)
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, signum: int) -> None:
        if self.poll() is None:
            _killpg(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def killed(self) -> None:
        """The caller saw this kernel die of its SIGKILL: no need to ask the template (which
        collects the zombie in its loop)."""
        if self.returncode is None:
            self.returncode = -signal.SIGKILL

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)


def _orphan_status(pid: int) -> int | None:
    """The exit status of a kernel whose template died: None while it still runs."""
    try:
        done, status = os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:  # not ours: see whether it still exists (and is not a zombie)
        table = process_table()
        return None if pid in table and table[pid][1] not in "ZX" else -signal.SIGKILL
    if done == 0:
        return None
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
    """

    def __init__(
        self,
        *,
        startup_timeout: float = 120.0,
        warn: Callable[[str], None] | None = None,
        enabled: bool | None = None,
        per_session_env: Sequence[str] = (),
    ) -> None:
        self.startup_timeout = startup_timeout
        self.warn = warn or logging.getLogger(__name__).warning
        self.enabled = sys.platform.startswith("linux") if enabled is None else enabled
        self.per_session_env = frozenset(PER_SESSION_ENV) | frozenset(per_session_env)
        self.templates: dict[Key, Template] = {}
        #: The first reason each key launched normally (said once through ``warn``).
        self.fallbacks: dict[Key, str] = {}
        self._broken: set[Key] = set()
        self._workdir: str | None = None

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
        return True

    def manager(self, framework: FrameworkSpec) -> AsyncKernelManager:
        """A manager for ``KernelSession(manager_factory=...)`` whose kernels fork from here."""
        return ForkedKernelManager(
            kernel_name=framework.kernel, fork_server=self, preload=framework.preload
        )

    def _template(self, key: Key) -> Template:
        if not self.enabled:
            raise ForkServerError(f"forking kernels needs Linux, not {sys.platform}")
        if key in self._broken:
            raise ForkServerError(self.fallbacks[key])
        template = self.templates.get(key)
        if template is None:
            if self._workdir is None:  # mode 0700; AF_UNIX paths must stay short
                base = None if len(tempfile.gettempdir()) < 60 else "/tmp"
                self._workdir = tempfile.mkdtemp(prefix="livecells-fork-", dir=base)
            env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
            env.update({k: string.Template(v).safe_substitute(env) for k, v in key[2]})
            try:
                template = Template(key[0], key[1], self._workdir, env)
            except OSError as err:
                raise ForkServerError(f"cannot start the template: {err}") from err
            self.templates[key] = template
        return template

    def _fallback(self, key: Key, reason: str, *, broken: bool) -> None:
        if broken:
            self._broken.add(key)
        if key not in self.fallbacks:
            self.fallbacks[key] = reason
            self.warn(f"kernels for {key[0]} {list(key[1])} start normally: {reason}")

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
        except ForkServerError as err:
            self._fallback(key, str(err), broken=True)
            raise
        differs = sorted(
            name
            for name in set(env) | set(template.env)
            if name not in self.per_session_env and env.get(name) != template.env.get(name)
        )
        if differs:
            why = f"the session's environment differs from the template's in {', '.join(differs)}"
            self._fallback(key, why, broken=False)
            raise ForkServerError(why)
        payload = {"op": "launch", "module": cmd[2], "args": list(cmd[3:]), "cwd": cwd}
        try:
            reply = await asyncio.to_thread(template.request, dict(payload, env=dict(env)), fds)
        except ForkServerError as err:
            self._fallback(key, str(err), broken=True)
            raise
        if "pid" not in reply:  # this session only (a missing cwd, say)
            raise ForkServerError(reply.get("error", "no pid"))
        template.launched.append(reply["pid"])
        return ForkedProcess(template, reply["pid"])

    def close(self) -> None:
        """Kill every template and every kernel forked from one; safe to call twice."""
        templates, self.templates = list(self.templates.values()), {}
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
    except Exception:  # noqa: BLE001 - no such kernel: the session itself will say so
        return None
    return _key(spec.argv[0], spec.env, framework.preload)


def _key(python: str, spec_env: Mapping[str, str], preload: Sequence[str]) -> Key:
    """What a template is for: its python (as jupyter_client runs it), kernelspec env, preload."""
    major, minor = sys.version_info[:2]
    if python in {"python", f"python{major}", f"python{major}.{minor}"}:
        python = sys.executable
    else:
        python = shutil.which(python) or python
    return (python, tuple(preload), tuple(sorted(spec_env.items())))


class ForkServerProvisioner(LocalProvisioner):  # type: ignore[misc]
    """LocalProvisioner whose launch asks the fork server; any failure launches normally."""

    fork_server: ForkServer | None = None
    preload: tuple[str, ...] = ()

    async def launch_kernel(self, cmd: list[str], **kwargs: Any) -> KernelConnectionInfo:
        if self.fork_server is None:
            return await super().launch_kernel(cmd, **kwargs)
        cwd = str(kwargs.get("cwd") or os.getcwd())
        try:
            process = await self.fork_server.launch(
                cmd,
                preload=self.preload,
                spec_env=self.kernel_spec.env if self.kernel_spec else {},
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
        self, *, fork_server: ForkServer, preload: Sequence[str] = (), **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.fork_server = fork_server
        self.preload = tuple(preload)

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
            self.provisioner = provisioner
        return await super()._async_pre_start_kernel(**kw)
