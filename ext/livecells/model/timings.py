"""Repeated measurements and their comparison: the statistics every stage shares.

A cell run with ``:repeat: N`` (after ``:warmup: K`` untimed-for-the-record runs) has N samples;
its time is their median, its spread their interquartile range (IQR). The session's measurement
floor is the median time of an empty cell in the same session: a time within
:data:`FLOOR_MULTIPLE` floors is no precise figure. Drift compares a cell's time with the time
stored for the same code on the same device. Pure functions: no Sphinx, no kernels.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

#: A time under this many measurement floors is shown as "at the measurement floor".
FLOOR_MULTIPLE = 3.0
#: The empty cell timed for the floor: its warm-up runs and its samples.
FLOOR_CODE = "pass"
FLOOR_WARMUP = 1
FLOOR_SAMPLES = 5


def format_seconds(value: float) -> str:
    """A run time as the page and the report show it: 4 decimals under a second, fewer above."""
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value:.4f} s"


def median(samples: Sequence[float]) -> float:
    return float(statistics.median(samples))


def iqr(samples: Sequence[float]) -> float:
    """The interquartile range (Q3 - Q1, quartiles as numpy's default, linear); 0 for one sample."""
    if len(samples) < 2:
        return 0.0
    q1, _, q3 = statistics.quantiles(samples, n=4, method="inclusive")
    return float(q3 - q1)


def at_floor(seconds: float, floor: float | None) -> bool:
    """Whether ``seconds`` is too near the session's measurement ``floor`` to be a figure."""
    return floor is not None and floor > 0 and seconds < FLOOR_MULTIPLE * floor


@dataclass(frozen=True)
class Drift:
    """A cell's time now against the time stored for the same code on the same device."""

    index: int
    before: float
    now: float

    @property
    def ratio(self) -> float:
        return self.now / self.before if self.before > 0 else float("inf")

    def beyond(self, factor: float, floor: float) -> bool:
        """Slower or faster by more than ``factor``, by more than ``floor`` seconds (noise)."""
        if abs(self.now - self.before) < floor:
            return False
        ratio = self.ratio
        return ratio > factor or (ratio > 0 and 1 / ratio > factor)

    def describe(self) -> str:
        ratio = self.ratio
        how = f"{ratio:.2f}x slower" if ratio >= 1 else f"{1 / ratio:.2f}x faster"
        return f"{how} ({self.before:.4g} s before, {self.now:.4g} s now)"


@dataclass(frozen=True)
class CellTiming:
    """One cell's time in one run: which code, its time (a repeated cell's: the median of its
    ``samples``), and whether it ended well (only those are compared)."""

    index: int
    code_sha: str
    time: float | None
    samples: tuple[float, ...] = ()
    ok: bool = True


@dataclass(frozen=True)
class DeviceTimings:
    """A session's latest timings on one device: what a store keeps for every device the session
    ran on, so that a build elsewhere (a CPU machine, ``cache``) loses none of them."""

    device: str
    device_kind: str = ""
    date: str = ""
    framework_version: str = ""
    host: str = ""
    key: str = ""  # the session key it ran for
    floor: float | None = None
    cells: tuple[CellTiming, ...] = ()

    def cell(self, index: int, code_sha: str) -> CellTiming | None:
        """The cell at ``index`` if it ran the code ``code_sha`` and has a time."""
        for cell in self.cells:
            if cell.index == index and cell.code_sha == code_sha and cell.ok and cell.time is not None:
                return cell
        return None

    @property
    def label(self) -> str:
        """The device as the pages name it beside others: a CPU says so."""
        return f"{self.device} (CPU)" if self.device_kind == "cpu" and "CPU" not in self.device else self.device

    def seconds(self) -> float | None:
        times = [c.time for c in self.cells if c.time is not None]
        return sum(times) if times else None


def drifts(before: DeviceTimings, now: DeviceTimings) -> list[Drift]:
    """Each cell of ``now`` against the same code's time in ``before`` (the same device's)."""
    found = []
    for cell in now.cells:
        if not cell.ok or cell.time is None:
            continue
        old = before.cell(cell.index, cell.code_sha)
        if old is not None and old.time:  # a stored 0 s is no base for a ratio
            found.append(Drift(cell.index, old.time, cell.time))
    return found
