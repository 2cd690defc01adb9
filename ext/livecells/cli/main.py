"""``python -m livecells``: convert d2lbook chapters, report stored timings, clear stored results,
write the book's library (``lib``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from livecells._version import __version__
from livecells.cli.book import Book
from livecells.cli.library import add_lib_parser
from livecells.errors import BookError, StoreError
from livecells.model.folders import store_problem
from livecells.model.records import VERDICT_CLASSES, SessionOutcome, stored_outcome
from livecells.model.text import one_line
from livecells.model.vocabulary import ExecuteMode
from livecells.store import OutputStore


def _book(args: argparse.Namespace) -> Book:
    """The book of ``-s``, ``-c`` and ``-D``."""
    return Book.at(args.source_dir, args.conf_dir, tuple(args.define or ()))


def _store(args: argparse.Namespace) -> OutputStore:
    source = Path(args.source_dir)
    store = Path(args.store) if args.store else _book(args).store()
    problem = store_problem(source, str(store.resolve()))
    if problem:  # the whole tree would be read as the store, and cleared
        raise StoreError(f"--store {store}: {problem}")
    return OutputStore(store)


def session_rows(store: OutputStore) -> tuple[list[SessionOutcome], list[str]]:
    """One row per stored (page, framework) session, and the problems met reading the store."""
    rows: list[SessionOutcome] = []
    problems: list[str] = []
    for page in store.pages():
        try:
            records = store.records(page, problems)  # bad sessions: in problems
        except StoreError as problem:
            problems.append(str(problem))
            continue
        rows.extend(stored_outcome(page, framework, record) for framework, record in sorted(records.items()))
    return rows, problems


def report_entry(session: SessionOutcome) -> dict[str, Any]:
    """One stored session in ``report --json`` (and, formatted, in its table)."""
    return {
        "page": session.page,
        "framework": session.framework,
        "status": str(session.status),
        "cells": session.cells,
        "errors": session.errors,
        "not_run": session.not_run,
        "run_time": round(session.seconds or 0.0, 4),
        "duration": session.duration,
        "device": session.device,
        "framework_version": session.framework_version,
        "host": session.host,
        "date": session.date,
    }


def _table(rows: list[dict[str, Any]], columns: Sequence[tuple[str, str]]) -> str:
    cells = [[title for _, title in columns]]
    for row in rows:
        cells.append([_fmt(row[key]) for key, _ in columns])
    widths = [max(len(r[i]) for r in cells) for i in range(len(columns))]
    lines = ["  ".join(v.ljust(w) for v, w in zip(r, widths)).rstrip() for r in cells]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _fmt(value: Any) -> str:
    """A table cell: stored text can hold anything, the terminal gets no control characters."""
    if isinstance(value, float):
        return f"{value:.4f}"
    return "" if value is None else one_line(str(value), 80)


#: The classes of cells ``report --fail-on`` can fail on (see model.records.verdict), and the
#: older names: ``problems`` (error and not-run, the default), ``errors``, ``never``.
CLASSES = VERDICT_CLASSES
ALIASES = {"problems": ("error", "not-run"), "errors": ("error",), "never": ()}


def fail_classes(value: str) -> tuple[str, ...]:
    """``--fail-on``'s value: a comma list of :data:`CLASSES`, or one of :data:`ALIASES`."""
    if value.strip() in ALIASES:
        return ALIASES[value.strip()]
    found = tuple(dict.fromkeys(part.strip() for part in value.split(",") if part.strip()))
    wrong = [part for part in found if part not in CLASSES]
    if wrong or not found:
        known = ", ".join(CLASSES + tuple(ALIASES))
        raise argparse.ArgumentTypeError(f"{', '.join(wrong) or 'nothing'}: not one of {known}")
    return found


def _define(value: str) -> tuple[str, str]:
    """``-D name=value``, as sphinx-build's."""
    name, equals, setting = value.partition("=")
    if not equals or not name.strip():
        raise argparse.ArgumentTypeError(f"{value!r}: not setting=value")
    return name.strip(), setting


def _fail_on(value: str) -> str:
    fail_classes(value)  # argparse reports what is wrong
    return value


def failing(rows: list[SessionOutcome], classes: Sequence[str]) -> list[SessionOutcome]:
    """The stored rows that fail ``report``'s exit status without the book's pages: those with
    a cell in one of ``classes`` (:meth:`SessionOutcome.failing`, as a build counts them)."""
    return [r for r in rows if r.failing(ExecuteMode.AUTO, classes)]


