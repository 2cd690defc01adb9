"""Processes (issue 12, classes 4 and 8): no process outlives its session or the build, however
the build ends; the environment a kernel gets (``livecells_env_drop``); kernels listen on no TCP
port.

Processes are the subject here, so these tests start real kernels and real daemons and check
with psutil that nothing survives, however the build ends. The rest of issue 12's classes are
in their stages: config/test_config_values.py (class 5), read/test_locations.py (class 6),
plan/test_depends.py (class 7).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

import timing
from helpers import build_site, live_cell, procs_site, survivors

# Starts the members of the class "a process that leaves its kernel's group or session": a
# double-forked setsid daemon, a child that ignores SIGTERM, one in its own process group and one
# in a new session holding the kernel's stdout open; writes their pids to pids.txt.
FAMILY = """\
import os, subprocess, sys, time
r, w = os.pipe()
if os.fork() == 0:
    os.setsid()
    if os.fork() == 0:
        os.write(w, str(os.getpid()).encode())
        time.sleep(1000)
    os._exit(0)
os.waitpid(-1, 0)
daemon = int(os.read(r, 20))
stubborn = subprocess.Popen([sys.executable, "-c",
    "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(1000)"])
grouped = subprocess.Popen(["sleep", "1000"], preexec_fn=os.setpgrp)  # process_group=0 (3.11+)
holder = subprocess.Popen(["sleep", "1000"], start_new_session=True)  # holds fds 1 and 2
time.sleep(0.2)
pids = [os.getpid(), daemon, stubborn.pid, grouped.pid, holder.pid]
open("pids.txt", "w").write(" ".join(map(str, pids)))
print("family started")
"""


def describe(left: list[int], pids: list[int]) -> list[tuple]:
    """What each process left is (for a failure's message): pid, which of the cell's (its index in
    ``pids``, 0 the kernel; None: the build's), status, parent, where it waits, command line, and
    each of its threads' state and wait channel (one in ``D`` would hold up its exit)."""
    found = []
    for pid in dict.fromkeys(left):
        try:
            proc = psutil.Process(pid)
            threads = []
            for task in sorted(os.listdir(f"/proc/{pid}/task")):
                with open(f"/proc/{pid}/task/{task}/stat", "rb") as stat, open(f"/proc/{pid}/task/{task}/wchan") as wchan:
                    threads.append((task, stat.read().rsplit(b")", 1)[1].split()[0].decode(), wchan.read()))
            with open(f"/proc/{pid}/wchan", encoding="ascii") as handle:
                where = handle.read()
            found.append((pid, pids.index(pid) if pid in pids else None, proc.status(), proc.ppid(), where, proc.cmdline()[:3], threads, signals(pid)))
        except (OSError, psutil.Error) as err:
            found.append((pid, repr(err)))
    return found


def signals(pid: int) -> dict[str, str]:
    """Its signals sent but not yet acted on (masks; ``ShdPnd``: sent to the process; 0x100 is
    SIGKILL: set, its exit is held up; clear, it was never killed), and whether it is traced."""
    with open(f"/proc/{pid}/status", encoding="ascii") as handle:
        fields = dict(line.rstrip("\n").split(":\t", 1) for line in handle if ":\t" in line)
    return {k: fields.get(k, "") for k in ("State", "ShdPnd", "SigPnd", "TracerPid")}


def read_pids(path: Path) -> list[int]:
    return [int(p) for p in path.read_text().split()]


def spawn_build(src: Path, *extra: str, env: dict[str, str] | None = None) -> subprocess.Popen:
    """A ``sphinx-build`` process with Ctrl-C's default meaning, whatever this process's is: a
    test run started in the background by a script (whose shell ignores SIGINT in background
    jobs, as POSIX says) would pass SIG_IGN on, and a SIGINT sent to the build would do nothing.
    A handler of ours is not inherited: the build starts with the default disposition."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(
            [sys.executable, "-m", "sphinx", "-q", "-b", "html", *extra, str(src), str(src / "_build")],
            env={**os.environ, **(env or {})},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
    finally:
        signal.signal(signal.SIGINT, previous)


def wait_for(path: Path, proc: subprocess.Popen, within: float = timing.REACH) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(timing.POLL)
    time.sleep(timing.SETTLE)


def livecells_children(pid: int) -> list[psutil.Process]:
    found = []
    for child in psutil.Process(pid).children(recursive=True):
        try:
            found.append(child)
        except psutil.Error:
            continue
    return found


# --- Class 4: no process outlives its session or the build ----------------------------------


#: The root's index without its cell, for tests that need no session but their pages'.
INDEX = "\n.. toctree::\n   :glob:\n\n   page*\n"


@pytest.mark.kernel
@pytest.mark.parametrize("fork", [True, False], ids=["fork", "no-fork"])
def test_daemons_end_with_their_session_whether_it_ends_or_its_kernel_dies(tmp_path, rootdir, fork):
    """page1's session ends normally, page2's kernel is killed: both families end with them."""
    dies = FAMILY.replace('"pids.txt"', '"pids-died.txt"') + "os.kill(os.getpid(), 9)\n"
    pages = {"page1.rst": live_cell(FAMILY) + live_cell("print('after')"), "page2.rst": live_cell(dies), "index.rst": INDEX}
    src = procs_site(tmp_path, rootdir, pages)
    app, warnings = build_site(src, confoverrides={"livecells_fork_kernels": fork})
    assert survivors(read_pids(src / "pids.txt")) == [], warnings
    assert "after" in (app.outdir / "page1.html").read_text()
    assert re.search(r"page2\.rst:\d+: WARNING: .*SIGKILL", warnings), warnings
    assert survivors(read_pids(src / "pids-died.txt")) == []


LONG = FAMILY + "open('started', 'w').close()\ntime.sleep(1000)\n"


@pytest.mark.kernel
@pytest.mark.wallclock
@pytest.mark.parametrize("fork", [True, False], ids=["fork", "no-fork"])
@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGINT, signal.SIGTERM])
def test_a_build_ended_by_a_signal_mid_cell_leaves_nothing_running(tmp_path, rootdir, fork, signum):
    """kill -9 included; Ctrl-C and SIGTERM also end the build within 2 s. What finished before
    is stored (the index runs first: it has the most cells), and nothing of the session cut short."""
    src = procs_site(tmp_path, rootdir, {"page1.rst": live_cell(LONG)})
    with open(src / "index.rst", "a", encoding="utf-8") as index:
        index.write(live_cell("print('quick two')"))
    proc = spawn_build(src, "-D", f"livecells_fork_kernels={int(fork)}")
    wait_for(src / "started", proc)
    everything = [p.pid for p in livecells_children(proc.pid)]
    pids = read_pids(src / "pids.txt")
    assert pids[0] in everything  # the kernel
    assert bool(templates_of(proc.pid)) == fork  # forked from a template, or launched
    started = time.monotonic()
    proc.send_signal(signum)
    proc.communicate(timeout=timing.EXIT)
    assert time.monotonic() - started < timing.SIGNAL_ENDS_BUILD
    assert proc.returncode != 0
    left = survivors(pids + everything)
    assert left == [], describe(left, pids)
    stored = json.loads((src / "_livecells" / "index.json").read_text())
    assert stored["sessions"]["alpha"]["status"] == "ok"
    assert not (src / "_livecells" / "page1.json").exists()


SLOW_MODULE = "import time\ntime.sleep(60)\n"


def slow_preload_site(tmp_path: Path, rootdir: Path) -> tuple[Path, dict[str, str]]:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "livecells_slow_module.py").write_text(SLOW_MODULE)
    conf = (
        "\nlivecells_frameworks = {'alpha': {'label': 'Alpha', 'kernel': 'python3', "
        "'preload': ['livecells_slow_module'], 'version_of': 'sphinx'}}\n"
    )
    src = procs_site(tmp_path, rootdir, {"page1.rst": live_cell("print(1)")}, conf=conf)
    return src, {"PYTHONPATH": f"{modules}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}


def templates_of(pid: int) -> list[psutil.Process]:
    found = []
    for child in livecells_children(pid):
        try:
            if "forkserver" in " ".join(child.cmdline()):
                found.append(child)
        except psutil.Error:  # gone, or a zombie not yet reaped
            continue
    return found


@pytest.mark.kernel
@pytest.mark.wallclock
@pytest.mark.parametrize("how", ["sigint", "sigkill"])
def test_a_template_importing_a_slow_module_ends_with_the_build(tmp_path, rootdir, how):
    src, env = slow_preload_site(tmp_path, rootdir)
    proc = spawn_build(src, env=env)
    deadline = time.monotonic() + timing.REACH
    while not (found := templates_of(proc.pid)):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "no template started"
        time.sleep(timing.POLL)
    time.sleep(timing.IMPORT_UNDER_WAY)  # the build now waits for the import, in the read or the execute phase
    everything = [p.pid for p in livecells_children(proc.pid)]
    started = time.monotonic()
    proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)
    proc.communicate(timeout=timing.EXIT)
    assert time.monotonic() - started < timing.SIGNAL_ENDS_BUILD
    assert survivors([t.pid for t in found] + everything, within=timing.TEMPLATE_GONE) == []


def test_guard_kills_registered_trees_when_its_pipe_closes(tmp_path):
    from livecells.kernel_side.reaper import Guard

    daemon = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '1000'], "
         "start_new_session=True); time.sleep(1000)"]
    )
    time.sleep(timing.CHILD_START)
    tree = [daemon.pid] + [p.pid for p in psutil.Process(daemon.pid).children(recursive=True)]
    assert len(tree) == 2
    guard = Guard()
    guard.watch(daemon.pid)
    guard.close()  # as the death of the Sphinx process would
    daemon.wait(timing.KILLED)
    assert survivors(tree) == []


def test_a_dead_kernels_pid_now_naming_another_process_is_not_signalled():
    """A forked kernel that dies is reaped by its template at once; by the time its session
    ends, its pid may name another process (pid_max is 32768 on many machines). The shutdown
    signals the pid only while it names the process it started as."""
    from livecells.execute.kernels.session import KernelSession
    from livecells.kernel_side.reaper import process_start
    from livecells.model.frameworks import FrameworkSpec

    stranger = subprocess.Popen(["sleep", "1000"])
    try:
        session = KernelSession(FrameworkSpec(name="alpha", label="Alpha"), cwd=".")
        session.pid, session._pid_start = stranger.pid, process_start(stranger.pid) + 1
        session._kill_processes()  # the pid of a kernel that died, reused by ``stranger``
        time.sleep(timing.SETTLE)
        assert psutil.Process(stranger.pid).status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
        assert stranger.poll() is None and session._killed == [] and not session._root_killed
        session.pid, session._pid_start = stranger.pid, process_start(stranger.pid)
        session._kill_processes()  # still the process it started as: killed
        assert stranger.wait(timing.KILLED) == -signal.SIGKILL and session._root_killed
        assert process_start(stranger.pid) is None  # reaped (or a zombie): gone
    finally:
        stranger.kill()
        stranger.wait()


# --- Class 5 (a kernel's environment): livecells_env_drop ------------------------------

@pytest.mark.kernel
def test_livecells_env_drop_decides_which_variables_a_kernel_gets(tmp_path, rootdir, monkeypatch):
    from livecells.execute.forkserver.forked import MARKER

    monkeypatch.setenv("MY_SECRET", "s3")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_x")
    code = (
        'import os\nprint(sorted(n for n in ("MY_SECRET", "GITHUB_TOKEN") if n in os.environ),'
        ' open(f"/proc/{os.getppid()}/cmdline").read().count("' + MARKER + '"))'
    )
    src = procs_site(tmp_path, rootdir, {"page1.rst": live_cell(code)}, conf='\nlivecells_env_drop = ["my_*"]\n')
    app, warnings = build_site(src, confoverrides={"livecells_execute": "force"})
    assert "['GITHUB_TOKEN'] 1" in (app.outdir / "page1.html").read_text()  # forked, as configured
    app, warnings = build_site(src, confoverrides={"livecells_execute": "force", "livecells_env_drop": ""})
    assert "['GITHUB_TOKEN', 'MY_SECRET'] 1" in (app.outdir / "page1.html").read_text()  # -D: nothing dropped



# --- Class 8: kernels listen on no TCP port -------------------------------------------------

FORKED_PRINT = """\
import os, warnings
# Python 3.12+ warns that the kernel (threads: IOPub, heartbeat...) forks: not this test's subject.
warnings.filterwarnings("ignore", "This process .* is multi-threaded", DeprecationWarning)
pid = os.fork()
if pid == 0:
    print("from the forked child", flush=True)
    os._exit(0)
os.waitpid(pid, 0)
print("from the kernel")
"""


@pytest.mark.kernel
@pytest.mark.parametrize("fork", [True, False], ids=["fork", "no-fork"])
def test_kernels_listen_on_no_tcp_port_and_forked_prints_still_arrive(tmp_path, fork):
    import asyncio

    from jupyter_core.paths import jupyter_runtime_dir

    from livecells.execute.forkserver.server import ForkServer
    from livecells.execute.kernels.session import KernelSession
    from livecells.model.frameworks import FrameworkSpec

    async def session(server):
        factory = server.manager if server is not None else None
        async with KernelSession(FrameworkSpec(name="alpha", label="Alpha"), cwd=tmp_path, manager_factory=factory) as k:
            result = await k.run_cell(FORKED_PRINT, timing.CELL)
            tree = [psutil.Process(k.pid), *psutil.Process(k.pid).children(recursive=True)]
            inet = [c for p in tree for c in p.net_connections(kind="inet")]
            return result, inet, k._ipc_prefix, k.km.connection_file

    with ForkServer(enabled=fork) as server:
        result, inet, prefix, connection_file = asyncio.run(session(server))
    assert inet == []  # neither listening nor connected: every socket is IPC
    # Both prints arrive whole. A forked child's print is two writes (the text, the newline), and
    # ipykernel 6 sends each as it comes: the kernel's own print may land between them.
    text = "".join(o.get("text", "") for o in result.outputs)
    assert text.count("\n") == 2 and text.replace("\n", "") in {
        "from the forked childfrom the kernel", "from the kernelfrom the forked child"
    }, text
    left = [n for n in os.listdir(jupyter_runtime_dir()) if n.startswith(os.path.basename(prefix))]
    assert left == []  # nor its connection file: the shutdown cleaned up what jupyter_client made
    assert os.path.isabs(connection_file) and not os.path.exists(connection_file)
