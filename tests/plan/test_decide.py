"""The policy of what runs (livecells.plan.decide), without Sphinx or kernels; and the one
staleness rule and error count of livecells.model.records."""

from __future__ import annotations

from dataclasses import replace

import pytest

from livecells.errors import StoreEntryError
from livecells.model.plans import CellPlan, PageSettings, SessionPlan
from livecells.model.records import (
    CellRecord,
    Provenance,
    SessionRecord,
    Verdict,
    current_count,
    verdict,
)
from livecells.model.vocabulary import Origin, SessionStatus, WarningMessage, WarningSubtype
from livecells.plan.decide import Decision, Environment, Mode, decide

from paths import DATA

ENV = Environment(digest="env-1")


def plan(*codes: str, gpus: int | None = None, raises: tuple[str, ...] | None = None) -> SessionPlan:
    cells = tuple(
        CellPlan(index=n, frameworks=("alpha",), code=code, line=n + 1, code_line=n + 2, source="page.rst", raises=raises)
        for n, code in enumerate(codes)
    )
    return SessionPlan("page", "alpha", "/src/page.rst", cells, PageSettings(gpus=gpus))


def record(session: SessionPlan, key: str = "k1", environment: str = "env-1", leased: int = 0) -> SessionRecord:
    cells = [CellRecord("ok", index=c.index, code_sha=c.code_sha) for c in session.cells]
    return SessionRecord("alpha", key, environment, "ok", cells, Provenance(devices_leased=leased))


def never() -> Environment:
    raise AssertionError("the environment is not needed for this answer")


@pytest.mark.parametrize(
    ("mode", "reason"),
    [
        (Mode("off"), "execution is off (livecells_execute = 'off')"),
        (Mode("cache"), "livecells_execute = 'cache' runs nothing"),
        (Mode("auto", "gpu", 0), "no GPU on this machine (livecells_device = 'gpu')"),
    ],
)
def test_modes_that_run_nothing_say_why_without_asking_the_environment(mode, reason):
    session = plan("x = 1")
    for stored in (None, record(session)):
        assert decide(session, "k1", stored, mode, never) == Decision(False, reason=reason)


def test_a_page_that_needs_more_gpus_than_a_session_can_lease_is_not_run_with_a_warning():
    decision = decide(plan("x = 1", gpus=2), "k1", None, Mode(gpu_slots=1), never)
    assert not decision.run and decision.reason == "the page needs 2 GPU(s); 1 are available"
    assert decision.warnings == (
        WarningMessage(
            WarningSubtype.DEVICE,
            "page [alpha]: the page needs 2 GPU(s) (live-settings :gpus:) but 1 are available; the page is not run",
        ),
    )


def test_an_unusable_kernel_is_a_failure_with_a_warning_not_a_run():
    bad = Environment(problem="no kernelspec named 'nope'")
    decision = decide(plan("x = 1"), "k1", None, Mode(), lambda: bad)
    assert (decision.run, decision.failed, decision.reason) == (False, True, "no kernelspec named 'nope'")
    expected = WarningMessage(WarningSubtype.KERNEL, "page [alpha]: not run: no kernelspec named 'nope'")
    assert decision.warnings == (expected,)


def test_auto_keeps_a_result_made_for_the_same_key_and_environment():
    session = plan("x = 1")
    assert decide(session, "k1", record(session), Mode(), lambda: ENV) == Decision(False, environment="env-1")


@pytest.mark.parametrize(
    ("stored_key", "stored_env", "execute"),
    [("old", "env-1", "auto"), ("k1", "env-0", "auto"), ("k1", "env-1", "force")],
    ids=["code changed", "environment changed", "force"],
)
def test_a_changed_key_or_environment_or_force_runs_again(stored_key, stored_env, execute):
    session = plan("x = 1")
    stored = record(session, stored_key, stored_env)
    assert decide(session, "k1", stored, Mode(execute), lambda: ENV) == Decision(True, environment="env-1")


def test_devices_leased_one_gpu_by_default_or_the_pages_number():
    assert decide(plan("x"), "k", None, Mode(gpu_slots=4), lambda: ENV).gpus == 1
    assert decide(plan("x", gpus=3), "k", None, Mode(gpu_slots=4), lambda: ENV).gpus == 3
    assert decide(plan("x", gpus=0), "k", None, Mode(gpu_slots=4), lambda: ENV).gpus == 0
    assert decide(plan("x"), "k", None, Mode(device="cpu"), lambda: ENV).gpus == 0


