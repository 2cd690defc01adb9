"""``python -m livecells lib BOOK``: the book's library files, as a build writes them.

The same files the build writes as it starts (:mod:`livecells.library`), from the book's pages
and conf.py's ``livecells_library``, without building: for a book that publishes its library
(d2l's ``d2l/``) or to see it before a build. Exit status: 0 when every file was written or
was already so (warnings or not), 1 when a file was left as it was (a saved block that is not
Python, a file that is not d2lbook's, one that cannot be written), 2 when the book cannot be
read or sets no library.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from livecells.cli.book import Book
from livecells.errors import BookError
from livecells.library import book_pages, make_library, write_library
from livecells.model.frameworks import DEFAULT_FRAMEWORKS, FrameworkSpec
from livecells.model.library import library_settings

DEFAULTS = {
    "livecells_library": None,
    "livecells_frameworks": DEFAULT_FRAMEWORKS,
    "release": "",
    "root_doc": "index",
    "source_suffix": {".rst": "restructuredtext"},
    "exclude_patterns": [],
}


def _frameworks(value: object) -> list[str]:
    """The book's frameworks in order: those of ``livecells_frameworks`` that a build keeps."""
    if not isinstance(value, dict) or not value:
        return list(DEFAULT_FRAMEWORKS)
    kept = []
    for name, settings in value.items():
        try:
            FrameworkSpec.from_settings(name, settings)
        except ValueError:
            continue
        kept.append(name)
    return kept or list(DEFAULT_FRAMEWORKS)


def _suffixes(value: object) -> list[str]:
    """conf.py's ``source_suffix`` (a string, a list or a dict), then .rst and .md."""
    given = [value] if isinstance(value, str) else list(value) if isinstance(value, (list, tuple, dict)) else []
    return list(dict.fromkeys([*given, ".rst", ".md"]))


def cmd_lib(args: argparse.Namespace) -> int:
    book = Book.at(args.book, args.conf_dir)
    values = book.settings(DEFAULTS)
    where = book.confdir / "conf.py" if book.confdir is not None else Path(args.book) / "conf.py"
    if not isinstance(values["livecells_library"], dict):
        raise BookError(f"{where}: livecells_library is not set (a dict): no library to write")
    settings, problems = library_settings(values["livecells_library"])
    settings, others = settings.for_frameworks(_frameworks(values["livecells_frameworks"]))
    for problem in [*problems, *others]:
        print(f"{where}: WARNING: livecells_library: {problem}; that entry is ignored", file=sys.stderr)
    if not settings.files:
        raise BookError(f"{where}: livecells_library names no library file")
    root = Path(args.book)
    out = Path(args.output) if args.output else root
    excluded = values["exclude_patterns"] if isinstance(values["exclude_patterns"], (list, tuple)) else []
    pages, unread = book_pages(root, str(values["root_doc"] or "index"), _suffixes(values["source_suffix"]), excluded)
    library = make_library(root, settings, _frameworks(values["livecells_frameworks"]), pages, out)
    written = write_library(out, library, settings.version_file, str(values["release"] or ""))
    for problem in unread:
        print(f"WARNING: {problem}", file=sys.stderr)
    for problem in library.problems:
        kind = "note" if problem.note else "WARNING"
        print(f"{problem.location or where}: {kind}: {problem.message}", file=sys.stderr)
    shown = {path.resolve() for path in written}
    for file in settings.files:
        path = out / file.lib_file
        if file.lib_file in library.kept or file.lib_file not in library.texts:
            state = "left as it was"
        else:
            state = "written" if path.resolve() in shown else "unchanged"
        count = len(library.blocks.get(file.framework, []))
        print(f"{path}: {state} ({file.framework}: {count} saved blocks from {len(pages)} pages)")
    failed = bool(library.kept) or any("cannot be written" in p.message for p in library.problems)
    return 1 if failed else 0


def add_lib_parser(commands: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    lib = commands.add_parser(
        "lib",
        help="write the book's library files from its #@save cells",
        description="Write the book's library files (livecells_library of its conf.py: one per "
        "framework, such as d2l's d2l/torch.py) from the #@save cells of its pages, as d2lbook's "
        "build lib does and as sphinx-build does before any session starts; only files whose text "
        "changed are written. Warnings go to stderr. Exit status: 0 when every file was written or "
        "already so, 1 when one was left as it was (see the warnings), 2 when the book cannot be "
        "read or sets no library.",
    )
    lib.add_argument("book", metavar="BOOK", help="the book's Sphinx source folder")
    lib.add_argument(
        "-c", "--conf-dir", metavar="CONFDIR",
        help="the folder of the book's conf.py, as sphinx-build's -c (default: BOOK)",
    )
    lib.add_argument(
        "-o", "--output", metavar="OUTDIR",
        help="write the files under OUTDIR (the lib_file paths relative to it) instead of BOOK",
    )
    lib.set_defaults(func=cmd_lib)
