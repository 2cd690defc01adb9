"""``python -m livecells convert`` for d2lbook markdown sources: MyST Markdown with live cells.

d2lbook's authors write Markdown: code cells are fences with the ``.input`` class
(```` ```{.python .input} ````), a cell's first ``#@tab NAMES`` or ``%%tab NAMES`` line says which
frameworks it belongs to (none: the book's first tab), prose for one framework sits between
``:begin_tab:`NAMES``` and ``:end_tab:``, and ``:label:``/``:numref:``/``:eqref:``/``:cite:`` marks
stand for Sphinx's cross-references. This module reads such a chapter the way d2lbook's
``notebook.py``, ``rst.py`` and ``slides.py`` do, and writes it as MyST Markdown:

- a cell becomes ```` ```{live-cell} NAMES ```` (``all``, one name or a comma list); a cell whose
  code picks branches with ``tab.selected(...)`` becomes one cell per framework, each with its
  branches resolved, and frameworks whose resolved code is the same share one cell;
- the ``%load_ext d2lbook.tab`` / ``tab.interact_select(...)`` cell is dropped;
- ``#@hide``, ``#@hide_code``, ``#@hide_output`` and ``#@hide_all`` become ``:hide-code:`` and
  ``:hide-output:`` (the cell still runs); ``#@save`` stays in the code as a comment;
- tab prose becomes ```` ```{live-text} NAMES ```` (``all``: plain prose); prose and cells of
  frameworks the book does not have are dropped, as d2lbook drops them;
- the slide marks ``[**…**]`` and ``(**…**)`` keep their text, ``[~~…~~]`` and ``(~~…~~)`` are
  removed;
- marks become MyST: ``(label)=`` targets, a labelled image becomes a ``{figure}``, a labelled
  ``$$…$$`` a ``{math}`` block, ``:numref:`` → ``{numref}``, ``:eqref:`` → ``{eq}``, ``:cite:``/
  ``:citet:``/``:citep:`` → ``{cite}``/``{cite:t}``/``{cite:p}``, ``:bibliography:`` →
  ``{bibliography}`` (with d2lbook's ``:style: apa``), and ``eval_rst``/``toc`` fences → ``{eval-rst}``/``{toctree}``.

Which frameworks the book has comes from d2lbook's ``config.ini`` (``[build] tabs``) when it lies
beside the chapter or above it; else from the chapter's ``tab.interact_select([...])``; else from
the tabs the chapter uses. Anything not understood is kept as it is, with a ``source:line`` warning.

Its size (about 680 lines) is the grammar of d2lbook's Markdown in one place, as d2lbook's own
reader has it: chunks, tab branches, hide marks, cross-reference marks, then the tree and the
command line.
"""

from __future__ import annotations

import argparse
import configparser
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

from livecells.cli.convert import read_chapter, write_converted
from livecells.cli.convert_settings import GpuInference, infer_gpus, where

#: The directive for one framework's prose (see docs/directive.rst).
TEXT_DIRECTIVE = "live-text"

_FENCE = re.compile(r"^(`{3,})\s*(.*)$")
_INPUT_INFO = re.compile(r"^\{[^}]*(?<![\w-])\.input(?![\w-])[^}]*\}\s*$")
_TAB_MARKER = re.compile(r"#\s*@tab\s+([\w, ]+)|%%tab\s+([\w, ]+)")
_TAB_PROSE = re.compile(r"^:(begin_tab|end_tab):(`([^`]*)`)?\s*$")
_INTERACT = re.compile(r"interact_select\(\s*\[?([^)\]]*)")
#: One d2lbook mark: ``:key:`value``` (the value is optional for d2lbook, required here).
_MARK = re.compile(r":([\w.-]+):`([^`]*)`")
_MARK_LINE = re.compile(r"^\s*(:[\w.-]+:`[^`]*`\s*)+$")
#: The marks that d2lbook reads on a line of their own, about the paragraph above them.
_BLOCK_MARKS = {"label", "eqlabel", "width", "height", "bibliography"}
_IMAGE = re.compile(r"^!\[(.*)\]\((\S+?)\)\s*$")
_HEADING = re.compile(r"^#{1,6}\s")
#: Inline marks and the MyST role each becomes.
_ROLES = {
    "numref": "numref", "ref": "ref", "eqref": "eq", "cite": "cite", "citet": "cite:t",
    "citep": "cite:p", "class": "py:class", "func": "py:func", "mod": "py:mod",
}
#: d2lbook's slide marks: (open, close, keep the text).
_SLIDE_MARKS = (("[**", "**]", True), ("(**", "**)", True), ("[~~", "~~]", False), ("(~~", "~~)", False))


