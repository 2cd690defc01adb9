"""Kernel-side code as modules: the timing hook (kernel_side/hook.py, its output budget kernel_side/budget.py)
and the fork-server template (kernel_side/template.py, kernel_side/sharing.py), unit-tested with fakes in this process; run as files by a Python without
livecells; and one real kernel, to show that the hook's file is what times its cells."""

from __future__ import annotations

import ast
import asyncio
import json
import os
import platform
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
import types
from pathlib import Path
from typing import Any

import psutil
import pytest

from livecells.execute import environment
from livecells.execute.environment import is_own_python, kernel_python
from livecells.execute.forkserver.server import _key
from livecells.execute.kernels.hook_call import PROBE_EXPRESSION, TIME_EXPRESSION, hook_request
from livecells.execute.kernels.session import KernelSession
from livecells.kernel_side import budget, bytecode, hook, interpreter, reaper, sharing, template
from livecells.kernel_side.reaper import Guard
from livecells.model.frameworks import FrameworkSpec

import timing
from helpers import alive
from paths import REPO

SPEC = FrameworkSpec(
    name="alpha", label="Alpha", sync="sys.modules['_lc_test_sync'].calls += 1",
    gpu_used="'_lc_test_sync' in sys.modules", preload=("json",), version_of="_lc_test_framework",
)


class FakeEvents:
    def __init__(self) -> None:
        self.registered: dict[str, list[Any]] = {}

    def register(self, event: str, function: Any) -> None:
        self.registered.setdefault(event, []).append(function)


class FakeShell:
    def __init__(self) -> None:
        self.events = FakeEvents()
        self.execution_count = 1


class Clock:
    def __init__(self, *times: float) -> None:
        self.times = list(times)

    def __call__(self) -> float:
        return self.times.pop(0)


