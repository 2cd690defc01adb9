"""Slides as d2lbook 1.0.3's ``slides`` makes them: a page's slide marks, the settings, the rules.

d2lbook marks the prose a slide shows: ``[**x**]`` (x starts a slide), ``(**x**)`` (x goes on the
current one), both shown in the page too, and ``[~~x~~]``/``(~~x~~)``, on the slide only. In a
livecells page each mark is a pair of ``slide`` roles around its text (``{slide}`[**`x{slide}`**]```,
docs/markdown.rst). The read stage keeps each page's :data:`PageSlides`: its prose runs (where
d2lbook has a markdown cell: the prose between two cells, one framework's prose, a page's title),
each with its marks' text as Markdown, and its cells in between. :func:`slide_notebook` makes one
framework's deck of it by d2lbook's rules (``slides._generate_slides``): the marks' text of each
run as one markdown cell, sentences capitalized, with the run's level-1 title; every code cell,
comments cut, merged with the next unless it has outputs. Nothing here knows Sphinx.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Union

#: The marks, as the ``slide`` role's text: opening -> closing.
MARKS = {"[**": "**]", "(**": "**)", "[~~": "~~]", "(~~": "~~)"}
#: The settings of ``livecells_slides`` (d2lbook's ``[slides]`` of config.ini).
SETTINGS = ("top_left", "top_right", "github_repo")
#: A repository as GitHub names it: owner/name.
_REPO = re.compile(r"[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+")
#: A comment as d2lbook cuts it from a slide's code: ``#`` and a space, to the line's end.
_COMMENT = re.compile(r"# .*")


@dataclass(frozen=True)
class SlideMark:
    """One mark's text (Markdown), and whether it starts a slide (``[``)."""

    text: str
    new: bool = False


@dataclass(frozen=True)
class SlideProse:
    """A run of prose: its marks, the ``# Title`` of the page's title it holds ("": none), the
    frameworks it is for (``()``: every framework; else a ``live-text``'s)."""

    marks: tuple[SlideMark, ...] = ()
    heading: str = ""
    frameworks: tuple[str, ...] = ()


#: A page in order: prose runs, and the index of each cell between them.
PageSlides = tuple[Union[SlideProse, int], ...]


@dataclass(frozen=True)
class SlidesSettings:
    """``livecells_slides``: the HTML of each slide's top corners (from conf.py, trusted, as
    d2lbook puts it in RISE's overlay), and a GitHub repository per framework for its README."""

    top_left: str = ""
    top_right: str = ""
    github_repo: tuple[tuple[str, str], ...] = ()

    def repo(self, framework: str) -> str:
        return dict(self.github_repo).get(framework, "")

    def raw(self) -> dict[str, Any]:
        """The value as conf.py gives it."""
        return {"top_left": self.top_left, "top_right": self.top_right, "github_repo": dict(self.github_repo)}


def slides_settings(value: Mapping[Any, Any]) -> tuple[SlidesSettings, list[str]]:
    """The settings of a ``livecells_slides`` dict, and what was wrong with the entries left out."""
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for key, item in value.items():
        if key not in SETTINGS:
            problems.append(f"{key!r}: not one of {', '.join(SETTINGS)}")
        elif key != "github_repo":
            if isinstance(item, str):
                kept[key] = item
            else:
                problems.append(f"{key}: must be a string (HTML)")
        elif not isinstance(item, Mapping):
            problems.append("github_repo: must be a dict of framework -> 'owner/name'")
        else:
            repos = []
            for framework, repo in item.items():
                if isinstance(framework, str) and isinstance(repo, str) and _REPO.fullmatch(repo):
                    repos.append((framework, repo))
                else:
                    problems.append(f"github_repo {framework!r}: {repo!r} is not a GitHub 'owner/name'")
            kept["github_repo"] = tuple(repos)
    return SlidesSettings(**kept), problems


