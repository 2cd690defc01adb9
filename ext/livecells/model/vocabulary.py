"""The words livecells writes: statuses, origins, modes and warning subtypes, one enum each.

Each member is its word (``class X(str, Enum)``, as ``enum.StrEnum`` does from Python 3.11): it
equals, hashes, formats and serialises to JSON as that string, so the store's JSON, summary.json
and the warnings' ``livecells.<subtype>`` read as they always have, and a typo in code is an
``AttributeError`` instead of a word nobody checks. The store's schema checks stored statuses
against these (:mod:`livecells.store.schema`).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Vocabulary(str, Enum):
    """A closed set of words; ``str(member)`` and ``f"{member}"`` are the word itself."""

    def __str__(self) -> str:
        return str(self.value)

    @classmethod
    def words(cls) -> tuple[str, ...]:
        return tuple(member.value for member in cls)


class CellStatus(Vocabulary):
    """A cell's status: it ran cleanly, raised, ran past its timeout, its kernel died, or it did
    not run."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    DIED = "died"
    NOT_RUN = "not-run"


class SessionStatus(Vocabulary):
    """A session's status: all its cells ran cleanly (or raised what they expected), one raised,
    one timed out, its kernel died, or it could not run at all (``failed``: the record's message
    says why). ``not-run`` is no stored status: a build's outcome says it of a session that
    shows no record (:attr:`livecells.model.records.SessionOutcome.status`)."""

    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    CRASHED = "crashed"
    FAILED = "failed"
    NOT_RUN = "not-run"


#: The statuses a stored cell and session may have.
STORED_CELL_STATUSES = CellStatus.words()
STORED_SESSION_STATUSES = tuple(s.value for s in SessionStatus if s is not SessionStatus.NOT_RUN)


class Origin(Vocabulary):
    """Where the results a page shows for a session come from: this build ran it, the store kept
    it, or neither (the page shows its recorded outputs, if any)."""

    RUN = "run"
    STORE = "store"
    RECORDED = "recorded"

    @property
    def label(self) -> str:
        """How the report's table names it ("" for none)."""
        return {"run": "this build", "store": "store"}.get(self.value, "")

    @property
    def css_class(self) -> str:
        """The class of a timing line for results of this origin."""
        return {"run": "livecells-live", "store": "livecells-stored"}.get(self.value, "livecells-recorded")


class ExecuteMode(Vocabulary):
    """``livecells_execute``: run what changed, run everything, never run (use the store), or
    never run (show the recorded outputs)."""

    AUTO = "auto"
    FORCE = "force"
    CACHE = "cache"
    OFF = "off"

    @property
    def runs(self) -> bool:
        """Whether a build in this mode may run sessions."""
        return self in {ExecuteMode.AUTO, ExecuteMode.FORCE}

    def for_page(self, page: ExecuteMode | None) -> ExecuteMode:
        """The mode of a page whose ``live-settings :execute:`` says ``page`` (None: nothing): a
        page may run less than the build (cache, off) or always (force), but a build that runs
        nothing (cache, off) runs none of its pages."""
        if page is None or page == ExecuteMode.AUTO or not self.runs:
            return self
        return page


class DeviceMode(Vocabulary):
    """``livecells_device``: GPUs if any, GPUs or nothing, CPU only."""

    AUTO = "auto"
    GPU = "gpu"
    CPU = "cpu"


class StderrMode(Vocabulary):
    """What a cell's stderr does (``:stderr:``, ``livecells_stderr``), with MyST-NB's levels of
    ``nb_output_stderr``: show it; leave it out (``hide`` is ``remove``); leave it out and warn;
    show it and warn; show it and log an error, or a critical message: both fail the cell in
    the verdict."""

    SHOW = "show"
    HIDE = "hide"
    WARN = "warn"
    REMOVE = "remove"
    REMOVE_WARN = "remove-warn"
    ERROR = "error"
    SEVERE = "severe"

    @property
    def shown(self) -> bool:
        """Whether the page shows the stream."""
        return self not in {StderrMode.HIDE, StderrMode.REMOVE, StderrMode.REMOVE_WARN}

    @property
    def reported(self) -> bool:
        """Whether a cell that writes to stderr is a located problem of the build."""
        return self in {StderrMode.WARN, StderrMode.REMOVE_WARN, StderrMode.ERROR, StderrMode.SEVERE}

    @property
    def fails(self) -> bool:
        """Whether a cell that writes to stderr counts as failed in the verdict."""
        return self in {StderrMode.ERROR, StderrMode.SEVERE}


class Granularity(Vocabulary):
    """What of a Python file of ``livecells_depends`` a session's key covers: the definitions
    the session reaches (:mod:`livecells.plan.helpers`), or the whole file."""

    DEFINITIONS = "definitions"
    FILES = "files"


class WarningSubtype(Vocabulary):
    """The subtype of every ``livecells.<subtype>`` warning (the table in docs/errors.rst)."""

    ERROR = "error"
    RAISES = "raises"
    TIMEOUT = "timeout"
    CRASH = "crash"
    KERNEL = "kernel"
    STDERR = "stderr"
    OUTPUT = "output"
    HTML = "html"
    CONFIG = "config"
    SYNC = "sync"
    DEPENDS = "depends"
    STORE = "store"
    DEVICE = "device"
    NOT_RUN = "not-run"
    STALE = "stale"
    EXECUTOR = "executor"
    RECORDED = "recorded"
    TIMING = "timing"
    VALUE = "value"
    HOSTED = "hosted"
    SLIDE = "slide"
    LIBRARY = "library"
    #: A name two pages of the library save in two ways (``suppress_warnings`` can hide these
    #: alone: d2l-en has nine on purpose).
    LIBRARY_REDEFINED = "library-redefined"


@dataclass(frozen=True)
class WarningMessage:
    """A warning to give, where its giver knows no location: its subtype and its text."""

    subtype: WarningSubtype
    message: str
