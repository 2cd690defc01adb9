"""Timings as data without kernels: the statistics, the lines, the store's shape, the merge of
devices' timings, drift and ``report --compare`` over hand-written stores."""

from __future__ import annotations

import copy
import json

import pytest

from livecells.errors import StoreEntryError
from livecells.model.device_report import device_chart, device_rows, device_table
from livecells.model.records import CellRecord, Provenance, SessionRecord
from livecells.model.timings import Drift, iqr, median
from livecells.model.vocabulary import CellStatus, SessionStatus
from livecells.render.timing import devices_line, repeated_text, timing_line
from livecells.store import OutputStore
from livecells.store.codec import session_from_json, session_to_json
from livecells.store.schema import check_session, repair_session

from helpers import build_site, livecells_cli, one_page_book


def record(device: str, date: str, times: list[float], *, kind: str = "cpu", samples: bool = False) -> SessionRecord:
    cells = [
        CellRecord(CellStatus.OK, time=t, index=n, code_sha=f"sha{n}", samples=[t * 0.9, t, t * 1.2] if samples else [])
        for n, t in enumerate(times)
    ]
    provenance = Provenance(date=date, device=device, device_kind=kind, framework_version="2.13.0")
    return SessionRecord("pytorch", "key", "env", SessionStatus.OK, cells, provenance, floor=0.0001 if samples else None)


def test_median_and_iqr_are_those_of_the_samples():
    assert median([3, 1, 2]) == 2 and iqr([5.0]) == 0.0
    assert iqr([1, 2, 3, 4, 5, 6, 7]) == pytest.approx(3.0)  # quartiles 2.5 and 5.5


def test_the_repeated_line_gives_median_iqr_and_count_in_a_fitting_unit():
    samples = [0.00251, 0.00249, 0.00255, 0.0025, 0.00253, 0.0026, 0.0024]
    assert repeated_text(samples) == "2.51 ms ± 0.05 (median ± IQR of 7)"
    assert repeated_text([1.5, 1.6, 1.7]) == "1.60 s ± 0.10 (median ± IQR of 3)"
    assert repeated_text([0.0000412] * 3) == "41.2 µs ± 0.0 (median ± IQR of 3)"
    line = timing_line(0.0025, Provenance(device="NVIDIA H200", framework_version="2.13.0"), "torch",
                       environment=False, samples=samples)
    assert line.text == "2.51 ms ± 0.05 (median ± IQR of 7) · NVIDIA H200 · torch 2.13.0"


def test_a_time_near_the_floor_is_no_figure():
    assert repeated_text([0.0002, 0.0002, 0.0003], floor=0.0001) == (
        "< 300 µs, at the measurement floor (median of 3)"
    )
    assert repeated_text([0.0002] * 3, floor=0.00016) == "< 480 µs, at the measurement floor (median of 3)"
    assert "floor" not in repeated_text([0.0005] * 3, floor=0.0001)


def test_samples_floor_and_devices_round_trip_and_old_stores_still_read():
    old = session_to_json(record("Xeon", "2026-01-01", [0.5, 1.0]))
    assert "devices" not in old and "floor" not in old and "samples" not in old["cells"][0]
    check_session(old)
    merged = record("Xeon", "2026-01-02", [0.5], samples=True).with_devices(record("H200", "2026-01-01", [0.1], kind="gpu"))
    data = json.loads(json.dumps(session_to_json(merged)))
    check_session(data)
    back = session_from_json(data)
    assert back.cells[0].samples == merged.cells[0].samples and back.floor == 0.0001
    assert back.devices == merged.devices and set(back.devices) == {"Xeon", "H200"}


