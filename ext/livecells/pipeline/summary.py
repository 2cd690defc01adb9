"""What a build did, for people and for CI: located problems, a report file, JSON and JUnit XML.

Each (page, framework) session of the build has a :class:`~livecells.model.records.SessionOutcome`: where its results
came from (run now, the store, or the page's recorded outputs), its status and its problems,
each located at ``file:line`` (relative to the source dir). At the end of the build they are
written outside the published site (the doctree folder's ``livecells-summary/``, or
``livecells_summary_dir``): ``summary.json``, ``junit.xml`` (one test case per session) and
``report.txt`` with every problem's full traceback. Nothing here knows Sphinx.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from livecells.model.records import Problem, SessionOutcome
from livecells.model.text import strip_controls, xml_text
from livecells.model.vocabulary import Origin, SessionStatus


def write_summary(
    directory: str | os.PathLike[str],
    sessions: list[SessionOutcome],
    totals: dict[str, Any],
    unknown: Sequence[tuple[str, Problem]] = (),
    *,
    root: str = "",
    published: bool = False,
    sections: Sequence[str] = (),
) -> None:
    """Write summary.json, junit.xml and report.txt into ``directory``. ``unknown``: the cells of
    no known framework, by page (shown, not run: in no session). ``root``: the source dir, which
    the files' paths are relative to; ``published``: the folder is part of the published site,
    so no traceback and no host name goes into it; ``sections``: lines that end report.txt
    (the timings')."""
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    sessions = [_for_summary(s, root, published) for s in sessions]
    unknown = [(page, _problem(p, root, published)) for page, p in unknown]
    data = {
        "totals": totals,
        "sessions": [summary_entry(s) for s in sessions],
        "unknown_framework": [asdict(problem) for _, problem in unknown],
    }
    (folder / "summary.json").write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    (folder / "junit.xml").write_bytes(junit_xml(sessions, totals, unknown))
    lines = [
        f"livecells: the pages show {totals.get('unexpected_errors', 0)} cell error(s), "
        f"{totals.get('cells_not_run', 0)} cell(s) not run, {totals.get('cells_stale', 0)} stale; "
        f"{totals.get('failed', 0)} session(s) failed",
        "",
    ]
    if not any(session.problems for session in sessions) and not unknown:
        lines.append("no problems\n")
    for _, problem in unknown:
        lines += [f"== {problem.location}: {problem.kind}: {problem.message}", ""]
    for session in sessions:
        for problem in session.problems:
            lines.append(f"== {problem.location}: [{session.framework}] {problem.kind}: {problem.message}")
            if problem.traceback:
                lines.append(problem.traceback)
            lines.append("")
    lines += sections
    report = strip_controls("\n".join(lines))
    (folder / "report.txt").write_text(report, encoding="utf-8", errors="backslashreplace")


def relative(path: str, root: str) -> str:
    """``path`` (or ``path:line``) relative to ``root`` when it lies under it, in ``/`` form."""
    if not root or not os.path.isabs(path):
        return path
    file, colon, line = path.rpartition(":")
    if not (colon and line.isdigit()):
        file, line = path, ""
    inside = os.path.relpath(file, root)
    if inside.startswith(".."):
        return path
    return Path(inside).as_posix() + (f":{line}" if line else "")


def _problem(problem: Problem, root: str, published: bool) -> Problem:
    return replace(
        problem, location=relative(problem.location, root), traceback="" if published else problem.traceback
    )


def _for_summary(session: SessionOutcome, root: str, published: bool) -> SessionOutcome:
    """The session as the files say it: its paths relative to the source dir; published, without
    tracebacks or the host name."""
    return replace(
        session,
        source=relative(session.source, root),
        problems=[_problem(p, root, published) for p in session.problems],
        host="" if published else session.host,
    )


def summary_entry(session: SessionOutcome) -> dict[str, Any]:
    """One session in summary.json: where its results came from, its status, the record the page
    shows (none when its recorded outputs are shown), why it did not run, its problems."""
    shown = session.origin != Origin.RECORDED
    return {
        "page": session.page,
        "framework": session.framework,
        "source": session.source,
        "origin": str(session.origin),
        "status": str(session.status),
        "cells": session.record_cells if shown else 0,
        "duration": session.duration if shown else None,
        "device": session.device if shown else "",
        "date": session.date if shown else "",
        "reason": session.reason,
        # Its cells the page shows failed, not run, or with a stale stored result.
        "errors": session.errors,
        "not_run": session.not_run,
        "stale": session.stale_cells,
        "problems": [asdict(problem) for problem in session.problems],
    }


def junit_xml(
    sessions: list[SessionOutcome], totals: dict[str, Any], unknown: Sequence[tuple[str, Problem]] = ()
) -> bytes:
    """One test case per session: an error when it could not run, a failure when it has
    problems (the warnings: whether its results came from this build or the store); passed
    when the page shows its cells' results without one, skipped when it shows none by choice.
    And a failed one per cell of no known framework (``unknown``, by page): never run."""
    import xml.etree.ElementTree as ET  # only a build with sessions writes this

    failed = SessionStatus.FAILED
    failures = sum(1 for s in sessions if s.problems and s.status != failed)
    errors = sum(1 for s in sessions if s.status == failed)
    skipped = sum(1 for s in sessions if not s.problems and s.status != failed and s.origin == Origin.RECORDED)
    suite = ET.Element(
        "testsuite",
        name="livecells",
        tests=str(len(sessions) + len(unknown)),
        failures=str(failures + len(unknown)),
        errors=str(errors),
        skipped=str(skipped),
        time=f"{totals.get('seconds', 0.0):.3f}",
    )
    for session in sessions:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=session.page,
            name=session.framework,
            file=session.source,
            time=f"{session.duration or 0.0:.3f}",
        )
        if session.problems or session.status == SessionStatus.FAILED:
            tag = "error" if session.status == SessionStatus.FAILED else "failure"
            first = session.problems[0] if session.problems else None
            message = f"{first.location}: {first.message}" if first else session.reason or "failed"
            element = ET.SubElement(case, tag, message=message, type=first.kind if first else tag)
            element.text = "\n\n".join(
                f"{p.location}: {p.kind}: {p.message}\n{p.traceback}".rstrip() for p in session.problems
            )
        elif session.origin == Origin.RECORDED:
            why = f" ({session.reason})" if session.reason else ""
            ET.SubElement(case, "skipped", message=f"not run{why}: the page shows its recorded outputs")
        elif session.origin == Origin.STORE:
            out = ET.SubElement(case, "system-out")
            host = f" on {session.host}" if session.host else ""
            out.text = f"results from the store, made {session.date}{host}"
    for page, problem in unknown:
        case = ET.SubElement(suite, "testcase", classname=page, name=f"unknown framework ({problem.location})")
        ET.SubElement(case, "failure", message=f"{problem.location}: {problem.message}", type=problem.kind)
    for element in suite.iter():  # XML 1.0 holds no controls, U+FFFE/U+FFFF or lone surrogates
        element.text = None if element.text is None else xml_text(element.text)
        element.attrib = {name: xml_text(value) for name, value in element.attrib.items()}
    return ET.tostring(suite, encoding="utf-8", xml_declaration=True)
