"""Read stage: the ``live-cell``, ``live-text`` and ``live-settings`` directives.

The directives parse and record; they execute nothing. Each makes one node of
:mod:`livecells.read.nodes`; :mod:`livecells.read.grouping` then attaches recorded outputs and
groups the cells. An authoring mistake is a located ``livecells.config`` warning
(:func:`warn_config`), and the directive does what it can with the rest.

``parsed-literal`` is overridden for the whole book: a block of class ``output`` is read
literally, never as inline markup. It is program output (d2lbook writes every text output so),
and a printout such as ``dense1_ (`` must not become a reference. Any other ``parsed-literal``
is docutils' own.
"""

from __future__ import annotations

from typing import Any

from docutils import nodes
from docutils.parsers.rst import Directive, directives
from docutils.parsers.rst.directives.body import ParsedLiteral
from docutils.statemachine import StateMachine
from sphinx.application import Sphinx
from sphinx.util import logging
from sphinx.util.docutils import SphinxDirective

from livecells.config import WARNING_TYPE, get_config
from livecells.model.vocabulary import ExecuteMode, WarningSubtype
from livecells.read.cell_options import OPTION_SPEC, node_attributes, seconds
from livecells.read.display import display_attributes
from livecells.read.nodes import ALL, live_cell, live_settings, live_text

logger = logging.getLogger(__name__)


def warn_config(location: Any, message: str, *args: object) -> None:
    """An authoring mistake, at ``location`` (a node, or a directive's ``get_location()``).

    Type ``livecells``, subtype ``config``: ``-W`` fails on it, ``suppress_warnings`` can hide it.
    """
    logger.warning(message, *args, location=location, type=WARNING_TYPE, subtype=WarningSubtype.CONFIG)


def _frameworks_argument(argument: str) -> list[str]:
    names = [part.strip() for part in argument.replace(" ", ",").split(",") if part.strip()]
    if not names:
        raise ValueError("a framework name, a comma list, or 'all' is required")
    return names


def _execute(argument: str) -> ExecuteMode:
    return ExecuteMode(directives.choice(argument, ExecuteMode.words()))


def _patterns(argument: str) -> list[str]:
    return [part.strip() for part in argument.split(",") if part.strip()]


class LiveCellDirective(SphinxDirective):
    """``.. live-cell:: pytorch[, mxnet] | all`` with the cell's code as content."""

    required_arguments = 1
    final_argument_whitespace = True
    has_content = True
    option_spec = OPTION_SPEC  # every option is a row of read/cell_options.py

    def run(self) -> list[nodes.Node]:
        config = get_config(self.env)
        names = _frameworks_argument(self.arguments[0])
        known = config.framework_names()
        unknown = [n for n in names if n != ALL and n not in known]
        # A cell left with no framework is not run: the build warns of it each time (a page
        # that is not read again would pass -W the next time).
        if unknown and any(n == ALL or n in known for n in names):
            warn_config(
                self.get_location(),
                "live-cell: unknown framework %s (livecells_frameworks has %s); the cell is "
                "shown but not run",
                ", ".join(map(repr, unknown)),
                ", ".join(known),
            )
        if ALL in names and len(names) > 1:
            warn_config(
                self.get_location(),
                "live-cell: 'all' cannot be combined with other frameworks; using 'all'",
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
            warn_config(self.get_location(), "live-cell: the cell has no code")
        # Seen frameworks are kept in order, without duplicates.
        frameworks = list(dict.fromkeys(n for n in names if n == ALL or n in known))
        display, display_children = display_attributes(self, code, warn_config)
        cell = live_cell(
            "",
            *display_children,
            code=code,
            frameworks=frameworks,
            unknown=unknown,
            # The first line of code in the source, so errors can point inside the cell.
            code_line=code_line,
            **node_attributes(self.options, config),
            **display,
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
        config = get_config(self.env)
        names = _frameworks_argument(self.arguments[0])
        known = config.framework_names()
        body = self.parse_content_to_nodes(allow_section_headings=False)
        wrong = [n for n in names if n not in known]
        if wrong:
            warn_config(
                self.get_location(),
                "live-text: %s %s (livecells_frameworks has %s); the prose is shown for every "
                "framework",
                "'all' is not a framework of prose: write plain prose instead of" if ALL in wrong
                else "unknown framework",
                ", ".join(map(repr, wrong)),
                ", ".join(known),
            )
        frameworks = list(dict.fromkeys(n for n in names if n in known))
        if not self.content or not "".join(self.content).strip():
            warn_config(self.get_location(), "live-text: the prose is empty")
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
        "timeout": seconds,
        "depends": _patterns,
        "execute": _execute,
    }

    def run(self) -> list[nodes.Node]:
        node = live_settings(
            gpus=self.options.get("gpus"),
            timeout=self.options.get("timeout"),
            depends=self.options.get("depends", []),
            execute=self.options.get("execute"),
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


def setup_directives(app: Sphinx) -> None:
    app.add_directive("live-cell", LiveCellDirective)
    app.add_directive("live-text", LiveTextDirective)
    app.add_directive("live-settings", LiveSettingsDirective)
    app.add_directive("parsed-literal", OutputLiteral, override=True)