@dataclass
class MarkdownResult:
    """A converted chapter: its MyST text, how many live cells it has, and ``source:line`` warnings."""

    text: str
    cells: int = 0
    warnings: list[str] = field(default_factory=list)
    gpus: GpuInference = field(default_factory=GpuInference)

    def summary(self, source: str) -> str:
        """One line for the report: live cells written, settings inferred."""
        text = f"{source}: {self.cells} live cells"
        if self.gpus.settings:
            text += f"; inferred live-settings :gpus: {self.gpus.gpus} from {where(self.gpus.evidence)}"
        return text


@dataclass
class _Chunk:
    """A run of source lines: ``prose``, ``tab`` prose, a ``cell`` or another ``fence``."""

    kind: str
    line: int  # 1-based line of its first source line
    lines: list[str]
    tabs: list[str] = field(default_factory=list)  # for "tab": the framework names
    info: str = ""  # for "cell" and "fence": the opening fence's info string
    mark: str = ""  # for "fence": the backticks


def is_d2lbook_markdown(text: str) -> bool:
    """Whether ``text`` has d2lbook's cell markers: ``.input`` fences, ``#@tab``/``%%tab``, tab prose."""
    for line in text.splitlines():
        fence = _FENCE.match(line)
        if fence and _INPUT_INFO.match(fence[2]):
            return True
        if _TAB_PROSE.match(line) or re.match(r"\s*(#\s*@tab|%%tab)\s", line):
            return True
    return False


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _split(lines: list[str], warn) -> list[_Chunk]:
    """Cut a chapter into chunks, as d2lbook's ``markdown.split_markdown`` reads it.

    A fence closes only on the same run of backticks; inside tab prose fences do not split.
    """
    chunks: list[_Chunk] = []
    current: _Chunk | None = None
    tab: _Chunk | None = None
    for number, line in enumerate(lines, 1):
        fence = _FENCE.match(line)
        if current is not None and current.kind in ("cell", "fence"):
            if fence and fence[1] == current.mark and not fence[2].strip():
                chunks.append(current)
                current = None
            else:
                current.lines.append(line)
            continue
        if fence and tab is None:
            kind = "cell" if _INPUT_INFO.match(fence[2]) else "fence"
            current = _Chunk(kind, number, [], info=fence[2].strip(), mark=fence[1])
            continue
        prose = _TAB_PROSE.match(line)
        if prose and prose[1] == "begin_tab":
            if tab is not None:
                warn(number, ":begin_tab: inside tab prose: the first one ends here")
                chunks.append(tab)
            tab = _Chunk("tab", number + 1, [], tabs=_names(prose[3] or ""))
            continue
        if prose and prose[1] == "end_tab":
            if tab is None:
                warn(number, ":end_tab: without :begin_tab: dropped")
                chunks.append(_Chunk("prose", number + 1, []))  # the lines after keep their numbers
            else:
                chunks.append(tab)
                tab = None
            continue
        if tab is not None:
            tab.lines.append(line)
            continue
        if not chunks or chunks[-1].kind != "prose":
            chunks.append(_Chunk("prose", number, []))
        chunks[-1].lines.append(line)
    if current is not None:
        warn(current.line, "code fence never closed: kept to the end of the file")
        chunks.append(current)
    if tab is not None:
        warn(tab.line, ":begin_tab: never closed by :end_tab:: kept to the end of the file")
        chunks.append(tab)
    return chunks


def remove_slide_marks(text: str) -> str:
    """d2lbook's slide marks out of prose: ``[**x**]`` → ``x``, ``[~~x~~]`` → nothing.

    A ``[**x**](url)`` is a Markdown link, not a mark, and stays.
    """
    for opening, closing, keep in _SLIDE_MARKS:
        inner = rf"((?:(?!{re.escape(closing)}).)*?)"
        link = r"(?!\()" if closing.endswith("]") else ""
        pattern = re.compile(re.escape(opening) + inner + re.escape(closing) + link, re.DOTALL)
        text = pattern.sub(lambda m: m[1] if keep else "", text)
    return text


