"""ANSI colour codes in kernel output: removed for text, turned into escaped HTML spans for HTML.

Tracebacks from IPython arrive coloured with SGR escape sequences. The page must never show
them raw; HTML keeps the colours (as the notebook does) through ``<span class="ansi-...">``
around HTML-escaped text. Every other escape sequence is dropped whole: CSI sequences (their
parameters may use ``:`` as well as ``;``), OSC strings (titles, hyperlinks) and the other
string controls (DCS, SOS, PM, APC) up to their terminator, and two-byte sequences (``ESC c``,
``ESC 7``, ``ESC (B``); so are the C0 and C1 control characters other than newline and tab
(BEL, form feed, vertical tab, a lone ESC, 8-bit CSI ...), which no page or ``.tex`` file can
hold.
"""

from __future__ import annotations

import html
import re

from livecells.model.text import ESCAPE, strip_controls

COLOURS = ["black", "red", "green", "yellow", "blue", "magenta", "cyan", "white"]
#: SGR codes that set a class, and the slot it takes (bold, underline, fore- or background).
_SGR_SETS: dict[int, tuple[str, str]] = {1: ("bold", "ansi-bold"), 4: ("underline", "ansi-underline")}
for _n, _colour in enumerate(COLOURS):
    _SGR_SETS[30 + _n] = ("fg", f"ansi-{_colour}-fg")
    _SGR_SETS[90 + _n] = ("fg", f"ansi-{_colour}-intense-fg")
    _SGR_SETS[40 + _n] = ("bg", f"ansi-{_colour}-bg")
    _SGR_SETS[100 + _n] = ("bg", f"ansi-{_colour}-intense-bg")
#: SGR codes that end a slot's class.
_SGR_RESETS = {22: "bold", 24: "underline", 39: "fg", 49: "bg"}


def ansi_to_html(text: str) -> str:
    """Escaped HTML of ``text`` with its SGR colours as spans (other sequences and controls dropped)."""
    out: list[str] = []
    classes: dict[str, str] = {}
    is_open = False
    position = 0
    for match in ESCAPE.finditer(text):
        out.append(_escaped(text[position : match.start()]))
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
    out.append(_escaped(text[position:]))
    if is_open:
        out.append("</span>")
    return "".join(out)


def _escaped(text: str) -> str:
    return html.escape(strip_controls(text), quote=False)


def _apply_sgr(classes: dict[str, str], params: str) -> None:
    if not re.fullmatch(r"[0-9;:]*", params):
        return  # private-use parameters (``ESC [?25m``...): not a colour
    # "38:5:1" (ITU T.416, colon-separated sub-parameters) is one parameter: a colour, skipped.
    groups = [p for p in params.split(";")]
    codes: list[int] = []
    for group in groups:
        if ":" in group:
            head = group.split(":", 1)[0]
            if head in {"38", "48", "58"}:
                continue  # extended colour in one parameter: kept uncoloured
            group = head  # "4:3" (curly underline) and the like: the main code
        codes.append(int(group) if group.isdigit() else 0)
    codes = codes or [0]
    i = 0
    while i < len(codes):
        code = codes[i]
        if code == 0:
            classes.clear()
        elif code in _SGR_SETS:
            slot, name = _SGR_SETS[code]
            classes[slot] = name
        elif code in _SGR_RESETS:
            classes.pop(_SGR_RESETS[code], None)
        elif code in (38, 48) and i + 1 < len(codes):
            # 256-colour and true-colour forms: skip their arguments, keep no colour.
            i += 2 if codes[i + 1] == 5 else 4
        i += 1
