"""The timing line under a cell, from a result's run time and provenance: no Sphinx, no kernel."""

from __future__ import annotations

import pytest

from livecells.model.records import Provenance
from livecells.render.timing import TimingLine, format_date, format_seconds, no_result_line, timing_line

GPU = Provenance(date="2026-01-02T03:04:05+00:00", host="box", device="NVIDIA H200", framework_version="2.11.0")


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [(0.00251, "0.0025 s"), (0.99994, "0.9999 s"), (1.0, "1.00 s"), (12.345, "12.35 s"), (99.99, "99.99 s"),
     (100.0, "100 s"), (4321.6, "4322 s")],
)
def test_run_times_have_fewer_decimals_the_longer_they_are(seconds, shown):
    assert format_seconds(seconds) == shown


def test_dates_are_shown_in_utc_with_a_space():
    assert format_date("2026-01-02T03:04:05+00:00") == "2026-01-02 03:04:05 UTC"
    assert format_date("") == ""


def test_the_first_line_of_a_tab_names_device_and_version_the_next_only_the_time():
    first = timing_line(0.0025, GPU, "torch")
    assert first == TimingLine("0.0025 s · NVIDIA H200 · torch 2.11.0", ("livecells-meta", "livecells-live"))
    assert timing_line(0.3, GPU, "torch", environment=False) == TimingLine("0.3000 s", ("livecells-meta", "livecells-live"))


def test_a_stored_result_always_says_where_and_when_it_ran():
    line = timing_line(1.5, GPU, "torch", environment=False, stored=True)
    assert line == TimingLine(
        "1.50 s · NVIDIA H200 · torch 2.11.0 · stored result from 2026-01-02 03:04:05 UTC on box",
        ("livecells-meta", "livecells-stored"),
    )
    nowhere = Provenance(date="2026-01-02T03:04:05+00:00")
    assert timing_line(None, nowhere, "torch", stored=True).text == "stored result from 2026-01-02 03:04:05 UTC"


def test_a_stale_stored_result_says_it_was_made_for_other_code():
    line = timing_line(1.5, GPU, "torch", stored=True, stale=True)
    assert line.text.endswith(" · made for other code, settings or :depends: files than the page has now")
    # Staleness is a property of stored results only: a live one was made for this very code.
    assert "other code" not in timing_line(1.5, GPU, "torch", stale=True).text


def test_a_cell_of_several_frameworks_labels_each_line():
    line = timing_line(0.5, GPU, "mxnet", label="MXNet", environment=False)
    assert line.text == "MXNet · 0.5000 s"


def test_without_time_device_or_version_there_is_no_line():
    assert timing_line(None, GPU, "torch", environment=False) is None
    assert timing_line(None, Provenance(), "torch") is None
    assert timing_line(None, Provenance(device="cpu"), "torch").text == "cpu"


def test_a_cell_without_a_result_says_why_or_nothing():
    recorded = no_result_line("livecells_execute is 'off'", recorded=True)
    assert recorded == TimingLine(
        "recorded output, from the page's source (not run: livecells_execute is 'off')", ("livecells-meta",)
    )
    assert no_result_line("", recorded=True).text == "recorded output, from the page's source (not run in this build)"
    assert no_result_line("its kernel did not start", recorded=False) == TimingLine(
        "not run: its kernel did not start", ("livecells-not-run",)
    )
    assert no_result_line("", recorded=False) is None
