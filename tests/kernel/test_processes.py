"""Processes, configuration, locations, dependencies (issue 12, classes 4-8).

Processes are the subject here, so these tests start real kernels and real daemons and check
with psutil that nothing survives, however the build ends.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from livecells.config import get_config
from livecells.errors import ExecutorError

from helpers import FakeKernels, build_site, said, survivors

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


def cell(code: str, framework: str = "alpha", options: str = "") -> str:
    body = "\n".join("   " + line if line else "" for line in code.splitlines())
    return f"\n.. live-cell:: {framework}\n{options}\n{body}\n"


def site(tmp_path: Path, rootdir: Path, pages: dict[str, str], conf: str = "") -> Path:
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-procs", src)
    for name, text in pages.items():
        (src / name).write_text(f"{name}\n{'=' * len(name)}\n{text}", encoding="utf-8")
    if conf:
        with open(src / "conf.py", "a", encoding="utf-8") as handle:
            handle.write(conf)
    return src


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


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


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


def wait_for(path: Path, proc: subprocess.Popen, within: float = 90) -> None:
    deadline = time.monotonic() + within
    while not path.exists():
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)
    time.sleep(0.1)


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
    pages = {"page1.rst": cell(FAMILY) + cell("print('after')"), "page2.rst": cell(dies), "index.rst": INDEX}
    src = site(tmp_path, rootdir, pages)
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
    src = site(tmp_path, rootdir, {"page1.rst": cell(LONG)})
    with open(src / "index.rst", "a", encoding="utf-8") as index:
        index.write(cell("print('quick two')"))
    proc = spawn_build(src, "-D", f"livecells_fork_kernels={int(fork)}")
    wait_for(src / "started", proc)
    everything = [p.pid for p in livecells_children(proc.pid)]
    pids = read_pids(src / "pids.txt")
    assert pids[0] in everything  # the kernel
    assert bool(templates_of(proc.pid)) == fork  # forked from a template, or launched
    started = time.monotonic()
    proc.send_signal(signum)
    proc.communicate(timeout=30)
    assert time.monotonic() - started < 2.0
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
    src = site(tmp_path, rootdir, {"page1.rst": cell("print(1)")}, conf=conf)
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
    deadline = time.monotonic() + 60
    while not (found := templates_of(proc.pid)):
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "no template started"
        time.sleep(0.05)
    time.sleep(1.0)  # the build now waits for the import, in the read or the execute phase
    everything = [p.pid for p in livecells_children(proc.pid)]
    started = time.monotonic()
    proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGKILL)
    proc.communicate(timeout=30)
    assert time.monotonic() - started < 2.0
    assert survivors([t.pid for t in found] + everything, within=1.0) == []


def test_guard_kills_registered_trees_when_its_pipe_closes(tmp_path):
    from livecells.kernel_side.reaper import Guard

    daemon = subprocess.Popen(
        [sys.executable, "-c", "import subprocess, time; subprocess.Popen(['sleep', '1000'], "
         "start_new_session=True); time.sleep(1000)"]
    )
    time.sleep(0.3)
    tree = [daemon.pid] + [p.pid for p in psutil.Process(daemon.pid).children(recursive=True)]
    assert len(tree) == 2
    guard = Guard()
    guard.watch(daemon.pid)
    guard.close()  # as the death of the Sphinx process would
    daemon.wait(5)
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
        time.sleep(0.1)
        assert psutil.Process(stranger.pid).status() not in (psutil.STATUS_STOPPED, psutil.STATUS_ZOMBIE)
        assert stranger.poll() is None and session._killed == [] and not session._root_killed
        session.pid, session._pid_start = stranger.pid, process_start(stranger.pid)
        session._kill_processes()  # still the process it started as: killed
        assert stranger.wait(5) == -signal.SIGKILL and session._root_killed
        assert process_start(stranger.pid) is None  # reaped (or a zombie): gone
    finally:
        stranger.kill()
        stranger.wait()


# --- Class 5: config and option values that mean nothing are refused, with their location ----

# One wrong value (of a wrong type, or meaningless) for every livecells_ value.
BAD_VALUES = {
    "frameworks": [None, [], {"alpha": None}, {"alpha": {"preload": 3}}, {"alpha": {"kernel": 7}},
                   {"alpha": {"sync": "x ="}}, {"alpha": {"gpu_used": "import os"}},
                   {"alpha": {"label": None}}, {"alpha": {"preload": ["not a module"]}},
                   {"alpha": {"version_of": "os; import sys"}}],
    "execute": ["sometimes", 1, None],
    "device": ["tpu", None],
    "timeout": [float("nan"), float("inf"), -1, 0, "600", True, None],
    "jobs": [0, -2, "many", 1.5, None],
    "store": ["", 3, None],
    "raise_on_error": ["yes", 1, None],
    "latex_framework": [3, None],
    "allow_html": ["no", 0],
    "executor": ["", 8786, None],
    "fork_kernels": ["no", None],
    "keep_warm": [-1, float("inf"), "600", True, None],
    "output_limit": [0, "big", 1.5, True],
    "depends": [3, [1], [""], None],
    "depends_granularity": ["functions", 1, None],
    "mime_priority": ["text/plain", 3, None, [("html", "bmp", 1)], [("html", "text/plain")],
                      [("*", "text/plain", "1")], [["", "text/plain", 1]]],
    "env_drop": [3, [1], [""], None, {"A": 1}],
    "launch": [3, None, "https://x.org/{path}", ["https://x.org/{path}"], {"colab": "javascript:x"},
               {"colab": {"pytorch": 3}}, {"colab": {}}, {"": "https://x.org/{path}"}, {"x": "https://x.org/{p}"}],
    "image_options": [3, None, "80%", {"width": "wide"}, {"scale": 50}, {"classes": "!!!"}],
    "hosted": [3, None, ["colab"], {"colab": "python3"}, {"colab": {"kernel": 3}}, {"a/b": {}},
               {"colab": {"libs": {"pytorch": {"d2l": "d2l\n!x"}}}}, {"colab": {"folder": "{page}"}}],
    "execute_exclude": [3, [1], [""], None],
    "allow_errors": ["yes", 1, None],
    "stderr": ["loud", None, 3],
    "show_tb": ["yes", 1, None],
    "summary_dir": [3, None],
    "show_host": ["yes", 0, None],
    "repeat": [0, -1, "3", 1.5, None, True],
    "warmup": [-1, "x", 1.5, None, True],
    "drift_factor": [1, 0.5, "2", None, float("nan"), float("inf")],
    "drift_floor": [-1, "x", None, float("nan")],
    "library": [3, "x", ["pytorch"], ("lib_file", "d2l/torch.py")],
    "slides": [3, "x", [], {"top_right": 3}, {"colour": ""}, {"github_repo": "pytorch, a/b"},
               {"github_repo": {"pytorch": "a b"}}, {"github_repo": {"jax": "a/b"}}],
}


def test_every_config_value_refuses_wrong_values_with_a_warning():
    from livecells.config import CONFIG_FIELDS, LivecellsConfig, read_config
    from livecells.model.slides import SlidesSettings

    assert set(BAD_VALUES) == set(CONFIG_FIELDS)  # a new value gets its bad examples too
    default = LivecellsConfig()
    for name, values in BAD_VALUES.items():
        for value in values:
            warnings: list[str] = []
            config = read_config({name: value}, said(warnings))
            assert len(warnings) == 1 and f"livecells_{name}" in warnings[0], (name, value)
            expected = getattr(default, name)
            if name == "slides" and isinstance(value, dict):
                expected = SlidesSettings()  # a dict turns the slides on; its bad entry is left out
            assert getattr(config, name) == expected, (name, value)


def test_none_and_stdlib_preloads_are_understood():
    from livecells.config import read_config

    warnings: list[str] = []
    config = read_config({"frameworks": {"alpha": {"preload": None}, "beta": {"preload": ["json"]}}}, said(warnings))
    assert warnings == []
    assert config.frameworks["alpha"].preload == () and config.frameworks["beta"].preload == ("json",)


CONF_WITH_BAD_VALUES = """
livecells_timeout = float("nan")
livecells_jobs = "many"
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3", "preload": None},
    "beta": {"label": "Beta", "kernel": "python3", "preload": ["json"], "sync": "raise RuntimeError('no device')"},
}
"""


@pytest.mark.kernel
def test_a_build_with_bad_values_warns_at_their_conf_py_line_and_runs(tmp_path, rootdir):
    page = (
        "\n.. live-settings::\n   :timeout: inf\n"
        + cell("import json; print(json.dumps([1]))", "beta")
        + cell("print('hello')", "alpha")
        + cell("print('never')", "alpha", "   :timeout: nan\n")
    )
    src = site(tmp_path, rootdir, {"page1.rst": page}, conf=CONF_WITH_BAD_VALUES)
    lines = (src / "conf.py").read_text().splitlines()
    app, warnings = build_site(src)
    for name in ("livecells_timeout", "livecells_jobs"):
        number = [i for i, line in enumerate(lines, 1) if line.startswith(name)][-1]  # the last wins
        assert f"conf.py:{number}: WARNING: {name} = " in warnings, warnings
    assert "has type" not in warnings  # no second, unlocated warning from Sphinx
    assert get_config(app.env).timeout == 600 and get_config(app.env).jobs == "auto"
    html = (app.outdir / "page1.html").read_text()
    assert "[1]" in html and "hello" in html  # the stdlib preload ran; preload None is none
    # :timeout: nan is refused where it is written, and that cell does not run.
    text = (src / "page1.rst").read_text()
    for directive in (".. live-settings::", ":timeout: nan"):
        line = line_of(text, directive) - (directive == ":timeout: nan")
        assert f"page1.rst:{line}: ERROR: Error in " in warnings, (directive, warnings)
    assert warnings.count("invalid option value") == 2
    stored = json.loads((src / "_livecells" / "page1.json").read_text())
    assert len(stored["sessions"]["alpha"]["cells"]) == 1
    # The sync code raised after the beta cell: a warning at that cell's line.
    beta_line = line_of(text, ".. live-cell:: beta")
    assert f"page1.rst:{beta_line}: WARNING: live-cell [beta]: the framework's sync code failed" in warnings
    assert "RuntimeError: no device" in warnings and "[livecells.sync]" in warnings


# What -D gives: strings. Every value, refused (depends takes any string: a comma list).
BAD_OVERRIDES = {
    "frameworks": "x", "execute": "nope", "device": "cuda", "timeout": "abc", "jobs": "0",
    "store": "", "raise_on_error": "maybe", "latex_framework": "jax", "allow_html": "maybe",
    "executor": "", "fork_kernels": "2", "output_limit": "1.5", "mime_priority": "html,text/plain,1",
    "launch": "https://x.org/{path}",
    "hosted": "colab",
    "image_options": "width=80%",
    "allow_errors": "maybe", "stderr": "loud", "show_tb": "maybe", "show_host": "maybe",
    "repeat": "many", "warmup": "some", "drift_factor": "big", "drift_floor": "x",
    "keep_warm": "soon",
    "depends_granularity": "file", "slides": "x", "library": "d2l/torch.py",
}  # fmt: skip


@pytest.mark.frameworks
def test_bad_values_given_with_d_are_warnings_naming_d_and_the_defaults_are_used(tmp_path, rootdir):
    from livecells.config import CONFIG_FIELDS, LivecellsConfig

    # Any string is a good list of patterns or a folder.
    assert set(BAD_OVERRIDES) == set(CONFIG_FIELDS) - {"depends", "env_drop", "execute_exclude", "summary_dir"}
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["livecells"]\n')
    (src / "index.rst").write_text("Nothing to run\n==============\n")
    overrides = {f"livecells_{name}": value for name, value in BAD_OVERRIDES.items()}
    app, warnings = build_site(src, confoverrides=overrides)
    for name, value in BAD_OVERRIDES.items():
        shown = "1.5" if name == "output_limit" else repr(value)  # a number is read as one
        assert f"WARNING: livecells_{name} (given with -D) = {shown}: " in warnings, (name, warnings)
    assert warnings.count("WARNING") == len(BAD_OVERRIDES), warnings  # none from Sphinx itself
    assert "conf.py" not in warnings  # not set there
    default = LivecellsConfig()
    for name in BAD_OVERRIDES:
        assert getattr(get_config(app.env), name) == getattr(default, name), name
    good = {"timeout": "2.5", "jobs": "2", "allow_html": "false", "raise_on_error": "yes", "output_limit": "500",
            "depends": "a.txt,b/*.py", "device": "cpu", "latex_framework": "all", "keep_warm": "600"}  # fmt: skip
    (src / "index.rst").write_text("A cell\n======\n" + cell("print(1)", "pytorch"))
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={f"livecells_{k}": v for k, v in good.items()})
    assert warnings.count("WARNING") == 2, warnings  # the two patterns below, nothing else
    config = get_config(app.env)
    assert (config.timeout, config.jobs, config.allow_html, config.raise_on_error) == (2.5, 2, False, True)
    assert (config.output_limit, config.depends, config.keep_warm) == (500, ("a.txt", "b/*.py"), 600.0)
    assert "WARNING: livecells_depends (given with -D): 'a.txt' matches no file" in warnings


CONF_WITH_A_BAD_FRAMEWORK = """
livecells_frameworks = {
    "alpha": {"label": "Alpha"},
    "beta": {"label": "Beta", "sync": "x ="},
    "gamma": {"label": "Gamma", "preload": ["json"]},
}
livecells_depends = ["conf.py", 3]
"""


def test_a_bad_framework_entry_is_dropped_at_its_conf_py_line_and_the_others_run(tmp_path, rootdir):
    page = cell("print('from alpha')", "alpha") + cell("print('from gamma')", "gamma")
    src = site(tmp_path, rootdir, {"page1.rst": page}, conf=CONF_WITH_A_BAD_FRAMEWORK)
    lines = (src / "conf.py").read_text().splitlines()
    app, warnings = build_site(src, kernels=FakeKernels())
    for name in ("livecells_frameworks", "livecells_depends"):
        number = [i for i, line in enumerate(lines, 1) if line.startswith(name)][-1]
        assert f"conf.py:{number}: WARNING: {name}: " in warnings, warnings
    assert "framework 'beta': 'sync' does not compile" in warnings and "that entry is ignored" in warnings
    assert "entry 2 3: not a non-empty string" in warnings
    assert warnings.count("WARNING") == 2, warnings
    config = get_config(app.env)
    assert list(config.frameworks) == ["alpha", "gamma"] and config.depends == ("conf.py",)
    assert config.frameworks["gamma"].preload == ("json",)
    # What Sphinx keeps with its environment is what is used: the next build finds no change.
    assert list(app.config.livecells_frameworks) == ["alpha", "gamma"]
    assert app.config.livecells_depends == ["conf.py"]
    html = (app.outdir / "page1.html").read_text()
    assert "from alpha" in html and "from gamma" in html


def test_sphinx_build_with_bad_d_values_warns_and_succeeds(tmp_path, rootdir):
    src = site(tmp_path, rootdir, {})
    (src / "index.rst").write_text("Nothing to run\n==============\n")
    given = ["livecells_execute=nope", "livecells_device=cuda", "livecells_latex_framework=jax"]
    build = subprocess.run(
        [sys.executable, "-m", "sphinx", "-q", "-b", "html", *[f"-D{d}" for d in given], str(src), str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr
    for d in given:
        name, value = d.split("=")
        assert f"WARNING: {name} (given with -D) = {value!r}: " in build.stderr, build.stderr
    assert "Extension error" not in build.stderr and "Traceback" not in build.stderr


def test_a_warning_about_a_value_set_without_its_own_conf_py_line_names_no_document(tmp_path, rootdir):
    src = site(tmp_path, rootdir, {})
    conf = 'extensions = ["livecells"]\nglobals().update(livecells_frameworks={"alpha": {"kernel": "no-such-kernel"}})\n'
    (src / "conf.py").write_text(conf)
    app, warnings = build_site(src, kernels=FakeKernels())
    assert "WARNING: livecells_frameworks['alpha']: no kernelspec named 'no-such-kernel'" in warnings, warnings
    assert "conf.py.rst" not in warnings and "conf.py:" not in warnings


def test_a_conf_py_value_that_fails_when_read_is_replaced_not_left_to_crash_sphinx(tmp_path, rootdir):
    src = site(tmp_path, rootdir, {})
    with open(src / "conf.py", "a") as conf:
        conf.write("class Hostile(dict):\n    def items(self):\n        raise RuntimeError('boom')\n")
        conf.write("livecells_frameworks = Hostile(alpha={})\nlivecells_execute = 'off'\n")
    app, warnings = build_site(src)  # Sphinx pickles its config after reading: items() again
    line = (src / "conf.py").read_text().splitlines().index("livecells_frameworks = Hostile(alpha={})") + 1
    assert f"conf.py:{line}: WARNING: livecells_frameworks: cannot be read (RuntimeError: boom)" in warnings
    assert (app.outdir / "index.html").exists()


@pytest.mark.kernel
def test_livecells_env_drop_decides_which_variables_a_kernel_gets(tmp_path, rootdir, monkeypatch):
    from livecells.execute.forkserver.forked import MARKER

    monkeypatch.setenv("MY_SECRET", "s3")
    monkeypatch.setenv("GITHUB_TOKEN", "ghs_x")
    code = (
        'import os\nprint(sorted(n for n in ("MY_SECRET", "GITHUB_TOKEN") if n in os.environ),'
        ' open(f"/proc/{os.getppid()}/cmdline").read().count("' + MARKER + '"))'
    )
    src = site(tmp_path, rootdir, {"page1.rst": cell(code)}, conf='\nlivecells_env_drop = ["my_*"]\n')
    app, warnings = build_site(src, confoverrides={"livecells_execute": "force"})
    assert "['GITHUB_TOKEN'] 1" in (app.outdir / "page1.html").read_text()  # forked, as configured
    app, warnings = build_site(src, confoverrides={"livecells_execute": "force", "livecells_env_drop": ""})
    assert "['GITHUB_TOKEN', 'MY_SECRET'] 1" in (app.outdir / "page1.html").read_text()  # -D: nothing dropped


@pytest.mark.wallclock
def test_an_unreachable_executor_is_reported_within_seconds():
    pytest.importorskip("distributed")
    from livecells.execute.dask.cluster import check_executor

    started = time.monotonic()
    with pytest.raises(ExecutorError, match="cannot be reached .Connection refused"):
        check_executor("tcp://127.0.0.1:1")
    assert time.monotonic() - started < 6


# --- Class 7 (first half) and livecells_depends: dependency files -----------------------------


def test_dependency_files_are_hashed_in_chunks_and_once_while_unchanged(tmp_path, monkeypatch):
    import builtins
    import tracemalloc

    from livecells.plan.keys import file_digest

    big = tmp_path / "big.bin"
    with open(big, "wb") as handle:  # 64 MB, sparse: cheap to make, read as zeros; 8 times the bound
        handle.truncate(64 << 20)
    hashes: dict = {}
    tracemalloc.start()
    first = file_digest(str(big), hashes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20, peak  # never the whole file in memory
    with monkeypatch.context() as patched:
        patched.setattr(builtins, "open", lambda *a, **k: pytest.fail("read again"))
        assert file_digest(str(big), hashes) == first  # unchanged: not read
    assert file_digest(str(big)) == first  # a fresh clone (no cache) reads it and agrees
    # Same size, and the old mtime put back: the change is still seen (ctime, and the cache key).
    stat = big.stat()
    with open(big, "r+b") as handle:
        handle.write(b"x")
    os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_digest(str(big), hashes) != first


BOOK_CONF = '\nlivecells_depends = ["d2l/*.py", "nothing/*.txt"]\n'
# Per file: with the default ("definitions"), a page that imports none of them does not rerun
# (tests/plan/test_helper_deps.py).
FILES_CONF = '\nlivecells_depends_granularity = "files"\n'


def test_livecells_depends_reruns_every_page_when_a_file_changes(tmp_path, rootdir):
    src = site(
        tmp_path,
        rootdir,
        {"page1.rst": cell("print('one')"), "page2.rst": cell("print('two')")},
        conf=BOOK_CONF + FILES_CONF,
    )
    (src / "d2l").mkdir()
    (src / "d2l" / "torch.py").write_text("VERSION = 1\n")
    kernels = FakeKernels()  # what runs is the subject, not how
    every = [("index", "alpha"), ("page1", "alpha"), ("page2", "alpha")]
    app, warnings = build_site(src, kernels=kernels)
    assert app.env.livecells_outcome.ran == 3 and kernels.take() == every
    line = (src / "conf.py").read_text().splitlines().index(BOOK_CONF.strip()) + 1
    assert f"conf.py:{line}: WARNING: livecells_depends: 'nothing/*.txt' matches no file" in warnings
    app, _ = build_site(src, kernels=kernels)
    assert app.env.livecells_outcome.ran == 0 and kernels.take() == []  # unchanged: nothing runs
    (src / "d2l" / "torch.py").write_text("VERSION = 2\n")
    app, _ = build_site(src, kernels=kernels)
    assert kernels.take() == every  # every page
    app, _ = build_site(src, kernels=kernels)
    assert app.env.livecells_outcome.ran == 0 and kernels.take() == []


# --- Class 6: every cell is located in its own file, and runs only where it is shown ----------

LOCATED = """
Para.