def test_a_gpu_result_is_never_replaced_by_a_cpu_run_of_the_same_code():
    session = plan("x = 1")
    gpu_result = record(session, leased=1)
    assert not decide(session, "k1", gpu_result, Mode(), lambda: ENV).run  # no GPU now: kept
    assert decide(session, "k2", gpu_result, Mode(), lambda: ENV).run  # the code changed: runs
    cpu_result = record(session)
    assert decide(session, "k1", cpu_result, Mode(gpu_slots=1), lambda: ENV).run  # a GPU now: runs


def test_current_count_is_the_unchanged_prefix():
    before = plan("a = 1", "b = 2", "c = 3")
    stored = record(before)
    assert current_count(before.cells, stored) == 3
    assert current_count(plan("a = 1", "B = 2", "c = 3").cells, stored) == 1
    assert current_count(plan("A = 1", "b = 2", "c = 3").cells, stored) == 0
    assert current_count(plan("a = 1", "b = 2", "c = 3", "d = 4").cells, stored) == 3
    assert current_count(before.cells, None) == 0


def test_errors_are_counted_once_the_same_way_with_and_without_the_plan():
    session = plan("raise KeyError", "1/0", raises=("KeyError",))
    cells = [
        CellRecord("error", error={"ename": "KeyError"}, index=0, code_sha=session.cells[0].code_sha, expected=True),
        CellRecord("error", error={"ename": "ZeroDivisionError"}, index=1, code_sha=session.cells[1].code_sha),
    ]
    stored = SessionRecord("alpha", "k", "e", "error", cells)
    assert verdict(stored, session.cells).failed == (1,)  # the page's :raises: now
    assert verdict(stored).failed == (1,)  # what the run was told (the command line has no plan)
    assert verdict(stored, plan("raise KeyError", "1/0").cells).failed == (0, 1)  # :raises: removed


def test_committed_store_files_read_as_records_and_write_back_unchanged():
    """The store's JSON <-> records conversion, on real store files (tests/data/store: what real
    kernels wrote for the docs' pages): nothing is lost or added."""
    import json

    from livecells.store import session_from_json, session_to_json
    from livecells.store.schema import check_session

    files = sorted((DATA / "store").glob("*.json"))
    assert files
    for path in files:
        for framework, data in json.loads(path.read_text())["sessions"].items():
            check_session(data)
            assert session_to_json(session_from_json(data)) == data, (path.name, framework)


def test_the_build_outcome_pickles_without_this_builds_records():
    """The outcome lives on the environment, which Sphinx pickles: this build's records (every
    output) stay out of environment.pickle; what the report needs stays in."""
    import pickle

    from livecells.model.records import BuildOutcome, SessionOutcome

    session = plan("x = 1")
    outcome = BuildOutcome(run_id="r", ran=1)
    outcome.sessions[("page", "alpha")] = SessionOutcome("page", "alpha", "/src/page.rst", "run", "ok", cells=1)
    outcome.records[("page", "alpha")] = record(session)
    copy = pickle.loads(pickle.dumps(outcome))
    assert copy.records == {} and outcome.records  # the original keeps them for this build
    assert copy.sessions == outcome.sessions and copy.run_id == "r" and copy.ran == 1


def test_any_session_the_store_accepts_reads_as_a_record_and_writes_back_accepted():
    """Adversarial: real stored sessions with keys dropped, emptied, or added at random. Whatever
    check_session lets through, session_from_json must read, and its JSON must pass again."""
    import copy
    import json
    import random

    from livecells.store import session_from_json, session_to_json
    from livecells.store.schema import check_session

    rng = random.Random(1234)
    sessions = [
        data
        for path in sorted((DATA / "store").glob("*.json"))
        for data in json.loads(path.read_text())["sessions"].values()
    ]
    odd = [None, "", 0, -1, 1.5, [], {}, "x" * 3, {"k": "v"}, True]
    accepted = 0
    for _ in range(600):
        data = copy.deepcopy(rng.choice(sessions))
        targets = [data, data.get("provenance") or {}, *(data.get("cells") or [])]
        for _ in range(rng.randint(1, 4)):
            where = rng.choice(targets)
            if not isinstance(where, dict):
                continue
            key = rng.choice([*where, "extra", "unknown_key"]) if where else "unknown_key"
            if rng.random() < 0.4:
                where.pop(key, None)
            else:
                where[key] = rng.choice(odd)
        try:
            check_session(data)
        except StoreEntryError:
            continue
        accepted += 1
        record = session_from_json(data)
        check_session(session_to_json(record))
    assert accepted > 50  # the mutations reach the conversion, not only the checks


