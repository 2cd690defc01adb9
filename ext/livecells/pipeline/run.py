"""After Sphinx has read the pages: plan, decide, execute and store every session of the build.

Every (page, framework) session gets its key (:mod:`livecells.plan.keys`); the pure policy
(:func:`livecells.plan.decide.decide`) says which run; the scheduler runs them; each finished
session is repaired, written to the store at once (so an interrupted build keeps what finished)
and its problems become warnings located at the cell. What happened to every session is one
:class:`~livecells.model.records.SessionOutcome` in the build's
:class:`~livecells.model.records.BuildOutcome`, which render and the report read.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import hashlib
import os
import pickle
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sphinx.application import Sphinx
from sphinx.config import is_serializable
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.util import logging
from sphinx.util.matching import Matcher

from livecells.config import WARNING_TYPE, LivecellsConfig, get_config
from livecells.errors import ExecutorError, StoreError
from livecells.execute.devices import GPU, detect_gpus
from livecells.execute.executors import Capacity, Executor, Resources, executor_for
from livecells.model.plans import CellPlan, PagePlan, SessionPlan
from livecells.model.records import (
    OUTCOME_ATTRIBUTE,
    BuildOutcome,
    Problem,
    SessionOutcome,
    SessionRecord,
    current_count,
    verdict,
)
from livecells.model.vocabulary import DeviceMode, ExecuteMode, Granularity, Origin, SessionStatus, WarningSubtype
from livecells.pipeline.problems import report_session, report_unshown
from livecells.pipeline.processes import Processes, sigterm_as_interrupt
from livecells.pipeline.progress import Progress
from livecells.pipeline.timings import drift_problems, keep_devices
from livecells.plan.decide import Decision, Environment, Mode, decide
from livecells.plan.helpers import Helpers, ModuleCache, UsageCache
from livecells.plan.keys import FileHashes, RunSettings, depends_split, files_digest, session_keys
from livecells.read.collect import plans, session_plans
from livecells.read.env_state import env_state
from livecells.sphinx_util import origin
from livecells.store import OutputStore, repaired

if TYPE_CHECKING:  # the execute stage (jupyter_client) is imported only by builds that run cells
    from livecells.execute.scheduler import Scheduler, SessionJob

logger = logging.getLogger(__name__)

@dataclass
class BuildState:
    """What the build process keeps between Sphinx's events (not handed to any stage)."""

    run_id: str = field(default_factory=lambda: os.urandom(16).hex())
    processes: Processes = field(default_factory=Processes)
    #: Where sessions run (livecells_executor), and what it said when the build started.
    executor: Executor | None = None
    capacity: Capacity | None = None
    #: The digest of the files livecells_depends matches, and its patterns that matched none.
    book_depends: tuple[str, list[str]] | None = None
    #: Its Python files read as helper modules (livecells_depends_granularity = "definitions").
    book_helpers: Helpers | None = None
    #: Per page: the plan its keys were computed from, and :func:`page_keys`' answer (the
    #: pages Sphinx did not read again have the same plan at ``env-updated``).
    keys: dict[str, tuple[PagePlan, tuple[dict[str, str], list[str]]]] = field(default_factory=dict)


def build_state(app: Sphinx) -> BuildState:
    if not hasattr(app, "livecells_state"):
        app.livecells_state = BuildState()  # type: ignore[attr-defined]
    return app.livecells_state  # type: ignore[attr-defined,no-any-return]


def executor_of(app: Sphinx) -> Executor:
    """The executor ``livecells_executor`` names, found once per build; one it does not name (an
    unknown scheme) is a config warning at its line, and sessions run locally."""
    state = build_state(app)
    if state.executor is None:
        value = get_config(app.env).executor
        try:
            state.executor = executor_for(value)
            if is_serializable(value):  # what Sphinx pickles with its environment
                _check_picklable(value)
        except ExecutorError as err:
            shown = repr(value)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            location, given = origin(app, "executor")
            warn(f"livecells_executor = {shown}: {err}; using the default{given}", WarningSubtype.CONFIG, location)
            state.executor = executor_for("local")
            app.config.livecells_executor = "local"  # else Sphinx cannot pickle its environment
    return state.executor


def _check_picklable(value: Any) -> None:
    """Sphinx pickles the configuration with its environment (all but classes, functions and
    modules): an executor object must pickle."""
    try:
        pickle.dumps(value)
    except Exception as err:  # PicklingError, TypeError, AttributeError: whatever pickle raises
        raise ExecutorError(
            f"an executor object must be picklable, as Sphinx keeps the configuration ({err}); "
            "give its class, or define the class in a module that conf.py imports"
        ) from None


