"""Kernels forked from a pre-imported template: isolated like fresh ones, and gone after close()."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from livecells.config import LivecellsConfig
from livecells.execute.forkserver.forked import MARKER, ForkedProcess
from livecells.execute.forkserver.server import ForkServer
from livecells.execute.kernels.session import KERNEL_ARGUMENTS, KernelSession
from livecells.kernel_side import template as template_program
from livecells.model.frameworks import FrameworkSpec

import timing
from conftest import kernel_processes
from helpers import alive

pytestmark = pytest.mark.usefixtures("no_kernel_left")

TORCH = LivecellsConfig().frameworks["pytorch"]
PLAIN = FrameworkSpec(name="alpha", label="Alpha")

# Everything a session can tell about itself, asked before the cell imports anything.
REPORT = """\
import json as _j, os as _o, sys as _s
print(_j.dumps({
    "torch_bound": "torch" in globals(),
    "torch_loaded": "torch" in _s.modules,
    "pid": _o.getpid(), "pgid": _o.getpgid(0), "sid": _o.getsid(0), "ppid": _o.getppid(),
    "cwd": _o.getcwd(),
    "cuda": _o.environ.get("CUDA_VISIBLE_DEVICES"),
    "marker": _o.environ.get("LIVECELLS_TEST_MARKER"),
}))
"""
SEEDS = """\
import json, random, numpy, torch
print(json.dumps([random.random(), float(numpy.random.rand()), float(torch.rand(1))]))
"""
PLOT = """\
import matplotlib.pyplot as plt
plt.plot([1, 2, 3])
plt.show()
"""


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def stdout(result: Any) -> str:
    return "".join(o["text"] for o in result.outputs if o.get("name") == "stdout")


async def torch_session(server: ForkServer, cwd: Path, device: int) -> dict[str, Any]:
    session = KernelSession(
        TORCH,
        cwd=cwd,
        devices=[device],
        manager_factory=server.manager,
        extra_env={"LIVECELLS_TEST_MARKER": str(device)},
    )
    async with session:
        found: dict[str, Any] = {"process": session.km.provisioner.process}
        found["report"] = json.loads(stdout(await session.run_cell(REPORT, timing.CELL)))
        found["seeds"] = json.loads(stdout(await session.run_cell(SEEDS, timing.CELL)))
        found["fd"] = await session.run_cell("import os; os.write(2, b'written to fd 2\\n')", timing.CELL)
        found["plot"] = await session.run_cell(PLOT, timing.CELL)
        found["interrupted"] = await session.run_cell("import time; time.sleep(60)", 2)
        found["after"] = await session.run_cell("print('still here')", timing.CELL)
        found["broken"] = session.broken
    return found


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """What the kernels of one fork server saw, for the tests below that only read it: its torch
    template (whose import is most of their time) and its plain one each start once, and the
    server is closed before any of those tests runs. Sessions may differ in
    LIVECELLS_TEST_MARKER and still fork; one without it forks as from any server."""
    folder = tmp_path_factory.mktemp
    first, second, plain, per_session = folder("first"), folder("second"), folder("plain"), folder("env")
    app_folders = [folder(name) for name in ("fresh", "one", "two")]
    with ForkServer(per_session_env=["LIVECELLS_TEST_MARKER"]) as server:
        server.prepare(TORCH)  # returns at once; ready() waits for the imports
        template = next(iter(server.templates.values()))

        async def sessions() -> dict[str, Any]:
            assert await server.ready(TORCH)
            torch = await asyncio.gather(torch_session(server, first, 0), torch_session(server, second, 1))
            fresh = await app_session(None, app_folders[0])  # the oracle: launched normally
            forked = await asyncio.gather(*(app_session(server.manager, f) for f in app_folders[1:]))
            return {
                "torch": {"runs": torch, "dirs": [str(first), str(second)]},
                "app": {"fresh": fresh, "forked": forked, "folders": app_folders},
                "plain": await plain_session(server, plain),
                "session_env": [
                    await env_session(server, per_session, {"LIVECELLS_TEST_MARKER": "x"}),
                    await env_session(server, per_session, {}),
                ],
            }

        data = run(sessions())
        data["fallbacks"], data["torch"]["template"] = dict(server.fallbacks), template.process.pid
        data["torch"]["cmdline"] = psutil.Process(template.process.pid).cmdline()
    return data


@pytest.fixture(scope="module")
def torch_runs(shared: dict[str, Any]) -> dict[str, Any]:
    """Two torch sessions launched at once from one template, and what each saw."""
    return {**shared["torch"], "fallbacks": shared["fallbacks"]}


@pytest.mark.kernel
@pytest.mark.frameworks
def test_torch_kernels_are_forked(torch_runs: dict[str, Any]) -> None:
    assert torch_runs["fallbacks"] == {}
    # The template is kernel_side/template.py, run by path (and found by the marker, as kernels are).
    assert torch_runs["cmdline"][3:5] == [template_program.__file__, MARKER]
    for found in torch_runs["runs"]:
        assert isinstance(found["process"], ForkedProcess)
        assert found["report"]["ppid"] == torch_runs["template"] != os.getpid()
        assert found["report"]["torch_loaded"]  # imported once, in the template


@pytest.mark.kernel
@pytest.mark.frameworks
def test_each_kernel_has_its_own_process_group_cwd_and_env(torch_runs: dict[str, Any]) -> None:
    reports = [found["report"] for found in torch_runs["runs"]]
    assert reports[0]["pid"] != reports[1]["pid"]
    for device, (report, cwd) in enumerate(zip(reports, torch_runs["dirs"])):
        assert report["pgid"] == report["sid"] == report["pid"]
        assert report["cwd"] == cwd
        assert report["cuda"] == str(device)
        assert report["marker"] == str(device)
        assert not report["torch_bound"]  # nothing of the template in the user namespace


@pytest.mark.kernel
@pytest.mark.frameworks
def test_random_generators_are_reseeded(torch_runs: dict[str, Any]) -> None:
    first, second = (found["seeds"] for found in torch_runs["runs"])
    assert all(a != b for a, b in zip(first, second)), (first, second)


@pytest.mark.kernel
@pytest.mark.frameworks
def test_fd_output_figures_and_interrupts_work(torch_runs: dict[str, Any]) -> None:
    for found in torch_runs["runs"]:
        streams = [o for o in found["fd"].outputs if o["output_type"] == "stream"]
        assert {"name": "stderr", "text": "written to fd 2\n"}.items() <= streams[0].items()
        assert found["plot"].status == "ok"
        assert any("image/png" in o.get("data", {}) for o in found["plot"].outputs)
        assert found["interrupted"].status == "timeout"
        assert found["broken"] is None
        assert stdout(found["after"]) == "still here\n"


async def plain_session(server: ForkServer, cwd: Path) -> dict[str, Any]:
    """A plain session beside a module of its folder, with its kernel's log."""
    (cwd / "helper_mod.py").write_text("VALUE = 42\n")
    log = cwd / "kernel.log"
    async with KernelSession(PLAIN, cwd=cwd, manager_factory=server.manager, log_path=log) as k:
        found = await k.run_cell("import helper_mod; print(helper_mod.VALUE)", timing.CELL)
        poller = await k.run_cell(
            "from ipykernel.kernelapp import IPKernelApp\n"
            "import os; app = IPKernelApp.instance()\n"
            "print(app.parent_handle, os.environ['JPY_PARENT_PID'], app.poller.is_alive())",
            30,
        )
        forked = isinstance(k.km.provisioner.process, ForkedProcess)
    return {"printed": (stdout(found), stdout(poller)), "forked": forked, "log": log.read_text()}


