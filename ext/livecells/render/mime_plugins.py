"""Mime renderers from installed packages: the ``livecells.mime_renderers`` entry-point group.

A renderer is a class shaped as MyST-NB's ``MimeRenderPlugin``: ``mime_priority_overrides``
(``(builder, mime type, priority)`` entries, as :confval:`livecells_mime_priority`'s, ``*`` for
every builder: they put its types in the builders' orders) and a static ``handle_mime(outputs,
mime, value)`` that gives the value's docutils nodes, or None to leave it to the next renderer
and then to the next representation. livecells' own (:class:`livecells.render.outputs.Builtin`)
is the group's first entry; the book's ``livecells_mime_priority`` comes after every renderer's
overrides. A renderer that cannot be loaded, or whose entries are wrong, is a warning, once per
build process that writes a cell's outputs or checks the book's entries, and is left out; so is
an entry of the book's whose type no renderer shows (a typo), at its conf.py line when the build
starts.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from livecells.config import WARNING_TYPE, get_config
from livecells.model.mime import MIME_TYPES, PriorityOverride
from livecells.model.vocabulary import WarningSubtype
from livecells.sphinx_util import origin

logger = logging.getLogger(__name__)

#: Where installed packages name their mime renderers: ``name = "module:Class"``.
ENTRY_POINTS = "livecells.mime_renderers"
#: livecells' own entry (pyproject.toml): always first.
BUILTIN = "livecells"


@dataclass(frozen=True)
class Renderer:
    """One loaded renderer: its entry's name, its ``handle_mime``, its priority overrides."""

    name: str
    handle_mime: Any
    overrides: tuple[PriorityOverride, ...]


def _overrides(entries: Any) -> tuple[PriorityOverride, ...]:
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise ValueError("mime_priority_overrides must be a list of (builder, mime type, priority)")
    found = []
    for entry in entries:
        if not (isinstance(entry, (tuple, list)) and len(entry) == 3):
            raise ValueError(f"{entry!r} is not a (builder, mime type, priority) entry")
        builder, mime, priority = entry
        if not (isinstance(builder, str) and builder and isinstance(mime, str) and "/" in mime):
            raise ValueError(f"{entry!r}: a builder's name (or '*') and a mime type are expected")
        if priority is not None and (isinstance(priority, bool) or not isinstance(priority, int)):
            raise ValueError(f"{entry!r}: the priority must be an integer or None")
        found.append(PriorityOverride(builder, mime, priority))
    return tuple(found)


@functools.cache
def renderers() -> tuple[Renderer, ...]:
    """The installed renderers: livecells' own first (also where livecells is a source tree,
    not installed, and so has no entry), then the others by entry name."""
    from livecells.render.outputs import Builtin

    loaded = [Renderer(BUILTIN, Builtin.handle_mime, ())]
    entries = sorted(entry_points(group=ENTRY_POINTS), key=lambda e: (e.name, e.value))
    for entry in entries:
        if entry.name == BUILTIN:
            continue
        try:
            plugin = entry.load()
            handle = plugin.handle_mime
            if not callable(handle):
                raise TypeError("its handle_mime is not callable")
            overrides = _overrides(getattr(plugin, "mime_priority_overrides", ()))
        except Exception as err:  # noqa: BLE001 - another package's fault is a warning, not a crash
            logger.warning(
                f"the mime renderer {entry.name!r} ({entry.value}) is left out: {type(err).__name__}: {err}",
                type=WARNING_TYPE, subtype=WarningSubtype.CONFIG,
            )
            continue
        loaded.append(Renderer(entry.name, handle, overrides))
    return tuple(loaded)


def priority_overrides() -> tuple[PriorityOverride, ...]:
    """Every renderer's overrides, in the renderers' order (the book's own come after)."""
    return tuple(o for renderer in renderers() for o in renderer.overrides)


def shown_types() -> frozenset[str]:
    """The types some renderer shows: livecells' own and those the installed renderers name."""
    return frozenset(MIME_TYPES) | {o.mime for o in priority_overrides()}


def check_book_types(app: Sphinx) -> None:
    """Warn of each ``livecells_mime_priority`` entry whose type no renderer shows (it would
    change nothing): at its conf.py line, once a build."""
    entries = get_config(app.env).mime_priority
    if not entries:
        return  # the renderers' types are read when a page is written, not on every build
    known = shown_types()
    location, given = origin(app, "mime_priority")
    for number, entry in enumerate(entries, 1):
        if entry.mime not in known:
            logger.warning(
                f"livecells_mime_priority{given}: entry {number} {(entry.builder, entry.mime, entry.priority)!r}: "
                f"{entry.mime!r} is a type that neither livecells nor an installed mime renderer shows; "
                "it changes nothing",
                type=WARNING_TYPE, subtype=WarningSubtype.CONFIG, location=location,
            )


def setup_mime_plugins(app: Sphinx) -> None:
    app.connect("builder-inited", check_book_types)
