"""Each executed session's problems, as Sphinx warnings located at the cell (or failing line).

A problem's kind is the warning's subtype (``livecells.error``, ``timeout``, ``crash``,
``raises``, ``stderr``, ``output``, ``html``, ``kernel``, ``sync``); the message carries the exception's
type and message, and the full traceback goes into the build's report (:mod:`.summary`).
"""

from __future__ import annotations

import re
from typing import Any

from sphinx.util import logging

from livecells.config import WARNING_TYPE
from livecells.model.plans import CellPlan, SessionPlan
from livecells.model.records import CellRecord, Problem, SessionOutcome, SessionRecord
from livecells.model.text import one_line, strip_ansi, strip_controls
from livecells.model.vocabulary import CellStatus, StderrMode, WarningMessage, WarningSubtype

logger = logging.getLogger(__name__)

#: The longest warning message (a 5 MB exception message stays in the page, cut there too).
MAX_WARNING = 1000


def output_problems(outputs: list[dict[str, Any]], allow_html: bool) -> list[WarningMessage]:
    """What was cut, refused or replaced in a cell's outputs."""
    found: list[WarningMessage] = []
    for output in outputs:
        said = []
        if output.get("truncated"):
            said.append(f"{output.get('name')} output truncated (livecells_output_limit)")
        if output.get("livecells_note"):
            said.append(output.get("text", "").strip("[]\n"))
        if output.get("livecells_refused"):
            said.append(output["livecells_refused"])
        if "\ufffd" in output.get("text", ""):
            said.append(f"{output.get('name')} held bytes that are not UTF-8 (shown as \ufffd)")
        found.extend(WarningMessage(WarningSubtype.OUTPUT, message) for message in said)
        html = output.get("data", {}).get("text/html", "")
        html = "".join(html) if isinstance(html, list) else html
        if not allow_html and "<script" in html.lower():
            message = "text/html output with <script> is shown as text (livecells_allow_html)"
            found.append(WarningMessage(WarningSubtype.HTML, message))
    return found


#: How a cell's writing to stderr is logged, by its stderr mode (MyST-NB's levels).
STDERR_LEVELS = {StderrMode.ERROR: "ERROR", StderrMode.SEVERE: "CRITICAL"}


