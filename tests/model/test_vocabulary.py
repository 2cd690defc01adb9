"""The vocabularies as types: statuses, origins, modes and warning subtypes are enums whose members
are their words, so the store's JSON and the warnings read as before, and the schema checks them."""

from __future__ import annotations

import hashlib
import json
import pickle
import shutil

import pytest

from livecells.config import read_config
from livecells.errors import StoreEntryError
from livecells.model.records import CellRecord, Probe, SessionRecord, session_status
from livecells.model.vocabulary import (
    STORED_SESSION_STATUSES,
    CellStatus,
    ExecuteMode,
    Origin,
    SessionStatus,
    StderrMode,
    WarningSubtype,
)
from livecells.store.codec import session_from_json, session_to_json
from livecells.store.schema import check_session

from helpers import build_site, cell_with, outputs, said, soup


def stored_session(status: object = "ok", **extra: object) -> dict:
    code = 'print("first")'
    cell = {
        "index": 0, "code_sha": hashlib.sha256(code.encode()).hexdigest()[:16], "status": "ok",
        "outputs": [{"output_type": "stream", "name": "stdout", "text": "STORED-FIRST\n"}],
        "time": 0.01, "execution_count": 1,
    }
    session = {
        "framework": "alpha", "key": "k", "environment": "e", "message": None, "duration": 0.1,
        "run_id": "stored-run", "cells": [cell],
        "provenance": {"date": "2026-01-01T00:00:00+00:00", "host": "box", "device": "CPU X"},
        **extra,
    }
    if status is not None:
        session["status"] = status
    return session


def test_members_are_their_words_in_json_formatting_and_pickles():
    for member in (CellStatus.NOT_RUN, SessionStatus.CRASHED, Origin.STORE, ExecuteMode.OFF, WarningSubtype.NOT_RUN):
        assert member == member.value and str(member) == member.value and f"{member}" == member.value
        assert json.dumps({member: member}) == json.dumps({member.value: member.value})
        assert pickle.loads(pickle.dumps(member)) is member
    assert "%s" % StderrMode.WARN == "warn" and "{}".format(Origin.RUN) == "run"


def test_a_record_writes_the_same_json_and_reads_back_typed():
    record = session_from_json(stored_session())
    assert type(record.status) is SessionStatus and type(record.cells[0].status) is CellStatus
    data = session_to_json(record)
    assert type(data["status"]) is str and type(data["cells"][0]["status"]) is str
    assert json.loads(json.dumps(data))["status"] == "ok"
    # A record made with plain strings (as older code and tests make them) writes the same.
    plain = SessionRecord("alpha", "k", "e", "ok", cells=[CellRecord("error")])  # type: ignore[arg-type]
    assert session_to_json(plain)["status"] == "ok" and session_to_json(plain)["cells"][0]["status"] == "error"


@pytest.mark.parametrize("status", STORED_SESSION_STATUSES)
def test_the_schema_accepts_every_stored_session_status(status):
    check_session(stored_session(status))


@pytest.mark.parametrize("status", ["bogus", "not-run", "OK", "died", ""])
def test_the_schema_rejects_an_unknown_session_status(status):
    with pytest.raises(StoreEntryError, match=r"^status: unknown status"):
        check_session(stored_session(status))


def test_a_session_without_a_status_gets_the_one_its_cells_say():
    check_session(stored_session(None))
    assert session_from_json(stored_session(None)).status == SessionStatus.OK
    cells = [CellRecord(CellStatus.OK), CellRecord(CellStatus.ERROR, expected=True)]
    assert session_status(cells) == SessionStatus.OK
    assert session_status([*cells, CellRecord(CellStatus.TIMEOUT)]) == SessionStatus.TIMEOUT
    assert session_status([CellRecord(CellStatus.TIMEOUT), CellRecord(CellStatus.DIED)]) == SessionStatus.CRASHED
    assert session_status(cells, "no kernel") == SessionStatus.FAILED


def test_an_unknown_stored_status_is_a_located_store_warning_and_nothing_else_changes(tmp_path, rootdir):
    src = tmp_path / "site"
    shutil.copytree(rootdir / "test-harden", src)
    store = src / "_livecells"
    store.mkdir()
    (store / "index.json").write_text(
        json.dumps({"format": 1, "page": "index", "sessions": {"alpha": stored_session("bogus")}})
    )
    (store / "other.json").write_text(
        json.dumps({"format": 1, "page": "other", "sessions": {"alpha": stored_session(
            "ok", cells=[{**stored_session()["cells"][0], "code_sha": hashlib.sha256(
                b'print("other page")').hexdigest()[:16], "outputs": [
                {"output_type": "stream", "name": "stdout", "text": "STORED-OTHER\n"}]}])}})
    )
    app, warnings = build_site(src, freshenv=True, confoverrides={"livecells_execute": "cache"})
    found = [w for w in warnings.splitlines() if "[livecells.store]" in w]
    assert len(found) == 1, warnings
    assert "index.rst" in found[0].split("WARNING")[0] and "index.json" in found[0]
    assert "status: unknown status 'bogus'" in found[0]
    assert "Traceback" not in warnings
    # The bad session is not shown; the other page's good one is.
    assert "STORED-FIRST" not in outputs(cell_with(soup(app.outdir / "index.html"), 'print("first")'))
    assert "STORED-OTHER" in outputs(cell_with(soup(app.outdir / "other.html"), "other page"))


def test_config_modes_are_typed_and_a_bad_one_is_the_default():
    messages: list[str] = []
    config = read_config({"execute": "cache", "device": "cpu"}, said(messages))
    assert config.execute is ExecuteMode.CACHE and not config.execute.runs and messages == []
    assert read_config({"execute": "often"}, said(messages)).execute is ExecuteMode.AUTO
    assert read_config({"execute": ["auto"]}, said(messages)).execute is ExecuteMode.AUTO
    assert len(messages) == 2 and "must be one of 'auto', 'force', 'cache', 'off'" in messages[0]


def test_a_probe_keeps_only_what_has_its_type():
    probe = Probe.from_json({
        "python": "3.11.1", "framework_version": 5, "gpu_used": "yes", "host": "box",
        "sync_errors": [[1, "ValueError: x"], ["2", "bad"], [3], None], "pid": 7,
    })
    assert probe == Probe(python="3.11.1", host="box", sync_errors=((1, "ValueError: x"),))
    assert Probe.from_json(["not", "a", "dict"]) == Probe()


def test_origin_names_the_report_label_and_the_timing_line_class():
    assert [o.label for o in Origin] == ["this build", "store", ""]
    assert Origin.RUN.css_class == "livecells-live" and Origin.STORE.css_class == "livecells-stored"
