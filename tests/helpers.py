"""Small helpers shared by the tests."""

from __future__ import annotations

from pathlib import Path

from bs4 import BeautifulSoup


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
