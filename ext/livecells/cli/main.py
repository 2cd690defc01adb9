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
from livecells.model.records import verdict
from livecells.model.text import one_line
from livecells.store import OutputStore, StoreProblem


def _store(args: argparse.Namespace) -> OutputStore:
    source = Path(args.source_dir)
    store = Path(args.store) if args.store else source / "_livecells"
    problem = store_problem(source, str(store.resolve()))
    if problem:  # the whole tree would be read as the store, and cleared
        raise StoreProblem(f"--store {store}: {problem}")
    return OutputStore(store)


def session_rows(store: OutputStore) -> tuple[list[dict[str, Any]], list[str]]:
    """One row per stored (page, framework) session, and the problems met reading the store."""
    rows: list[dict[str, Any]] = []
    problems: list[str] = []
    for page in store.pages():
        try:
            records = store.records(page, problems)  # bad sessions: in problems
        except StoreProblem as problem:
            problems.append(str(problem))
            continue
        for framework, record in sorted(records.items()):
            # As a build counts them (without the page: with the :raises: its run was told).
            shown = verdict(record)
            rows.append(
                {
                    "page": page,
                    "framework": framework,
                    # A session with a message did not run (its kernel did not start): a build
                    # warns of it as a failure whatever status the file gives it.
                    "status": "failed" if record.message else record.status,
                    "cells": len(record.cells),
                    "errors": len(shown.failed),
                    "not_run": len(shown.not_run),
                    "run_time": round(record.cell_seconds() or 0.0, 4),
                    "duration": record.duration,
                    "device": record.provenance.device,
                    "framework_version": record.provenance.framework_version,
                    "host": record.provenance.host,
                    "date": record.provenance.date,
                }
            )
    return rows, problems


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


def failing(rows: list[dict[str, Any]], fail_on: str) -> list[dict[str, Any]]:
    """The rows that fail ``report``'s exit status: sessions that failed or have cells that
    failed (``--fail-on errors``), or also cells that did not run (``problems``, the default)."""
    if fail_on == "never":
        return []
    counted = ("errors",) if fail_on == "errors" else ("errors", "not_run")
    return [r for r in rows if r["status"] == "failed" or any(r[k] for k in counted)]


def cmd_report(args: argparse.Namespace) -> int:
    rows, problems = session_rows(_store(args))
    for problem in problems:
        print(f"warning: {one_line(problem, 2000)}", file=sys.stderr)
    bad = failing(rows, args.fail_on)
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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m livecells",
        description="Tools for books whose code cells livecells executes at sphinx-build time.",
    )
    parser.add_argument("--version", action="version", version=f"livecells {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    from livecells.cli.convert import add_subcommand

    add_subcommand(commands)

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
    if args.command == "convert":
        from livecells.cli import convert_md  # d2lbook markdown sources (.md) become MyST Markdown

        if convert_md.wants_markdown(args.input):
            return convert_md.run(args)
    try:
        return int(args.func(args) or 0)
    except StoreProblem as problem:  # a store folder that cannot be one: nothing was read
        print(f"python -m livecells {args.command}: {one_line(str(problem), 2000)}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
