"""ANSI colour codes in kernel output: removed for text, turned into escaped HTML spans for HTML.

Tracebacks from IPython arrive coloured with SGR escape sequences. The page must never show
them raw; HTML keeps the colours (as the notebook does) through ``<span class="ansi-...">``
around HTML-escaped text. Every other escape sequence is dropped.
"""

from __future__ import annotations

import html
import re

# Any CSI sequence (ESC [ ... final byte) or a two-byte ESC sequence.
ESCAPE = re.compile(r"\x1b\[([0-9;?]*)([ -/]*[@-~])|\x1b[@-Z\\-_]")
COLOURS = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]


def strip_ansi(text: str) -> str:
    return ESCAPE.sub("", text)


def ansi_to_html(text: str) -> str:
    """Escaped HTML of ``text`` with its SGR colours as spans (unknown sequences dropped)."""
    out: list[str] = []
    classes: dict[str, str] = {}
    is_open = False
    position = 0
    for match in ESCAPE.finditer(text):
        out.append(html.escape(text[position : match.start()], quote=False))
        position = match.end()
        if match.group(2) != "m":
            continue  # cursor movement and the like: nothing to show
        if is_open:
            out.append("</span>")
            is_open = False
        _apply_sgr(classes, match.group(1))
        if classes:
            out.append(f'<span class="{" ".join(sorted(classes.values()))}">')
            is_open = True
    out.append(html.escape(text[position:], quote=False))
    if is_open:
        out.append("</span>")
    return "".join(out)


def _apply_sgr(classes: dict[str, str], params: str) -> None:
    codes = [int(p) for p in params.split(";") if p.isdigit()] or [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code == 0:
            classes.clear()
        elif code == 1:
            classes["bold"] = "ansi-bold"
        elif code == 22:
            classes.pop("bold", None)
        elif code == 4:
            classes["underline"] = "ansi-underline"
        elif code == 24:
            classes.pop("underline", None)
        elif 30 <= code <= 37:
            classes["fg"] = f"ansi-{COLOURS[code - 30]}-fg"
        elif 90 <= code <= 97:
            classes["fg"] = f"ansi-{COLOURS[code - 90]}-intense-fg"
        elif code == 39:
            classes.pop("fg", None)
        elif 40 <= code <= 47:
            classes["bg"] = f"ansi-{COLOURS[code - 40]}-bg"
        elif 100 <= code <= 107:
            classes["bg"] = f"ansi-{COLOURS[code - 100]}-intense-bg"
        elif code == 49:
            classes.pop("bg", None)
        elif code in (38, 48) and i + 1 < len(codes):
            # 256-colour and true-colour forms: skip their arguments, keep no colour.
            i += 2 if codes[i + 1] == 5 else 4
        i += 1
