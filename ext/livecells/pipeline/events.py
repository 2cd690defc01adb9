"""The build's stages wired into Sphinx's events: nothing else happens here.

- ``builder-inited``: the book's library (``livecells_library``) is written, then the executor
  (``livecells_executor``) is checked, before any page is read;
- ``env-before-read-docs``: the frameworks start importing in their fork-server templates while
  Sphinx reads, when the build will probably run cells;
- ``env-get-outdated``: pages whose session key changed without their source changing (a
  ``:depends:`` file, the store itself) are read again;
- ``env-updated``: :class:`livecells.pipeline.run.Run` decides, runs and stores the sessions; the
  pages whose outputs changed are handed back to Sphinx to be written;
- ``build-finished``: the summary files, the processes closed, ``livecells_raise_on_error``.

Builders that show no outputs (:data:`NO_OUTPUTS`: linkcheck, gettext, changes) run nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.errors import ConfigError
from sphinx.util import logging

from livecells.config import LivecellsConfig, get_config
from livecells.errors import ExecutorError
from livecells.model.device_report import device_rows
from livecells.model.records import OUTCOME_ATTRIBUTE, RENDER_WARNED, BuildOutcome, outcome_of
from livecells.model.vocabulary import ExecuteMode, WarningSubtype
from livecells.pipeline.guess import changed_frameworks
from livecells.pipeline.library import write_book_library
from livecells.pipeline.run import Run, build_state, excluded, executor_of, file_hashes, page_keys, store_of, warn
from livecells.pipeline.summary import write_summary
from livecells.pipeline.timings import report_sections, write_chart
from livecells.plan.keys import file_digest
from livecells.read.collect import plans
from livecells.read.env_state import env_state

logger = logging.getLogger(__name__)


def _seen(env: BuildEnvironment) -> dict[str, dict[str, Any]]:
    """Per page: the session keys and store digest its written output was made from."""
    return env_state(env).seen


def _mode_signature(config: LivecellsConfig) -> str:
    return f"{config.execute}/{config.device}"


def on_env_get_outdated(
    app: Sphinx, env: BuildEnvironment, added: set[str], changed: set[str], removed: set[str]
) -> list[str]:
    """Pages to re-read although their source did not change."""
    # A page that left this build (deleted, excluded, absent from this branch) keeps its stored
    # results: a partial build must not delete what is committed; ``livecells clear`` does.
    config = get_config(app.env)
    store = store_of(app)
    outdated = []
    for docname, page in plans(env).items():
        if docname in changed or docname in added or docname in removed:
            continue
        seen = _seen(env).get(docname)
        if seen is None or seen.get("mode") != _mode_signature(config):
            outdated.append(docname)
            continue
        keys, _ = page_keys(app, page)
        if keys != seen.get("keys") or file_digest(str(store.path(docname)), file_hashes(env)) != seen.get("store"):
            outdated.append(docname)
    return outdated


#: Builders whose output holds no cell output: a build with one runs nothing, starts no kernel,
#: and writes no summary (its pages show the recorded outputs, if it shows any).
NO_OUTPUTS = frozenset({"linkcheck", "gettext", "changes"})


def runs_cells(app: Sphinx) -> bool:
    """Whether this build may run cells: its builder shows outputs and its mode runs."""
    return get_config(app.env).execute.runs and app.builder.name not in NO_OUTPUTS


def on_env_updated(app: Sphinx, env: BuildEnvironment) -> list[str]:
    """Decide, run and store the sessions of this build; return the pages to rewrite."""
    config = get_config(app.env)
    if app.builder.name in NO_OUTPUTS:
        logger.info(f"livecells: the {app.builder.name} builder shows no cell outputs; no cell runs")
        setattr(env, OUTCOME_ATTRIBUTE, BuildOutcome(run_id=build_state(app).run_id, execute=ExecuteMode.OFF))
        return []
    run = Run(app, env)
    changed = run.run()
    # Pages whose writing warned last time are written again: their warnings are this build's too.
    warned_file = Path(app.doctreedir) / RENDER_WARNED
    try:
        warned = set(warned_file.read_text(encoding="utf-8").splitlines())
        warned_file.unlink()
    except (OSError, UnicodeDecodeError):
        warned = set()
    changed = sorted(set(changed) | (warned & set(plans(env))))
    seen = _seen(env)
    for docname in plans(env):
        seen[docname] = {
            "mode": _mode_signature(config),
            "keys": run.keys[docname],
            # Kept in the hashes by size, times and inode: an unchanged store file is not read again.
            "store": file_digest(str(run.store.path(docname)), file_hashes(env)),
        }
    for docname in [d for d in seen if d not in plans(env)]:
        del seen[docname]
    hashes = file_hashes(env)
    for path in [p for p in hashes if not Path(p).exists()]:
        del hashes[path]  # files that are gone keep no entry
    verdicts, current = env_state(env).store_verdicts, run.store.checked
    for key in [k for k in verdicts if k not in current]:
        del verdicts[key]  # only this build's store files' verdicts are kept
    return changed


def on_build_finished(app: Sphinx, exception: BaseException | None) -> None:
    state = build_state(app)
    config = get_config(app.env)
    state.processes.close()
    outcome = outcome_of(app.env)
    if outcome.run_id != state.run_id or not (outcome.sessions or outcome.unknown):
        return  # no session in this build (or it ended before its sessions were planned)
    errors, not_run, stale = outcome.cell_counts()
    logger.info(
        f"livecells: {outcome.ran} session(s) run, {outcome.cached} from the store, "
        f"{outcome.skipped} not run, {outcome.failed} failed; the pages show {errors} cell error(s), "
        f"{not_run} cell(s) not run, {stale} stale; {outcome.seconds:.1f} s executing"
    )
    totals = {
        "run": outcome.ran,
        "cached": outcome.cached,
        "not_run": outcome.skipped,
        "failed": outcome.failed,
        "unexpected_errors": errors,
        "cells_not_run": not_run,
        "cells_stale": stale,
        "seconds": round(outcome.seconds, 3),
        "run_id": outcome.run_id,
    }
    folder = summary_folder(app)
    # A folder chosen inside the site is published with it: no tracebacks, no host names. (The
    # default, the doctree folder, is Sphinx's internals, even where it is the site's .doctrees.)
    published = bool(config.summary_dir) and Path(app.outdir).resolve() in (folder.resolve(), *folder.resolve().parents)
    devices = device_rows(outcome.records)
    write_summary(
        folder, list(outcome.sessions.values()), totals, outcome.unknown, root=str(app.srcdir), published=published,
        sections=report_sections(outcome, devices, str(app.srcdir)),
    )
    write_chart(folder, devices)
    if exception is None and config.raise_on_error and outcome.failures():
        # A failed verdict is the book's problem, not a crash: an error line and a non-zero exit
        # status (as sphinx.ext.doctest does), without the traceback and "report this to
        # Sphinx" that an exception from an event handler gets.
        counted = f"{not_run} cell(s) not run, {stale} stale, " if config.execute != ExecuteMode.OFF else ""
        logger.error(
            f"livecells: the pages show {errors} cell error(s), {counted}and {outcome.failed} "
            "session(s) failed (livecells_raise_on_error = True); see the warnings above and "
            f"{folder / 'report.txt'}"
        )
        app.statuscode = 1


def summary_folder(app: Sphinx) -> Path:
    """Where summary.json, junit.xml and report.txt go: ``livecells_summary_dir`` (relative to
    the source dir), else the doctree folder's ``livecells-summary``, outside the published site."""
    chosen = get_config(app.env).summary_dir
    return Path(app.srcdir) / chosen if chosen else Path(app.doctreedir) / "livecells-summary"


