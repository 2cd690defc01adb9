"""Shared helpers of the benchmarks: running builds as our own children, timing, tables.

Every benchmark compares against a baseline measured in the same run, so only ratios matter;
the machines are shared and noisy. Each child command runs in a session of its own, so that
whatever it leaves behind can be found (and ended) without touching anyone else's processes.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

PYTHON = sys.executable
REPO = Path(__file__).resolve().parent.parent
if str(REPO / "ext") not in sys.path:  # livecells from this working tree, not the installed one
    sys.path.insert(0, str(REPO / "ext"))


@dataclass
class Run:
    """One finished child command."""

    seconds: float
    returncode: int
    stdout: str
    stderr: str
    leftovers: list[str] = field(default_factory=list)  # processes it left running (now ended)

    def check(self, what: str) -> Run:
        """Raise with the output's tail if the command failed."""
        if self.returncode != 0:
            tail = (self.stdout + self.stderr)[-4000:]
            raise SystemExit(f"{what} failed (exit {self.returncode}):\n{tail}")
        return self

    @property
    def warnings(self) -> list[str]:
        return [line for line in (self.stdout + self.stderr).splitlines() if "WARNING:" in line]


def child_environment(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment of every child: this one, with Python's debugger warning off."""
    env = dict(os.environ)
    # livecells from this working tree, whatever the environment's editable install points at.
    env["PYTHONPATH"] = os.pathsep.join(
        [str(REPO / "ext"), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    env.update(extra or {})
    env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
    env.pop("PYTEST_CURRENT_TEST", None)
    # Where it is set (these machines set it), every build would compile every module it imports
    # from source: seconds a user whose interpreter caches bytecode never pays, and more for the
    # tool with more modules. See also compile_environment.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def compile_environment(python: str | os.PathLike[str], *also: Path) -> float:
    """Compile the bytecode of everything installed for ``python`` (its site-packages, and the
    folders ``also``), as pip does when it installs: a venv made by uv, or any installer that
    leaves it out, would otherwise pay each module's compilation in the first build measured.
    Returns the seconds it took."""
    started = time.perf_counter()
    script = "import sysconfig; print('\\n'.join({sysconfig.get_paths()[k] for k in ('purelib', 'platlib')}))"
    where = subprocess.run([str(python), "-c", script], capture_output=True, text=True, check=True).stdout.split()
    subprocess.run([str(python), "-m", "compileall", "-q", "-j", "0", *where, *map(str, also)],
                   env=child_environment(), stdout=subprocess.DEVNULL, check=False)
    return time.perf_counter() - started


def _session_members(sid: int) -> list[psutil.Process]:
    members = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if proc.pid != os.getpid() and os.getsid(proc.pid) == sid:
                members.append(proc)
        except (ProcessLookupError, PermissionError, psutil.Error):
            continue
    return members


def run(
    cmd: Sequence[str],
    *,
    cwd: str | os.PathLike[str] | None = None,
    timeout: float = 1800,
    env: Mapping[str, str] | None = None,
) -> Run:
    """Run ``cmd`` in a new session, timed by wall clock; end only what it left behind."""
    started = time.perf_counter()
    proc = subprocess.Popen(
        list(cmd),
        cwd=cwd,
        env=child_environment(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)  # its own process group: our child and its children
        proc.communicate()
        raise
    seconds = time.perf_counter() - started
    leftovers = []
    for member in _session_members(proc.pid):
        try:
            leftovers.append(f"{member.pid} {' '.join(member.cmdline())[:120]}")
            member.kill()
        except psutil.Error:
            continue
    return Run(seconds, proc.returncode, out, err, leftovers)


def sphinx_build(
    src: Path, *, jobs: str | None = None, fresh_env: bool = False, quiet: bool = True
) -> list[str]:
    """The ``sphinx-build`` command for an HTML build of ``src`` into ``src/_build/html``."""
    cmd = [PYTHON, "-m", "sphinx", "-b", "html"]
    if quiet:
        cmd.append("-q")
    if jobs:
        cmd += ["-j", jobs]
    if fresh_env:
        cmd.append("-E")
    return cmd + [str(src), str(src / "_build" / "html")]


def fresh_copy(template: Path, work: Path, name: str) -> Path:
    """A fresh copy of a generated source tree, so that no build sees another's leftovers."""
    target = work / name
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(template, target)
    return target


async def raw_execute(kc: Any, code: str, timeout: float = 60) -> None:
    """One raw jupyter_client round trip on an asyncio client ``kc``: ``execute``, then wait
    for the request's idle status on IOPub and for its reply on shell."""
    msg_id = kc.execute(code)
    while True:
        msg = await kc.get_iopub_msg(timeout=timeout)
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["header"]["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    while (await kc.get_shell_msg(timeout=timeout))["parent_header"].get("msg_id") != msg_id:
        pass


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout
    except OSError:
        out = ""
    for line in out.splitlines():
        if line.lower().startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine() -> dict[str, Any]:
    """Where the figures come from."""
    return {
        "cores": os.cpu_count(),
        "cpu": cpu_model(),
        "memory_gib": round(psutil.virtual_memory().total / 2**30, 1),
        "python": platform.python_version(),
        "load_average_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def describe(info: dict[str, Any]) -> str:
    return (
        f"{info['cores']} cores, {info['cpu']}, {info['memory_gib']} GiB, "
        f"Python {info['python']}; load average at start {info['load_average_at_start']}"
    )


def table(rows: Sequence[Sequence[Any]], header: Sequence[str]) -> str:
    """A plain-text table, columns left-aligned except numbers."""
    cells = [[str(c) for c in header]] + [[_fmt(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    lines = []
    for n, row in enumerate(cells):
        parts = []
        for i, text in enumerate(row):
            numeric = n > 0 and isinstance(rows[n - 1][i], (int, float))
            parts.append(text.rjust(widths[i]) if numeric else text.ljust(widths[i]))
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:.2f}"
    return str(value)


def verdict(value: float, goal: float, aim: float | None = None, *, lower_is_better: bool = True) -> str:
    """``meets aim`` / ``meets goal`` / ``misses goal`` for a ratio."""
    better = (lambda a, b: a <= b) if lower_is_better else (lambda a, b: a >= b)
    if aim is not None and better(value, aim):
        return "meets aim"
    return "meets goal" if better(value, goal) else "MISSES goal"


def write_json(path: str | None, data: dict[str, Any]) -> None:
    if path:
        Path(path).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n", encoding="utf-8")
        print(f"results written to {path}")
