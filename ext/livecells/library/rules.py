"""d2lbook 1.0.3's rules for a library file (``d2lbook/library.py``), read and written anew.

- **A cell's saved block** (:func:`saved_block`): from each line with a ``# @save`` mark (the
  mark and what follows it cut), that line, the unindented lines right after it, then the
  indented or empty lines after those, up to the next unindented line; all of a cell's marks make
  one block. Its imports are sorted by isort as d2lbook configures it (no blank line between
  sections), each line's trailing spaces cut, the block stripped.
- **Where it was defined** (:func:`with_label`): with the latest ``sec_`` label of the prose
  before the cell (not the prose right before it: d2lbook looks at the cells before the one
  before), each top-level ``def``/``class`` gets ``Defined in :numref:`label``` in its docstring.
- **Methods added to a class** (:func:`merged`): a block of ``@d2l.add_to_class(C)`` functions
  joins the saved class ``C``, indented, where it was saved.
- **The file** (:func:`library_text`): the head above the warning line, the warning, the blocks
  joined by a blank line; then the aliases of config.ini (:func:`alias_text`).

Where d2lbook would stop with a traceback (a method for a class no page saved, code before the
first ``@d2l.add_to_class``), the block is kept as it is. Nothing here knows Sphinx.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from livecells.model.library import GENERATED, LibraryFile

SAVE_MARK = re.compile(r"# *@save")
REGISTER = "@d2l.add_to_class"
_REGISTERED = re.compile(r"@d2l\.add_to_class\(([.\w]+)\)")
_CLASS = re.compile(r"class +(\w+)")


@dataclass(frozen=True)
class SavedBlock:
    """One cell's saved code: the text, the ``sec_`` label it is defined under ("" none), and
    where: the page's file and the line of its first mark."""

    text: str
    label: str
    source: str
    line: int


def marked_lines(code: str) -> list[int]:
    """The indices of the lines of ``code`` with a save mark."""
    return [i for i, line in enumerate(code.splitlines()) if SAVE_MARK.search(line)]


def raw_block(code: str) -> str:
    """The lines a cell saves, before formatting ("" none)."""
    lines = code.splitlines()
    block: list[str] = []
    for i in marked_lines(code):
        head = lines[i][: SAVE_MARK.search(lines[i]).start()].rstrip()  # type: ignore[union-attr]
        if head:
            block.append(head)
        j = i + 1
        while j < len(lines) and lines[j] and not lines[j].startswith(" "):
            block.append(lines[j])
            j += 1
        while j < len(lines) and (lines[j].startswith(" ") or not lines[j]):
            block.append(lines[j])
            j += 1
    return "\n".join(block)


class Formatter:
    """d2lbook's ``format_code``: isort (one section after the other, no blank lines between) for
    a block with ``import `` in it, trailing spaces cut, the block stripped. First-party modules
    are those of ``root``, the book's folder (d2lbook runs there)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.missing = False  # isort could not be imported: imports keep their order

    @functools.cached_property
    def _config(self) -> object | None:
        try:
            import isort
            from isort import sections
        except ImportError:
            self.missing = True
            return None
        order = [sections.FUTURE, sections.STDLIB, sections.THIRDPARTY, sections.FIRSTPARTY, sections.LOCALFOLDER]
        root = self.root.resolve()
        return isort.Config(no_lines_before=order, src_paths=(root / "src", root), directory=str(root))

    def __call__(self, source: str) -> str:
        if "import " in source:
            config = self._config
            if config is not None:
                import isort

                source = isort.code(source, config=config)
        return "\n".join(line.rstrip() for line in source.split("\n")).strip()


def saved_block(code: str, formatter: Formatter) -> str:
    """A cell's saved block, formatted ("" when it saves nothing)."""
    return formatter(raw_block(code)) if marked_lines(code) else ""


def latest_label(texts: Sequence[Sequence[str]]) -> str:
    """The last ``sec_`` label of the prose runs ``texts`` (each a run's labels, in order)."""
    for labels in reversed(texts):
        for label in reversed(labels):
            if "sec_" in label:
                return label
    return ""