@pytest.mark.kernel
@pytest.mark.frameworks
def test_plain_kernel_finds_modules_in_its_folder_and_watches_the_launcher(shared: dict[str, Any]) -> None:
    # Not its template: a kernel outlives a template that dies, not the build (that launched it).
    found = shared["plain"]
    assert found["printed"] == ("42\n", f"{os.getpid()} {os.getpid()} True\n")
    assert found["forked"] and shared["fallbacks"] == {}
    assert "Ctrl-C will not work" not in found["log"]


# What of the build's secrets a cell can find: in os.environ, and in the environment its process
# was started with (/proc/self/environ: a forked kernel's is its template's).
SECRETS_SEEN = """\
import json, os
names = ("GITHUB_TOKEN", "AWS_SECRET_ACCESS_KEY", "MY_API_KEY", "TWINE_PASSWORD", "LIVECELLS_HARMLESS")
start = open("/proc/self/environ", "rb").read().decode()
print(json.dumps({"environ": [n for n in names if n in os.environ], "started": [n for n in names if n in start]}))
"""
SECRETS = {
    "GITHUB_TOKEN": "ghs_0123456789", "AWS_SECRET_ACCESS_KEY": "k", "MY_API_KEY": "k", "TWINE_PASSWORD": "p",
    "LIVECELLS_HARMLESS": "1",
}  # fmt: skip


@pytest.mark.kernel
def test_the_builds_secrets_reach_no_kernel_forked_or_fresh(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)

    async def seen(**kwargs: Any) -> tuple[dict[str, Any], bool]:
        async with KernelSession(PLAIN, cwd=tmp_path, **kwargs) as kernel:
            result = json.loads(stdout(await kernel.run_cell(SECRETS_SEEN, timing.CELL)))
            return result, isinstance(kernel.km.provisioner.process, ForkedProcess)

    with ForkServer() as server:
        forked, was_forked = run(seen(manager_factory=server.manager))
        assert was_forked and server.fallbacks == {}  # the template was started without them too
    fresh, _ = run(seen())
    for found in (forked, fresh):
        assert found == {"environ": ["LIVECELLS_HARMLESS"], "started": ["LIVECELLS_HARMLESS"]}
    # An author's own patterns replace the default ones: [] keeps everything.
    with ForkServer(env_drop=["my_*"]) as server:
        chosen, was_forked = run(seen(manager_factory=server.manager, env_drop=["my_*"]))
    assert was_forked and chosen["environ"] == chosen["started"] == sorted(set(SECRETS) - {"MY_API_KEY"}, key=list(SECRETS).index)
    everything, _ = run(seen(env_drop=[]))
    assert everything["environ"] == list(SECRETS)


@pytest.mark.kernel
def test_close_kills_templates_and_running_kernels(tmp_path: Path) -> None:
    server = ForkServer()

    spawn = "import subprocess; print(subprocess.Popen(['sleep', '60']).pid)"

    async def session() -> tuple[int, int, int]:
        async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=server.manager) as k:
            pid = k.km.provisioner.process.pid
            template = next(iter(server.templates.values())).process.pid
            helper = int(stdout(await k.run_cell(spawn, timing.CELL)))  # in the kernel's process group
            assert alive(pid) and alive(helper) and kernel_processes()
            server.close()  # the build ends (or is interrupted) with the kernel still up
            await asyncio.sleep(timing.POLL)
            assert not await k.km.is_alive()
            return pid, template, helper

    pid, template, helper = run(session())
    assert not [p for p in (pid, template, helper) if alive(p)]
    assert kernel_processes() == []
    server.close()  # twice is fine


@pytest.fixture
def subreaper() -> Any:
    """This process a subreaper, as a build that runs cells is (orphans come to it)."""
    from livecells.kernel_side.reaper import set_subreaper

    set_subreaper(True)
    yield
    set_subreaper(False)


