"""Execution control: the book's stderr policy and allow-errors, tracebacks in the console,
pages excluded from execution and a page's own ``:execute:``.

What runs and what the verdict counts is policy: these builds run on :class:`helpers.FakeKernels`.
The last test runs real kernels, whose stderr (a file descriptor's too) and tracebacks are the
subject there.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path

import pytest

from helpers import FAKE_HOST, FakeKernels, build_site, cell_with, meta, outputs, soup

CONF = """\
extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}
livecells_timeout = 30
"""

INDEX = """\
Index
=====

.. toctree::

   other

.. live-cell:: alpha

   import sys
   print("QUIET-OUT")
   print("NOISY-ERR", file=sys.stderr)

.. live-cell:: alpha
   :stderr: show

   print("SHOWN-ERR", file=sys.stderr)

.. live-cell:: alpha

   def inner():
       raise ValueError("BOOM-VALUE")
   inner()

.. live-cell:: alpha

   print("CLEAN")
"""

OTHER = """\
Other
=====

.. live-cell:: alpha

   print("OTHER-RAN", 6 * 7)

.. parsed-literal::
   :class: output

   RECORDED-OTHER
"""


def make_site(root: Path, conf: str = "", index: str = INDEX, other: str = OTHER) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "conf.py").write_text(CONF + textwrap.dedent(conf))
    (root / "index.rst").write_text(index)
    (root / "other.rst").write_text(other)
    return root


def build(src: Path, kernels: FakeKernels, **overrides):
    app, warnings = build_site(
        src, kernels=kernels, confoverrides={f"livecells_{k}": v for k, v in overrides.items()}
    )
    return app.env.livecells_outcome, warnings, app


@pytest.fixture
def fake() -> FakeKernels:
    return FakeKernels()


def page(app, name: str = "index"):
    return soup(Path(app.outdir) / f"{name}.html")


def conf_line(src: Path, text: str) -> int:
    return next(n for n, line in enumerate((src / "conf.py").read_text().splitlines(), 1) if text in line)


# -- the stderr policy -------------------------------------------------------------------------


def test_stderr_remove_leaves_it_out_but_a_cells_own_option_wins(tmp_path, fake):
    src = make_site(tmp_path / "site", 'livecells_stderr = "remove"\n')
    outcome, warnings, app = build(src, fake)
    html = page(app)
    assert "QUIET-OUT" in outputs(cell_with(html, "QUIET-OUT"))
    assert "NOISY-ERR" not in outputs(cell_with(html, "QUIET-OUT"))  # removed, silently
    assert "SHOWN-ERR" in outputs(cell_with(html, "SHOWN-ERR"))  # :stderr: show overrides
    assert "[livecells.stderr]" not in warnings and outcome.failures() == 1  # the ValueError alone


def test_changing_the_stderr_policy_rewrites_the_pages_and_runs_nothing(tmp_path, fake):
    src = make_site(tmp_path / "site")
    _, _, app = build(src, fake)
    assert "NOISY-ERR" in outputs(cell_with(page(app), "QUIET-OUT")) and fake.take()
    _, warnings, app = build(src, fake, stderr="remove-warn")
    assert "NOISY-ERR" not in outputs(cell_with(page(app), "QUIET-OUT")) and fake.take() == []
    assert "wrote to stderr: NOISY-ERR (stored result from" in warnings


@pytest.mark.slow
@pytest.mark.parametrize(
    ("mode", "level", "shown"),
    [("warn", "WARNING", True), ("remove-warn", "WARNING", False), ("error", "ERROR", True), ("severe", "CRITICAL", True)],
)
def test_stderr_levels_are_logged_at_the_cell(tmp_path, fake, mode, level, shown):
    """MyST-NB's ``nb_output_stderr`` levels: each reported at the cell that wrote, at its level;
    ``error`` and ``severe`` fail the cell in the verdict, ``warn`` and ``remove-warn`` do not."""
    src = make_site(tmp_path / "site", f'livecells_stderr = "{mode}"\n')
    outcome, warnings, app = build(src, fake)
    line = next(n for n, text in enumerate(INDEX.splitlines(), 1) if "live-cell" in text)
    found = [w for w in warnings.splitlines() if "[livecells.stderr]" in w]
    assert len(found) == 1, warnings  # the cell with :stderr: show says nothing
    assert f"index.rst:{line}: {level}: live-cell [alpha]: wrote to stderr: NOISY-ERR" in found[0]
    assert ("NOISY-ERR" in outputs(cell_with(page(app), "QUIET-OUT"))) == shown
    session = outcome.session("index", "alpha")
    fails = mode in {"error", "severe"}
    assert session.shown.failed == ((0, 2) if fails else (2,))
    assert outcome.failures() == (2 if fails else 1)


def test_stderr_error_fails_the_summary_and_a_stored_build_again(tmp_path, fake):
    src = make_site(tmp_path / "site", 'livecells_stderr = "error"\nlivecells_summary_dir = "../report"\n')
    build(src, fake)
    outcome, warnings, _ = build(src, fake)  # from the store: the same verdict
    assert fake.take() == [("index", "alpha"), ("other", "alpha")]  # the first build only
    assert "ERROR: live-cell [alpha]: wrote to stderr: NOISY-ERR (stored result from" in warnings
    summary = json.loads((tmp_path / "report" / "summary.json").read_text())
    assert summary["totals"]["unexpected_errors"] == 2


# -- allow errors ------------------------------------------------------------------------------


@pytest.mark.slow
def test_allow_errors_shows_errors_everywhere_and_fails_nothing(tmp_path, fake):
    src = make_site(tmp_path / "site")
    outcome, warnings, _ = build(src, fake)
    assert outcome.failures() == 1 and "[livecells.error]" in warnings
    fake.take()
    outcome, warnings, app = build(src, fake, allow_errors=True)
    # What the stored status says changed: the sessions run again (as for a :raises: edit).
    assert fake.take() == [("index", "alpha"), ("other", "alpha")]
    assert outcome.failures() == 0 and "livecells" not in warnings, warnings  # no :raises: complaint either
    assert "BOOM-VALUE" in outputs(cell_with(page(app), "inner()"))
    record = app.env.livecells_outcome.session("index", "alpha")
    assert record.status == "ok" and record.shown.failed == ()


# -- show_tb -----------------------------------------------------------------------------------


def test_show_tb_follows_the_warning_with_the_traceback(tmp_path, fake):
    src = make_site(tmp_path / "site")
    _, quiet, _ = build(src, fake)
    assert "BOOM-VALUE" in quiet and "Traceback" not in quiet and 'raise ValueError' not in quiet
    _, loud, _ = build(src, fake, show_tb=True)  # from the store: the stored traceback
    at = loud.index("ValueError: BOOM-VALUE (stored result from")
    after = loud[at:].split("\n", 1)[1].split("[livecells", 1)[0]
    assert after.startswith("Cell In[3], line 2\nValueError: BOOM-VALUE")  # what the fake kernel gives


# -- bad values ---------------------------------------------------------------------------------


def test_bad_values_are_located_at_conf_py_and_fall_back(tmp_path, fake):
    conf = (
        'livecells_stderr = "loud"\nlivecells_allow_errors = "yes"\nlivecells_show_tb = 1\n'
        "livecells_execute_exclude = [3, 'other']\nlivecells_show_host = None\nlivecells_summary_dir = 7\n"
    )
    src = make_site(tmp_path / "site", conf)
    outcome, warnings, app = build(src, fake)
    for name in ("stderr", "allow_errors", "show_tb", "show_host", "summary_dir"):
        line = conf_line(src, f"livecells_{name} =")
        assert re.search(rf"conf\.py:{line}: WARNING: livecells_{name} = .*; using the default", warnings), name
    line = conf_line(src, "livecells_execute_exclude")
    assert f"conf.py:{line}: WARNING: livecells_execute_exclude: entry 1 3: not a non-empty string" in warnings
    assert "NOISY-ERR" in outputs(cell_with(page(app), "QUIET-OUT"))  # stderr: show
    assert ("other", "alpha") not in fake.take() and outcome.failures() == 1  # 'other' kept, excluded


def test_the_values_from_the_command_line(tmp_path, fake):
    """``-D`` gives strings: words for booleans, a comma list of patterns; a bad word is a
    warning that says "given with -D"."""
    src = make_site(tmp_path / "site")
    given = {"stderr": "remove-warn", "allow_errors": "yes", "execute_exclude": "nothing, oth*", "show_tb": "maybe"}
    outcome, warnings, app = build(src, fake, **given)
    assert fake.take() == [("index", "alpha")]  # other excluded; allow_errors: nothing fails
    assert "livecells_show_tb (given with -D) = 'maybe': must be True or False; using the default" in warnings
    assert "[livecells.stderr]" in warnings and "[livecells.error]" not in warnings
    assert outcome.failures() == 0


# -- excluded pages and a page's :execute: --------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("pattern", ["other", "other.rst", "oth*", "**/other.rst"])
def test_an_excluded_page_runs_nothing_and_shows_its_recorded_output(tmp_path, fake, pattern):
    src = make_site(tmp_path / "site")
    outcome, warnings, app = build(src, fake, execute_exclude=[pattern], raise_on_error=False)
    assert fake.take() == [("index", "alpha")]
    cell = cell_with(page(app, "other"), "OTHER-RAN")
    assert "RECORDED-OTHER" in outputs(cell)
    assert meta(cell) == [
        "recorded output, from the page's source (not run: the page is excluded from execution "
        "(livecells_execute_exclude))"
    ]
    assert "other.rst" not in warnings  # by choice: no "not run" warning, -W stays green
    assert outcome.failures() == 1  # index's ValueError alone


def test_an_excluded_page_shows_its_stored_results_even_when_forced(tmp_path, fake):
    src = make_site(tmp_path / "site")
    build(src, fake)
    fake.take()
    outcome, _, app = build(src, fake, execute="force", execute_exclude=["other"])
    assert fake.take() == [("index", "alpha")]
    cell = cell_with(page(app, "other"), "OTHER-RAN")
    assert "OTHER-RAN 42" in outputs(cell) and "RECORDED-OTHER" not in outputs(cell)
    assert any("stored result from" in line for line in meta(cell))
    assert outcome.session("other", "alpha").reason == (
        "the page is excluded from execution (livecells_execute_exclude)"
    )


@pytest.mark.slow
def test_a_page_may_say_execute_off_or_force(tmp_path, fake):
    settings = ".. live-settings::\n   :execute: {}\n\n"
    src = make_site(tmp_path / "site", other=OTHER.replace("Other\n=====\n\n", "Other\n=====\n\n" + settings.format("off")))
    outcome, warnings, app = build(src, fake)
    assert fake.take() == [("index", "alpha")]
    cell = cell_with(page(app, "other"), "OTHER-RAN")
    assert "RECORDED-OTHER" in outputs(cell) and "other.rst" not in warnings
    assert "live-settings say :execute: off" in meta(cell)[0]
    assert outcome.failures() == 1  # not run by choice fails nothing; index's error does
    (src / "other.rst").write_text(OTHER.replace("Other\n=====\n\n", "Other\n=====\n\n" + settings.format("force")))
    build(src, fake)
    assert fake.take() == [("other", "alpha")]
    build(src, fake)  # unchanged: only the forced page runs again
    assert fake.take() == [("other", "alpha")]
    build(src, fake, execute="cache")  # a build that runs nothing runs none of its pages
    assert fake.take() == []


def test_a_bad_execute_option_is_a_located_warning(tmp_path, fake):
    src = make_site(tmp_path / "site", other=OTHER.replace("Other\n=====\n\n", "Other\n=====\n\n.. live-settings::\n   :execute: sometimes\n\n"))
    _, warnings, _ = build(src, fake)
    # docutils' own error, as for any bad option: the directive is left out, the page runs.
    assert re.search(r'other\.rst:4: ERROR: Error in "live-settings" directive:\s+invalid option value: '
                     r'\(option: "execute"; value: \'sometimes\'\)', warnings), warnings
    assert fake.take() == [("index", "alpha"), ("other", "alpha")]


def test_a_myst_page_may_say_execute_off_and_its_stderr_mode(tmp_path, fake):
    """The same options in MyST Markdown: ``:execute: off`` in ``{live-settings}``, ``:stderr:``
    levels in ``{live-cell}``, their warnings located at the page's lines."""
    src = make_site(tmp_path / "site", 'extensions = ["myst_parser", "livecells"]\n')
    (src / "other.rst").unlink()
    (src / "index.rst").write_text("Index\n=====\n\n.. toctree::\n\n   off\n   loud\n")
    (src / "off.md").write_text(
        "# Off\n\n```{live-settings}\n:execute: off\n```\n\n```{live-cell} alpha\nprint('MD-OFF')\n```\n\n"
        "```output\nMD-RECORDED\n```\n"
    )
    (src / "loud.md").write_text(
        "# Loud\n\n```{live-cell} alpha\n:stderr: remove-warn\nimport sys\nprint('MD-ERR', file=sys.stderr)\n"
        "print('MD-OUT')\n```\n"
    )
    outcome, warnings, app = build(src, fake)
    assert fake.take() == [("loud", "alpha")]
    cell = cell_with(page(app, "off"), "MD-OFF")
    assert "MD-RECORDED" in outputs(cell) and "live-settings say :execute: off" in meta(cell)[0]
    assert "loud.md:3: WARNING: live-cell [alpha]: wrote to stderr: MD-ERR [livecells.stderr]" in warnings
    assert "MD-ERR" not in outputs(cell_with(page(app, "loud"), "MD-OUT"))
    assert "off.md" not in warnings and outcome.failures() == 0