def rise_metadata(settings: SlidesSettings) -> dict[str, Any]:
    """The notebook metadata that makes a RISE (reveal.js) slide show of it, as d2lbook writes it."""
    overlay = (
        f"<div class='my-top-right'>{settings.top_right}</div>"
        f"<div class='my-top-left'>{settings.top_left}</div>"
    )
    return {
        "celltoolbar": "Slideshow",
        "rise": {"autolaunch": True, "enable_chalkboard": True, "overlay": overlay, "scroll": True},
    }


#: RISE reads ``rise.css`` beside a notebook: d2lbook's spacing and the overlay's corners.
RISE_CSS = """
div.text_cell_render.rendered_html {
    padding: 0.35em 0.1em;
}

div.code_cell {
    font-size: 120%;
}

div.my-top-right {
    position: absolute;
    right: 5%;
    top: 1em;
    font-size: 2em;
}

div.my-top-left {
    position: absolute;
    left: 5%;
    top: 1em;
    font-size: 2em;
}
"""


def slide_notebook(
    page: PageSlides, framework: str, code_cells: Mapping[int, dict[str, Any]], metadata: Mapping[str, Any]
) -> dict[str, Any] | None:
    """One framework's deck of a page (None: its prose has no mark), as nbformat data.

    ``code_cells``: the framework's code cells by cell index, as its notebook has them (code,
    outputs, metadata); ``metadata``: the deck's (nbformat 4.5). A run's text
    is its marks' joined by lines, each sentence capitalized, a trailing ``.``/``,``/``:`` and one
    before a closing ``$$`` cut; a run with a ``[`` mark starts a slide (``slide_type: slide``,
    else ``-``: the slide before goes on). A cell's code loses its comment lines, and each
    comment; cells merge into the next unless they have outputs; ``#@save`` is cut.
    """
    cells: list[dict[str, Any]] = []
    marked = False
    for item in page:
        if isinstance(item, int):
            if item in code_cells:
                cell = copy.deepcopy(code_cells[item])
                cell["source"] = _without_comments(cell["source"])
                cells.append(cell)
            continue
        if item.frameworks and framework not in item.frameworks:
            continue
        marked = marked or bool(item.marks)
        text = _slide_text([mark.text for mark in item.marks])
        if item.heading:
            text = f"{item.heading}\n\n{text}"
        if text:
            kind = "slide" if any(mark.new for mark in item.marks) else "-"
            cells.append({"cell_type": "markdown", "metadata": {"slideshow": {"slide_type": kind}}, "source": text})
    if not marked:
        return None
    deck = {"cells": _merged(cells), "metadata": dict(metadata), "nbformat": 4, "nbformat_minor": 5}
    for number, cell in enumerate(deck["cells"]):
        cell["id"] = f"cell-{number}"  # stable ids: the same page gives the same file
    return deck


def _slide_text(texts: list[str]) -> str:
    text = "\n".join(texts)
    if not text:
        return text
    # d2lbook capitalizes each sentence ("." then a line break, or a space: never a bare ".",
    # which code such as `a.text()` holds).
    for stop in (".\n", ". "):
        text = stop.join(s[:1].upper() + s[1:] for s in (part.strip() for part in text.split(stop)))
    text = text.replace(".$$", "$$").replace(",$$", "$$")
    return text.rstrip(",. \n:，。：")


def _without_comments(code: str) -> str:
    """Each ``# comment`` cut (a line that was only one, dropped), trailing spaces cut."""
    lines = []
    for line in code.splitlines():
        cut = _COMMENT.sub("", line)
        if cut != line and not cut.rstrip():
            continue
        lines.append(cut.rstrip())
    return "\n".join(lines)


def _merged(cells: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Runs of code cells joined: each run's cells up to one with outputs (or the run's last)
    become that cell, their code joined by a blank line; ``#@save`` cut from each."""
    out: list[dict[str, Any]] = []
    pending: list[str] = []
    for position, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            out.append(cell)
            continue
        pending.append(cell["source"])
        last = position + 1 == len(cells) or cells[position + 1]["cell_type"] != "code"
        if last or cell.get("outputs"):
            source = "\n\n".join(pending)
            cell["source"] = source.replace("\n#@save\n", "\n").replace("#@save", "").strip()
            pending = []
            out.append(cell)
    return out
