"""The build's plan -> execute -> store steps, wired into Sphinx's events.

After Sphinx has read the pages (``env-updated``, main process), every (page, framework) session
gets its key; the store and the execution mode decide which sessions run; the scheduler runs
them; each finished session is written to the store at once (so an interrupted build keeps what
finished) and its problems become warnings located at the cell. Pages whose outputs changed are
handed back to Sphinx to be written. ``env-get-outdated`` re-reads pages whose key changed
without their source changing (a ``:depends:`` file, or the store itself).
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ConfigError, ExtensionError
from sphinx.util import logging
from sphinx.util.console import bold
from sphinx.util.display import terminal_supports_colour

from livecells.config import WARNING_TYPE, LivecellsConfig, conf_location, get_config
from livecells.execute.devices import GPU, detect_gpus
from livecells.model.plans import PagePlan, SessionPlan
from livecells.plan.keys import FileHashes, files_digest, session_keys
from livecells.read.collect import plans, session_plans
from livecells.store.schema import repair_session
from livecells.store.files import OutputStore, StoreProblem

if TYPE_CHECKING:  # the execute stage (jupyter_client) is imported only by builds that run cells
    from livecells.execute.environment import Fingerprint
    from livecells.execute.scheduler import Scheduler, SessionJob
    from livecells.execute.forkserver import ForkServer
from livecells.build.problems import report_session
from livecells.build.summary import Problem, SessionSummary, write_summary

logger = logging.getLogger(__name__)


@dataclass
class BuildState:
    """What this build decided and did; kept on the app for the render stage and the summary."""

    run_id: str = field(default_factory=lambda: os.urandom(16).hex())
    gpus: list[GPU] = field(default_factory=list)
    ran: int = 0
    cached: int = 0
    skipped: int = 0
    failed: int = 0
    unexpected_errors: int = 0
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)
    sessions: list[SessionSummary] = field(default_factory=list)
    #: The GPUs one session can lease: this machine's, or one cluster worker's.
    gpu_slots: int = 0
    #: The Dask cluster sessions run on (livecells_executor), checked when the build starts.
    cluster: Any = None
    #: Forks local kernels from processes that imported the frameworks (closed at the end).
    fork_server: Any = None
    #: Kills every session's processes if the build dies, however (see .reaper); closed at the end.
    guard: Any = None
    #: The digest of the files livecells_depends matches, and its patterns that matched none.
    book_depends: tuple[str, list[str]] | None = None
    #: Why a (page, framework) session did not run in this build, for the page to say.
    reasons: dict[tuple[str, str], str] = field(default_factory=dict)
    #: The records of the sessions this build ran, by (page, framework): the pages show them
    #: even when the store could not be written.
    records: dict[tuple[str, str], dict[str, Any]] = field(default_factory=dict)


def build_state(app: Sphinx) -> BuildState:
    if not hasattr(app, "livecells_state"):
        app.livecells_state = BuildState()  # type: ignore[attr-defined]
    return app.livecells_state  # type: ignore[attr-defined,no-any-return]


def store_of(app: Sphinx) -> OutputStore:
    return OutputStore(Path(app.srcdir) / get_config(app).store)


def file_hashes(env: BuildEnvironment) -> FileHashes:
    """The environment's cache of dependency digests (see :func:`file_digest`)."""
    if not hasattr(env, "livecells_file_hashes"):
        env.livecells_file_hashes = {}  # type: ignore[attr-defined]
    return env.livecells_file_hashes  # type: ignore[attr-defined,no-any-return]


def _file_digest(path: Path) -> str:
    try:
        if not path.is_file():  # a FIFO would block the build forever
            return ""
        return hashlib.sha256(path.read_bytes()).hexdigest()[:24]
    except OSError:
        return ""


def page_keys(app: Sphinx, page: PagePlan) -> tuple[dict[str, str], list[str]]:
    """The page's session keys (its :depends: and the book's livecells_depends files included),
    and its :depends: patterns that matched nothing. Unchanged files are not read again."""
    config = get_config(app)
    state = build_state(app)
    hashes = file_hashes(app.env)
    if state.book_depends is None:
        state.book_depends = files_digest(str(app.srcdir), config.depends, hashes)
        for pattern in state.book_depends[1]:
            _warn(
                f"livecells_depends: {pattern!r} matches no file",
                "depends",
                conf_location(app.confdir, "livecells_depends"),
            )
    book = state.book_depends[0] if config.depends else ""
    return session_keys(page, config.framework_names(), hashes, book, app.tags)


