"""What executing a session gives, and what a build did: the records every stage hands on.

:class:`SessionRecord` is one executed (page, framework) session: a :class:`CellRecord` per cell
(its Jupyter outputs, run time, status) and where, when and on what it ran
(:class:`Provenance`). The execute stage makes them; the store keeps them (it alone turns them
into JSON and back, :mod:`livecells.store.codec`); render shows them.

:class:`SessionOutcome` is what this build did with a session (run it, took it from the store,
or did not run it, and why); :class:`BuildOutcome` holds them all, with this build's records.
The orchestration makes the outcome; render and the report read it (through the build
environment), and never decide anything again: one staleness rule (:func:`current_count`), one
count of what the pages show as failed, not run or stale (:func:`verdict`).

Outputs stay Jupyter's own JSON (nbformat v4 output dicts): they are the kernel's data, shown and
written to notebooks as they are. Nothing here knows Sphinx: Dask workers unpickle these.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from livecells.model.plans import CellPlan
from livecells.model.probe import Probe as Probe  # its home was here: imported from here too
from livecells.model.text import strip_ansi
from livecells.model.timings import CellTiming, DeviceTimings, iqr
from livecells.model.vocabulary import CellStatus, ExecuteMode, Origin, SessionStatus, WarningSubtype

#: IPython's name for a cell's code in a traceback: its execution count and the line.
_CELL_FRAME = re.compile(r"Cell In\[(\d+)\], line (\d+)")


@dataclass
class CellRecord:
    """One cell's result in one session."""

    status: CellStatus
    outputs: list[dict[str, Any]] = field(default_factory=list)  # nbformat v4 outputs
    time: float | None = None  # seconds, from the kernel's own clock
    execution_count: int | None = None
    error: dict[str, Any] | None = None  # ename, evalue, traceback
    index: int = -1  # the cell's position among the page's cells
    code_sha: str = ""  # the code it ran (see CellPlan.code_sha)
    #: The framework's sync code failed after this cell: its time may leave out device work.
    sync_error: str | None = None
    #: Its error is one the cell's ``:raises:`` expected when it ran.
    expected: bool = False
    #: A repeated cell's (``:repeat:``) timed runs, in order; ``time`` is their median.
    samples: list[float] = field(default_factory=list)
    #: Its ``:warmup:`` runs' times, before the samples (kept, never part of the figure).
    warmup: list[float] = field(default_factory=list)

    @property
    def spread(self) -> float | None:
        """The IQR of a repeated cell's samples (None: it ran once)."""
        return iqr(self.samples) if len(self.samples) > 1 else None

    @property
    def ename(self) -> str:
        return str((self.error or {}).get("ename", ""))

    @property
    def evalue(self) -> str:
        return str((self.error or {}).get("evalue", ""))

    def error_line(self) -> int | None:
        """The line inside the cell where its error was raised (1-based), if the traceback says."""
        error = self.error or {}
        traceback = [t for t in error.get("traceback", []) if isinstance(t, str)]
        found = None
        for entry in traceback:
            for match in _CELL_FRAME.finditer(strip_ansi(entry)):
                if self.execution_count is None or int(match.group(1)) == self.execution_count:
                    found = int(match.group(2))
        if found is None and self.ename in {"SyntaxError", "IndentationError", "TabError"}:
            for entry in traceback:
                match = re.search(r"line (\d+)", strip_ansi(entry))
                if match:
                    found = int(match.group(1))
        return found

    def stderr_text(self) -> str:
        """What the cell wrote to stderr, without colour codes."""
        return strip_ansi("".join(str(o.get("text", "")) for o in self.outputs if o.get("name") == "stderr"))

    def stderr_failed(self, plan: CellPlan | None) -> bool:
        """Whether the cell wrote to stderr under a ``:stderr:`` (or ``livecells_stderr``) of
        ``error`` or ``severe``: it counts as failed. Without the page's plan, nothing says so."""
        return plan is not None and plan.stderr.fails and bool(self.stderr_text().strip())

    def unexpected(self, plan: CellPlan | None = None) -> bool:
        """Whether the cell failed: it raised an error its ``:raises:`` does not expect (the
        plan's, when there is one; else what the run was told), ran past its timeout, or its
        kernel died in it. A cell that did not run is no error of its own: what stopped it is."""
        if self.status in {CellStatus.TIMEOUT, CellStatus.DIED}:
            return True
        if self.status != CellStatus.ERROR:
            return False
        return not (plan.expects(self.ename) if plan is not None else self.expected)


