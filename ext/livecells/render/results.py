"""The best known result of each cell: what the page, its notebooks and the report all show.

A page's stored session holds one result per cell of that framework, in order. A stored result
still belongs to a cell while every cell before it (and the cell itself) has the same code:
state flows down a session, so a change in cell 3 leaves cells 1-2 valid and drops 3 onwards.
Shared by :mod:`.render` and :mod:`.notebooks`, so that a notebook holds exactly the outputs
the page shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx

from livecells.config import get_config
from livecells.build.events import build_state, store_of
from livecells.model.plans import PagePlan
from livecells.store.files import StoreProblem

#: (cell index, framework) -> (the cell's stored result, its session's record)
Matched = dict[tuple[int, str], tuple[dict[str, Any], dict[str, Any]]]


def stored_sessions(app: Sphinx, docname: str) -> dict[str, dict[str, Any]]:
    """The page's sessions by framework: this build's, else the store's (none when execution is
    off; a bad file or session counts as none). This build's records are kept in memory, so
    that a store that cannot be written or read does not empty the pages whose cells ran."""
    if get_config(app).execute == "off":
        return {}
    try:
        sessions = dict(store_of(app).load(docname)["sessions"])
    except StoreProblem:
        sessions = {}  # reported when the build planned this page
    sessions.update(build_records(app, docname))
    return sessions


def build_records(app: Sphinx, docname: str) -> dict[str, dict[str, Any]]:
    """The records of the page's sessions that ran in this build, by framework."""
    return {fw: record for (page, fw), record in build_state(app).records.items() if page == docname}


def matched_results(plan: PagePlan, sessions: Mapping[str, dict[str, Any]]) -> Matched:
    """Each (cell, framework)'s stored result, valid while the cells up to it are unchanged."""
    matched: Matched = {}
    for framework in plan.frameworks:
        session = sessions.get(framework)
        if not session:
            continue
        stored_cells = session.get("cells", [])
        mine = [c for c in plan.cells if framework in c.frameworks]
        for position, cell in enumerate(mine):
            if position >= len(stored_cells) or stored_cells[position].get("code_sha") != cell.code_sha:
                break
            matched[(cell.index, framework)] = (stored_cells[position], session)
    return matched


def groups_by_page(
    document: nodes.document, groups: list[nodes.Element], docname: str
) -> list[tuple[nodes.Element, str, list[nodes.Element]]]:
    """``(root, docname, groups)`` per page: a LaTeX or single-page build assembles many pages
    into one tree (each inside a ``start_of_file``), and each page's cells have its own plan.

    Walked from the top: the assembled pages' nodes keep stale ``parent`` links.
    """
    wanted = {id(group) for group in groups}
    owner: dict[int, tuple[nodes.Element, str]] = {}
    for page in document.findall(addnodes.start_of_file):
        # Pre-order: a page inlined inside another comes later and claims its own groups.
        for group in page.findall(lambda n: id(n) in wanted):
            owner[id(group)] = (page, page["docname"])
    pages: dict[str, tuple[nodes.Element, list[nodes.Element]]] = {}
    for group in groups:
        root, name = owner.get(id(group), (document, docname))
        pages.setdefault(name, (root, []))[1].append(group)
    return [(root, name, members) for name, (root, members) in pages.items()]


def format_seconds(value: float) -> str:
    """A run time as the page and the report show it: 4 decimals under a second, fewer above."""
    if value >= 100:
        return f"{value:.0f} s"
    if value >= 1:
        return f"{value:.2f} s"
    return f"{value:.4f} s"
