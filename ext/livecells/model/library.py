"""``livecells_library``: the book's library files (d2lbook's ``build lib``), as conf.py sets them.

d2lbook collects every ``#@save`` block of a book's pages into one file per framework (d2l's
``d2l/torch.py``, ``d2l/mxnet.py``, ...), with the aliases of ``config.ini``'s
``[library-<tab>]`` sections appended, and writes ``[project] release`` into ``[library]
version_file``. The value mirrors those sections: the keys of each framework are d2lbook's
(``lib_file``, ``lib_name``, ``simple_alias``, ``fluent_alias``, ``args_alias``, ``alias``, their
text as config.ini has it), and ``header`` is the hand-written head of the file, above d2lbook's
warning line (left out: the file's own head is kept, as d2lbook keeps it). The rules that make
the files are in :mod:`livecells.library`. Nothing here knows Sphinx.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

#: d2lbook's warning line: what is above it in a library file is the author's (the head).
WARNING_LINE = "#################   WARNING   ################"
#: What d2lbook writes below the head, word for word (a file written so stays d2lbook's to rewrite).
GENERATED = (
    f"{WARNING_LINE}\n"
    "# The below part is generated automatically through:\n"
    "#    d2lbook build lib\n"
    "# Don't edit it directly\n\n"
)

#: A framework's settings, as d2lbook's ``[library-<tab>]`` names them, and livecells' ``header``.
FILE_KEYS = ("lib_file", "lib_name", "simple_alias", "fluent_alias", "args_alias", "alias", "header")
#: The book's settings (d2lbook's ``[library]``).
BOOK_KEYS = ("version_file",)


@dataclass(frozen=True)
class LibraryFile:
    """One framework's library file: where it goes (relative to the source folder), the module
    the aliases map to (``lib_name``: ``torch``), the aliases as d2lbook's config.ini writes them,
    and the head above the warning line. None: not set (d2lbook tells an empty setting from a
    missing one; a missing head is the file's own)."""

    framework: str
    lib_file: str
    lib_name: str | None = None
    simple_alias: str | None = None
    fluent_alias: str | None = None
    args_alias: str | None = None
    alias: str | None = None
    header: str | None = None

    @property
    def module(self) -> str:
        """The import name of the file, from its path (``d2l/torch.py``: ``d2l.torch``), as a
        kernel that has the source folder on its path imports it (``__init__.py`` or not)."""
        return self.lib_file.removesuffix(".py").removesuffix("/__init__").replace("/", ".")

    def raw(self) -> dict[str, str]:
        """The entry as conf.py gives it."""
        return {key: getattr(self, key) for key in FILE_KEYS if getattr(self, key) is not None}


@dataclass(frozen=True)
class LibrarySettings:
    """``livecells_library``: a file per framework, and the file that gets ``__version__``."""

    files: tuple[LibraryFile, ...] = ()
    version_file: str = ""

    def raw(self) -> dict[str, Any]:
        """The value as conf.py gives it."""
        value: dict[str, Any] = {f.framework: f.raw() for f in self.files}
        if self.version_file:
            value["version_file"] = self.version_file
        return value

    def for_frameworks(self, frameworks: list[str]) -> tuple[LibrarySettings, list[str]]:
        """The files of ``frameworks`` (those of the book), in their order, and a message for each
        file of another framework, left out."""
        by_name = {f.framework: f for f in self.files}
        problems = [
            f"{f.framework!r}: not a framework in livecells_frameworks ({', '.join(frameworks)}); that entry is ignored"
            for f in self.files if f.framework not in frameworks
        ]
        kept = tuple(by_name[name] for name in frameworks if name in by_name)
        return LibrarySettings(kept, self.version_file), problems


def library_settings(value: Mapping[Any, Any]) -> tuple[LibrarySettings, list[str]]:
    """The settings of a ``livecells_library`` dict, and what was wrong with what was left out."""
    files: list[LibraryFile] = []
    problems: list[str] = []
    version_file = ""
    targets: dict[str, str] = {}
    for key, item in value.items():
        if key in BOOK_KEYS:
            if isinstance(item, str):
                version_file = item
            else:
                problems.append(f"{key}: must be a path (a string)")
            continue
        if not isinstance(key, str) or not isinstance(item, Mapping):
            problems.append(f"{key!r}: neither {', '.join(BOOK_KEYS)} nor a framework's dict of {', '.join(FILE_KEYS)}")
            continue
        entry, wrong = _file(key, item)
        if entry is not None and entry.lib_file in targets:
            wrong.append(f"lib_file {entry.lib_file!r} is {targets[entry.lib_file]!r}'s too")
            entry = None
        problems.extend(f"{key!r}: {problem}" for problem in wrong)
        if entry is not None:
            targets[entry.lib_file] = key
            files.append(entry)
    return LibrarySettings(tuple(files), version_file), problems


def _file(framework: str, item: Mapping[Any, Any]) -> tuple[LibraryFile | None, list[str]]:
    """One framework's entry: None when it has no usable ``lib_file`` (then nothing is written)."""
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for key, text in item.items():
        if key not in FILE_KEYS:
            problems.append(f"{key!r}: not one of {', '.join(FILE_KEYS)}")
        elif not isinstance(text, str):
            problems.append(f"{key}: must be a string")
        else:
            kept[key] = text
    path = kept.get("lib_file", "").strip()
    if not path:
        return None, [*problems, "no lib_file: no library file for it"]
    if path.startswith("/") or ".." in path.split("/") or not path.endswith(".py"):
        return None, [*problems, f"lib_file {path!r}: must be a .py file inside the source folder"]
    kept["lib_file"] = path
    if kept.get("lib_name") is None:
        for key in ("simple_alias", "fluent_alias", "args_alias"):
            if key in kept:
                problems.append(f"{key} needs lib_name (the module it maps to): ignored, as d2lbook ignores it")
                kept.pop(key)
    return LibraryFile(framework, **kept), problems


def head_of(text: str) -> str | None:
    """What a library file holds above the warning line (None: it has no such line)."""
    lines = text.splitlines(keepends=True)
    for i, line in enumerate(lines):
        if line.strip() == WARNING_LINE.strip():
            return "".join(lines[:i])
    return None