def store_of(app: Sphinx, *, keep_verdicts: bool = False) -> OutputStore:
    """The book's store; with ``keep_verdicts``, one that reuses and adds to the verdicts the
    environment keeps (the build's own reads: :meth:`Run.stored` and the sessions it stores)."""
    kept = env_state(app.env).store_verdicts if keep_verdicts else None
    return OutputStore(Path(app.srcdir) / get_config(app.env).store, kept)


def file_hashes(env: BuildEnvironment) -> FileHashes:
    """The environment's cache of dependency digests (see :func:`livecells.plan.keys.file_digest`)."""
    return env_state(env).file_hashes


def warn(message: str, subtype: WarningSubtype, location: Any = None) -> None:
    logger.warning(message, type=WARNING_TYPE, subtype=subtype, location=location)


def page_keys(app: Sphinx, page: PagePlan) -> tuple[dict[str, str], list[str]]:
    """The page's session keys (its :depends: and the book's livecells_depends files included),
    and what to warn of its :depends: patterns (none matched, a walk cut short). Unchanged
    files are not read again; a plan's keys are computed once a build."""
    state = build_state(app)
    known = state.keys.get(page.docname)
    if known is not None and known[0] is page:
        return known[1]
    found = _page_keys(app, page, state)
    state.keys[page.docname] = (page, found)
    return found


def _page_keys(app: Sphinx, page: PagePlan, state: BuildState) -> tuple[dict[str, str], list[str]]:
    config = get_config(app.env)
    hashes = file_hashes(app.env)
    fine = config.depends_granularity == Granularity.DEFINITIONS
    # The book's library files (livecells_library) are dependencies as livecells_depends' are.
    library = {f.lib_file: f.module for f in config.library.files} if config.library else {}
    if state.book_depends is None:
        if fine:
            digest, state.book_helpers, problems = depends_split(
                str(app.srcdir), config.depends, hashes, helper_modules(app.env), helper_usages(app.env), library
            )
            state.book_depends = (digest, problems)
        else:
            files = [path for path in library if (Path(app.srcdir) / path).is_file()]
            digest, problems = files_digest(str(app.srcdir), config.depends, hashes)
            if files:
                own = files_digest(str(app.srcdir), files, hashes)[0]
                digest = hashlib.sha256(f"{digest}/{own}".encode()).hexdigest()
            state.book_depends = (digest, problems)
        location, note = origin(app, "depends")
        for problem in state.book_depends[1]:
            warn(f"livecells_depends{note}: {problem}", WarningSubtype.DEPENDS, location)
    book = state.book_depends[0] if config.depends or library else ""
    settings = RunSettings(config.timeout, config.output_limit, config.frameworks, config.env_drop)
    helpers = (state.book_helpers or Helpers([], helper_usages(app.env))) if fine else None
    return session_keys(
        page, config.framework_names(), hashes, book, app.tags, settings, helpers, helper_modules(app.env)
    )


def helper_usages(env: BuildEnvironment) -> UsageCache:
    """The environment's cache of what each session reaches of the helper modules."""
    return env_state(env).helper_usages


def helper_modules(env: BuildEnvironment) -> ModuleCache:
    """The environment's cache of helper modules read (see :func:`livecells.plan.helpers.read_helpers`)."""
    return env_state(env).helper_modules


def excluded(app: Sphinx, docname: str) -> bool:
    """Whether ``livecells_execute_exclude`` matches the page's docname or its source path
    (relative to the source dir), as Sphinx's ``exclude_patterns`` match."""
    patterns = get_config(app.env).execute_exclude
    if not patterns:
        return False
    matcher = Matcher(list(patterns))
    source = Path(app.env.doc2path(docname))
    try:
        relative = source.relative_to(app.srcdir).as_posix()
    except ValueError:
        relative = docname
    return matcher(docname) or matcher(relative)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector paused, then as it was: for reading every page's stored
    records, tens of thousands of objects that live to the build's end and make no garbage
    cycle, which would otherwise trigger a full collection of the whole process (each one
    tenths of a second at d2l's size, see docs/performance.rst). Never around running cells."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def session_outcome(
    session: SessionPlan,
    key: str,
    record: SessionRecord | None,
    origin: Origin,
    *,
    reason: str = "",
    failed: bool = False,
    damaged: bool = False,
    problems: list[Problem] | None = None,
) -> SessionOutcome:
    """What the pages and the report show of a session: computed once, here. ``record`` is the
    session's latest record; the page shows it unless ``origin`` is "recorded"."""
    shown = record if origin in {Origin.RUN, Origin.STORE} else None
    current = current_count(session.cells, shown)
    found = verdict(shown, session.cells, current, stale=shown is not None and shown.key != key)
    outcome = SessionOutcome(
        page=session.docname,
        framework=session.framework,
        source=session.source,
        origin=origin,
        # A shown record with a message did not run (its kernel did not start): failed, whatever
        # status the file gives it (as the command line's stored_outcome counts it).
        status=SessionStatus.FAILED if failed or (shown and shown.message) else (
            shown.status if shown else SessionStatus.NOT_RUN
        ),
        cells=len(session.cells),
        current=current,
        reason=reason,
        store_damaged=damaged,
        problems=list(problems or []),
        shown=found,
    )
    if record is not None:
        outcome.note_record(record, key)
    return outcome


