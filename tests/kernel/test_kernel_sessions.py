"""Bad cells, hung cells, dying kernels, hostile output and bad configuration (interrupted builds:
test_processes)."""

from __future__ import annotations

import json
import re
import shutil
import xml.etree.ElementTree as ET
from io import StringIO
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp

from livecells.execute.kernels.session import KernelSession

from conftest import kernel_processes
from helpers import FakeKernels, build_site, cell_with, one_page_book, outputs, soup

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def bad(tmp_path_factory, rootdir):
    """One build of the bad-cells root, without -W: it must finish.

    The kernel that ignores its interrupt is stopped 4 s after it (10 s in a build): the same
    path, a shorter wait; a kernel that answers its interrupt does so within milliseconds."""
    src = tmp_path_factory.mktemp("bad") / "src"
    shutil.copytree(rootdir / "test-bad", src)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(KernelSession, "interrupt_grace", 4.0)
        app, warnings = build_site(src)  # no exception: the build goes on
    return {
        "src": src,
        "out": app.outdir,
        "summary": Path(app.doctreedir) / "livecells-summary",
        "warnings": warnings,
        "state": app.env.livecells_outcome,
        "kernels_left": kernel_processes(),
    }


def line_of(path: Path, text: str) -> int:
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


EXPECTED = [
    # (page, text on the line the warning must point at, warning subtype)
    ("index", "def broken(:", "error"),
    ("index", 'raise ValueError("bad value in cell")', "error"),
    ("index", "raise SystemExit(3)", None),  # IPython shows no frame for it: the cell's line
    ("index", "raise KeyboardInterrupt", "error"),
    ("index", "time.sleep(60)", "timeout"),
    ("index", ':raises: ZeroDivisionError', None),
    ("index", "1 / 0", "error"),
    ("index", 'input("your name? ")', "error"),
    ("index", ".. live-cell:: jax", "config"),
    ("index", 'print("no such kernelspec")', None),
    ("index", 'print("framework not installed")', None),
    ("crash", "os._exit(7)", None),  # a dead kernel cannot say which line: the cell's line
    ("crash", "ctypes.string_at(0)", None),
    ("hostile", 'print("x" * 5_000_000)', None),
    ("hostile", 'os.write(1, b"bad bytes', None),
    ("hostile", "display(HTML(", None),
    ("hostile", 'display({"image/png"', None),
    ("hostile", "red warning text", None),
    ("hostile", "time.sleep(60)", None),  # ignores the interrupt: no traceback, the cell's line
]


def _location_lines(bad, page: str) -> set[int]:
    pattern = rf"{re.escape(str(bad['src'] / page))}\.rst:(\d+): (?:WARNING|ERROR)"
    return {int(n) for n in re.findall(pattern, bad["warnings"])}


@pytest.mark.kernel
def test_every_bad_cell_has_its_own_located_message(bad):
    found = {page: _location_lines(bad, page) for page in ("index", "crash", "hostile")}
    used = set()
    for page, text, subtype in EXPECTED:
        path = bad["src"] / f"{page}.rst"
        line = line_of(path, text)
        # The message points at the failing line, or at the cell's directive just above it.
        directive = max(
            n for n, row in enumerate(path.read_text().splitlines(), 1) if n <= line and ".. live-cell::" in row
        )
        candidates = {line, directive, directive + 1, directive + 2, directive + 3} & found[page]
        assert candidates - used, f"no located message for {page}:{line} ({text})"
        used.add((page, min(candidates - used)))
        if subtype:
            assert re.search(rf"{page}\.rst:{line}: WARNING: .*\[livecells\.{subtype}\]", bad["warnings"]), text
    # The bad option value and the empty cell are located too.
    index = bad["src"] / "index.rst"
    assert line_of(index, ":timeout: soon") - 1 in found["index"]
    assert len({(p, n) for p, n in used}) >= 17


