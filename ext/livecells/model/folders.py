"""Which folder may hold the store: a rule that the configuration and the command line share.
Nothing here knows Sphinx."""

from __future__ import annotations

from pathlib import Path


def store_problem(srcdir: str | Path, store: str) -> str | None:
    """Why folder ``store`` (relative to ``srcdir``) cannot hold stored results: the source dir
    itself or a folder above it (``"/"``, ``".."``), where a page's file would mix with the
    book's own (``index.json`` beside anything) and ``clear`` would empty it."""
    source = Path(srcdir).resolve()
    folder = (source / store).resolve()
    if folder == source or folder in source.parents:
        return "the store must be a folder of its own, not the source dir or a folder above it"
    return None
