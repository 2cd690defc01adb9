"""The sphinx-autobuild recipe of docs/getting-started.rst, run for real in the book's own folder:
an edit builds once, not twice (the store's write must not count as an edit), its templates kept
warm (``livecells_keep_warm = "auto"``) adopted by the edit's build and ended with sphinx-autobuild."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import livecells
from livecells.kernel_side.reaper import process_start

import timing
from paths import DOCS

pytest.importorskip("sphinx_autobuild")

GETTING_STARTED = DOCS / "getting-started.rst"
EXT = str(Path(livecells.__file__).resolve().parents[1])  # the livecells under test
PAGE = "Book\n====\n\n.. live-cell:: alpha\n\n   x = {}\n   x\n"


def recipe_ignores() -> list[str]:
    """The ``--ignore`` and ``--re-ignore`` options of the documented command, as given."""
    line = next(
        line for line in GETTING_STARTED.read_text(encoding="utf-8").splitlines()
        if line.strip().startswith("$ sphinx-autobuild")
    )
    words = shlex.split(line.strip()[2:])
    options = []
    for n, word in enumerate(words):
        if word in {"--ignore", "--re-ignore"}:
            options += [word, words[n + 1]]
        elif word.startswith(("--ignore=", "--re-ignore=")):
            options.append(word)
    assert options, f"no --ignore or --re-ignore in {line!r}"
    return options


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(log: Path, pattern: str, count: int, within: float) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if len(re.findall(pattern, log.read_text(errors="replace"))) >= count:
            return True
        time.sleep(timing.POLL)
    return False


@pytest.mark.kernel
@pytest.mark.process
def test_the_documented_command_builds_once_per_edit_in_the_books_own_folder(tmp_path, no_kernel_left):
    book = tmp_path / "book"
    book.mkdir()
    (book / "conf.py").write_text(
        'extensions = ["livecells"]\nexclude_patterns = ["_build", "_livecells"]\n'
        'livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}\n',
        encoding="utf-8",
    )
    (book / "index.rst").write_text(PAGE.format(1), encoding="utf-8")
    log = tmp_path / "autobuild.log"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([EXT, os.environ.get("PYTHONPATH", "")])}
    command = [
        sys.executable, "-m", "sphinx_autobuild", ".", "_build/html",
        "--host", "127.0.0.1", "--port", str(free_port()), *recipe_ignores(),
    ]
    with log.open("w") as out:
        proc = subprocess.Popen(command, cwd=book, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True)
    try:
        assert wait_for(log, r"Waiting to detect changes", 1, timing.REACH), log.read_text()
        assert (book / "_livecells" / "index.json").exists()
        kept = [json.loads(p.read_text()) for p in book.glob("_build/**/livecells-warm/*.json")]
        time.sleep(timing.WATCHER_START)  # the watcher begins a little after it says so
        (book / "index.rst").write_text(PAGE.format(2), encoding="utf-8")
        assert wait_for(log, r"livecells: 1 session\(s\) run", 2, timing.REACH), log.read_text()
        time.sleep(timing.SPURIOUS_BUILD)  # time for a build that the store's write would start
        records = [json.loads(p.read_text()) for p in book.glob("_build/**/livecells-warm/*.json")]
        # The edit's build adopted the template the first one kept warm.
        same = [(r["pid"], r["start"]) for r in records] == [(r["pid"], r["start"]) for r in kept]
        assert len(records) == 1 and same and process_start(records[0]["pid"]) == records[0]["start"], records
    finally:
        os.killpg(proc.pid, signal.SIGINT)
        try:
            proc.wait(timeout=timing.EXIT)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # The template kept warm ends with sphinx-autobuild, its owner.
    deadline = time.monotonic() + timing.WARM_GONE
    while process_start(records[0]["pid"]) == records[0]["start"] and time.monotonic() < deadline:
        time.sleep(timing.POLL)
    assert process_start(records[0]["pid"]) != records[0]["start"], "the warm template outlived sphinx-autobuild"
    text = log.read_text(errors="replace")
    # The first build, and one for the edit: sphinx-autobuild's own line per build (Sphinx's
    # "Running Sphinx" is in the locale's language).
    assert len(re.findall(r"\[sphinx-autobuild\] \S*> \S+ -m sphinx build ", text)) == 2, text
    assert "_livecells" not in "".join(re.findall(r"Detected changes? \((.*?)\)", text)), text