def _tab_marker(code: str) -> list[str] | None:
    """The frameworks of a cell's first ``#@tab``/``%%tab`` line, or None."""
    match = _TAB_MARKER.search(code)
    return _names(match[1] or match[2]) if match else None


def resolve_tab_branches(lines: list[str], framework: str) -> list[str]:
    """The code as ``framework`` runs it: ``if tab.selected(...)`` branches resolved.

    As d2lbook's ``_clean_if_branches``: an ``if`` whose line names the framework in quotes keeps
    its body, dedented; another drops it; the branch ends at the first line indented no deeper
    than the ``if``; a ``tab.selected`` branch inside a kept one is resolved in turn. Unlike
    d2lbook, an ``elif``/``else`` of such an ``if`` is resolved too.
    """
    while True:
        resolved = _resolve_outer_branches(lines, framework)
        if resolved == lines:
            return resolved
        lines = resolved


def _resolve_outer_branches(lines: list[str], framework: str) -> list[str]:
    out: list[str] = []
    mode = ""  # "" outside a branch, "keep" or "drop" inside one
    indent, body_indent, chain_taken = 0, None, False
    for line in lines:
        stripped = line.strip()
        depth = len(line) - len(line.lstrip())
        if mode and stripped and depth <= indent:
            mode = ""
            if depth == indent and re.match(r"(elif\b.*|else\s*):", stripped):
                if stripped.startswith("else"):
                    taken = not chain_taken
                else:
                    taken = "tab.selected" in stripped and _names_framework(stripped, framework)
                mode, body_indent = ("keep" if taken else "drop"), None
                chain_taken = chain_taken or taken
                continue
        if not mode and re.match(r"if\b", stripped) and "tab.selected" in stripped:
            taken = _names_framework(stripped, framework)
            mode, indent, body_indent, chain_taken = ("keep" if taken else "drop"), depth, None, taken
            continue
        if mode == "keep":
            if not stripped:
                out.append("")
                continue
            if body_indent is None:
                body_indent = depth - indent
            # Dedent by the body's own indent; a line indented less (a continuation) keeps its text.
            out.append(line[body_indent:] if line[:body_indent].isspace() else line.lstrip())
        elif mode == "":
            out.append(line)
    return out


def _names_framework(line: str, framework: str) -> bool:
    return f"'{framework}'" in line or f'"{framework}"' in line


def _hide_options(code: str, hide_all: bool) -> tuple[list[str], bool]:
    """``:hide-code:``/``:hide-output:`` as d2lbook's ``rst._process_nb`` hides; and hide_all."""
    src = code.lower()
    hide_all = hide_all or "#@hide_all" in src
    hide_output = hide_all or "# hide outputs" in src or "#@hide_output" in src or (
        "#@hide" in src and "#@hide_code" not in src
    )
    hide_code = hide_all or "# hide code" in src or "#@hide_code" in src or (
        "#@hide" in src and "#@hide_output" not in src
    )
    options = [":hide-code:"] * hide_code + [":hide-output:"] * hide_output
    return options, hide_all


def _fence_for(lines: list[str]) -> str:
    """Backticks longer than any fence inside ``lines``."""
    longest = max((len(m[1]) for m in map(_FENCE.match, lines) if m), default=0)
    return "`" * max(3, longest + 1)


def _strip_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]