@pytest.mark.kernel
@pytest.mark.wallclock
@pytest.mark.parametrize("how", ["killed", "stopped"])
def test_a_template_killed_or_stopped_by_a_cell_costs_no_session(tmp_path: Path, subreaper: Any, how: str) -> None:
    warnings: list[str] = []
    attack = f"import os, signal; os.kill(os.getppid(), signal.{'SIGKILL' if how == 'killed' else 'SIGSTOP'})"

    async def sessions(server: ForkServer) -> dict[str, Any]:
        found: dict[str, Any] = {}
        async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=server.manager) as own, KernelSession(
            PLAIN, cwd=tmp_path, manager_factory=server.manager
        ) as next_page:  # forked ahead for the next page, as the scheduler's prestarts are
            template = next(iter(server.templates.values()))
            found["template"] = template.process.pid
            found["kernels"] = [own.pid, next_page.pid]
            found["attack"] = await own.run_cell(attack + "\nimport time; time.sleep(0.2); print('on')", timing.CELL)
            started = asyncio.get_running_loop().time()
            found["alive"] = await next_page.km.is_alive()  # a status check, never the template's
            found["check_s"] = asyncio.get_running_loop().time() - started
            await asyncio.sleep(timing.PARENT_POLL)  # ipykernel's parent poller looks every second
            found["own"] = await own.run_cell("print('own')", timing.CELL)
            found["next"] = await next_page.run_cell("print('next')", timing.CELL)
        async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=server.manager) as later:
            found["later_process"] = later.km.provisioner.process
            found["later"] = await later.run_cell("print('later')", timing.CELL)
            found["templates"] = [t.process.pid for t in server.templates.values()]
        return found

    with ForkServer(warn=warnings.append) as server:
        found = run(sessions(server))
    assert stdout(found["attack"]) == "on\n" and stdout(found["own"]) == "own\n"
    assert found["alive"] and found["check_s"] < timing.PARENT_CHECK and stdout(found["next"]) == "next\n"
    # The next launch forks from a new template; the old one is gone, stopped or not.
    assert isinstance(found["later_process"], ForkedProcess) and stdout(found["later"]) == "later\n"
    assert found["templates"] != [found["template"]] and not alive(found["template"])
    assert warnings == []
    # The kernels this process adopted from the dead template were collected: no zombies.
    assert not [pid for pid in found["kernels"] if psutil.pid_exists(pid)]


@pytest.mark.kernel
@pytest.mark.wallclock
def test_a_forked_kernels_exit_status_is_read_without_its_template(tmp_path: Path, subreaper: Any) -> None:
    async def session(server: ForkServer, code: str) -> tuple[Any, float]:
        async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=server.manager) as kernel:
            template = next(iter(server.templates.values())).process
            os.kill(template.pid, signal.SIGSTOP)
            try:
                started = asyncio.get_running_loop().time()
                died = await kernel.run_cell(code, timing.CELL)
                return died, asyncio.get_running_loop().time() - started
            finally:
                os.kill(template.pid, signal.SIGCONT)

    with ForkServer() as server:
        died, took = run(session(server, "import os; os._exit(3)"))
        assert died.status == "died" and died.error["evalue"] == "the kernel exited with status 3" and took < timing.DEATH_SEEN
    with ForkServer() as server:
        died, _ = run(session(server, "import os; os.kill(os.getpid(), 9)"))
        assert died.error["evalue"] == "the kernel died of SIGKILL (killed, perhaps for lack of memory)"


@pytest.mark.kernel
def test_failed_preload_and_disabled_server_fall_back(tmp_path: Path) -> None:
    broken = FrameworkSpec(name="broken", label="Broken", preload=("no_such_module_livecells",))
    warnings: list[str] = []

    async def sessions(server: ForkServer, disabled: ForkServer) -> tuple[str, Any]:
        assert not await server.ready(broken)
        # As without forks; the hook's error, by name and message (it is a user expression).
        why = "could not prepare the kernel: ModuleNotFoundError: No module named 'no_such_module_livecells'"
        with pytest.raises(RuntimeError, match=why):
            async with KernelSession(broken, cwd=tmp_path, manager_factory=server.manager):
                pass
        async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=disabled.manager) as k:
            return stdout(await k.run_cell("print(3)", timing.CELL)), k.km.provisioner.process

    with ForkServer(warn=warnings.append) as server, ForkServer(
        warn=warnings.append, enabled=False
    ) as disabled:
        printed, process = run(sessions(server, disabled))
    assert printed == "3\n" and isinstance(process, subprocess.Popen)
    assert "a preload import failed" in warnings[0] and "no_such_module_livecells" in warnings[0]
    assert "needs Linux" in warnings[1]