# -- builders that show no outputs ----------------------------------------------------------------


class Watched(FakeKernels):
    """Fake kernels that also count the build's capacity checks (a local executor's check may
    start the frameworks' templates)."""

    def __init__(self) -> None:
        super().__init__()
        self.checks = 0

    def check(self, warm):
        self.checks += 1
        return super().check(warm)


@pytest.mark.slow
@pytest.mark.parametrize("builder", ["linkcheck", "gettext", "changes"])
def test_builders_without_outputs_run_nothing(tmp_path, builder):
    src = make_site(tmp_path / "site")
    kernels = Watched()
    app, warnings = build_site(src, builder, kernels=kernels, confoverrides={"livecells_raise_on_error": True})
    assert kernels.take() == [] and kernels.checks == 0
    assert "livecells" not in warnings, warnings  # no "not run" for what such a build never shows
    assert not (Path(app.doctreedir) / "livecells-summary").exists()
    if builder == "gettext":
        return  # its doctrees are of another kind: an HTML build needs a folder of its own
    app, _ = build_site(src, "html", kernels=kernels)  # the same doctrees, then an HTML build
    assert kernels.take() == [("index", "alpha"), ("other", "alpha")] and kernels.checks == 1


# -- the build's own files: outside the site, paths relative ---------------------------------------


