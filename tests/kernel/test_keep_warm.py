"""The edit loop: a build starts only the templates its sessions need, and with
``livecells_keep_warm`` the next build adopts them (real kernels, real Sphinx builds)."""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from livecells.execute.forkserver.forked import TIMESTAMP_SLACK_NS
from livecells.execute.forkserver.warm import stop_all
from livecells.kernel_side.lifetime import Lifetime
from livecells.kernel_side.reaper import process_start

import timing
from helpers import build_site
from paths import EXT

pytestmark = pytest.mark.usefixtures("no_kernel_left")

PACKAGE_PARENT = str(EXT)

#: Each preload counts its imports in a file beside it: what a template's start costs, paid once for all its kernels.
PRELOAD = "import os\nwith open(os.path.join(os.path.dirname(__file__), {name!r} + '.imports'), 'a') as _f:\n    _f.write('1')\n"

#: What a cell tells of its kernel: which template forked it (its parent), and the templates of
#: the build that runs it (its launcher, JPY_PARENT_PID) still alive, by their preloads.
REPORT = """\
import json, os
launcher = os.environ["JPY_PARENT_PID"]
templates = []
for pid in filter(str.isdigit, os.listdir("/proc")):
    try:
        argv = open(f"/proc/{{pid}}/cmdline", "rb").read().split(b"\\0")
        ppid = open(f"/proc/{{pid}}/stat", "rb").read().rsplit(b")", 1)[1].split()[1].decode()
    except OSError:
        continue
    if b"livecells-ipykernel-forkserver" in argv and ppid == launcher:
        templates.append(json.loads(argv[-2])["preload"])
with open({out!r}, "a") as f:
    f.write(json.dumps({{"cell": {name!r}, "template": os.getppid(), "templates": sorted(templates)}}) + "\\n")
"""


def book(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, keep_warm: float) -> tuple[Path, Path]:
    """A page with an alpha and a beta cell, each framework preloading a module of its own."""
    modules, src = tmp_path / "modules", tmp_path / "src"
    modules.mkdir()
    src.mkdir()
    for name in ("lc_alpha", "lc_beta", "lc_alpha2"):
        (modules / f"{name}.py").write_text(PRELOAD.format(name=name))
    settle()
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([PACKAGE_PARENT, str(modules)]))
    conf(src, "lc_alpha", keep_warm)
    page(src, tmp_path / "ran.jsonl", "alpha v1")
    return src, modules


def conf(src: Path, alpha_preload: str, keep_warm: float) -> None:
    (src / "conf.py").write_text(
        'extensions = ["livecells"]\n'
        f'livecells_frameworks = {{"alpha": {{"preload": ["{alpha_preload}"], "gpu_used": "False"}},\n'
        '                        "beta": {"preload": ["lc_beta"], "gpu_used": "False"}}\n'
        f"livecells_keep_warm = {keep_warm!r}\n"
    )


def page(src: Path, out: Path, alpha: str) -> None:
    cell = lambda name: "\n".join("   " + line for line in REPORT.format(out=str(out), name=name).splitlines())  # noqa: E731
    (src / "index.rst").write_text(
        f"T\n=\n\n.. live-cell:: alpha\n\n   # {alpha}\n{cell('alpha')}\n\n"
        f".. live-cell:: beta\n\n{cell('beta')}\n"
    )


def settle() -> None:
    """Let files just written age past the slack within which a template does not trust a
    file it imports (it may have read it half-written), and starts again: a build that
    follows at once on a fast machine would count a second template's imports."""
    time.sleep(3 * TIMESTAMP_SLACK_NS / 1e9)


def ran(tmp_path: Path) -> list[dict]:
    """What each cell that ran told, in order, since the last call."""
    path = tmp_path / "ran.jsonl"
    lines = path.read_text().splitlines() if path.exists() else []
    path.unlink(missing_ok=True)
    return [json.loads(line) for line in lines]


def imports(modules: Path, name: str) -> int:
    path = modules / f"{name}.imports"
    return len(path.read_text()) if path.exists() else 0


def alive(pid: int, start: int | None) -> bool:
    return start is not None and process_start(pid) == start


