"""Safe text, shared by every stage: escapes and control characters removed, one-line messages.

:func:`strip_controls` removes every C0/C1 control character but newline and tab (and U+FFFE,
U+FFFF), :func:`xml_text` makes any text fit XML 1.0,
:func:`strip_ansi` every terminal escape sequence too, :func:`one_line` makes a warning line,
:func:`css_name` turns any string into a safe CSS class name part. Nothing here knows Sphinx.
"""

from __future__ import annotations

import re

_SURROGATE = re.compile("[\ud800-\udfff]")
# Every C0 control but tab and newline, DEL, every C1 control (0x9b is an 8-bit CSI), and the
# two non-characters that XML 1.0 forbids (its only other forbidden ones are lone surrogates).
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ufffe\uffff]")
_CSS_UNSAFE = re.compile(r"[^A-Za-z0-9_-]+")
#: Terminal escape sequences (see :mod:`livecells.render.ansi`). CSI: ESC [ parameter bytes (0x30-0x3f)
#: intermediate bytes (0x20-0x2f) final byte (0x40-0x7e). OSC, DCS, SOS, PM, APC: ESC ] (or P X
#: ^ _) ... up to BEL or ESC \ (or the end of the text). Others: ESC, intermediates, a final byte.
#: The 8-bit forms too (a kernel's text is Unicode, so they arrive as U+0080-U+009F): CSI 0x9b,
#: and OSC 0x9d, DCS 0x90, SOS 0x98, PM 0x9e, APC 0x9f up to BEL, ST (0x9c) or ESC \; an 8-bit
#: string control without its terminator is dropped alone (as mis-decoded text holds them,
#: "\xc3\x9f" read as Latin-1), never the text after it.
ESCAPE = re.compile(
    r"(?:\x1b\[|\x9b)([0-?]*)([ -/]*[@-~])"
    r"|\x1b[\]PX^_][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|[\x90\x98\x9d\x9e\x9f][^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)"
    r"|\x1b[ -/]*[0-~]"
)


def strip_controls(text: str) -> str:
    """``text`` without control characters (newline and tab are kept) or U+FFFE/U+FFFF."""
    return _CONTROLS.sub("", text)


def xml_text(text: object) -> str:
    """``text`` fit for XML 1.0 (JUnit, XHTML): controls removed, lone surrogates as U+FFFD."""
    return strip_controls(fix_surrogates(str(text)))


def css_name(text: object, limit: int = 40) -> str:
    """A CSS class name part made from anything: letters, digits, ``-`` and ``_`` only."""
    name = _CSS_UNSAFE.sub("-", str(text)).strip("-")[:limit]
    return name or "x"


def cut_text(text: str, limit: int, why: str) -> tuple[str, int]:
    """``text`` cut to about ``limit`` characters with a note saying how much went, and how much."""
    if len(text) <= limit:
        return text, 0
    cut = len(text) - limit
    return f"{text[:limit]}\n[… {cut:,} more characters cut: {why}]", cut


def one_line(text: str, limit: int = 300) -> str:
    """A message fit for one warning line: escapes and controls removed, cut at ``limit`` with
    a note."""
    text = strip_controls(ESCAPE.sub("", str(text)).replace("\n", " ").replace("\t", " "))
    if len(text) <= limit:
        return text
    return f"{text[:limit]}… ({len(text) - limit:,} more characters cut)"


def has_surrogates(text: str) -> bool:
    """Whether ``text`` holds a lone surrogate (no file can hold one as UTF-8)."""
    return _SURROGATE.search(text) is not None


def fix_surrogates(text: str) -> str:
    """Lone surrogates (which no file can hold as UTF-8) as U+FFFD."""
    return _SURROGATE.sub("\ufffd", text)


def strip_ansi(text: str) -> str:
    """``text`` without escape sequences or control characters (newline and tab are kept)."""
    return strip_controls(ESCAPE.sub("", text))
