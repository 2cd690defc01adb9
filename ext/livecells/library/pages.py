"""A book's pages as the library reads them: in the order of its toctrees, each page's
``live-cell`` directives and, between them, the labels of its prose.

Read from the sources (RST and MyST Markdown, ``{eval-rst}`` blocks as RST), without Sphinx, so
that the library is written before a build reads any page (its kernels import it) and by
``python -m livecells lib`` alike. The order is d2lbook's (``get_toc``): the root page, then each
page its toctrees name, depth first, each page once; a page ``exclude_patterns`` matches is left
out. Nothing here knows Sphinx.
"""

from __future__ import annotations

import fnmatch
import glob
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Union

ALL = "all"

_MYST_OPEN = re.compile(r"^(\s*)(`{3,}|~{3,}|:{3,})\s*(.*)$")
_DIRECTIVE = re.compile(r"^\{([\w:.-]+)\}\s*(.*)$")
_RST_DIRECTIVE = re.compile(r"^(\s*)\.\.\s+([\w:.-]+)::\s*(.*)$")
_OPTION = re.compile(r"^:[\w-]+:")
#: MyST directives whose body is not Markdown.
_CODE_LIKE = frozenset({"code-block", "code", "code-cell", "sourcecode", "math", "raw"})
_LABELS = [
    re.compile(r"^\s*\(([^()\s]+)\)=\s*$"),  # MyST target
    re.compile(r"^\s*\.\.\s+_([^:`]+):\s*$"),  # RST target
    re.compile(r"^\s*:(?:name|label):\s+(\S+)\s*$"),  # a figure's, table's or equation's option
    re.compile(r":label:`([^`]+)`"),  # d2lbook's own mark, if one is left
]


@dataclass(frozen=True)
class PageCell:
    """One ``live-cell``: the frameworks it names as written (``all`` among them), its code, the
    directive's line."""

    frameworks: tuple[str, ...]
    code: str
    line: int
    #: The line of the code's first line.
    code_line: int = 0


#: A page's items in order: its cells, and the labels of each run of prose between them (a run
#: that is blank is no item: d2lbook makes no markdown cell of it).
Item = Union[PageCell, tuple[str, ...]]


@dataclass(frozen=True)
class BookPage:
    docname: str
    path: Path
    items: tuple[Item, ...]

    def cells(self) -> list[PageCell]:
        return [item for item in self.items if isinstance(item, PageCell)]


class _Reader:
    """One source file's items and toctree entries."""

    def __init__(self) -> None:
        self.items: list[Item] = []
        self.prose_labels: list[str] = []
        self.prose_text = False
        self.toc: list[tuple[list[str], bool]] = []  # (entries, glob)

    def prose(self, line: str) -> None:
        if line.strip():
            self.prose_text = True
        for pattern in _LABELS:
            self.prose_labels.extend(m for m in pattern.findall(line))

    def cell(self, cell: PageCell) -> None:
        self.flush()
        self.items.append(cell)

    def flush(self) -> None:
        if self.prose_text:
            self.items.append(tuple(self.prose_labels))
        self.prose_labels, self.prose_text = [], False


def _frameworks(argument: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in argument.replace(" ", ",").split(",") if part.strip())


def _toc_entries(body: list[str]) -> tuple[list[str], bool]:
    """A toctree's entries (its options left out) and whether it has ``:glob:``."""
    entries, globbed = [], False
    for line in body:
        text = line.strip()
        if not text:
            continue
        if _OPTION.match(text):
            globbed = globbed or text.startswith(":glob:")
            continue
        match = re.match(r"^.*<(.+)>$", text)
        entries.append(match[1].strip() if match else text)
    return entries, globbed