@pytest.fixture
def state(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A fresh hook state; whatever ``register`` puts in ``sys.modules`` is taken out after."""
    monkeypatch.setitem(sys.modules, hook.STATE, types.ModuleType("placeholder"))
    return hook.new_state()


# --- The hook, with fakes.


def test_a_cell_is_timed_from_pre_to_post_after_the_sync_and_then_drained(
    state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = types.SimpleNamespace(names=None, last=None)
    monkeypatch.setitem(sys.modules, "_lc_test_sync", seen)
    # The sync sees ``sys`` and nothing else of ours; it runs before the clock stops.
    sync = compile(
        "sys.modules['_lc_test_sync'].names = sorted(k for k in globals() if k != '__builtins__')\n"
        "sys.modules['_lc_test_sync'].last = sys.modules['_livecells_kernel'].last",
        "<livecells-sync>", "exec",
    )
    monkeypatch.setitem(sys.modules, hook.STATE, state)
    drained: list[Any] = []
    hook.start(state, 4, clock=Clock(10.0))
    cell = types.SimpleNamespace(execution_count=4)
    hook.finish(state, sync, cell, clock=Clock(12.5), drain=lambda: drained.append(state.last))
    assert state.last == [4, 2.5] and drained == [[4, 2.5]]
    assert seen.names == ["sys"] and seen.last is None
    assert state.sync_errors == []


def test_a_failed_sync_is_kept_with_its_cell_and_never_hides_the_time(state: Any) -> None:
    failing = compile("raise RuntimeError('device lost')", "<livecells-sync>", "exec")
    hook.start(state, 7, clock=Clock(1.0))
    hook.finish(state, failing, types.SimpleNamespace(execution_count=7), clock=Clock(1.25), drain=lambda: None)
    assert state.last == [7, 0.25]
    hook.start(state, clock=Clock(2.0))
    hook.finish(state, compile("raise KeyboardInterrupt", "<s>", "exec"), None, clock=Clock(3.0), drain=lambda: None)
    assert state.last == [None, 1.0]
    assert state.sync_errors == [[7, "RuntimeError: device lost"], [None, "KeyboardInterrupt: "]]


def test_a_cell_is_timed_whole_and_only_a_time_measured_for_it_is_its_own(state: Any) -> None:
    sync = compile("pass", "<s>", "exec")

    def finish(count: Any, at: float, request: str) -> None:
        hook.finish(state, sync, types.SimpleNamespace(execution_count=count), Clock(at), lambda: None, request)

    # A cell that ends with a nested run_cell: its clock neither restarts nor stops early.
    hook.start(state, 1, "r1", clock=Clock(0.0))
    hook.start(state, 2, "r1", clock=Clock(1.0))  # nested (same request): no new clock
    finish(2, 1.5, "r1")
    assert state.last is None and state.depth == 1
    finish(1, 1.5, "r1")
    assert state.last == [1, 1.5]
    # A post-run event whose pre-run event was not seen (unregistered): nothing measured.
    finish(2, 9.0, "r2")
    assert state.last == [1, 1.5]  # the build reads [1, ...] as cell 1's, never cell 2's
    # A cell that unregistered the post-run event: the next request starts afresh.
    hook.start(state, 3, "r3", clock=Clock(10.0))
    hook.start(state, 4, "r4", clock=Clock(20.0))
    assert state.last is None
    finish(4, 20.25, "r4")
    assert state.last == [4, 0.25]
    # The time of another cell than the one that started the clock is not kept.
    hook.start(state, 5, "r5", clock=Clock(30.0))
    finish(6, 31.0, "r5")
    assert state.last is None


def test_sync_errors_are_capped_in_number_and_length(state: Any) -> None:
    for count in range(hook.SYNC_ERROR_LIMIT + 20):
        hook.record_sync_error(state, types.SimpleNamespace(execution_count=count), ValueError("x" * 2000))
    assert len(state.sync_errors) == hook.SYNC_ERROR_LIMIT == 100
    assert state.sync_errors[0][0] == 0 and state.sync_errors[-1][0] == 99
    assert {len(message) for _, message in state.sync_errors} == {hook.SYNC_ERROR_CHARS} == {500}
    assert state.sync_errors[0][1].startswith("ValueError: xxx")


def test_register_installs_the_state_and_both_hooks_in_the_shell(
    state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    counter = types.SimpleNamespace(calls=0)
    monkeypatch.setitem(sys.modules, "_lc_test_sync", counter)
    monkeypatch.setitem(sys.modules, "_lc_test_framework", types.SimpleNamespace(__version__="9.1"))
    shell = FakeShell()
    installed = hook.register(shell, sync=SPEC.sync, gpu_used=SPEC.gpu_used, version_module=SPEC.version_module)
    assert sys.modules[hook.STATE] is installed and installed.last is None
    (pre,), (post,) = shell.events.registered["pre_run_cell"], shell.events.registered["post_run_cell"]
    shell.execution_count = 2  # IPython 9 counts a cell that keeps history before its pre-run event
    pre(types.SimpleNamespace(store_history=True))
    post(types.SimpleNamespace(execution_count=1))
    assert counter.calls == 1 and installed.last[0] == 1 and installed.last[1] >= 0
    # IPython 8 counts it after: the shell still says the cell's own count as it is announced.
    pre(types.SimpleNamespace(store_history=True))
    post(types.SimpleNamespace(execution_count=2))
    assert counter.calls == 2 and installed.last[0] == 2 and installed.last[1] >= 0
    found = installed.probe()
    assert set(found) == {"python", "framework_version", "gpu_used", "host", "pid", "ppid", "sync_errors", "fallbacks"}
    assert found["framework_version"] == "9.1" and found["gpu_used"] is True
    assert (found["pid"], found["ppid"], found["host"]) == (os.getpid(), os.getppid(), socket.gethostname())
    assert found["python"] == ".".join(map(str, sys.version_info[:3])) and found["sync_errors"] == []
    # What the build evaluates in the kernel reads this state.
    assert eval(TIME_EXPRESSION) == installed.last
    assert json.loads(eval(PROBE_EXPRESSION))["framework_version"] == "9.1"


def test_probe_survives_a_failing_gpu_expression_and_a_missing_framework(
    state: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert hook.probe(state, compile("1 / 0", "<g>", "eval"), "")["gpu_used"] is False
    assert hook.probe(state, compile("None", "<g>", "eval"), "no_such_module_livecells")["framework_version"] == ""
    assert hook.version("pytest") == pytest.__version__ != ""  # the module's __version__
    monkeypatch.setitem(sys.modules, "pytest", types.ModuleType("pytest"))  # none: the distribution's
    assert hook.version("pytest") == pytest.__version__
    assert hook.version("") == ""
    with pytest.raises(SyntaxError):  # a sync that does not compile fails the kernel's preparation
        hook.register(FakeShell(), sync="if", gpu_used="False", version_module="")


@pytest.mark.wallclock
def test_drain_waits_for_the_pipe_to_empty_but_not_past_its_timeout() -> None:
    read, write = os.pipe()
    try:
        os.write(write, b"pending")
        stream = types.SimpleNamespace(_fid=read)
        reader = threading.Timer(0.1, lambda: os.read(read, 100))
        started = time.monotonic()
        reader.start()
        hook.drain_fd_output([stream, types.SimpleNamespace()], timeout=5)
        assert 0.09 < time.monotonic() - started < timing.WAKE_SLACK
        reader.join()
        os.write(write, b"never read")
        started = time.monotonic()
        hook.drain_fd_output([stream], timeout=0.2)
        assert 0.19 < time.monotonic() - started < timing.PAST_TIMEOUT
        started = time.monotonic()
        hook.drain_fd_output([types.SimpleNamespace()], timeout=5)  # no ipykernel pipe: no wait
        assert time.monotonic() - started < timing.NO_WAIT
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.wallclock
@pytest.mark.skipif(hook.READ_SYSCALL is None, reason="no known read syscall number here")
def test_the_pipe_reader_is_idle_only_while_it_blocks_reading_the_pipe() -> None:
    """What the drain waits for, seen from /proc: a reader blocked in read() on the pipe is
    idle; one that holds a chunk it has read (here: still writing it on) is not, and the drain
    waits for it."""
    read, write = os.pipe()
    go_on, holding = threading.Event(), threading.Event()

    def reader() -> None:
        while os.read(read, 100) != b"end":
            holding.set()
            go_on.wait(timing.THREAD)  # holds the chunk, outside read()
            go_on.clear()

    thread = threading.Thread(target=reader)
    stream = types.SimpleNamespace(_fid=read, watch_fd_thread=thread)
    try:
        thread.start()
        deadline = time.monotonic() + timing.THREAD
        while hook.reader_idle(stream) is not True and time.monotonic() < deadline:
            time.sleep(timing.POLL)
        assert hook.reader_idle(stream) is True
        os.write(write, b"chunk")
        assert holding.wait(timing.THREAD)
        assert hook.reader_idle(stream) is False
        threading.Timer(0.15, go_on.set).start()
        started = time.monotonic()
        hook.drain_fd_output([stream], timeout=5)  # the pipe is empty, but the chunk is held
        assert 0.14 < time.monotonic() - started < timing.WAKE_SLACK
        assert hook.reader_idle(stream) is True
        started = time.monotonic()
        hook.drain_fd_output([stream], timeout=5)  # idle: no wait at all
        assert time.monotonic() - started < timing.NO_WAIT_IDLE
        # What cannot be seen counts as unknown, never as idle.
        assert hook.reader_idle(types.SimpleNamespace(_fid=read)) is None
        os.write(write, b"end")
        thread.join(5)
        assert hook.reader_idle(stream) is None  # a reader that has ended says nothing
    finally:
        if thread.is_alive():
            os.write(write, b"end")
            thread.join(5)
        os.close(read)
        os.close(write)


def test_the_hook_sent_loads_the_kernel_side_files_by_path_and_calls_install_with_the_settings() -> None:
    call = ast.parse(hook_request(SPEC, 2500), mode="eval").body
    assert isinstance(call, ast.Call) and call.func.id == "exec"
    program, namespace = call.args
    assert [ast.literal_eval(k) for k in namespace.keys] == ["get_ipython"]  # never the user's
    body = ast.parse(ast.literal_eval(program)).body
    assert isinstance(body[0], ast.FunctionDef) and body[0].name == "_load" and len(body) == 4
    loaded = body[1].value  # bytecode.py, then its install(sharing.installed_folders()) unless there
    assert [ast.literal_eval(a) for a in loaded.args] == ["_livecells_bytecode", bytecode.__file__]
    assert isinstance(body[2], ast.If) and body[2].test.operand.func.attr == "installed"
    fresh = body[2].body[0].value
    assert fresh.func.attr == "install" and fresh.func.value.id == "_fresh"
    [folders] = fresh.args
    assert folders.func.attr == "installed_folders" and not folders.args
    assert [ast.literal_eval(a) for a in folders.func.value.args] == ["_livecells_sharing", sharing.__file__]
    install = body[3].value
    assert install.func.attr == "install" and install.func.value.func.id == "_load"
    assert [ast.literal_eval(a) for a in install.func.value.args] == ["_livecells_kernel", hook.__file__]
    keywords = {kw.arg: kw.value for kw in install.keywords}
    bounds = keywords.pop("bound_output")  # the budget's file, a module of its own
    assert isinstance(bounds, ast.Attribute) and bounds.attr == "bound_output" and bounds.value.func.id == "_load"
    assert [ast.literal_eval(arg) for arg in bounds.value.args] == ["_livecells_budget", budget.__file__]
    settings = {name: ast.literal_eval(value) for name, value in keywords.items()}
    assert settings == {"sync": SPEC.sync, "gpu_used": SPEC.gpu_used, "preload": ["json"],
                        "version_module": "_lc_test_framework", "output_limit": 2500}


# A Python without site-packages (so without livecells, IPython, zmq) runs what a kernel is sent.
WITHOUT_LIVECELLS = """
import json, sys, types
registered = []
shell = types.SimpleNamespace(events=types.SimpleNamespace(register=lambda e, f: registered.append(e)))
get_ipython = lambda: shell
before = set(globals())
exec(sys.argv[1])
state = sys.modules["_livecells_kernel"]
print(json.dumps({"registered": registered, "new_names": sorted(set(globals()) - before - {"before"}),
                  "probe": state.probe(), "iopub_pipe": state.iopub_pipe, "json_preloaded": "json" in sys.modules,
                  "livecells": [m for m in sys.modules if m.startswith("livecells")],
                  "fresh_bytecode": [getattr(h, "_livecells_fresh_bytecode", False) for h in sys.path_hooks][:1]}))
"""


@pytest.mark.kernel
def test_the_hook_runs_in_a_python_without_livecells_in_a_namespace_of_its_own() -> None:
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", WITHOUT_LIVECELLS, hook_request(SPEC)],
        capture_output=True, text=True, timeout=timing.PYTHON_CHECK, check=True,
    )
    found = json.loads(done.stdout)
    assert found["registered"] == ["pre_run_cell", "post_run_cell"]
    assert found["new_names"] == ["state"]  # the caller's (the user's) namespace gets nothing
    assert found["livecells"] == [] and found["iopub_pipe"] == ""  # no ipykernel there: the pipe stays
    assert found["fresh_bytecode"] == [True]  # the path hook first, before the preload
    assert found["probe"]["framework_version"] == "" and found["probe"]["gpu_used"] is False


# --- The template's pure parts, with fakes.


def test_the_template_kills_an_orphan_handed_to_it_after_its_kernel_ended(monkeypatch: pytest.MonkeyPatch) -> None:
    """A kernel's process that forked while the dead kernel's tree was being killed reaches the
    template (a subreaper) later, when no kernel ends: the loop's next turn kills it all the same."""
    me = os.getpid()
    table = {me: (1, "S"), 111: (me, "S"), 222: (me, "S"), 223: (222, "S"), 333: (999, "S"), 444: (me, "Z")}
    killed: list[int] = []

    def no_child_ended(pid: int, options: int) -> tuple[int, int]:
        return 0, 0

    monkeypatch.setattr(template.os, "waitpid", no_child_ended)
    monkeypatch.setattr(template.reaper, "process_table", lambda: table)
    monkeypatch.setattr(template.reaper, "kill_tree", lambda pid: killed.append(pid) or [pid])
    children: dict[int, int | None] = {111: None}
    template._reap(children)
    assert killed == [222] and children == {111: None}  # the kernel lives; only the orphan goes


def test_a_kernel_gets_the_fds_passed_for_its_streams_or_dev_null() -> None:
    assert template.streams([], 9) == (9, 9)
    assert template.streams([3], 9) == (3, 3)
    assert template.streams([3, 4], 9) == (3, 4)


def test_a_dying_childs_report_goes_where_ipykernel_forwards_its_fd_2(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once ipykernel captures fd 2, the report of a child that dies is written to the stream
    its reader thread copies to (the log), not into the pipe that thread may never read again."""
    read, write = os.pipe()
    try:
        monkeypatch.setattr(sys, "stderr", types.SimpleNamespace(_original_stdstream_copy=write))
        template.report("Traceback: the reason\n")
        assert os.read(read, 100) == b"Traceback: the reason\n"
    finally:
        os.close(read)
        os.close(write)


def test_a_kernel_environment_is_the_sessions_plus_what_the_imports_set() -> None:
    before = {"PATH": "/bin", "MPLBACKEND": None, "KEEP": "x"}
    after = {"PATH": "/bin", "MPLBACKEND": "agg", "KEEP": "x", "PYDEVD_USE_FRAME_EVAL": "NO"}
    changes = template.imported_changes(before, after)
    assert changes == {"MPLBACKEND": [None, "agg"], "PYDEVD_USE_FRAME_EVAL": [None, "NO"]}
    request = {"env": {"PATH": "/bin", "MPLBACKEND": "svg", "OWN": "1"}}
    env = template.session_environ(request["env"], changes, 4242)
    # The session's own MPLBACKEND wins; what it left unset is set as a fresh kernel's imports would.
    assert env == {"PATH": "/bin", "MPLBACKEND": "svg", "OWN": "1", "PYDEVD_USE_FRAME_EVAL": "NO",
                   "JPY_PARENT_PID": "4242"}
    assert request["env"] == {"PATH": "/bin", "MPLBACKEND": "svg", "OWN": "1"}  # not changed


def test_every_generator_the_template_imported_is_reseeded() -> None:
    seeds: dict[str, list[Any]] = {"random": [], "numpy": [], "torch": []}
    modules = {
        "random": types.SimpleNamespace(seed=lambda *a: seeds["random"].append(a)),
        "numpy.random": types.SimpleNamespace(seed=lambda s: seeds["numpy"].append(s)),
        "torch": types.SimpleNamespace(manual_seed=lambda s: seeds["torch"].append(s)),
    }
    template.reseed(modules)
    template.reseed(modules)
    assert seeds["random"] == [(), ()]  # from os.urandom
    assert len(set(seeds["numpy"])) == 2 and all(0 <= s < 2**32 for s in seeds["numpy"])
    assert len(set(seeds["torch"])) == 2 and all(0 <= s < 2**63 for s in seeds["torch"])
    template.reseed({"random": modules["random"]})  # numpy and torch not imported: not imported now
    assert len(seeds["random"]) == 3 and len(seeds["numpy"]) == 2


def test_a_template_refuses_to_fork_once_cuda_is_initialised(monkeypatch: pytest.MonkeyPatch) -> None:
    cuda = types.SimpleNamespace(is_initialized=lambda: True)
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    assert "initialised CUDA" in sharing.cuda_touched()
    cuda.is_initialized = lambda: False
    gpu_open = any(os.path.realpath(f"/proc/self/fd/{fd}").startswith("/dev/nvidia") for fd in os.listdir("/proc/self/fd"))
    assert (sharing.cuda_touched() is None) is not gpu_open


def _ask(payload: bytes, fds: list[int] = ()) -> dict[str, Any]:
    """One request served by the template's ``_serve`` over a socket pair (no fork happens)."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        socket.send_fds(ours, [payload], list(fds))
        assert template._serve(theirs, None, set(), {}) is None
        return json.loads(ours.recv(65536))


def test_bad_requests_get_an_answer_and_the_fds_passed_are_closed(tmp_path: Path) -> None:
    opened = len(os.listdir("/proc/self/fd"))
    with open(tmp_path / "log", "wb") as log:
        missing = {"op": "launch", "cwd": str(tmp_path / "gone"), "env": {}, "module": "m", "args": []}
        assert _ask(json.dumps(missing).encode() + b"\n", [log.fileno(), log.fileno()]) == {
            "error": f"no such directory: {tmp_path / 'gone'}"
        }
    assert _ask(b"{not json\n")["error"].startswith("JSONDecodeError")
    assert _ask(b'{"op": "launch"}\n') == {"error": "KeyError: 'cwd'"}
    assert len(os.listdir("/proc/self/fd")) == opened  # the received copies were closed


@pytest.mark.kernel
def test_the_template_runs_as_a_file_in_a_python_without_livecells() -> None:
    """``python -c BOOT template.py ...`` with no site-packages: it loads reaper.py and sharing.py beside it,
    and (its parent is not the pid given) returns at once, leaving no livecells module."""
    check = (
        f"{template.BOOT}; print(__file__, reaper.__name__, sharing.__name__, "
        "[m for m in sys.modules if 'livecells' in m], sep='\\n')"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", check, template.__file__, "marker", "/nonexistent.sock", "1", "[]"],
        capture_output=True, text=True, timeout=timing.PYTHON_CHECK, check=True,
    )
    assert done.stdout.splitlines() == [template.__file__, "_livecells_reaper", "_livecells_sharing", "[]"]
    assert template._beside("reaper.py").kill_tree.__module__ == "_livecells_reaper"
    assert template._beside("sharing.py").shared_roots.__module__ == "_livecells_sharing"
    assert "_livecells_reaper" not in sys.modules and "_livecells_sharing" not in sys.modules


def test_the_guard_runs_reaper_py_as_a_file() -> None:
    guard = Guard()
    try:
        if guard.process is not None:
            assert guard.process.args[3] == os.path.abspath(reaper.__file__)
            assert guard.process.poll() is None
    finally:
        guard.close()
    assert guard.process is None


# --- "Is this kernel our Python?", one answer.


def test_which_kernelspec_python_is_this_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    major, minor = sys.version_info[:2]
    for bare in ("python", f"python{major}", f"python{major}.{minor}"):
        assert kernel_python(bare) == sys.executable and is_own_python(bare), bare
        assert _key(bare, {}, ())[0] == sys.executable  # the fork server's template runs it
    assert is_own_python(sys.executable) and is_own_python(os.path.abspath(sys.executable))
    # A venv of our own: another name for the binary in its folder is ours; a link to it from
    # another folder is not (the venv is found from the folder of the path run), nor another binary.
    venv = tmp_path / "venv" / "bin"
    venv.mkdir(parents=True)
    (venv / "python").symlink_to(os.path.realpath(sys.executable))
    (venv / "python3").symlink_to("python")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "python").symlink_to(venv / "python")
    other = venv / "python2"
    other.write_text("#!/bin/sh\n")
    other.chmod(0o755)
    monkeypatch.setattr(sys, "executable", str(venv / "python"))
    assert is_own_python(str(venv / "python3"))
    assert not is_own_python(str(elsewhere / "python"))
    assert not is_own_python(os.path.realpath(sys.executable))
    assert not is_own_python(str(other)) and not is_own_python("") and not is_own_python(str(venv / "gone"))
    # A name that is not this version's is looked up on PATH, as the kernel's launch would.
    monkeypatch.setenv("PATH", str(elsewhere))
    assert kernel_python("python") == str(venv / "python")  # never PATH's: jupyter_client's rule
    (elsewhere / "python3.1").symlink_to(other)
    assert kernel_python("python3.1") == str(elsewhere / "python3.1") and not is_own_python("python3.1")
    assert kernel_python("no-such-python") == "no-such-python"


def test_another_kernels_python_is_asked_by_running_interpreter_py(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same interpreter asked two ways (in-process, and as another kernelspec's Python that
    runs kernel_side/interpreter.py as a file) gives the same fingerprint."""
    wrapper = tmp_path / "bin" / "python"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} "$@"\n')
    wrapper.chmod(0o755)
    kernel = tmp_path / "share" / "jupyter" / "kernels" / "other"
    kernel.mkdir(parents=True)
    argv = [str(wrapper), "-m", "ipykernel_launcher", "-f", "{connection_file}"]
    (kernel / "kernel.json").write_text(json.dumps({"argv": argv, "display_name": "Other", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "share" / "jupyter"))
    modules = ["json", "no_such_module_livecells", "pytest"]
    assert not is_own_python(str(wrapper))
    found = environment.fingerprint(FrameworkSpec(name="o", label="O", kernel="other", preload=tuple(modules)))
    assert found.info["packages"] == interpreter.details(modules)["packages"]
    assert found.info["packages"]["json"].startswith("stdlib ") and found.info["packages"]["pytest"] == pytest.__version__
    assert found.sources["executable"] == sys.executable
    assert "no_such_module_livecells not installed for kernel 'other'" in found.problem


@pytest.mark.slow
def test_which_distribution_provides_a_module_is_read_once_per_interpreter_query(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Reading which distributions provide each module opens every installed distribution's file
    list: asked for none when every module is a distribution's name, the standard library's, or
    not installed; once for several in site-packages that a distribution of another name provides."""
    real, calls = interpreter.metadata.packages_distributions, []
    monkeypatch.setattr(interpreter.metadata, "packages_distributions", lambda: calls.append(1) or real())
    found = interpreter.details(["pytest", "psutil", "json", "os", "no_such_module_livecells"])["packages"]
    assert calls == []
    assert found["pytest"] == pytest.__version__ and found["psutil"] == psutil.__version__
    assert found["json"] == found["os"] == f"stdlib {platform.python_version()}"
    assert found["no_such_module_livecells"] == ""
    found = interpreter.details(["_pytest", "_pytest.python", "pytest"])["packages"]
    assert calls == [1]
    assert found == {"_pytest": pytest.__version__, "_pytest.python": pytest.__version__, "pytest": pytest.__version__}


def test_a_submodule_is_versioned_by_its_package_and_found_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preload such as ``d2l.torch``: the book's package on PYTHONPATH (set after this process
    started, as a build may set it for its kernels) is looked into, not imported (its
    ``__init__`` would run in the build's process); a distribution's submodule has
    the distribution's version; a missing submodule is not installed."""
    package = tmp_path / "livecells_book_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("open(__file__ + '.ran', 'w').close()\nraise RuntimeError('ran')\n")
    (package / "torch.py").write_text("")
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # set since this process started, as kernels see it
    real, calls = interpreter.metadata.packages_distributions, []
    monkeypatch.setattr(interpreter.metadata, "packages_distributions", lambda: calls.append(1) or real())
    found = interpreter.details(
        ["livecells_book_pkg.torch", "livecells_book_pkg.jax", "_pytest.python", "os.path", "no_such_module_livecells.x"]
    )["packages"]
    assert found == {
        "livecells_book_pkg.torch": "unversioned",
        "livecells_book_pkg.jax": "",
        "_pytest.python": pytest.__version__,  # _pytest is the pytest distribution's
        "os.path": f"stdlib {platform.python_version()}",
        "no_such_module_livecells.x": "",
    }
    assert not (package / "__init__.py.ran").exists() and "livecells_book_pkg" not in sys.modules
    assert calls == [1]  # for _pytest, in site-packages; not for the book's package


# --- One real kernel: the hook's file is what runs there.


@pytest.mark.kernel
@pytest.mark.wallclock
def test_a_real_kernel_runs_the_hook_file_and_times_its_cells(tmp_path: Path) -> None:
    spec = FrameworkSpec(name="alpha", label="Alpha", sync="raise ValueError('sync failed')", preload=("json",))

    async def session() -> tuple[Any, Any, Any]:
        async with KernelSession(spec, cwd=tmp_path) as kernel:
            where = await kernel.run_cell(
                "import sys\nstate = sys.modules['_livecells_kernel']\n"
                "print(state.probe.__code__.co_filename, 'install' in globals(), 'json' in sys.modules, sep='\\n')", 30
            )
            timed = await kernel.run_cell("import time; time.sleep(0.05)", timing.CELL, last=True)
            return where, timed, await kernel.probe()

    where, timed, probe = asyncio.run(session())
    text = "".join(o.get("text", "") for o in where.outputs)
    assert text.splitlines() == [hook.__file__, "False", "True"]
    assert where.time is not None and 0.05 <= timed.time < timing.TIMED_CELL
    assert probe.sync_errors == ((1, "ValueError: sync failed"), (2, "ValueError: sync failed"))


@pytest.mark.kernel
@pytest.mark.wallclock
def test_a_real_kernel_times_a_cell_whole_and_never_shows_a_time_not_measured(tmp_path: Path) -> None:
    spec = FrameworkSpec(name="alpha", label="Alpha", preload=("json",))
    nested = "import time\ntime.sleep(0.4)\nget_ipython().run_cell('time.sleep(0.01)')"
    unregister = (
        "ip = get_ipython()\n"
        "for name in {events!r}:\n"
        "    for f in list(ip.events.callbacks[name]):\n"
        "        if getattr(f, '__module__', '') == '_livecells_kernel':\n"
        "            ip.events.unregister(name, f)\n"
        "time.sleep(0.05)"
    )

    async def session(events: list[str]) -> list[Any]:
        async with KernelSession(spec, cwd=tmp_path) as kernel:
            cells = [nested, "time.sleep(0.02); 1 / 0", unregister.format(events=events), "1 + 1", "1 / 0"]
            return [await kernel.run_cell(code, timing.CELL) for code in cells]

    for events in (["post_run_cell"], ["pre_run_cell"], ["pre_run_cell", "post_run_cell"]):
        whole, plain, cut, after, failed = asyncio.run(session(events))
        assert whole.status == "ok" and 0.4 <= whole.time < timing.TIMED_CELL  # not the nested cell's 0.01 s
        # Each time is its own cell's (at least its sleep), never the one before's: compared by
        # value, not by a bound that a loaded machine can pass.
        assert plain.status == "error" and plain.time is not None and plain.time >= 0.02
        assert plain.time != whole.time
        # Once the hook's events are gone, no time is measured: none is shown (not plain's). The
        # cell that removed them was measured whole only if its post-run event is still there.
        if "post_run_cell" in events:
            assert cut.time is None
        else:
            assert cut.time is not None and cut.time >= 0.05 and cut.time not in (whole.time, plain.time)
        assert (after.time, failed.time) == (None, None), events
        assert after.outputs[0]["data"]["text/plain"] == "2" and failed.status == "error"


def test_the_guard_kills_what_a_dead_kernel_left_wherever_it_went(tmp_path: Path) -> None:
    """A kernel that dies before the build (its template died with a killed worker, say) leaves a
    daemon re-parented to PID 1, out of every tree; it still carries the session's token."""
    import subprocess
    import sys
    import time

    import psutil

    from livecells.kernel_side.reaper import SESSION_VARIABLE

    token = "feedbeef" * 4
    kernel = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    pidfile = tmp_path / "daemon.pid"
    daemon_code = (
        "import os, subprocess, sys\n"
        "p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'], start_new_session=True)\n"
        f"open({str(pidfile)!r}, 'w').write(str(p.pid))\n"
    )
    env = {**os.environ, SESSION_VARIABLE: token}
    subprocess.run([sys.executable, "-c", daemon_code], env=env, check=True)  # its parent exits
    daemon = int(pidfile.read_text())
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], env={**os.environ, SESSION_VARIABLE: "other"})
    guard = Guard()
    try:
        if guard.process is None:
            pytest.skip("no guard process on this platform")
        guard.watch(kernel.pid, token)
        kernel.kill()
        kernel.wait()  # the kernel is gone first: its tree cannot be walked any more
        assert psutil.Process(daemon).status() != psutil.STATUS_ZOMBIE
        guard.close()  # as when the build dies: the pipe closes
        deadline = time.monotonic() + timing.GUARD_EXIT
        while alive(daemon):
            assert time.monotonic() < deadline, "the daemon outlived the guard"
            time.sleep(timing.POLL)
        assert other.poll() is None  # another session's process is not touched
    finally:
        other.kill()
        other.wait()
        for pid in (daemon,):
            try:
                os.kill(pid, 9)
            except OSError:
                pass


