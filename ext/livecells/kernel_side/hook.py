"""Kernel side: the hook installed once in every kernel, before its first cell.

Pre- and post-run hooks time every non-silent cell with ``perf_counter``, around the whole cell
(a ``run_cell`` nested in it counts into its time); the post hook first runs the framework's
sync code, so that queued device work counts, and then lets what C code wrote to fds 1 and 2
reach the cell. :func:`probe` reports the session's provenance at the end. What the build
reads back lives in a module of its own, ``sys.modules["_livecells_kernel"]`` (:data:`STATE`):
``last`` ([execution count, seconds] of the last cell timed whole: the build shows a time only
for the cell it names), ``probe()``, ``sync_errors``, ``iopub_pipe``, ``fallbacks``.

Where this file (or the budget) relies on a private detail of ipykernel or IPython and finds it
not as expected, it does without, and says so: :func:`fell_back` keeps a line that the probe
hands the build, which warns (``livecells.kernel``) and keeps it in the session's provenance.

What a cell may send the build is cut by the output budget, :mod:`livecells.kernel_side.budget`, a
kernel-side file of its own that :func:`install` is handed.

This file is not imported by name in the kernel: the kernel's Python need not have livecells
installed (a kernelspec may name another interpreter). The launch
(:func:`livecells.execute.kernels.hook_call.hook_request`) loads it, and the budget, by their paths, each
a module of its own (never in ``sys.modules``, never in the user's namespace), and calls
:func:`install` with the framework's settings. So it imports only
the standard library at the top, and what every kernel has (ipykernel, zmq) inside functions.
The build process imports it too (tests do, with a fake shell), which installs nothing.
"""

from __future__ import annotations

import functools
import importlib
import os
import platform
import socket
import sys
import time
import types
from collections.abc import Callable, Iterable, Sequence
from typing import Any

#: The module that holds what the build reads back (see :mod:`livecells.execute.kernels.session`).
STATE = "_livecells_kernel"
#: Where a fork server's template leaves what its imports printed (kernel_side/template.py's name).
PRELOAD_OUTPUT = "_livecells_preload_output"
#: At most this many sync failures are kept, each message cut to :data:`SYNC_ERROR_CHARS`.
SYNC_ERROR_LIMIT = 100
SYNC_ERROR_CHARS = 500
#: At most this many fallbacks are kept, each cut to :data:`FALLBACK_CHARS`.
FALLBACK_LIMIT = 20
FALLBACK_CHARS = 300


def new_state() -> types.ModuleType:
    """A fresh state module (not yet in ``sys.modules``)."""
    state = types.ModuleType(STATE)
    state.last = None  # [execution count, seconds] of the last cell timed whole, or None
    state.depth = 0  # run_cell calls open in the cell being timed (nested ones count into it)
    state.request = None  # the execute request whose cell is being timed
    state.cell = None  # that cell's execution count
    state.sync_errors = []
    state.fallbacks = []  # private details found not as expected, and what was done instead
    return state


def fell_back(notes: list[str], what: str) -> None:
    """Keep ``what`` (a private detail that was not as expected, and what livecells does
    instead) in ``notes``, once, capped: the session's provenance and the build say it."""
    what = what[:FALLBACK_CHARS]
    if what not in notes and len(notes) < FALLBACK_LIMIT:
        notes.append(what)


def start(
    state: Any, cell: Any = None, request: Any = None, clock: Callable[[], float] = time.perf_counter
) -> None:
    """The pre-run hook's work: the clock starts for the cell (execution count ``cell``) of a new
    execute ``request``; a ``run_cell`` nested in the cell being timed counts into it."""
    if state.depth and request == state.request:
        state.depth += 1
        return
    state.last = None  # whatever was measured before is not this cell's
    state.depth, state.request, state.cell, state.t0 = 1, request, cell, clock()