@pytest.mark.kernel
def test_a_preload_that_prints_at_import_still_forks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A banner printed at import (Python and C level) goes to the template's log, not into
    its ready line (where it made the template fail); the kernels fork, and each shows it in
    its first cell (as a fresh kernel that imported it there), and only there."""
    (tmp_path / "livecells_test_banner.py").write_text(
        "import os\nprint('hello from the banner')\nos.write(1, b'C-level banner\\n')\n"
    )
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    banner = FrameworkSpec(name="banner", label="Banner", preload=("livecells_test_banner",))

    async def session() -> tuple[Any, Any]:
        assert await server.ready(banner)
        async with KernelSession(banner, cwd=tmp_path, manager_factory=server.manager) as k:
            return k.km.provisioner.process, [await k.run_cell("print(3)", timing.CELL), await k.run_cell("print(4)", timing.CELL)]

    with ForkServer() as server:
        process, result = run(session())
        assert server.fallbacks == {}
        log = Path(next(iter(server.templates.values())).log_path).read_text()
    assert isinstance(process, ForkedProcess)
    assert [stdout(r) for r in result] == ["hello from the banner\nC-level banner\n3\n", "4\n"]
    assert "hello from the banner" in log and "C-level banner" in log


@pytest.mark.kernel
def test_environment_a_preload_may_read_at_import_is_not_forked(tmp_path: Path) -> None:
    warnings: list[str] = []
    ask = "import os; print(os.environ.get('LIVECELLS_TEST_SETTING'))"

    async def sessions(server: ForkServer) -> list[tuple[Any, str]]:
        found = []
        for extra in ({"LIVECELLS_TEST_SETTING": "1"}, {}):
            async with KernelSession(
                PLAIN, cwd=tmp_path, manager_factory=server.manager, extra_env=extra
            ) as k:
                found.append((k.km.provisioner.process, stdout(await k.run_cell(ask, timing.CELL))))
        return found

    with ForkServer(warn=warnings.append) as server:
        (first, setting), (second, unset) = run(sessions(server))
    assert isinstance(first, subprocess.Popen) and setting == "1\n"
    assert isinstance(second, ForkedProcess) and unset == "None\n"  # not broken for later ones
    assert len(warnings) == 1
    assert "differs from the template's in LIVECELLS_TEST_SETTING" in warnings[0]


# What a cell can see of the process it runs in, asked first thing in a session.
STATE = """\
import json as _j, os as _o, sys as _s
print(_j.dumps({
    "env": dict(_o.environ), "path": list(_s.path), "cwd": _o.getcwd(), "name": __name__,
    "names": sorted(k for k in globals() if not k.startswith("_")),
    "history": [len(In), len(Out)], "argv": _s.argv[:2],  # [launcher, "-f"]
    "build_side": sorted(m for m in _s.modules if m.split(".")[0] in ("livecells", "sphinx", "docutils")),
}))
"""
DRAWS = """\
import json, random, numpy, mxnet
print(json.dumps({
    "hash": hash("livecells"), "random": random.random(), "numpy": float(numpy.random.rand()),
    "mxnet": float(mxnet.np.random.uniform(size=(1,))), "mxnet_nd": float(mxnet.nd.random.uniform(shape=(1,)).asnumpy()[0]),
}))
"""
#: Differ from session to session by design (the session's token; the kernel's parent).
PER_SESSION = {"LIVECELLS_SESSION", "JPY_PARENT_PID"}


@pytest.mark.kernel
@pytest.mark.frameworks
def test_a_forked_kernel_sees_what_a_fresh_kernel_sees(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oracle is a kernel launched normally (no template) in the same build environment:
    same environment, sys.path, cwd, namespace, history and execution count, same hash seed
    when the build sets PYTHONHASHSEED, same mxnet draws (mxnet seeds itself with a constant,
    in a fresh process too); Python's and numpy's generators are fresh in every kernel."""
    monkeypatch.setenv("PYTHONHASHSEED", "4321")  # before the template starts: it reads it
    mxnet_spec = LivecellsConfig().frameworks["mxnet"]

    async def session(factory: Any) -> dict[str, Any]:
        async with KernelSession(mxnet_spec, cwd=tmp_path, manager_factory=factory) as k:
            state = await k.run_cell(STATE, timing.CELL)
            draws = await k.run_cell(DRAWS, timing.CELL)
            second = await k.run_cell("1", timing.CELL)
            return {
                "forked": isinstance(k.km.provisioner.process, ForkedProcess),
                "counts": [state.execution_count, draws.execution_count, second.execution_count],
                "state": json.loads(stdout(state)),
                "draws": json.loads(stdout(draws)),
            }

    with ForkServer() as server:

        async def sessions() -> list[dict[str, Any]]:
            assert await server.ready(mxnet_spec)
            return [await session(None), await session(server.manager), await session(server.manager)]

        fresh, forked, again = run(sessions())
        assert server.fallbacks == {}
    assert not fresh["forked"] and forked["forked"] and again["forked"]
    expected_hash = subprocess.run(
        [sys.executable, "-c", "print(hash('livecells'))"],
        env={**os.environ, "PYTHONHASHSEED": "4321"}, capture_output=True, text=True, check=True,
    ).stdout.strip()
    for other in (forked, again):
        assert other["counts"] == fresh["counts"] == [1, 2, 3]
        a, b = dict(fresh["state"]), dict(other["state"])
        env_a, env_b = a.pop("env"), b.pop("env")
        assert set(env_a) == set(env_b)
        assert {k: v for k, v in env_a.items() if k not in PER_SESSION} == {
            k: v for k, v in env_b.items() if k not in PER_SESSION
        }
        assert env_a["LIVECELLS_SESSION"] != env_b["LIVECELLS_SESSION"]
        assert a == b  # path, cwd, __name__, user namespace, In/Out, argv, build-side modules
        assert other["draws"]["hash"] == fresh["draws"]["hash"] == int(expected_hash)
        assert other["draws"]["mxnet"] == fresh["draws"]["mxnet"]
        assert other["draws"]["mxnet_nd"] == fresh["draws"]["mxnet_nd"]
    assert fresh["state"]["cwd"] == str(tmp_path)
    assert fresh["state"]["build_side"] == []  # nor in a forked kernel (a == b): the template has none
    for name in ("random", "numpy"):
        assert len({fresh["draws"][name], forked["draws"][name], again["draws"][name]}) == 3, name


@pytest.mark.kernel
def test_history_is_the_sessions_own_and_in_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A build neither reads nor writes the author's IPython history: a fresh and a forked kernel
    keep their input history in memory (no SQLite file under IPYTHONDIR), and ``%history``
    and ``In`` still show the session's own cells, and only those."""
    ipython_dir = tmp_path / "ipython"
    monkeypatch.setenv("IPYTHONDIR", str(ipython_dir))  # before the template starts
    cwd = tmp_path / "page"
    cwd.mkdir()

    async def session(factory: Any) -> list[str]:
        async with KernelSession(PLAIN, cwd=cwd, manager_factory=factory) as k:
            await k.run_cell("a = 'first cell'", timing.CELL)
            shown = await k.run_cell("%history -n", timing.CELL)
            where = await k.run_cell("print(get_ipython().history_manager.hist_file); print(len(In))", timing.CELL)
            return [stdout(shown), stdout(where), bool(isinstance(k.km.provisioner.process, ForkedProcess))]

    with ForkServer() as server:

        async def sessions() -> list[list[Any]]:
            assert await server.ready(PLAIN)
            return [await session(None), await session(server.manager), await session(server.manager)]

        runs = run(sessions())
    assert [forked for *_, forked in runs] == [False, True, True]
    for shown, where, _ in runs:
        assert shown.splitlines() == ["   1: a = 'first cell'", "   2: %history -n"]
        assert where.split() == [":memory:", "4"]
    assert not list(ipython_dir.rglob("history.sqlite*"))


