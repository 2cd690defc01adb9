"""Small helpers shared by the tests."""

from __future__ import annotations

import re
from io import StringIO
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup
from sphinx.testing.util import SphinxTestApp


def soup(path: Path) -> BeautifulSoup:
    return BeautifulSoup(path.read_text(encoding="utf-8"), "html.parser")


def cells(page: BeautifulSoup) -> list:
    return page.select("div.livecells-cell")


def cell_with(page: BeautifulSoup, text: str):
    """The rendered cell whose code contains ``text``."""
    for cell in cells(page):
        code = cell.select_one(".livecells-input")
        if code is not None and text in code.get_text():
            return cell
    raise AssertionError(f"no cell with code containing {text!r}")


def outputs(cell) -> str:
    return "\n".join(o.get_text() for o in cell.select(".livecells-output"))


def meta(cell) -> list[str]:
    return [p.get_text() for p in cell.select("p.livecells-meta")]


def build_site(src: Path, builder: str = "html", **kwargs: Any) -> tuple[SphinxTestApp, str]:
    """Build ``src`` with Sphinx's test app (kwargs go to it: confoverrides, freshenv, ...).

    Returns the app, cleaned up, and its warnings with colour codes removed.
    """
    warnings = StringIO()
    app = SphinxTestApp(builder, srcdir=src, warning=warnings, **kwargs)
    try:
        app.build()
    finally:
        app.cleanup()
    return app, re.sub(r"\x1b\[[0-9;]*m", "", warnings.getvalue())
