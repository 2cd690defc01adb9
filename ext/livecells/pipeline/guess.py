"""Before Sphinx reads the pages: which frameworks' sessions will probably run, from their text.

A build starts a framework's fork-server template (the framework's import, seconds) only for the
sessions that run; known for sure only after reading, by keys. Guessed from the text before it,
the import overlaps with the reading: a page to read whose cells of a framework are not those its
stored session ran (their code, cell by cell, as the directive will read it), or that has none.
A wrong guess costs a template started for nothing, or the overlap; what runs is decided by keys.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from livecells.model.plans import code_sha

#: A ``live-cell`` in RST (``.. live-cell:: ARG``) or MyST (a fence of backticks or colons).
RST_CELL = re.compile(r"^(?P<indent>[ \t]*)\.\. live-cell::[ \t]*(?P<arg>.*)$")
MYST_CELL = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|:{3,})\{live-cell\}[ \t]*(?P<arg>.*)$")
OPTION = re.compile(r"^:[\w-]+:")


def _names(arg: str) -> list[str]:
    return [n for n in re.split(r"[,\s]+", arg.strip()) if n]


def _dedent(lines: list[str]) -> list[str]:
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    width = min((len(line) - len(line.lstrip()) for line in lines if line.strip()), default=0)
    return [line[width:] for line in lines]


def _rst_body(lines: list[str], start: int, indent: int) -> tuple[list[str], int]:
    """The indented block after a directive line at ``start``: its content lines (options and
    the blank line after them left out) and where the block ends."""
    end = start + 1
    while end < len(lines) and (not lines[end].strip() or len(lines[end]) - len(lines[end].lstrip()) > indent):
        end += 1
    block = _dedent(lines[start + 1 : end])
    while block and OPTION.match(block[0]):
        block.pop(0)
    return _dedent(block), end


def _myst_body(lines: list[str], start: int, fence: str) -> tuple[list[str], int]:
    end = start + 1
    while end < len(lines) and lines[end].strip() != fence:
        end += 1
    block = lines[start + 1 : end]
    if block and block[0].strip() == "---":  # options as a YAML block
        close = next((i for i in range(1, len(block)) if block[i].strip() == "---"), None)
        block = block[close + 1 :] if close is not None else block
    while block and OPTION.match(block[0].strip()):
        block.pop(0)
    return _dedent(block), end + 1


def cells(text: str) -> list[tuple[list[str], str]]:
    """Each ``live-cell`` of a page's text, in order: its framework names and its code, as the
    directive reads them (RST or MyST)."""
    lines = text.splitlines()
    found = []
    i = 0
    while i < len(lines):
        rst, myst = RST_CELL.match(lines[i]), MYST_CELL.match(lines[i])
        if rst:
            body, i = _rst_body(lines, i, len(rst["indent"]))
            found.append((_names(rst["arg"]), "\n".join(body)))
        elif myst:
            body, i = _myst_body(lines, i, myst["fence"])
            found.append((_names(myst["arg"]), "\n".join(body)))
        else:
            i += 1
    return found


def frameworks(found: list[tuple[list[str], str]], known: list[str]) -> dict[str, list[str]]:
    """The code shas of each framework's session, as the collector plans them: ``all`` cells
    run in every framework the page names (the first of ``known`` if it names none)."""
    named = {n for names, _ in found for n in names if n != "all"}
    page = [fw for fw in known if fw in named] or known[:1]
    sessions: dict[str, list[str]] = {}
    for names, code in found:
        for name in page if "all" in names else [n for n in names if n in known]:
            sessions.setdefault(name, []).append(code_sha(code))
    return sessions


def changed_frameworks(text: str, stored: Path | None, known: list[str]) -> set[str]:
    """The frameworks (of ``known``, the book's, in order) whose cells in the page's ``text`` are
    not, cell by cell, the code of the session that the store file ``stored`` holds for them
    (None, or a file that cannot be read: none held)."""
    try:
        sessions = json.loads(stored.read_text(encoding="utf-8"))["sessions"] if stored else {}
    except (OSError, ValueError, TypeError, KeyError):
        sessions = {}
    changed = set()
    for name, shas in frameworks(cells(text), known).items():
        try:
            ran = [cell["code_sha"] for cell in sessions[name]["cells"]]
        except (KeyError, TypeError):
            ran = None
        if ran != shas:
            changed.add(name)
    return changed