@pytest.mark.parametrize(
    ("where", "value"),
    [(("cells", 0, "samples"), [0.1, -1]), (("cells", 0, "samples"), "fast"), (("cells", 0, "warmup"), [None]),
     (("floor",), float("nan")), (("devices",), []), (("devices", "H200", "cells", 0, "time"), "1 s"),
     (("devices", "H200", "device"), 3), (("devices", "H200", "cells", 0, "ok"), "yes")],
)
def test_the_schema_refuses_bad_timings(where, value):
    data = session_to_json(record("Xeon", "2026-01-02", [0.5], samples=True).with_devices(
        record("H200", "2026-01-01", [0.1], kind="gpu")))
    target = data
    for key in where[:-1]:
        target = target[key]
    target[where[-1]] = value
    with pytest.raises(StoreEntryError):
        check_session(data)


def test_repair_drops_bad_samples_a_cell_could_forge():
    data = session_to_json(record("Xeon", "2026-01-02", [0.5], samples=True))
    data["cells"][0]["samples"] = [0.1, float("inf")]
    problems = repair_session(data, 1000)
    assert "samples" not in data["cells"][0] and problems
    check_session(data)


def test_a_run_keeps_other_devices_and_replaces_only_its_own():
    gpu = record("H200", "2026-01-01", [0.0025], kind="gpu")
    cpu = record("Xeon", "2026-01-02", [1.16]).with_devices(gpu)
    assert set(cpu.devices) == {"H200", "Xeon"}
    again = record("Xeon", "2026-01-03", [1.2]).with_devices(cpu)
    assert again.devices["Xeon"].cells[0].time == 1.2 and again.devices["H200"].cells[0].time == 0.0025
    # A record of no device adds nothing.
    nowhere = record("", "2026-01-04", [9.0]).with_devices(again)
    assert set(nowhere.devices) == {"H200", "Xeon"} and nowhere.devices["Xeon"].cells[0].time == 1.2


def test_the_devices_line_shows_the_same_code_on_every_device():
    gpu = record("NVIDIA H200", "2026-01-01T00:00:00+00:00", [0.0025], kind="gpu")
    both = record("Intel Xeon", "2026-01-02T00:00:00+00:00", [1.16]).with_devices(gpu)
    line = devices_line(both.all_devices(), 0, "sha0", "torch", first="NVIDIA H200")
    assert line.text == (
        "NVIDIA H200 0.0025 s (torch 2.13.0, 2026-01-01) · Intel Xeon (CPU) 1.16 s (torch 2.13.0, 2026-01-02)"
    )
    assert devices_line(both.all_devices(), 0, "other code", "torch") is None


def test_the_device_columns_lead_with_the_shown_results_device_whatever_the_names():
    """Name order and the defined order differ here, for an Intel and an AMD machine's run alike
    (the report once sorted by name: the column a test expected first depended on the host)."""
    amd = "AMD EPYC 7763 64-Core Processor"
    intel = "Intel(R) Xeon(R) Platinum 8480+"
    kept = record(amd, "2026-01-03", [2.0]).with_devices(record("NVIDIA H200", "2026-01-01", [0.1], kind="gpu"))
    on_intel = {("a", "pytorch"): record(intel, "2026-01-02", [1.0]).with_devices(kept)}
    devices, _ = device_rows(on_intel)
    assert devices == [f"{intel} (CPU)", f"{amd} (CPU)", "NVIDIA H200"]
    header = device_table(device_rows(on_intel))[1]
    assert header.startswith("session ") and header.index(intel) < header.index(amd) < header.index("NVIDIA"), header
    # Two sessions show Intel's result and one AMD's: Intel, AMD, then the rest by name.
    on_both = {
        ("b", "pytorch"): record(amd, "2026-01-04", [1.0]).with_devices(record("Apple M2", "2026-01-01", [0.5])),
        ("c", "pytorch"): record(intel, "2026-01-04", [1.0]).with_devices(record(amd, "2026-01-01", [0.5])),
        ("d", "pytorch"): record(intel, "2026-01-04", [1.0]),
    }
    devices, rows = device_rows(on_both)
    assert devices == [f"{intel} (CPU)", f"{amd} (CPU)", "Apple M2 (CPU)"], devices
    assert [name for name, _ in rows] == ["b [pytorch]", "c [pytorch]", "d [pytorch]"]
    chart = device_chart(device_rows(on_both))
    assert chart.index(f">{intel} (CPU)<") < chart.index(f">{amd} (CPU)<") < chart.index(">Apple M2 (CPU)<")