@pytest.mark.kernel
def test_messages_carry_the_exception_type_and_message(bad):
    warnings = bad["warnings"]
    assert "ValueError: bad value in cell [livecells.error]" in warnings
    assert "the kernel exited with status 7 [livecells.crash]" in warnings
    assert "the kernel died of SIGSEGV [livecells.crash]" in warnings
    assert "no kernelspec named 'no-such-kernelspec'" in warnings
    assert "not_an_installed_module not installed" in warnings
    assert "Traceback (most recent call last)" not in warnings  # tracebacks go to the report


@pytest.mark.kernel
def test_later_cells_still_run_after_errors_and_timeouts(bad):
    page = soup(bad["out"] / "index.html")
    assert "AFTER-TIMEOUT still runs, x = 1" in outputs(cell_with(page, "AFTER-TIMEOUT"))
    assert "SystemExit: 3" in outputs(cell_with(page, "raise SystemExit"))


@pytest.mark.kernel
def test_a_dying_kernel_is_reported_in_the_page_and_the_rest_not_run(bad):
    page = soup(bad["out"] / "crash.html")
    assert "the kernel exited with status 7" in outputs(cell_with(page, "os._exit(7)"))
    after = cell_with(page, "NEVER-RUN-AFTER-EXIT")
    assert "NEVER-RUN-AFTER-EXIT" not in outputs(after)
    assert "not run: the kernel exited with status 7" in after.get_text()
    assert "SIGSEGV" in outputs(cell_with(page, "ctypes.string_at(0)"))
    stubborn = cell_with(soup(bad["out"] / "hostile.html"), "NEVER-RUN-AFTER-STUBBORN")
    assert "ignored the interrupt" in stubborn.get_text()


@pytest.mark.kernel
def test_the_good_page_keeps_its_live_output(bad):
    page = soup(bad["out"] / "good.html")
    assert "GOOD-PAGE-LIVE 42" in outputs(cell_with(page, "GOOD-PAGE-LIVE"))


@pytest.mark.kernel
def test_no_raw_ansi_or_script_in_html_and_floods_stay_small(bad):
    for html_file in Path(bad["out"]).glob("*.html"):
        html = html_file.read_text()
        assert "\x1b" not in html, html_file
        assert "<script>alert" not in html, html_file
    assert (Path(bad["out"]) / "hostile.html").stat().st_size < 200_000
    assert (Path(bad["src"]) / "_livecells" / "hostile.json").stat().st_size < 200_000
    hostile = soup(bad["out"] / "hostile.html")
    assert "Output truncated" in cell_with(hostile, "5_000_000").get_text()
    assert "bad bytes: \ufffd\ufffd end" in outputs(cell_with(hostile, "bad bytes"))
    assert "left out" in outputs(cell_with(hostile, "image/png"))
    error = cell_with(soup(bad["out"] / "index.html"), "bad value in cell")
    assert error.select("span.ansi-red-fg"), "tracebacks keep their colours as classes"


@pytest.mark.kernel
def test_unknown_framework_and_missing_kernel_cells_say_why(bad):
    page = soup(bad["out"] / "index.html")
    assert "not run: unknown framework (jax)" in cell_with(page, "unknown framework").get_text()
    assert "no kernelspec named" in cell_with(page, "no such kernelspec").get_text()