def on_env_before_read_docs(app: Sphinx, env: BuildEnvironment, docnames: list[str]) -> None:
    """Start importing the frameworks while Sphinx reads, where this build is known to run cells.

    Guessed from the pages' text (:mod:`.guess`): a page to read that has cells of a framework
    whose code is not what its stored session ran, cell by cell (every page, with
    ``livecells_execute = "force"``), so that an edited cell's framework imports while Sphinx
    reads and no other does. Which sessions run is decided after reading, by keys; the scheduler
    starts the templates of those the guess missed (``ForkServer.ready``).
    """
    config = get_config(app.env)
    if not runs_cells(app) or not config.fork_kernels or not executor_of(app).runs_locally:
        return
    store = store_of(app)
    wanted: set[str] = set()
    for docname in docnames:
        source = Path(env.doc2path(docname))
        try:
            text = source.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if "live-cell" not in text or excluded(app, docname):
            continue
        stored = store.path(docname) if config.execute == ExecuteMode.AUTO else None
        wanted |= changed_frameworks(text, stored if stored and stored.exists() else None, config.framework_names())
    if not wanted:
        return  # nothing seems to need running: no fork server (and no jupyter_client import)
    server = build_state(app).processes.fork_server(config.env_drop, app.confdir, config.keep_warm, app.doctreedir)
    for name in config.framework_names():
        if name in wanted:
            server.prepare(config.frameworks[name])


def on_builder_inited(app: Sphinx) -> None:
    write_book_library(app)  # what the sessions, the templates and the keys read
    state = build_state(app)
    config = get_config(app.env)
    executor = executor_of(app)
    if runs_cells(app):
        # An executor that cannot run sessions (a scheduler that cannot be reached) stops the
        # build before any page is read; it may start the frameworks' kernels while Sphinx reads.
        warm = list(config.frameworks.values()) if config.fork_kernels else []
        try:
            state.capacity = executor.check(warm)
        except ExecutorError as err:
            raise ConfigError(str(err)) from None
        if state.capacity.description:
            logger.info(f"livecells: {state.capacity.description}")
        for note in state.capacity.notes:
            warn(note, WarningSubtype.EXECUTOR)


def setup_pipeline(app: Sphinx) -> None:
    app.connect("builder-inited", on_builder_inited)
    app.connect("env-get-outdated", on_env_get_outdated)
    app.connect("env-before-read-docs", on_env_before_read_docs)
    app.connect("env-updated", on_env_updated)
    app.connect("build-finished", on_build_finished)
