"""Read stage: the roles and the directive that quote a cell's value or time in prose.

``:live-value:`[framework/]name[:spec]``` (inline text), ``.. live-value:: [framework/]name``
(a whole output: a figure, a table), ``:live-time:`[framework/]cell-name``` and
``:live-ratio:`a / b``` (run times of cells named with ``:name:``). Each makes a pending node
that the render stage (:mod:`livecells.render.values`) replaces by the value of this build's
results, or the store's: reading runs and looks up nothing. Inside ``live-text`` prose the
framework is implied (:class:`PlaceQuotes`). :class:`NamesCollector` keeps, per page, the
cells' ``:value:`` and ``:name:`` names, for render to find them after the cells are replaced.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.environment.collectors import EnvironmentCollector
from sphinx.transforms import SphinxTransform
from sphinx.util.docutils import SphinxDirective, SphinxRole

from livecells.read.env_state import env_state
from livecells.read.nodes import live_cell, live_recorded, live_text

#: The kinds of pending node: a value's text, a cell's time, the ratio of two cells' times.
KINDS = ("value", "time", "ratio")


class live_value(nodes.inline):
    """A value, time or ratio quoted inline: ``kind``, ``target`` (the role's text), ``docname``,
    ``implied`` (the frameworks of the ``live-text`` around it). Replaced when rendered; a copy
    that no page renders (a section title's, in a sidebar's table of contents) is written as
    the inline text it holds, the role's text."""


class live_value_block(nodes.container):
    """A value quoted as a whole output (``.. live-value::``): ``target``, ``docname``, ``implied``.
    Replaced when rendered (an empty container to a writer, were it not)."""


class ValueRole(SphinxRole):
    """``:live-value:``, ``:live-time:`` and ``:live-ratio:``: one pending node each."""

    def __init__(self, kind: str) -> None:
        self.kind = kind

    def run(self) -> tuple[list[nodes.Node], list[nodes.system_message]]:
        node = live_value(self.rawtext, self.text, kind=self.kind, target=self.text, docname=self.env.docname)
        node.source, node.line = self.get_source_info()
        return [node], []


class ValueDirective(SphinxDirective):
    """``.. live-value:: [framework/]name``: the value's whole output (its best representation
    for the builder, as a cell's output), with the line naming where it was made."""

    required_arguments = 1
    final_argument_whitespace = True
    option_spec = {"class": directives.class_option}

    def run(self) -> list[nodes.Node]:
        node = live_value_block(
            target=self.arguments[0].strip(), docname=self.env.docname, classes=self.options.get("class", [])
        )
        self.set_source_info(node)
        return [node]


class PlaceQuotes(SphinxTransform):
    """Quotes inside ``live-text`` prose are for its frameworks (``implied``), unless they name
    one; an inline quote's line is its own, not its paragraph's first (the parser gives roles that)."""

    default_priority = 500

    def apply(self, **kwargs: Any) -> None:
        for text in self.document.findall(live_text):
            for node in text.findall(lambda n: isinstance(n, (live_value, live_value_block))):
                node["implied"] = list(text["frameworks"])
        role_lines(self.document.findall(live_value), lambda node: node.get("target", ""))


def role_lines(roles: Iterable[nodes.Element], text_of: Callable[[nodes.Element], str]) -> None:
    """Each role's line its own, not its paragraph's first (which the parsers give a role):
    found by its text (``text_of``) in backticks, the same in RST (:role:`x`) and MyST
    ({role}`x`), in the paragraph's source, else in its file from the paragraph on."""
    by_parent: dict[int, tuple[nodes.Element, list[nodes.Element]]] = {}
    for node in roles:
        by_parent.setdefault(id(node.parent), (node.parent, []))[1].append(node)
    files: dict[str, list[str]] = {}
    for parent, found in by_parent.values():
        raw = parent.rawsource if isinstance(parent, nodes.TextElement) else ""
        start = 0
        for node in found:
            quoted = f"`{text_of(node)}`"
            if node.line is None:
                break
            at = raw.find(quoted, start)
            if at >= 0:
                node.line += raw.count("\n", 0, at)
                start = at + len(quoted)
            else:  # no paragraph source: the role's text in its file, from the paragraph on
                start = node.line = _line_in_file(files, node.source, quoted, max(node.line, start))


def _line_in_file(files: dict[str, list[str]], source: str | None, text: str, line: int) -> int:
    """The first line from ``line`` on (1-based, within a paragraph's reach) of ``source`` that
    holds ``text``; ``line`` itself if none does (or the file cannot be read)."""
    if not source:
        return line
    if source not in files:
        try:
            with open(source, encoding="utf-8") as handle:
                files[source] = handle.read().splitlines()
        except (OSError, UnicodeDecodeError):
            files[source] = []
    lines = files[source]
    for number in range(line, min(len(lines), line + 100) + 1):
        if text in lines[number - 1]:
            return number
    return line


@dataclass
class PageNames:
    """A page's named cells, by position: ``values`` (``:value:``), ``labels`` (``:name:``, as
    docutils normalizes it -> position), each cell's location (``file:line``), and the recorded
    text output of each ``:value:`` cell that has one (its value when it has no result)."""

    values: dict[int, str] = field(default_factory=dict)
    labels: dict[str, int] = field(default_factory=dict)
    locations: dict[int, str] = field(default_factory=dict)
    recorded: dict[int, str] = field(default_factory=dict)


class NamesCollector(EnvironmentCollector):
    """Keeps every page's :class:`PageNames` in the environment (:func:`page_names`; ``-j`` safe)."""

    def clear_doc(self, app: Sphinx, env: BuildEnvironment, docname: str) -> None:
        page_names(env).pop(docname, None)

    def merge_other(
        self, app: Sphinx, env: BuildEnvironment, docnames: set[str], other: BuildEnvironment
    ) -> None:
        mine, theirs = page_names(env), page_names(other)
        for docname in docnames:
            if docname in theirs:
                mine[docname] = theirs[docname]

    def process_doc(self, app: Sphinx, doctree: nodes.document) -> None:
        names = PageNames()
        for cell in doctree.findall(live_cell):
            index = cell.get("index")
            if index is None:
                continue
            names.locations[index] = f"{cell.source}:{cell.line}"
            if cell.get("value"):
                names.values[index] = cell["value"]
                texts = [b for r in cell.findall(live_recorded) for b in r.findall(nodes.literal_block)]
                if texts:
                    names.recorded[index] = texts[0].astext()
            for label in cell.get("names", []):
                names.labels[label] = index
        if names.locations:
            page_names(app.env)[app.env.docname] = names


def page_names(env: BuildEnvironment) -> dict[str, PageNames]:
    """Every page's named cells, kept in (and pickled with) the build environment."""
    return env_state(env).names


def value_option(argument: str | None) -> str:
    """``:value: NAME`` of a ``live-cell``: a name that prose can quote (no colon, slash or space)."""
    name = directives.unchanged_required(argument).strip()
    if not name or any(c in name for c in ":/") or len(name.split()) != 1:
        raise ValueError(f"{name!r} is no value name: one word, without ':' or '/'")
    return name


def setup_values_read(app: Sphinx) -> None:
    app.add_node(live_value)
    app.add_node(live_value_block)
    for kind in KINDS:
        app.add_role(f"live-{kind}", ValueRole(kind))
    app.add_directive("live-value", ValueDirective)
    app.add_transform(PlaceQuotes)
    app.add_env_collector(NamesCollector)
