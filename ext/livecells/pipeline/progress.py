"""The one live line that says how execution goes, drawn as Sphinx's own ``status_iterator`` does:
redrawn in place on a terminal that can, a line per step when verbose or when it cannot, nothing
under ``-q``.

On a terminal the line also moves while a cell runs: it is redrawn every second with the time
since execution began, the cell a running session is at (its scheduler says when it sends one,
for a cluster's sessions through the workers' events) and an estimate of what is left, from the durations the store
keeps of each session's last run (the figures the scheduler orders sessions by). It is cut to
the terminal's width, so that it stays one line.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Awaitable, Callable, Sequence
from contextlib import suppress
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sphinx.util import logging
from sphinx.util.console import bold

try:  # Sphinx 8.2+: what status_iterator asks
    from sphinx.util.display import terminal_supports_colour
except ImportError:  # Sphinx 7.2 to 8.1: the same question under its old name
    from sphinx.util.console import color_terminal as terminal_supports_colour

if TYPE_CHECKING:
    from livecells.execute.scheduler import SessionJob

logger = logging.getLogger(__name__)

PREFIX = "executing cells... "
#: Seconds between two redraws of the line while nothing else happens.
TICK = 1.0


@dataclass
class _Running:
    started: float
    cell: int = 0  # the cell it is at (1-based; 0: not told)


def duration(seconds: float) -> str:
    """``42 s``, ``3 min 05 s``: how long, to the second."""
    whole = max(0, round(seconds))
    return f"{whole} s" if whole < 100 else f"{whole // 60} min {whole % 60:02d} s"


class Progress:
    """``executing cells... [done/total done] page [framework] cell n/m (seconds, ~left)``.

    ``slots``: sessions at once (None: unknown, no estimate); ``tty``: redraw one line in place
    (default: when the build is not verbose and its terminal can); ``clock`` and ``columns``: the
    time and the terminal's width (tests give their own).
    """

    def __init__(
        self,
        jobs: Sequence[SessionJob],
        verbosity: int,
        slots: int | None = 1,
        *,
        tty: bool | None = None,
        clock: Callable[[], float] = time.perf_counter,
        columns: Callable[[], int] = lambda: shutil.get_terminal_size().columns,
    ) -> None:
        self.total = len(jobs)
        self.done = 0
        self.slots = slots  # sessions at once; None: unknown, no estimate
        self.clock = clock
        self.columns = columns
        self.started = clock()
        self.single_line = (verbosity < 1 and terminal_supports_colour()) if tty is None else tty
        #: Seconds each session not finished yet is expected to take (None: no history).
        self.pending: dict[int, float | None] = {id(job): job.estimate for job in jobs}
        self.running: dict[int, tuple[SessionJob, _Running]] = {}

    def elapsed(self) -> float:
        return self.clock() - self.started

    def left(self) -> float | None:
        """Seconds until the last session ends, if every unfinished one has a stored duration:
        what the running ones have left, and the rest shared by the slots."""
        now = self.clock()
        if not self.slots or any(estimate is None for estimate in self.pending.values()):
            return None
        running = [
            max(0.0, (self.pending[key] or 0.0) - (now - state.started))
            for key, (_, state) in self.running.items()
        ]
        waiting = [e or 0.0 for key, e in self.pending.items() if key not in self.running]
        return max(max(running, default=0.0), (sum(running) + sum(waiting)) / self.slots)

    def show(self, text: str) -> None:
        times = duration(self.elapsed()) if self.elapsed() >= 100 else f"{self.elapsed():.1f} s"
        left = self.left() if self.done < self.total else None
        if left is not None and left >= 0.5:  # none once the sessions outlast their estimates
            times += f", ~{duration(left)} left"
        line = f"[{self.done}/{self.total} done] {text} ({times})"
        if self.single_line:
            room = max(10, self.columns() - len(PREFIX) - 1)
            if len(line) > room:
                line = line[: room - 3] + "..."
            logger.info("\x1b[2K", nonl=True)
        logger.info(bold(PREFIX) + line, nonl=True)
        logger.info("\r" * self.single_line, nonl=self.single_line)

    def now_running(self) -> str:
        """The session running longest, the cell it is at, and how many others run."""
        if not self.running:
            return "waiting"
        job, state = min(self.running.values(), key=lambda pair: pair[1].started)
        text = job.plan.name
        if state.cell:
            text += f" cell {state.cell}/{len(job.plan.cells)}"
        others = len(self.running) - 1
        return text + (f" (+{others} running)" if others else "")

    def started_one(self, job: SessionJob) -> None:
        self.running[id(job)] = (job, _Running(self.clock()))
        self.show(self.now_running() if self.single_line else f"{job.plan.name}, {len(job.plan.cells)} cells")

    def cell(self, job: SessionJob, number: int, cells: int) -> None:
        """The session is sending its cell ``number`` of ``cells``."""
        if id(job) in self.running:
            self.running[id(job)][1].cell = number
        if self.single_line:
            self.show(self.now_running())

    def finished_one(self, job: SessionJob, status: str) -> None:
        self.done += 1
        self.running.pop(id(job), None)
        self.pending.pop(id(job), None)
        self.show(f"{job.plan.name} {status}")

    def tick(self) -> None:
        """Redraw the line (on a terminal only: elsewhere it would be a line per second)."""
        if self.single_line and self.running:
            self.show(self.now_running())

    async def around(self, work: Awaitable[None]) -> None:
        """Run a scheduler's ``work``, told of each cell it sends, redrawing the line meanwhile."""
        import asyncio  # here: a build that runs nothing does without it

        from livecells.execute.scheduler import cell_listener

        token = cell_listener.set(self.cell)
        ticker = asyncio.ensure_future(self._ticks()) if self.single_line else None
        try:
            await work
        finally:
            cell_listener.reset(token)
            if ticker is not None:
                ticker.cancel()
                with suppress(asyncio.CancelledError):
                    await ticker

    async def _ticks(self) -> None:
        import asyncio

        while True:
            await asyncio.sleep(TICK)
            self.tick()

    def end(self) -> None:
        logger.info("")