def report_pages(book: Book, store: Path | None, classes: Sequence[str], fail_on: str) -> int:
    """The exit status of ``--fail-on`` for a book with a conf.py: what its pages show, read as
    a build reads them with the book's settings, running nothing, and counted as the build
    counts them (:meth:`BuildOutcome.failing`): 1 when a cell is in one of ``classes``."""
    outcome = book.pages_outcome(store)
    bad = outcome.failing(classes)
    unknown = outcome.unknown_failing(classes)
    for session, counts in bad:
        what = ", ".join(f"{n} {name}" for name, n in counts.items())
        print(f"{session.page} [{session.framework}]: {what}", file=sys.stderr)
    if bad or unknown:
        unknown_note = f", {unknown} cell(s) of no known framework" if unknown else ""
        print(
            f"the pages show {len(bad)} session(s) with cells in {', '.join(classes)}{unknown_note} "
            f"(--fail-on {fail_on}; exit status 1)",
            file=sys.stderr,
        )
        return 1
    print(
        f"the pages show no cell in {', '.join(classes)} ({len(outcome.sessions)} session(s))", file=sys.stderr
    )
    return 0


def report_records(sessions: list[SessionOutcome], problems: list[str], classes: Sequence[str], fail_on: str) -> int:
    """The exit status of ``--fail-on`` without a conf.py: the stored records, counted with
    livecells' defaults (there are no settings to apply, nor pages to read)."""
    bad = failing(sessions, classes)
    # A file or session it cannot use has no result a build could show: its cells count as
    # not run (a build warns of them so), never as passed.
    unread = problems if "not-run" in classes else []
    if bad or unread:
        errors, not_run = sum(r.errors for r in sessions), sum(r.not_run for r in sessions)
        print(
            f"{len(bad)} stored session(s) with problems: {errors} cell error(s), {not_run} cell(s) "
            f"not run, {len(unread)} store file(s) or session(s) unusable (--fail-on {fail_on}; "
            "exit status 1)",
            file=sys.stderr,
        )
    return 1 if bad or unread else 0


def cmd_report(args: argparse.Namespace) -> int:
    store = _store(args)
    if args.compare:
        from livecells.cli.compare import compare_command

        return compare_command(args, store)
    classes = fail_classes(args.fail_on)
    sessions, problems = session_rows(store)
    rows = [report_entry(session) for session in sessions]
    for problem in problems:
        print(f"warning: {one_line(problem, 2000)}", file=sys.stderr)
    book = _book(args)
    if not classes:
        failed = 0
    elif book.confdir is not None or "stale" in classes:  # stale: the pages are needed (no conf.py: an error)
        failed = report_pages(book, Path(args.store) if args.store else None, classes, args.fail_on)
    else:
        failed = report_records(sessions, problems, classes, args.fail_on)
    if args.json:
        print(json.dumps(rows, indent=1))
        return failed
    if not rows:
        print(f"no stored results in {store.root}")
        return failed
    columns = [
        ("page", "page"),
        ("framework", "framework"),
        ("status", "status"),
        ("cells", "cells"),
        ("errors", "errors"),
        ("not_run", "not run"),
        ("run_time", "run time (s)"),
        ("device", "device"),
        ("framework_version", "version"),
        ("host", "host"),
        ("date", "date"),
    ]
    print(_table(rows, columns))
    total = sum(r["run_time"] for r in rows)
    print(f"\n{len(rows)} session(s), {total:.2f} s of cell run time")
    return failed


def cmd_clear(args: argparse.Namespace) -> int:
    store = _store(args)
    known = store.pages()
    pages = args.pages or known
    frameworks = args.framework or None
    removed = 0
    unknown: list[str] = []
    for page in pages:
        page = page.rsplit(".", 1)[0] if page.endswith((".rst", ".md")) else page
        try:
            changed = store.remove(page, frameworks)
        except StoreError as problem:
            hint = "; clear the page without --framework to remove its file" if frameworks else ""
            print(f"warning: {one_line(str(problem), 2000)}{hint}", file=sys.stderr)
            continue
        if changed:
            removed += 1
            print(f"cleared {page}" + (f" [{', '.join(frameworks)}]" if frameworks else ""))
        elif page not in known:
            unknown.append(page)
        elif frameworks:
            unknown.append(f"{page} [{', '.join(frameworks)}]")
    for page in unknown:  # a typo must not pass for a page that had nothing to clear
        print(f"python -m livecells clear: no stored results for {one_line(page, 200)!r} in {store.root}; "
              f"{_listed(known)}", file=sys.stderr)
    if not removed and not unknown:
        print("nothing to clear")
    return 1 if unknown else 0


def _listed(pages: list[str], most: int = 20) -> str:
    """What the store has, for a message: its pages (the first ``most``)."""
    if not pages:
        return "the store has no pages"
    shown = ", ".join(one_line(p, 200) for p in pages[:most])
    more = f" and {len(pages) - most} more" if len(pages) > most else ""
    return f"the store has: {shown}{more}"