class Run:
    """One build's plan -> decide -> execute -> store, from ``env-updated``."""

    def __init__(self, app: Sphinx, env: BuildEnvironment) -> None:
        self.app = app
        self.env = env
        self.config: LivecellsConfig = get_config(app.env)
        self.state = build_state(app)
        self.store = store_of(app, keep_verdicts=True)
        self.outcome = BuildOutcome(
            run_id=self.state.run_id, execute=self.config.execute, store=str(self.store.root)
        )
        setattr(env, OUTCOME_ATTRIBUTE, self.outcome)
        self.changed_pages: set[str] = set()
        self.environments: dict[str, Environment] = {}
        self.framework_problems: set[str] = set()
        #: Per page: its sessions' keys by framework.
        self.keys: dict[str, dict[str, str]] = {}
        #: Per session: its stored record before this build (its devices' timings, for drift).
        self.previous: dict[tuple[str, str], SessionRecord | None] = {}

    # -- devices and environments ---------------------------------------------------------------

    def devices(self, sessions: list[SessionPlan]) -> tuple[list[GPU], Mode]:
        config, capacity = self.config, self.state.capacity
        elsewhere = capacity.gpus_per_session if capacity is not None else None
        if elsewhere is not None:
            # Sessions run on the executor's machines: what counts is the GPUs one session gets.
            gpus: list[GPU] = []
            slots = 0 if config.device == DeviceMode.CPU else elsewhere
        else:
            gpus = [] if config.device == DeviceMode.CPU else detect_gpus()
            slots = len(gpus)
        if sessions and config.execute.runs and elsewhere is None:
            if gpus:
                names = ", ".join(sorted({g.name for g in gpus}))
                logger.info(f"livecells: {len(gpus)} GPU(s) found: {names}")
            elif config.device == DeviceMode.CPU:
                logger.info("livecells: livecells_device = 'cpu': cells run on the CPU")
            elif config.device == DeviceMode.GPU:
                logger.info(
                    "livecells: no GPU found and livecells_device = 'gpu': no cell runs; the pages "
                    "show stored results, else recorded outputs"
                )
            else:
                logger.info("livecells: no GPU found; cells run on the CPU")
        return gpus, Mode(config.execute, config.device, slots)

    def environment(self, framework: str) -> Environment:
        """The framework's kernel environment fingerprint (once per build and framework)."""
        if framework not in self.environments:
            from livecells.execute.environment import cached_fingerprint

            cache_file = Path(self.app.doctreedir) / "livecells-fingerprints.json"
            found = cached_fingerprint(cache_file, self.config.frameworks[framework])
            self.environments[framework] = Environment(found.digest, found.problem or "")
        return self.environments[framework]

    # -- the build's sessions ---------------------------------------------------------------------

    def stored(self, docname: str) -> tuple[dict[str, SessionRecord], bool]:
        """The page's stored sessions by framework, and whether its file is damaged; what is
        wrong with it is reported, once (not when execution is off: the store is not used then,
        only reported on)."""
        problems: list[str] = []
        damaged = False
        try:
            records = self.store.records(docname, problems)
        except StoreError as problem:
            problems.append(str(problem))
            records, damaged = {}, True
        if self.config.execute != ExecuteMode.OFF:
            for problem in problems:
                warn(problem, WarningSubtype.STORE, location=docname)
        return records, damaged

    def run(self) -> list[str]:
        """Decide, run and store the sessions of this build; the pages to rewrite."""
        sessions = session_plans(self.env, self.config.framework_names(), self.app.tags)
        gpus, mode = self.devices(sessions)
        with collector_paused():
            jobs = self.decide_sessions(sessions, mode)
        if jobs:
            self.execute(gpus, jobs)
        return sorted(self.changed_pages)

    def decide_sessions(self, sessions: list[SessionPlan], mode: Mode) -> list[SessionJob]:
        """Each session's decision, from its key and stored record: the outcome of each that does
        not run (warned of as the page shows it), and the jobs of those that do."""
        keys = self.keys
        for docname, page in plans(self.env).items():
            for cell in page.cells:
                if not cell.frameworks and cell.included(self.app.tags):
                    self.unknown_framework(docname, cell)
            keys[docname], problems = page_keys(self.app, page)
            for problem in problems:
                warn(f"live-settings :depends: {problem}", WarningSubtype.DEPENDS, docname)
        pages: dict[str, tuple[dict[str, SessionRecord], bool]] = {}
        jobs: list[SessionJob] = []
        for session in sessions:
            if session.docname not in pages:
                pages[session.docname] = self.stored(session.docname)
            records, damaged = pages[session.docname]
            latest = records.get(session.framework)
            self.previous[(session.docname, session.framework)] = latest
            if latest is not None and latest.status == SessionStatus.FAILED:
                latest = None  # a session that could not run is no result (older stores kept some)
            execute, chosen = self.page_mode(session)
            # With execution off, the pages show their recorded outputs: nothing stored counts.
            stored = latest if execute != ExecuteMode.OFF else None
            key = keys[session.docname][session.framework]
            decision = decide(
                session, key, stored, replace(mode, execute=execute), lambda: self.environment(session.framework)
            )
            if chosen and not decision.run:
                decision = replace(decision, reason=chosen)
            problems = self.report_decision(session, decision)
            if decision.run:
                # Its last run's duration (whatever its key): the scheduler's and the progress
                # line's estimate of how long it takes.
                estimate = latest.duration if latest is not None else None
                jobs.append(self.job(session, key, decision, estimate))
                continue
            outcome = session_outcome(
                session, key, latest, Origin.STORE if stored else Origin.RECORDED,
                reason=decision.reason, failed=decision.failed, damaged=damaged, problems=problems,
            )
            outcome.by_choice = bool(chosen) or execute == ExecuteMode.OFF
            self.outcome.sessions[(session.docname, session.framework)] = outcome
            if stored:
                # The page shows the stored cells: their problems are this build's verdict too.
                date = stored.provenance.date.replace("T", " ").replace("+00:00", " UTC")
                note = f"stored result from {date}" if date else "stored result"
                outcome.problems += report_session(
                    session, stored, self.config.allow_html, outcome.current, note, show_tb=self.config.show_tb
                )
            # With execution off (or the page excluded) the pages show what they show by choice; a
            # decision's own warning, or a stored failure to start, already says why no cell ran.
            if not outcome.by_choice and not problems and not (stored and stored.message):
                outcome.problems += report_unshown(session, outcome, stored)
            self.outcome.failed += outcome.status == SessionStatus.FAILED
            if stored:
                # The page shows this very read of the store file: one read per build, so that a
                # file replaced since (a concurrent build, a git pull) cannot put another
                # version's outputs under the cells this outcome counted as current.
                self.outcome.records[(session.docname, session.framework)] = stored
                self.outcome.cached += 1
            else:
                self.outcome.skipped += 1
        return jobs

    def page_mode(self, session: SessionPlan) -> tuple[ExecuteMode, str]:
        """How the session's page runs, and why it does not by the author's choice ("": it is
        no choice of the page's): ``livecells_execute_exclude`` makes it ``cache`` (stored
        results, else recorded outputs), ``live-settings :execute:`` may say ``off``, ``cache``
        or ``force`` (see :meth:`ExecuteMode.for_page`). The choice is the same in a build that
        runs nothing (``cache``): such a page shows, and fails, what it would in any build."""
        build = self.config.execute
        if build == ExecuteMode.OFF:
            return build, ""
        if excluded(self.app, session.docname):
            return ExecuteMode.CACHE, "the page is excluded from execution (livecells_execute_exclude)"
        page = session.settings.execute
        if page in {ExecuteMode.OFF, ExecuteMode.CACHE}:
            return page, f"the page's live-settings say :execute: {page}"
        return build.for_page(page), ""

    def unknown_framework(self, docname: str, cell: CellPlan) -> None:
        """A cell of no framework of livecells_frameworks: shown, not run; warned every build."""
        names = ", ".join(map(repr, cell.unknown))
        message = (
            f"live-cell: {f'unknown framework {names}' if names else 'no framework it names'} "
            f"(livecells_frameworks has {', '.join(self.config.frameworks)}); the cell is shown "
            "but not run"
        )
        warn(message, WarningSubtype.CONFIG, cell.location())
        self.outcome.unknown.append((docname, Problem(WarningSubtype.CONFIG, cell.location(), message)))

    def report_decision(self, session: SessionPlan, decision: Decision) -> list[Problem]:
        """Warn of what the decision says; its problems, located at the session's first cell."""
        first = session.cells[0].location() if session.cells else session.docname
        if decision.failed and decision.reason not in self.framework_problems:
            self.framework_problems.add(decision.reason)
            location, note = origin(self.app, "frameworks")
            warn(
                f"livecells_frameworks[{session.framework!r}]{note}: {decision.reason}; its cells are not run",
                WarningSubtype.CONFIG,
                location,
            )
        for warning in decision.warnings:
            warn(warning.message, warning.subtype, first)
        return [Problem(w.subtype, first, w.message) for w in decision.warnings]

    def job(
        self, session: SessionPlan, key: str, decision: Decision, estimate: float | None = None
    ) -> SessionJob:
        from livecells.execute.scheduler import SessionJob

        log = Path(self.app.doctreedir) / "livecells-kernels" / f"{session.docname}.{session.framework}.log"
        return SessionJob(
            plan=session,
            framework=self.config.frameworks[session.framework],
            key=key,
            environment=decision.environment,
            gpus=decision.gpus,
            default_timeout=self.config.timeout,
            output_limit=self.config.output_limit,
            # Kernel logs help debugging; they stay out of the published site.
            log_path=str(log),
            run_id=self.state.run_id,
            env_drop=self.config.env_drop,
            estimate=estimate,
        )

    def scheduler(self, gpus: list[GPU]) -> Scheduler:
        """The executor's scheduler for this build's sessions."""
        config, processes = self.config, self.state.processes
        resources = Resources(
            gpus=tuple(gpus),
            jobs=config.jobs if isinstance(config.jobs, int) else None,
            fork=config.fork_kernels,
            fork_server=functools.partial(
                processes.fork_server, config.env_drop, self.app.confdir, config.keep_warm, self.app.doctreedir
            ),
            guard=processes.guard,
        )
        return executor_of(self.app).scheduler(resources)

    def execute(self, gpus: list[GPU], jobs: list[SessionJob]) -> None:
        from livecells.execute.scheduler import run_async

        scheduler = self.scheduler(gpus)
        # Sessions at once, for the estimate of what is left ('auto' on a cluster: unknown).
        at_once = self.config.jobs if isinstance(self.config.jobs, int) else None
        if at_once is None and executor_of(self.app).runs_locally:
            at_once = max(1, len(gpus))
        progress = Progress(jobs, self.app.verbosity, at_once)

        def on_done(job: SessionJob, record: SessionRecord) -> None:
            progress.finished_one(job, record.status)
            self.finished(job, record)

        try:
            with sigterm_as_interrupt():
                run_async(lambda: progress.around(scheduler.run(jobs, on_done, progress.started_one)))
        except ExecutorError as err:  # the execute stage raises its own errors, never Sphinx's
            raise ExtensionError(f"livecells: {err}") from None
        finally:
            progress.end()
            self.outcome.seconds += progress.elapsed()

    def finished(self, job: SessionJob, record: SessionRecord) -> None:
        """A session came back: keep it, store it, warn about its problems."""
        plan = job.plan
        record, _ = repaired(record, self.config.output_limit)
        previous = self.previous.get((plan.docname, plan.framework))
        if record.status != SessionStatus.FAILED:
            record = keep_devices(record, previous)
        # The pages show this build's results from here, whether or not the store takes them.
        self.outcome.records[(plan.docname, plan.framework)] = record
        try:
            # A session that could not run (its kernel did not start, a preload failed, the
            # cluster lost it) is no result of its code: shown and counted in this build, never
            # stored, so the next build tries again.
            if record.status != SessionStatus.FAILED:
                self.store.save_record(plan.docname, record)
        except (StoreError, OSError, ValueError, TypeError) as err:
            message = f"{plan.name}: results not stored ({err}); the pages show this build's results"
            warn(message, WarningSubtype.STORE, plan.docname)
        self.changed_pages.add(plan.docname)
        problems = report_session(plan, record, self.config.allow_html, show_tb=self.config.show_tb)
        problems += drift_problems(plan, record, previous, self.config.drift_factor, self.config.drift_floor)
        outcome = session_outcome(plan, job.key, record, Origin.RUN, problems=problems)
        self.outcome.sessions[(plan.docname, plan.framework)] = outcome
        if not record.message:  # else its "kernel" problem says why no cell ran
            outcome.problems += report_unshown(plan, outcome, record)
        self.outcome.ran += 1
        self.outcome.failed += outcome.status == SessionStatus.FAILED

