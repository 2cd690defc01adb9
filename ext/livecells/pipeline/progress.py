"""The one live line that says how execution goes, drawn as Sphinx's own ``status_iterator`` does:
redrawn in place on a terminal that can, a line per step when verbose or when it cannot, nothing
under ``-q``."""

from __future__ import annotations

import time

from sphinx.util import logging
from sphinx.util.console import bold

try:  # Sphinx 8.2+: what status_iterator asks
    from sphinx.util.display import terminal_supports_colour
except ImportError:  # Sphinx 7.2 to 8.1: the same question under its old name
    from sphinx.util.console import color_terminal as terminal_supports_colour

logger = logging.getLogger(__name__)


class Progress:
    """``executing cells... [done/total done] page [framework] ... (seconds)``."""

    def __init__(self, total: int, verbosity: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.perf_counter()
        self.single_line = verbosity < 1 and terminal_supports_colour()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def show(self, text: str) -> None:
        if self.single_line:
            logger.info("\x1b[2K", nonl=True)
        line = f"[{self.done}/{self.total} done] {text} ({self.elapsed():.1f} s)"
        logger.info(bold("executing cells... ") + line, nonl=True)
        logger.info("\r" * self.single_line, nonl=self.single_line)

    def started_one(self, name: str, cells: int) -> None:
        self.show(f"{name}, {cells} cells")

    def finished_one(self, name: str, status: str) -> None:
        self.done += 1
        self.show(f"{name} {status}")

    def end(self) -> None:
        logger.info("")
