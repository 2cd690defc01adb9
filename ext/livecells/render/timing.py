"""The timing line under a cell, and the formats of run times and dates that the report shares.

Pure: text from a result's run time and its session's provenance, with no Sphinx, so that the
line's look is decided (and tested) here alone. :mod:`.cells` puts the line in the page; it
decides which cell of a tab is the first with a result, the one whose line names the device and
the framework version (a stored result always names them: it may come from another machine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from livecells.model.records import Provenance
from livecells.model.timings import FLOOR_MULTIPLE, DeviceTimings, at_floor, format_seconds, iqr, median
from livecells.model.vocabulary import Origin

SEPARATOR = " · "


@dataclass(frozen=True)
class TimingLine:
    """The line's text and its CSS classes."""

    text: str
    classes: tuple[str, ...]


def _unit(value: float) -> tuple[float, str]:
    for scale, unit in ((1.0, "s"), (1e-3, "ms"), (1e-6, "µs")):
        if value >= scale:
            return scale, unit
    return 1e-9, "ns"


def _three_figures(value: float) -> int:
    """Decimals that give ``value`` (in its unit, 1 to 999) three significant figures."""
    return 0 if value >= 100 else 1 if value >= 10 else 2


def repeated_text(samples: Sequence[float], floor: float | None = None) -> str:
    """A repeated cell's time: ``2.51 ms ± 0.04 (median ± IQR of 7)``; one near the session's
    measurement ``floor`` is no figure: ``< 0.1 ms, at the measurement floor``."""
    value = median(samples)
    if at_floor(value, floor):
        assert floor is not None
        bound = FLOOR_MULTIPLE * floor
        scale, unit = _unit(bound)
        shown = bound / scale
        figure = f"{shown:.0f}" if shown >= 10 else f"{shown:.2g}"
        return f"< {figure} {unit}, at the measurement floor (median of {len(samples)})"
    scale, unit = _unit(value)
    decimals = _three_figures(value / scale)
    return (
        f"{value / scale:.{decimals}f} {unit} ± {iqr(samples) / scale:.{decimals}f} "
        f"(median ± IQR of {len(samples)})"
    )


def format_date(iso: str) -> str:
    """A stored ISO 8601 date as the page and the report show it: ``2026-01-02 03:04:05 UTC``."""
    return iso.replace("T", " ").replace("+00:00", " UTC")


def timing_line(
    seconds: float | None,
    provenance: Provenance,
    version_module: str,
    *,
    label: str = "",
    environment: bool = True,
    stored: bool = False,
    stale: bool = False,
    host: bool = True,
    samples: Sequence[float] = (),
    floor: float | None = None,
) -> TimingLine | None:
    """The line under a cell that has a result; None when it would be empty.

    ``seconds``: the run time to show (None: none, or the cell says ``:no-timing:``). ``label``:
    the framework's label, for a cell that shows several frameworks' lines. ``environment``: name
    the device and the framework version (``version_module`` and its version). ``stored``: the
    result comes from the store, so the line says when and where it ran; ``stale``: and that it
    was made for other code. ``host``: a stored result's line names the machine it ran on
    (``livecells_show_host``). ``samples``: a repeated cell's timed runs (its figure is their
    median and IQR, always with the device: see :func:`repeated_text`), ``floor``: its session's
    measurement floor.
    """
    parts = [label] if label else []
    repeated = seconds is not None and len(samples) > 1
    if repeated:
        parts.append(repeated_text(samples, floor))
    elif seconds is not None:
        parts.append(format_seconds(seconds))
    if environment or stored or repeated:
        if provenance.device:
            parts.append(provenance.device)
        if provenance.framework_version:
            parts.append(f"{version_module} {provenance.framework_version}")
    if stored:
        where = f" on {provenance.host}" if host and provenance.host else ""
        parts.append(f"stored result from {format_date(provenance.date)}{where}")
        if stale:
            parts.append("made for other code, settings or :depends: files than the page has now")
    if not parts:
        return None
    return TimingLine(SEPARATOR.join(parts), ("livecells-meta", (Origin.STORE if stored else Origin.RUN).css_class))


def devices_line(
    devices: Mapping[str, DeviceTimings], index: int, code_sha: str, version_module: str, first: str = ""
) -> TimingLine | None:
    """A cell's time on every device the store holds for its code (``:timings: all-devices``):
    ``NVIDIA H200 0.0025 s (torch 2.13.0, 2026-01-02) · Intel Xeon (CPU) 1.16 s (...)``; the
    device ``first`` (the one whose result the page shows) first, then the newest. A time at its
    session's measurement floor says so."""
    found = [(t, t.cell(index, code_sha)) for t in devices.values()]
    found = [(t, c) for t, c in found if c is not None and c.time is not None]
    if not found:
        return None
    found.sort(key=lambda pair: (pair[0].device != first, _newest_first(pair[0].date)))
    parts = []
    for timings, cell in found:
        assert cell.time is not None
        figure = format_seconds(cell.time)
        if len(cell.samples) > 1:
            figure = repeated_text(cell.samples, timings.floor)
        about = [f"{version_module} {timings.framework_version}" if timings.framework_version else "",
                 format_date(timings.date)[:10]]
        note = ", ".join(a for a in about if a)
        parts.append(f"{timings.label} {figure}" + (f" ({note})" if note else ""))
    return TimingLine(SEPARATOR.join(parts), ("livecells-meta", "livecells-devices"))


def _newest_first(date: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in date)


def no_result_line(reason: str, recorded: bool) -> TimingLine | None:
    """The line under a cell without a result: it shows its ``recorded`` output from the page's
    source, or nothing; ``reason``: why its session did not run ("" when none was given)."""
    if recorded:
        why = f"not run: {reason}" if reason else "not run in this build"
        return TimingLine(f"recorded output, from the page's source ({why})", ("livecells-meta",))
    if reason:
        return TimingLine(f"not run: {reason}", ("livecells-not-run",))
    return None