def wait_gone(pid: int, start: int | None, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while alive(pid, start) and time.monotonic() < deadline:
        time.sleep(timing.POLL)
    return not alive(pid, start)


def warm_build(tmp_path, monkeypatch, warm_folders, keep_warm=120.0):
    """A first build that keeps its templates warm: the book, its folder of records, and what
    its cells told, by framework."""
    src, modules = book(tmp_path, monkeypatch, keep_warm)
    warm = src / "_build" / "doctrees" / "livecells-warm"
    warm_folders.append(warm)
    build_site(src)
    return src, modules, warm, {r["cell"]: r for r in ran(tmp_path)}


def edited_build(src: Path, tmp_path: Path) -> dict:
    """Edit the alpha cell, build; what the one cell that ran told."""
    page(src, tmp_path / "ran.jsonl", "alpha v2")
    _, warnings = build_site(src)
    assert not warnings
    (told,) = ran(tmp_path)
    return told


@pytest.fixture
def warm_folders():
    """The warm folders the test's builds use; every template they record is stopped after it."""
    folders: list[Path] = []
    yield folders
    for folder in folders:
        stop_all(str(folder))


@pytest.mark.kernel
def test_an_edit_starts_only_the_template_of_the_session_it_runs(tmp_path, monkeypatch):
    src, _ = book(tmp_path, monkeypatch, keep_warm=0)
    app, warnings = build_site(src)
    assert not warnings
    first = ran(tmp_path)
    assert sorted(r["cell"] for r in first) == ["alpha", "beta"]
    page(src, tmp_path / "ran.jsonl", "alpha v2")  # only the alpha session changed
    app, warnings = build_site(src)
    assert not warnings
    (second,) = ran(tmp_path)
    # While the alpha session ran, its build had started alpha's template alone.
    assert second["cell"] == "alpha" and second["templates"] == [["lc_alpha"]]


@pytest.mark.kernel
def test_a_second_build_adopts_the_template_kept_warm_and_a_new_preload_starts_one(
    tmp_path, monkeypatch, warm_folders
):
    monkeypatch.setenv("LC_TEST_SECRET", "s3cr3t-value")
    src, modules, warm, first = warm_build(tmp_path, monkeypatch, warm_folders)
    assert not any("s3cr3t" in p.read_text() for p in warm.iterdir())  # a digest of the environment
    alpha = first["alpha"]["template"]
    alpha_start = process_start(alpha)
    once = imports(modules, "lc_alpha")  # what one template's start costs (its probe imports it too)
    assert alive(alpha, alpha_start) and once >= 1  # outlived its build
    assert len(list(warm.glob("*.json"))) == 2

    second = edited_build(src, tmp_path)
    # Forked from the same template: no new template process, the framework not imported again.
    assert second["template"] == alpha and imports(modules, "lc_alpha") == once
    assert imports(modules, "lc_beta") == once

    conf(src, "lc_alpha2", keep_warm=120)  # a changed preload: a new template
    build_site(src)
    (third,) = ran(tmp_path)
    assert third["template"] != alpha and imports(modules, "lc_alpha2") == once
    records = [json.loads(p.read_text()) for p in warm.glob("*.json")]
    stopped = stop_all(str(warm))
    assert sorted(stopped) == sorted(r["pid"] for r in records) and len(stopped) == 3
    assert all(wait_gone(r["pid"], r["start"], timing.WARM_GONE) for r in records)
    assert not list(warm.glob("*.json"))


@pytest.mark.kernel
def test_a_changed_imported_file_means_a_new_template(tmp_path, monkeypatch, warm_folders):
    src, modules, _, first = warm_build(tmp_path, monkeypatch, warm_folders)
    alpha = first["alpha"]["template"]
    start, once = process_start(alpha), imports(modules, "lc_alpha")
    (modules / "lc_alpha.py").write_text(PRELOAD.format(name="lc_alpha") + "VERSION = 2\n")
    settle()
    second = edited_build(src, tmp_path)
    assert second["template"] != alpha and imports(modules, "lc_alpha") == 2 * once
    assert wait_gone(alpha, start, timing.WARM_GONE)  # the stale one was stopped, not left to idle


@pytest.mark.kernel
def test_a_changed_environment_means_a_new_template_and_the_old_one_stops(tmp_path, monkeypatch, warm_folders):
    src, modules, warm, first = warm_build(tmp_path, monkeypatch, warm_folders)
    alpha = first["alpha"]["template"]
    start, once = process_start(alpha), imports(modules, "lc_alpha")
    monkeypatch.setenv("LC_TEST_SETTING", "changed")  # a preload might read it at import
    second = edited_build(src, tmp_path)
    assert second["template"] != alpha and imports(modules, "lc_alpha") == 2 * once
    assert wait_gone(alpha, start, timing.WARM_GONE)  # one template kept per key: the other environment's stops
    assert len(list(warm.glob("*.json"))) == 2  # the new alpha, and beta (not run, kept)


@pytest.mark.kernel
def test_a_template_kept_warm_ends_after_its_idle_time(tmp_path, monkeypatch, warm_folders):
    _, _, warm, first = warm_build(tmp_path, monkeypatch, warm_folders, keep_warm=2)
    pids = {r["template"] for r in first.values()}
    starts = {pid: process_start(pid) for pid in pids}
    assert len(pids) == 2 and all(alive(pid, start) for pid, start in starts.items())
    folders = [os.path.dirname(json.loads(p.read_text())["path"]) for p in warm.glob("*.json")]
    assert len(folders) == 2 and all(os.path.isdir(f) for f in folders)
    assert all(wait_gone(pid, start, 2 + timing.WARM_GONE) for pid, start in starts.items())
    assert not list(warm.glob("*.json"))  # each removed its own record, socket and folder
    assert not any(os.path.exists(f) for f in folders)


@pytest.mark.kernel
def test_a_second_build_at_once_starts_its_own_template(tmp_path, monkeypatch, warm_folders):
    src, modules, warm, first = warm_build(tmp_path, monkeypatch, warm_folders)
    alpha, once = first["alpha"]["template"], imports(modules, "lc_alpha")
    held = []
    for lock in warm.glob("*.lock"):  # as a build that has adopted them holds them
        fd = os.open(lock, os.O_RDWR)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        held.append(fd)
    try:
        second = edited_build(src, tmp_path)
    finally:
        for fd in held:
            os.close(fd)
    # A template of its own, which imports the preload once: the probe's answer is kept.
    assert second["template"] != alpha and imports(modules, "lc_alpha") == once + 1
    assert alive(alpha, process_start(alpha))  # the warm one, untouched
    assert process_start(second["template"]) is None  # the build's own: gone with it


DRIVER = """\
import subprocess, sys, time
subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", sys.argv[1], sys.argv[2]], check=True)
print("built", flush=True)
time.sleep(600)
"""


@pytest.mark.kernel
def test_a_template_kept_warm_ends_with_its_owner(tmp_path, monkeypatch, warm_folders):
    """The owner is the session leader of the build: here, a driver that runs ``sphinx-build``
    in a session of its own, as a terminal's shell runs a build; it is killed, and the template
    ends with it."""
    src, _ = book(tmp_path, monkeypatch, keep_warm=120)
    out = tmp_path / "out"
    warm_folders.append(out / ".doctrees" / "livecells-warm")
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(src), str(out)], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        assert driver.stdout is not None and driver.stdout.readline() == "built\n"
        pids = {r["template"] for r in ran(tmp_path)}
        starts = {pid: process_start(pid) for pid in pids}
        assert len(pids) == 2 and all(alive(pid, start) for pid, start in starts.items())
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    assert all(wait_gone(pid, start, timing.WARM_GONE) for pid, start in starts.items())