@pytest.mark.kernel
def test_machine_readable_summary(bad):
    folder = bad["summary"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["totals"]["run"] == 6
    suite = ET.parse(folder / "junit.xml").getroot()
    cases = suite.findall("testcase")
    assert len(cases) == 9  # 8 sessions, and the cell of no known framework
    failing = {(c.get("classname"), c.get("name")) for c in cases if c.find("failure") is not None}
    assert ("crash", "alpha") in failing and ("good", "alpha") not in failing
    assert any(name.startswith("unknown framework (") for _, name in failing)
    errors = {(c.get("classname"), c.get("name")) for c in cases if c.find("error") is not None}
    assert ("index", "gamma") in errors
    message = next(c for c in cases if c.get("classname") == "crash").find("failure").get("message")
    assert re.search(r"crash\.rst:\d+: ", message)
    report = (folder / "report.txt").read_text()
    assert "ValueError: bad value in cell" in report and "Traceback" in report


@pytest.mark.kernel
def test_a_kernel_that_aborts_after_an_error_still_runs_the_next_cells(tmp_path, monkeypatch):
    """ipykernel aborts the execute requests that reach it just after a cell's error (all of
    them for ``stop_on_error_timeout``, 0 s by default: a race a loaded machine loses, which
    left a cell after a timed-out one empty in the matrix). livecells runs every cell whatever
    the one before did, so it asks for no abort; here the window is 5 s, as a user may set it."""
    ipython_dir = tmp_path / "ipython"
    (ipython_dir / "profile_default").mkdir(parents=True)
    (ipython_dir / "profile_default" / "ipython_kernel_config.py").write_text(
        "c.IPythonKernel.stop_on_error_timeout = 5.0\n"
    )
    monkeypatch.setenv("IPYTHONDIR", str(ipython_dir))
    src = one_page_book(
        tmp_path, 'extensions = ["livecells"]\nlivecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}\n',
        "T\n=\n\n.. live-cell:: alpha\n   :raises: ZeroDivisionError\n\n   1 / 0\n\n"
        ".. live-cell:: alpha\n   :timeout: 2\n\n   import time\n   time.sleep(60)\n\n"
        ".. live-cell:: alpha\n\n   print('RUNS AFTER THE ERROR AND THE TIMEOUT')\n"
    )
    app, warnings = build_site(src)
    page = soup(Path(app.outdir) / "index.html")
    assert "RUNS AFTER THE ERROR AND THE TIMEOUT" in outputs(cell_with(page, "RUNS AFTER")), warnings
    assert "did not finish within 2 s" in warnings and "aborted" not in warnings.lower()
    (session,) = json.loads((src / "_livecells" / "index.json").read_text())["sessions"].values()
    assert session["cells"][0]["time"] is not None  # the error cell's time: its request not aborted


@pytest.mark.kernel
def test_no_kernel_outlives_the_bad_build(bad):
    assert bad["kernels_left"] == []


def test_raise_on_error_fails_the_build_after_storing(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-fast", src)
    with open(src / "index.rst", "a") as page:
        page.write("\n.. live-cell:: alpha\n\n   raise RuntimeError('boom')\n")
    # The build's policy is the subject: its sessions run on FakeKernels.
    overrides = {"livecells_raise_on_error": True, "livecells_executor": FakeKernels()}
    app = SphinxTestApp("html", srcdir=src, confoverrides=overrides, warning=(warnings := StringIO()))
    try:
        app.build()
    finally:
        app.cleanup()
    assert app.statuscode == 1 and "1 cell error" in warnings.getvalue()
    stored = json.loads((src / "_livecells" / "index.json").read_text())
    assert set(stored["sessions"]) == {"alpha", "beta"}


@pytest.mark.kernel
def test_a_private_part_not_as_livecells_knows_it_is_a_located_kernel_warning(tmp_path, monkeypatch):
    """Here a startup file takes the display publisher's ``register_hook`` (as a release of
    ipykernel that dropped it would): the cells still run and show their output, the build
    warns at the page's first cell, and the session's provenance keeps what the kernel did."""
    startup = tmp_path / "ipython" / "profile_default" / "startup"
    startup.mkdir(parents=True)
    (startup / "00-drop.py").write_text("get_ipython().display_pub.register_hook = None\n")
    monkeypatch.setenv("IPYTHONDIR", str(tmp_path / "ipython"))
    src = one_page_book(
        tmp_path, 'extensions = ["livecells"]\nlivecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}\n',
        "T\n=\n\nText.\n\n.. live-cell:: alpha\n\n   print('STILL RUNS')\n"
    )
    app, warnings = build_site(src)
    assert "STILL RUNS" in outputs(cell_with(soup(Path(app.outdir) / "index.html"), "STILL RUNS"))
    (line,) = [w for w in warnings.splitlines() if "[livecells.kernel]" in w]
    assert "index.rst:6:" in line and "display publisher has no register_hook" in line, warnings
    (session,) = json.loads((src / "_livecells" / "index.json").read_text())["sessions"].values()
    (kept,) = session["provenance"]["fallbacks"]
    assert "register_hook" in kept
