"""Read stage: a read-time transform that gives each cell its recorded outputs and groups cells.

After the directives have run, :class:`GroupLiveCells` attaches each recorded output (a
``parsed-literal`` of class ``output``, or a bare ``output_*`` figure, right after a cell) to its
cell, numbers the page's cells, and groups adjacent cells and framework prose into one
:class:`~livecells.read.nodes.live_group`, which the render stage turns into a tab set.
"""

from __future__ import annotations

import os
import posixpath
import re
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.transforms import SphinxTransform
from sphinx.util import logging

from livecells.config import WARNING_TYPE
from livecells.model.vocabulary import WarningSubtype
from livecells.read.directives import warn_config
from livecells.read.nodes import ALL, live_cell, live_group, live_recorded, live_text

logger = logging.getLogger(__name__)


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
                warn_config(
                    text,
                    "live-text: no cell of this page is for %s (its cells are for %s); the prose "
                    "gets a tab of its own",
                    ", ".join(map(repr, unused)),
                    ", ".join(sorted(used)),
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
            subtype=WarningSubtype.RECORDED,
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


def setup_grouping(app: Sphinx) -> None:
    app.add_transform(GroupLiveCells)