#: A stand-in for sphinx-autobuild as its console script runs (``python .../sphinx-autobuild``, run
#: by the interpreter here, not by a ``#!`` line, which a path with a space would break):
#: it runs ``sphinx-build`` as a process of its own, once at the start and once per line read.
AUTOBUILD = """\
import subprocess, sys
def build():
    subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", sys.argv[1], sys.argv[2]], check=True)
    print("built", flush=True)
build()
for line in sys.stdin:
    build()
"""


def autobuild_script(tmp_path: Path) -> Path:
    script = tmp_path / "bin" / "sphinx-autobuild"
    script.parent.mkdir()
    script.write_text(AUTOBUILD)
    return script


@pytest.mark.process
def test_the_edit_loop_is_the_nearest_sphinx_autobuild_among_the_builds_ancestors(tmp_path):
    ask = "from livecells.execute.forkserver.warm import edit_loop; print(edit_loop())"
    env = {**os.environ, "PYTHONPATH": PACKAGE_PARENT}
    script = tmp_path / "sphinx-autobuild"
    # The script runs a shell that runs the build: the loop is an ancestor, not the parent.
    script.write_text("import os, subprocess, sys\n"
                      "print(os.getpid(), subprocess.run(['sh', '-c', sys.argv[1]], capture_output=True, "
                      "text=True).stdout.strip())\n")
    command = shlex.join([sys.executable, "-c", ask])  # a checkout's path may hold a space
    loop, found = subprocess.run([sys.executable, str(script), command], env=env, capture_output=True, text=True,
                                 check=True).stdout.split()
    assert found == loop
    for argv in ([sys.executable, "-c", ask], [sys.executable, "-c", f"import subprocess; subprocess.run(['sh', '-c', {command!r}])"]):
        assert subprocess.run(argv, env=env, capture_output=True, text=True, check=True).stdout.strip() == "None"


