"""Timings as data, with real kernels: repeated cells (median, spread, floor), every device's
timings kept, drift between builds warned of, and ``report --compare``.

The cells sleep for known durations, so the truth is known on this (noisy, shared) machine.
"""

from __future__ import annotations

import json
import re
import shutil
import statistics
from pathlib import Path

import pytest

from livecells.execute import scheduler

import timing
from helpers import build_site, cell_with, livecells_cli, meta, soup

pytestmark = pytest.mark.kernel

CONF = """\
extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}
livecells_timeout = 60
"""

SLEEPS = """\
Sleeps
======

.. live-cell:: alpha

   import json, time
   print("plain cell")

.. live-cell:: alpha
   :repeat: 7
   :warmup: 2

   start = time.perf_counter()
   while time.perf_counter() - start < 0.1:
       pass
   print("spun 100 ms")

.. live-cell:: alpha
   :repeat: 5

   time.sleep(0.5)

.. live-cell:: alpha
   :repeat: 3

   time.sleep(json.load(open("delays.json"))["slow"])

.. live-cell:: alpha
   :repeat: 3

   time.sleep(json.load(open("delays.json"))["mild"])

.. live-cell:: alpha
   :repeat: 5
   :timings: all-devices

   x = 1

.. live-cell:: alpha
   :timings: all-devices

   time.sleep(0.02)
"""


def write_book(src: Path) -> None:
    src.mkdir(parents=True, exist_ok=True)
    (src / "conf.py").write_text(CONF)
    (src / "index.rst").write_text(SLEEPS)
    (src / "report.rst").write_text(":orphan:\n\nReport\n======\n\n.. live-report::\n")
    delays(src, slow=0.1, mild=0.2)


def delays(src: Path, **seconds: float) -> None:
    """What the sleeping cells read: the same code, another duration."""
    (src / "delays.json").write_text(json.dumps(seconds))


def stored(src: Path) -> dict:
    return json.loads((src / "_livecells" / "index.json").read_text())["sessions"]["alpha"]


def build(src: Path, **overrides):
    confoverrides = {f"livecells_{k}": v for k, v in overrides.items()}
    app, warnings = build_site(src, confoverrides=confoverrides, freshenv=True)
    return soup(app.outdir / "index.html"), warnings, app


FAKE_DEVICE = "Fake Accelerator B"
#: The first builds' CPU, whatever this machine's: its name sorts before FAKE_DEVICE's, so that
#: the report's columns (the shown result's device first) are not in name order.
FIRST_CPU = "AMD EPYC 7763 64-Core Processor"


def summary(app) -> Path:
    """Where a build writes report.txt (livecells_summary_dir unset: the doctree folder's)."""
    return Path(app.doctreedir) / "livecells-summary"


@pytest.fixture(scope="module")
def builds(tmp_path_factory):
    """Four builds of one book: the first; the same code forced to run again with one cell 3x
    slower and one 1.1x slower (the first's store kept aside, as a release's), both under the
    CPU name FIRST_CPU; the same under another device's name; then a ``cache`` build on this
    CPU-only machine."""
    root = tmp_path_factory.mktemp("timings")
    src = root / "book"
    write_book(src)
    found = {"src": src}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scheduler, "cpu_name", lambda: FIRST_CPU)
        found["first"] = build(src)
        found["first_store"] = stored(src)
        shutil.copytree(src / "_livecells", root / "release")
        found["release"] = root / "release"
        delays(src, slow=0.3, mild=0.22)
        found["second"] = build(src, execute="force")
        found["second_report"] = (summary(found["second"][2]) / "report.txt").read_text()
        found["second_store"] = stored(src)
        patch.setattr(scheduler, "cpu_name", lambda: FAKE_DEVICE)
        found["third"] = build(src, execute="force")
    found["third_store"] = (src / "_livecells" / "index.json").read_bytes()
    out = summary(found["third"][2])
    found["third_report"] = (out / "report.txt").read_text()
    found["third_chart"] = (out / "devices.svg").read_text()
    found["third_live_report"] = soup(Path(found["third"][2].outdir) / "report.html")
    found["cached"] = build(src, execute="cache")
    found["cached_store"] = (src / "_livecells" / "index.json").read_bytes()
    return found