class _MarkdownConverter:
    """One pass over a d2lbook chapter."""

    def __init__(self, text: str, tabs: list[str] | None, default_framework: str, source: str) -> None:
        self.lines = text.splitlines()
        self.source = source
        self.warnings: list[str] = []
        self.cells = 0
        self.code: list[tuple[int, list[str]]] = []  # kept cells: (first code line, lines)
        self.hide_all = False
        self.chunks = _split(self.lines, self.warn)
        self.tabs = tabs or self._chapter_tabs()
        self.default = self.tabs[0] if self.tabs else default_framework
        self.sessions = self._sessions()
        self.written: list[tuple[str, list[str]]] = []  # each live-cell's argument and block

    def _sessions(self) -> list[str]:
        """The frameworks d2lbook makes this chapter's notebook for (``get_tab_notebook``): the
        first tab, and each other tab that a cell's marker or tab prose names."""
        named = {self.default}
        for chunk in self.chunks:
            if chunk.kind == "cell":
                named.update(_tab_marker("\n".join(chunk.lines)) or [])
            elif chunk.kind == "tab":
                named.update(chunk.tabs)
        return [t for t in self.tabs if t in named] if self.tabs else [self.default]

    def warn(self, line: int, message: str) -> None:
        self.warnings.append(f"{self.source}:{line}: WARNING: {message}")

    def _chapter_tabs(self) -> list[str]:
        """The chapter's frameworks: those of its ``interact_select``, else those it marks."""
        seen: dict[str, None] = {}
        for chunk in self.chunks:
            code = "\n".join(chunk.lines)
            if chunk.kind == "cell" and "%load_ext d2lbook.tab" in code:
                if match := _INTERACT.search(code):
                    return [n.strip("'\" ") for n in match[1].split(",") if n.strip("'\" ")]
            if chunk.kind == "cell":
                seen.update(dict.fromkeys(n for n in (_tab_marker(code) or []) if n != "all"))
            elif chunk.kind == "tab":
                seen.update(dict.fromkeys(chunk.tabs))
        return list(seen)

    def _kept(self, names: list[str]) -> list[str]:
        """``names`` the book has, in the book's order (``all`` stays ``all``)."""
        if "all" in names:
            return ["all"]
        if not self.tabs:
            return names
        return [t for t in self.tabs if t in names]

    def run(self) -> MarkdownResult:
        blocks: list[list[str]] = []
        for chunk in self.chunks:
            if chunk.kind == "cell":
                blocks.extend(self.cell(chunk))
            elif chunk.kind == "tab":
                blocks.extend(self.tab_prose(chunk))
            else:
                block = self.prose(chunk)
                if block:
                    blocks.append(block)
        self._name_all_cells()
        lines = "\n\n".join("\n".join(b) for b in blocks if b).split("\n")
        inference = infer_gpus(self.code)
        if inference.settings and not any(re.match(r"`{3,}\{live-settings\}", x) for x in lines):
            lines = _with_settings(lines, inference)
        text = "\n".join(lines).strip("\n")
        return MarkdownResult(text + "\n" if text else "", self.cells, self.warnings, inference)

    # -- cells --------------------------------------------------------------------------------

    def cell(self, chunk: _Chunk) -> list[list[str]]:
        code = "\n".join(chunk.lines)
        if "%load_ext d2lbook.tab" in code:
            return []
        marked = _tab_marker(code)
        names = self._kept(marked if marked else [self.default])
        if not names:
            return []  # a cell of frameworks the book does not have
        lines = [
            line for line in chunk.lines
            if not _TAB_MARKER.search(line) and not _TAB_PROSE.match(line)
        ]
        if not any(line.strip() for line in lines):
            self.warn(chunk.line, "code cell with no code besides its tab marker: dropped")
            return []
        options, self.hide_all = _hide_options(code, self.hide_all)
        self.code.append((chunk.line + 1, chunk.lines))
        if any("tab.selected" in line for line in lines):
            frameworks = self.sessions if names == ["all"] else names
            variants: dict[tuple[str, ...], list[str]] = {}
            for framework in frameworks:
                variant = tuple(_strip_blank(resolve_tab_branches(lines, framework)))
                variants.setdefault(variant, []).append(framework)
            if len(variants) > 1 or names != ["all"]:
                blocks = []
                for variant, group in variants.items():
                    if not variant:
                        continue  # every line was in other frameworks' branches: nothing to run
                    spec = "all" if names == ["all"] and len(group) == len(frameworks) else ", ".join(group)
                    blocks.append(self.live_cell(spec, options, list(variant)))
                return blocks
            lines = list(next(iter(variants)))
            if not lines:
                return []  # the branches of other frameworks only
        return [self.live_cell(", ".join(names), options, _strip_blank(lines))]

    def live_cell(self, spec: str, options: list[str], code: list[str]) -> list[str]:
        self.cells += 1
        fence = _fence_for(code)
        head = [f"{fence}{{live-cell}} {spec}", *options]
        if code and (code[0].lstrip().startswith(":") or code[0].strip() == "---"):
            head.append("")  # else MyST would read the first line as an option
        block = head + code + [fence]
        self.written.append((spec, block))
        return block

    def _name_all_cells(self) -> None:
        """``all`` cells as the list of d2lbook's sessions where livecells' ``all`` means fewer.

        livecells runs an ``all`` cell in the frameworks the page's cells name (or the first one);
        d2lbook in every tab that a cell or tab prose names, and the first tab. A chapter whose
        other tabs are named only in prose (or whose cells name only other tabs) would lose
        sessions: its ``all`` cells name them instead.
        """
        named = {name for spec, _ in self.written for name in _names(spec)} - {"all"}
        page = [t for t in self.tabs if t in named] or [self.default]
        if page == self.sessions:
            return
        for spec, block in self.written:
            if spec == "all":
                block[0] = block[0].replace("{live-cell} all", "{live-cell} " + ", ".join(self.sessions), 1)

    # -- prose --------------------------------------------------------------------------------

    def tab_prose(self, chunk: _Chunk) -> list[list[str]]:
        """``:begin_tab:`` prose as ``live-text`` (``all``: plain prose; no kept names: dropped)."""
        names = self._kept(chunk.tabs)
        body = self.prose(chunk)
        if not body or not names:
            return []
        if names == ["all"]:
            return [body]
        fence = _fence_for(body)
        return [[f"{fence}{{{TEXT_DIRECTIVE}}} {', '.join(names)}", *body, fence]]

    def prose(self, chunk: _Chunk) -> list[str]:
        """Prose (or a fence that is not a cell) in MyST."""
        if chunk.kind == "fence":
            return self.fence(chunk)
        text = remove_slide_marks("\n".join(chunk.lines))
        out: list[str] = []
        for start, paragraph in _marks_end_paragraphs(self._paragraphs(text.split("\n"), chunk.line)):
            out.extend(self.paragraph(paragraph, start))
        while out and not out[-1].strip():
            out.pop()
        return _strip_blank(out)

    def fence(self, chunk: _Chunk) -> list[str]:
        name = chunk.info.split()[0] if chunk.info.split() else ""
        if name == "eval_rst":
            return [f"{chunk.mark}{{eval-rst}}", *chunk.lines, chunk.mark]
        if name == "toc":
            return [f"{chunk.mark}{{toctree}}", *chunk.lines, chunk.mark]
        return [chunk.mark + chunk.info, *chunk.lines, chunk.mark]

    @staticmethod
    def _paragraphs(lines: list[str], first: int) -> list[tuple[int, list[str]]]:
        """Runs of lines between blank lines (blank runs kept as their own items)."""
        found: list[tuple[int, list[str]]] = []
        for offset, line in enumerate(lines):
            blank = not line.strip()
            if found and (not found[-1][1][-1].strip()) == blank:
                found[-1][1].append(line)
            else:
                found.append((first + offset, [line]))
        return found

    def paragraph(self, lines: list[str], start: int) -> list[str]:
        if not lines[0].strip():
            return [""]  # a run of blank lines is one
        marks: list[tuple[str, str, int]] = []
        while lines and _is_mark_line(lines[-1]):
            number = start + len(lines) - 1
            marks[:0] = [(m[1], m[2], number) for m in _MARK.finditer(lines.pop())]
        body = [self.roles(line, start + i) for i, line in enumerate(lines)]
        values = {key: value for key, value, _ in marks}
        for key, value, number in marks:
            if key not in _BLOCK_MARKS:
                self.warn(number, f"mark :{key}: not understood: dropped")
        if "bibliography" in values:
            # As d2lbook's rst.py writes it: the APA style of pybtex-apa-style (livecells[book]).
            body += ["```{bibliography} " + values["bibliography"], ":style: apa", "```"]
        image = _IMAGE.match(body[0]) if len(body) == 1 else None
        if image and (values.keys() & {"label", "width", "height"}):
            head = ["```{figure} " + image[2]]
            head += [f":name: {values['label']}"] if "label" in values else []
            head += [f":{k}: {values[k]}" for k in ("width", "height") if k in values]
            return head + ["", image[1]] * bool(image[1]) + ["```"]
        for key in ("width", "height"):
            if key in values:
                self.warn(start, f":{key}: mark with no image before it: dropped")
        if "eqlabel" in values:
            # The equation: the paragraph's trailing $$…$$, after any text of the paragraph.
            first = next((i for i in range(len(body) - 1, -1, -1) if body[i].lstrip().startswith("$$")), 0)
            if first and body[first].strip() == "$$" and first > 0 and body[first - 1].rstrip().endswith("$$"):
                first -= 1  # not an opening: the closing "$$" ends the equation on the line before
            text, math = body[:first], "\n".join(body[first:]).strip()
            if math.startswith("$$") and math.endswith("$$") and math.count("$$") == 2:
                inner = _strip_blank(math[2:-2].split("\n"))
                body = text + [""] * bool(text) + ["```{math}", f":label: {values['eqlabel']}", "", *inner, "```"]
            else:
                self.warn(start, ":eqlabel: mark with no $$ equation before it: dropped")
        if "label" in values:
            body = [f"({values['label']})="] + body if body else [f"({values['label']})="]
        return body

    def roles(self, line: str, number: int) -> str:
        """Inline marks as MyST roles (``:numref:`x``` → ``{numref}`x```)."""

        def role(match: re.Match[str]) -> str:
            key = match[1]
            if key in _ROLES:
                return f"{{{_ROLES[key]}}}`{match[2]}`"
            if key in _BLOCK_MARKS | {"begin_tab", "end_tab"}:
                self.warn(number, f":{key}: mark inside a line (d2lbook reads it on its own line): kept")
            else:
                self.warn(number, f"mark :{key}: not understood: kept")
            return match[0]

        return _MARK.sub(role, line)


