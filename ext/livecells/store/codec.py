"""The one place records become JSON, and JSON becomes records.

:func:`session_to_json` is what a store file holds for a session; :func:`session_from_json`
reads back what :func:`~livecells.store.schema.check_session` accepted (a key may be missing, in
a hand-written or older file: it gets its default; provenance keys livecells does not know are
kept, and written back unchanged). :func:`repaired` makes a just-executed record fit to store
and show. Nothing here knows Sphinx.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from livecells.model.records import CellRecord, Provenance, SessionRecord, session_status
from livecells.model.timings import CellTiming, DeviceTimings
from livecells.model.vocabulary import CellStatus, SessionStatus
from livecells.store.schema import repair_session

_CELL_KEYS = ("status", "outputs", "time", "execution_count")
_PROVENANCE_FIELDS = tuple(f.name for f in dataclasses.fields(Provenance) if f.name != "extra")


def session_to_json(record: SessionRecord) -> dict[str, Any]:
    """The store's JSON of a session record (plain data, as it is written to the file)."""
    provenance = {name: getattr(record.provenance, name) for name in _PROVENANCE_FIELDS}
    provenance["kernelspec"] = dict(record.provenance.kernelspec)
    provenance["fallbacks"] = list(record.provenance.fallbacks)
    if not provenance["fallbacks"]:  # the rule: a store file says what happened, not what did not
        del provenance["fallbacks"]
    provenance.update(record.provenance.extra)
    data: dict[str, Any] = {
        "framework": record.framework,
        "key": record.key,
        "environment": record.environment,
        "status": str(record.status),
        "message": record.message,
        "duration": record.duration,
        "cells": [cell_to_json(cell) for cell in record.cells],
        "provenance": provenance,
    }
    if record.run_id:
        data["run_id"] = record.run_id
    if record.floor is not None:
        data["floor"] = record.floor
        data["floor_samples"] = list(record.floor_samples)
    if record.devices:
        data["devices"] = {name: timings_to_json(t) for name, t in sorted(record.devices.items())}
    return data


def timings_to_json(timings: DeviceTimings) -> dict[str, Any]:
    """One device's timings, as a store keeps them beside the session's full record."""
    data = dataclasses.asdict(timings)
    cells = []
    for cell in timings.cells:
        entry: dict[str, Any] = {"index": cell.index, "code_sha": cell.code_sha, "time": cell.time, "ok": cell.ok}
        if cell.samples:
            entry["samples"] = list(cell.samples)
        cells.append(entry)
    data["cells"] = cells
    return data


def timings_from_json(data: dict[str, Any]) -> DeviceTimings:
    """What :func:`timings_to_json` wrote, checked by :func:`~.schema.check_session`."""
    cells = tuple(
        CellTiming(c["index"], c["code_sha"], c.get("time"), tuple(c.get("samples") or ()), c.get("ok") is not False)
        for c in data.get("cells") or []
    )
    known = {f.name for f in dataclasses.fields(DeviceTimings)} - {"cells"}
    return DeviceTimings(**{k: v for k, v in data.items() if k in known}, cells=cells)


def cell_to_json(cell: CellRecord) -> dict[str, Any]:
    data: dict[str, Any] = {
        "status": str(cell.status),
        "outputs": cell.outputs,
        "time": cell.time,
        "execution_count": cell.execution_count,
    }
    if cell.error:
        data["error"] = cell.error
    data["index"] = cell.index
    data["code_sha"] = cell.code_sha
    if cell.sync_error:
        data["sync_error"] = cell.sync_error
    if cell.expected:
        data["expected"] = True
    if cell.samples:
        data["samples"] = list(cell.samples)
    if cell.warmup:
        data["warmup"] = list(cell.warmup)
    return data


def session_from_json(data: dict[str, Any]) -> SessionRecord:
    """The record of a session's JSON, which :func:`check_session` has accepted (a key may be
    missing: a hand-written or older file; it gets its default)."""
    provenance = dict(data.get("provenance") or {})
    known = {name: provenance.pop(name) for name in _PROVENANCE_FIELDS if name in provenance}
    known["kernelspec"] = dict(known.get("kernelspec") or {})
    known["fallbacks"] = list(known.get("fallbacks") or [])
    for name in ("device_count", "devices_leased"):
        if known.get(name) is None:
            known.pop(name, None)
    cells = [cell_from_json(cell) for cell in data.get("cells") or []]
    status = data.get("status")
    return SessionRecord(
        framework=data.get("framework") or "",
        key=data.get("key") or "",
        environment=data.get("environment") or "",
        # A file without one (written by hand): what its cells say.
        status=SessionStatus(status) if status else session_status(cells, data.get("message")),
        cells=cells,
        provenance=Provenance(**known, extra=provenance),
        message=data.get("message"),
        duration=data.get("duration"),
        run_id=data.get("run_id") or "",
        floor=data.get("floor"),
        floor_samples=list(data.get("floor_samples") or []),
        devices={name: timings_from_json(t) for name, t in (data.get("devices") or {}).items()},
    )


def cell_from_json(data: dict[str, Any]) -> CellRecord:
    return CellRecord(
        status=CellStatus(data["status"]),
        outputs=list(data.get("outputs") or []),
        time=data.get("time"),
        execution_count=data.get("execution_count"),
        error=data.get("error") or None,
        index=data["index"],
        code_sha=data["code_sha"],
        sync_error=data.get("sync_error") or None,
        expected=data.get("expected") is True,
        samples=list(data.get("samples") or []),
        warmup=list(data.get("warmup") or []),
    )


def repaired(record: SessionRecord, limit: int) -> tuple[SessionRecord, list[str]]:
    """A just-executed record made fit to store and show (see :func:`repair_session`), and what
    was repaired."""
    data = session_to_json(record)
    problems = repair_session(data, limit)
    return session_from_json(data), problems
