"""The terminal's progress line: it moves during a long cell (elapsed time, cell n of m, an
estimate from the stored durations), stays one line, and ticks only on a terminal.

A fake clock and a fake terminal check the line exactly through Sphinx's own status stream; one
real build, in a real pseudo-terminal with a real kernel, checks that the line is redrawn while a
cell sleeps.
"""

from __future__ import annotations

import os
import pty
import re
import select
import shutil
import subprocess
import sys
import time
from io import StringIO
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp

import livecells
from livecells.execute.scheduler import SessionJob
from livecells.model.frameworks import FrameworkSpec
from livecells.model.plans import CellPlan, PageSettings, SessionPlan
from livecells.pipeline.progress import Progress

import timing

EXT = str(Path(livecells.__file__).resolve().parents[1])  # the livecells under test
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


def job(name: str, cells: int, estimate: float | None) -> SessionJob:
    plan = SessionPlan(
        docname=name,
        framework="alpha",
        source=f"/{name}.rst",
        cells=tuple(CellPlan(index=i, frameworks=("alpha",), code="pass", line=i + 1, code_line=i + 2)
              for i in range(cells)),
        settings=PageSettings(),
    )
    return SessionJob(plan, FrameworkSpec(name="alpha", label="Alpha"), "k", "env", 0, 30.0, 10_000, estimate=estimate)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def status(tmp_path, rootdir):
    """Sphinx's status stream, set up by a Sphinx application as a build has it."""
    shutil.copytree(rootdir / "test-fast", tmp_path / "src")
    stream = StringIO()
    app = SphinxTestApp(
        "html", srcdir=tmp_path / "src", status=stream, warning=StringIO(), confoverrides={"livecells_execute": "off"}
    )
    yield stream
    app.cleanup()


def redraws(text: str) -> list[str]:
    """Each state of a line redrawn in place (erase, text, carriage return), colours removed."""
    return [COLOUR.sub("", part) for part in re.findall(r"\x1b\[2K(.*?)\r", text)]


def test_on_a_terminal_the_line_moves_during_a_cell_with_the_cell_and_an_estimate(status):
    clock = Clock()
    long, short = job("long", 3, 10.0), job("short", 1, 4.0)
    progress = Progress([long, short], verbosity=0, slots=1, tty=True, clock=clock, columns=lambda: 200)
    status.seek(0), status.truncate()
    progress.started_one(long)
    progress.cell(long, 1, 3)
    clock.now += 0.5
    progress.cell(long, 2, 3)
    clock.now += 2.5
    progress.tick()  # a long cell: nothing happened, the line moves all the same
    clock.now += 1.0
    progress.tick()
    lines = redraws(status.getvalue())
    assert "\n" not in status.getvalue()  # one line, redrawn
    assert lines[-3:] == [
        "executing cells... [0/2 done] long [alpha] cell 2/3 (0.5 s, ~14 s left)",
        "executing cells... [0/2 done] long [alpha] cell 2/3 (3.0 s, ~11 s left)",
        "executing cells... [0/2 done] long [alpha] cell 2/3 (4.0 s, ~10 s left)",
    ]
    clock.now += 6.0
    progress.tick()
    assert redraws(status.getvalue())[-1].endswith("(10.0 s, ~4 s left)")  # the other one's
    clock.now += 1.0  # past its estimate
    progress.finished_one(long, "ok")
    progress.started_one(short)
    clock.now += 1.0
    progress.tick()
    assert redraws(status.getvalue())[-1] == "executing cells... [1/2 done] short [alpha] (12.0 s, ~3 s left)"
    progress.finished_one(short, "ok")
    progress.end()
    assert status.getvalue().endswith("\r\n")
    assert redraws(status.getvalue())[-1] == "executing cells... [2/2 done] short [alpha] ok (12.0 s)"


