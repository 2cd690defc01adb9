"""Read stage: the ``live-cell``, ``live-text`` and ``live-settings`` directives and their nodes.

The directives parse and record; they execute nothing. A read-time transform then attaches each
recorded output (a ``parsed-literal`` of class ``output``, or a bare ``output_*`` figure, right
after a cell) to its cell, and groups adjacent cells and framework prose into one
:class:`live_group`, which the render stage turns into a tab set. The doctree built here is the
same for every builder.

A ``parsed-literal`` of class ``output`` is read literally, never as inline markup: it is program
output (d2lbook writes every text output so), and a printout such as ``dense1_ (`` must not become
a reference.

Its size (about 420 lines) is the whole authoring surface of SPEC.md in one place: three
directives, their options and checks, their nodes, and the transform that groups them.
"""

from __future__ import annotations

import math
import os
import posixpath
import re
from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.parsers.rst.directives.body import ParsedLiteral
from docutils.statemachine import StateMachine
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from livecells.config import STDERR_MODES, WARNING_TYPE, app_of, get_config

logger = logging.getLogger(__name__)

ALL = "all"


class live_cell(nodes.General, nodes.Element):  # noqa: N801
    """One cell: its code, frameworks and options. Children: recorded outputs (if any).

    Attributes: ``code``, ``frameworks`` (list, or ``["all"]``), ``index`` (position among the
    page's cells), ``hide_code``, ``hide_output``, ``raises`` (``None``, or a list of exception
    names, empty for any), ``timeout``, ``stderr``, ``no_timing``.
    """


class live_group(nodes.General, nodes.Element):  # noqa: N801
    """Adjacent cells shown together: one tab per framework."""


class live_recorded(nodes.General, nodes.Element):  # noqa: N801
    """A recorded output of a cell, as the source holds it (kept as a literal_block child)."""


class live_text(nodes.General, nodes.Element):  # noqa: N801
    """Prose that belongs to some frameworks (``frameworks``): its children are body elements.

    The render stage moves it into those frameworks' tab panels; it never reaches a writer.
    """


class live_settings(nodes.General, nodes.Element):  # noqa: N801
    """Page settings: ``gpus``, ``timeout``, ``depends``. Removed from the page when rendered."""


def _frameworks_argument(argument: str) -> list[str]:
    names = [part.strip() for part in argument.replace(" ", ",").split(",") if part.strip()]
    if not names:
        raise ValueError("a framework name, a comma list, or 'all' is required")
    return names


def _raises(argument: str | None) -> list[str]:
    if not argument:
        return []
    return [part.strip() for part in argument.replace(" ", ",").split(",") if part.strip()]


def _seconds(argument: str) -> float:
    value = float(directives.unchanged_required(argument))
    if not math.isfinite(value) or value <= 0:  # nan and inf would mean no time limit
        raise ValueError("must be a positive, finite number of seconds")
    return value


def _stderr(argument: str) -> str:
    return directives.choice(argument, STDERR_MODES)


def _patterns(argument: str) -> list[str]:
    return [part.strip() for part in argument.split(",") if part.strip()]


