"""Blast radius (issue 23, class 5): a cell that kills or stops its fork-server template costs
no other session, in a real build with forked, prestarted kernels."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

import timing
from helpers import built_page, cells, outputs

ATTACKS = {
    "killed": "import os, signal; os.kill(os.getppid(), signal.SIGKILL)",
    "stopped": "import os, signal; os.kill(os.getppid(), signal.SIGSTOP)",
}


def page(title: str, code: str) -> str:
    body = "\n".join("   " + line for line in code.splitlines())
    return f"{title}\n{'=' * len(title)}\n\n.. live-cell:: alpha\n\n{body}\n"


@pytest.mark.kernel
@pytest.mark.parametrize("how", sorted(ATTACKS))
def test_a_cell_that_kills_or_stops_its_template_costs_only_its_own_session(
    tmp_path: Path, rootdir: Path, how: str
) -> None:
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-procs", src)
    (src / "index.rst").write_text(
        "index\n=====\n\n.. toctree::\n\n   a\n   b\n   c\n\n.. live-cell:: alpha\n\n   print('index')\n"
    )
    (src / "a.rst").write_text(page("a", ATTACKS[how] + "\nprint('a goes on')"))
    for name in "bc":  # forked ahead of their turn, from the template page a attacks
        (src / f"{name}.rst").write_text(page(name, f"import time\ntime.sleep(0.5)\nprint('{name} ran')"))
    with open(src / "conf.py", "a") as conf:
        conf.write("livecells_jobs = 1\nlivecells_fork_kernels = True\n")
    started = time.monotonic()
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=timing.PROCESS, env={**os.environ, "PYTHONPATH": os.environ.get("PYTHONPATH", "")},
    )
    took = time.monotonic() - started
    assert build.returncode == 0, build.stderr
    assert "died" not in build.stderr and "memory" not in build.stderr, build.stderr
    shown = {name: outputs(cells(built_page(tmp_path / "out" / f"{name}.html"))[0]) for name in "abc"}
    assert "a goes on" in shown["a"]  # the kernel outlived its template
    assert "b ran" in shown["b"] and "c ran" in shown["c"]
    assert took < 60  # no status check waited on a stopped template