def _cut(lines: list[str], starts: object) -> list[list[str]]:
    """d2lbook's ``split_list``: the lines before the first start, then a part per start."""
    parts: list[list[str]] = []
    begin = 0
    for i, line in enumerate(lines):
        if starts(line):  # type: ignore[operator]
            parts.append(lines[begin:i])
            begin = i
    parts.append(lines[begin:])
    return parts


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def with_label(block: str, label: str) -> str:
    """``block`` with ``Defined in :numref:`label``` in the docstring of each top-level ``def``
    and ``class`` (the line after the first line with ``):`` of each; one is added where that
    line is not a one-line docstring)."""
    if not label:
        return block
    modules = _cut(block.split("\n"), lambda line: line.startswith("def") or line.startswith("class"))
    kept = ["\n".join(modules[0])] if modules[0] else []
    where = f"Defined in :numref:`{label}`\"\"\""
    for module in modules[1:]:
        parts = _cut(module, lambda line: "):" in line)
        if len(parts) > 1:
            doc = parts[1][1] if len(parts[1]) > 1 else _indent(module[0]) + "    "
            if doc.lstrip().startswith('"""') and doc.endswith('"""'):
                parts[1][1] = doc[:-3] + f"\n\n{_indent(doc)}{where}"
            else:
                parts[1].insert(1, f'{_indent(doc)}"""{where}')
        kept.append("\n".join(line for part in parts for line in part))
    return "\n".join(kept)


def merged(blocks: Sequence[SavedBlock]) -> list[SavedBlock]:
    """The blocks with each ``@d2l.add_to_class(C)`` function moved into the saved class ``C``
    (indented, after what the class block holds so far)."""
    out: list[SavedBlock] = []
    classes: dict[str, int] = {}
    for block in blocks:
        lines = block.text.split("\n")
        if lines[0].startswith("class"):
            out.append(block)
            if match := _CLASS.search(lines[0]):
                classes[match[1]] = len(out) - 1
            continue
        if REGISTER not in block.text:
            out.append(block)
            continue
        parts = _cut(lines, lambda line: line.startswith(REGISTER))
        if parts[0]:
            out.append(replace(block, text="\n".join(parts[0])))
        for part in parts[1:]:
            match = _REGISTERED.search(part[0])
            if not match:
                continue  # d2lbook drops it
            name = match[1].split(".")[-1]
            if name not in classes:
                out.append(replace(block, text="\n".join(part)))  # d2lbook: a KeyError
                continue
            host = out[classes[name]]
            text = host.text + "\n\n" + "\n".join("    " + line for line in part[1:])
            out[classes[name]] = replace(host, text=text)
    return out


def _mapping(value: str, split_line: bool = True) -> list[tuple[str, str]]:
    """An alias setting (``a -> b, c``) as pairs, d2lbook's ``_parse_mapping_config``."""
    terms: list[str] = []
    for line in value.splitlines():
        terms.extend(line.split(",") if split_line else [line])
    pairs = []
    for term in (t.strip() for t in terms):
        if not term:
            continue
        sides = term.split("->")
        pairs.append((sides[0].strip(), sides[1].strip()) if len(sides) == 2 else (term, term))
    return pairs


def alias_text(file: LibraryFile) -> str:
    """What d2lbook appends to the file for the framework's aliases ("" none)."""
    alias = ""
    if file.alias is not None:
        alias += file.alias.strip() + "\n"
    if file.lib_name is not None:
        if file.simple_alias is not None:
            for a, b in _mapping(file.simple_alias):
                alias += f"\n{a.removesuffix('(')} = {file.lib_name}.{b.removesuffix('(')}"
        if file.fluent_alias is not None:
            alias += "\n" + "\n".join(
                f"{a} = lambda x, *args, **kwargs: x.{b}(*args, **kwargs)" for a, b in _mapping(file.fluent_alias)
            )
        if file.args_alias is not None:
            for a, b in _mapping(file.args_alias, split_line=False):
                alias += f"\ndef {a}:\n    return {b}"
    return f"\n\n\n# Alias defined in config.ini\n{alias}\n\n" if alias else ""


def library_text(head: str, blocks: Sequence[SavedBlock], file: LibraryFile) -> str:
    """The library file: the head, the warning, the blocks (labels added, methods merged), the
    aliases."""
    labelled = [replace(b, text=with_label(b.text, b.label)) for b in blocks]
    body = "\n\n".join(b.text for b in merged(labelled))
    return head + GENERATED + body + alias_text(file)


def version_text(text: str, release: str) -> str:
    """A version file with each line that names ``__version__`` set to ``release``."""
    lines = text.split("\n")
    return "\n".join(f'__version__ = "{release}"' if "__version__" in line else line for line in lines)