def test_drift_is_a_factor_either_way_past_a_floor_of_noise():
    assert Drift(0, 0.1, 0.3).beyond(2, 0.01) and Drift(0, 0.3, 0.1).beyond(2, 0.01)
    assert not Drift(0, 0.1, 0.11).beyond(2, 0.01)
    assert not Drift(0, 0.001, 0.004).beyond(2, 0.01)  # 4x, but 3 ms: noise
    assert Drift(0, 0.1, 0.3).describe() == "3.00x slower (0.1 s before, 0.3 s now)"


def test_report_compare_over_hand_written_stores(tmp_path):
    mine, theirs = OutputStore(tmp_path / "mine"), OutputStore(tmp_path / "theirs")
    theirs.save_record("page", record("Xeon", "2026-01-01", [0.1, 0.2, 0.5]))
    mine.save_record("page", record("Xeon", "2026-01-02", [0.3, 0.22, 0.5]))
    result = livecells_cli("report", "--store", str(mine.root), "--compare", str(theirs.root))
    assert result.returncode == 1, result
    lines = result.stdout.splitlines()
    assert lines[0].endswith("cell 1 on Xeon (CPU): 0.1 s -> 0.3 s: 3.00x  PAST the factor 2")
    assert lines[1].endswith(": 1.10x") and lines[2].endswith(": 1.00x")
    assert "3 cell time(s) compared" in lines[-1] and "1 past the factor 2" in lines[-1]
    # A looser factor passes; another device is not compared.
    assert livecells_cli("report", "--store", str(mine.root), "--compare", str(theirs.root), "--factor", "4").returncode == 0
    other = OutputStore(tmp_path / "other")
    other.save_record("page", record("H200", "2026-01-01", [0.01, 0.01, 0.01], kind="gpu"))
    result = livecells_cli("report", "--store", str(mine.root), "--compare", str(other.root))
    assert result.returncode == 0 and "0 cell time(s) compared" in result.stdout
    # A cell whose code changed is not compared.
    changed = copy.deepcopy(record("Xeon", "2026-01-03", [9.0, 0.2, 0.5]))
    changed.cells[0].code_sha = "new"
    mine.save_record("page", changed)
    assert livecells_cli("report", "--store", str(mine.root), "--compare", str(theirs.root)).returncode == 0
    missing = livecells_cli("report", "--store", str(mine.root), "--compare", str(tmp_path / "nowhere"))
    assert missing.returncode == 1 and "no such store folder" in missing.stderr


def test_hostile_device_timings_in_a_store_reach_no_page_raw(tmp_path):
    from livecells.model.plans import CellPlan

    src = one_page_book(
        tmp_path, 'extensions = ["livecells"]\nlivecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}\n',
        "Page\n====\n\n.. live-cell:: alpha\n   :timings: all-devices\n\n   x = 1\n\n.. live-report::\n"
    )
    sha = CellPlan(0, ("alpha",), "x = 1", 0, 0).code_sha
    hostile = record("GPU\x0c<i>\x1b[2J", "2026\x07-01<b>", [0.5])
    hostile.cells[0].code_sha = sha
    mine = record("Xeon <script>", "2026-01-02", [1.0]).with_devices(hostile)
    mine.cells[0].code_sha = sha
    mine = mine.with_devices(hostile)
    mine.framework = "alpha"
    OutputStore(src / "_livecells").save_record("index", mine)
    app, warnings = build_site(src, confoverrides={"livecells_execute": "cache"})
    html = (app.outdir / "index.html").read_text()
    assert "Xeon <script>" not in html and "<i>" not in html and "<b>" not in html
    assert "Xeon &lt;script&gt; (CPU)" in html, warnings
    assert not any(c in html for c in "\x07\x0c\x1b"), warnings
    assert "GPU&lt;i&gt;" in html and "livecells-report-devices" in html