.. include:: part.txt

+--------------------------+---------+
| .. live-cell:: alpha     | b       |
|                          |         |
|    x = 1                 |         |
|    raise KeyError("t")   |         |
+--------------------------+---------+

.. list-table::

   * - .. live-cell:: alpha

          raise OSError("l")

.. only:: latex

   .. live-cell:: alpha

      open("ran-latex", "w").close()

.. only:: html

   .. live-cell:: alpha

      open("ran-html", "w").close()
"""
PART = """Included text.

.. live-cell:: alpha

   y = 2
   raise ValueError("in include")
"""


@pytest.mark.parametrize("builder", ["html", "latex"])
def test_cells_are_located_in_their_own_file_and_run_only_where_shown(tmp_path, rootdir, builder):
    src = site(tmp_path, rootdir, {"page1.rst": LOCATED})
    (src / "part.txt").write_text(PART)
    page = (src / "page1.rst").read_text()
    # Where a cell is, and whether it is run, is the subject: its sessions run on FakeKernels
    # (test_core locates a real kernel's error).
    app, warnings = build_site(src, builder, kernels=FakeKernels())
    assert f"part.txt:{line_of(PART, 'ValueError')}: WARNING: live-cell [alpha]: ValueError" in warnings
    assert f"page1.rst:{line_of(page, 'KeyError')}: WARNING: live-cell [alpha]: KeyError" in warnings
    assert f"page1.rst:{line_of(page, 'OSError')}: WARNING: live-cell [alpha]: OSError" in warnings
    assert (src / "ran-html").exists() == (builder == "html")
    assert (src / "ran-latex").exists() == (builder == "latex")
    if builder == "html":
        # The notebook download holds the cells the page shows, not the LaTeX-only one.
        notebooks = [p.read_text() for p in Path(app.outdir).rglob("page1*.ipynb")]
        assert notebooks and all("ran-latex" not in nb and "ran-html" in nb for nb in notebooks)


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
            result = await k.run_cell(FORKED_PRINT, 30)
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