def test_a_cell_that_did_not_run_is_no_error_of_its_own():
    """A kernel that dies in cell 2 of 5: one error (the crash), as the build's warnings, its
    total, livecells_raise_on_error, the report and the CLI all count it."""
    session = plan("a", "b", "c", "d", "e")
    cells = [CellRecord("ok", index=0), CellRecord("died", index=1)] + [
        CellRecord("not-run", index=n) for n in range(2, 5)
    ]
    crashed = SessionRecord("alpha", "k", "e", "crashed", cells)
    assert verdict(crashed, session.cells, 5) == verdict(crashed) == Verdict(failed=(1,), not_run=(2, 3, 4))
    timed_out = SessionRecord("alpha", "k", "e", "timeout", [CellRecord("timeout", index=0)])
    assert verdict(timed_out).failed == (0,)


def test_the_outcome_of_a_session_the_page_does_not_show_still_says_how_it_last_ran():
    """With livecells_execute = 'off' the page shows its recorded outputs, and the report still
    says how the cells last ran (the stored record); summary.json says the session was not run."""
    from livecells.pipeline.run import session_outcome
    from livecells.pipeline.summary import summary_entry

    session = plan("a = 1", "b = 2")
    stored = record(session, key="k1")
    off = session_outcome(session, "k1", stored, "recorded", reason="execution is off")
    assert (off.origin, off.status, off.current) == ("recorded", "not-run", 0)
    assert (off.record_status, off.record_cells, off.stale) == ("ok", 2, False)
    entry = summary_entry(off)
    assert (entry["status"], entry["cells"], entry["duration"]) == ("not-run", 0, None)
    assert off.shown == Verdict(not_run=(0, 1))  # counted, whatever the mode
    shown = session_outcome(plan("a = 1", "B = 2"), "k2", stored, "store")
    assert (shown.origin, shown.status, shown.current, shown.stale) == ("store", "ok", 1, True)
    assert shown.shown == Verdict(not_run=(1,), stale=(0,))
    failed = session_outcome(session, "k1", stored, "store", reason="no kernelspec", failed=True)
    assert (failed.status, failed.record_status, failed.current) == ("failed", "ok", 2)


def test_the_command_line_reports_a_stored_session_in_the_rows_a_build_reports():
    """One row shape: the command line's row of a stored session is the build's row of it
    (without the page: every stored cell counts as shown), and both fail on the same things."""
    from livecells.cli.main import fail_classes, failing, report_entry
    from livecells.model.records import stored_outcome
    from livecells.pipeline.run import session_outcome

    session = plan("a = 1", "raise ValueError", "c = 3")
    stored = record(session)
    stored.cells[1] = CellRecord("error", index=1, code_sha=session.cells[1].code_sha, time=0.5,
                                 error={"ename": "ValueError", "evalue": "", "traceback": []})
    stored.provenance = Provenance(device="CPU X", framework_version="1.2", date="2026-01-01T00:00:00+00:00", host="h")
    built = session_outcome(session, "k1", stored, Origin.STORE)
    cli = stored_outcome("page", "alpha", stored)
    assert type(built) is type(cli) and built.latest_origin == cli.latest_origin == Origin.STORE
    fields = ("status", "record_status", "cells", "current", "stale", "errors", "not_run", "seconds", "duration",
              "device", "framework_version", "date", "host")
    for name in fields:
        assert getattr(built, name) == getattr(cli, name), name
    assert report_entry(cli)["run_time"] == 0.5 and report_entry(cli)["errors"] == 1
    assert failing([cli], fail_classes("errors")) == [cli] and failing([cli], fail_classes("never")) == []
    could_not_run = stored_outcome("page", "alpha", SessionRecord("alpha", "k", "e", SessionStatus.FAILED))
    assert failing([could_not_run], fail_classes("errors")) == [could_not_run]


def test_the_verdict_counts_each_shown_cell_once_wherever_its_result_came_from():
    """Failed beats not run beats stale; beyond the cells shown (other code since) a cell is not
    run; an expected error passes; a stored result for another key is stale."""
    session = plan("a", "b", "c", "d", "e", "f", raises=("KeyError",))
    sha = [c.code_sha for c in session.cells]
    cells = [
        CellRecord("ok", index=0, code_sha=sha[0]),
        CellRecord("error", error={"ename": "KeyError"}, index=1, code_sha=sha[1], expected=True),
        CellRecord("error", error={"ename": "ValueError"}, index=2, code_sha=sha[2]),
        CellRecord("not-run", index=3, code_sha=sha[3]),
        CellRecord("ok", index=4, code_sha="other code"),
    ]
    stored = SessionRecord("alpha", "old key", "e", "error", cells)
    assert verdict(stored, session.cells) == Verdict(failed=(2,), not_run=(3, 4, 5))
    assert verdict(stored, session.cells, stale=True) == Verdict(failed=(2,), not_run=(3, 4, 5), stale=(0, 1))
    assert verdict(stored, session.cells, 1, stale=True) == Verdict(not_run=(1, 2, 3, 4, 5), stale=(0,))
    assert verdict(None, session.cells) == Verdict(not_run=(0, 1, 2, 3, 4, 5))
    assert verdict(stored) == Verdict(failed=(2,), not_run=(3,))  # the command line: every stored cell


