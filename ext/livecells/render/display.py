"""Render stage: a cell's display options (:mod:`livecells.read.display`) applied to its nodes.

Line numbers and emphasised lines are the ``linenos`` and ``highlight_args`` (``linenostart``,
``hl_lines``) of the code's literal block, as Sphinx's ``code-block`` sets them, so that Sphinx's
own HTML and LaTeX writers draw them. A collapsed part is a ``<details>`` element in HTML, whose
``<summary>`` a reader opens with a click or the keyboard, without JavaScript; every other
builder prints it in full. An output figure is the ``figure`` that the directive made while
reading (numbered by Sphinx, found by ``:numref:``) around the cell's outputs: the first copy of a
cell's figure (its first framework's) keeps the label; a further framework's copy, in another tab,
shows the same number in HTML and none in LaTeX (where any figure gets the next number).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx

from livecells.model.text import css_name
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
    (``summary`` None), or a builder with no such element (LaTeX, text: printed in full); nothing
    to show is no toggle."""
    if summary is None or builder_format != "html" or not children:
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


def sized_images(shown: Sequence[nodes.Node], cell: live_cell, defaults: dict[str, Any]) -> None:
    """The cell's ``:image-*:`` options, over the book's ``defaults`` (livecells_image_options),
    on its output images (live or recorded; not images inside its Markdown outputs)."""
    options = {**defaults, **(cell.get("image") or {})}
    if not options:
        return
    for node in shown:
        if not isinstance(node, nodes.Element):
            continue
        for image in node.findall(nodes.image):
            if "livecells-image" in image["classes"]:
                for name, value in options.items():
                    if name == "classes":
                        image["classes"] = [*image["classes"], *value]
                    else:
                        image[name] = value
                if image["uri"].startswith("data:"):
                    # Sphinx links a sized image to its file; this one is no file (an SVG that
                    # must never be opened as a page: outputs.py), so no link.
                    image["classes"].append("no-scaled-link")


def output_figure(
    cell: live_cell, shown: Sequence[nodes.Node], builder_format: str, number: str, framework: str
) -> list[nodes.Node]:
    """The cell's outputs in its figure, if it has one. ``number``: the figure's number as the
    HTML writer writes it ("Fig. 2 "), for a copy after the first (``framework``'s)."""
    template = next((c for c in cell.children if isinstance(c, nodes.figure)), None)
    if template is None:
        return list(shown)
    caption = [c.deepcopy() for c in template.children if isinstance(c, nodes.caption)]
    if not cell.get("figure_shown"):
        cell["figure_shown"] = True
        figure = template.copy()  # its attributes (label, classes), no children
        figure.extend([*shown, *caption])
        return [figure]
    if builder_format == "latex":
        # A second LaTeX figure would get a number of its own: the caption as a paragraph.
        box = nodes.container("", *shown, classes=["livecells-output-figure"])
        for item in caption:
            box += nodes.paragraph("", "", *item.children, classes=["livecells-caption"])
        return [box]
    figure = nodes.figure("", *shown, classes=list(template["classes"]))
    figure.source, figure.line = template.source, template.line
    # An id of its own, no label: HTML writers warn of a figure without one, and number none.
    figure["ids"] = [f"{template['ids'][0]}-{css_name(framework)}"] if template["ids"] else []
    for item in caption:
        for element in item.findall(nodes.Element):
            element["ids"] = []
        if number:
            item.insert(0, nodes.inline(number, number, classes=["caption-number"]))
        figure += item
    return [figure]


def figure_number(env: Any, docname: str, cell: live_cell, config: Any) -> str:
    """The number of the cell's figure as Sphinx's HTML writer prefixes its caption, or ""."""
    template = next((c for c in cell.children if isinstance(c, nodes.figure)), None)
    if template is None or not template["ids"]:
        return ""
    numbers = getattr(env, "toc_fignumbers", {}).get(docname, {}).get("figure", {})
    number = numbers.get(template["ids"][0])
    if number is None or not getattr(config, "numfig", False):
        return ""
    try:
        return config.numfig_format["figure"] % ".".join(map(str, number)) + " "
    except (KeyError, TypeError, ValueError):
        return ""


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