# The kernel app and shell as a cell sees them (asked first thing, before anything is imported).
APP_STATE = """\
import json as _j, os as _o, sys as _s, threading as _t
from ipykernel.kernelapp import IPKernelApp as _A
_app, _ip = _A.instance(), get_ipython()
print(_j.dumps({
    "config": {k: dict(v) for k, v in _app.config.items() if k != "IPKernelApp"},
    "app_config": {k: v for k, v in _app.config.get("IPKernelApp", {}).items()
                   if k not in ("connection_file", "parent_handle")},
    "shell_config": [_ip.config is _app.config, _ip.parent is _app.kernel,
                     all(c.config is _app.config for c in _ip.configurables),
                     all(f.config is _app.config for f in _ip.display_formatter.formatters.values())],
    "cli_config": {k: dict(v) for k, v in _app.cli_config.items() if k != "IPKernelApp"},
    "cli_app": sorted(_app.cli_config.get("IPKernelApp", {})),
    "argv": [a for a in _app.argv if not a.endswith(".json") and "parent_handle" not in a],
    "connection_file": _app.connection_file,
    "profile": [_app.profile, _app.ipython_dir, _ip.profile_dir.location],
    "log_level": _app.log_level,
    "excepthook": getattr(_s.excepthook, "__qualname__", type(_s.excepthook).__name__),
    "streams": [_s.stdout.name, _s.stderr.name, type(_s.stdout).__name__, _s.stdin is _s.__stdin__],
    "threads": sorted(type(t).__name__ for t in _t.enumerate()),
    "main_is_user_module": _s.modules["__main__"] is _ip.user_module,
    "names": sorted(k for k in globals() if not k.startswith("_")),
    "hidden_dir_stack": [_dh, _ip.run_line_magic("pwd", "")],
    "history": [len(In), len(Out), len(_ih), len(_ip.history_manager.input_hist_raw)],
    "tmp": __import__("tempfile").gettempdir(),
    "shell": [type(_ip).__name__, type(_ip.parent).__name__, _ip.kernel is _app.kernel,
              _ip.starting_dir, _ip.stdin_encoding, str(_ip.history_manager.hist_file),
              _ip.execution_count, _o.environ.get("TERM"), _o.environ.get("PAGER")],
    "configurables": sorted(type(c).__name__ for c in _ip.configurables),
    "history_managers": len(getattr(type(_ip.history_manager), "_instances", ())),  # IPython 9's registry
    "events": {k: len(v) for k, v in _ip.events.callbacks.items()},
    "magics": {k: sorted(v) for k, v in _ip.magics_manager.lsmagic().items()},
    "formatters": sorted(_ip.display_formatter.formatters),
    "exit_hooks": [__import__("atexit")._ncallbacks(),
                   getattr(_ip.history_manager, "save_thread", None) is None],
}, default=str))
"""


def app_state(result: Any) -> dict[str, Any]:
    return json.loads(stdout(result))


async def app_session(factory: Any, cwd: Path) -> dict[str, Any]:
    """A torch session that asks for APP_STATE first, then draws, a magic, a figure, history."""
    async with KernelSession(TORCH, cwd=cwd, manager_factory=factory) as k:
        state = await k.run_cell(APP_STATE, timing.CELL)
        seeds = await k.run_cell(SEEDS, timing.CELL)
        magic = await k.run_cell("%who_ls", timing.CELL)
        plot = await k.run_cell(PLOT, timing.CELL)
        found = {
            "forked": isinstance(k.km.provisioner.process, ForkedProcess),
            "connection_file": k.km.connection_file,
            "counts": [r.execution_count for r in (state, seeds, magic, plot)],
            "state": app_state(state),
            "seeds": json.loads(stdout(seeds)),
            "magic": magic,
            "plot": plot,
        }
        history = await k.run_cell("print(len(In), len(Out), In[3])", timing.CELL)
        found["later_history"] = stdout(history)
        return found


@pytest.mark.frameworks
@pytest.mark.kernel
def test_a_forked_kernels_app_and_shell_are_a_fresh_kernels(shared: dict[str, Any]) -> None:
    """Each forked kernel runs ipykernel's own start-up after the fork: its own app, shell,
    sockets, threads, kernel, history, namespace, environment and starting directory. The
    oracle is a kernel launched normally: what its cells see is what a forked kernel's cells
    see, but for what differs by design (the connection file, the seeds, the cwd)."""
    fresh, forked, folders = shared["app"]["fresh"], shared["app"]["forked"], shared["app"]["folders"]
    assert shared["fallbacks"] == {}
    assert not fresh["forked"]
    for found, cwd in zip(forked, folders[1:]):
        assert found["forked"]
        a, b = copy.deepcopy(fresh["state"]), copy.deepcopy(found["state"])
        assert b["connection_file"] == found["connection_file"] != a["connection_file"]
        assert b["hidden_dir_stack"] == [[str(cwd)], str(cwd)]
        assert a["shell"][3] == str(folders[0]) and b["shell"][3] == str(cwd)  # starting_dir
        a["shell"][3] = b["shell"][3] = None
        # A forked kernel is told its parent on its command line (its parent is the template),
        # a fresh one by JPY_PARENT_PID.
        assert b["cli_app"] == ["connection_file", "parent_handle"] and a["cli_app"] == ["connection_file"]
        for name in ("connection_file", "hidden_dir_stack", "cli_app"):
            a.pop(name), b.pop(name)
        assert a == b
        assert found["counts"] == fresh["counts"] == [1, 2, 3, 4]
        assert found["magic"].status == "ok"
        assert found["later_history"] == fresh["later_history"]
        assert any("image/png" in o.get("data", {}) for o in found["plot"].outputs)
    # In[0] is "", In[1] the cell itself: nothing ran before it, in either kernel.
    assert fresh["state"]["history"] == [2, 0, 2, 2]
    assert fresh["state"]["shell"][5] == ":memory:" and fresh["state"]["argv"][-1:] == list(KERNEL_ARGUMENTS)
    assert fresh["later_history"] == "6 1 get_ipython().run_line_magic('who_ls', '')\n"
    draws = [found["seeds"] for found in (fresh, *forked)]
    for index in range(3):  # random, numpy, torch: no two kernels share a generator's state
        assert len({d[index] for d in draws}) == 3, draws


async def env_session(server: ForkServer, cwd: Path, extra: dict[str, str]) -> tuple[Any, dict[str, Any]]:
    """A plain session with ``extra`` in its environment: its process, and APP_STATE."""
    async with KernelSession(PLAIN, cwd=cwd, manager_factory=server.manager, extra_env=extra) as k:
        result = await k.run_cell(APP_STATE, timing.CELL)
        return k.km.provisioner.process, app_state(result)