def report_session(
    plan: SessionPlan,
    record: SessionRecord,
    allow_html: bool,
    shown: int | None = None,
    note: str = "",
    *,
    show_tb: bool = False,
) -> list[Problem]:
    """Warn about one executed session's problems, each located at its cell (or failing line):
    of its first ``shown`` cells (all by default), those the page shows this record for. A
    stored record's problems are the page's as much as this build's: ``note`` says it is one.
    ``show_tb`` (``livecells_show_tb``): a failing cell's warning carries its traceback."""
    problems: list[Problem] = []

    def problem(
        kind: WarningSubtype, at: CellPlan, line: int, message: str, traceback: str = "", level: str = "WARNING"
    ) -> None:
        message = one_line(message + (f" ({note})" if note else ""), MAX_WARNING)  # all of it: page, report
        # The cell's own file: an included file is blamed, not the page that includes it.
        location = at.location(line)
        logged = f"{message}\n{traceback.rstrip()}" if show_tb and traceback.strip() else message
        logger.log(level, logged, type=WARNING_TYPE, subtype=kind, location=location)
        problems.append(Problem(kind, location, message, traceback))

    if record.message and plan.cells:
        first = plan.cells[0]
        problem(WarningSubtype.KERNEL, first, first.line, f"{plan.name}: {record.message}")
        return problems
    if record.provenance.fallbacks and plan.cells:
        first = plan.cells[0]
        said = "; ".join(record.provenance.fallbacks)
        problem(WarningSubtype.KERNEL, first, first.line,
                f"{plan.name}: the kernel did without private parts of ipykernel or IPython that "
                f"livecells relies on (a release livecells does not know?): {said}")
    tag = f"live-cell [{plan.framework}]"
    # In order, as the page matches them (a stored record's indices may be another version's).
    for cell, result in zip(plan.cells[:shown], record.cells):
        status, ename, evalue = result.status, result.ename, result.evalue
        inner = result.error_line()
        line = cell.code_line + inner - 1 if inner else cell.line
        if status == CellStatus.ERROR and not cell.expects(ename):
            # IPython names a cell's code after a temporary file: "(1850221797.py, line 1)".
            evalue = re.sub(r" \(\d+\.py, line \d+\)", "", evalue)
            message = f"{ename}: {evalue}" if evalue.strip() else ename
            problem(WarningSubtype.ERROR, cell, line, f"{tag}: {message}", traceback_text(result))
        elif status == CellStatus.TIMEOUT:
            # Where the interrupt stopped it, when the kernel says.
            problem(WarningSubtype.TIMEOUT, cell, line, f"{tag}: {evalue}", traceback_text(result))
        elif status == CellStatus.DIED:
            problem(WarningSubtype.CRASH, cell, line, f"{tag}: {evalue}")
        elif status == CellStatus.OK and cell.raises is not None:
            expected = ", ".join(cell.raises) or "an error"
            message = f"{tag}: expected {expected} (:raises:), but the cell ran without error"
            problem(WarningSubtype.RAISES, cell, line, message)
        if result.sync_error:
            problem(WarningSubtype.SYNC, cell, cell.line,
                f"{tag}: the framework's sync code failed after the cell "
                f"({result.sync_error}); its time may leave out queued device work",
            )
        for warning in output_problems(result.outputs, allow_html):
            problem(warning.subtype, cell, cell.line, f"{tag}: {warning.message}")
        text = result.stderr_text().strip()
        if cell.stderr.reported and text and status != CellStatus.NOT_RUN and not result.unexpected(cell):
            level = STDERR_LEVELS.get(cell.stderr, "WARNING")
            message = f"{tag}: wrote to stderr: {text.splitlines()[0]}"
            problem(WarningSubtype.STDERR, cell, cell.line, message, level=level)
    return problems


def traceback_text(result: CellRecord) -> str:
    """A cell's error as plain text, for report.txt and ``livecells_show_tb``."""
    error = result.error or {}
    text = "\n".join(str(t) for t in error.get("traceback", [])) or f"{error.get('ename')}: {error.get('evalue')}"
    return strip_controls(strip_ansi(text))


def report_unshown(plan: SessionPlan, outcome: SessionOutcome, record: SessionRecord | None) -> list[Problem]:
    """Warn, once per session, of the cells the page shows not run or with a stale stored
    result (``outcome.shown``), located at the first of them: every verdict counts them, so
    ``-W`` must see them too. ``record``: the record the page shows, if any."""
    problems: list[Problem] = []
    shown, total = outcome.shown, len(plan.cells)
    position = {c.index: n for n, c in enumerate(plan.cells)}
    if shown.stale:
        why = f" ({outcome.reason})" if outcome.reason else ""
        message = (
            f"{plan.name}: {len(shown.stale)} of {total} cell(s) show a result stored for other "
            f"code, settings or :depends: files{why}"
        )
        problems.append(_warn(WarningSubtype.STALE, plan.cells[position[shown.stale[0]]], message))
    if shown.not_run:
        n = position[shown.not_run[0]]
        results = record.cells if record is not None else []
        if n < outcome.current:  # the run itself did not get to it, and says why
            why = re.sub(r"^not run: ", "", results[n].evalue) or "not run"
        else:
            why = "code changed since the stored run" if n < len(results) else "no stored result"
            why += f"; {outcome.reason}" if outcome.reason else ""
        message = f"{plan.name}: {len(shown.not_run)} of {total} cell(s) not run ({why})"
        problems.append(_warn(WarningSubtype.NOT_RUN, plan.cells[n], message))
    return problems


def _warn(kind: WarningSubtype, at: CellPlan, message: str) -> Problem:
    message = one_line(message, MAX_WARNING)
    location = at.location(at.line)
    logger.warning(message, type=WARNING_TYPE, subtype=kind, location=location)
    return Problem(kind, location, message)
