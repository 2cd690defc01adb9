"""Read stage: the doctree nodes that the directives make and the render stage replaces.

The doctree holds them between reading and writing, the same for every builder; no writer ever
sees one. ``ALL`` is the framework name of a cell that runs in every framework.
"""

from __future__ import annotations

from docutils import nodes
from sphinx.application import Sphinx

ALL = "all"


class live_cell(nodes.General, nodes.Element):
    """One cell: its code, frameworks and options. Children: recorded outputs (if any).

    Attributes: ``code``, ``frameworks`` (list, or ``["all"]``), ``index`` (position among the
    page's cells), ``hide_code``, ``hide_output``, ``raises`` (``None``, or a list of exception
    names, empty for any), ``timeout``, ``stderr``, ``no_timing``; how it is timed: ``repeat``
    and ``warmup`` (timed runs), ``all_devices`` (``:timings: all-devices``); how it is shown
    (:mod:`livecells.read.display`): ``linenos``, ``lineno_start``, ``emphasize``,
    ``code_below``, ``collapse_code``, ``collapse_output``, ``image``, and a ``figure`` child.
    """


class live_group(nodes.General, nodes.Element):
    """Adjacent cells shown together: one tab per framework."""


class live_recorded(nodes.General, nodes.Element):
    """A recorded output of a cell, as the source holds it (kept as a literal_block child)."""


class live_text(nodes.General, nodes.Element):
    """Prose that belongs to some frameworks (``frameworks``): its children are body elements.

    The render stage moves it into those frameworks' tab panels; it never reaches a writer.
    """


class live_settings(nodes.General, nodes.Element):
    """Page settings: ``gpus``, ``timeout``, ``depends``. Removed from the page when rendered."""


def setup_nodes(app: Sphinx) -> None:
    # A named cell is a target that a bare :ref: can point to; its title is its first line.
    app.add_enumerable_node(live_cell, "live-cell", title_getter=_cell_title)
    for node in (live_group, live_recorded, live_text, live_settings):
        app.add_node(node)


def _cell_title(node: nodes.Element) -> str:
    first = next((line.strip() for line in node["code"].splitlines() if line.strip()), "")
    return first if len(first) <= 60 else first[:57] + "..."
