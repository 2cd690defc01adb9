"""The book's library files (``livecells_library``), written as the build starts.

At ``builder-inited``, before the executor's check (whose templates import the frameworks'
``preload``, the library among them) and before any page is read or any session key is made,
the library is made from the pages' sources (:mod:`livecells.library`) and the files whose text
changed are written. Its problems are ``livecells.library`` warnings at their pages' lines (or at
``livecells_library``'s line in conf.py).
"""

from __future__ import annotations

from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

from livecells.config import WARNING_TYPE, get_config
from livecells.model.vocabulary import WarningSubtype
from livecells.sphinx_util import origin

logger = logging.getLogger(__name__)


def write_book_library(app: Sphinx) -> None:
    """Make and write the book's library files, if ``livecells_library`` names any."""
    settings = get_config(app.env).library
    if settings is None or not settings.files:
        return
    # Imported here: a book without a library (most) does not load the library's parser.
    from livecells.library import book_pages, make_library, write_library

    root = Path(app.srcdir)
    suffixes = list(dict.fromkeys([*app.config.source_suffix, ".rst", ".md"]))
    pages, problems = book_pages(root, app.config.root_doc, suffixes, app.config.exclude_patterns)
    library = make_library(root, settings, get_config(app.env).framework_names(), pages)
    written = write_library(root, library, settings.version_file, str(app.config.release or ""))
    location, given = origin(app, "library")
    for problem in problems:
        logger.warning(f"livecells_library: {problem}", type=WARNING_TYPE, subtype=WarningSubtype.LIBRARY)
    for problem in library.problems:
        if problem.note:
            logger.info(f"livecells: livecells_library: {problem.message}")
            continue
        message = problem.message if problem.location else f"livecells_library{given}: {problem.message}"
        where = problem.location or location
        subtype = WarningSubtype.LIBRARY_REDEFINED if problem.redefined else WarningSubtype.LIBRARY
        logger.warning(message, type=WARNING_TYPE, subtype=subtype, location=where)
    if written:
        shown = ", ".join(str(path.relative_to(root)) for path in written)
        logger.info(f"livecells: library written: {shown}")