def finish(
    state: Any,
    sync: Any,
    result: Any = None,
    clock: Callable[[], float] = time.perf_counter,
    drain: Callable[[], None] | None = None,
    request: Any = None,
) -> None:
    """The post-run hook's work, at the end of the cell that :func:`start` began (not of a nested
    ``run_cell``): sync the framework (compiled ``sync``), stop the clock, drain. ``last`` holds
    the time only when the same cell started it: a cell that unregistered the pre-run hook,
    or a post-run hook of a request whose start was not seen, measures nothing."""
    if not state.depth or request != state.request:
        return
    state.depth -= 1
    if state.depth:
        return
    try:
        exec(sync, {"sys": sys})
    except BaseException as err:  # a failed sync must not hide the cell's own result
        record_sync_error(state, result, err)
    count = getattr(result, "execution_count", None)
    state.last = [count, clock() - state.t0] if same_cell(count, state.cell) else None
    if drain is not None:
        drain()
    else:
        drain_fd_output(fallbacks=state.fallbacks)


def request_id(shell: Any) -> Any:
    """The id of the execute request ``shell`` is running (ipykernel's parent header), or None."""
    try:
        return shell.parent_header["header"]["msg_id"]
    except Exception:
        return None


def cell_count(shell: Any, info: Any) -> Any:
    """The shell's execution count as IPython announces a cell (its pre-run event, ``info``)."""
    return getattr(shell, "execution_count", None)


def same_cell(count: Any, announced: Any) -> bool:
    """Whether the cell that ended with execution count ``count`` is the one announced at count
    ``announced``. IPython 9 counts a cell that keeps history before its pre-run event, IPython
    8 after it: the announced count is the cell's own or the next one."""
    if isinstance(count, int) and isinstance(announced, int):
        return count in (announced, announced - 1)
    return count == announced


def record_sync_error(state: Any, result: Any, err: BaseException) -> None:
    """Keep ``[execution count, "Type: message"]`` for a warning at that cell (capped)."""
    if len(state.sync_errors) < SYNC_ERROR_LIMIT:
        count = getattr(result, "execution_count", None)
        state.sync_errors.append([count, f"{type(err).__name__}: {err}"[:SYNC_ERROR_CHARS]])


#: The ``read`` system call's number, where the reader thread's state can be read from
#: ``/proc`` (see :func:`reader_idle`); elsewhere the drain waits a little instead.
READ_SYSCALL = {"x86_64": 0, "amd64": 0, "aarch64": 63, "arm64": 63}.get(platform.machine().lower())


def reader_idle(stream: Any, fallbacks: list[str] | None = None) -> bool | None:
    """Whether ipykernel's thread that reads ``stream``'s fd pipe (``watch_fd_thread``) is
    blocked reading that pipe, so holds nothing it has read and not yet written; None when
    this system cannot say (then :func:`drain_fd_output` waits a little instead). A stream
    with a pipe but no such thread is not ipykernel's layout: noted in ``fallbacks``."""
    thread = getattr(stream, "watch_fd_thread", None)
    tid = getattr(thread, "native_id", None)
    fid = getattr(stream, "_fid", None)
    if isinstance(fid, int) and not isinstance(tid, int) and fallbacks is not None:
        fell_back(fallbacks, "ipykernel's output stream has no watch_fd_thread: what C code writes "
                  "to fds 1 and 2 is waited for 1 ms after each cell, not until its reader is idle")
    if READ_SYSCALL is None or not isinstance(tid, int) or not isinstance(fid, int):
        return None
    if not thread.is_alive():  # the pipe was closed (a cell closed fds 1 and 2): its id may be reused
        return None
    try:
        with open(f"/proc/self/task/{tid}/syscall", "rb") as handle:
            fields = handle.read().split()
    except OSError:
        return None
    # "NR ARG1 ...", or "running", or "-1 SP PC" (between calls): only read(fid) is idle.
    return len(fields) > 1 and fields[0] == str(READ_SYSCALL).encode() and fields[1] == hex(fid).encode()


@functools.cache
def _libc_fflush() -> Callable[[Any], Any] | None:
    """libc's ``fflush``, looked up once per kernel (None where there is none)."""
    try:
        import ctypes

        return ctypes.CDLL(None).fflush
    except Exception:
        return None