class LiveCellDirective(SphinxDirective):
    """``.. live-cell:: pytorch[, mxnet] | all`` with the cell's code as content."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {
        "hide-code": directives.flag,
        "hide-output": directives.flag,
        "raises": _raises,
        "timeout": _seconds,
        "stderr": _stderr,
        "no-timing": directives.flag,
        "name": directives.unchanged_required,
        "class": directives.class_option,
    }

    def run(self) -> list[nodes.Node]:
        config = get_config(app_of(self.env))
        names = _frameworks_argument(self.arguments[0])
        known = config.framework_names()
        unknown = [n for n in names if n != ALL and n not in known]
        # A cell left with no framework is not run: the build warns of it each time (a page
        # that is not read again would pass -W the next time).
        if unknown and any(n == ALL or n in known for n in names):
            logger.warning(
                "live-cell: unknown framework %s (livecells_frameworks has %s); the cell is "
                "shown but not run",
                ", ".join(map(repr, unknown)),
                ", ".join(known),
                location=self.get_location(),
                type=WARNING_TYPE,
                subtype="config",
            )
        if ALL in names and len(names) > 1:
            logger.warning(
                "live-cell: 'all' cannot be combined with other frameworks; using 'all'",
                location=self.get_location(),
                type=WARNING_TYPE,
                subtype="config",
            )
            names = [ALL]
        code = "\n".join(self.content)
        # The first line of code in its own file (an included one, a table cell), not an offset
        # into the page's assembled input.
        code_line = _first_content_line(self)
        if isinstance(self.state_machine, StateMachine):
            _, line = self.state_machine.get_source_and_line(self.content_offset + 1)
            code_line = line or code_line
        if not code.strip():
            logger.warning(
                "live-cell: the cell has no code",
                location=self.get_location(),
                type=WARNING_TYPE,
                subtype="config",
            )
        # Seen frameworks are kept in order, without duplicates.
        frameworks = list(dict.fromkeys(n for n in names if n == ALL or n in known))
        cell = live_cell(
            code=code,
            frameworks=frameworks,
            unknown=unknown,
            hide_code="hide-code" in self.options,
            hide_output="hide-output" in self.options,
            raises=self.options.get("raises"),
            timeout=self.options.get("timeout"),
            stderr=self.options.get("stderr", "show"),
            no_timing="no-timing" in self.options,
            # The first line of code in the source, so errors can point inside the cell.
            code_line=code_line,
            classes=self.options.get("class", []),
        )
        self.set_source_info(cell)
        self.add_name(cell)
        return [cell]


class LiveTextDirective(SphinxDirective):
    """``.. live-text:: pytorch[, mxnet]`` with prose (any body elements) as content."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = {"class": directives.class_option}

    def run(self) -> list[nodes.Node]:
        config = get_config(app_of(self.env))
        names = _frameworks_argument(self.arguments[0])
        known = config.framework_names()
        body = self.parse_content_to_nodes(allow_section_headings=False)
        wrong = [n for n in names if n not in known]
        if wrong:
            logger.warning(
                "live-text: %s %s (livecells_frameworks has %s); the prose is shown for every "
                "framework",
                "'all' is not a framework of prose: write plain prose instead of" if ALL in wrong
                else "unknown framework",
                ", ".join(map(repr, wrong)),
                ", ".join(known),
                location=self.get_location(),
                type=WARNING_TYPE,
                subtype="config",
            )
        frameworks = list(dict.fromkeys(n for n in names if n in known))
        if not self.content or not "".join(self.content).strip():
            logger.warning(
                "live-text: the prose is empty",
                location=self.get_location(),
                type=WARNING_TYPE,
                subtype="config",
            )
        if not frameworks:
            # Nothing to attach it to: the prose stays in the page, in place, as plain prose.
            return body
        node = live_text("", *body, frameworks=frameworks, classes=self.options.get("class", []))
        self.set_source_info(node)
        return [node]


class OutputLiteral(ParsedLiteral):
    """``parsed-literal``, except that a block of class ``output`` (recorded program output, as
    d2lbook writes it) keeps its text literally: no inline markup, references or roles."""

    def run(self) -> list[nodes.Node]:
        if "output" not in self.options.get("class", []):
            return super().run()  # type: ignore[no-any-return]
        self.assert_has_content()
        text = "\n".join(self.content)
        node = nodes.literal_block(text, text, classes=list(self.options["class"]))
        node.source, node.line = self.state_machine.get_source_and_line(_first_content_line(self))
        self.add_name(node)
        return [node]


class LiveSettingsDirective(SphinxDirective):
    """``.. live-settings::`` with ``:gpus:``, ``:timeout:``, ``:depends:``; once per page."""

    has_content = False
    option_spec = {
        "gpus": directives.nonnegative_int,
        "timeout": _seconds,
        "depends": _patterns,
    }

    def run(self) -> list[nodes.Node]:
        node = live_settings(
            gpus=self.options.get("gpus"),
            timeout=self.options.get("timeout"),
            depends=self.options.get("depends", []),
        )
        self.set_source_info(node)
        return [node]


def _first_content_line(directive: Directive) -> int:
    """The 1-based source line of a directive's first content line.

    docutils' RST parser counts ``content_offset`` from the top of the file; MyST's mock state
    machine counts it from the directive's own line (0: the line after the fence).
    """
    if isinstance(directive.state_machine, StateMachine):
        return directive.content_offset + 1
    return directive.lineno + directive.content_offset + 1


#: d2lbook's name for a figure output: output_<page>_<sha>_<cell>_<n>.<ext>
RECORDED_FIGURE = re.compile(r"output_[^/]*\.(svg|png|jpe?g|gif)", re.IGNORECASE)


def _is_recorded_output(node: nodes.Node) -> bool:
    """A literal block of class ``output`` (MyST: also a fence whose language is ``output``)."""
    if isinstance(node, nodes.literal_block):
        return "output" in node.get("classes", []) or node.get("language") == "output"
    return is_recorded_figure(node)


def is_recorded_figure(node: nodes.Node) -> bool:
    """A bare ``.. figure:: output_*.svg``: one image, no caption, legend, label or name."""
    if not isinstance(node, nodes.figure) or node["ids"] or node["names"] or len(node) != 1:
        return False
    image = node[0]
    if not isinstance(image, nodes.image):
        return False
    uri = image.get("uri", "")
    return "://" not in uri and bool(RECORDED_FIGURE.fullmatch(posixpath.basename(uri)))


def _skippable(node: nodes.Node) -> bool:
    """Nodes between cells that do not break adjacency (comments, targets, LaTeX-only raw)."""
    if isinstance(node, (nodes.comment, nodes.target, nodes.system_message)):
        return True
    return isinstance(node, nodes.raw) and "html" not in node.get("format", "").split()


