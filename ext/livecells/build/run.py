"""After Sphinx has read the pages: plan, decide, execute and store every session of the build.

Every (page, framework) session gets its key (:mod:`livecells.plan.keys`); the pure policy
(:func:`livecells.plan.decide.decide`) says which run; the scheduler runs them; each finished
session is repaired, written to the store at once (so an interrupted build keeps what finished)
and its problems become warnings located at the cell. What happened to every session is one
:class:`~livecells.model.records.SessionOutcome` in the build's
:class:`~livecells.model.records.BuildOutcome`, which render and the report read.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ExtensionError
from sphinx.util import logging

from livecells.build.problems import report_session
from livecells.build.processes import Processes, sigterm_as_interrupt
from livecells.build.progress import Progress
from livecells.config import WARNING_TYPE, LivecellsConfig, conf_location, get_config
from livecells.execute.devices import GPU, detect_gpus
from livecells.model.plans import PagePlan, SessionPlan
from livecells.model.records import (
    OUTCOME_ATTRIBUTE,
    BuildOutcome,
    Problem,
    SessionOutcome,
    SessionRecord,
    current_cells,
    unexpected_errors,
)
from livecells.plan.decide import Decision, Environment, Mode, decide
from livecells.plan.keys import FileHashes, files_digest, session_keys
from livecells.read.collect import plans, session_plans
from livecells.store import OutputStore, StoreProblem, repaired

if TYPE_CHECKING:  # the execute stage (jupyter_client) is imported only by builds that run cells
    from livecells.execute.scheduler import Scheduler, SessionJob

logger = logging.getLogger(__name__)

@dataclass
class BuildState:
    """What the build process keeps between Sphinx's events (not handed to any stage)."""

    run_id: str = field(default_factory=lambda: os.urandom(16).hex())
    processes: Processes = field(default_factory=Processes)
    #: The Dask cluster sessions run on (livecells_executor), checked when the build starts.
    cluster: Any = None
    #: The digest of the files livecells_depends matches, and its patterns that matched none.
    book_depends: tuple[str, list[str]] | None = None


def build_state(app: Sphinx) -> BuildState:
    if not hasattr(app, "livecells_state"):
        app.livecells_state = BuildState()  # type: ignore[attr-defined]
    return app.livecells_state  # type: ignore[attr-defined,no-any-return]


def store_of(app: Sphinx) -> OutputStore:
    return OutputStore(Path(app.srcdir) / get_config(app).store)


def file_hashes(env: BuildEnvironment) -> FileHashes:
    """The environment's cache of dependency digests (see :func:`livecells.plan.keys.file_digest`)."""
    if not hasattr(env, "livecells_file_hashes"):
        env.livecells_file_hashes = {}  # type: ignore[attr-defined]
    return env.livecells_file_hashes  # type: ignore[attr-defined,no-any-return]


def warn(message: str, subtype: str, location: Any = None) -> None:
    logger.warning(message, type=WARNING_TYPE, subtype=subtype, location=location)


def page_keys(app: Sphinx, page: PagePlan) -> tuple[dict[str, str], list[str]]:
    """The page's session keys (its :depends: and the book's livecells_depends files included),
    and what to warn of its :depends: patterns (none matched, a walk cut short). Unchanged
    files are not read again."""
    config = get_config(app)
    state = build_state(app)
    hashes = file_hashes(app.env)
    if state.book_depends is None:
        state.book_depends = files_digest(str(app.srcdir), config.depends, hashes)
        for problem in state.book_depends[1]:
            warn(
                f"livecells_depends: {problem}",
                "depends",
                conf_location(app.confdir, "livecells_depends"),
            )
    book = state.book_depends[0] if config.depends else ""
    return session_keys(page, config.framework_names(), hashes, book, app.tags)