@pytest.mark.slow
def test_summary_files_are_written_outside_the_site_with_relative_paths(tmp_path, fake):
    src = make_site(tmp_path / "site")
    _, _, app = build(src, fake)
    assert not list(Path(app.outdir).rglob("summary.json")) and not list(Path(app.outdir).rglob("report.txt"))
    folder = Path(app.doctreedir) / "livecells-summary"
    summary = json.loads((folder / "summary.json").read_text())
    line = next(n for n, text in enumerate(INDEX.splitlines(), 1) if "raise ValueError" in text)
    index = next(s for s in summary["sessions"] if s["page"] == "index")
    assert index["source"] == "index.rst" and index["problems"][0]["location"] == f"index.rst:{line}"
    assert str(src) not in (folder / "summary.json").read_text() + (folder / "junit.xml").read_text()
    assert "Cell In[3], line 2" in (folder / "report.txt").read_text()  # the traceback, for CI


@pytest.mark.slow
def test_a_summary_folder_inside_the_site_holds_no_traceback_and_no_host(tmp_path, fake):
    src = make_site(tmp_path / "site", 'livecells_summary_dir = "_build/html/_ci"\n')
    build(src, fake)
    _, _, app = build(src, fake)  # from the store: junit names where it ran, when not published
    folder = Path(app.outdir) / "_ci"
    report, junit = (folder / "report.txt").read_text(), (folder / "junit.xml").read_text()
    assert "ValueError: BOOM-VALUE" in report and "Cell In[3]" not in report + junit
    assert "results from the store, made " in junit and FAKE_HOST not in junit
    src2 = make_site(tmp_path / "site2", 'livecells_summary_dir = "../ci"\n')
    build(src2, fake)
    build(src2, fake)
    assert f"on {FAKE_HOST}" in (tmp_path / "ci" / "junit.xml").read_text()