class GroupLiveCells(SphinxTransform):
    """Attach recorded outputs to cells, number the cells, and group adjacent cells and prose."""

    default_priority = 200

    def apply(self, **kwargs: Any) -> None:
        cells = list(self.document.findall(live_cell))
        texts = list(self.document.findall(live_text))
        if not cells and not texts:
            return
        for index, cell in enumerate(cells):
            cell["index"] = index
            self._attach_recorded(cell)
        self._check_text_frameworks(cells, texts)
        members = [*cells, *texts]
        for parent in {id(m.parent): m.parent for m in members}.values():
            self._group_children(parent)

    @staticmethod
    def _check_text_frameworks(cells: list[live_cell], texts: list[live_text]) -> None:
        """Prose for a framework that none of the page's cells use is probably a leftover."""
        used = {fw for c in cells for fw in c["frameworks"]}
        if not cells or ALL in used:
            return
        for text in texts:
            unused = [fw for fw in text["frameworks"] if fw not in used]
            if unused:
                logger.warning(
                    "live-text: no cell of this page is for %s (its cells are for %s); the prose "
                    "gets a tab of its own",
                    ", ".join(map(repr, unused)),
                    ", ".join(sorted(used)),
                    location=text,
                    type=WARNING_TYPE,
                    subtype="config",
                )

    def _attach_recorded(self, cell: live_cell) -> None:
        parent = cell.parent
        position = parent.index(cell) + 1
        while position < len(parent):
            sibling = parent[position]
            if _is_recorded_output(sibling):
                parent.remove(sibling)
                cell += live_recorded("", self._checked_figure(sibling))
                continue
            if _skippable(sibling) and not isinstance(sibling, nodes.target):
                position += 1
                continue
            break

    def _checked_figure(self, node: nodes.Element) -> nodes.Element:
        """A recorded figure whose file is missing becomes a note saying so (and a warning)."""
        if not isinstance(node, nodes.figure):
            return node
        uri = node[0]["uri"]
        if os.path.isfile(self.env.relfn2path(uri, self.env.docname)[1]):
            return node
        logger.warning(
            "recorded figure %s not found; the cell's recorded output says it is missing",
            uri,
            location=node,
            type=WARNING_TYPE,
            subtype="recorded",
        )
        text = f"recorded figure {uri}: file not found"
        note = nodes.paragraph(text, text, classes=["livecells-missing"])
        note.source, note.line = node.source, node.line
        return note

    @staticmethod
    def _group_children(parent: nodes.Element) -> None:
        groups: list[list[nodes.Node]] = []
        run: list[nodes.Node] = []
        pending: list[nodes.Node] = []  # skippable nodes seen after the run's last member
        for child in list(parent.children):
            if isinstance(child, (live_cell, live_text)):
                # A member whose framework is already in the run starts a new group, except
                # that consecutive members of one framework stay in the same tab.
                if run and _starts_new_group(run, child):
                    groups.append(run)
                    run = []
                    pending = []
                run.extend(pending)
                pending = []
                run.append(child)
            elif run and _skippable(child):
                pending.append(child)
            else:
                if run:
                    groups.append(run)
                run, pending = [], []
        if run:
            groups.append(run)
        for members in groups:
            first = members[0]
            group = live_group()
            group.source, group.line = first.source, first.line
            parent.insert(parent.index(first), group)
            for member in members:
                parent.remove(member)
                group += member


def _starts_new_group(run: list[nodes.Node], member: nodes.Element) -> bool:
    previous = [n for n in run if isinstance(n, (live_cell, live_text))]
    last = previous[-1]
    if ALL in member["frameworks"] or ALL in last["frameworks"]:
        return True  # an `all` cell stands alone: it has no framework panel to share
    if set(member["frameworks"]) == set(last["frameworks"]):
        return False
    seen = {fw for n in previous for fw in n["frameworks"]}
    # A framework that already had its turn in this group, after another one, starts a new group.
    return bool(set(member["frameworks"]) & seen)


def setup_directives(app: Sphinx) -> None:
    app.add_directive("live-cell", LiveCellDirective)
    app.add_directive("live-text", LiveTextDirective)
    app.add_directive("live-settings", LiveSettingsDirective)
    app.add_directive("parsed-literal", OutputLiteral, override=True)
    app.add_transform(GroupLiveCells)
    # A named cell is a target that a bare :ref: can point to; its title is its first line.
    app.add_enumerable_node(live_cell, "live-cell", title_getter=_cell_title)
    for node in (live_group, live_recorded, live_text, live_settings):
        app.add_node(node)


def _cell_title(node: nodes.Element) -> str:
    first = next((line.strip() for line in node["code"].splitlines() if line.strip()), "")
    return first if len(first) <= 60 else first[:57] + "..."
