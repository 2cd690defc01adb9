"""Containment when the stopping itself goes wrong: a walk of /proc that fails, a second SIGTERM.

A kernel is killed as a tree (:func:`~livecells.kernel_side.reaper.kill_tree`: stop the root, kill
its descendants, kill the root) by its session, by its template and by the build's guard. Each
of these must finish what it started: a root left stopped holds itself, and what is left of its
tree, alive with no one left to kill them. Faults are injected where they could come from.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from livecells.execute.forkserver.server import ForkServer
from livecells.execute.kernels.session import KernelSession
from livecells.kernel_side import reaper
from livecells.model.frameworks import FrameworkSpec

import timing
from helpers import alive, survivors

pytestmark = pytest.mark.usefixtures("no_kernel_left")

# A root with a child in a session of its own (killpg would miss it); prints the child's pid.
TREE = (
    "import subprocess, time\n"
    "child = subprocess.Popen(['sleep', '1000'], start_new_session=True)\n"
    "print(child.pid, flush=True)\n"
    "time.sleep(1000)\n"
)


def start_tree() -> tuple[subprocess.Popen, int]:
    root = subprocess.Popen([sys.executable, "-c", TREE], stdout=subprocess.PIPE)
    assert root.stdout is not None
    return root, int(root.stdout.readline())


def clean_up(pids: list[int]) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def failing_walks(monkeypatch: pytest.MonkeyPatch, how_many: int) -> list[int]:
    """The next ``how_many`` walks of ``kill_tree`` raise (as a /proc entry read mid-exit could)."""
    real, calls = reaper.descendants, []

    def descendants(root: int, table: object = None) -> list[int]:
        calls.append(root)
        if len(calls) <= how_many:
            raise ValueError("a /proc entry changed under the walk")
        return real(root, table)

    monkeypatch.setattr(reaper, "descendants", descendants)
    return calls


def test_a_walk_that_fails_once_is_walked_again_and_the_whole_tree_dies(monkeypatch):
    root, child = start_tree()
    try:
        calls = failing_walks(monkeypatch, 1)
        killed = reaper.kill_tree(root.pid)
        assert len(calls) >= 2 and set(killed) == {child, root.pid}
        assert root.wait(timing.KILLED) == -signal.SIGKILL
        assert survivors([child]) == []
    finally:
        clean_up([root.pid, child])
        root.wait()


def test_a_walk_that_always_fails_still_kills_the_root_it_stopped(monkeypatch):
    """The error is raised, but the root is not left stopped (and alive) behind it."""
    root, child = start_tree()
    try:
        failing_walks(monkeypatch, 1000)
        with pytest.raises(ValueError, match="changed under the walk"):
            reaper.kill_tree(root.pid, rounds=5)
        assert root.wait(timing.KILLED) == -signal.SIGKILL
    finally:
        clean_up([root.pid, child])
        root.wait()


# The guard's own program (reaper.py, run by path as Guard runs it), whose first walk of /proc fails.
GUARD_WITH_A_BAD_WALK = """\
import importlib.util, sys
spec = importlib.util.spec_from_file_location("guard", sys.argv[1])
guard = importlib.util.module_from_spec(spec)
spec.loader.exec_module(guard)
real, calls = guard.process_table, []
def process_table():
    calls.append(1)
    if len(calls) == 1:
        raise ValueError("a /proc entry changed under the walk")
    return real()