def drain_fd_output(
    streams: Sequence[Any] | None = None, timeout: float = 2.0, fallbacks: list[str] | None = None
) -> None:
    """Let output that C code wrote to fds 1 and 2 reach the cell before the kernel goes idle.

    ipykernel forwards those fds through a pipe read by a thread (the read end is a stream's
    ``_fid``); what is still in the pipe when the cell ends would otherwise show up under a
    later cell, or nowhere. Done when the pipe is empty and its reader is back in ``read`` (it
    holds no chunk it has read but not written); where that cannot be seen, 1 ms after the pipe
    is empty (``fallbacks``: where :func:`reader_idle` notes that).
    """
    import fcntl
    import struct
    import termios

    fflush = _libc_fflush()
    if fflush is not None:
        try:
            fflush(None)  # C stdio buffers
        except Exception:
            pass
    deadline = time.monotonic() + timeout
    unsure = False
    for stream in (sys.stdout, sys.stderr) if streams is None else streams:
        fid = getattr(stream, "_fid", None)
        if fid is None:
            continue
        while time.monotonic() < deadline:
            try:
                pending = struct.unpack("i", fcntl.ioctl(fid, termios.FIONREAD, b"\0" * 4))[0]
            except OSError:
                break
            if not pending:
                # Empty first, then the reader in read(): it finished what it took before.
                idle = reader_idle(stream, fallbacks)
                if idle is None:
                    unsure = True
                if idle is not False:
                    break
            time.sleep(0.0005)
    if unsure:
        time.sleep(0.001)  # the reader thread may hold a last chunk it has read but not written


def version(module: str) -> str:
    """The version of an imported ``module`` (``__version__``), else its distribution's; or ""."""
    if not module:
        return ""
    mod = sys.modules.get(module)
    found = getattr(mod, "__version__", "") if mod is not None else ""
    if not found:
        try:
            from importlib import metadata

            found = metadata.version(module)
        except Exception:
            found = ""
    return str(found)


def probe(state: Any, gpu_used: Any, version_module: str) -> dict[str, Any]:
    """The session's provenance as the kernel sees it (``gpu_used``: a compiled expression, or
    None when the framework cannot tell: then ``gpu_used`` is None)."""
    try:
        used = None if gpu_used is None else bool(eval(gpu_used, {"sys": sys}))
    except Exception:
        used = False
    return {
        "python": platform.python_version(),
        "framework_version": version(version_module),
        "gpu_used": used,
        "host": socket.gethostname(),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "sync_errors": state.sync_errors,
        "fallbacks": [*state.fallbacks, *getattr(getattr(state, "budget", None), "fallbacks", [])],
    }


def iopub_pipe_to_ipc(fallbacks: list[str] | None = None) -> str:
    """Move ipykernel's IOPub pipe (how forked children's prints reach the cell) from a TCP
    port on 127.0.0.1 to an IPC socket beside the kernel's others (in the private runtime dir).

    Returns where the pipe listens now. Internals of ipykernel: if they differ, the pipe stays,
    and ``fallbacks`` says so.
    """
    import threading

    import zmq
    from ipykernel.kernelapp import IPKernelApp

    notes = [] if fallbacks is None else fallbacks
    stays = "forked children's output reaches the kernel through a TCP port on 127.0.0.1"
    app = IPKernelApp.instance()
    if app.transport != "ipc":  # a kernel on TCP (another machine's): its pipe is where it belongs
        return ""
    thread = getattr(app, "iopub_thread", None)
    if thread is None or getattr(thread, "_pipe_in", None) is None or not all(
        hasattr(thread, name) for name in ("_handle_pipe_msg", "_setup_pipe_out", "io_loop", "socket")
    ):
        fell_back(notes, f"ipykernel's IOPub thread is not laid out as livecells knows: {stays}")
        return ""
    address = f"ipc://{app.ip}-pipe"
    done, failed = threading.Event(), []

    def swap() -> None:
        try:
            from zmq.eventloop.zmqstream import ZMQStream

            pull = thread.socket.context.socket(zmq.PULL)
            pull.linger = 0
            pull.bind(address)
            old, thread._pipe_in = thread._pipe_in, ZMQStream(pull, thread.io_loop)
            thread._pipe_in.on_recv(thread._handle_pipe_msg)
            old.close()
        except Exception as err:
            failed.append(err)
        finally:
            done.set()

    thread.io_loop.add_callback(swap)
    if not done.wait(5) or failed:
        why = f"{type(failed[0]).__name__}: {failed[0]}" if failed else "no answer in 5 s"
        fell_back(notes, f"moving ipykernel's IOPub pipe failed ({why}): {stays}")
        return ""

    def setup_pipe_out() -> tuple[Any, Any]:
        context = zmq.Context()
        push = context.socket(zmq.PUSH)
        push.linger = 3000
        push.connect(address)
        return context, push

    thread._setup_pipe_out = setup_pipe_out
    return address