@dataclass
class Provenance:
    """Where, when and on what a session ran."""

    date: str = ""
    host: str = ""
    device: str = ""
    device_kind: str = "cpu"
    device_count: int = 0
    framework_version: str = ""
    python: str = ""
    kernel: str = ""
    kernelspec: dict[str, str] = field(default_factory=dict)
    livecells: str = ""
    #: GPUs the session leased (0: it ran on CPU); a GPU result is never replaced by a CPU run.
    devices_leased: int = 0
    #: Private details of ipykernel or IPython that the kernel found not as livecells knows
    #: them, each with what it did instead (:func:`livecells.kernel_side.hook.fell_back`).
    fallbacks: list[str] = field(default_factory=list)
    #: Other keys found in a store file (kept as they are, written back unchanged).
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class SessionRecord:
    """One executed (page, framework) session."""

    framework: str
    key: str  # the session key it ran for (see livecells.plan.keys)
    environment: str  # the environment fingerprint's digest
    status: SessionStatus
    cells: list[CellRecord] = field(default_factory=list)
    provenance: Provenance = field(default_factory=Provenance)
    message: str | None = None  # why the session failed, if it did
    duration: float | None = None
    run_id: str = ""  # the build that ran it
    #: The measurement floor: the median time of an empty cell timed as the others, measured
    #: once in a session that repeats a cell (None: not measured); and its samples.
    floor: float | None = None
    floor_samples: list[float] = field(default_factory=list)
    #: The session's latest timings on each device it ran on, by device (this record's own
    #: among them once stored: see :meth:`with_devices`).
    devices: dict[str, DeviceTimings] = field(default_factory=dict)

    def timings(self) -> DeviceTimings | None:
        """This record's own timings, on its device (None: it names no device)."""
        if not self.provenance.device:
            return None
        return DeviceTimings(
            device=self.provenance.device,
            device_kind=self.provenance.device_kind,
            date=self.provenance.date,
            framework_version=self.provenance.framework_version,
            host=self.provenance.host,
            key=self.key,
            floor=self.floor,
            cells=tuple(
                CellTiming(c.index, c.code_sha, c.time, tuple(c.samples), c.status == CellStatus.OK)
                for c in self.cells
            ),
        )

    def all_devices(self, own: DeviceTimings | None = None) -> dict[str, DeviceTimings]:
        """Every device's latest timings the record knows: its own (``own``, if the caller has
        :meth:`timings` already) over the kept ones."""
        found = dict(self.devices)
        own = own or self.timings()
        if own is not None:
            found[own.device] = own
        return found

    def with_devices(self, previous: SessionRecord | None) -> SessionRecord:
        """This record keeping the other devices' timings ``previous`` (the stored record it
        replaces) knew; a device's timings are replaced only by a newer run on it."""
        found = previous.all_devices() if previous is not None else {}
        for name, timings in self.all_devices().items():
            if name not in found or timings.date >= found[name].date:
                found[name] = timings
        return replace(self, devices=found)

    def cell_seconds(self) -> float | None:
        times = [c.time for c in self.cells if c.time is not None]
        return sum(times) if times else None


def session_status(cells: Sequence[CellRecord], message: str | None = None) -> SessionStatus:
    """A session's status from its cells (those whose error was not expected): ``failed`` when it
    could not run (``message`` says why), else the worst of its cells."""
    statuses = {c.status for c in cells if not c.expected}
    if message:
        return SessionStatus.FAILED
    if CellStatus.DIED in statuses:
        return SessionStatus.CRASHED
    if CellStatus.TIMEOUT in statuses:
        return SessionStatus.TIMEOUT
    if CellStatus.ERROR in statuses:
        return SessionStatus.ERROR
    return SessionStatus.OK


def current_count(plan_cells: Sequence[CellPlan], record: SessionRecord | None) -> int:
    """How many of a session's cells (``plan_cells``, in order) still have their stored result.

    The one staleness rule: state flows down a session, so a stored result belongs to its cell
    while that cell and every cell before it have the code they had when it ran. A change in
    cell 3 leaves cells 1-2 shown and drops 3 onwards.
    """
    if record is None:
        return 0
    count = 0
    for plan, cell in zip(plan_cells, record.cells):
        if cell.code_sha != plan.code_sha:
            break
        count += 1
    return count


#: The classes of cells the verdict counts against a book (``report --fail-on`` names them).
VERDICT_CLASSES = ("error", "not-run", "stale")


@dataclass(frozen=True)
class Verdict:
    """A session's cells that the page shows as failed, not run or stale, by cell index.

    The one count behind everything a build says about itself: its warnings (so ``-W``),
    ``livecells_raise_on_error``, summary.json, junit.xml, report.txt, ``live-report`` and the
    exit status of ``python -m livecells report``. Each cell is in one list at most.
    """

    failed: tuple[int, ...] = ()
    not_run: tuple[int, ...] = ()
    stale: tuple[int, ...] = ()


