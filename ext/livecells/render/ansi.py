"""ANSI colour codes in kernel output: removed for text, kept as escaped markup for HTML and LaTeX.

Tracebacks from IPython arrive coloured with SGR escape sequences, and so does the output of rich,
loguru or progress bars, often in the 256-colour (``ESC[38;5;Nm``) and true-colour
(``ESC[38;2;R;G;Bm``) forms. The page must never show them raw. :func:`ansi_runs` cuts a text
into runs of one :class:`Style`; HTML keeps the sixteen basic colours as classes (as the notebook
does) and the others as an inline ``rgb()`` style, around HTML-escaped text (:func:`ansi_to_html`);
LaTeX keeps them all as xcolor's ``\\textcolor[RGB]`` around escaped verbatim text
(:func:`ansi_to_latex`). Only numbers checked to lie in 0-255 reach a style. Every other escape
sequence is dropped whole: CSI sequences (their parameters may use ``:`` as well as ``;``), OSC
strings (titles, hyperlinks) and the other string controls (DCS, SOS, PM, APC) up to their
terminator, and two-byte sequences (``ESC c``, ``ESC 7``, ``ESC (B``); so are the C0 and C1
control characters other than newline and tab (BEL, form feed, vertical tab, a lone ESC, 8-bit
CSI ...), which no page or ``.tex`` file can hold.
"""

from __future__ import annotations

import dataclasses
import html
import itertools
import re
from dataclasses import dataclass

from pygments.formatters.latex import escape_tex

from livecells.model.text import ESCAPE, strip_controls

COLOURS = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]
#: The sixteen basic colours as the stylesheet's ansi-* classes show them (JupyterLab's), for LaTeX.
PALETTE = [
    (0x3E, 0x42, 0x4D), (0xE7, 0x5C, 0x58), (0x00, 0xA2, 0x50), (0xDD, 0xB6, 0x2B),
    (0x20, 0x8F, 0xFB), (0xD1, 0x60, 0xC4), (0x60, 0xC6, 0xC8), (0xC5, 0xC1, 0xB4),
    (0x28, 0x2C, 0x36), (0xB2, 0x2B, 0x31), (0x00, 0x74, 0x27), (0xB2, 0x7D, 0x12),
    (0x00, 0x65, 0xCA), (0xA0, 0x31, 0x96), (0x25, 0x8F, 0x8F), (0xA1, 0xA6, 0xB2),
]  # fmt: skip
#: A colour: one of the sixteen basic ones (0-15), or red, green, blue (each 0-255).
Colour = int | tuple[int, int, int]


@dataclass(frozen=True)
class Style:
    """What the SGR codes in force make of a run of text."""

    fg: Colour | None = None
    bg: Colour | None = None
    bold: bool = False
    underline: bool = False


PLAIN = Style()


def ansi_runs(text: str) -> list[tuple[str, Style]]:
    """``text`` as runs of one style, escape sequences and control characters removed."""
    runs: list[tuple[str, Style]] = []
    style = PLAIN
    position = 0

    def add(part: str) -> None:
        part = strip_controls(part)
        if not part:
            return
        if runs and runs[-1][1] == style:
            runs[-1] = (runs[-1][0] + part, style)
        else:
            runs.append((part, style))

    for match in ESCAPE.finditer(text):
        add(text[position : match.start()])
        position = match.end()
        if match.group(2) == "m":  # others (cursor movement and the like): nothing to show
            style = _apply_sgr(style, match.group(1))
    add(text[position:])
    return runs


def ansi_to_html(text: str) -> str:
    """Escaped HTML of ``text`` with its SGR colours as spans (other sequences and controls dropped)."""
    out: list[str] = []
    for part, style in ansi_runs(text):
        escaped = html.escape(part, quote=False)
        classes, css = _html_style(style)
        if not classes and not css:
            out.append(escaped)
            continue
        attributes = f' class="{" ".join(sorted(classes))}"' if classes else ""
        attributes += f' style="{"; ".join(css)}"' if css else ""
        out.append(f"<span{attributes}>{escaped}</span>")
    return "".join(out)


def has_colours(text: str) -> bool:
    """Whether ``text`` has a run of any style but the plain one."""
    return any(style != PLAIN for _, style in ansi_runs(text))


def ansi_to_latex(text: str) -> str:
    """The lines of a ``sphinxVerbatim`` with ``commandchars=\\\\\\{\\}`` (Pygments' escapes, as
    Sphinx's own code blocks use them): ``text`` with its colours as xcolor's ``\\textcolor`` and
    ``\\colorbox``, bold and underline; a command never spans a line, as the environment wants."""
    lines: list[str] = [""]
    for part, style in ansi_runs(text):
        for n, piece in enumerate(part.split("\n")):
            if n:
                lines.append("")
            if piece:
                lines[-1] += _latex_piece(escape_tex(piece, "PYG"), style)
    return "\n".join(lines)