@pytest.mark.frameworks
@pytest.mark.kernel
def test_a_variable_allowed_to_differ_per_session_still_forks(shared: dict[str, Any]) -> None:
    """A session with a variable of ``per_session_env`` the template did not see is forked, and
    its cells see what a session without it sees."""
    (process, state), (other, without) = shared["session_env"]  # with the variable, then without
    state, without = copy.deepcopy(state), copy.deepcopy(without)  # popped from below
    assert shared["fallbacks"] == {}
    assert isinstance(process, ForkedProcess) and isinstance(other, ForkedProcess)
    assert state["history"] == [2, 0, 2, 2] and state["main_is_user_module"]
    assert state["shell"][5] == ":memory:"
    state.pop("connection_file"), without.pop("connection_file")
    assert state == without


@pytest.mark.kernel
def test_a_configured_shell_subclass_is_built_by_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A kernel config file that names a kernel class with another shell class: a forked
    kernel builds a shell of that class, as a fresh kernel does."""
    ipython_dir = tmp_path / "ipython"
    (ipython_dir / "profile_default").mkdir(parents=True)
    (ipython_dir / "profile_default" / "ipython_kernel_config.py").write_text(
        "c.IPKernelApp.kernel_class = 'livecells_test_shell.TestKernel'\n"
    )
    (tmp_path / "livecells_test_shell.py").write_text(
        "from ipykernel.ipkernel import IPythonKernel\n"
        "from ipykernel.zmqshell import ZMQInteractiveShell\n"
        "from traitlets import Type\n\n"
        "class TestShell(ZMQInteractiveShell):\n    pass\n\n"
        "class TestKernel(IPythonKernel):\n    shell_class = Type(TestShell)\n"
    )
    monkeypatch.setenv("IPYTHONDIR", str(ipython_dir))  # before the template starts
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")]))
    cwd = tmp_path / "page"
    cwd.mkdir()

    async def session(factory: Any) -> dict[str, Any]:
        async with KernelSession(PLAIN, cwd=cwd, manager_factory=factory) as k:
            state = app_state(await k.run_cell(APP_STATE, timing.CELL))
            second = await k.run_cell("print(len(In))", timing.CELL)
            return {"forked": isinstance(k.km.provisioner.process, ForkedProcess), "state": state,
                    "second": stdout(second)}

    with ForkServer() as server:

        async def sessions() -> list[dict[str, Any]]:
            assert await server.ready(PLAIN)
            return [await session(None), await session(server.manager)]

        fresh, forked = run(sessions())
        assert server.fallbacks == {}
    assert forked["forked"]
    assert fresh["state"]["shell"][0] == forked["state"]["shell"][0] == "TestShell"
    a, b = dict(fresh["state"]), dict(forked["state"])
    for name in ("connection_file", "hidden_dir_stack", "cli_app"):
        a.pop(name), b.pop(name)
    assert a == b
    assert fresh["second"] == forked["second"] == "3\n"


@pytest.mark.kernel
def test_a_config_file_that_runs_code_is_read_by_each_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A Python config file that does more than set values (here: it sets an environment
    variable and reads the cwd) is read by each forked kernel at its own launch, in its own
    environment and cwd, as a fresh kernel reads it; so is one that only sets values."""
    cwd = tmp_path / "page"
    cwd.mkdir()
    cell = (
        "import os; print(os.environ.get('LIVECELLS_TEST_CONFIG'), here == os.getcwd(), pure)\n"
        "1\n2"
    )

    def profile(name: str, kernel_config: str) -> None:
        folder = tmp_path / name / "profile_default"
        folder.mkdir(parents=True)
        (folder / "ipython_kernel_config.py").write_text(kernel_config)
        (folder / "ipython_config.py").write_text(
            '"""Settings only."""\nc = get_config()  # noqa\n'
            "c.InteractiveShell.ast_node_interactivity = 'all'\n"
            "c.InteractiveShellApp.exec_lines.append('pure = True')\n"
        )
        monkeypatch.setenv("IPYTHONDIR", str(tmp_path / name))  # before the template starts

    async def session(factory: Any) -> list[Any]:
        async with KernelSession(PLAIN, cwd=cwd, manager_factory=factory) as k:
            result = await k.run_cell(cell, timing.CELL)
            return [o.get("text") or o.get("data", o)["text/plain"] for o in result.outputs]

    def sessions() -> list[list[Any]]:
        with ForkServer() as server:

            async def both() -> list[list[Any]]:
                assert await server.ready(PLAIN)
                return [await session(None), await session(server.manager)]

            found = run(both())
            assert server.fallbacks == {}
        return found

    profile("code", "import os\nos.environ['LIVECELLS_TEST_CONFIG'] = 'set'\n"
            "c.InteractiveShellApp.exec_lines.append('here = %r' % os.getcwd())\n")
    fresh, forked = sessions()
    expected = ["set True True\n", "1", "2"]
    assert fresh == forked == expected
    profile("settings", "c.InteractiveShellApp.exec_lines.append(\"here = __import__('os').getcwd()\")\n")
    fresh, forked = sessions()
    expected = ["None True True\n", "1", "2"]
    assert fresh == forked == expected


