"""The publishing verdict: what a build says about itself (its exit status under ``-W`` and
``livecells_raise_on_error``, summary.json, junit.xml, report.txt, ``python -m livecells
report``) counts every cell the page shows as failed, not run or stale, wherever its result
came from: this build, the store, or the page's recorded output.

The builds are real ``sphinx-build`` processes (their exit status is the subject), on
:class:`helpers.FakeKernels` (what runs is policy here, not kernels).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import sphinx

import paths
import timing
from helpers import FakeKernels, build_site, cell_with, livecells_cli, soup

EXT = str(paths.EXT)
ERROR_CELL = '\n.. live-cell:: alpha\n\n   raise RuntimeError("boom in the store")\n'


def sphinx_build(src: Path, *options: str) -> dict:
    """One ``sphinx-build`` of ``src`` on a machine without GPUs: its exit status, its output,
    and what it wrote under ``_build/.doctrees/livecells-summary``."""
    env = {**os.environ, "PYTHONPATH": EXT, "CUDA_VISIBLE_DEVICES": ""}
    if "-W" in options and sphinx.version_info < (8, 1):  # before 8.1, -W stops at the first warning
        options = (*options, "--keep-going")
    out = src / "_build"
    done = subprocess.run(
        [sys.executable, "-m", "sphinx", "-b", "html", *options, str(src), str(out)],
        capture_output=True, text=True, env=env, timeout=timing.PROCESS,
    )
    folder = out / ".doctrees" / "livecells-summary"
    return {
        "rc": done.returncode,
        "log": done.stdout + done.stderr,
        "summary": json.loads((folder / "summary.json").read_text()),
        "junit": ET.parse(folder / "junit.xml").getroot(),
        "report": (folder / "report.txt").read_text(),
        "page": soup(out / "index.html"),
    }


def site(tmp_path: Path, rootdir: Path, name: str, extra: str = "") -> Path:
    src = tmp_path / name
    shutil.copytree(rootdir / "test-fast", src)
    with open(src / "index.rst", "a") as page:
        page.write(extra)
    (src / "conf.py").write_text((src / "conf.py").read_text() + FakeKernels.CONF)
    return src


def line_of(path: Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def cases(junit: ET.Element) -> dict[str, list[str]]:
    return {case.get("name"): [child.tag for child in case] for case in junit.findall("testcase")}


@pytest.fixture(scope="module")
def builds(tmp_path_factory, rootdir) -> dict:
    """A page whose alpha session has an error: built, built again unchanged (from the store),
    again with livecells_raise_on_error; then a cell above the error edited and built for
    publishing on a machine without a GPU (device gpu, execute cache) and with execution off."""
    tmp = tmp_path_factory.mktemp("verdict")
    src = site(tmp, rootdir, "bad", ERROR_CELL)
    found: dict = {"src": src}
    found["first"] = sphinx_build(src, "-W")
    found["again"] = sphinx_build(src, "-W")
    found["cli"] = livecells_cli("report", "-s", str(src))
    found["raise"] = sphinx_build(src, "-D", "livecells_raise_on_error=1")
    page = src / "index.rst"
    page.write_text(page.read_text().replace('"alpha again"', '"alpha edited"'))
    found["gpu"] = sphinx_build(src, "-W", "-D", "livecells_device=gpu")
    found["cache"] = sphinx_build(src, "-W", "-D", "livecells_execute=cache")
    found["cache_raise"] = sphinx_build(src, "-D", "livecells_execute=cache", "-D", "livecells_raise_on_error=1")
    found["off"] = sphinx_build(src, "-W", "-D", "livecells_execute=off", "-D", "livecells_raise_on_error=1")
    return found


@pytest.mark.process
def test_a_stored_error_fails_the_build_again(builds):
    first, again = builds["first"], builds["again"]
    assert first["rc"] != 0 and again["rc"] != 0, again["log"]
    assert "0 session(s) run, 2 from the store" in again["log"]
    line = line_of(builds["src"] / "index.rst", "boom in the store")
    located = f"index.rst:{line}: WARNING: live-cell [alpha]: RuntimeError: boom in the store (stored result from"
    assert located in again["log"] and "[livecells.error]" in again["log"]
    assert "boom in the store" in cell_with(again["page"], "boom in the store").get_text()
    raised = builds["raise"]
    assert raised["rc"] != 0 and "1 cell error(s)" in raised["log"] and "livecells_raise_on_error" in raised["log"]
    # A failed verdict is not a crash: no traceback, no "report this to Sphinx".
    assert "Traceback" not in raised["log"] and "report this" not in raised["log"]


@pytest.mark.process
def test_summary_junit_report_and_cli_agree_on_a_stored_error(builds):
    for name in ("first", "again"):
        build = builds[name]
        assert build["summary"]["totals"]["unexpected_errors"] == 1, name
        alpha = next(s for s in build["summary"]["sessions"] if s["framework"] == "alpha")
        assert (alpha["errors"], alpha["not_run"], alpha["stale"]) == (1, 0, 0)
        beta = [] if name == "first" else ["system-out"]  # passed: run now, or stored
        assert cases(build["junit"]) == {"alpha": ["failure"], "beta": beta}, name
        assert build["junit"].get("failures") == "1" and build["junit"].get("skipped") == "0"
        assert "RuntimeError: boom in the store" in build["report"] and "no problems" not in build["report"]
    cli = builds["cli"]
    assert cli.returncode == 1 and "index [alpha]: 1 error" in cli.stderr, cli.stderr
    assert livecells_cli("report", "-s", str(builds["src"]), "--fail-on", "never").returncode == 0
    rows = json.loads(livecells_cli("report", "-s", str(builds["src"]), "--json").stdout)
    assert {(r["framework"], r["errors"], r["not_run"]) for r in rows} == {("alpha", 1, 0), ("beta", 0, 0)}


@pytest.mark.process
@pytest.mark.parametrize("name", ["gpu", "cache"])
def test_published_cells_that_did_not_run_are_counted_and_warned(builds, name):
    """After an edit, a build that runs nothing shows the edited cell and the ones below it not
    run, and the cell above it with a result stored for another version of the page."""
    build = builds[name]
    assert build["rc"] != 0, build["log"]
    assert "cells run on the CPU" not in build["log"]
    if name == "gpu":
        assert "no GPU found and livecells_device = 'gpu': no cell runs" in build["log"]
    src = builds["src"] / "index.rst"
    edited, above = line_of(src, '"alpha edited"'), line_of(src, 'NAME = "alpha"')
    # Located at the directive of the first cell concerned (its code is 2 lines below it).
    assert f"index.rst:{edited - 2}: WARNING: index [alpha]: 4 of 5 cell(s) not run (code changed" in build["log"]
    assert f"index.rst:{above - 2}: WARNING: index [alpha]: 1 of 5 cell(s) show a result stored" in build["log"]
    assert "[livecells.not-run]" in build["log"] and "[livecells.stale]" in build["log"]
    totals = build["summary"]["totals"]
    assert (totals["unexpected_errors"], totals["cells_not_run"], totals["cells_stale"]) == (0, 4, 1)
    assert "0 cell error(s), 4 cell(s) not run, 1 stale" in build["log"]
    assert cases(build["junit"])["alpha"] == ["failure"] and cases(build["junit"])["beta"] == ["system-out"]
    assert "not run" in build["report"] and "no problems" not in build["report"]
    cell = cell_with(build["page"], "alpha edited")
    assert "not run" in cell.get_text() and "alpha edited" not in " ".join(
        o.get_text() for o in cell.select(".livecells-output")
    )
    assert "made for other code" in cell_with(build["page"], 'NAME = "alpha"').get_text()
    assert builds["cache_raise"]["rc"] != 0 and "4 cell(s) not run, 1 stale" in builds["cache_raise"]["log"]


@pytest.mark.process
def test_execution_off_counts_cells_not_run_without_failing(builds):
    """Off shows every page's recorded outputs by choice: counted, skipped in JUnit, no failure."""
    off = builds["off"]
    assert off["rc"] == 0, off["log"]
    assert off["summary"]["totals"]["cells_not_run"] == 9
    assert set(map(tuple, cases(off["junit"]).values())) == {("skipped",)}


