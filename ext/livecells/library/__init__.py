"""The book's library files (``livecells_library``), as d2lbook's ``build lib`` writes them.

:func:`make_library` reads the pages (:mod:`.pages`) and applies d2lbook's rules
(:mod:`.rules`) per framework: a framework's file holds the saved blocks of the cells of its
sessions (a cell of ``all``: of every framework the page's cells name, else the book's first, as
livecells runs it), in page order. :func:`write_library` writes the files that changed. Used
by ``python -m livecells lib`` and by the build, before any session starts.

What cannot be used is a :class:`LibraryProblem` at its page's line, and changes nothing else: a
saved block that is not Python keeps its framework's file as it was (the last good one); a file
that is not d2lbook's or livecells' (no warning line) is not overwritten. A name saved by two
pages in two ways is kept twice, as d2lbook keeps it (the later one is what an import gives), and
warned of. Nothing here knows Sphinx.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from pathlib import Path

from livecells.library.pages import ALL, BookPage, PageCell, book_pages
from livecells.library.rules import (
    Formatter,
    SavedBlock,
    latest_label,
    library_text,
    marked_lines,
    saved_block,
    version_text,
)
from livecells.model.library import WARNING_LINE, LibraryFile, LibrarySettings, head_of

__all__ = ["Library", "LibraryProblem", "book_pages", "make_library", "write_library"]


@dataclass(frozen=True)
class LibraryProblem:
    """What to warn of, and where (``file:line``; "" the setting itself); ``note``: worth saying,
    not a problem (a version file that is not there: a book excerpt, a ``d2l/`` made anew)."""

    message: str
    location: str = ""
    note: bool = False
    #: A name saved again, unlike before: d2l redefines some on purpose (a stub its appendix
    #: replaces, an ``add_to_class`` override), so these warn under a subtype of their own.
    redefined: bool = False


@dataclass
class Library:
    """The files to write (path relative to the output folder -> text), those kept as they are,
    the blocks each framework saved, and the problems."""

    texts: dict[str, str] = field(default_factory=dict)
    kept: list[str] = field(default_factory=list)
    blocks: dict[str, list[SavedBlock]] = field(default_factory=dict)
    problems: list[LibraryProblem] = field(default_factory=list)


def page_cells(page: BookPage, frameworks: list[str], framework: str) -> list[tuple[PageCell, list[tuple[str, ...]]]]:
    """The page's cells of ``framework``'s session, each with the label runs d2lbook looks at
    for it: the prose before it in that framework's notebook, but the run (or cell) right before."""
    named = {name for cell in page.cells() for name in cell.frameworks if name != ALL}
    on_page = [name for name in frameworks if name in named] or frameworks[:1]
    if framework not in on_page:
        return []
    items = [
        item for item in page.items
        if not isinstance(item, PageCell) or framework in (on_page if ALL in item.frameworks else item.frameworks)
    ]
    found = []
    for i, item in enumerate(items):
        if isinstance(item, PageCell):
            found.append((item, [run for run in items[: max(i - 1, 0)] if not isinstance(run, PageCell)]))
    return found


def _definitions(tree: ast.Module) -> dict[str, str]:
    """A block's top-level definitions by name (an ``@d2l.add_to_class(C)`` function as ``C.f``),
    each as its AST (formatting and comments aside)."""
    found = {}
    for node in tree.body:
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        name = node.name
        for decorator in node.decorator_list:
            text = ast.unparse(decorator)
            if text.startswith("d2l.add_to_class(") and isinstance(decorator, ast.Call) and decorator.args:
                name = f"{ast.unparse(decorator.args[0]).split('.')[-1]}.{node.name}"
        found[name] = ast.dump(node)
    return found


def _location(page: BookPage, cell: PageCell) -> str:
    first = marked_lines(cell.code)
    return f"{page.path}:{cell.code_line + (first[0] if first else 0)}"