def test_the_line_names_the_longest_running_session_and_fits_the_terminal(status):
    clock = Clock()
    jobs = [job("a" * 60, 2, 5.0), job("b", 2, 5.0), job("c", 2, None)]
    progress = Progress(jobs, verbosity=0, slots=2, tty=True, clock=clock, columns=lambda: 72)
    progress.started_one(jobs[0])
    clock.now += 1
    progress.started_one(jobs[1])
    progress.cell(jobs[1], 1, 2)
    progress.tick()
    for line in redraws(status.getvalue()):
        assert len(line) <= 71, line
    last = redraws(status.getvalue())[-1]
    assert last.startswith("executing cells... [0/3 done] aaaa") and last.endswith("...")
    progress.columns = lambda: 200
    progress.tick()
    # A session without a stored duration: no estimate.
    assert redraws(status.getvalue())[-1].endswith(f"{'a' * 60} [alpha] (+1 running) (1.0 s)")


def test_no_estimate_once_the_sessions_outlast_theirs(status):
    clock = Clock()
    one = job("one", 1, 2.0)
    progress = Progress([one], verbosity=0, slots=1, tty=True, clock=clock, columns=lambda: 200)
    progress.started_one(one)
    clock.now += 1.0
    progress.tick()
    clock.now += 2.0
    progress.tick()
    assert redraws(status.getvalue())[-2:] == [
        "executing cells... [0/1 done] one [alpha] (1.0 s, ~1 s left)",
        "executing cells... [0/1 done] one [alpha] (3.0 s)",
    ]


def test_without_a_terminal_no_line_ticks_and_each_step_is_a_line(status):
    clock = Clock()
    one = job("one", 2, 3.0)
    progress = Progress([one], verbosity=0, slots=1, tty=False, clock=clock)
    progress.started_one(one)
    progress.cell(one, 1, 2)
    clock.now += 5
    progress.tick()
    progress.cell(one, 2, 2)
    progress.finished_one(one, "ok")
    progress.end()
    text = COLOUR.sub("", status.getvalue())
    assert "\x1b[2K" not in text and "\r" not in text
    assert text.splitlines()[-3:] == [
        "executing cells... [0/1 done] one [alpha], 2 cells (0.0 s, ~3 s left)",
        "executing cells... [1/1 done] one [alpha] ok (5.0 s)",
        "",
    ]


@pytest.mark.kernel
@pytest.mark.process
def test_a_real_build_in_a_terminal_redraws_the_line_while_a_cell_sleeps(tmp_path, no_kernel_left):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        'extensions = ["livecells"]\nlivecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}\n',
        encoding="utf-8",
    )
    (src / "index.rst").write_text(
        "Sleep\n=====\n\n.. live-cell:: alpha\n\n   import time\n\n"
        ".. live-cell:: alpha\n\n   time.sleep(4)\n",
        encoding="utf-8",
    )
    env = {k: v for k, v in os.environ.items() if k not in {"NO_COLOR", "FORCE_COLOR"}}
    env.update(TERM="xterm-256color", COLUMNS="200", PYTHONPATH=os.pathsep.join([EXT, env.get("PYTHONPATH", "")]))
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "sphinx", "-b", "html", str(src), str(tmp_path / "out")],
        stdin=subprocess.DEVNULL, stdout=follower, stderr=follower, env=env, start_new_session=True,
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timing.TERMINAL_BUILD
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([leader], [], [], 1)
            if ready:
                try:
                    data = os.read(leader, 65536)
                except OSError:  # the terminal's other end closed: the build ended
                    break
                if not data:
                    break
                chunks.append(data)
    finally:
        proc.wait(timeout=timing.EXIT)
        os.close(leader)
    text = b"".join(chunks).decode("utf-8", "replace")
    assert proc.returncode == 0, text[-3000:]
    during = [line for line in redraws(text) if "index [alpha] cell 2/2" in line]
    seconds = [float(re.search(r"\((\d+\.\d) s", line).group(1)) for line in during]
    # Redrawn every second while the 4 s cell sleeps, the time moving on.
    assert len(set(seconds)) >= 3, text[-3000:]
    assert seconds == sorted(seconds)
    assert max(seconds) - min(seconds) >= 2.0
