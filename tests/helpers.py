"""Small helpers shared by the tests."""

from __future__ import annotations

import base64
import contextlib
import functools
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from io import StringIO
from pathlib import Path
from typing import Any

import IPython.display
import psutil
from bs4 import BeautifulSoup
from IPython.core.formatters import DisplayFormatter
from sphinx.testing.util import SphinxTestApp

from livecells.errors import ExecutorError
from livecells.model.records import Probe

import timing
from paths import PLUGINS, REPO, TESTS


def d2l_corpus() -> Path | None:
    """Real d2lbook output (see its README): ``LIVECELLS_D2L_CORPUS``, or ``shared/d2l-corpus``
    beside the checkout (from a git worktree one level down, ``../../shared``); None if absent."""
    root = REPO
    candidates = [os.environ.get("LIVECELLS_D2L_CORPUS", "")]
    candidates += [str(base / "shared" / "d2l-corpus") for base in (root.parent, root.parent.parent)]
    return next((Path(c) for c in candidates if c and (Path(c) / "README.md").is_file()), None)


def said(into: list[str]) -> Callable[[str, str], None]:
    """A ``report`` for :func:`livecells.config.read_config` that keeps its messages in ``into``."""
    return lambda message, name: into.append(message)


def no_report(message: str, name: str) -> None:
    """A ``report`` for :func:`livecells.config.read_config` where every value must be usable."""
    raise AssertionError(f"{name}: {message}")


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


@functools.lru_cache(maxsize=32)
def _parsed(path: Path, mtime_ns: int, size: int) -> BeautifulSoup:
    return soup(path)


def built_page(path: Path) -> BeautifulSoup:
    """:func:`soup` of a page that a module's shared build wrote and several of its tests read,
    parsed once per version of the file. Read it only: a change would reach the other tests."""
    stat = path.stat()
    return _parsed(path, stat.st_mtime_ns, stat.st_size)


def cells(page: BeautifulSoup) -> list:
    return page.select("div.livecells-cell")


def cell_with(page: BeautifulSoup, text: str):
    """The rendered cell whose code contains ``text``."""
    for cell in cells(page):
        code = cell.select_one(".livecells-input")
        if code is not None and text in code.get_text():
            return cell
    raise AssertionError(f"no cell with code containing {text!r}")


def outputs(cell) -> str:
    return "\n".join(o.get_text() for o in cell.select(".livecells-output"))


def meta(cell) -> list[str]:
    return [p.get_text() for p in cell.select("p.livecells-meta")]


def one_page_book(tmp_path: Path, conf: Path | str, page: str) -> Path:
    """``tmp_path/src``, a book of one page: ``conf`` a root's conf.py to copy, or its text;
    ``page`` the text of index.rst."""
    src = tmp_path / "src"
    src.mkdir()
    if isinstance(conf, Path):
        shutil.copy(conf, src / "conf.py")
    else:
        (src / "conf.py").write_text(conf)
    (src / "index.rst").write_text(page)
    return src


def live_cell(code: str, framework: str = "alpha", options: str = "") -> str:
    """A ``live-cell`` of ``framework`` running ``code``, its ``options`` lines (indented) first."""
    body = "\n".join("   " + line if line else "" for line in code.splitlines())
    return f"\n.. live-cell:: {framework}\n{options}\n{body}\n"


def procs_site(tmp_path: Path, rootdir: Path, pages: dict[str, str], conf: str = "") -> Path:
    """``tmp_path/src``, a copy of tests/roots/test-procs (one plain Python framework, ``alpha``)
    with ``pages`` (name -> text under a title of that name) and ``conf`` added to its conf.py."""
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-procs", src)
    for name, text in pages.items():
        (src / name).write_text(f"{name}\n{'=' * len(name)}\n{text}", encoding="utf-8")
    if conf:
        with open(src / "conf.py", "a", encoding="utf-8") as handle:
            handle.write(conf)
    return src