def _is_mark_line(line: str) -> bool:
    """Whether ``line`` holds only marks, one at least of them a block mark (not ``:numref:``…)."""
    return bool(_MARK_LINE.match(line)) and any(m[1] in _BLOCK_MARKS for m in _MARK.finditer(line))


def _marks_end_paragraphs(paragraphs: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
    """Paragraphs re-cut where d2lbook's marks say so (see d2lbook's ``rst.py``).

    A line (or run of lines) of marks ends its paragraph (``# Title`` / ``:label:`x``` / text: the text starts a
    new paragraph); marks after an equation's closing ``$$`` on its line go on a line of their
    own; and an ``:eqlabel:`` paragraph right after a paragraph that ends with ``$$`` joins it
    (d2lbook removes the blank line between them).
    """
    cut: list[tuple[int, list[str]]] = []
    for start, lines in paragraphs:
        piece: list[str] = []
        piece_start = start
        for offset, line in enumerate(lines):
            tail = re.match(r"^(.*\$\$)\s*((?::[\w.-]+:`[^`]*`\s*)+)$", line)
            if tail and line.strip():
                piece += [tail[1], tail[2].strip()]
            else:
                piece.append(line)
            if _is_mark_line(piece[-1]) and offset < len(lines) - 1 and not _is_mark_line(lines[offset + 1]):
                cut += [(piece_start, piece), (start + offset + 1, [""])]
                piece, piece_start = [], start + offset + 1
        if piece:
            cut.append((piece_start, piece))
    joined: list[tuple[int, list[str]]] = []
    for start, lines in cut:
        marks_only = lines[0].strip() and all(_is_mark_line(line) for line in lines)
        if (
            marks_only and ":eqlabel:" in "".join(lines) and len(joined) >= 2
            and not joined[-1][1][0].strip() and joined[-2][1][-1].rstrip().endswith("$$")
        ):
            joined.pop()
            joined[-1] = (joined[-1][0], joined[-1][1] + lines)
            continue
        joined.append((start, lines))
    return joined


def _with_settings(lines: list[str], inference: GpuInference) -> list[str]:
    """``lines`` with an inferred ``live-settings`` block (and a comment) under the first title."""
    comment = (
        f"livecells convert inferred the live-settings below: the code asks for "
        f"{inference.gpus} devices in {where(inference.evidence)}. Check it."
    )
    block = ["", f"% {comment}", "", "```{live-settings}", f":gpus: {inference.gpus}", "```", ""]
    fence = ""
    for index, line in enumerate(lines):
        match = _FENCE.match(line)
        if match and (not fence or (match[1] == fence and not match[2].strip())):
            fence = "" if fence else match[1]
        elif not fence and _HEADING.match(line):
            rest = lines[index + 1 :]
            while rest and not rest[0].strip():
                rest.pop(0)
            return lines[: index + 1] + block + rest
    return block[1:] + lines


def book_tabs(path: str | os.PathLike[str]) -> list[str] | None:
    """The ``[build] tabs`` of the nearest d2lbook ``config.ini`` at or above ``path``, if any."""
    here = Path(path).resolve()
    for folder in [here, *here.parents] if here.is_dir() else here.parents:
        ini = folder / "config.ini"
        if ini.is_file():
            parser = configparser.ConfigParser()
            try:
                parser.read(ini, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError):
                return None
            tabs = parser.get("build", "tabs", fallback="")
            return [t.strip().lower() for t in tabs.split(",") if t.strip()] or None
    return None


def convert_markdown(
    text: str,
    *,
    tabs: list[str] | None = None,
    default_framework: str = "pytorch",
    source: str = "<string>",
) -> MarkdownResult:
    """Convert one d2lbook markdown chapter to MyST; ``tabs`` are the book's frameworks, in order."""
    return _MarkdownConverter(text, tabs, default_framework, source).run()


def convert_markdown_tree(
    src_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    tabs: list[str] | None = None,
    default_framework: str = "pytorch",
) -> dict[Path, MarkdownResult]:
    """Convert every ``.md`` under ``src_dir`` (and any d2lbook ``.rst``) into ``out_dir``.

    Other files are copied; hidden folders and ``_build`` are skipped. ``tabs`` defaults to the
    project's ``config.ini``.
    """
    from livecells.cli.convert import convert_text

    src, out = Path(src_dir).resolve(), Path(out_dir).resolve()
    tabs = tabs or book_tabs(src)
    results: dict[Path, MarkdownResult] = {}
    for root, dirs, files in os.walk(src):
        here = Path(root)
        dirs[:] = sorted(
            d for d in dirs
            if not d.startswith(".") and d != "_build" and ((here / d) != out or out == src)
        )
        for name in sorted(files):
            path = here / name
            rel = path.relative_to(src)
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith((".md", ".rst")):
                try:
                    text = path.read_text(encoding="utf-8-sig")
                except UnicodeDecodeError as err:
                    raise ValueError(f"{path} is not UTF-8: {err.reason}") from err
                where = str(Path(src_dir) / rel)
                if name.endswith(".md"):
                    result = convert_markdown(text, tabs=tabs, default_framework=default_framework, source=where)
                else:
                    rst = convert_text(text, default_framework=default_framework, source=where)
                    result = MarkdownResult(rst.text, rst.cells, rst.warnings)
                target.write_text(result.text, encoding="utf-8")
                results[rel] = result
            elif target != path:
                shutil.copy2(path, target)
    return results


def wants_markdown(input_path: str) -> bool:
    """Whether ``convert IN`` reads d2lbook markdown: an ``.md`` file, or a folder with an ``.md``
    file that has d2lbook's cell markers (a tree of d2lbook RST may hold other ``.md`` files)."""
    path = Path(input_path)
    if not path.is_dir():
        return path.suffix == ".md"
    for md in path.rglob("*.md"):
        if "_build" in md.parts or any(p.startswith(".") for p in md.relative_to(path).parts):
            continue
        try:
            if is_d2lbook_markdown(md.read_text(encoding="utf-8")):
                return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def run(args: argparse.Namespace) -> int:
    """``convert`` for markdown: 0 on success (warnings or not), 2 for unreadable input, 1 if unwritable."""
    src = Path(args.input)
    default = getattr(args, "default_framework", "pytorch")
    if src.is_dir():
        if not args.output:
            print(f"livecells convert: {src} is a directory: give -o OUT", file=sys.stderr)
            return 2
        try:
            results = convert_markdown_tree(src, args.output, default_framework=default)
        except (OSError, ValueError) as err:
            print(f"livecells convert: {err}", file=sys.stderr)
            return 1 if isinstance(err, OSError) else 2
        warnings = [w for r in results.values() for w in r.warnings]
        summaries = [r.summary(str(src / rel)) for rel, r in results.items()]
    else:
        text = read_chapter(src)
        if text is None:
            return 2
        if not is_d2lbook_markdown(text):
            print(f"livecells convert: {src}: no d2lbook cell markers; only its marks are converted", file=sys.stderr)
        result = convert_markdown(text, tabs=book_tabs(src), default_framework=default, source=str(src))
        warnings, summaries = result.warnings, [result.summary(str(src))]
        if not write_converted(result.text, args.output):
            return 1
    for line in warnings + summaries:
        print(line, file=sys.stderr)
    return 0
