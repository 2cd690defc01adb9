"""``python -m livecells``: convert d2lbook chapters, report stored timings, clear stored results."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from livecells import __version__
from livecells.model.folders import store_problem
from livecells.model.records import SessionOutcome, stored_outcome
from livecells.model.text import one_line
from livecells.model.vocabulary import SessionStatus
from livecells.store import OutputStore, StoreProblem


def _store(args: argparse.Namespace) -> OutputStore:
    source = Path(args.source_dir)
    store = Path(args.store) if args.store else source / "_livecells"
    problem = store_problem(source, str(store.resolve()))
    if problem:  # the whole tree would be read as the store, and cleared
        raise StoreProblem(f"--store {store}: {problem}")
    return OutputStore(store)


def session_rows(store: OutputStore) -> tuple[list[SessionOutcome], list[str]]:
    """One row per stored (page, framework) session, and the problems met reading the store."""
    rows: list[SessionOutcome] = []
    problems: list[str] = []
    for page in store.pages():
        try:
            records = store.records(page, problems)  # bad sessions: in problems
        except StoreProblem as problem:
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


def failing(rows: list[SessionOutcome], fail_on: str) -> list[SessionOutcome]:
    """The rows that fail ``report``'s exit status: sessions that failed or have cells that
    failed (``--fail-on errors``), or also cells that did not run (``problems``, the default)."""
    if fail_on == "never":
        return []
    return [
        r for r in rows
        if r.status == SessionStatus.FAILED or r.errors or (fail_on != "errors" and r.not_run)
    ]


def cmd_report(args: argparse.Namespace) -> int:
    if args.compare:
        from livecells.cli.compare import compare

        return compare(_store(args), OutputStore(args.compare), args.factor, args.floor)
    sessions, problems = session_rows(_store(args))
    rows = [report_entry(session) for session in sessions]
    for problem in problems:
        print(f"warning: {one_line(problem, 2000)}", file=sys.stderr)
    bad = failing(sessions, args.fail_on)
    # A file or session it cannot use has no result a build could show: its cells count as not
    # run (a build warns of them so), never as passed.
    unread = problems if args.fail_on == "problems" else []
    if bad or unread:
        errors, not_run = sum(r["errors"] for r in rows), sum(r["not_run"] for r in rows)
        print(
            f"{len(bad)} stored session(s) with problems: {errors} cell error(s), {not_run} cell(s) "
            f"not run, {len(unread)} store file(s) or session(s) unusable (--fail-on {args.fail_on}; "
            "exit status 1)",
            file=sys.stderr,
        )
    failed = 1 if bad or unread else 0
    if args.json:
        print(json.dumps(rows, indent=1))
        return failed
    if not rows:
        print(f"no stored results in {_store(args).root}")
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
    pages = args.pages or store.pages()
    frameworks = args.framework or None
    removed = 0
    for page in pages:
        page = page.rsplit(".", 1)[0] if page.endswith((".rst", ".md")) else page
        try:
            changed = store.remove(page, frameworks)
        except StoreProblem as problem:
            hint = "; clear the page without --framework to remove its file" if frameworks else ""
            print(f"warning: {one_line(str(problem), 2000)}{hint}", file=sys.stderr)
            continue
        if changed:
            removed += 1
            print(f"cleared {page}" + (f" [{', '.join(frameworks)}]" if frameworks else ""))
    if not removed:
        print("nothing to clear")
    return 0


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
            "--store", help="the store folder (default: SOURCE_DIR/_livecells, as livecells_store)"
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
        choices=("problems", "errors", "never"),
        default="problems",
        help="exit with status 1 when a stored session failed or shows cell errors or cells "
        "not run, or a store file or session cannot be used (problems, the default), only "
        "failures and cell errors (errors), or never",
    )
    report.add_argument(
        "--compare", metavar="OTHER_STORE", help="print each cell's time against the same code's "
        "on the same device in another store folder; exit 1 past --factor (see docs/timing.rst)"
    )
    report.add_argument("--factor", type=float, default=2.0, help="with --compare: the drift factor (2)")
    report.add_argument("--floor", type=float, default=0.01, help="with --compare: seconds of noise (0.01)")
    report.set_defaults(func=cmd_report)

    clear = commands.add_parser(
        "clear", help="drop stored results", description="Drop the stored results of the "
        "given pages (docnames, e.g. chapter/intro), or of every page; they run again next build."
    )
    store_options(clear)
    clear.add_argument("pages", nargs="*", metavar="PAGE", help="docnames (default: all pages)")
    clear.add_argument(
        "-f", "--framework", action="append", help="only this framework's results (repeatable)"
    )
    clear.set_defaults(func=cmd_clear)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except StoreProblem as problem:  # a store folder that cannot be one: nothing was read
        print(f"python -m livecells {args.command}: {one_line(str(problem), 2000)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