guard.process_table = process_table
guard._guard_main([])
"""


def test_the_guard_kills_every_tree_when_a_walk_of_one_fails():
    trees = [start_tree(), start_tree()]
    pids = [p for root, child in trees for p in (root.pid, child)]
    try:
        guard = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", GUARD_WITH_A_BAD_WALK, reaper.__file__],
            stdin=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        lines = "".join(f"+{root.pid}\n" for root, _ in trees)
        _, errors = guard.communicate(lines.encode(), timeout=timing.GUARD_EXIT)  # EOF: the build died
        assert guard.returncode == 0, errors.decode()
        assert survivors(pids) == [], [(p, psutil.Process(p).status()) for p in pids if alive(p)]
    finally:
        clean_up(pids)
        for root, _ in trees:
            root.wait()


# Imported by a template as a preload: right after the first SIGKILL the template sends (to a
# kernel's descendant, inside kill_tree), a SIGTERM comes, as it does when the next thread of a
# launcher killed with all its threads ends (PR_SET_PDEATHSIG follows the parent thread).
SECOND_SIGTERM = """\
import os, signal
_template, _kill, _sent = os.getpid(), os.kill, []
def kill(pid, signum):
    _kill(pid, signum)
    if signum == signal.SIGKILL and os.getpid() == _template and not _sent:
        _sent.append(pid)
        _kill(_template, signal.SIGTERM)
        open(os.path.join(os.path.dirname(__file__), "sent"), "w").close()  # for the test
os.kill = kill
"""
FAMILY = """\
import subprocess
family = [subprocess.Popen(["sleep", "1000"], start_new_session=True) for _ in range(3)]
print(*[p.pid for p in family])
"""


@pytest.mark.kernel
def test_a_second_sigterm_while_the_template_stops_does_not_spare_a_kernels_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    modules = tmp_path / "modules"
    modules.mkdir()
    (modules / "livecells_second_sigterm.py").write_text(SECOND_SIGTERM)
    monkeypatch.setenv("PYTHONPATH", f"{modules}{os.pathsep}{os.environ.get('PYTHONPATH', '')}")
    framework = FrameworkSpec(name="alpha", label="Alpha", preload=("livecells_second_sigterm",))
    server = ForkServer()

    seen: list[int] = []

    async def session() -> list[int]:
        async with KernelSession(framework, cwd=tmp_path, manager_factory=server.manager) as k:
            assert hasattr(k.km.provisioner.process, "killed")  # forked from the template
            result = await k.run_cell(FAMILY, timing.CELL)
            seen.extend(int(p) for p in "".join(o.get("text", "") for o in result.outputs).split())
            assert len(seen) == 3, result
            seen.append(k.pid)
            server.close()  # SIGTERM to the template, and the second one while it stops
            # Checked before the session's own shutdown (which kills what carries its token).
            return survivors(seen)

    try:
        left = asyncio.run(session())
        assert left == [], [(p, psutil.Process(p).status(), psutil.Process(p).ppid()) for p in left]
        assert (modules / "sent").exists()  # the second SIGTERM came while the template stopped
    finally:
        server.close()
        clean_up(seen)


def test_kill_adopted_kills_a_carrier_of_the_token_wherever_it_hangs() -> None:
    """A session's process that is not this process's child (here the child of a shell that
    does not carry the token; in a build, a daemon of a SIGKILLed kernel that the kernel still
    holds while it dies) is killed by its token, and nothing without the token is."""
    token = "livecells-test-" + os.urandom(8).hex()
    shell = subprocess.Popen(
        ["sh", "-c", f"env {reaper.SESSION_VARIABLE}={token} sleep 100 & wait"],
        env={k: v for k, v in os.environ.items() if k != reaper.SESSION_VARIABLE},
    )
    try:
        for _ in range(250):  # until the shell's child has exec'd into the token's carrier
            carriers = [c.pid for c in psutil.Process(shell.pid).children() if _carries(c, token)]
            if carriers:
                break
            time.sleep(timing.POLL)
        assert carriers
        killed = reaper.kill_adopted(token)
        assert set(carriers) <= set(killed) and shell.pid not in killed
        shell.wait(timeout=timing.GUARD_EXIT)  # its child gone, the shell's wait returns
        assert not [c for c in carriers if alive(c)]
    finally:
        shell.kill()
        shell.wait()


def _carries(process: psutil.Process, token: str) -> bool:
    try:
        return process.environ().get(reaper.SESSION_VARIABLE) == token
    except psutil.Error:
        return False
