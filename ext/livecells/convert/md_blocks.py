"""The grammar of d2lbook's Markdown, piece by piece, as :mod:`livecells.convert.markdown` reads it.

Cutting a chapter into chunks (cells, tab prose, other fences, prose) as d2lbook's
``markdown.split_markdown`` does; a cell's ``#@tab`` marker, its ``tab.selected(...)`` branches and
its hide marks; the slide marks; and the paragraph-level reading of marks and display math that
d2lbook's ``rst.py`` and pandoc apply to prose.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

FENCE = re.compile(r"^(`{3,})\s*(.*)$")
INPUT_INFO = re.compile(r"^\{[^}]*(?<![\w-])\.input(?![\w-])[^}]*\}\s*$")
TAB_MARKER = re.compile(r"#\s*@tab\s+([\w, ]+)|%%tab\s+([\w, ]+)")
TAB_PROSE = re.compile(r"^:(begin_tab|end_tab):(`([^`]*)`)?\s*$")
INTERACT = re.compile(r"interact_select\(\s*\[?([^)\]]*)")
#: A chapter's libraries for hosted notebooks, in its first cell: ``#required_libs("gym==0.21.0")``.
REQUIRED_LIBS = re.compile(r"# *required_libs\((.*?)\)")
#: One d2lbook mark: ``:key:`value``` (the value is optional for d2lbook, required here).
MARK = re.compile(r":([\w.-]+):`([^`]*)`")
MARK_LINE = re.compile(r"^\s*(:[\w.-]+:`[^`]*`\s*)+$")
#: The marks that d2lbook reads on a line of their own, about the paragraph above them.
BLOCK_MARKS = {"label", "eqlabel", "width", "height", "bibliography"}
IMAGE = re.compile(r"^\s*!\[([^\]]*)\]\((\S+?)\)\s*$", re.S)
#: d2l's table caption: a paragraph that starts with ":" (not a mark), and a pipe table's row.
CAPTION = re.compile(r"^:(?![\w.-]+:`)\s*(\S.*)$")
TABLE_ROW = re.compile(r"^\s*\|")
HEADING = re.compile(r"^#{1,6}\s")
#: Inline marks and the MyST role each becomes.
ROLES = {
    "numref": "numref", "ref": "ref", "eqref": "eq", "cite": "cite", "citet": "cite:t",
    "citep": "cite:p", "class": "py:class", "func": "py:func", "mod": "py:mod",
}
#: d2lbook's slide marks, (open, close): ``[`` starts a slide, ``(`` adds to it; ``~~``: slides only.
SLIDE_MARKS = (("[**", "**]"), ("(**", "**)"), ("[~~", "~~]"), ("(~~", "~~)"))
#: A mark kept as livecells' ``slide`` role (:func:`slide_roles`).
SLIDE_ROLE = re.compile(r"\{slide\}`([^`]+)`")


@dataclass
class Chunk:
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
        fence = FENCE.match(line)
        if fence and INPUT_INFO.match(fence[2]):
            return True
        if TAB_PROSE.match(line) or re.match(r"\s*(#\s*@tab|%%tab)\s", line):
            return True
    return False


def tab_names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def split_chunks(lines: list[str], warn) -> list[Chunk]:
    """Cut a chapter into chunks, as d2lbook's ``markdown.split_markdown`` reads it.

    A fence closes only on the same run of backticks; inside tab prose fences do not split.
    """
    chunks: list[Chunk] = []
    current: Chunk | None = None
    tab: Chunk | None = None
    for number, line in enumerate(lines, 1):
        fence = FENCE.match(line)
        if current is not None and current.kind in ("cell", "fence"):
            if fence and fence[1] == current.mark and not fence[2].strip():
                chunks.append(current)
                current = None
            else:
                current.lines.append(line)
            continue
        if fence and tab is None:
            kind = "cell" if INPUT_INFO.match(fence[2]) else "fence"
            current = Chunk(kind, number, [], info=fence[2].strip(), mark=fence[1])
            continue
        prose = TAB_PROSE.match(line)
        if prose and prose[1] == "begin_tab":
            if tab is not None:
                warn(number, ":begin_tab: inside tab prose: the first one ends here")
                chunks.append(tab)
            tab = Chunk("tab", number + 1, [], tabs=tab_names(prose[3] or ""))
            continue
        if prose and prose[1] == "end_tab":
            if tab is None:
                warn(number, ":end_tab: without :begin_tab: dropped")
                chunks.append(Chunk("prose", number + 1, []))  # the lines after keep their numbers
            else:
                chunks.append(tab)
                tab = None
            continue
        if tab is not None:
            tab.lines.append(line)
            continue
        if not chunks or chunks[-1].kind != "prose":
            chunks.append(Chunk("prose", number, []))
        chunks[-1].lines.append(line)
    if current is not None:
        warn(current.line, "code fence never closed: kept to the end of the file")
        chunks.append(current)
    if tab is not None:
        warn(tab.line, ":begin_tab: never closed by :end_tab:: kept to the end of the file")
        chunks.append(tab)
    return chunks


def slide_roles(text: str) -> str:
    """d2lbook's slide marks kept as ``slide`` roles around their text, which stays page text.

    ``[**x**]`` becomes ``{slide}`[**`x{slide}`**]``` (likewise ``(**``, ``[~~``, ``(~~``): the
    role is livecells' (docs/markdown.rst), shows nothing, and keeps where the mark was for the
    slides. Marks pair as d2lbook's ``slides._match_slide_marks`` pairs them: one kind at a time,
    never inside another; a ``[**x**](url)`` is a Markdown link, not a mark. Roles already there
    (converted text) are left alone.
    """
    taken = [m.span() for m in SLIDE_ROLE.finditer(text)]
    spans: list[tuple[int, int, int, int]] = []  # open start, text start, text end, close end
    for opening, closing in SLIDE_MARKS:
        inner = rf"((?:(?!{re.escape(closing)}).)*?)"
        link = r"(?!\()" if closing.endswith("]") else ""
        for m in re.finditer(re.escape(opening) + inner + re.escape(closing) + link, text, re.DOTALL):
            if not any(s < m.end() and m.start() < e for s, e in taken):
                spans.append((m.start(), m.start(1), m.end(1), m.end()))
    spans.sort()
    out, position = [], 0
    for start, inner_start, inner_end, end in spans:
        if start < position:
            continue  # inside or across another mark: d2lbook refuses such text, left as it is
        out += [text[position:start], f"{{slide}}`{text[start:inner_start]}`", text[inner_start:inner_end]]
        out.append(f"{{slide}}`{text[inner_end:end]}`")
        position = end
    return "".join(out) + text[position:]


def required_libs(code: str) -> list[str]:
    """The pip arguments of a cell's ``# required_libs(...)``, as d2lbook reads them
    (``get_tab_notebook``): split at ", ", single quotes stripped, double quotes kept (the shell
    takes them off)."""
    match = REQUIRED_LIBS.search(code)
    return [lib.strip("'") for lib in match[1].split(", ")] if match and match[1] else []


def tab_marker(code: str) -> list[str] | None:
    """The frameworks of a cell's first ``#@tab``/``%%tab`` line, or None."""
    match = TAB_MARKER.search(code)
    return tab_names(match[1] or match[2]) if match else None


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


def hide_options(code: str, hide_all: bool) -> tuple[list[str], bool]:
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


def fence_for(lines: list[str]) -> str:
    """Backticks longer than any fence inside ``lines``."""
    longest = max((len(m[1]) for m in map(FENCE.match, lines) if m), default=0)
    return "`" * max(3, longest + 1)


def strip_blank(lines: list[str]) -> list[str]:
    start, end = 0, len(lines)
    while start < end and not lines[start].strip():
        start += 1
    while end > start and not lines[end - 1].strip():
        end -= 1
    return lines[start:end]

def fences_in(chunk: Chunk) -> list[Chunk]:
    """Tab prose cut at its fences (d2lbook's pandoc makes an ``eval_rst`` fence RST there too)."""
    parts: list[Chunk] = []
    fence: Chunk | None = None
    for number, line in enumerate(chunk.lines, chunk.line):
        match = FENCE.match(line)
        if fence is not None:
            if match and match[1] == fence.mark and not match[2].strip():
                parts.append(fence)
                fence = None
            else:
                fence.lines.append(line)
        elif match and chunk.kind == "tab":
            fence = Chunk("fence", number, [], info=match[2].strip(), mark=match[1])
        else:
            if not parts or parts[-1].kind != "prose":
                parts.append(Chunk("prose", number, []))
            parts[-1].lines.append(line)
    if fence is not None:  # never closed: its lines stay prose, as they were
        parts.append(Chunk("prose", fence.line, [fence.mark + fence.info, *fence.lines]))
    return parts


def display_math(lines: list[str], counts: dict[str, int]) -> list[str]:
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


def is_mark_line(line: str) -> bool:
    """Whether ``line`` holds only marks, one at least of them a block mark (not ``:numref:``…)."""
    return bool(MARK_LINE.match(line)) and any(m[1] in BLOCK_MARKS for m in MARK.finditer(line))


def marks_end_paragraphs(paragraphs: list[tuple[int, list[str]]]) -> list[tuple[int, list[str]]]:
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
            if is_mark_line(piece[-1]) and offset < len(lines) - 1 and not is_mark_line(lines[offset + 1]):
                cut += [(piece_start, piece), (start + offset + 1, [""])]
                piece, piece_start = [], start + offset + 1
        if piece:
            cut.append((piece_start, piece))
    joined: list[tuple[int, list[str]]] = []
    for start, lines in cut:
        marks_only = lines[0].strip() and all(is_mark_line(line) for line in lines)
        if (
            marks_only and ":eqlabel:" in "".join(lines) and len(joined) >= 2
            and not joined[-1][1][0].strip() and joined[-2][1][-1].rstrip().endswith("$$")
        ):
            joined.pop()
            joined[-1] = (joined[-1][0], joined[-1][1] + lines)
            continue
        joined.append((start, lines))
    return joined