@pytest.mark.kernel
def test_a_forked_kernel_that_dies_starting_leaves_its_reason_in_its_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A configuration that makes the shell fail to build (an unknown colour scheme): each
    forked kernel dies in its own start-up, after
    ipykernel captured fd 2, with its traceback in the kernel's log, as a fresh kernel's."""
    folder = tmp_path / "ipython" / "profile_default"
    folder.mkdir(parents=True)
    (folder / "ipython_kernel_config.py").write_text("c.InteractiveShell.colors = 'livecells_no_such_scheme'\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # before the template starts
    logs = [tmp_path / f"kernel-{n}.log" for n in range(3)]

    async def sessions() -> list[str]:
        assert await server.ready(PLAIN)
        errors = []
        for log in logs:
            with pytest.raises(RuntimeError) as died:
                async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=server.manager, log_path=log):
                    pass
            errors.append(str(died.value))
        return errors

    with ForkServer() as server:
        errors = run(sessions())
        assert server.fallbacks == {}
    for error, log in zip(errors, logs):
        assert error == "the kernel died while starting (the kernel exited with status 1)"
        # IPython 9's traceback (set_theme_name) or IPython 8's "Bad config" line with the value.
        text = log.read_text()
        assert "set_theme_name" in text or "'livecells_no_such_scheme'" in text, text[-500:]


@pytest.mark.kernel
def test_config_files_changed_since_the_template_read_them_are_read_by_the_kernel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A template can outlive a build (a Dask worker's): a kernel config file added or edited
    after the template read its configuration is the one a forked kernel sees, as a fresh one."""
    folder = tmp_path / "ipython" / "profile_default"
    folder.mkdir(parents=True)
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))  # before the template starts
    config = folder / "ipython_kernel_config.py"

    async def session() -> list[Any]:
        async with KernelSession(PLAIN, cwd=tmp_path, manager_factory=server.manager) as k:
            result = await k.run_cell("1\n2", timing.CELL)
            return [o["data"]["text/plain"] for o in result.outputs]

    async def sessions() -> list[list[Any]]:
        assert await server.ready(PLAIN)
        found = [await session()]
        config.write_text("c.InteractiveShell.ast_node_interactivity = 'all'\n")
        found.append(await session())
        config.write_text("c.InteractiveShell.ast_node_interactivity = 'none'\n")
        found.append(await session())
        return found

    with ForkServer() as server:
        found = run(sessions())
        assert server.fallbacks == {}
    assert found == [["2"], ["1", "2"], []]


