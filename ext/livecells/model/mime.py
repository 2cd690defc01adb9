"""The mime types livecells keeps and shows: one registry, and which a builder prefers.

Every stage asks this module, never a list of its own: the store's schema (base64 or text,
markup or not), the collector (an image's size), and render (which representation of an output
a builder shows, and how). A new type is one :class:`MimeType` entry here plus, when it needs one,
a way to show it in ``render/outputs.py``; its place per builder is :data:`PRIORITIES`, which
authors change with ``livecells_mime_priority`` (as MyST-NB's ``nb_mime_priority_overrides``).
"""

from __future__ import annotations

import base64
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class MimeType:
    """What livecells knows of one mime type.

    ``shown_as`` names the way render shows it (``html``, ``image``, ``markdown``, ``latex``,
    ``json`` or ``text``); ``suffix`` is the file an image is written to; ``base64`` says whether
    the stored value is base64 (else it is text, as SVG is); ``markup`` says that cut text would
    be broken markup, so a value too long is left out whole.
    """

    name: str
    shown_as: str
    suffix: str = ""
    base64: bool = False
    markup: bool = False

    def decoded(self, value: str) -> bytes:
        """The bytes a stored value stands for (base64 decoded, or the text's UTF-8)."""
        return base64.b64decode(value, validate=False) if self.base64 else value.encode()

    def decoded_size(self, value: str) -> int:
        """About the size of :meth:`decoded`, without decoding (for a limit)."""
        return len(value) * 3 // 4 if self.base64 else len(value)


MIME_TYPES: dict[str, MimeType] = {
    t.name: t
    for t in (
        MimeType("text/html", "html", markup=True),
        MimeType("text/markdown", "markdown", markup=True),
        MimeType("text/latex", "latex", markup=True),
        MimeType("image/svg+xml", "image", suffix=".svg"),
        MimeType("image/png", "image", suffix=".png", base64=True),
        MimeType("image/jpeg", "image", suffix=".jpg", base64=True),
        MimeType("image/gif", "image", suffix=".gif", base64=True),
        MimeType("image/webp", "image", suffix=".webp", base64=True),
        MimeType("application/json", "json"),
        MimeType("text/plain", "text"),
    )
}

#: Image mime types a page shows, and the suffix of the file each is written to.
IMAGE_TYPES = {t.name: t.suffix for t in MIME_TYPES.values() if t.shown_as == "image"}
#: The types whose stored value is base64 text.
BASE64_TYPES = tuple(t.name for t in MIME_TYPES.values() if t.base64)
#: The types whose text is markup: never cut, left out whole when too long.
MARKUP_TYPES = tuple(t.name for t in MIME_TYPES.values() if t.markup)
#: An image larger than this (decoded) is left out, with a note.
MAX_IMAGE_BYTES = 10 * 2**20

#: Per builder format, the types it can show and their priority (lower first: JupyterLab's
#: order where it has one); the key ``""`` is every other format (text, man, ...). A type a
#: format does not list is never chosen for it.
PRIORITIES: dict[str, dict[str, int]] = {
    "html": {
        "text/html": 10, "text/markdown": 20, "text/latex": 30, "image/svg+xml": 40,
        "image/png": 50, "image/jpeg": 60, "image/gif": 70, "image/webp": 80,
        "application/json": 90, "text/plain": 100,
    },
    "latex": {
        "text/markdown": 20, "text/latex": 30, "image/png": 50, "image/jpeg": 60,
        "application/json": 90, "text/plain": 100,
    },
    "": {"text/markdown": 20, "text/latex": 30, "application/json": 90, "text/plain": 100},
}
#: The priority of ``text/html`` on HTML pages that do not show HTML outputs as markup
#: (``livecells_allow_html = False``): its text, escaped, after ``text/plain``.
ESCAPED_HTML_PRIORITY = 110


#: A mime type's name (RFC 6838's restricted names): the shape an override's type must have. A type
#: that neither livecells nor an installed renderer shows is warned of when the build starts
#: (render/mime_plugins.py), where the renderers are known.
MIME_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}/[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")


@dataclass(frozen=True)
class PriorityOverride:
    """One ``(builder, mime type, priority)`` entry of ``livecells_mime_priority``.

    ``builder`` is a builder's name (``html``, ``dirhtml``, ``latex``, ``text``...) or ``*`` for
    every builder; a priority of ``None`` means the builder never shows that type.
    """

    builder: str
    mime: str
    priority: int | None


def priority_override(entry: Any) -> PriorityOverride:
    """One override entry, checked; a ValueError says what is wrong with it."""
    if isinstance(entry, (str, bytes)) or not isinstance(entry, (list, tuple)) or len(entry) != 3:
        raise ValueError("an entry must be a (builder, mime type, priority) tuple")
    builder, mime, priority = entry
    if not isinstance(builder, str) or not builder:
        raise ValueError(f"the builder must be a builder's name or '*', not {builder!r}")
    if not isinstance(mime, str) or (mime not in MIME_TYPES and not MIME_NAME.fullmatch(mime)):
        raise ValueError(f"{mime!r} is not a mime type (type/subtype)")
    if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
        raise ValueError(f"the priority must be an integer or None, not {priority!r}")
    return PriorityOverride(builder, mime, priority)


def mime_priority(
    builder_name: str,
    builder_format: str,
    overrides: Iterable[PriorityOverride] = (),
    *,
    html_as_markup: bool = True,
) -> list[str]:
    """The types a builder shows, best first: its format's :data:`PRIORITIES`, then the
    overrides for ``*`` and for its name, in order (a later entry wins)."""
    table: Mapping[str, int] = PRIORITIES.get(builder_format, PRIORITIES[""])
    priorities: dict[str, int | None] = dict(table)
    if builder_format == "html" and not html_as_markup:
        priorities["text/html"] = ESCAPED_HTML_PRIORITY
    for override in overrides:
        if override.builder in {"*", builder_name}:
            priorities[override.mime] = override.priority
    shown = [(p, mime) for mime, p in priorities.items() if p is not None]
    return [mime for _, mime in sorted(shown, key=lambda item: item[0])]
