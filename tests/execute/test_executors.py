"""The executor seam: ``livecells_executor`` picks an executor by the address's scheme (or takes
one as an object), and the build asks it, never a name, where sessions run.

The second executor here, :class:`helpers.InProcessPool`, is registered for a scheme of its own
and drives real Sphinx builds with a scheduler that is not livecells' own.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sphinx.errors import SphinxError

from livecells.errors import ExecutorError
from livecells.execute import executors
from livecells.execute.executors import Executor, LocalExecutor, executor_for

import timing
from helpers import FakeKernels, InProcessPool, build_site, declared_entry_points, install_plugin, outputs, soup
from paths import EXT, TESTS


def test_the_address_scheme_picks_the_executor():
    from livecells.execute.dask import DaskExecutor

    assert executor_for("local") == LocalExecutor()
    for address in ("tcp://10.0.0.1:8786", "TLS://scheduler:8786", "scheduler:8786"):
        assert executor_for(address) == DaskExecutor(address), address

    def factory():
        return None

    assert executor_for(factory) == DaskExecutor(factory)  # a function returning a Dask client
    fake = FakeKernels()
    assert executor_for(fake) is fake and isinstance(fake, Executor)


@pytest.mark.parametrize("value", ["ray://head:10001", "slurm://partition", 8786])
def test_what_names_no_executor_is_a_problem_not_a_dask_address(value):
    with pytest.raises(ExecutorError) as problem:
        executor_for(value)
    assert "Dask" not in str(problem.value)
    if isinstance(value, str):
        assert f"'{value.partition(':')[0]}://'" in str(problem.value)


def _site(tmp_path: Path, rootdir: Path, conf: str = "") -> Path:
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-fast", src)
    with open(src / "conf.py", "a", encoding="utf-8") as file:
        file.write(conf)
    return src


def test_a_registered_scheme_runs_a_real_build_on_its_own_scheduler(tmp_path, rootdir, monkeypatch):
    monkeypatch.setitem(executors.SCHEMES, "inprocess", "helpers:InProcessPool")
    monkeypatch.setattr(InProcessPool, "runs", [])
    src = _site(tmp_path, rootdir)
    app, warnings = build_site(src, confoverrides={"livecells_executor": "inprocess://2"})
    assert "WARNING" not in warnings, warnings
    assert InProcessPool.runs == [2]  # one run of its scheduler; alpha's and beta's sessions at once
    page = soup(app.outdir / "index.html")
    assert "everyone" in outputs(page)
    stored = json.loads((src / "_livecells" / "index.json").read_text(encoding="utf-8"))
    assert set(stored["sessions"]) == {"alpha", "beta"}
    for session in stored["sessions"].values():
        assert session["status"] == "ok"
        assert session["provenance"]["kernelspec"]["display_name"] == "in-process (tests/helpers.py)"
    # Its sessions are no local kernels: the build started no guard and no fork server.
    processes = app.livecells_state.processes
    assert processes.watcher is None and processes.server is None


def test_an_executor_that_cannot_run_sessions_stops_the_build(tmp_path, rootdir, monkeypatch):
    monkeypatch.setitem(executors.SCHEMES, "inprocess", "helpers:InProcessPool")
    src = _site(tmp_path, rootdir)
    with pytest.raises(SphinxError, match="'inprocess://none': the pool's size must be a number"):
        build_site(src, confoverrides={"livecells_executor": "inprocess://none"})


def test_an_unknown_scheme_is_a_config_warning_at_its_line_and_cells_run_locally(tmp_path, rootdir):
    src = _site(tmp_path, rootdir, '\nlivecells_executor = "ray://head:10001"\n')
    (src / "index.rst").write_text("Nothing to run\n==============\n", encoding="utf-8")
    line = len((src / "conf.py").read_text(encoding="utf-8").splitlines())
    app, warnings = build_site(src)
    assert (
        f"conf.py:{line}: WARNING: livecells_executor = 'ray://head:10001': no executor for the "
        "scheme 'ray://'"
    ) in warnings, warnings
    assert "using the default [livecells.config]" in warnings
    assert "Dask" not in warnings  # before, it was taken for a Dask address, and the build stopped
    assert app.livecells_state.executor == LocalExecutor()


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nope", "locla", "head:"])
def test_a_value_that_is_no_address_is_a_config_warning_and_cells_run_locally(tmp_path, rootdir, value):
    """Not taken for a Dask address (the build stopped with Sphinx's "please report this")."""
    src = _site(tmp_path, rootdir)
    (src / "index.rst").write_text("Nothing to run\n==============\n", encoding="utf-8")
    app, warnings = build_site(src, confoverrides={"livecells_executor": value})
    assert f"livecells_executor = {value!r}: not 'local', an address 'scheme://host:port'" in warnings
    assert "using the default (given with -D) [livecells.config]" in warnings, warnings
    assert app.livecells_state.executor == LocalExecutor()


CONF_POOL = """
import sys
sys.path.insert(0, {tests!r})
from helpers import InProcessPool

class Pool(InProcessPool):
    def __init__(self):
        super().__init__("inprocess://2")

"""


def test_an_executor_class_defined_in_conf_py_is_used(tmp_path, rootdir, monkeypatch):
    monkeypatch.setattr(InProcessPool, "runs", [])
    conf = CONF_POOL.format(tests=str(TESTS)) + "livecells_executor = Pool\n"
    app, warnings = build_site(_site(tmp_path, rootdir, conf))
    assert "WARNING" not in warnings, warnings  # and Sphinx pickled its environment
    assert InProcessPool.runs == [2]
    assert "everyone" in outputs(soup(app.outdir / "index.html"))


def test_an_executor_object_that_cannot_be_pickled_is_a_config_warning(tmp_path, rootdir):
    # An instance of a class defined in conf.py: Sphinx could not pickle its environment.
    conf = CONF_POOL.format(tests=str(TESTS)) + "livecells_executor = Pool()\n"
    src = _site(tmp_path, rootdir, conf + 'livecells_execute = "off"\n')
    line = len((src / "conf.py").read_text(encoding="utf-8").splitlines()) - 1
    app, warnings = build_site(src)
    assert f"conf.py:{line}: WARNING: livecells_executor = <" in warnings, warnings
    assert "an executor object must be picklable" in warnings
    assert app.livecells_state.executor == LocalExecutor()


@pytest.mark.process
@pytest.mark.kernel
def test_an_installed_package_adds_an_executor_by_its_entry_point(tmp_path, rootdir):
    """tests/plugins/executor, installed as a user installs a package (pip, into a folder of its
    own on the build's path): its scheme is known, chosen, and runs the sessions; nothing in
    ext/ names it."""
    env = install_plugin("executor", tmp_path)
    src = _site(tmp_path, rootdir, '\nlivecells_executor = "echo://here"\n')
    done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-W", str(src), str(tmp_path / "out")],
                          env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    verbose = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-E", str(src), str(tmp_path / "out2")],
                             env=env, capture_output=True, text=True)
    assert "the echo executor runs this build's sessions (echo://here)" in verbose.stdout, verbose.stdout
    assert "everyone" in outputs(soup(tmp_path / "out" / "index.html"))
    stored = json.loads((src / "_livecells" / "index.json").read_text(encoding="utf-8"))
    assert {s["status"] for s in stored["sessions"].values()} == {"ok"}
    assert "livecells_echo_executor" not in "".join(p.read_text() for p in EXT.rglob("*.py"))