def _latex_piece(tex: str, style: Style) -> str:
    if style.bold:
        tex = f"\\textbf{{{tex}}}"
    if style.underline:
        tex = f"\\underline{{{tex}}}"
    if style.fg is not None:
        tex = f"\\textcolor[RGB]{{{_rgb(style.fg)}}}{{{tex}}}"
    if style.bg is not None:
        tex = f"{{\\setlength{{\\fboxsep}}{{0pt}}\\colorbox[RGB]{{{_rgb(style.bg)}}}{{{tex}}}}}"
    return tex


def _rgb(colour: Colour) -> str:
    return ",".join(str(n) for n in (PALETTE[colour] if isinstance(colour, int) else colour))


def _html_style(style: Style) -> tuple[list[str], list[str]]:
    """The classes (bold, underline, the sixteen colours) and inline CSS (other colours) of a run."""
    classes: list[str] = []
    css: list[str] = []
    if style.bold:
        classes.append("ansi-bold")
    if style.underline:
        classes.append("ansi-underline")
    for colour, suffix, prop in ((style.fg, "fg", "color"), (style.bg, "bg", "background-color")):
        if isinstance(colour, int):
            intense = "-intense" if colour >= 8 else ""
            classes.append(f"ansi-{COLOURS[colour % 8]}{intense}-{suffix}")
        elif colour is not None:
            css.append(f"{prop}: rgb({', '.join(str(n) for n in colour)})")
    return classes, css


def _colour_256(n: int) -> Colour | None:
    """The colour of index ``n`` of the 256-colour table: the sixteen basic ones, a 6x6x6 cube,
    a grey ramp (xterm's levels)."""
    if n < 16:
        return n
    if n < 232:
        n -= 16
        return tuple(0 if v == 0 else 55 + 40 * v for v in (n // 36, n // 6 % 6, n % 6))  # type: ignore[return-value]
    if n < 256:
        grey = 8 + 10 * (n - 232)
        return (grey, grey, grey)
    return None


def _extended(args: list[int]) -> tuple[Colour | None, int]:
    """An extended colour from the arguments after 38 or 48: the colour (None if out of range or
    incomplete) and how many arguments it took."""
    if args[:1] == [5]:
        return (_colour_256(args[1]) if len(args) > 1 else None), min(len(args), 2)
    if args[:1] == [2]:
        rgb = args[1:4]
        ok = len(rgb) == 3 and all(0 <= v <= 255 for v in rgb)
        return (tuple(rgb) if ok else None), min(len(args), 4)  # type: ignore[return-value]
    return None, min(len(args), 1)


def _apply_sgr(style: Style, params: str) -> Style:
    if not re.fullmatch(r"[0-9;:]*", params):
        return style  # private-use parameters (``ESC [?25m``...): not a colour
    # Each ";" group is one code; "38:5:1" and "38:2::255:0:0" (ITU T.416, colon-separated
    # sub-parameters, the second with an empty colour space) are one colour in one group.
    codes: list[int | tuple[str, Colour | None]] = []
    for group in params.split(";"):
        if ":" in group:
            head, *subs = group.split(":")
            if head in {"38", "48"}:
                numbers = [int(s) if s.isdigit() else 0 for s in subs]
                if numbers[:1] == [2] and len(numbers) >= 5:
                    numbers = [2, *numbers[-3:]]  # the colour space's id left out
                colour, _ = _extended(numbers)
                codes.append(("fg" if head == "38" else "bg", colour))
                continue
            if head == "58":
                continue  # underline colour: not shown
            group = head  # "4:3" (curly underline) and the like: the main code
        codes.append(int(group) if group.isdigit() else 0)
    codes = codes or [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        i += 1
        if isinstance(code, tuple):
            slot, colour = code
            if colour is not None:
                style = dataclasses.replace(style, **{slot: colour})
        elif code == 0:
            style = PLAIN
        elif code == 1:
            style = dataclasses.replace(style, bold=True)
        elif code == 4:
            style = dataclasses.replace(style, underline=True)
        elif code == 22:
            style = dataclasses.replace(style, bold=False)
        elif code == 24:
            style = dataclasses.replace(style, underline=False)
        elif 30 <= code <= 37 or 90 <= code <= 97:
            style = dataclasses.replace(style, fg=code % 10 + (8 if code >= 90 else 0))
        elif 40 <= code <= 47 or 100 <= code <= 107:
            style = dataclasses.replace(style, bg=code % 10 + (8 if code >= 100 else 0))
        elif code == 39:
            style = dataclasses.replace(style, fg=None)
        elif code == 49:
            style = dataclasses.replace(style, bg=None)
        elif code in (38, 48, 58):  # 58: the underline's colour, not shown; its arguments skipped
            rest = list(itertools.takewhile(lambda c: isinstance(c, int), codes[i : i + 4]))
            colour, taken = _extended(rest)
            i += taken
            if colour is not None and code != 58:
                style = dataclasses.replace(style, **{"fg" if code == 38 else "bg": colour})
    return style
