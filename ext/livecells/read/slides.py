"""Read stage: the ``slide`` role (d2lbook's slide marks) and each page's slide prose.

``{slide}`[**`text{slide}`**]``` in MyST, ``:slide:`[**`\\ text\\ :slide:`**]``` in RST: a pair of
roles around page text, with d2lbook's marks as their text (see :mod:`livecells.model.slides`).
The role makes a :class:`slide_mark`; :class:`SlideMarks` pairs them on each page (as d2lbook
does: within the prose between two cells, never one inside another), keeps each pair's text as
Markdown on the block it starts in, takes the text of a ``~~`` pair out of the page (it is on the
slide only) and removes the roles: no writer sees one, and the page shows the text as it is.
A role that pairs with none is warned of (``livecells.slide``) and dropped; its text stays.
:class:`SlidesCollector` keeps every page's :data:`~livecells.model.slides.PageSlides`.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.environment.collectors import EnvironmentCollector
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxRole

from livecells.model.slides import MARKS, PageSlides, SlideMark, SlideProse
from livecells.model.vocabulary import WarningSubtype
from livecells.read.env_state import env_state
from livecells.read.nodes import live_cell, live_text
from livecells.read.values import role_lines

logger = logging.getLogger(__name__)

#: Where a block keeps the marks that start in it, until :class:`SlidesCollector` reads them.
ATTRIBUTE = "livecells_slides"
#: Where a level-1 title keeps its text as a Markdown heading, for the same collector.
HEADING = "livecells_slide_heading"
_CLOSING = set(MARKS.values())
#: A cell, or where framework prose starts or ends: no mark reaches across one.
_BOUNDARY = object()
_BLOCK = object()
#: Page text as Markdown text: what Markdown reads as markup or HTML, escaped.
_ESCAPES = (("\\", "\\\\"), ("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ("`", "\\`"), ("*", "\\*"), ("$", "\\$"))
#: d2lbook's mark of each cross-reference a page's Markdown had (``{eq}`x``` was ``:eqref:`x```).
_XREFS = {"numref": "numref", "ref": "ref", "eq": "eqref"}
#: What a link's URL keeps as it is in a slide (RFC 3986's characters; the rest percent-encoded).
_URL_SAFE = ":/?#[]@!$&'()*+,;=%~-._"


class slide_mark(nodes.Inline, nodes.Element):
    """One ``slide`` role (``mark``: its text); removed by :class:`SlideMarks`."""


class SlideRole(SphinxRole):
    """``slide``: one of d2lbook's marks, ``[**`` ``(**`` ``[~~`` ``(~~`` or a closing one."""

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        node = slide_mark(self.rawtext, mark=self.text.strip(), rawtext=self.text)
        node.source, node.line = self.get_source_info()
        return [node], []


class SlideMarks(SphinxTransform):
    """Pair the page's slide roles, keep each pair's text on its block, remove the roles."""

    default_priority = 480

    def apply(self, **kwargs: Any) -> None:
        if not any(True for _ in self.document.findall(slide_mark)):
            return
        role_lines(self.document.findall(slide_mark), lambda node: node["rawtext"])
        tokens = list(_tokens(self.document))
        pairs = _pairs(tokens)
        for start, end in pairs:
            opening, closing = tokens[start], tokens[end]
            mark = SlideMark(_markdown(tokens[start + 1 : end]), new=opening["mark"].startswith("["))
            _block(opening).setdefault(ATTRIBUTE, []).append(mark)
            if opening["mark"].endswith("~~"):
                _take_out(opening, closing)
        for node in list(self.document.findall(slide_mark)):
            _remove(node)
        for section in self.document.findall(nodes.section):
            if section.parent is self.document and section.children and isinstance(section[0], nodes.title):
                # As the page has it (smart quotes, which come later, would make -- a dash).
                section[0][HEADING] = "# " + _markdown(list(_tokens(section[0]))).replace("\n", " ")