def _read_myst(lines: list[str], first: int, reader: _Reader) -> None:
    i = 0
    while i < len(lines):
        line = lines[i]
        opened = _MYST_OPEN.match(line)
        if not opened:
            reader.prose(line)
            i += 1
            continue
        indent, fence, info = opened.groups()
        close = re.compile(rf"^\s*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        end = i + 1
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        body = [b[len(indent):] if b.startswith(indent) else b.lstrip() for b in lines[i + 1 : end]]
        directive = _DIRECTIVE.match(info)
        name = directive[1] if directive else ""
        if name == "live-cell":
            content = _myst_content(body)
            skipped = len(body) - len(content)
            reader.cell(PageCell(_frameworks(directive[2]), "\n".join(content), first + i, first + i + 1 + skipped))  # type: ignore[index]
        elif name == "toctree":
            reader.toc.append(_toc_entries(body))
            reader.prose_text = True
        elif name == "eval-rst":
            _read_rst(body, first + i + 1, reader)
        elif directive:
            # Another directive (a figure, a note): its options and prose are the page's.
            reader.prose(line)
            if name in _CODE_LIKE:
                for inner in lines[i + 1 : end]:
                    reader.prose(inner)
            else:
                _read_myst(lines[i + 1 : end], first + i + 1, reader)
        else:
            reader.prose_text = True  # a code block: text, no cells or labels
        i = end + 1


def _myst_content(body: list[str]) -> list[str]:
    """A MyST directive's content: its options (``:key: value`` lines, or a ``---`` block) and
    one blank line after them left out."""
    if body and body[0].strip() == "---":
        end = next((j for j in range(1, len(body)) if body[j].strip() == "---"), len(body) - 1)
        body = body[end + 1 :]
    else:
        n = 0
        while n < len(body) and _OPTION.match(body[n]):
            n += 1
        body = body[n:]
    if body and not body[0].strip():
        body = body[1:]
    return body


def _rst_block(lines: list[str], start: int, indent: int) -> int:
    """The end (exclusive) of the block that follows the directive at ``start - 1``: the lines
    blank or indented more than ``indent``."""
    end = start
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return end


def _dedent(block: list[str]) -> list[str]:
    widths = [len(b) - len(b.lstrip()) for b in block if b.strip()]
    cut = min(widths) if widths else 0
    return [b[cut:] for b in block]


def _read_rst(lines: list[str], first: int, reader: _Reader) -> None:
    i = 0
    while i < len(lines):
        line = lines[i]
        directive = _RST_DIRECTIVE.match(line)
        if not directive or directive[2] not in {"live-cell", "toctree", "code-block", "code", "sourcecode"}:
            reader.prose(line)
            i += 1
            continue
        indent = len(directive[1])
        end = _rst_block(lines, i + 1, indent)
        block = _dedent(lines[i + 1 : end])
        n = 0
        while n < len(block) and block[n].strip() and _OPTION.match(block[n].strip()):
            n += 1
        if directive[2] == "live-cell":
            start = n
            while start < len(block) and not block[start].strip():
                start += 1
            reader.cell(PageCell(_frameworks(directive[3]), "\n".join(block[start:]), first + i, first + i + 1 + start))
        elif directive[2] == "toctree":
            reader.toc.append(_toc_entries(block))
            reader.prose_text = True
        else:
            reader.prose(line)  # a code block: text, no cells
        i = end


def read_page(path: Path, docname: str) -> tuple[BookPage, list[tuple[list[str], bool]]]:
    """A page's items, and its toctrees' entries."""
    text = path.read_text(encoding="utf-8-sig")
    reader = _Reader()
    lines = text.splitlines()
    if path.suffix == ".md":
        _read_myst(lines, 1, reader)
    else:
        _read_rst(lines, 1, reader)
    reader.flush()
    return BookPage(docname, path, tuple(reader.items)), reader.toc


def book_pages(
    root: Path, root_doc: str = "index", suffixes: Sequence[str] = (".rst", ".md"), exclude: Iterable[str] = ()
) -> tuple[list[BookPage], list[str]]:
    """The pages of the book in ``root`` in toctree order from ``root_doc``, and the problems met
    (a page that cannot be read)."""
    excluded = list(exclude)
    pages: list[BookPage] = []
    problems: list[str] = []
    seen: set[str] = set()

    def source(docname: str) -> Path | None:
        for suffix in suffixes:
            path = root / f"{docname}{suffix}"
            if path.is_file():
                relative = path.relative_to(root).as_posix()
                if any(fnmatch.fnmatch(relative, p) or fnmatch.fnmatch(docname, p) for p in excluded):
                    return None
                return path
        return None

    def globbed(base: str, pattern: str) -> list[str]:
        found = []
        for suffix in suffixes:
            for match in glob.glob(str(root / f"{_joined(base, pattern)}{suffix}"), recursive=True):
                found.append(Path(match).relative_to(root).with_suffix("").as_posix())
        return sorted(set(found))

    def visit(docname: str) -> None:
        if docname in seen:
            return
        seen.add(docname)
        path = source(docname)
        if path is None:
            return
        try:
            page, tocs = read_page(path, docname)
        except (OSError, UnicodeDecodeError) as err:
            problems.append(f"{path}: cannot be read ({err}): its #@save cells are left out")
            return
        pages.append(page)
        base = docname.rpartition("/")[0]
        for entries, is_glob in tocs:
            for entry in entries:
                if entry == "self" or re.match(r"^[a-z]+://", entry):
                    continue
                if is_glob and glob.has_magic(entry):
                    for name in globbed(base, entry):
                        visit(name)
                    continue
                name = _joined(base, entry)
                for suffix in suffixes:
                    name = name.removesuffix(suffix)
                visit(name)

    visit(root_doc)
    return pages, problems


def _joined(base: str, entry: str) -> str:
    """A toctree entry's docname, relative to the page's folder (``/x``: to the book's)."""
    if entry.startswith("/"):
        return entry.lstrip("/")
    parts: list[str] = base.split("/") if base else []
    for part in entry.split("/"):
        if part == "..":
            if parts:
                parts.pop()
        elif part not in ("", "."):
            parts.append(part)
    return "/".join(parts)