def test_two_builds_sharing_a_store_keep_both_devices(tmp_path):
    store = OutputStore(tmp_path)
    # Both builds read the file before either wrote: each knows only its own device.
    store.save_record("page", record("H200", "2026-01-02", [0.01], kind="gpu").with_devices(None))
    store.save_record("page", record("Xeon", "2026-01-01", [1.0]).with_devices(None))
    devices = store.records("page")["pytorch"].devices
    assert set(devices) == {"H200", "Xeon"}
    # A later run on a device replaces that device's timings only.
    store.save_record("page", record("Xeon", "2026-01-03", [2.0]).with_devices(None))
    devices = store.records("page")["pytorch"].devices
    assert devices["Xeon"].cells[0].time == 2.0 and devices["H200"].cells[0].time == 0.01


def test_report_compare_takes_the_books_drift_settings(tmp_path):
    mine, theirs = OutputStore(tmp_path / "_livecells"), OutputStore(tmp_path / "release")
    theirs.save_record("page", record("Xeon", "2026-01-01", [0.1]))
    mine.save_record("page", record("Xeon", "2026-01-02", [0.3]))
    (tmp_path / "conf.py").write_text("livecells_drift_factor = 4\n")
    result = livecells_cli("report", "-s", str(tmp_path), "--compare", str(theirs.root))
    assert result.returncode == 0 and "0 past the factor 4" in result.stdout, result
    assert livecells_cli("report", "-s", str(tmp_path), "--compare", str(theirs.root), "--factor", "2").returncode == 1
    (tmp_path / "conf.py").write_text("livecells_drift_factor = 'big'\nlivecells_drift_floor = 1.0\n")
    result = livecells_cli("report", "-s", str(tmp_path), "--compare", str(theirs.root))
    assert result.returncode == 0 and "using 2" in result.stderr and "under 1 s are noise" in result.stdout


class CountingSession:
    """A kernel session's stand-in for the repeat loop: each run takes ``seconds``, and fails at
    run ``fail_at``."""

    def __init__(self, seconds: float = 0.0, fail_at: int | None = None) -> None:
        self.seconds, self.fail_at = seconds, fail_at
        self.calls: list[tuple[float, bool]] = []

    async def run_cell(self, code: str, timeout: float, *, last: bool = False) -> CellRecord:
        import asyncio

        self.calls.append((timeout, last))
        await asyncio.sleep(self.seconds)
        n = len(self.calls)
        if n == self.fail_at:
            return CellRecord(CellStatus.ERROR, error={"ename": "E", "evalue": "", "traceback": []}, execution_count=n)
        return CellRecord(CellStatus.OK, outputs=[{"run": n}], time=float(n), execution_count=n)


def test_the_repeat_loop_keeps_the_last_output_every_time_and_the_page_budget():
    import asyncio
    import time

    from livecells.execute.scheduler import _repeated
    from livecells.model.plans import CellPlan

    cell = CellPlan(0, ("alpha",), "x", 1, 1, repeat=3, warmup=2)
    session = CountingSession()
    result = asyncio.run(_repeated(session, cell, 30, True))
    assert [last for _, last in session.calls] == [False, False, False, False, True]
    assert result.outputs == [{"run": 5}] and result.warmup == [1.0, 2.0] and result.samples == [3.0, 4.0, 5.0]
    assert result.time == 4.0 and result.execution_count == 5
    # A failing run is the cell's result: no figure is made of the runs before it.
    failing = asyncio.run(_repeated(CountingSession(fail_at=3), cell, 30, False))
    assert failing.status == CellStatus.ERROR and failing.samples == [] and failing.execution_count == 3
    # The page's budget: each run gets what is left, and the runs made when it is spent stand.
    slow = CountingSession(seconds=0.05)
    ended = asyncio.run(_repeated(slow, CellPlan(0, ("alpha",), "x", 1, 1, repeat=5, warmup=1), 30, True,
                                  time.perf_counter() + 0.12))
    assert 2 <= len(slow.calls) <= 4 and all(limit <= 0.12 for limit, _ in slow.calls)
    assert len(ended.warmup) == 1 and len(ended.samples) == len(slow.calls) - 1
