"""Render stage: a cell's display options (:mod:`livecells.read.display`) applied to its nodes.

Line numbers and emphasised lines are the ``linenos`` and ``highlight_args`` (``linenostart``,
``hl_lines``) of the code's literal block, as Sphinx's ``code-block`` sets them, so that Sphinx's
own HTML and LaTeX writers draw them. A collapsed part is a ``<details>`` element in HTML, whose
``<summary>`` a reader opens with a click or the keyboard, without JavaScript; every other
builder prints it in full.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

from livecells.read.nodes import live_cell

#: A collapsed part's summary when the option names none: what a closed and an open one say.
SUMMARIES = {"code": ("Show code", "Hide code"), "output": ("Show output", "Hide output")}


class livecells_details(nodes.General, nodes.Element):
    """A collapsed part of a cell, HTML only: ``<details>``; its first child is the summary."""


class livecells_summary(nodes.General, nodes.TextElement):
    """The always visible line of a :class:`livecells_details`: ``<summary>``."""


def code_block(cell: live_cell) -> nodes.literal_block:
    """The cell's code, with its line numbers and emphasised lines."""
    code = nodes.literal_block(cell["code"], cell["code"], classes=["livecells-input"])
    code["language"] = "ipython3"  # IPython's lexer: !cmd, %magic and %%cell magics
    if cell.get("linenos"):
        code["linenos"] = True
    extra: dict[str, Any] = {}
    if cell.get("emphasize"):
        extra["hl_lines"] = list(cell["emphasize"])
    if cell.get("lineno_start") is not None:
        extra["linenostart"] = cell["lineno_start"]
    if extra:
        code["highlight_args"] = extra
    return code


def collapsed(children: Sequence[nodes.Node], summary: str | None, part: str, builder_format: str) -> list[nodes.Node]:
    """``children`` under a summary line that opens them (HTML), or as they are: not collapsed
    (``summary`` None), or a builder with no such element (LaTeX, text: printed in full)."""
    if summary is None or builder_format != "html":
        return list(children)
    line = livecells_summary()
    if summary:
        line += nodes.Text(summary)
    else:
        closed, opened = SUMMARIES[part]
        line += nodes.inline(closed, closed, classes=["livecells-when-closed"])
        line += nodes.inline(opened, opened, classes=["livecells-when-open"])
    return [livecells_details("", line, *children, classes=["livecells-collapsed", f"livecells-collapsed-{part}"])]


def place_code_below(box: nodes.Element) -> None:
    """Move the cell's code (shown first) after its outputs, as ``:code-below:`` asks."""
    code = [n for n in box.children if _is_code(n)]
    for node in code:
        box.remove(node)
    box.extend(code)


def _is_code(node: nodes.Node) -> bool:
    if isinstance(node, nodes.literal_block):
        return "livecells-input" in node["classes"]
    return isinstance(node, livecells_details) and "livecells-collapsed-code" in node["classes"]


def visit_details(self: Any, node: livecells_details) -> None:
    self.body.append(self.starttag(node, "details"))


def depart_details(self: Any, node: livecells_details) -> None:
    self.body.append("</details>\n")


def visit_summary(self: Any, node: livecells_summary) -> None:
    self.body.append(self.starttag(node, "summary", ""))


def depart_summary(self: Any, node: livecells_summary) -> None:
    self.body.append("</summary>\n")


def setup_display(app: Sphinx) -> None:
    # Made for HTML builders only (collapsed() prints the parts in full for any other).
    app.add_node(livecells_details, html=(visit_details, depart_details))
    app.add_node(livecells_summary, html=(visit_summary, depart_summary))
