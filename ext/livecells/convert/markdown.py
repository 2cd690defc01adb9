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
- marks become MyST: ``(label)=`` targets, a labelled ``$$…$$`` a ``{math}`` block, ``:numref:`` →
  ``{numref}``, ``:eqref:`` → ``{eq}``, ``:cite:``/``:citet:``/``:citep:`` → ``{cite}``/
  ``{cite:t}``/``{cite:p}``, ``:bibliography:`` → ``{bibliography}`` (with d2lbook's ``:style:
  apa``), and ``eval_rst``/``toc`` fences (in framework prose too) → ``{eval-rst}``/``{toctree}``;
- what pandoc and d2lbook's ``rst.py`` make of the prose, MyST gets too: an image alone in its
  paragraph with a caption (or a mark) becomes a ``{figure}``; each ``$$…$$`` inside a paragraph
  or list item a display block of its own; a ``:Caption`` line before a pipe table a ``{table}``
  with that caption; and a label that does not follow its section title, figure or table directly
  (a blank line between, or text) is moved up to the one before it, as d2lbook moves it.

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

from livecells.convert.gpus import GpuInference, infer_gpus, where
from livecells.convert.rst import read_chapter, write_converted

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
_IMAGE = re.compile(r"^\s*!\[([^\]]*)\]\((\S+?)\)\s*$", re.S)
#: d2l's table caption: a paragraph that starts with ":" (not a mark), and a pipe table's row.
_CAPTION = re.compile(r"^:(?![\w.-]+:`)\s*(\S.*)$")
_TABLE_ROW = re.compile(r"^\s*\|")
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
    #: What a reader sees besides the cells: labels, figures and their captions, display
    #: equations, captioned tables (as written, so a reader can check them against the source).
    counts: dict[str, int] = field(default_factory=dict)

    def summary(self, source: str) -> str:
        """One line for the report: live cells written, what else was placed, settings inferred."""
        text = f"{source}: {self.cells} live cells"
        if any(self.counts.values()):
            c = self.counts
            text += (
                f"; {c['labels']} labels, {c['figures']} figures ({c['captions']} captioned), "
                f"{c['equations']} display equations, {c['tables']} captioned tables"
            )
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

    d2lbook's ``notebook._clean_if_branches``, line by line in one pass: a line with ``if`` and
    ``tab.selected`` opens a branch (an ``if`` nested in a kept branch too), kept when it names the
    framework in quotes, each of its lines cut by four spaces, else dropped; a branch ends at the
    first non-blank line indented no deeper than its ``if``. So a nested branch's lines are
    dedented once, as d2lbook's generated ``d2l`` package has them. Beyond d2lbook, an ``else:``
    of such a branch is resolved too (d2lbook would keep it and break the code).
    """
    out: list[str] = []
    mode = ""  # "" outside a branch, "keep" or "drop" inside one
    indent, chain_taken = 0, False
    for line in lines:
        stripped = line.strip()
        depth = len(line) - len(line.lstrip())
        if "if" in line and "tab.selected" in line:
            taken = _names_framework(stripped, framework)
            chain_taken = taken or (chain_taken and stripped.startswith("elif"))
            mode, indent = ("keep" if taken else "drop"), depth
            continue
        if mode and stripped and depth <= indent:
            if depth == indent and re.fullmatch(r"else\s*:(\s*#.*)?", stripped):
                mode = "drop" if chain_taken else "keep"
                continue
            mode = ""
        if mode == "keep":
            out.append(line[4:])
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
        #: Labels that d2lbook moves up to the section, figure or table before them, per anchor.
        self.anchors: list[list[str]] = []
        #: A ``:Caption`` paragraph waiting for its table: (caption, label, source line, its lines).
        self.caption: tuple[str, str, int, list[str]] | None = None
        self.counts = {"figures": 0, "captions": 0, "equations": 0, "tables": 0, "labels": 0}
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
        lines = [x for line in lines for x in self._anchor_labels(line)]
        inference = infer_gpus(self.code)
        if inference.settings and not any(re.match(r"`{3,}\{live-settings\}", x) for x in lines):
            lines = _with_settings(lines, inference)
        text = "\n".join(lines).strip("\n")
        return MarkdownResult(text + "\n" if text else "", self.cells, self.warnings, inference, self.counts)

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
        out: list[str] = []
        for part in _fences_in(chunk):
            if part.kind == "fence":
                out += [""] * bool(out and out[-1].strip()) + self.fence(part) + [""]
                continue
            text = remove_slide_marks("\n".join(part.lines))
            for start, paragraph in _marks_end_paragraphs(self._paragraphs(text.split("\n"), part.line)):
                lines = self.paragraph(paragraph, start)
                out.extend(lines[1:] if lines[:1] == [""] and out and not out[-1].strip() else lines)
        out.extend(self._flush_caption())
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
        pending = self._flush_caption() if self.caption and not _TABLE_ROW.match(body[0] if body else "") else []
        if "label" in values:
            self.counts["labels"] += 1
        image = _IMAGE.match("\n".join(body)) if body else None
        if image and (image[1].strip() or values.keys() & {"label", "width", "height"}):
            # pandoc makes a figure of an image alone in its paragraph that has a caption (its alt
            # text, on one line or several); a mark makes one of any image.
            self.counts["figures"] += 1
            self.counts["captions"] += bool(image[1].strip())
            if "label" in values and not image[1].strip():
                self.warn(start, f"image labelled {values['label']} has no caption: a reference to it gets no number")
            head = [self._anchor(fence=True), "```{figure} " + image[2]]
            head += [f":name: {values['label']}"] if "label" in values else []
            head += [f":{k}: {values[k]}" for k in ("width", "height") if k in values]
            return pending + head + ["", *image[1].split("\n")] * bool(image[1].strip()) + ["```"]
        for key in ("width", "height"):
            if key in values:
                self.warn(start, f":{key}: mark with no image before it: dropped")
        caption = _CAPTION.match(body[0]) if body else None
        if caption and not _MARK_LINE.match(body[0]):
            # d2l's table caption: a ":Caption" paragraph before the table (its label beside it).
            text = " ".join([caption[1], *(x.strip() for x in body[1:])]).strip()
            self.caption = (text, values.get("label", ""), start, body)
            return pending
        if body and all(_TABLE_ROW.match(x) for x in body) and self.caption:
            text, label, *_ = self.caption
            self.caption = None
            label = values.get("label") or label
            self.counts["tables"] += 1
            fence = "~~~" if "`" in text else "```"  # a backtick fence's info has no backticks
            head = [self._anchor(fence=True), f"{fence}{{table}} {text}"] + [f":name: {label}"] * bool(label)
            return pending + head + ["", *body, fence]
        if "eqlabel" in values:
            # The equation: the paragraph's trailing $$…$$, after any text of the paragraph.
            first = next((i for i in range(len(body) - 1, -1, -1) if body[i].lstrip().startswith("$$")), 0)
            if first and body[first].strip() == "$$" and first > 0 and body[first - 1].rstrip().endswith("$$"):
                first -= 1  # not an opening: the closing "$$" ends the equation on the line before
            text, math = body[:first], "\n".join(body[first:]).strip()
            if math.startswith("$$") and math.endswith("$$") and math.count("$$") == 2:
                inner = _strip_blank(math[2:-2].split("\n"))
                self.counts["equations"] += 1
                body = _display_math(text, self.counts) + [""] * bool(text)
                body += ["```{math}", f":label: {values['eqlabel']}", "", *inner, "```"]
            else:
                self.warn(start, ":eqlabel: mark with no $$ equation before it: dropped")
                body = _display_math(body, self.counts)
        else:
            body = _display_math(body, self.counts)
        heading = bool(body) and (bool(_HEADING.match(body[0])) or all(_TABLE_ROW.match(x) for x in body))
        if heading:  # a section title, or a table without a caption
            body = [self._anchor(), *body]
        if "label" in values:
            if heading or not self.anchors:
                body = [f"({values['label']})=", *body]
            else:
                # d2lbook (rst._process_rst) moves a label up to the section, figure or table it follows.
                self.anchors[-1].append(values["label"])
        return pending + body

    def _anchor(self, fence: bool = False) -> str:
        """A placeholder line where labels that d2lbook moves up to this element will go; before a
        fence (a figure, a table) they end with a blank line, as a second conversion reads them."""
        self.anchors.append([])
        return f"\x00anchor:{len(self.anchors) - 1}:{int(fence)}"

    def _anchor_labels(self, line: str) -> list[str]:
        if not line.startswith("\x00anchor:"):
            return [line]
        _, number, fence = line.split(":")
        labels = [f"({label})=" for label in self.anchors[int(number)]]
        return labels + [""] * (bool(labels) and fence == "1")

    def _flush_caption(self) -> list[str]:
        """A ``:Caption`` paragraph with no table after it: kept as text, warned."""
        if self.caption is None:
            return []
        _, label, line, lines = self.caption
        self.caption = None
        self.warn(line, "table caption with no table after it: kept as text")
        return [f"({label})="] * bool(label) + lines + [""]

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


def _fences_in(chunk: _Chunk) -> list[_Chunk]:
    """Tab prose cut at its fences (d2lbook's pandoc makes an ``eval_rst`` fence RST there too)."""
    parts: list[_Chunk] = []
    fence: _Chunk | None = None
    for number, line in enumerate(chunk.lines, chunk.line):
        match = _FENCE.match(line)
        if fence is not None:
            if match and match[1] == fence.mark and not match[2].strip():
                parts.append(fence)
                fence = None
            else:
                fence.lines.append(line)
        elif match and chunk.kind == "tab":
            fence = _Chunk("fence", number, [], info=match[2].strip(), mark=match[1])
        else:
            if not parts or parts[-1].kind != "prose":
                parts.append(_Chunk("prose", number, []))
            parts[-1].lines.append(line)
    if fence is not None:  # never closed: its lines stay prose, as they were
        parts.append(_Chunk("prose", fence.line, [fence.mark + fence.info, *fence.lines]))
    return parts


def _display_math(lines: list[str], counts: dict[str, int]) -> list[str]:
    """A paragraph with each ``$$…$$`` in it as a display block of its own, as pandoc makes it.

    MyST reads ``$$`` as display math only at the start of a block: inside a paragraph or a list
    item it would be inline math between stray ``$``. The text around an equation stays in the
    paragraph (or list item), at its indentation.
    """
    text = "\n".join(lines)
    if "$$" not in text:
        return lines
    # Code spans hold text, not math: their $$ (masked here) is left alone.
    masked = re.sub(r"(`+).+?\1", lambda m: "`" * len(m[0]), text, flags=re.S)
    item = re.match(r"^(\s*)([*+-]|\d+[.)])\s+", lines[0])
    indent = " " * (len(item[0]) if item else len(lines[0]) - len(lines[0].lstrip()))
    out: list[str] = []
    position = 0
    for math in re.finditer(r"\$\$(.+?)\$\$", masked, re.S):
        counts["equations"] += 1
        before = text[: math.start()] if position == 0 else _continued(text[position : math.start()], indent)
        before = before.rstrip()
        block = (indent + text[math.start() : math.end()].lstrip()).split("\n")
        if re.fullmatch(r"\s*([*+-]|\d+[.)])", before):
            block[0] = before + " " + block[0].lstrip()  # a list item that starts with the equation
        elif before.strip():
            out += before.split("\n") + [""]
        out += block + [""]
        position = math.end()
    after = _continued(text[position:], indent).rstrip()
    out += after.split("\n") if after.strip() else []
    while out and not out[-1].strip():
        out.pop()
    return out


def _continued(text: str, indent: str) -> str:
    """Text after an equation: from its next line as written, else on a line of its own."""
    if text.startswith("\n") or not text.strip():
        return text.lstrip("\n")
    return indent + text.lstrip(" \t")


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
    from livecells.convert.rst import convert_text

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
