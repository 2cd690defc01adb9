"""``python -m livecells convert`` for d2lbook markdown sources: MyST Markdown with live cells.

d2lbook's authors write Markdown: code cells are fences with the ``.input`` class
(```` ```{.python .input} ````), a cell's first ``#@tab NAMES`` or ``%%tab NAMES`` line says which
frameworks it belongs to (none: the book's first tab), prose for one framework sits between
``:begin_tab:`NAMES``` and ``:end_tab:``, and ``:label:``/``:numref:``/``:eqref:``/``:cite:`` marks
stand for Sphinx's cross-references. This module reads such a chapter the way d2lbook's
``notebook.py``, ``rst.py`` and ``slides.py`` do, and writes it as MyST Markdown: cells as
```` ```{live-cell} NAMES ```` (one per framework where ``tab.selected(...)`` branches differ), tab
prose as ```` ```{live-text} NAMES ````, hide marks as options, d2lbook's marks as MyST roles and
directives. What each mark becomes, and why, is the table in ``docs/markdown.rst``.

Which frameworks the book has comes from d2lbook's ``config.ini`` (``[build] tabs``) when it lies
beside the chapter or above it; else from the chapter's ``tab.interact_select([...])``; else from
the tabs the chapter uses. Anything not understood is kept as it is, with a ``source:line`` warning.

The pieces of the grammar (chunks, tab branches, hide marks, marks in paragraphs, display math)
are in :mod:`livecells.convert.md_blocks`; this module puts them together, chapter by chapter.
"""

from __future__ import annotations

import configparser
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from livecells.convert.gpus import GpuInference, infer_gpus, where
from livecells.convert.md_blocks import (
    BLOCK_MARKS,
    CAPTION,
    FENCE,
    HEADING,
    IMAGE,
    INTERACT,
    MARK,
    MARK_LINE,
    ROLES,
    SLIDE_ROLE,
    TAB_MARKER,
    TAB_PROSE,
    TABLE_ROW,
    Chunk,
    display_math,
    fence_for,
    fences_in,
    hide_options,
    is_mark_line,
    marks_end_paragraphs,
    required_libs,
    resolve_tab_branches,
    slide_roles,
    split_chunks,
    strip_blank,
    tab_marker,
    tab_names,
)
from livecells.convert.result import Result

#: The directive for one framework's prose (see docs/directive.rst).
TEXT_DIRECTIVE = "live-text"