def verdict(
    record: SessionRecord | None,
    plan_cells: Sequence[CellPlan] | None = None,
    shown: int | None = None,
    *,
    stale: bool = False,
) -> Verdict:
    """What the page shows of a session's cells (``plan_cells``, in order), whatever made
    ``record``: this build, the store or nobody (None: the page shows recorded outputs).

    - **failed**: the result shown is an error its ``:raises:`` does not expect, a timeout or a
      dead kernel (:meth:`CellRecord.unexpected`), or it wrote to stderr where its stderr mode
      is ``error`` or ``severe`` (:meth:`CellRecord.stderr_failed`);
    - **not run**: no result of a run is shown (beyond the first ``shown`` cells, by default
      :func:`current_count`: the recorded output or a note is), or the result is "not-run";
    - **stale**: the result shown was stored for another session key (``stale``: code further
      down, settings or ``:depends:`` files have changed since).

    Without ``plan_cells`` (the command line has no page) every cell of the record counts as
    shown, with the ``:raises:`` its run was told.
    """
    failed: list[int] = []
    not_run: list[int] = []
    outdated: list[int] = []
    if plan_cells is None:
        pairs: list[tuple[int, CellPlan | None, CellRecord | None]] = [
            (cell.index, None, cell) for cell in (record.cells if record else [])
        ]
    else:
        count = current_count(plan_cells, record) if shown is None else shown
        results = record.cells if record is not None else []
        pairs = [
            (plan.index, plan, results[n] if n < min(count, len(results)) else None)
            for n, plan in enumerate(plan_cells)
        ]
    for index, plan, result in pairs:
        if result is None or result.status == CellStatus.NOT_RUN:
            not_run.append(index)
        elif result.unexpected(plan) or result.stderr_failed(plan):
            failed.append(index)
        elif stale:
            outdated.append(index)
    return Verdict(tuple(failed), tuple(not_run), tuple(outdated))


@dataclass
class Problem:
    """A located problem of a session: a warning in the log, a line in report.txt."""

    kind: WarningSubtype
    location: str  # path:line
    message: str
    traceback: str = ""


@dataclass
class SessionOutcome:
    """What this build did with one (page, framework) session, and what the pages show of it.

    The one row shape of every report of sessions: summary.json and junit.xml, ``live-report``,
    and ``python -m livecells report`` (which makes them from the store: :func:`stored_outcome`).
    """

    page: str
    framework: str
    source: str
    #: Where the page's results come from (``recorded``: none shown, the page's own recorded
    #: outputs, if any).
    origin: Origin
    #: This build's verdict: the shown record's status; "failed" when the session could not run
    #: here (its framework has no usable kernel: an error for CI); else "not-run".
    status: SessionStatus
    cells: int = 0  # the session's cells now
    #: Cells whose result the page shows (see current_count); fewer than ``cells`` when stale.
    current: int = 0
    reason: str = ""  # why it did not run in this build, if it did not
    store_damaged: bool = False  # the page's store file could not be read
    problems: list[Problem] = field(default_factory=list)
    # The latest record of the session (this build's, else the store's), shown or not: what the
    # report says of it ("how its cells last ran").
    record_status: SessionStatus | None = None  # None when there is none
    record_cells: int = 0
    stale: bool = False  # it was made for other code or :depends: files than the page has now
    #: Its cells the page shows as failed, not run or stale: what every verdict counts.
    shown: Verdict = field(default_factory=Verdict)
    #: The page shows no result of a run by choice (``:execute: off``, ``livecells_execute_exclude``):
    #: its cells not run or stale fail nothing, as with ``livecells_execute = 'off'``.
    by_choice: bool = False
    duration: float | None = None
    seconds: float | None = None  # its cells' run time, summed
    device: str = ""
    framework_version: str = ""
    date: str = ""
    host: str = ""

    def note_record(self, record: SessionRecord, key: str | None = None) -> None:
        """Take what the session's latest record says of how it last ran (``key``: the
        session's key now; a record made for another is stale)."""
        self.record_status = record.status
        self.record_cells = len(record.cells)
        self.stale = key is not None and record.key != key
        self.duration = record.duration
        self.seconds = record.cell_seconds()
        self.device = record.provenance.device
        self.framework_version = record.provenance.framework_version
        self.date = record.provenance.date
        self.host = record.provenance.host

    @property
    def latest_origin(self) -> Origin:
        """Where the session's latest record comes from (``recorded``: there is none)."""
        if self.record_status is None:
            return Origin.RECORDED
        return Origin.RUN if self.origin == Origin.RUN else Origin.STORE

    @property
    def errors(self) -> int:
        return len(self.shown.failed)

    @property
    def not_run(self) -> int:
        return len(self.shown.not_run)

    @property
    def stale_cells(self) -> int:
        return len(self.shown.stale)

    def failing(self, execute: ExecuteMode, classes: Sequence[str] = VERDICT_CLASSES) -> dict[str, int]:
        """Its cells that fail the verdict, by class of ``classes`` (those with none left out):
        ``error``, the cells shown failed, and 1 for a session that could not run; ``not-run``
        and ``stale``, unless the page shows what it shows by choice (:attr:`by_choice`, or
        execution ``off`` for the build). What ``livecells_raise_on_error`` and ``python -m
        livecells report --fail-on`` count, both."""
        chosen = self.by_choice or execute == ExecuteMode.OFF
        counts = {
            "error": self.errors + (self.status == SessionStatus.FAILED),
            "not-run": 0 if chosen else self.not_run,
            "stale": 0 if chosen else self.stale_cells,
        }
        return {name: counts[name] for name in classes if counts[name]}