def make_library(
    root: Path,
    settings: LibrarySettings,
    frameworks: list[str],
    pages: list[BookPage],
    out: Path | None = None,
) -> Library:
    """The library files of the book in ``root`` (written to ``out``, default ``root``), from its
    ``pages`` in order; ``frameworks``: the book's, in order."""
    out = out or root
    formatter = Formatter(root)
    library = Library()
    for file in settings.files:
        blocks: list[SavedBlock] = []
        defined: dict[str, tuple[str, str, str]] = {}  # name -> (AST, page, location)
        good = True
        for page in pages:
            for cell, runs in page_cells(page, frameworks, file.framework):
                text = saved_block(cell.code, formatter)
                if not text:
                    continue
                where = _location(page, cell)
                try:
                    tree = ast.parse(text)
                except SyntaxError as err:
                    library.problems.append(LibraryProblem(
                        f"#@save [{file.framework}]: the saved code is not Python ({err.msg}, line {err.lineno} "
                        f"of what it saves): {file.lib_file} is not written, the last one is kept",
                        where,
                    ))
                    good = False
                    continue
                for name, dump in _definitions(tree).items():
                    before = defined.get(name)
                    if before is not None and before[0] != dump and before[1] != page.docname:
                        library.problems.append(LibraryProblem(
                            f"#@save [{file.framework}]: {name!r} is saved again, unlike at {before[2]}: "
                            f"{file.lib_file} keeps both, and the later one is what an import gives (as in d2lbook)",
                            where, redefined=True,
                        ))
                    defined[name] = (dump, page.docname, where)
                blocks.append(SavedBlock(text, latest_label(runs), str(page.path), cell.line))
        library.blocks[file.framework] = blocks
        if formatter.missing and any("import " in b.text for b in blocks):
            library.problems.append(LibraryProblem(
                f"isort is not installed: the imports saved into {file.lib_file} keep their order, not d2lbook's"
            ))
        head = _head(out, file, library)
        if not good or head is None:
            library.kept.append(file.lib_file)
            continue
        library.texts[file.lib_file] = library_text(head, blocks, file)
    return library


def _head(out: Path, file: LibraryFile, library: Library) -> str | None:
    """The head of ``file``: its ``header``, else what the file holds above the warning line
    (None: the file is there without one, and is not d2lbook's to rewrite)."""
    if file.header is not None:
        return file.header
    target = out / file.lib_file
    try:
        text = target.read_text(encoding="utf-8")
    except FileNotFoundError:
        return ""
    except (OSError, UnicodeDecodeError) as err:
        library.problems.append(LibraryProblem(f"{file.lib_file} cannot be read ({err}): it is not written"))
        return None
    head = head_of(text)
    if head is None:
        library.problems.append(LibraryProblem(
            f"{file.lib_file} has no line {WARNING_LINE!r}, so neither d2lbook nor livecells wrote it: it is not "
            "overwritten (remove it, or give the part above that line as the framework's 'header')"
        ))
    return head


def write_library(out: Path, library: Library, version_file: str = "", release: str = "") -> list[Path]:
    """Write the library's files under ``out`` where their text changed, and ``release`` into
    ``version_file``; returns the files written. A file that cannot be written is a problem."""
    written = []
    texts = dict(library.texts)
    if version_file and release:
        path = out / version_file
        try:
            texts[version_file] = version_text(path.read_text(encoding="utf-8"), release)
        except FileNotFoundError:
            note = f"version_file {version_file} is not there: no version written"
            library.problems.append(LibraryProblem(note, note=True))
        except (OSError, UnicodeDecodeError) as err:
            library.problems.append(LibraryProblem(f"version_file {version_file} cannot be read ({err})"))
    for relative, text in texts.items():
        path = out / relative
        try:
            if path.is_file() and path.read_bytes() == text.encode("utf-8"):
                continue
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        except OSError as err:
            library.problems.append(LibraryProblem(f"{relative} cannot be written: {err.strerror or err}"))
            continue
        written.append(path)
    return written