def test_a_repeated_cell_runs_warmup_plus_repeat_times_and_shows_its_median(builds, no_kernel_left):
    cells = builds["first_store"]["cells"]
    spinner, sleeper = cells[1], cells[2]
    assert len(spinner["samples"]) == 7 and len(spinner["warmup"]) == 2
    assert len(sleeper["samples"]) == 5 and len(sleeper["warmup"]) == 1  # livecells_warmup: 1
    for cell, truth in ((spinner, 0.1), (sleeper, 0.5)):
        assert all(s >= truth for s in cell["samples"]), cell["samples"]
        assert cell["time"] == sorted(cell["samples"])[len(cell["samples"]) // 2]
    # The sleep's median is within 2 % of the truth on this loaded machine (a spin is not: the
    # CPU it spins on is shared, and the time it is taken away counts).
    assert abs(sleeper["time"] - 0.5) / 0.5 < timing.MEDIAN_OF_SLEEPS, sleeper
    page = builds["first"][0]
    cell = cell_with(page, "spun 100 ms")
    line = meta(cell)[0]
    match = re.match(r"(\d+) ms ± (\d+) \(median ± IQR of 7\) · \S", line)
    assert match, line
    assert int(match.group(1)) == round(spinner["time"] * 1000)
    q1, _, q3 = statistics.quantiles(spinner["samples"], n=4, method="inclusive")
    assert int(match.group(2)) == round((q3 - q1) * 1000)
    # The page shows the last run's output, once.
    assert cell.select_one(".livecells-output").get_text().strip() == "spun 100 ms"
    line = meta(cell_with(page, "sleep(0.5)"))[0]
    assert re.match(r"50\d ms ± \d+ \(median ± IQR of 5\)", line), line


def test_the_floor_is_measured_once_and_a_time_near_it_is_no_figure(builds):
    record = builds["first_store"]
    assert 0 < record["floor"] < 0.01 and len(record["floor_samples"]) == 5
    assert record["floor"] == statistics.median(record["floor_samples"])
    line = meta(cell_with(builds["first"][0], "x = 1"))[0]
    assert re.match(r"< [\d.]+ [mµ]s, at the measurement floor \(median of 5\)", line), line


def test_a_cell_run_once_shows_what_it_always_showed(builds):
    cell = builds["first_store"]["cells"][0]
    assert "samples" not in cell and "warmup" not in cell
    line = meta(cell_with(builds["first"][0], "plain cell"))[0]
    assert re.match(r"\d+\.\d{4} s · ", line), line
    assert meta(cell_with(builds["first"][0], "sleep(0.02)"))[0].startswith("0.02")


def test_a_cell_3x_slower_is_flagged_and_one_1_1x_slower_is_not(builds):
    _, warnings, _ = builds["second"]
    flagged = [w for w in warnings.splitlines() if "livecells.timing" in w]
    assert len(flagged) == 1, warnings
    found = re.search(r"index\.rst:\d+: WARNING: .*drifted on .*: (\d\.\d\d)x slower", flagged[0])
    assert found and 2.5 < float(found.group(1)) < 3.5, flagged[0]
    slow_line = SLEEPS.splitlines().index('   time.sleep(json.load(open("delays.json"))["slow"])') - 2
    assert f"index.rst:{slow_line}:" in flagged[0], (slow_line, flagged[0])
    report = builds["second_report"]
    section = report.split("== timing drift: 1 cell(s) past livecells_drift_factor\n", 1)[1]
    assert re.match(rf"index\.rst:{slow_line}: \[alpha\] .* \d\.\d\dx slower", section), report
    assert "livecells.timing" not in builds["first"][1]


def test_report_compare_prints_ratios_and_fails_past_the_factor(builds):
    src, release = builds["src"], builds["release"]
    # The third build ran under another device's name: compare the second's device.
    result = livecells_cli("report", "-s", str(src), "--compare", str(release))
    assert result.returncode == 1, result
    lines = result.stdout.splitlines()
    slow = next(line for line in lines if "cell 4 " in line)
    found = re.search(r"(\d\.\d\d)x  PAST the factor 2", slow)
    assert found and 2.5 < float(found.group(1)) < 3.5, result.stdout
    mild = next(line for line in lines if "cell 5 " in line)
    assert re.search(r"1\.\d\dx", mild) and "past" not in mild, result.stdout
    same = livecells_cli("report", "--store", str(release), "--compare", str(release))
    assert same.returncode == 0, same


def test_every_device_is_kept_and_shown_and_a_cache_build_keeps_both(builds):
    devices = json.loads(builds["third_store"])["sessions"]["alpha"]["devices"]
    cpu = builds["first_store"]["provenance"]["device"]
    assert set(devices) == {cpu, FAKE_DEVICE}
    for name in ("third", "cached"):
        page = builds[name][0]
        for code in ("x = 1", "sleep(0.02)"):
            line = meta(cell_with(page, code))[-1]
            assert f"{FAKE_DEVICE} (CPU)" in line and f"{cpu} (CPU)" in line, line
            assert line.index(FAKE_DEVICE) < line.index(cpu)  # the shown result's device first
        line = meta(cell_with(page, "sleep(0.02)"))[-1]
        assert re.search(r"\(CPU\) 0\.02\d\d s \(20\d\d-\d\d-\d\d\)", line), line
    # The CPU-only cache build ran nothing, changed no byte of the store, and shows both.
    assert builds["cached_store"] == builds["third_store"]
    assert "livecells.timing" not in builds["cached"][1]


def test_the_report_has_a_device_table_and_a_chart(builds):
    cpu = builds["first_store"]["provenance"]["device"]
    assert cpu == FIRST_CPU
    report = builds["third_report"]
    table = report.split("== run time per device", 1)[1].splitlines()
    assert table[1].index(FAKE_DEVICE) < table[1].index(cpu), table[1]  # the shown result's device first
    row = table[2].split()
    assert row[:2] == ["index", "[alpha]"] and len(row) == 6 and row[3] == row[5] == "s", row
    chart = builds["third_chart"]
    assert chart.startswith("<svg") and chart.count("<rect") == 4  # a legend and a bar per device
    assert f"{FAKE_DEVICE} (CPU):" in chart and f"{cpu} (CPU):" in chart
    table = builds["third_live_report"].select_one("table.livecells-report-devices")
    headers = [th.get_text() for th in table.select("th")]
    assert headers == ["Session", f"{FAKE_DEVICE} (CPU)", f"{cpu} (CPU)"], headers
    assert re.fullmatch(r"index \[alpha\]( \d\.\d+\xa0s){2}", " ".join(td.get_text() for td in table.select("td")))
