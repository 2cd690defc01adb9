"""A page's cells as plain data: what the read stage hands to every later stage.

:class:`PagePlan` is one page's cells in document order with its ``live-settings``;
:class:`SessionPlan` is what one kernel runs (one page, one framework); :class:`CellPlan` is
one cell as those sessions see it. Nothing here knows Sphinx: a Dask worker unpickles these.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from livecells.model.vocabulary import ExecuteMode, StderrMode


def code_sha(code: str) -> str:
    """What identifies a cell's code in session keys and the store."""
    return hashlib.sha256(code.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class CellPlan:
    """One cell as the sessions that run it see it."""

    index: int  # position among the page's cells
    frameworks: tuple[str, ...]  # resolved: never "all"
    code: str
    line: int  # the directive's line in the source
    code_line: int  # the line of the first line of code
    timeout: float | None = None
    raises: tuple[str, ...] | None = None
    stderr: StderrMode = StderrMode.SHOW
    #: The file the cell is written in (an ``include``d one, say); "" = the page's own.
    source: str = ""
    #: The expressions of the ``only`` directives around the cell: it runs only in builds whose
    #: tags satisfy them all (``.. only:: latex`` cells do not run in HTML builds).
    only: tuple[str, ...] = ()
    #: The frameworks it names that livecells_frameworks does not have.
    unknown: tuple[str, ...] = ()
    #: ``livecells_allow_errors``: any error it raises is expected (it may also run cleanly).
    allow_errors: bool = False
    #: Timed runs of a cell safe to run again (``:repeat:``; 1: run once, as any cell), after
    #: ``warmup`` runs; the page shows the last run's output.
    repeat: int = 1
    warmup: int = 0
    #: The keyed cell options that have no field of their own (read/cell_options.py's
    #: ``EXTRA_KEYED``): ``(name, value)`` pairs, in the session key.
    options: tuple[tuple[str, Any], ...] = ()

    def option(self, name: str, default: Any = None) -> Any:
        """The value of keyed cell option ``name`` (one of :attr:`options`), else ``default``."""
        return dict(self.options).get(name, default)

    def location(self, line: int | None = None) -> str:
        """``file:line`` for a warning about this cell (``line``: default, the directive's)."""
        return f"{self.source}:{self.line if line is None else line}"

    def included(self, tags: Any) -> bool:
        """Whether a build with ``tags`` (Sphinx's :class:`~sphinx.util.tags.Tags`) shows the cell."""
        if tags is None or not self.only:
            return True
        try:
            return all(tags.eval_condition(expr) for expr in self.only)
        except Exception:  # Sphinx warns about a bad expression itself, and keeps it
            return True

    def expects(self, ename: str) -> bool:
        """Whether ``:raises:`` makes an error named ``ename`` expected (bare ``:raises:``: any)."""
        if self.allow_errors:
            return True
        if self.raises is None:
            return False
        return not self.raises or ename in self.raises or ename.rsplit(".", 1)[-1] in self.raises

    @property
    def code_sha(self) -> str:
        return code_sha(self.code)


@dataclass(frozen=True)
class PageSettings:
    gpus: int | None = None
    timeout: float | None = None
    depends: tuple[str, ...] = ()
    #: ``:execute:``: how the page runs, whatever ``livecells_execute`` says (see
    #: :meth:`~livecells.model.vocabulary.ExecuteMode.for_page`); None: as the build.
    execute: ExecuteMode | None = None


@dataclass(frozen=True)
class PagePlan:
    """A page's cells in document order, and its settings."""

    docname: str
    source: str  # path of the page's source file
    cells: tuple[CellPlan, ...]
    settings: PageSettings = field(default_factory=PageSettings)

    @property
    def frameworks(self) -> list[str]:
        seen: dict[str, None] = {}
        for cell in self.cells:
            seen.update(dict.fromkeys(cell.frameworks))
        return list(seen)

    def session(self, framework: str, tags: Any = None) -> SessionPlan:
        """The framework's session; with the build's ``tags``, only the cells the build shows."""
        return SessionPlan(
            docname=self.docname,
            framework=framework,
            source=self.source,
            cells=tuple(c for c in self.cells if framework in c.frameworks and c.included(tags)),
            settings=self.settings,
        )

    def sessions(self, order: Iterable[str], tags: Any = None) -> list[SessionPlan]:
        """One session per framework the page uses (and the build shows), in configured order."""
        used = set(self.frameworks)
        found = [self.session(fw, tags) for fw in order if fw in used]
        return [s for s in found if s.cells]


@dataclass(frozen=True)
class SessionPlan:
    """What one kernel must run: one page's cells for one framework, in order."""

    docname: str
    framework: str
    source: str
    cells: tuple[CellPlan, ...]
    settings: PageSettings

    @property
    def cwd(self) -> str:
        return os.path.dirname(self.source)

    @property
    def name(self) -> str:
        return f"{self.docname} [{self.framework}]"