def test_two_packages_naming_one_scheme_are_named_and_a_broken_one_says_why(monkeypatch):
    from importlib.metadata import EntryPoint

    found = [EntryPoint("ray", "one_pkg:Ray", executors.ENTRY_POINTS), EntryPoint("ray", "other_pkg:Ray", executors.ENTRY_POINTS),
             EntryPoint("tcp", "evil:Replace", executors.ENTRY_POINTS), EntryPoint("k8s", "missing_pkg:K8s", executors.ENTRY_POINTS)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [e for e in found if e.group == group])
    schemes = executors.known_schemes()
    assert schemes["tcp"] == [executors.SCHEMES["tcp"]]  # a package cannot replace livecells' own
    with pytest.raises(ExecutorError, match=r"more than one executor for 'ray://': one_pkg:Ray, other_pkg:Ray"):
        executor_for("ray://head:1")
    with pytest.raises(ExecutorError, match=r"'k8s://' \(missing_pkg:K8s\) cannot be loaded: No module named 'missing_pkg'"):
        executor_for("k8s://cluster")


def test_livecells_own_schemes_are_resolved_without_reading_the_installed_packages(monkeypatch):
    """``local`` (every build's default) and Dask's schemes are livecells' own, which no package can
    take: finding their executor reads no package metadata (the scan costs every build ~5 ms)."""
    from importlib.metadata import EntryPoint

    def scanned(group):
        raise AssertionError(f"entry points of {group} read")

    monkeypatch.setattr("importlib.metadata.entry_points", scanned)
    assert isinstance(executor_for("local"), LocalExecutor)
    found = [EntryPoint("local", "evil:Replace", executors.ENTRY_POINTS)]
    monkeypatch.setattr("importlib.metadata.entry_points", lambda group: [e for e in found if e.group == group])
    assert isinstance(executor_for("local"), LocalExecutor)
    with pytest.raises(ExecutorError, match=r"no executor for the scheme 'nope://'"):
        executor_for("nope://x")


def test_livecells_own_entry_points_are_its_schemes():
    declared = declared_entry_points()
    assert declared[executors.ENTRY_POINTS] == executors.SCHEMES


@pytest.mark.wallclock
def test_an_unreachable_executor_is_reported_within_seconds():
    pytest.importorskip("distributed")
    from livecells.execute.dask.cluster import check_executor

    started = time.monotonic()
    with pytest.raises(ExecutorError, match="cannot be reached .Connection refused"):
        check_executor("tcp://127.0.0.1:1")
    assert time.monotonic() - started < timing.UNREACHABLE_EXECUTOR