# -- the host name --------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_host_is_named_only_when_the_book_says(tmp_path, fake):
    src = make_site(tmp_path / "site", other=".. live-report::\n\n" + OTHER)
    build(src, fake)
    _, _, app = build(src, fake)  # the stored results' lines say when and where they ran
    host = FAKE_HOST
    line = meta(cell_with(page(app), "CLEAN"))[0]
    assert "stored result from" in line and host not in line
    assert host not in page(app, "other").get_text()  # the report's table neither
    _, _, app = build(src, fake, show_host=True)
    assert meta(cell_with(page(app), "CLEAN"))[0].endswith(f" on {host}")
    assert f" on {host}" in page(app, "other").select_one("table.livecells-report").get_text()


# -- real kernels: their stderr (a file descriptor's too) and their tracebacks ---------------------


@pytest.mark.kernel
def test_real_kernel_stderr_error_and_show_tb(tmp_path, no_kernel_left):
    """A real kernel's stderr, written by Python and straight to file descriptor 2, is judged by
    the book's policy; a real IPython traceback follows its warning, without colour codes."""
    from io import StringIO

    from sphinx.testing.util import SphinxTestApp

    index = (
        "Real\n====\n\n.. live-cell:: alpha\n\n   import os, sys\n   os.write(2, b'FD-ERR\\n')\n\n"
        ".. live-cell:: alpha\n   :stderr: show\n\n   print('PY-ERR', file=sys.stderr)\n\n"
        ".. live-cell:: alpha\n\n   def inner():\n       raise ValueError('REAL-BOOM')\n   inner()\n\n"
        ".. live-cell:: alpha\n   :timeout: 1\n\n   import time\n   time.sleep(30)\n"
    )
    src = make_site(tmp_path / "site", 'livecells_stderr = "error"\nlivecells_show_tb = True\n', index, "Other\n=====\n")
    raw = StringIO()
    app = SphinxTestApp("html", srcdir=src, warning=raw)
    try:
        app.build()
    finally:
        app.cleanup()
    log = raw.getvalue()
    plain = re.sub(r"\x1b\[[0-9;]*m", "", log)  # Sphinx's own colours of its log lines
    assert "index.rst:4: ERROR: live-cell [alpha]: wrote to stderr: FD-ERR [livecells.stderr]" in plain
    assert "PY-ERR" not in plain  # its own :stderr: show
    line = next(n for n, text in enumerate(index.splitlines(), 1) if "raise ValueError" in text)
    at = plain.index(f"index.rst:{line}: WARNING: live-cell [alpha]: ValueError: REAL-BOOM")
    traceback = plain[at:].split("\n", 1)[1].split("[livecells.error]", 1)[0]
    assert "Traceback (most recent call last)" in traceback and "----> 3 inner()" in traceback
    assert "raise ValueError('REAL-BOOM')" in traceback and traceback.rstrip().endswith("ValueError: REAL-BOOM")
    # The kernel's traceback is coloured; the log's copy is not (Sphinx colours only its prefix).
    tb_part = log[log.index("Traceback (most recent call last)"):log.index("[livecells.error]")]
    assert "\x1b" not in tb_part
    # A timeout's warning is followed by where the interrupt stopped the cell.
    at = plain.index("[alpha]: the cell did not finish within 1 s")
    assert "----> 2 time.sleep(30)" in plain[at:].split("[livecells.timeout]", 1)[0], plain[at:]
    outcome = app.env.livecells_outcome
    assert outcome.session("index", "alpha").shown.failed == (0, 2, 3) and outcome.failures() == 3