@pytest.mark.process
def test_a_clean_site_passes_from_the_store_too(tmp_path, rootdir):
    src = site(tmp_path, rootdir, "clean")
    assert sphinx_build(src, "-W")["rc"] == 0
    again = sphinx_build(src, "-W")
    assert again["rc"] == 0, again["log"]
    assert cases(again["junit"]) == {"alpha": ["system-out"], "beta": ["system-out"]}
    assert again["report"].splitlines()[-1] == "no problems"
    assert livecells_cli("report", "-s", str(src)).returncode == 0


def test_a_cell_of_no_known_framework_counts_as_not_run(tmp_path, rootdir):
    """It is shown "not run: unknown framework": the verdict counts it, as it counts any other."""
    src = site(tmp_path, rootdir, "unknown", '\n.. live-cell:: jax\n\n   print("jax only")\n')
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={"livecells_raise_on_error": True})
    assert app.statuscode == 1 and "0 cell error(s), 1 cell(s) not run" in warnings
    summary = json.loads((src / "_build" / "doctrees" / "livecells-summary" / "summary.json").read_text())
    assert summary["totals"]["cells_not_run"] == 1


def test_a_book_whose_only_cells_have_no_known_framework_still_has_a_verdict(tmp_path, rootdir):
    src = site(tmp_path, rootdir, "only-unknown")
    (src / "index.rst").write_text('Only jax\n========\n\n.. live-cell:: jax\n\n   print("jax only")\n')
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={"livecells_raise_on_error": True})
    assert app.statuscode == 1 and "0 cell error(s), 1 cell(s) not run" in warnings
    summary = json.loads((src / "_build" / "doctrees" / "livecells-summary" / "summary.json").read_text())
    assert summary["totals"]["cells_not_run"] == 1 and len(summary["unknown_framework"]) == 1