def session_outcome(
    session: SessionPlan,
    key: str,
    record: SessionRecord | None,
    origin: str,
    *,
    reason: str = "",
    failed: bool = False,
    damaged: bool = False,
    problems: list[Problem] | None = None,
) -> SessionOutcome:
    """What the pages and the report show of a session: computed once, here. ``record`` is the
    session's latest record; the page shows it unless ``origin`` is "recorded"."""
    shown = record if origin in {"run", "store"} else None
    outcome = SessionOutcome(
        page=session.docname,
        framework=session.framework,
        source=session.source,
        origin=origin,
        status="failed" if failed else (shown.status if shown else "not-run"),
        cells=len(session.cells),
        current=current_cells(session.cells, shown),
        reason=reason,
        store_damaged=damaged,
        problems=list(problems or []),
    )
    if record is not None:
        outcome.record_status = record.status
        outcome.record_cells = len(record.cells)
        outcome.stale = record.key != key
        outcome.errors = unexpected_errors(record, session.cells)
        outcome.duration = record.duration
        outcome.seconds = record.cell_seconds()
        outcome.device = record.provenance.device
        outcome.date = record.provenance.date
        outcome.host = record.provenance.host
    return outcome


class Run:
    """One build's plan -> decide -> execute -> store, from ``env-updated``."""

    def __init__(self, app: Sphinx, env: BuildEnvironment) -> None:
        self.app = app
        self.env = env
        self.config: LivecellsConfig = get_config(app)
        self.state = build_state(app)
        self.store = store_of(app)
        self.outcome = BuildOutcome(
            run_id=self.state.run_id, execute=self.config.execute, store=str(self.store.root)
        )
        setattr(env, OUTCOME_ATTRIBUTE, self.outcome)
        self.changed_pages: set[str] = set()
        self.environments: dict[str, Environment] = {}
        self.framework_problems: set[str] = set()
        #: Per page: its sessions' keys by framework.
        self.keys: dict[str, dict[str, str]] = {}

    # -- devices and environments ---------------------------------------------------------------

    def devices(self, sessions: list[SessionPlan]) -> tuple[list[GPU], Mode]:
        config, cluster = self.config, self.state.cluster
        if cluster is not None:
            # Sessions run on the cluster's workers: what counts is the GPUs one worker declares.
            gpus: list[GPU] = []
            slots = 0 if config.device == "cpu" else cluster.gpus_per_worker
        else:
            gpus = [] if config.device == "cpu" else detect_gpus()
            slots = len(gpus)
        if sessions and config.execute in {"auto", "force"} and cluster is None:
            if gpus:
                names = ", ".join(sorted({g.name for g in gpus}))
                logger.info(f"livecells: {len(gpus)} GPU(s) found: {names}")
            elif config.device == "cpu":
                logger.info("livecells: livecells_device = 'cpu': cells run on the CPU")
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
        except StoreProblem as problem:
            problems.append(str(problem))
            records, damaged = {}, True
        if self.config.execute != "off":
            for problem in problems:
                warn(problem, "store", location=docname)
        return records, damaged

    def run(self) -> list[str]:
        """Decide, run and store the sessions of this build; the pages to rewrite."""
        sessions = session_plans(self.env, self.config.framework_names(), self.app.tags)
        gpus, mode = self.devices(sessions)
        keys = self.keys
        for docname, page in plans(self.env).items():
            keys[docname], problems = page_keys(self.app, page)
            for problem in problems:
                warn(f"live-settings :depends: {problem}", "depends", docname)
        pages: dict[str, tuple[dict[str, SessionRecord], bool]] = {}
        jobs: list[SessionJob] = []
        for session in sessions:
            if session.docname not in pages:
                pages[session.docname] = self.stored(session.docname)
            records, damaged = pages[session.docname]
            latest = records.get(session.framework)
            # With execution off, the pages show their recorded outputs: nothing stored counts.
            stored = latest if self.config.execute != "off" else None
            key = keys[session.docname][session.framework]
            decision = decide(session, key, stored, mode, lambda: self.environment(session.framework))
            self.report_decision(session, decision)
            if decision.run:
                jobs.append(self.job(session, key, decision))
                continue
            problems = [Problem("kernel", session.cells[0].location(), decision.reason)] if decision.failed else []
            self.outcome.sessions[(session.docname, session.framework)] = session_outcome(
                session, key, latest, "store" if stored else "recorded",
                reason=decision.reason, failed=decision.failed, damaged=damaged, problems=problems,
            )
            if stored:
                self.outcome.cached += 1
            else:
                self.outcome.skipped += 1
        if jobs:
            self.execute(gpus, jobs)
        return sorted(self.changed_pages)

    def report_decision(self, session: SessionPlan, decision: Decision) -> None:
        first = session.cells[0].location() if session.cells else session.docname
        if decision.failed and decision.reason not in self.framework_problems:
            self.framework_problems.add(decision.reason)
            warn(
                f"livecells_frameworks[{session.framework!r}]: {decision.reason}; its cells are not run",
                "config",
                conf_location(self.app.confdir, "livecells_frameworks"),
            )
        for subtype, message in decision.warnings:
            warn(message, subtype, first)

    def job(self, session: SessionPlan, key: str, decision: Decision) -> SessionJob:
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
        )

    def scheduler(self, gpus: list[GPU]) -> Scheduler:
        # The seam for tests and for programs that drive Sphinx: ``app.livecells_scheduler_factory``
        # (called like make_scheduler) replaces the scheduler; the build around it is unchanged.
        factory = getattr(self.app, "livecells_scheduler_factory", None) or make_scheduler
        processes = self.state.processes
        return factory(  # type: ignore[no-any-return]
            self.config, gpus, processes.fork_server_for(self.config), processes.guard_for(self.config)
        )

    def execute(self, gpus: list[GPU], jobs: list[SessionJob]) -> None:
        from livecells.execute.scheduler import run_async

        cluster_errors: tuple[type[Exception], ...] = ()
        if self.config.executor != "local":
            from livecells.execute.dask import ExecutorProblem

            cluster_errors = (ExecutorProblem,)

        scheduler = self.scheduler(gpus)
        progress = Progress(len(jobs), self.app.verbosity)

        def on_start(job: SessionJob) -> None:
            progress.started_one(job.plan.name, len(job.plan.cells))

        def on_done(job: SessionJob, record: SessionRecord) -> None:
            progress.finished_one(job.plan.name, record.status)
            self.finished(job, record)

        try:
            with sigterm_as_interrupt():
                run_async(lambda: scheduler.run(jobs, on_done, on_start))
        except cluster_errors as err:  # the execute stage raises its own errors, never Sphinx's
            raise ExtensionError(f"livecells: {err}") from None
        finally:
            progress.end()
            self.outcome.seconds += progress.elapsed()

    def finished(self, job: SessionJob, record: SessionRecord) -> None:
        """A session came back: keep it, store it, warn about its problems."""
        plan = job.plan
        record, _ = repaired(record, self.config.output_limit)
        # The pages show this build's results from here, whether or not the store takes them.
        self.outcome.records[(plan.docname, plan.framework)] = record
        try:
            self.store.save_record(plan.docname, record)
        except (StoreProblem, OSError, ValueError, TypeError) as err:
            warn(f"{plan.name}: results not stored ({err}); the pages show this build's results", "store", plan.docname)
        self.changed_pages.add(plan.docname)
        problems = report_session(plan, record, self.config.allow_html)
        self.outcome.sessions[(plan.docname, plan.framework)] = session_outcome(
            plan, job.key, record, "run", problems=problems
        )
        self.outcome.ran += 1
        self.outcome.failed += record.status == "failed"
        self.outcome.unexpected_errors += unexpected_errors(record, plan.cells)


def make_scheduler(config: LivecellsConfig, gpus: list[GPU], fork_server: Any = None, guard: Any = None) -> Scheduler:
    """The scheduler ``livecells_executor`` names: local kernels, or a Dask cluster."""
    if config.executor != "local":
        from livecells.execute.dask import DaskScheduler

        return DaskScheduler(config.executor, jobs=config.jobs, fork=config.fork_kernels)
    from livecells.execute.scheduler import LocalScheduler

    jobs_at_once = config.jobs if isinstance(config.jobs, int) else max(1, len(gpus))
    return LocalScheduler(gpus, jobs_at_once, fork_server=fork_server, guard=guard)