@dataclass
class BuildOutcome:
    """Everything this build decided and did, for render, the report and the summary files.

    Kept on the build environment; only the light part is pickled with it (:meth:`__getstate__`):
    this build's records hold every output, and belong to this build alone.
    """

    run_id: str = ""
    execute: ExecuteMode = ExecuteMode.AUTO
    store: str = ""  # the store's folder
    sessions: dict[tuple[str, str], SessionOutcome] = field(default_factory=dict)
    #: The records the pages show, by (page, framework): those of the sessions this build ran
    #: (shown even when the store could not be written), and those the build read from the
    #: store for the sessions it took from there (each store file is read once per build).
    records: dict[tuple[str, str], SessionRecord] = field(default_factory=dict)
    ran: int = 0
    cached: int = 0
    skipped: int = 0
    failed: int = 0
    seconds: float = 0.0
    #: Cells of no known framework that the pages show (not run), by page: each one's problem.
    unknown: list[tuple[str, Problem]] = field(default_factory=list)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["records"] = {}
        return state

    def session(self, page: str, framework: str) -> SessionOutcome | None:
        return self.sessions.get((page, framework))

    def cell_counts(self) -> tuple[int, int, int]:
        """The cells the pages show as failed, not run and stale (see :func:`verdict`)."""
        sessions = self.sessions.values()
        return (
            sum(s.errors for s in sessions),
            sum(s.not_run for s in sessions) + len(self.unknown),
            sum(s.stale_cells for s in sessions),
        )

    def failing(self, classes: Sequence[str] = VERDICT_CLASSES) -> list[tuple[SessionOutcome, dict[str, int]]]:
        """The sessions with cells that fail the verdict in ``classes``, with their counts
        (:meth:`SessionOutcome.failing`), by page and framework."""
        found = ((s, s.failing(self.execute, classes)) for _, s in sorted(self.sessions.items()))
        return [(session, counts) for session, counts in found if counts]

    def unknown_failing(self, classes: Sequence[str] = VERDICT_CLASSES) -> int:
        """The cells of no known framework that fail the verdict: not run, unless execution is off."""
        return len(self.unknown) if "not-run" in classes and self.execute != ExecuteMode.OFF else 0

    def failures(self, classes: Sequence[str] = VERDICT_CLASSES) -> int:
        """What fails the build under ``livecells_raise_on_error`` (and ``report --fail-on``
        over ``classes``): cells shown failed, not run or stale, and sessions that could not
        run. With execution off (for the build, or for a page: :attr:`SessionOutcome.by_choice`)
        the pages show what they show by choice: their cells count as not run, and fail nothing."""
        return sum(sum(counts.values()) for _, counts in self.failing(classes)) + self.unknown_failing(classes)


def stored_outcome(page: str, framework: str, record: SessionRecord) -> SessionOutcome:
    """A stored session as it is reported without a build (the command line): its record's
    status, and its cells counted as a build counts them without the page (see :func:`verdict`).
    A session with a message did not run (its kernel did not start): a build warns of it as a
    failure whatever status the file gives it, so it is "failed" here too."""
    outcome = SessionOutcome(
        page=page,
        framework=framework,
        source="",
        origin=Origin.STORE,
        status=SessionStatus.FAILED if record.message else record.status,
        reason=record.message,
        cells=len(record.cells),
        current=len(record.cells),
        shown=verdict(record),
    )
    outcome.note_record(record)
    return outcome


#: The build environment's attribute that holds the build's outcome.
OUTCOME_ATTRIBUTE = "livecells_outcome"

#: The file, in the doctree folder, of the pages whose writing gave a livecells warning (one name
#: a line): the next build writes them again, so that its warnings (and -W) say what they show.
RENDER_WARNED = "livecells-render-warned"


def outcome_of(env: Any) -> BuildOutcome:
    """The outcome the build keeps on its environment (an empty one before any build ran)."""
    found = getattr(env, OUTCOME_ATTRIBUTE, None)
    return found if isinstance(found, BuildOutcome) else BuildOutcome()