@pytest.mark.kernel
def test_auto_keeps_templates_warm_for_sphinx_autobuild_and_they_end_with_it(tmp_path, monkeypatch, warm_folders):
    """``livecells_keep_warm = 'auto'`` (the default): a plain build leaves no template; under
    sphinx-autobuild, the next build adopts the template, which ends once sphinx-autobuild is
    gone, though the session that started it lives on."""
    src, modules = book(tmp_path, monkeypatch, keep_warm="auto")
    out = tmp_path / "out"
    warm_folders.append(out / ".doctrees" / "livecells-warm")
    loop = subprocess.Popen([sys.executable, str(autobuild_script(tmp_path)), str(src), str(out)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        assert loop.stdout is not None and loop.stdin is not None
        assert loop.stdout.readline() == "built\n"
        first = {r["cell"]: r["template"] for r in ran(tmp_path)}
        starts = {pid: process_start(pid) for pid in first.values()}
        assert len(starts) == 2 and all(alive(pid, start) for pid, start in starts.items())
        once = imports(modules, "lc_alpha")
        settle()
        page(src, tmp_path / "ran.jsonl", "alpha v2")
        loop.stdin.write("edited\n")
        loop.stdin.flush()
        assert loop.stdout.readline() == "built\n"
        (second,) = ran(tmp_path)
        assert second["template"] == first["alpha"] and imports(modules, "lc_alpha") == once
    finally:
        loop.kill()  # sphinx-autobuild alone: this test's session, the old owner, lives on
        loop.wait()
    assert all(wait_gone(pid, start, timing.WARM_GONE) for pid, start in starts.items())

    settle()
    page(src, tmp_path / "ran.jsonl", "alpha v3")
    build_site(src)  # not under an edit loop: nothing kept
    (plain,) = ran(tmp_path)
    assert plain["template"] not in starts
    assert wait_gone(plain["template"], process_start(plain["template"]), timing.WARM_GONE)
    assert not list((src / "_build" / "doctrees" / "livecells-warm").glob("*.json"))


class FakeReaper:
    """Which processes live (pid -> start time), and which trees were killed."""

    def __init__(self, starts: dict[int, int]) -> None:
        self.starts, self.killed = starts, []

    def process_start(self, pid: int) -> int | None:
        return self.starts.get(pid)

    def kill_tree(self, pid: int) -> None:
        self.killed.append(pid)


def test_a_build_template_serves_while_its_launcher_lives():
    life = Lifetime(os.getppid(), None, FakeReaper({}))
    assert life.goes_on({}) and life.warm is None
    assert not Lifetime(os.getppid() + 1, None, FakeReaper({})).goes_on({})


def test_a_warm_template_serves_while_its_owner_lives_and_it_is_not_idle(monkeypatch):
    now = [100.0]
    monkeypatch.setattr(time, "monotonic", lambda: now[0])
    reaper = FakeReaper({7: 70})
    life = Lifetime(1, {"idle": 10, "owner": 7, "owner_start": 70, "record": None}, reaper)
    now[0] = 109.0
    assert life.goes_on({})
    now[0] = 111.0
    assert not life.goes_on({})  # idle past its limit
    life.used()  # a request
    assert life.goes_on({})
    now[0] = 200.0
    assert life.goes_on({5: None})  # a kernel runs: never idle
    now[0] = 209.0
    assert life.goes_on({5: 0})  # it ended at 200: idle since
    reaper.starts[7] = 71  # the owner's pid now names another process
    assert not life.goes_on({5: None})


def test_a_kernel_whose_build_died_is_killed_by_its_template():
    reaper = FakeReaper({40: 400, 50: 500})
    life = Lifetime(1, None, reaper)
    life.launched(4, {"launcher": 40, "launcher_start": 400})
    life.launched(5, {"launcher": 50, "launcher_start": 500})
    life.launched(6, {})  # an older launcher's request: watched by its parent only
    children = {4: None, 5: None, 6: None}
    assert life.orphaned(children) == [] and reaper.killed == []
    del reaper.starts[40]  # build 40 died (kill -9): its kernel's tree goes
    assert life.orphaned(children) == [4] and reaper.killed == [4]
    children[5] = 0  # ended on its own: no longer watched
    del reaper.starts[50]
    assert life.orphaned(children) == [] and life.launchers == {}


SLEEPER = """\
import os, time
with open({out!r}, "w") as f:
    f.write(f"{{os.getpid()}} {{os.getppid()}}")
time.sleep(120)
"""

KILLABLE_DRIVER = """\
import subprocess, sys, time
build = subprocess.Popen([sys.executable, "-m", "sphinx", "-q", "-b", "html", sys.argv[1], sys.argv[2]])
print(build.pid, flush=True)
build.wait()
print("ended", flush=True)
time.sleep(600)
"""


@pytest.mark.kernel
def test_a_kernel_ends_with_its_build_while_the_warm_template_lives_on(tmp_path, monkeypatch, warm_folders):
    """The build is killed (-9) in the middle of a cell: its kernel dies with it, the template kept
    warm lives on for its owner, and the next build adopts it."""
    src, _ = book(tmp_path, monkeypatch, keep_warm=120)
    told = tmp_path / "sleeper.txt"
    (src / "index.rst").write_text(
        "T\n=\n\n.. live-cell:: alpha\n\n" + "\n".join("   " + line for line in SLEEPER.format(out=str(told)).splitlines()) + "\n"
    )
    out = tmp_path / "out"
    warm_folders.append(out / ".doctrees" / "livecells-warm")
    driver = subprocess.Popen(
        [sys.executable, "-c", KILLABLE_DRIVER, str(src), str(out)], stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    try:
        assert driver.stdout is not None
        build = int(driver.stdout.readline())
        deadline = time.monotonic() + timing.REACH
        while not told.exists() or not told.read_text():
            assert time.monotonic() < deadline and driver.poll() is None
            time.sleep(timing.POLL)
        kernel, template = map(int, told.read_text().split())
        kernel_start, template_start = process_start(kernel), process_start(template)
        os.kill(build, signal.SIGKILL)
        assert driver.stdout.readline() == "ended\n"
        assert wait_gone(kernel, kernel_start, timing.WARM_GONE)
        assert alive(template, template_start)
        # The lock died with the build: the next build adopts the template.
        page(src, tmp_path / "ran.jsonl", "alpha v2")
        subprocess.run([sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(out)], check=True)
        assert {r["cell"]: r["template"] for r in ran(tmp_path)}["alpha"] == template
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    assert wait_gone(template, template_start, timing.WARM_GONE)  # its owner, the driver, is gone


@pytest.mark.parametrize("bad", [
    {"preload": 5},
    {"started_ns": "soon"},
    {"files": ["a"]},
    {"files": {"/etc/hostname": 5}},
    {"installed": {"files": "a"}},
])
def test_a_warm_record_of_the_wrong_shape_is_stale_not_a_crash(bad):
    """A record edited by hand, or by another livecells, that names a live process: that
    template serves no build (it is replaced), and the build goes on."""
    from livecells.execute.forkserver import warm

    key, env = (sys.executable, ("numpy",), ()), {"A": "1"}
    good = {"python": sys.executable, "preload": ["numpy"], "env": warm.env_digest(env),
            "program": warm.program_state(), "started_ns": time.time_ns(), "files": {}, "installed": {}}
    assert warm.stale(good, key, env) == ""
    assert "record" in warm.stale({**good, **bad}, key, env)


@pytest.mark.parametrize("bad", [{"left": [1]}, {"path": 5}, {"path": None}, {"path": "KEEP/x.sock"}])
def test_a_damaged_warm_record_of_a_live_process_is_put_aside(tmp_path, bad):
    """Its template cannot be adopted, nor stopped (stopping removes its socket's folder, which
    the record names): the slot's record goes, the build starts its own, nothing else changes."""
    keep = tmp_path / "keep"
    (keep / "file").mkdir(parents=True)
    bad = {k: str(keep / "x.sock") if v == "KEEP/x.sock" else v for k, v in bad.items()}
    from livecells.execute.forkserver import warm

    key, env = (sys.executable, ("numpy",), ()), {"A": "1"}
    sleeper = subprocess.Popen(["sleep", "30"])
    try:
        slot = warm.Slot(warm.KeepWarm(str(tmp_path), 60.0, os.getpid(), None), key, env)
        assert slot.take()
        info = {"pid": sleeper.pid, "start": process_start(sleeper.pid), "python": sys.executable,
                "preload": ["numpy"], "env": warm.env_digest(env), "program": warm.program_state(),
                "started_ns": time.time_ns() - 10**12, "files": {}, "installed": {},
                "path": str(tmp_path / "livecells-warm-x" / "no.sock"),
                "log_path": str(tmp_path / "log"), **bad}
        Path(slot.record).write_text(json.dumps(info))
        template, why = warm.adopt(slot, key, env)
        assert template is None and "damaged" in why and not Path(slot.record).exists()
        assert (keep / "file").is_dir() and sleeper.poll() is None
        slot.release()
    finally:
        sleeper.kill()
        sleeper.wait()