@pytest.mark.process
def test_a_cell_of_no_known_framework_fails_w_again_when_its_page_is_not_read_again(tmp_path, rootdir):
    """The page is not read again in an unchanged build: its warning (so -W), junit.xml and
    report.txt still count the cell, as summary.json did."""
    src = site(tmp_path, rootdir, "unknown-again", '\n.. live-cell:: jax\n\n   print("jax only")\n')
    line = line_of(src / "index.rst", "live-cell:: jax")
    for build in (sphinx_build(src, "-W"), sphinx_build(src, "-W")):
        assert build["rc"] != 0, build["log"]
        assert build["log"].count(
            f"index.rst:{line}: WARNING: live-cell: unknown framework 'jax' (livecells_frameworks has alpha, beta)"
        ) == 1, build["log"]
        assert build["summary"]["totals"]["cells_not_run"] == 1
        assert build["junit"].get("failures") == "1" and "no problems" not in build["report"]
        assert "unknown framework 'jax'" in build["report"]


@pytest.mark.slow
def test_a_stored_error_is_warned_at_its_cell_after_other_cells_moved_it(tmp_path, rootdir):
    """The page matches a stored session's cells in order: a cell of another framework added
    above moves the stored error's cell (its index on the page), and the warning follows it."""
    src = site(tmp_path, rootdir, "moved", ERROR_CELL)
    kernels = FakeKernels()
    build_site(src, kernels=kernels)
    page = src / "index.rst"
    page.write_text(page.read_text().replace("Fast\n====\n", 'Fast\n====\n\n.. live-cell:: beta\n\n   "new"\n', 1))
    _, warnings = build_site(src, kernels=kernels, confoverrides={"livecells_execute": "cache"})
    line = line_of(page, "boom in the store")
    assert f"index.rst:{line}: WARNING: live-cell [alpha]: RuntimeError: boom in the store (stored" in warnings