def _pairs(tokens: list[Any]) -> list[tuple[int, int]]:
    """The positions of each opening role and its closing one, as d2lbook pairs marks (within a
    markdown cell, never one inside another); a role that pairs with none is warned of."""
    pairs: list[tuple[int, int]] = []
    opened: int | None = None
    for position, token in enumerate(tokens):
        if token is _BOUNDARY and opened is not None:
            _warn(tokens[opened], f"slide mark {tokens[opened]['mark']} not closed before the next cell "
                  "or framework prose: dropped")
            opened = None
        if not isinstance(token, slide_mark):
            continue
        mark = token["mark"]
        if mark not in MARKS and mark not in _CLOSING:
            _warn(token, f"slide role {token['rawtext']!r}: not one of d2lbook's marks ({', '.join(MARKS)} "
                  f"and {', '.join(MARKS.values())}): dropped")
        elif mark in MARKS:
            if opened is not None:
                _warn(tokens[opened], f"slide mark {tokens[opened]['mark']} not closed before the next one "
                      "opens: dropped")
            opened = position
        elif opened is None or MARKS[tokens[opened]["mark"]] != mark:
            _warn(token, f"slide mark {mark} closes no {_opening(mark)}: dropped")
        else:
            pairs.append((opened, position))
            opened = None
    if opened is not None:
        _warn(tokens[opened], f"slide mark {tokens[opened]['mark']} never closed: dropped")
    return pairs


def _take_out(opening: slide_mark, closing: slide_mark) -> None:
    """The page text of a ``~~`` pair (on the slide only) out of the page: the nodes between the
    two roles, which must have the same parent (else the text stays, with a warning)."""
    parent = opening.parent
    if closing.parent is not parent:
        _warn(opening, f"slide-only text ({opening['mark']}…{closing['mark']}) across markup: kept in the page")
        return
    for node in parent.children[parent.index(opening) + 1 : parent.index(closing)]:
        parent.remove(node)


def _remove(node: slide_mark) -> None:
    """A role out of the page; a paragraph left empty goes too (a comment keeps its marks)."""
    parent = node.parent
    parent.remove(node)
    if isinstance(parent, nodes.paragraph) and all(
        isinstance(c, nodes.Text) and not c.strip() for c in parent.children
    ):
        marks = parent.get(ATTRIBUTE)
        if marks:
            keeper = nodes.comment("", "", classes=["livecells-slide"])
            keeper[ATTRIBUTE] = marks
            parent.replace_self(keeper)
        else:
            parent.parent.remove(parent)


def _block(node: nodes.Node) -> nodes.Element:
    """The nearest block (not inline) element around ``node``."""
    parent = node.parent
    while isinstance(parent, nodes.Inline) and parent.parent is not None:
        parent = parent.parent
    return parent


def _opening(closing: str) -> str:
    return next(opening for opening, close in MARKS.items() if close == closing)


def _warn(node: nodes.Element, message: str) -> None:
    logger.warning(message, location=node, type="livecells", subtype=WarningSubtype.SLIDE)


# -- the text of a mark, as Markdown ---------------------------------------------------------------


def _tokens(node: nodes.Node) -> Iterator[Any]:
    """The page in reading order: Markdown text, the roles, where blocks and cells are."""
    if isinstance(node, slide_mark):
        yield node
    elif isinstance(node, nodes.Text):
        yield _escaped(node.astext())
    elif isinstance(node, live_cell):
        yield _BOUNDARY
    elif isinstance(node, (nodes.comment, nodes.raw, nodes.target, nodes.system_message, nodes.image)):
        return  # no HTML of a page goes into a slide
    elif isinstance(node, nodes.literal):
        text = node.astext()
        fence = "``" if "`" in text else "`"
        yield f"{fence}{text}{fence}"
    elif isinstance(node, nodes.math):
        yield f"${node.astext()}$"
    elif isinstance(node, nodes.math_block):
        yield from (_BLOCK, f"$${node.astext()}$$", _BLOCK)
    elif isinstance(node, nodes.literal_block):
        yield from (_BLOCK, f"```\n{node.astext()}\n```", _BLOCK)
    elif isinstance(node, addnodes.pending_xref) and node.get("reftype") in _XREFS:
        yield f":{_XREFS[node['reftype']]}:`{node.get('reftarget', '')}`"
    elif isinstance(node, nodes.Element):
        wrap = {nodes.emphasis: "*", nodes.strong: "**"}.get(type(node), "")
        link = node.get("refuri", "") if isinstance(node, nodes.reference) else ""
        link = quote(link, safe=_URL_SAFE) if link.startswith(("https://", "http://")) else ""
        block = not isinstance(node, (nodes.Inline, nodes.document))
        bounded = isinstance(node, live_text)
        yield from [_BOUNDARY] * bounded + [_BLOCK] * block + [wrap] + ["["] * bool(link)
        for child in node.children:
            yield from _tokens(child)
        yield from [f"]({link})"] * bool(link) + [wrap] + [_BLOCK] * block + [_BOUNDARY] * bounded