def test_a_session_key_is_the_same_in_every_release_of_its_key_version():
    """Every stored result is found by its key: a key that changes without KEY_VERSION (an
    encoder swapped, a field's order) would run every book's every session again. The value
    was computed by the code before the key's encoding was last changed (47178dc)."""
    from livecells.model.frameworks import FrameworkSpec
    from livecells.plan.keys import KEY_VERSION, RunSettings, session_key

    cells = (
        CellPlan(index=0, frameworks=("alpha",), code="print('é', 1)", line=1, code_line=2),
        CellPlan(index=1, frameworks=("alpha",), code="x = 1", line=5, code_line=6, timeout=20.0,
                 raises=("KeyError", "A"), allow_errors=True, repeat=3, warmup=1, options=(("tag", "v"), ("n", 2))),
    )
    spec = FrameworkSpec("alpha", "Alpha", sync="pass", gpu_used="False")
    session = SessionPlan("page", "alpha", "/src/page.rst", cells, PageSettings(gpus=1, timeout=60))
    settings = RunSettings(timeout=600, output_limit=100_000, frameworks={"alpha": spec}, env_drop=("*tok*",))
    assert KEY_VERSION == 2
    assert session_key(session, "deps", settings) == "2e6057a159215bd6c0cf27ab76c0b2851c114b72f4bdbc6735e71f5702ef27d5"


def test_the_session_key_holds_every_setting_that_changes_a_result():
    """A stored result stands only for what ran: each setting a run depends on is in its key."""
    from livecells.model.frameworks import FrameworkSpec
    from livecells.plan.keys import RunSettings, session_key

    def page(*cells: CellPlan, **settings) -> SessionPlan:
        return SessionPlan("page", "alpha", "/src/page.rst", cells, PageSettings(**settings))

    plain = CellPlan(index=0, frameworks=("alpha",), code="print(1)", line=1, code_line=2)
    own = CellPlan(index=0, frameworks=("alpha",), code="print(1)", line=1, code_line=2, timeout=20.0)
    expects = replace(plain, raises=("KeyError",))
    spec = FrameworkSpec("alpha", "Alpha", sync="pass", gpu_used="False")
    base = RunSettings(timeout=600, output_limit=100_000, frameworks={"alpha": spec})
    key = session_key(page(plain), "deps", base)
    changed = {
        "livecells_timeout": session_key(page(plain), "deps", replace(base, timeout=900)),
        "livecells_output_limit": session_key(page(plain), "deps", replace(base, output_limit=10)),
        "the page's time budget": session_key(page(plain, timeout=60), "deps", base),
        "the page's :gpus:": session_key(page(plain, gpus=2), "deps", base),
        "the cell's :timeout:": session_key(page(own), "deps", base),
        # The stored status and each error's ``expected`` follow it (the command line reads them).
        "the cell's :raises:": session_key(page(expects), "deps", base),
        "the cell's bare :raises:": session_key(page(replace(plain, raises=())), "deps", base),
        "livecells_env_drop": session_key(page(plain), "deps", replace(base, env_drop=("*TOKEN*",))),
        "the :depends: files": session_key(page(plain), "other deps", base),
        "the framework's sync": session_key(
            page(plain), "deps", replace(base, frameworks={"alpha": replace(spec, sync="x = 1")})
        ),
        "the version shown": session_key(
            page(plain), "deps", replace(base, frameworks={"alpha": replace(spec, version_of="numpy")})
        ),
    }
    assert [what for what, other in changed.items() if other == key] == []
    # The same setting written otherwise, and a default that a cell's own :timeout: overrides,
    # change nothing: nothing reruns for them.
    assert session_key(page(plain), "deps", replace(base, timeout=600.0)) == key
    own_key = session_key(page(own), "deps", base)
    assert session_key(page(own), "deps", replace(base, timeout=900)) == own_key
    assert session_key(page(plain), "deps", replace(base, frameworks={"alpha": replace(spec, label="A")})) == key
    dropping = replace(base, env_drop=("*TOKEN*", "*_KEY"))
    assert session_key(page(plain), "deps", replace(base, env_drop=("*_key", "*token*"))) == session_key(
        page(plain), "deps", dropping
    )


def test_error_line_reads_the_cell_frame():
    tb = ["\x1b[31mValueError\x1b[39m", "\x1b[36mCell\x1b[39m In[4], line 3\n----> 3 raise ValueError", "x"]
    error = {"traceback": tb, "ename": "ValueError"}
    assert CellRecord("error", execution_count=4, error=error).error_line() == 3
    assert CellRecord("error", execution_count=5, error=error).error_line() is None
