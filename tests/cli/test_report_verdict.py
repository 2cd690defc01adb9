"""The verdict read anywhere is the build's: for every policy of conf.py that changes what a
page shows as failed (the stderr modes, per cell and book-wide; expected errors, per cell and
book-wide; pages excluded or off; the book's execution mode; a policy changed after the run),
``python -m livecells report -c CONFDIR --fail-on ...`` exits as the build does.

Each row is a real ``sphinx-build -W`` process (its exit status), then the same book built again
(in this process) from the store with ``livecells_raise_on_error`` (its exit status: the verdict
without ``-W``), then the report, over the error class and over every class. The builds run on
:class:`helpers.FakeKernels`: the subject is policy, not kernels.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import sphinx

import paths
import timing
from helpers import FakeKernels, build_site, livecells_cli

EXT = str(paths.EXT)

CONF = """\
extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}
"""

QUIET = 'print("quiet")'
NOISY = 'import sys\nprint("NOISY", file=sys.stderr)'
BOOM = 'raise ValueError("BOOM")'


@dataclass(frozen=True)
class Book:
    """conf.py's policy lines, index's cell (code, options) and other's (code, options, its
    live-settings)."""

    conf: str = ""
    index: str = QUIET
    index_options: str = ""
    other: str = QUIET
    other_options: str = ""
    other_settings: str = ""

    def write(self, src: Path) -> None:
        src.mkdir(parents=True, exist_ok=True)
        (src / "conf.py").write_text(CONF + self.conf + "\n" + FakeKernels.CONF)
        (src / "index.rst").write_text(
            "Index\n=====\n\n.. toctree::\n\n   other\n\n" + cell(self.index, self.index_options)
        )
        settings = f".. live-settings::\n   {self.other_settings}\n\n" if self.other_settings else ""
        (src / "other.rst").write_text(
            "Other\n=====\n\n" + settings + cell(self.other, self.other_options)
            + "\n.. parsed-literal::\n   :class: output\n\n   RECORDED\n"
        )


def cell(code: str, options: str) -> str:
    lines = "".join(f"   {o}\n" for o in options.split(";") if o)
    body = "".join(f"   {line}\n" for line in code.splitlines())
    return f".. live-cell:: alpha\n{lines}\n{body}"


@dataclass(frozen=True)
class Row:
    #: Whether the verdict fails the book (what every row's builds and report must agree on).
    fails: bool
    book: Book
    #: Built first (not checked): the store the row's book is then built over.
    first: Book | None = None
    #: -W fails on a warning that is no failure of the verdict (a stderr mode that warns).
    warns_only: bool = False


ROWS = {
    # The stderr policy, book-wide and per cell.
    "stderr show": Row(False, Book('livecells_stderr = "show"', NOISY)),
    "stderr remove": Row(False, Book('livecells_stderr = "remove"', NOISY)),
    "stderr warn": Row(False, Book('livecells_stderr = "warn"', NOISY), warns_only=True),
    "stderr remove-warn": Row(False, Book('livecells_stderr = "remove-warn"', NOISY), warns_only=True),
    "stderr error": Row(True, Book('livecells_stderr = "error"', NOISY)),
    "stderr severe": Row(True, Book('livecells_stderr = "severe"', NOISY)),
    "a cell's show in an error book": Row(False, Book('livecells_stderr = "error"', NOISY, ":stderr: show")),
    "a cell's error in a show book": Row(True, Book('livecells_stderr = "show"', NOISY, ":stderr: error")),
    "stderr error after the run": Row(True, Book('livecells_stderr = "error"', NOISY), first=Book("", NOISY)),
    "stderr show after the run": Row(False, Book("", NOISY), first=Book('livecells_stderr = "error"', NOISY)),
    # Expected errors, per cell and book-wide.
    "an error": Row(True, Book(other=BOOM)),
    "an error :raises: expects": Row(False, Book(other=BOOM, other_options=":raises: ValueError")),
    "an error :raises: does not expect": Row(True, Book(other=BOOM, other_options=":raises: KeyError")),
    "allow errors": Row(False, Book("livecells_allow_errors = True", other=BOOM)),
    "allow errors after the run": Row(False, Book("livecells_allow_errors = True", other=BOOM), first=Book(other=BOOM)),
    # Pages that do not run by choice, and the book's execution mode.
    "excluded after its error was stored": Row(
        True, Book('livecells_execute_exclude = ["other"]', other=BOOM), first=Book(other=BOOM)
    ),
    "excluded before it ran": Row(False, Book('livecells_execute_exclude = ["other"]', other=BOOM)),
    "excluded and edited, in a cache build": Row(
        False,
        Book('livecells_execute = "cache"\nlivecells_execute_exclude = ["other"]', other='print("edited")'),
        first=Book(),
    ),
    "execute off after its error was stored": Row(
        False, Book(other=BOOM, other_settings=":execute: off"), first=Book(other=BOOM)
    ),
    "execute off in a cache build": Row(
        False, Book('livecells_execute = "cache"', other=BOOM, other_settings=":execute: off"), first=Book(other=BOOM)
    ),
    "the book off after an error was stored": Row(
        False, Book('livecells_execute = "off"', other=BOOM), first=Book(other=BOOM)
    ),
    "a cache build of a book never run": Row(True, Book('livecells_execute = "cache"')),
}


def sphinx_build(src: Path, *options: str) -> tuple[int, str]:
    env = {**os.environ, "PYTHONPATH": EXT, "CUDA_VISIBLE_DEVICES": ""}
    if "-W" in options and sphinx.version_info < (8, 1):  # before 8.1, -W stops at the first warning
        options = (*options, "--keep-going")
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", *options, str(src), str(src / "_build")],
        capture_output=True, text=True, env=env, timeout=timing.PROCESS,
    )
    return done.returncode, done.stdout + done.stderr


@pytest.mark.process
@pytest.mark.parametrize("name", list(ROWS))
def test_the_report_exits_as_the_build_does(tmp_path, name):
    row = ROWS[name]
    src = tmp_path / "book"
    if row.first is not None:
        row.first.write(src)
        build_site(src)
    row.book.write(src)
    strict, strict_log = sphinx_build(src, "-W")
    # In this process (a Python start-up less), from the store that build left.
    app, raised_log = build_site(src, freshenv=True, confoverrides={"livecells_raise_on_error": True})
    raised = app.statuscode
    summary = json.loads((src / "_build" / ".doctrees" / "livecells-summary" / "summary.json").read_text())
    errors = summary["totals"]["unexpected_errors"] + summary["totals"]["failed"]
    every = livecells_cli("report", "-s", str(src), "-c", str(src), "--fail-on", "error,not-run,stale")
    error = livecells_cli("report", "-s", str(src), "-c", str(src), "--fail-on", "error")
    said = f"-W: {strict_log}\nraise: {raised_log}\nreport: {every.stderr}\nreport --fail-on error: {error.stderr}"
    # The verdict without -W (livecells_raise_on_error) is the report's over every class...
    assert bool(raised) == bool(every.returncode), said
    # ...and its errors the report's over the error class.
    assert bool(errors) == bool(error.returncode), said
    # -W fails on every warning: those of the verdict's cells, and of a stderr mode that warns.
    if row.warns_only:
        assert strict and "[livecells.stderr]" in strict_log, said
    else:
        assert bool(strict) == bool(every.returncode), said
    assert bool(every.returncode) == row.fails, said


@pytest.mark.slow
def test_the_report_takes_the_builds_d_options(tmp_path):
    """A CI job that builds with ``-D livecells_stderr=error`` gives its report the same ``-D``:
    the verdict follows it, as the build's does."""
    src = tmp_path / "book"
    Book(index=NOISY).write(src)
    strict, log = sphinx_build(src, "-W", "-D", "livecells_stderr=error")
    assert strict, log

    def report(*options: str) -> int:
        return livecells_cli("report", "-s", str(src), "--fail-on", "error", *options).returncode

    assert report() == 0  # conf.py alone: stderr is shown, no failure
    assert report("-D", "livecells_stderr=error") == 1
    assert report("-D", "livecells_stderr=error", "-D", "livecells_execute=off") == 0
    wrong = livecells_cli("report", "-s", str(src), "-D", "livecells_stderr")
    assert wrong.returncode == 2 and "not setting=value" in wrong.stderr