def _seen(env: BuildEnvironment) -> dict[str, dict[str, Any]]:
    """Per page: the session keys and store digest its written output was made from."""
    if not hasattr(env, "livecells_seen"):
        env.livecells_seen = {}  # type: ignore[attr-defined]
    return env.livecells_seen  # type: ignore[attr-defined,no-any-return]


def _mode_signature(config: LivecellsConfig) -> str:
    return f"{config.execute}/{config.device}"


def on_env_get_outdated(
    app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Pages to re-read although their source did not change."""
    config = get_config(app)
    store = store_of(app)
    for docname in removed:
        # A page that left the book takes its stored results with it.
        if docname in plans(env):
            try:
                store.remove(docname)
            except StoreProblem as problem:
                _warn(str(problem), "store")
    outdated = []
    for docname, page in plans(env).items():
        if docname in changed or docname in added or docname in removed:
            continue
        seen = _seen(env).get(docname)
        if seen is None or seen.get("mode") != _mode_signature(config):
            outdated.append(docname)
            continue
        keys, _ = page_keys(app, page)
        if keys != seen.get("keys") or _file_digest(store.path(docname)) != seen.get("store"):
            outdated.append(docname)
    return outdated


def _warn(message: str, subtype: str, location: Any = None) -> None:
    logger.warning(message, type=WARNING_TYPE, subtype=subtype, location=location)


def on_env_updated(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Decide, run and store the sessions of this build; return the pages to rewrite."""
    config = get_config(app)
    state = build_state(app)
    store = store_of(app)
    sessions = session_plans(env, config.framework_names(), app.tags)
    changed_pages: set[str] = set()

    if state.cluster is not None:
        # Sessions run on the cluster's workers: what counts is the GPUs one worker declares.
        state.gpus = []
        state.gpu_slots = 0 if config.device == "cpu" else state.cluster.gpus_per_worker
    else:
        state.gpus = [] if config.device == "cpu" else detect_gpus()
        state.gpu_slots = len(state.gpus)
    if sessions and config.execute in {"auto", "force"} and state.cluster is None:
        if state.gpus:
            names = ", ".join(sorted({g.name for g in state.gpus}))
            logger.info(f"livecells: {len(state.gpus)} GPU(s) found: {names}")
        elif config.device == "cpu":
            logger.info("livecells: livecells_device = 'cpu': cells run on the CPU")
        else:
            logger.info("livecells: no GPU found; cells run on the CPU")

    # Per page, once: its sessions' keys (reading its :depends: files) and its stored records.
    keys: dict[str, dict[str, str]] = {}
    for docname, page in plans(env).items():
        keys[docname], unmatched = page_keys(app, page)
        for pattern in unmatched:
            _warn(f"live-settings :depends: {pattern!r} matches no file", "depends", docname)
    records: dict[str, dict[str, Any]] = {}
    fingerprints: dict[str, Fingerprint] = {}
    jobs: list[SessionJob] = []
    for session in sessions:
        if session.docname not in records:
            records[session.docname] = _stored_records(store, session.docname, config)
        stored = records[session.docname].get(session.framework)
        key = keys[session.docname][session.framework]
        action = _decide(app, config, state, session, key, stored, fingerprints)
        if not isinstance(action, str):
            jobs.append(action)
            continue
        origin = "store" if action == "cached" else "recorded"
        summary = SessionSummary.from_record(
            session.docname, session.framework, session.source, origin, stored
        )
        summary.reason = state.reasons.get((session.docname, session.framework), "")
        if summary.reason in state.problems:  # the framework cannot run here: an error for CI
            summary.status = "failed"
            summary.problems.append(
                Problem("kernel", session.cells[0].location(), summary.reason)
            )
        state.sessions.append(summary)
        if action == "cached":
            state.cached += 1
        else:
            state.skipped += 1

    if jobs:
        _execute(app, config, state, store, jobs, changed_pages)

    for docname in plans(env):
        _seen(env)[docname] = {
            "mode": _mode_signature(config),
            "keys": keys[docname],
            "store": _file_digest(store.path(docname)),
        }
    for docname in list(_seen(env)):
        if docname not in plans(env):
            del _seen(env)[docname]
    hashes = file_hashes(env)
    for path in [p for p in hashes if not os.path.exists(p)]:
        del hashes[path]  # files that are gone keep no entry
    return sorted(changed_pages)


def _stored_records(store: OutputStore, docname: str, config: LivecellsConfig) -> dict[str, Any]:
    """The page's stored sessions by framework; a damaged file is reported (once) as none."""
    if config.execute == "off":
        return {}
    problems: list[str] = []
    try:
        sessions = store.load(docname, problems)["sessions"]
    except StoreProblem as problem:
        problems.append(str(problem))
        sessions = {}
    for problem in problems:
        _warn(problem, "store", location=docname)
    return sessions  # type: ignore[no-any-return]


def _decide(
    app: Sphinx,
    config: LivecellsConfig,
    state: BuildState,
    session: SessionPlan,
    key: str,
    stored: dict[str, Any] | None,
    fingerprints: dict[str, Fingerprint],
) -> SessionJob | str:
    """A job to run, or why not: ``"cached"`` (the stored results stand) or ``"skipped"``."""

    def not_run(reason: str) -> str:
        state.reasons[(session.docname, session.framework)] = reason
        return "cached" if stored else "skipped"

    if config.execute == "off":
        return not_run("execution is off (livecells_execute = 'off')")
    if config.execute == "cache":
        return not_run("livecells_execute = 'cache' runs nothing")
    needed = session.settings.gpus
    if config.device == "gpu" and not state.gpu_slots:
        # A GPU is required and there is none: show what is stored (or recorded), run nothing.
        return not_run("no GPU on this machine (livecells_device = 'gpu')")
    if needed and needed > state.gpu_slots:
        first = session.cells[0] if session.cells else None
        _warn(
            f"{session.name}: the page needs {needed} GPU(s) (live-settings :gpus:) but "
            f"{state.gpu_slots} are available; the page is not run",
            "device",
            first.location() if first else session.docname,
        )
        return not_run(f"the page needs {needed} GPU(s); {state.gpu_slots} are available")
    gpus = state.gpu_slots and (1 if needed is None else needed)

    from livecells.execute.environment import cached_fingerprint

    framework = config.frameworks[session.framework]
    if session.framework not in fingerprints:
        cache_file = Path(app.doctreedir) / "livecells-fingerprints.json"
        fingerprints[session.framework] = cached_fingerprint(cache_file, framework)
    fp = fingerprints[session.framework]
    if fp.problem:
        if fp.problem not in state.problems:
            state.problems.append(fp.problem)
            _warn(
                f"livecells_frameworks[{framework.name!r}]: {fp.problem}; its cells are not run",
                "config",
                conf_location(app.confdir, "livecells_frameworks"),
            )
        first = session.cells[0]
        _warn(f"{session.name}: not run: {fp.problem}", "kernel", first.location())
        return not_run(fp.problem)

    if config.execute == "auto" and stored and stored.get("key") == key:
        leased_before = stored.get("provenance", {}).get("devices_leased", 0)
        if stored.get("environment") == fp.digest and bool(leased_before) == bool(gpus):
            return "cached"
        if leased_before and not gpus:
            # Never replace a GPU result by a CPU run when the code did not change.
            return "cached"
    from livecells.execute.scheduler import SessionJob

    job = SessionJob(
        plan=session,
        framework=framework,
        key=key,
        environment=fp.digest,
        gpus=gpus,
        default_timeout=config.timeout,
        output_limit=config.output_limit,
        # Kernel logs help debugging; they stay out of the published site.
        log_path=str(Path(app.doctreedir) / "livecells-kernels" / f"{session.docname}.{session.framework}.log"),
    )
    return job


def make_scheduler(
    config: LivecellsConfig, gpus: list[GPU], fork_server: ForkServer | None = None, guard: Any = None
) -> Scheduler:
    """The scheduler ``livecells_executor`` names: local kernels, or a Dask cluster."""
    if config.executor != "local":
        from livecells.execute.dask import DaskScheduler

        return DaskScheduler(config.executor, jobs=config.jobs, fork=config.fork_kernels)
    from livecells.execute.scheduler import LocalScheduler

    jobs_at_once = config.jobs if isinstance(config.jobs, int) else max(1, len(gpus))
    return LocalScheduler(gpus, jobs_at_once, fork_server=fork_server, guard=guard)


def _execute(
    app: Sphinx,
    config: LivecellsConfig,
    state: BuildState,
    store: OutputStore,
    jobs: list[SessionJob],
    changed_pages: set[str],
) -> None:
    from livecells.execute.dask import ExecutorProblem
    from livecells.execute.scheduler import run_async

    # The seam for tests and for programs that drive Sphinx: ``app.livecells_scheduler_factory``
    # (called like make_scheduler) replaces the scheduler; the build around it is unchanged.
    factory = getattr(app, "livecells_scheduler_factory", None) or make_scheduler
    scheduler = factory(config, state.gpus, fork_server_of(app), guard_of(app))
    total = len(jobs)
    started = time.perf_counter()
    done = 0
    # One live line, as Sphinx's own status_iterator draws it (a line per step when verbose or
    # when the terminal cannot redraw; nothing under -q).
    single_line = app.verbosity < 1 and terminal_supports_colour()

    def progress(text: str) -> None:
        if single_line:
            logger.info("\x1b[2K", nonl=True)
        logger.info(bold("executing cells... ") + text, nonl=True)
        logger.info("\r" * single_line, nonl=single_line)

    def on_start(job: SessionJob) -> None:
        progress(
            f"[{done}/{total} done] {job.plan.name}, {len(job.plan.cells)} cells "
            f"({time.perf_counter() - started:.1f} s)"
        )

    def on_done(job: SessionJob, record: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        progress(f"[{done}/{total} done] {job.plan.name} {record['status']} ({time.perf_counter() - started:.1f} s)")
        record["run_id"] = state.run_id
        record["provenance"]["devices_leased"] = job.gpus
        repair_session(record, config.output_limit)
        # The pages show this build's results from here, whether or not the store takes them.
        state.records[(job.plan.docname, job.plan.framework)] = record
        try:
            store.save_session(job.plan.docname, job.plan.framework, record)
        except (StoreProblem, OSError, ValueError, TypeError) as err:
            _warn(
                f"{job.plan.name}: results not stored ({err}); the pages show this build's results",
                "store",
                job.plan.docname,
            )
        state.ran += 1
        if record["status"] == "failed":
            state.failed += 1
        changed_pages.add(job.plan.docname)
        summary = SessionSummary.from_record(
            job.plan.docname, job.plan.framework, job.plan.source, "run", record
        )
        summary.problems = report_session(job.plan, record, config.allow_html)
        state.unexpected_errors += sum(p.kind in {"error", "timeout", "crash"} for p in summary.problems)
        state.sessions.append(summary)

    try:
        with _sigterm_as_interrupt():
            run_async(lambda: scheduler.run(jobs, on_done, on_start))
    except ExecutorProblem as err:  # the execute stage raises its own errors, never Sphinx's
        raise ExtensionError(f"livecells: {err}") from None
    finally:
        logger.info("")
        state.seconds += time.perf_counter() - started


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM stops execution like Ctrl-C does, so every kernel is shut down on the way out."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def on_build_finished(app: Sphinx, exception: BaseException | None) -> None:
    state = build_state(app)
    config = get_config(app)
    _close_processes(state)
    if not state.sessions:
        return
    logger.info(
        f"livecells: {state.ran} session(s) run, {state.cached} from the store, "
        f"{state.skipped} not run, {state.failed} failed to start; "
        f"{state.seconds:.1f} s executing"
    )
    totals = {
        "run": state.ran,
        "cached": state.cached,
        "not_run": state.skipped,
        "failed": state.failed,
        "unexpected_errors": state.unexpected_errors,
        "seconds": round(state.seconds, 3),
        "run_id": state.run_id,
    }
    write_summary(Path(app.outdir) / "_livecells", state.sessions, totals)
    if exception is None and config.raise_on_error and (state.unexpected_errors or state.failed):
        raise ExtensionError(
            f"livecells: {state.unexpected_errors} cell error(s) and {state.failed} failed "
            "session(s) (livecells_raise_on_error = True); see the warnings above and "
            f"{Path(app.outdir) / '_livecells' / 'report.txt'}"
        )


def _close_processes(state: BuildState) -> None:
    """End the fork server and the guard (every session has been shut down by now)."""
    if state.fork_server is not None:
        state.fork_server.close()
        state.fork_server = None
    if state.guard is not None:
        from livecells.execute.reaper import set_subreaper

        state.guard.close()
        state.guard = None
        set_subreaper(False)  # a process that builds again (a test run) is itself again


def guard_of(app: Sphinx) -> Any:
    """The build's guard (local execution), made on first use; this process becomes a subreaper."""
    from livecells.execute.reaper import Guard, set_subreaper

    state = build_state(app)
    if state.guard is None and get_config(app).executor == "local":
        set_subreaper()  # orphans of kernels that died come here, not to PID 1
        state.guard = Guard()
        # Ctrl-C ends a build without build-finished: close it on the way out too.
        atexit.register(_close_processes, state)
    return state.guard


def fork_server_of(app: Sphinx) -> ForkServer | None:
    """The build's fork server (local execution with livecells_fork_kernels), made on first use."""
    config = get_config(app)
    if not config.fork_kernels or config.executor != "local":
        return None
    state = build_state(app)
    if state.fork_server is None:
        from livecells.execute.forkserver import ForkServer

        state.fork_server = ForkServer(warn=lambda message: logger.info(f"livecells: {message}"))
        # Ctrl-C ends a build without build-finished: close the templates on the way out too.
        atexit.register(state.fork_server.close)
    return state.fork_server


LIVE_CELL = re.compile(r"^\s*\.\. live-cell::\s*(.+)$", re.MULTILINE)


def on_env_before_read_docs(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    """Start importing the frameworks while Sphinx reads, when this build will probably run cells.

    Only a guess, from the pages' text: a page to read that has cells of a framework and no
    stored results, or a source newer than them. What runs is decided after reading, by keys;
    a wrong guess costs only a background import.
    """
    config = get_config(app)
    if config.execute not in {"auto", "force"} or not config.fork_kernels or config.executor != "local":
        return
    store = store_of(app)
    wanted: set[str] = set()
    for docname in docnames:
        source = Path(env.doc2path(docname))
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        names = {n.strip() for arg in LIVE_CELL.findall(text) for n in arg.replace(" ", ",").split(",")}
        if not names:
            continue
        stored = store.path(docname)
        if config.execute == "auto" and stored.exists() and stored.stat().st_mtime >= source.stat().st_mtime:
            continue
        wanted |= set(config.frameworks) if "all" in names else names & set(config.frameworks)
    if not wanted:
        return  # nothing seems to need running: no fork server (and no jupyter_client import)
    server = fork_server_of(app)
    for name in config.framework_names():
        if name in wanted and server is not None:
            server.prepare(config.frameworks[name])


def on_builder_inited(app: Sphinx) -> None:
    state = build_state(app)
    config = get_config(app)
    if config.executor != "local" and config.execute in {"auto", "force"}:
        # A scheduler that cannot be reached stops the build before any page is read.
        from livecells.execute.dask import ExecutorProblem, check_executor

        # The workers start the frameworks' templates while Sphinx reads.
        warm = list(config.frameworks.values()) if config.fork_kernels else []
        try:
            state.cluster = check_executor(config.executor, warm=warm)
        except ExecutorProblem as err:
            raise ConfigError(str(err)) from None
        logger.info(f"livecells: {state.cluster.describe()}")
        for note in state.cluster.notes:
            _warn(note, "executor")


def setup_pipeline(app: Sphinx) -> None:
    app.connect("builder-inited", on_builder_inited)
    app.connect("env-get-outdated", on_env_get_outdated)
    app.connect("env-before-read-docs", on_env_before_read_docs)
    app.connect("env-updated", on_env_updated)
    app.connect("build-finished", on_build_finished)