@dataclass
class MarkdownResult(Result):
    """A converted markdown chapter; ``counts``: what a reader sees besides the cells (labels,
    figures and their captions, display equations, captioned tables), to check against the source."""

    counts: dict[str, int] = field(default_factory=dict)

    def converted(self, source: str) -> str:
        """Live cells written, and what else was placed."""
        text = f"{source}: {self.cells} live cells"
        if any(self.counts.values()):
            c = self.counts
            text += (
                f"; {c['labels']} labels, {c['figures']} figures ({c['captions']} captioned), "
                f"{c['equations']} display equations, {c['tables']} captioned tables"
            )
        return text


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
        self.chunks = split_chunks(self.lines, self.warn)
        self.tabs = tabs or self._chapter_tabs()
        self.default = self.tabs[0] if self.tabs else default_framework
        self.sessions = self._sessions()
        self.written: list[tuple[str, list[str]]] = []  # each live-cell's argument and block
        self.requires: list[str] = []  # its # required_libs(...)

    def _sessions(self) -> list[str]:
        """The frameworks d2lbook makes this chapter's notebook for (``get_tab_notebook``): the
        first tab, and each other tab that a cell's marker or tab prose names."""
        named = {self.default}
        for chunk in self.chunks:
            if chunk.kind == "cell":
                named.update(tab_marker("\n".join(chunk.lines)) or [])
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
                if match := INTERACT.search(code):
                    return [n.strip("'\" ") for n in match[1].split(",") if n.strip("'\" ")]
            if chunk.kind == "cell":
                seen.update(dict.fromkeys(n for n in (tab_marker(code) or []) if n != "all"))
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
        result = MarkdownResult(
            "", self.cells, self.warnings, gpu_inference=inference, counts=self.counts, requires=self.requires
        )
        if inference.settings:
            if any(re.match(r"`{3,}\{live-settings\}", x) for x in lines):
                result.settings_kept = True
            else:
                lines = _with_settings(lines, inference)
                result.gpus = inference.gpus
        text = "\n".join(lines).strip("\n")
        result.text = text + "\n" if text else ""
        return result

    # -- cells --------------------------------------------------------------------------------

    def cell(self, chunk: Chunk) -> list[list[str]]:
        code = "\n".join(chunk.lines)
        if "%load_ext d2lbook.tab" in code:
            self.requires = required_libs(code)
            return []
        marked = tab_marker(code)
        names = self._kept(marked if marked else [self.default])
        if not names:
            return []  # a cell of frameworks the book does not have
        lines = [
            line for line in chunk.lines
            if not TAB_MARKER.search(line) and not TAB_PROSE.match(line)
        ]
        if not any(line.strip() for line in lines):
            self.warn(chunk.line, "code cell with no code besides its tab marker: dropped")
            return []
        options, self.hide_all = hide_options(code, self.hide_all)
        self.code.append((chunk.line + 1, chunk.lines))
        if any("tab.selected" in line for line in lines):
            frameworks = self.sessions if names == ["all"] else names
            variants: dict[tuple[str, ...], list[str]] = {}
            for framework in frameworks:
                variant = tuple(strip_blank(resolve_tab_branches(lines, framework)))
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
        return [self.live_cell(", ".join(names), options, strip_blank(lines))]

    def live_cell(self, spec: str, options: list[str], code: list[str]) -> list[str]:
        self.cells += 1
        fence = fence_for(code)
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
        named = {name for spec, _ in self.written for name in tab_names(spec)} - {"all"}
        page = [t for t in self.tabs if t in named] or [self.default]
        if page == self.sessions:
            return
        for spec, block in self.written:
            if spec == "all":
                block[0] = block[0].replace("{live-cell} all", "{live-cell} " + ", ".join(self.sessions), 1)

    # -- prose --------------------------------------------------------------------------------

    def tab_prose(self, chunk: Chunk) -> list[list[str]]:
        """``:begin_tab:`` prose as ``live-text`` (``all``: plain prose; no kept names: dropped)."""
        names = self._kept(chunk.tabs)
        body = self.prose(chunk)
        if not body or not names:
            return []
        if names == ["all"]:
            return [body]
        fence = fence_for(body)
        return [[f"{fence}{{{TEXT_DIRECTIVE}}} {', '.join(names)}", *body, fence]]

    def prose(self, chunk: Chunk) -> list[str]:
        """Prose (or a fence that is not a cell) in MyST."""
        if chunk.kind == "fence":
            return self.fence(chunk)
        out: list[str] = []
        for part in fences_in(chunk):
            if part.kind == "fence":
                out += [""] * bool(out and out[-1].strip()) + self.fence(part) + [""]
                continue
            text = slide_roles("\n".join(part.lines))
            for start, paragraph in marks_end_paragraphs(self._paragraphs(text.split("\n"), part.line)):
                lines = self.paragraph(paragraph, start)
                out.extend(lines[1:] if lines[:1] == [""] and out and not out[-1].strip() else lines)
        out.extend(self._flush_caption())
        while out and not out[-1].strip():
            out.pop()
        return strip_blank(out)

    def fence(self, chunk: Chunk) -> list[str]:
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
        while lines and is_mark_line(lines[-1]):
            number = start + len(lines) - 1
            marks[:0] = [(m[1], m[2], number) for m in MARK.finditer(lines.pop())]
        body = [self.roles(line, start + i) for i, line in enumerate(lines)]
        values = {key: value for key, value, _ in marks}
        for key, value, number in marks:
            if key not in BLOCK_MARKS:
                self.warn(number, f"mark :{key}: not understood: dropped")
        if "bibliography" in values:
            # As d2lbook's rst.py writes it: the APA style of pybtex-apa-style (livecells[book]).
            body += ["```{bibliography} " + values["bibliography"], ":style: apa", "```"]
        pending = self._flush_caption() if self.caption and not TABLE_ROW.match(body[0] if body else "") else []
        if "label" in values:
            self.counts["labels"] += 1
        image = IMAGE.match("\n".join(body)) if body else None
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
        caption = CAPTION.match(body[0]) if body else None
        if caption and not MARK_LINE.match(body[0]):
            # d2l's table caption: a ":Caption" paragraph before the table (its label beside it).
            text = " ".join([caption[1], *(x.strip() for x in body[1:])]).strip()
            self.caption = (text, values.get("label", ""), start, body)
            return pending
        if body and all(TABLE_ROW.match(x) for x in body) and self.caption:
            text, label, *_ = self.caption
            self.caption = None
            label = values.get("label") or label
            self.counts["tables"] += 1
            fence = "~~~" if "`" in text else "```"  # a backtick fence's info has no backticks
            head = [self._anchor(fence=True), f"{fence}{{table}} {text}"] + [f":name: {label}"] * bool(label)
            return pending + head + ["", *body, fence]
        if "eqlabel" in values:
            # Slide marks around the equation stay around it, as paragraphs of their own.
            body, closing = _slide_roles_apart(body)
            # The equation: the paragraph's trailing $$…$$, after any text of the paragraph.
            first = next((i for i in range(len(body) - 1, -1, -1) if body[i].lstrip().startswith("$$")), 0)
            if first and body[first].strip() == "$$" and first > 0 and body[first - 1].rstrip().endswith("$$"):
                first -= 1  # not an opening: the closing "$$" ends the equation on the line before
            text, math = body[:first], "\n".join(body[first:]).strip()
            if math.startswith("$$") and math.endswith("$$") and math.count("$$") == 2:
                inner = strip_blank(math[2:-2].split("\n"))
                self.counts["equations"] += 1
                body = display_math(text, self.counts) + [""] * bool(text)
                body += ["```{math}", f":label: {values['eqlabel']}", "", *inner, "```"]
            else:
                self.warn(start, ":eqlabel: mark with no $$ equation before it: dropped")
                body = display_math(body, self.counts)
            body += ["", *closing] if closing else []
        else:
            body = display_math(body, self.counts)
        heading = bool(body) and (bool(HEADING.match(body[0])) or all(TABLE_ROW.match(x) for x in body))
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
            if key in ROLES:
                return f"{{{ROLES[key]}}}`{match[2]}`"
            if key in BLOCK_MARKS | {"begin_tab", "end_tab"}:
                self.warn(number, f":{key}: mark inside a line (d2lbook reads it on its own line): kept")
            else:
                self.warn(number, f"mark :{key}: not understood: kept")
            return match[0]

        return MARK.sub(role, line)


