"""The timing line under a cell, and the formats of run times and dates that the report shares.

Pure: text from a result's run time and its session's provenance, with no Sphinx, so that the
line's look is decided (and tested) here alone. :mod:`.cells` puts the line in the page; it
decides which cell of a tab is the first with a result, the one whose line names the device and
the framework version (a stored result always names them: it may come from another machine).
"""

from __future__ import annotations

from dataclasses import dataclass

from livecells.model.records import Provenance
from livecells.model.vocabulary import Origin

SEPARATOR = " · "


@dataclass(frozen=True)
class TimingLine:
    """The line's text and its CSS classes."""

    text: str
    classes: tuple[str, ...]


def format_seconds(value: float) -> str:
    """A run time as the page and the report show it: 4 decimals under a second, fewer above."""
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value:.4f} s"


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
) -> TimingLine | None:
    """The line under a cell that has a result; None when it would be empty.

    ``seconds``: the run time to show (None: none, or the cell says ``:no-timing:``). ``label``:
    the framework's label, for a cell that shows several frameworks' lines. ``environment``: name
    the device and the framework version (``version_module`` and its version). ``stored``: the
    result comes from the store, so the line says when and where it ran; ``stale``: and that it
    was made for other code. ``host``: a stored result's line names the machine it ran on
    (``livecells_show_host``).
    """
    parts = [label] if label else []
    if seconds is not None:
        parts.append(format_seconds(seconds))
    if environment or stored:
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


def no_result_line(reason: str, recorded: bool) -> TimingLine | None:
    """The line under a cell without a result: it shows its ``recorded`` output from the page's
    source, or nothing; ``reason``: why its session did not run ("" when none was given)."""
    if recorded:
        why = f"not run: {reason}" if reason else "not run in this build"
        return TimingLine(f"recorded output, from the page's source ({why})", ("livecells-meta",))
    if reason:
        return TimingLine(f"not run: {reason}", ("livecells-not-run",))
    return None
