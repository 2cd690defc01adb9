"""Every device's timings side by side: the report's device × page table and its chart.

From the sessions' records (each holds its latest timings on every device it ran on, see
:meth:`~livecells.model.records.SessionRecord.all_devices`): per (page, framework) session, the
sum of its cells' times on each device. The chart is an SVG livecells writes itself (no
plotting library in the build). Pure: no Sphinx, so the build's report.txt and the command line
share it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from html import escape

from livecells.model.records import SessionRecord
from livecells.model.text import one_line
from livecells.model.timings import DeviceTimings, format_seconds

#: Bar colours, one per device (colour-blind safe; as the live-report chart's).
PALETTE = ("#4477aa", "#ee6677", "#228833", "#ccbb44", "#66ccee", "#aa3377")

Rows = list[tuple[str, dict[str, float | None]]]
#: What :func:`device_rows` gives: the devices' labels, in order, and the rows.
DeviceRows = tuple[list[str], Rows]


def device_rows(records: Mapping[tuple[str, str], SessionRecord]) -> DeviceRows:
    """The devices (labels, in :func:`device_order`) and, per session ``page [framework]``,
    its cells' summed time on each device it ran on: what :func:`device_table` and
    :func:`device_chart` show (computed once for both: a book's every record)."""
    shown: Counter[str] = Counter()
    rows: Rows = []
    for (page, framework), record in sorted(records.items()):
        times: dict[str, float | None] = {}
        own = record.timings()
        for timings in record.all_devices(own).values():
            times[_label(timings)] = timings.seconds()
        if own is not None:
            shown[_label(own)] += 1
        if times:
            rows.append((one_line(f"{page} [{framework}]", 120), times))
    return device_order({d for _, times in rows for d in times}, shown), rows


def device_order(devices: Iterable[str], shown: Mapping[str, int]) -> list[str]:
    """The columns' order: the devices whose results the pages show (``shown``: how many
    sessions show each) first, most first, as a cell's ``:timings: all-devices`` line puts the
    shown result's device first; then the others by name. It rests on the records alone, so
    the same store gives the same table on any machine."""
    return sorted(devices, key=lambda d: (-shown.get(d, 0), d))


def _label(timings: DeviceTimings) -> str:
    return one_line(timings.label, 80)  # stored text: no controls, not too long


def device_table(found: DeviceRows) -> list[str]:
    """The report's section of :func:`device_rows`: one row per session, one column per device
    (cells' time summed); none while every session ran on one device (the session table says
    it all)."""
    devices, rows = found
    if len(devices) < 2:
        return []
    header = ["session", *devices]
    table = [header] + [
        [name, *(format_seconds(t) if (t := times.get(d)) is not None else "–" for d in devices)]
        for name, times in rows
    ]
    widths = [max(len(row[n]) for row in table) for n in range(len(header))]
    lines = ["== run time per device (the cells' times summed; the latest run on each device)"]
    for row in table:
        lines.append("  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip())
    return [*lines, ""]


def device_chart(found: DeviceRows) -> str | None:
    """An SVG bar chart of :func:`device_rows`: per session, one bar per device (None: no data)."""
    devices, rows = found
    if not rows:
        return None
    colours = {d: PALETTE[n % len(PALETTE)] for n, d in enumerate(devices)}
    longest = max((t for _, times in rows for t in times.values() if t is not None), default=0.0) or 1.0
    label_w, bar_w, bar_h, gap = 220, 360, 14, 10
    legend_h = 18 * len(devices) + 8
    height = legend_h + sum(bar_h * len(devices) + gap for _ in rows) + 10
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{label_w + bar_w + 90}" height="{height}" '
        'font-family="sans-serif" font-size="11" role="img">',
        "<title>Run time per device and session</title>",
    ]
    for n, device in enumerate(devices):
        y = 4 + 18 * n
        out.append(f'<rect x="4" y="{y}" width="12" height="12" fill="{colours[device]}"/>')
        out.append(f'<text x="22" y="{y + 10}">{escape(device)}</text>')
    y = legend_h
    for name, times in rows:
        out.append(f'<text x="4" y="{y + bar_h - 3}">{escape(name)}</text>')
        for device in devices:
            seconds = times.get(device)
            if seconds is not None:
                width = max(1.0, bar_w * seconds / longest)
                out.append(
                    f'<rect x="{label_w}" y="{y}" width="{width:.1f}" height="{bar_h - 2}" '
                    f'fill="{colours[device]}"><title>{escape(device)}: {format_seconds(seconds)}</title></rect>'
                )
                out.append(f'<text x="{label_w + width + 4:.1f}" y="{y + bar_h - 3}">{format_seconds(seconds)}</text>')
            y += bar_h
        y += gap
    out.append("</svg>")
    return "\n".join(out) + "\n"