def _slide_roles_apart(body: list[str]) -> tuple[list[str], list[str]]:
    """An equation's paragraph with the slide roles that open before its ``$$`` (on its line) on
    a line of their own, and those that close after its last ``$$``: (the paragraph, the closing
    roles' lines)."""
    roles = rf"(?:\s*{SLIDE_ROLE.pattern})+"
    lines: list[str] = []
    for line in body:
        opening = re.match(rf"^({roles})\s*(\$\$.*)$", line)
        lines += [opening[1].strip(), opening[3]] if opening else [line]
    closing: list[str] = []
    if lines:
        tail = re.match(rf"^(.*\$\$)({roles})\s*$", lines[-1])
        if tail:
            lines[-1], closing = tail[1], [tail[2].strip()]
    while lines and re.fullmatch(roles + r"\s*", lines[-1]):
        closing.insert(0, lines.pop().strip())
    return lines, closing


def _with_settings(lines: list[str], inference: GpuInference) -> list[str]:
    """``lines`` with an inferred ``live-settings`` block (and a comment) under the first title."""
    comment = (
        f"livecells convert inferred the live-settings below: the code asks for "
        f"{inference.gpus} devices in {where(inference.evidence)}. Check it."
    )
    block = ["", f"% {comment}", "", "```{live-settings}", f":gpus: {inference.gpus}", "```", ""]
    fence = ""
    for index, line in enumerate(lines):
        match = FENCE.match(line)
        if match and (not fence or (match[1] == fence and not match[2].strip())):
            fence = "" if fence else match[1]
        elif not fence and HEADING.match(line):
            rest = lines[index + 1 :]
            while rest and not rest[0].strip():
                rest.pop(0)
            return lines[: index + 1] + block + rest
    return block[1:] + lines


def book_ini(path: str | os.PathLike[str]) -> configparser.ConfigParser | None:
    """The nearest d2lbook ``config.ini`` at or above ``path``, read (None: none, or unreadable)."""
    here = Path(path).resolve()
    for folder in [here, *here.parents] if here.is_dir() else here.parents:
        ini = folder / "config.ini"
        if ini.is_file():
            parser = configparser.ConfigParser()
            try:
                parser.read(ini, encoding="utf-8")
            except (configparser.Error, UnicodeDecodeError):
                return None
            return parser
    return None


def book_tabs(path: str | os.PathLike[str]) -> list[str] | None:
    """The ``[build] tabs`` of the nearest d2lbook ``config.ini`` at or above ``path``, if any."""
    parser = book_ini(path)
    tabs = parser.get("build", "tabs", fallback="") if parser is not None else ""
    return [t.strip().lower() for t in tabs.split(",") if t.strip()] or None


def convert_markdown(
    text: str,
    *,
    tabs: list[str] | None = None,
    default_framework: str = "pytorch",
    source: str = "<string>",
) -> MarkdownResult:
    """Convert one d2lbook markdown chapter to MyST; ``tabs`` are the book's frameworks, in order."""
    return _MarkdownConverter(text, tabs, default_framework, source).run()