@pytest.mark.kernel
def test_a_template_whose_imported_files_changed_forks_no_more(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A helper module the template imported (a preload beside the book, on PYTHONPATH) that the
    author saves again: the next kernel runs the new code, forked from a new template, while
    the kernel of the old one lives on; both templates end with the server."""
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    module = helpers / "livecells_test_saved_helper.py"
    # Two saves within one second, at the same size (Python's cache of the first would pass for
    # the second's: see kernel_side/bytecode.py); with bytecode written, as authors have it.
    whole = 1_700_000_000 * 10**9
    module.write_text("VERSION = 1\n")
    os.utime(module, ns=(whole + 100_000_000,) * 2)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(helpers), os.environ.get("PYTHONPATH", "")]))
    saved = FrameworkSpec(name="saved", label="Saved", preload=("livecells_test_saved_helper",))
    ask = "import livecells_test_saved_helper as h; print(h.VERSION)"
    warnings: list[str] = []

    async def sessions(server: ForkServer) -> list[tuple[Any, str, str, int]]:
        found = []
        async with KernelSession(saved, cwd=tmp_path, manager_factory=server.manager) as first:
            found.append((first.km.provisioner.process, stdout(await first.run_cell(ask, timing.CELL))))
            module.write_text("VERSION = 2\n")  # the same size; saved while a kernel runs
            os.utime(module, ns=(whole + 600_000_000,) * 2)
            await asyncio.sleep(timing.SETTLE)  # not as the next template starts (that one is not trusted)
            async with KernelSession(saved, cwd=tmp_path, manager_factory=server.manager) as second:
                found.append((second.km.provisioner.process, stdout(await second.run_cell(ask, timing.CELL))))
                found.append((first.km.provisioner.process, stdout(await first.run_cell(ask, timing.CELL))))
        return found

    with ForkServer(warn=warnings.append) as server:
        time.sleep(timing.SETTLE)  # written before the template starts (one written as it starts is not trusted)
        assert run(server.ready(saved))
        templates = [next(iter(server.templates.values())).process]
        (first, old), (second, new), (_, still_old) = run(sessions(server))
        assert (old, new, still_old) == ("1\n", "2\n", "1\n")
        templates += [t.process for t in server.templates.values()]
        assert len(server.retired) == 1 and server.retired[0].process is templates[0]
    assert isinstance(first, ForkedProcess) and isinstance(second, ForkedProcess)
    assert first.template.process is templates[0] and second.template.process is templates[1]
    assert templates[0] is not templates[1] and warnings == []
    assert [t.poll() for t in templates if t.poll() is None] == [] and kernel_processes() == []



@pytest.mark.kernel
def test_a_preload_the_pages_folder_has_its_own_copy_of_is_imported_from_there(tmp_path: Path) -> None:
    """A fresh kernel has its page's folder on ``sys.path`` before site-packages: an installed
    preload with a copy there (a book's ``d2l/`` beside a page at its root) is that copy. The
    template imported the installed one, so a kernel for that folder is not forked."""
    page, other = tmp_path / "page", tmp_path / "other"
    page.mkdir()
    other.mkdir()
    (page / "idna.py").write_text("WHERE = 'page'\n")  # idna: installed, not imported by a kernel
    shadowed = FrameworkSpec(name="shadowed", label="Shadowed", preload=("idna",))
    ask = "import idna; print(getattr(idna, 'WHERE', 'installed'))"

    async def sessions(server: ForkServer) -> list[tuple[Any, str]]:
        found = []
        for cwd, factory in ((page, None), (page, server.manager), (other, server.manager)):
            async with KernelSession(shadowed, cwd=cwd, manager_factory=factory) as k:
                found.append((k.km.provisioner.process, stdout(await k.run_cell(ask, timing.CELL))))
        return found

    warnings: list[str] = []
    with ForkServer(warn=warnings.append) as server:
        (_, fresh), (at_page, there), (at_other, elsewhere) = run(sessions(server))
    assert (fresh, there, elsewhere) == ("page\n", "page\n", "installed\n")  # fresh: the oracle
    assert isinstance(at_page, subprocess.Popen) and isinstance(at_other, ForkedProcess)
    assert len(warnings) == 1 and str(page / "idna.py") in warnings[0]


# A preload like d2l's: a heavy module that is safe to share, an import-time warning, and
# matplotlib's inline backend, whose import registers the figure hook on the shell it finds.
SHELL_PRELOAD = """\
import warnings
import numpy
import matplotlib.pyplot
import matplotlib_inline.backend_inline
warnings.warn("livecells test: import-time warning")
"""
SHELL_CELLS = [
    "import livecells_test_shell_preload\nprint('first')",
    "import matplotlib.pyplot as plt\nplt.plot([1, 2])\nprint(plt.isinteractive())",
    "%matplotlib inline\nplt.plot([3, 1])",
    "print(sorted(c.__name__ for c in get_ipython().events.callbacks['post_execute']))",
]


def _seen(result: Any) -> list[Any]:
    """What a cell showed: streams' text and each rich output's kinds, and its error."""
    shown: list[Any] = [(result.error or {}).get("ename")]
    for output in result.outputs:
        if output["output_type"] == "stream":
            shown.append((output["name"], output["text"]))
        else:
            shown.append((output["output_type"], sorted(output.get("data", {}))))
    return shown


@pytest.mark.kernel
def test_a_preload_that_uses_the_shell_at_import_shows_what_a_fresh_kernel_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The oracle is a kernel launched normally without the preload, whose first cell imports
    it (as Jupyter would). Forked kernels share numpy and matplotlib with the template but
    import the preload themselves: the inline figure hook is theirs, figures without
    ``plt.show()`` appear, the warning shows in the first cell; the fork server says why."""
    modules = tmp_path / "modules"  # on the path, not the page's folder (that would get a fresh kernel)
    modules.mkdir()
    (modules / "livecells_test_shell_preload.py").write_text(SHELL_PRELOAD)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")]))
    preloaded = FrameworkSpec(name="shell", label="Shell", preload=("livecells_test_shell_preload",))
    notes: list[str] = []

    async def sessions(server: ForkServer) -> tuple[list[Any], list[list[Any]], list[Any]]:
        async with KernelSession(PLAIN, cwd=tmp_path) as fresh:
            oracle = [_seen(await fresh.run_cell(code, timing.CELL)) for code in SHELL_CELLS]
        assert await server.ready(preloaded)
        found, processes = [], []
        for _ in range(2):
            async with KernelSession(preloaded, cwd=tmp_path, manager_factory=server.manager) as k:
                processes.append(k.km.provisioner.process)
                found.append([_seen(await k.run_cell(code, timing.CELL)) for code in SHELL_CELLS])
        return oracle, found, processes

    with ForkServer(warn=notes.append) as server:
        oracle, found, processes = run(sessions(server))
        assert server.fallbacks == {}
    assert all(isinstance(p, ForkedProcess) for p in processes)
    assert found == [oracle, oracle]
    assert ("display_data", ["image/png", "text/plain"]) in oracle[1]
    assert any("import-time warning" in str(shown) for shown in oracle[0])
    assert len(notes) == 1 and "'livecells_test_shell_preload'" in notes[0]
    assert "matplotlib_inline.backend_inline, which it imports, asks for IPython's shell" in notes[0]


@pytest.mark.kernel
def test_the_template_shares_only_what_does_not_use_the_shell(tmp_path: Path) -> None:
    """The probe (a forked child of a process that has IPython, as a template has): modules
    whose bodies call get_ipython, and those that import them, are left out; what they import
    that does not is shared; a preload that touches nothing is shared whole."""
    (tmp_path / "lc_culprit.py").write_text("from IPython import get_ipython\nget_ipython()\nimport lc_late\n")
    (tmp_path / "lc_late.py").write_text("")
    (tmp_path / "lc_heavy").mkdir()
    (tmp_path / "lc_heavy" / "__init__.py").write_text("from lc_heavy import part\n")
    (tmp_path / "lc_heavy" / "part.py").write_text("import json\n")
    (tmp_path / "lc_book").mkdir()
    (tmp_path / "lc_book" / "__init__.py").write_text("")
    (tmp_path / "lc_book" / "torch.py").write_text("import lc_heavy\ndef f():\n    import lc_culprit\nf()\n")
    (tmp_path / "lc_plain.py").write_text("import lc_heavy\n")
    (tmp_path / "lc_shows.py").write_text("from IPython.display import display\ndisplay('shown at import')\n")
    script = (
        "import json, sys, IPython\nfrom livecells.kernel_side import template\n"
        "print(json.dumps([template.shareable(['lc_book.torch']), template.shareable(['lc_plain']),"
        " 'lc_heavy' in sys.modules, template.shareable(['lc_shows'])]))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])}
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timing.PYTHON_CHECK)
    (book_roots, book_left), (plain_roots, plain_left), imported_here, shows = json.loads(out.stdout)
    assert book_roots == ["lc_book", "lc_heavy", "lc_late"]  # lc_heavy.part comes with its package
    assert book_left == {
        "lc_book.torch": "lc_culprit, which it imports, asks for IPython's shell (get_ipython()) as it is imported"
    }
    assert (plain_roots, plain_left, imported_here) == (["lc_plain"], {}, False)
    # display() at import: a display_data in a kernel's first cell, printed text in a template.
    assert shows == [[], {"lc_shows": "lc_shows asks for IPython's shell (get_ipython()) as it is imported"}]


@pytest.mark.kernel
def test_the_build_says_at_conf_py_which_preload_each_kernel_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from io import StringIO

    from helpers import build_site

    modules, src = tmp_path / "modules", tmp_path / "src"
    modules.mkdir()
    src.mkdir()
    (modules / "lc_asks.py").write_text("from IPython import get_ipython\nSHELL = get_ipython() is not None\n")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(modules), os.environ.get("PYTHONPATH", "")]))
    (src / "conf.py").write_text(
        'extensions = ["livecells"]\n\n'
        'livecells_frameworks = {"alpha": {"preload": ["lc_asks"], "gpu_used": "False"}}\n'
    )
    (src / "index.rst").write_text("T\n=\n\n.. live-cell:: alpha\n\n   import lc_asks\n   print(lc_asks.SHELL)\n")
    status = StringIO()
    app, warnings = build_site(src, status=status)
    assert not warnings
    said = [line for line in status.getvalue().splitlines() if "lc_asks" in line]
    assert len(said) == 1, said  # once, at the line that names the frameworks
    assert said[0].startswith(f"{src / 'conf.py'}:3: livecells: preload 'lc_asks' (")
    assert said[0].endswith(
        ") is imported by each kernel, not shared by forking: lc_asks asks for IPython's shell "
        "(get_ipython()) as it is imported; the modules it imports that do not are shared"
    )
    # The module saw the kernel's shell, as in a cell.
    assert "True" in (Path(app.outdir) / "index.html").read_text()
