"""``python -m livecells report`` and ``clear`` as processes against a book built with real
kernels: they read the book's conf.py (its ``livecells_store``; ``-c`` as sphinx-build's),
``clear`` of a page the store does not have is an error, and ``report --fail-on`` is a CI gate
over the verdict's classes (error, not-run, stale), stale read from what the pages show."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import livecells

import timing

EXT = str(Path(livecells.__file__).resolve().parents[1])  # the livecells under test

CONF = """print("conf.py speaks")  # not the command's output: report --json must stay JSON
extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}
livecells_store = "results"
"""
INDEX = """Book
====

.. toctree::

   other

.. live-cell:: alpha

   x = 1

.. live-cell:: alpha

   1 / 0
"""
OTHER = """Other
=====

.. live-cell:: alpha

   y = 2

.. live-cell:: alpha

   y * 3
"""

pytestmark = [pytest.mark.kernel, pytest.mark.process]


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([EXT, os.environ.get("PYTHONPATH", "")])}


def livecells_process(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "livecells", *args], capture_output=True, text=True, env=env(), cwd=cwd, timeout=timing.PROCESS
    )


@pytest.fixture(scope="module")
def built(tmp_path_factory, no_kernel_left_module) -> Path:
    """A book whose conf.py is in a folder of its own (``sphinx-build -c``) and keeps its store
    in ``results/``: index has a failing cell, other none; built once with real kernels."""
    root = tmp_path_factory.mktemp("cli-book")
    (root / "conf").mkdir()
    (root / "conf" / "conf.py").write_text(CONF, encoding="utf-8")
    (root / "src").mkdir()
    (root / "src" / "index.rst").write_text(INDEX, encoding="utf-8")
    (root / "src" / "other.rst").write_text(OTHER, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", "-c", str(root / "conf"), str(root / "src"), str(root / "out")],
        capture_output=True, text=True, env=env(), timeout=timing.PROCESS,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in (root / "src" / "results").glob("*.json")) == ["index.json", "other.json"]
    return root


@pytest.fixture
def book(built, tmp_path) -> Path:
    shutil.copytree(built, tmp_path / "book")
    return tmp_path / "book"


@pytest.fixture(scope="module")
def no_kernel_left_module():
    from conftest import kernel_processes

    before = {p.pid for p in kernel_processes()}
    yield
    left = [p for p in kernel_processes() if p.pid not in before]
    assert not left, left


def test_report_and_clear_read_the_store_that_conf_py_names(book):
    src, conf = str(book / "src"), str(book / "conf")
    report = livecells_process("report", "-s", src, "-c", conf, "--fail-on", "never")
    assert report.returncode == 0, report.stderr
    assert "index" in report.stdout and "other" in report.stdout and "2 session(s)" in report.stdout
    # From the source folder, with conf.py beside the pages: the same store.
    shutil.copy(book / "conf" / "conf.py", book / "src" / "conf.py")
    here = livecells_process("report", "--json", "--fail-on", "never", cwd=book / "src")
    assert here.returncode == 0, here.stderr
    assert {row["page"] for row in json.loads(here.stdout)} == {"index", "other"}
    assert "conf.py speaks" in here.stderr
    cleared = livecells_process("clear", "-s", src, "-c", conf, "other")
    assert cleared.returncode == 0 and "cleared other" in cleared.stdout, cleared.stderr
    assert not (book / "src" / "results" / "other.json").exists()
    missing = livecells_process("report", "-s", src, "-c", str(book))
    assert missing.returncode == 2 and "no conf.py" in missing.stderr


def test_clear_of_a_page_the_store_does_not_have_is_an_error_naming_what_it_has(book):
    src, conf = str(book / "src"), str(book / "conf")
    done = livecells_process("clear", "-s", src, "-c", conf, "othr", "index")
    assert done.returncode != 0
    assert "'othr'" in done.stderr and "the store has: index, other" in done.stderr
    assert "cleared index" in done.stdout  # the pages it has are cleared all the same
    framework = livecells_process("clear", "-s", src, "-c", conf, "other", "-f", "beta")
    assert framework.returncode != 0 and "'other [beta]'" in framework.stderr
    assert (book / "src" / "results" / "other.json").exists()


def test_report_fail_on_is_a_gate_over_errors_cells_not_run_and_stale_ones(book):
    src, conf = str(book / "src"), str(book / "conf")

    def gate(classes: str) -> subprocess.CompletedProcess:
        return livecells_process("report", "-s", src, "-c", conf, "--fail-on", classes)

    assert gate("stale").returncode == 0, gate("stale").stderr
    assert gate("not-run").returncode == 0
    failed = gate("error,not-run,stale")
    assert failed.returncode == 1 and "index [alpha]: 1 error" in failed.stderr, failed.stderr
    assert gate("error").returncode == 1
    # An edit to other's second cell: its first cell's stored result is still shown, made for
    # another session key (stale); the second has none (not run).
    page = book / "src" / "other.rst"
    page.write_text(page.read_text().replace("y * 3", "y * 4"))
    stale = gate("stale")
    assert stale.returncode == 1 and "other [alpha]: 1 stale" in stale.stderr, stale.stderr
    both = gate("not-run,stale")
    assert both.returncode == 1 and "other [alpha]: 1 not-run, 1 stale" in both.stderr, both.stderr
    assert "index [alpha]" not in both.stderr
    assert sorted(p.name for p in (book / "src").iterdir()) == ["index.rst", "other.rst", "results"]
    wrong = gate("errors,stale")
    assert wrong.returncode == 2 and "errors" in wrong.stderr