def line_of(text: str, needle: str) -> int:
    """The 1-based number of the first line of ``text`` that holds ``needle``."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def build_site(
    src: Path, builder: str = "html", *, kernels: FakeKernels | None = None, **kwargs: Any
) -> tuple[SphinxTestApp, str]:
    """Build ``src`` with Sphinx's test app (kwargs go to it: confoverrides, freshenv, ...).

    ``kernels``: a :class:`FakeKernels`, the build's ``livecells_executor``, that runs the sessions
    in place of kernels. Returns the app, cleaned up, and its warnings with colour codes removed.
    """
    warnings = StringIO()
    if kernels is not None:
        kwargs["confoverrides"] = {**kwargs.get("confoverrides", {}), "livecells_executor": kernels}
    app = SphinxTestApp(builder, srcdir=src, warning=warnings, **kwargs)
    try:
        app.build()
    finally:
        app.cleanup()
    return app, re.sub(r"\x1b\[[0-9;]*m", "", warnings.getvalue())


def livecells_cli(*argv: str) -> subprocess.CompletedProcess:
    """``python -m livecells ARGV`` run in this process (its ``main``, what it prints to stdout
    and stderr captured), for the tests of what the command does rather than of its process: a
    spawned one costs a Python start-up each. Its exit status, stdout and stderr, as
    :func:`subprocess.run` gives them."""
    from livecells.cli.main import main

    out, err = StringIO(), StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as stop:  # argparse's errors and --help
            code = stop.code if isinstance(stop.code, int) else 1
    return subprocess.CompletedProcess(["livecells", *argv], code, out.getvalue(), err.getvalue())


# -- processes that must end -------------------------------------------------------------------


def alive(pid: int) -> bool:
    """Whether ``pid`` names a process that has not exited (a zombie has)."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def survivors(pids: list[int], within: float = timing.GONE) -> list[int]:
    """Those of ``pids`` still alive after ``within`` seconds; [] as soon as none is."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if not any(alive(p) for p in pids):
            return []
        time.sleep(timing.POLL)
    return [p for p in pids if alive(p)]


# -- a scheduler without kernels, for the tests whose subject is policy --------------------------


_FORMATTER = DisplayFormatter()


class InProcessSession:
    """A kernel session without a kernel, for :class:`LocalScheduler` (its ``session_class``).

    Each cell's code is executed in this process, in a namespace of the session's own, in the
    page's folder; what it prints, its last expression's value, what it ``display()`` s and its
    exception reach livecells' real :class:`OutputCollector` (values and displays as IPython's
    formatter makes their MIME bundles), and :func:`run_session` makes the record, as for a
    kernel. Not a kernel: no timeouts, no fd-level output, no magics, no matplotlib figures.
    """

    def __init__(self, framework: Any, *, cwd: Any, devices: Any = None, output_limit: int = 100_000, **_: Any):
        from livecells.execute.kernels.iopub import SessionDisplays

        self.framework = framework
        self.cwd = cwd
        self.devices = devices or []
        self.output_limit = output_limit
        self.broken: str | None = None
        self.kernelspec = {"name": framework.kernel, "display_name": "in-process (tests/helpers.py)"}
        self.displays = SessionDisplays()
        self.namespace: dict[str, Any] = {"__name__": "__main__"}
        self.count = 0

    async def start(self) -> None:
        pass

    async def run_cell(self, code: str, timeout: float, *, last: bool = False) -> Any:
        import ast
        import contextlib
        import os
        import time
        import traceback

        from livecells.execute.kernels.iopub import OutputCollector
        from livecells.model.records import CellRecord

        self.count += 1
        collector = OutputCollector(self.output_limit, self.displays)
        filename = f"<cell {self.count}>"

        class Stream:
            def __init__(self, name: str) -> None:
                self.name = name

            def write(self, text: str) -> int:
                collector.handle("stream", {"name": self.name, "text": text})
                return len(text)

            def flush(self) -> None:
                pass

        def bundle(obj: Any, raw: bool = False) -> tuple[dict[str, Any], dict[str, Any]]:
            """The MIME bundle IPython makes of ``obj``, with binary data in base64 as a kernel sends it."""
            data, metadata = (dict(obj), {}) if raw else _FORMATTER.format(obj)
            data = {k: base64.b64encode(v).decode() if isinstance(v, bytes) else v for k, v in data.items()}
            return data, metadata

        def display(*objs: Any, raw: bool = False, metadata: Any = None, **_: Any) -> None:
            for obj in objs:
                data, formatted = bundle(obj, raw)
                # As IPython's display: metadata given as an argument is merged over the formatter's.
                collector.handle("display_data", {"data": data, "metadata": {**formatted, **(metadata or {})}})

        self.namespace["display"] = display
        started = time.perf_counter()
        status = "ok"
        here = os.getcwd()
        ipython_display = IPython.display.display
        try:
            os.chdir(self.cwd)
            IPython.display.display = display  # what ``from IPython.display import display`` gets
            with contextlib.redirect_stdout(Stream("stdout")), contextlib.redirect_stderr(Stream("stderr")):
                tree = ast.parse(code, filename)
                tail = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
                exec(compile(tree, filename, "exec"), self.namespace)
                if tail is not None:
                    value = eval(compile(ast.Expression(tail.value), filename, "eval"), self.namespace)
                    if value is not None:
                        data, metadata = bundle(value)
                        collector.handle(
                            "execute_result", {"data": data, "metadata": metadata, "execution_count": self.count}
                        )
        except BaseException as err:  # noqa: BLE001 - a cell's error, as a kernel reports it
            status = "error"
            frames = [f for f in traceback.extract_tb(err.__traceback__) if f.filename == filename]
            lineno = frames[-1].lineno if frames else getattr(err, "lineno", None)
            where = [f"Cell In[{self.count}], line {lineno}"] if lineno else []
            collector.handle("error", {
                "ename": type(err).__name__,
                "evalue": str(err),
                "traceback": [*where, f"{type(err).__name__}: {err}"],
            })
        finally:
            os.chdir(here)
            IPython.display.display = ipython_display
        return CellRecord(
            status=status,
            outputs=collector.outputs,
            time=time.perf_counter() - started,
            execution_count=self.count,
            error=collector.error,
        )

    async def probe(self) -> Probe:
        import platform

        # It "uses" the devices it was given, on a host of its own (see FAKE_HOST).
        return Probe(host=FAKE_HOST, python=platform.python_version(), gpu_used=bool(self.devices))

    async def shutdown(self) -> None:
        self.namespace.clear()


#: The host :class:`FakeKernels` report: a name no page shows by chance, where this machine's
#: may be ``ok`` or ``a`` ("ok" not in a page that says "ok" would fail for no fault).
FAKE_HOST = "fake-host-7f3c.example"


class FakeKernels:
    """An executor object (``livecells_executor``) for builds whose subject is policy, not kernels.

    Its scheduler is livecells' own :class:`LocalScheduler` (its device leases, its order), over
    :class:`InProcessSession` in place of kernels; it needs none of the build's processes.
    ``jobs``: every session handed to it, build after build, as ``(docname, framework)``.
    """

    runs_locally = False

    def __init__(self) -> None:
        self.jobs: list[tuple[str, str]] = []

    def check(self, warm: Any) -> Any:
        from livecells.execute.executors import Capacity

        return Capacity()  # sessions lease this machine's GPUs, as local kernels would

    def scheduler(self, resources: Any) -> Any:
        from livecells.execute.scheduler import LocalScheduler

        fake = self
        gpus = resources.gpus

        class Recording(LocalScheduler):
            async def run(self, jobs: Any, on_done: Any, on_start: Any = None) -> None:
                fake.jobs.extend((job.plan.docname, job.plan.framework) for job in jobs)
                await super().run(jobs, on_done, on_start)

        return Recording(gpus, max(1, len(gpus)), prestart=1, session_class=InProcessSession)

    def take(self) -> list[tuple[str, str]]:
        """The sessions run since the last call, sorted."""
        jobs, self.jobs = sorted(self.jobs), []
        return jobs

    #: What to add to a conf.py so that a ``sphinx-build`` process uses fake kernels too.
    CONF = (
        "\nimport sys as _sys\n_sys.path.insert(0, {tests!r})\n"
        "from helpers import FakeKernels as _FakeKernels\n"
        "livecells_executor = _FakeKernels()\n"
        "livecells_fork_kernels = False\n"
    ).format(tests=str(TESTS))


class InProcessPool:
    """A second executor, small, for the tests of the executor seam: ``inprocess://N`` runs up to
    N sessions at once, each in an :class:`InProcessSession`, with a scheduler of its own (not
    livecells' :class:`LocalScheduler`): one asyncio task per session, bounded by a semaphore, on
    no device. ``runs``: per run of its scheduler, the most sessions that ran at once."""

    runs_locally = False
    runs: list[int] = []

    def __init__(self, address: str) -> None:
        self.address = address

    def size(self) -> int:

        size = self.address.partition("://")[2]
        if not size.isdigit() or int(size) < 1:
            raise ExecutorError(f"livecells_executor = {self.address!r}: the pool's size must be a number")
        return int(size)

    def check(self, warm: Any) -> Any:
        from livecells.execute.executors import Capacity

        size = self.size()
        return Capacity(gpus_per_session=0, description=f"an in-process pool of {size}")

    def scheduler(self, resources: Any) -> Any:
        import asyncio

        from livecells.execute.devices import Lease
        from livecells.execute.scheduler import run_session

        size = self.size()

        class Pool:
            async def run(self, jobs: Any, on_done: Any, on_start: Any = None) -> None:
                limit, running, most = asyncio.Semaphore(size), [0], [0]

                async def one(job: Any) -> None:
                    async with limit:
                        running[0] += 1
                        most[0] = max(most[0], running[0])
                        if on_start is not None:
                            on_start(job)
                        record = await run_session(job, Lease(()), session_factory=InProcessSession)
                        await asyncio.sleep(0.05)  # so that sessions overlap, as kernels would
                        running[0] -= 1
                    on_done(job, record)

                await asyncio.gather(*(one(job) for job in jobs))
                InProcessPool.runs.append(most[0])

        return Pool()


def install_plugin(name: str, tmp_path: Path) -> dict[str, str]:
    """Install ``tests/plugins/<name>`` as a user installs a package (pip, from a copy, into a
    folder of its own); the environment of a build that has it on its path. Without pip and
    setuptools in this venv (the matrix's have neither) it installs with the uv that
    ``LIVECELLS_UV`` names (the matrix sets it), and skips where there is none."""
    import importlib.util
    import os
    import subprocess
    import sys

    source = tmp_path / f"plugin-{name}"
    shutil.copytree(PLUGINS / name, source)  # the build writes beside it
    folder = tmp_path / f"installed-{name}"
    if importlib.util.find_spec("pip") and importlib.util.find_spec("setuptools"):
        command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation"]
    elif os.environ.get("LIVECELLS_UV"):
        command = [os.environ["LIVECELLS_UV"], "pip", "install", "--quiet", "--python", sys.executable, "--no-deps"]
    else:
        import pytest

        pytest.skip("installing a plug-in needs pip and setuptools in this venv, or LIVECELLS_UV (a uv)")
    subprocess.run([*command, "--target", str(folder), str(source)], check=True, cwd=tmp_path)
    path = os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def declared_entry_points() -> dict[str, dict[str, str]]:
    """livecells' own entry points by group, as its installed metadata declares them (the wheel's
    in the matrix, pyproject.toml's through an editable install): ``{group: {name: value}}``."""
    from importlib.metadata import distribution

    groups: dict[str, dict[str, str]] = {}
    for entry in distribution("livecells").entry_points:
        groups.setdefault(entry.group, {})[entry.name] = entry.value
    return groups
