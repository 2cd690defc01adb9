"""Timings as data in a build: the devices a session ran on, kept; drift warned of.

When a session ran, :func:`keep_devices` gives its record the other devices' timings the store
held (so a build on another machine loses none), and :func:`drift_problems` compares each of its
cells' time with the time stored for the same code on the same device: beyond
``livecells_drift_factor`` (and by more than ``livecells_drift_floor`` seconds) it is a
``livecells.timing`` warning at the cell, a problem of the session (report.txt, junit.xml) and
a line of the report's drift section.
"""

from __future__ import annotations

from pathlib import Path

from sphinx.util import logging

from livecells.config import WARNING_TYPE
from livecells.model.device_report import DeviceRows, device_chart, device_table
from livecells.model.plans import SessionPlan
from livecells.model.records import BuildOutcome, Problem, SessionRecord
from livecells.model.timings import drifts
from livecells.model.vocabulary import WarningSubtype
from livecells.pipeline.summary import relative

logger = logging.getLogger(__name__)


def keep_devices(record: SessionRecord, stored: SessionRecord | None) -> SessionRecord:
    """``record`` with the devices' timings that ``stored`` (the record it replaces) kept."""
    return record.with_devices(stored)


def drift_problems(
    plan: SessionPlan, record: SessionRecord, stored: SessionRecord | None, factor: float, floor: float
) -> list[Problem]:
    """Warn of each cell whose time drifted past ``factor`` from its stored time on the device
    ``record`` ran on (the same code: same position, same code hash); the problems."""
    now = record.timings()
    before = stored.all_devices().get(now.device) if stored is not None and now is not None else None
    if now is None or before is None:
        return []
    cells = {cell.index: cell for cell in plan.cells}
    problems = []
    for drift in drifts(before, now):
        cell = cells.get(drift.index)
        if cell is None or not drift.beyond(factor, floor):
            continue
        message = (
            f"live-cell [{plan.framework}]: run time drifted on {now.device}: {drift.describe()}; "
            f"livecells_drift_factor is {factor:g}"
        )
        location = cell.location()
        logger.warning(message, type=WARNING_TYPE, subtype=WarningSubtype.TIMING, location=location)
        problems.append(Problem(WarningSubtype.TIMING, location, message))
    return problems


def report_sections(outcome: BuildOutcome, devices: DeviceRows, root: str = "") -> list[str]:
    """report.txt's timing sections: the cells whose time drifted (located relative to ``root``,
    the source dir), and the device × page table of ``devices`` (the outcome's records')."""
    lines = []
    drifted = [
        (session, problem)
        for session in outcome.sessions.values()
        for problem in session.problems
        if problem.kind == WarningSubtype.TIMING
    ]
    if drifted:
        lines.append(f"== timing drift: {len(drifted)} cell(s) past livecells_drift_factor")
        lines += [
            f"{relative(problem.location, root)}: [{session.framework}] {problem.message}"
            for session, problem in drifted
        ]
        lines.append("")
    return lines + device_table(devices)


def write_chart(folder: Path, devices: DeviceRows) -> None:
    """``devices.svg`` beside report.txt: each session's time on each device the store holds
    (``devices``: the build's records' :func:`.device_rows`)."""
    chart = device_chart(devices) if device_table(devices) else None
    path = folder / "devices.svg"
    if chart is None:
        path.unlink(missing_ok=True)
    else:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text(chart, encoding="utf-8")