def import_printing(preload: Iterable[str]) -> list[list[str]]:
    """Import ``preload``; what it wrote (by Python to ``sys.stdout``/``sys.stderr``, by C to
    fds 1 and 2) as ``[stream name, text]`` pairs. The stream objects stay the kernel's own (an
    import may keep them, as a logging handler does): only their ``write`` is taken meanwhile."""
    import tempfile

    output: list[list[str]] = []
    streams = {"stdout": sys.stdout, "stderr": sys.stderr}
    for stream in streams.values():
        stream.flush()
    files = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    saved = {fd: os.dup(fd) for fd in files}
    for fd, file in files.items():
        os.dup2(file.fileno(), fd)

    def writer(name: str) -> Callable[[str], int]:
        def write(text: str) -> int:
            output.append([name, str(text)])
            return len(text)

        return write

    for name, stream in streams.items():
        try:  # ipykernel's OutStream takes it; a stream that does not is left as it is
            stream.write = writer(name)
        except (AttributeError, TypeError):
            pass
    try:
        for module in preload:
            importlib.import_module(module)
    finally:
        for stream in streams.values():
            getattr(stream, "__dict__", {}).pop("write", None)
        for (fd, file), name in zip(files.items(), ("stdout", "stderr")):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
            file.seek(0)
            text = file.read().decode(errors="replace")
            file.close()
            if text:
                output.append([name, text])
    return output


def show_pending(state: Any) -> None:
    """Write what the preloads printed into the cell that runs now (the first), once; into the
    streams' buffers, which the kernel flushes when it would have flushed the import's output."""
    pending, state.pending = getattr(state, "pending", []), []
    for name, text in pending:
        getattr(sys, name).write(text)


def register(shell: Any, *, sync: str, gpu_used: str, version_module: str) -> types.ModuleType:
    """The state module, in ``sys.modules``, and the timing hooks, registered with ``shell``.

    ``sync``: statements run after each cell (globals: ``sys``); ``gpu_used``: an expression
    (globals: ``sys``); ``version_module``: whose version :func:`probe` says.
    """
    state = new_state()
    sys.modules[STATE] = state
    sync_code = compile(sync or "pass", "<livecells-sync>", "exec")
    gpu_code = compile(gpu_used, "<livecells-gpu>", "eval") if gpu_used.strip() else None

    def pre(info: Any = None) -> None:
        show_pending(state)
        start(state, cell_count(shell, info), request_id(shell))

    def post(result: Any = None) -> None:
        finish(state, sync_code, result, request=request_id(shell))
        budget = getattr(state, "budget", None)
        if budget is not None:
            budget.error(result)

    state.probe = lambda: probe(state, gpu_code, version_module)
    shell.events.register("pre_run_cell", pre)
    shell.events.register("post_run_cell", post)
    return state


def install(
    shell: Any,
    *,
    sync: str,
    gpu_used: str,
    preload: Iterable[str],
    version_module: str,
    bound_output: Callable[[Any, int], Any],
    output_limit: int = 100_000,
) -> None:
    """What the kernel runs once: :func:`register`, the output bounded (``bound_output``: the
    budget's :func:`~livecells.kernel_side.budget.bound_output`), the IOPub pipe moved, the kernel
    made a subreaper, the framework's ``preload`` imported."""
    state = register(shell, sync=sync, gpu_used=gpu_used, version_module=version_module)
    state.budget = bound_output(shell, output_limit)
    try:
        state.iopub_pipe = iopub_pipe_to_ipc(state.fallbacks)
    except Exception as err:
        fell_back(state.fallbacks, f"moving ipykernel's IOPub pipe failed ({type(err).__name__}: {err})")
        state.iopub_pipe = ""
    try:  # orphans of the session's processes stay in the kernel's tree (see kernel_side/reaper.py)
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except Exception:
        pass
    # What the template's shared imports printed, then what the rest of the preload prints here
    # (its shell now exists): shown with the first cell, as where a fresh kernel imports it.
    stash = sys.modules.pop(PRELOAD_OUTPUT, None)
    state.pending = [*getattr(stash, "output", []), *import_printing(preload)]