def _markdown(tokens: list[Any]) -> str:
    """Tokens as one text: blocks apart by a blank line (none at its ends)."""
    parts: list[str] = []
    gap = False
    for token in tokens:
        if token is _BLOCK:
            gap = bool(parts)
        elif isinstance(token, str) and token:
            if gap:
                parts.append("\n\n")
                gap = False
            parts.append(token)
    return "".join(parts)


def _escaped(text: str) -> str:
    for char, escape in _ESCAPES:
        text = text.replace(char, escape)
    return text


# -- each page's slide prose -----------------------------------------------------------------------


class SlidesCollector(EnvironmentCollector):
    """Keeps every page's :data:`PageSlides` in the environment (:func:`page_slides`; ``-j`` safe)."""

    def clear_doc(self, app: Sphinx, env: BuildEnvironment, docname: str) -> None:
        page_slides(env).pop(docname, None)

    def merge_other(
        self, app: Sphinx, env: BuildEnvironment, docnames: set[str], other: BuildEnvironment
    ) -> None:
        mine, theirs = page_slides(env), page_slides(other)
        for docname in docnames:
            if docname in theirs:
                mine[docname] = theirs[docname]

    def process_doc(self, app: Sphinx, doctree: nodes.document) -> None:
        if any(True for _ in doctree.findall(lambda n: isinstance(n, nodes.Element) and ATTRIBUTE in n)):
            runs = _Runs(doctree)
            runs.walk(doctree)
            runs.close(())
            page_slides(app.env)[app.env.docname] = tuple(runs.items)
        for title in doctree.findall(nodes.title):
            title.attributes.pop(HEADING, None)  # a page whose marks all were dropped


class _Runs:
    """A page cut where d2lbook's notebook has a new markdown cell: at each cell, and where
    framework prose starts and ends. A run's heading is its first level-1 title."""

    def __init__(self, doctree: nodes.document) -> None:
        self.doctree = doctree
        self.items: list[SlideProse | int] = []
        self.marks: list[SlideMark] = []
        self.frameworks: tuple[str, ...] = ()
        self.heading = ""

    def close(self, frameworks: tuple[str, ...]) -> None:
        """End the run; the next is for ``frameworks``."""
        if self.marks or self.heading:
            self.items.append(SlideProse(tuple(self.marks), self.heading, self.frameworks))
        self.marks, self.frameworks, self.heading = [], frameworks, ""

    def walk(self, node: nodes.Element) -> None:
        for child in list(node.children):
            if not isinstance(child, nodes.Element):
                continue
            self.heading = self.heading or child.attributes.pop(HEADING, "")
            self.marks.extend(child.attributes.pop(ATTRIBUTE, []))
            if isinstance(child, nodes.comment) and "livecells-slide" in child["classes"]:
                node.remove(child)
            elif isinstance(child, live_cell):
                self.close(self.frameworks)
                if child.get("index") is not None:
                    self.items.append(child["index"])
            elif isinstance(child, live_text):
                outer = self.frameworks
                self.close(tuple(child["frameworks"]))
                self.walk(child)
                self.close(outer)
            else:
                self.walk(child)


def page_slides(env: BuildEnvironment) -> dict[str, PageSlides]:
    """Every page's slide prose (pages with slide marks only), kept with the environment."""
    return env_state(env).slides


def setup_slides_read(app: Sphinx) -> None:
    app.add_node(slide_mark)
    app.add_role("slide", SlideRole())
    app.add_transform(SlideMarks)
    app.add_env_collector(SlidesCollector)