def test_a_fork_that_fails_is_answered_and_leaves_sigterm_deliverable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """SIGTERM is blocked around the fork (the child's record must be kept first): a fork that
    fails (EAGAIN, out of processes) must not leave it blocked, or the build's end could not
    stop the template."""

    def no_fork() -> int:
        raise BlockingIOError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(template.os, "fork", no_fork)
    before = signal.pthread_sigmask(signal.SIG_BLOCK, [])
    launch = {"op": "launch", "cwd": str(tmp_path), "env": {}, "module": "m", "args": []}
    assert _ask(json.dumps(launch).encode() + b"\n") == {"error": "BlockingIOError: [Errno 11] Resource temporarily unavailable"}
    assert signal.pthread_sigmask(signal.SIG_BLOCK, []) == before and signal.SIGTERM not in before


def test_a_template_tells_the_files_its_imports_read_outside_the_installed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a launcher checks before it forks: the imported files that no install (and so no
    environment fingerprint) accounts for, as read; and which of them changed since."""
    from livecells.execute.forkserver.forked import changed_file

    helper = tmp_path / "livecells_test_imported_helper.py"
    helper.write_text("VERSION = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import livecells_test_imported_helper  # noqa: F401 - imported to be found in sys.modules

    files = sharing.imported_files(sys.modules, sharing.installed_folders())
    assert str(helper) in files
    # None of the interpreter's own files, whatever its layout: pyenv's, or Debian's, whose
    # /usr/lib/python3.11/sitecustomize.py links to /etc (outside every install, so listed).
    ours = _folders(REPO, tmp_path)
    interpreter = _folders(sys.prefix, sys.base_prefix)
    real = {p: os.path.realpath(p) for p in files if not os.path.realpath(p).startswith(ours)}
    assert not [p for p, r in real.items() if "site-packages" in r or r.startswith(interpreter)], real
    assert json.__file__ not in files and pytest.__file__ not in files
    written = files[str(helper)][0]
    later = {str(helper): files[str(helper)]}
    assert changed_file(later, written + 1) is None
    assert changed_file(later, written) == str(helper)  # written as the imports ran: unsure
    helper.write_text("VERSION = 2\n")  # same size, new time
    os.utime(helper, ns=(written, written))  # even with its time put back (ctime is not)
    assert changed_file(later, written + 1) == str(helper)
    helper.unlink()
    assert changed_file(later, 0) == str(helper)


def _folders(*paths: str | Path) -> tuple[str, ...]:
    return tuple(os.path.join(os.path.realpath(p), "") for p in paths)


def test_a_file_an_installed_folder_links_to_from_outside_is_outside(tmp_path: Path) -> None:
    """As Debian's sitecustomize.py (in the standard library, a link to /etc): no install
    accounts for what it reads, so a template checks it before it forks; an installed file
    reached through a linked folder (a venv's lib64) stays installed."""
    installed, outside = tmp_path / "lib" / "python3.11", tmp_path / "etc"
    installed.mkdir(parents=True)
    outside.mkdir()
    (outside / "sitecustomize.py").write_text("")
    (installed / "sitecustomize.py").symlink_to(outside / "sitecustomize.py")
    (installed / "json.py").write_text("")
    (tmp_path / "lib64").symlink_to("lib")
    modules = {
        "sitecustomize": types.SimpleNamespace(__file__=str(installed / "sitecustomize.py")),
        "json": types.SimpleNamespace(__file__=str(tmp_path / "lib64" / "python3.11" / "json.py")),
    }
    assert list(sharing.imported_files(modules, [str(installed)])) == [str(installed / "sitecustomize.py")]


def test_the_template_leaves_preload_output_where_the_hook_looks() -> None:
    assert sharing.PRELOAD_OUTPUT == hook.PRELOAD_OUTPUT


def test_import_printing_takes_python_and_c_level_output_and_gives_the_streams_back(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    class Stream:  # as ipykernel's OutStream: a plain object whose write can be taken
        def __init__(self) -> None:
            self.seen: list[str] = []

        def write(self, text: str) -> int:
            self.seen.append(text)
            return len(text)

        def flush(self) -> None:
            pass

    out, err = Stream(), Stream()
    monkeypatch.setattr(sys, "stdout", out)
    monkeypatch.setattr(sys, "stderr", err)
    (tmp_path / "lc_loud.py").write_text(
        "import os, sys\nprint('py out')\nos.write(2, b'c err\\n')\nsys.stderr.write('py err')\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    found = hook.import_printing(["lc_loud"])
    assert found[0] == ["stdout", "py out"] and found[-1] == ["stderr", "c err\n"]
    assert ["stderr", "py err"] in found
    print("after")  # the streams are the kernel's again, and nothing reached them meanwhile
    assert out.seen == ["after", "\n"] and err.seen == [] and "write" not in vars(out)
    assert capfd.readouterr().err == ""


def test_the_output_budget_cuts_streams_displays_and_values_before_they_are_sent() -> None:
    outputs = budget.OutputBudget(200_000)  # ten times the limit: 2,000,000 characters a stream
    assert outputs.stream_budget == 2_000_000 and budget.OutputBudget(10).stream_budget == budget.STREAM_MIN

    def stream(request: str, name: str, text: str) -> Any:
        return outputs.stream({"parent_header": {"msg_id": request}, "content": {"name": name, "text": text}})

    assert stream("a", "stdout", "x" * 1_500_000)["content"]["text"] == "x" * 1_500_000
    cut = stream("a", "stdout", "y" * 1_000_000)["content"]["text"]
    assert cut.startswith("y" * 500_000 + "\n[livecells: this cell's stdout went on past 2,000,000 characters")
    assert stream("a", "stdout", "z") is None  # nothing more of this cell's stdout
    assert stream("a", "stderr", "e")["content"]["text"] == "e"  # its own budget
    assert stream("b", "stdout", "next cell")["content"]["text"] == "next cell"  # a new request

    def display(request: str, data: Any) -> Any:
        msg = {"msg_type": "display_data", "header": {"msg_type": "display_data"},
               "parent_header": {"msg_id": request}, "content": {"data": data, "transient": {}}}
        return outputs.display(msg)

    big = display("c", {"text/html": ["x" * budget.VALUE_CAP, "x"], "text/plain": "fine"})["content"]["data"]
    assert big == {"text/plain": f"[livecells: a text/html output of {budget.VALUE_CAP + 1:,} characters "
                   f"was not sent: the limit is {budget.VALUE_CAP:,}]"}
    for _ in range(budget.MAX_DISPLAYS - 1):
        assert display("c", {"text/plain": "1"}) is not None
    note = display("c", {"text/plain": "1"})["content"]["data"]["text/plain"]
    assert note.startswith("[livecells: this cell's displays went on past 10,000")
    assert display("c", {"text/plain": "1"}) is None
    clear = {"parent_header": {"msg_id": "c"}, "content": {"wait": True}}
    assert all(outputs.display(clear) is not None for _ in range(budget.MAX_DISPLAYS))
    assert outputs.display(clear) is None  # a flood of clear_output is cut as displays are
    assert display("d", {"text/plain": "1"}) is not None
    assert budget.cap_lines(["ab", "cd", "ef"], 3) == ["ab", "c\n[livecells: 1 more characters were not sent]"]
    result = types.SimpleNamespace(error_in_exec=ValueError("k" * 50))
    budget.cap_error(result, 10)
    assert type(result.error_in_exec).__name__ == "ValueError" and str(result.error_in_exec).startswith("k" * 10)


def test_a_template_keeps_its_preload_probe_while_nothing_it_rests_on_changes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The probe (the preload imported in a child, a second import of the framework) runs once:
    later templates read its answer, until the preload, the environment or a file it imported
    changes."""
    module = tmp_path / "lc_probe_mod.py"
    module.write_text("import json\n")
    found = {
        "order": ["lc_probe_mod"], "parent": {"lc_probe_mod": None}, "unsafe": {}, "error": None,
        "files": {str(module): sharing.file_state(os.stat(module))}, "folders": sharing.folder_states(),
    }
    cache = str(tmp_path / "probe" / "one.json")
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None  # nothing kept yet
    sharing.keep_probe(cache, ["lc_probe_mod"], found)
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) == found

    def no_probe(preload: list[str]) -> dict[str, Any]:
        raise AssertionError("probed again")

    monkeypatch.setattr(template, "_probe", no_probe)
    assert template.shareable(["lc_probe_mod"], cache) == (["lc_probe_mod"], {})
    assert sharing.cached_probe(cache, ["lc_probe_mod", "json"]) is None  # another preload
    monkeypatch.setenv("LC_PROBE_SETTING", "1")
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None  # another environment
    monkeypatch.delenv("LC_PROBE_SETTING")
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) == found
    # Another book's folder on sys.path may hold another lc_probe_mod: shared by users' books, the
    # answer stands only where modules are looked for in the same places.
    monkeypatch.setattr(sys, "path", [str(tmp_path / "another-book"), *sys.path])
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None
    monkeypatch.undo()
    monkeypatch.setattr(template, "_probe", no_probe)
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) == found
    module.write_text("import json, csv\n")  # the preload's own code changed
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None
    (tmp_path / "probe" / "one.json").write_text("{damaged")
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None
    # Kept by another version, or written by hand: what it rests on unchanged, its shape not an answer.
    module.write_text("import json\n")
    found["files"] = {str(module): sharing.file_state(os.stat(module))}
    sharing.keep_probe(cache, ["lc_probe_mod"], {**found, "order": "lc_probe_mod"})
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None
    sharing.keep_probe(cache, ["lc_probe_mod"], {k: v for k, v in found.items() if k != "error"})
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) is None
    sharing.keep_probe(cache, ["lc_probe_mod"], found)
    assert sharing.cached_probe(cache, ["lc_probe_mod"]) == found


# --- Private parts of ipykernel and IPython: where one is not as livecells knows it, the kernel
# does without, and says so (the probe's ``fallbacks``: a livecells.kernel warning in the build).


def test_the_budget_says_which_private_parts_it_did_without(monkeypatch: pytest.MonkeyPatch) -> None:
    plain = types.SimpleNamespace(write=lambda text: len(text), flush=lambda: None)
    monkeypatch.setattr(sys, "stdout", plain)
    monkeypatch.setattr(sys, "stderr", plain)
    shell = types.SimpleNamespace(display_pub=types.SimpleNamespace(register_hook=None))
    found = budget.bound_output(shell, 1000).fallbacks
    expected = ["sys.stdout has no register_hook", "sys.stderr has no register_hook", "display publisher",
                "display_formatter.format", "_showtraceback", "payload_manager.write_payload", "IOPub thread"]
    assert len(found) == len(expected) and all(e in f for e, f in zip(expected, found)), found


def test_the_probe_hands_the_build_the_hooks_and_the_budgets_fallbacks(state: Any) -> None:
    hook.fell_back(state.fallbacks, "x" * 1000)
    hook.fell_back(state.fallbacks, "x" * 1000)  # once
    for n in range(2 * hook.FALLBACK_LIMIT):
        hook.fell_back(state.fallbacks, f"note {n}")
    state.budget = types.SimpleNamespace(fallbacks=["the budget's"])
    found = hook.probe(state, None, "")["fallbacks"]
    assert found[0] == "x" * hook.FALLBACK_CHARS and len(found) == hook.FALLBACK_LIMIT + 1
    assert found[-1] == "the budget's"


def test_a_stream_with_a_pipe_but_no_reader_thread_is_not_ipykernels_layout() -> None:
    read, write = os.pipe()
    try:
        notes: list[str] = []
        stream = types.SimpleNamespace(_fid=read)  # no watch_fd_thread
        assert hook.reader_idle(stream, notes) is None
        assert len(notes) == 1 and "watch_fd_thread" in notes[0]
    finally:
        os.close(read)
        os.close(write)


@pytest.mark.kernel
def test_no_fallback_fires_on_the_installed_ipykernel_and_ipython(tmp_path: Path) -> None:
    """The versions installed here (each end of the matrix runs this too): every private part the
    hook and the budget rely on is as they know it, in a plain kernel and in a forked one."""
    from livecells.execute.forkserver.forked import ForkedProcess
    from livecells.execute.forkserver.server import ForkServer

    spec = FrameworkSpec(name="alpha", label="Alpha", preload=("json",))
    cells = ["import os, sys; os.write(1, b'from C\\n'); print('from Python')", "1 / 0",
             "from IPython.display import display; display({'text/plain': 'shown'}, raw=True)"]

    async def session(factory: Any = None) -> Any:
        async with KernelSession(spec, cwd=tmp_path, manager_factory=factory) as kernel:
            results = [await kernel.run_cell(code, timing.CELL) for code in cells]
            forked = isinstance(getattr(kernel.km.provisioner, "process", None), ForkedProcess)
            return results, await kernel.probe(), forked

    (first, failed, shown), probe, forked = asyncio.run(session())
    assert "from C" in "".join(o.get("text", "") for o in first.outputs) and failed.status == "error"
    assert not forked and probe.fallbacks == ()
    with ForkServer() as server:
        server.prepare(spec)

        async def forked_session() -> Any:
            assert await server.ready(spec)
            return await session(server.manager)

        _, probe, forked = asyncio.run(forked_session())
    assert forked and probe.fallbacks == ()