def cmd_convert(args: argparse.Namespace) -> int:
    from livecells.convert.tree import run

    return run(args.input, args.output, default_framework=args.default_framework, source=args.source)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m livecells",
        description="Tools for books whose code cells livecells executes at sphinx-build time.",
    )
    parser.add_argument("--version", action="version", version=f"livecells {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    convert = commands.add_parser(
        "convert",
        help="turn d2lbook chapters (RST or Markdown) into live-cell directives",
        description="Read a chapter (or a tree of them) as d2lbook writes it and write it with "
        "live-cell directives: d2lbook's generated RST as RST, keeping the outputs as recorded "
        "outputs and each tab's prose as '.. live-text::'; d2lbook's Markdown as MyST Markdown. "
        "Where the code asks for several GPUs, it writes a live-settings block with ':gpus: N' and "
        "says so. The warnings and a summary per chapter go to stderr. Exit status: 0 when all was "
        "converted (warnings or not), 2 when the input cannot be read, 1 when the output cannot be "
        "written.",
    )
    convert.add_argument("input", metavar="IN", help="a chapter (.rst or .md) or a directory")
    convert.add_argument(
        "-o", "--output", metavar="OUT",
        help="output file or directory (default for a file: stdout; required for a directory)",
    )
    convert.add_argument(
        "--default-framework", metavar="NAME", default="pytorch",
        help="framework of the cells in a chapter without tabs (default: pytorch)",
    )
    convert.add_argument(
        "--from", dest="source", choices=("auto", "markdown", "rst"), default="auto",
        help="the format read: d2lbook's markdown (.md chapters, .rst ones too) or its generated RST "
        "(.md files copied); auto (the default): markdown for an .md file or a tree with an .md file "
        "that has d2lbook's cell markers, else rst",
    )
    convert.set_defaults(func=cmd_convert)

    def store_options(sub: argparse.ArgumentParser) -> None:
        sub.add_argument(
            "-s", "--source-dir", default=".", help="the book's Sphinx source folder (default: .)"
        )
        sub.add_argument(
            "-c", "--conf-dir", metavar="CONFDIR",
            help="the folder of the book's conf.py, as sphinx-build's -c (default: SOURCE_DIR); "
            "conf.py is run as Sphinx runs it, for livecells_store",
        )
        sub.add_argument(
            "--store", help="the store folder (default: livecells_store of conf.py, from "
            "SOURCE_DIR; without one, SOURCE_DIR/_livecells)"
        )
        sub.add_argument(
            "-D", dest="define", metavar="setting=value", action="append", type=_define,
            help="override a setting of conf.py, as sphinx-build's -D (repeatable): give the "
            "report the -D options of the build it stands for",
        )

    report = commands.add_parser(
        "report", help="the stored sessions as a table", description="Show each stored (page, "
        "framework) session: status, cells, errors, run time, device, where and when it ran; "
        "the exit status says whether any shows a problem (see --fail-on)."
    )
    store_options(report)
    report.add_argument("--json", action="store_true", help="print the rows as JSON")
    report.add_argument(
        "--fail-on",
        metavar="CLASSES",
        type=_fail_on,
        default="problems",
        help="exit with status 1 when a cell is in one of these classes, a comma list of "
        "error (it failed, or its session could not run), not-run and stale (its result was "
        "made for other code, settings or files). With the book's conf.py, its pages are read "
        "as a build reads them with its settings (and -D), running nothing, and each class is "
        "counted on what they show, as the build counts it; without a conf.py, on the stored "
        "records with the default settings, a store file or session that cannot be used "
        "counting as not run (stale needs the conf.py). Also: problems (error,not-run: the "
        "default), errors (error), never",
    )
    report.add_argument(
        "--compare", metavar="OTHER_STORE", help="print each cell's time against the same code's "
        "on the same device in another store folder; exit 1 past --factor (see docs/timing.rst)"
    )
    report.add_argument(
        "--factor", type=float, help="with --compare: the drift factor (default: livecells_drift_factor, 2)"
    )
    report.add_argument(
        "--floor", type=float, help="with --compare: seconds of noise (default: livecells_drift_floor, 0.05)"
    )
    report.set_defaults(func=cmd_report)

    clear = commands.add_parser(
        "clear", help="drop stored results", description="Drop the stored results of the "
        "given pages (docnames, e.g. chapter/intro), or of every page; they run again next build. "
        "A page (or framework) the store has no results for is an error: exit status 1."
    )
    store_options(clear)
    clear.add_argument("pages", nargs="*", metavar="PAGE", help="docnames (default: all pages)")
    clear.add_argument(
        "-f", "--framework", action="append", help="only this framework's results (repeatable)"
    )
    clear.set_defaults(func=cmd_clear)
    add_lib_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (StoreError, BookError) as problem:  # a store or book it cannot use: nothing was read
        print(f"python -m livecells {args.command}: {one_line(str(problem), 2000)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
