"""The best known result of each cell: what the page, its notebooks and the report all show.

The build's outcome (:class:`~livecells.model.records.BuildOutcome`, on the environment) says
where each session's results come from: this build's run (kept in memory, so that a store that
cannot be written does not empty the pages whose cells ran), the store, or nowhere. A stored
result belongs to its cell by the one staleness rule, :func:`~livecells.model.records.current_count`
(state flows down a session, so a change in cell 3 leaves cells 1-2 valid and drops 3 onwards),
which the build applied: the outcome says how many of each session's cells the page shows. The
records are the outcome's own, the very ones the build planned with (a store file is read once
per build): render never reads the store, so a file replaced during the build changes nothing.
Shared by :mod:`.cells` and :mod:`.notebooks`, so that a notebook holds exactly the outputs the
page shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from docutils import nodes
from sphinx import addnodes

from livecells.model.plans import PagePlan
from livecells.model.records import BuildOutcome, CellRecord, SessionRecord
from livecells.model.vocabulary import Origin

#: (cell index, framework) -> (the cell's result, its session's record)
Matched = dict[tuple[int, str], tuple[CellRecord, SessionRecord]]


def page_records(outcome: BuildOutcome, plan: PagePlan) -> dict[str, SessionRecord]:
    """The page's sessions by framework, as the build's outcome says: this build's records, and
    the stored ones (as the build read them) of the sessions it took from the store."""
    records: dict[str, SessionRecord] = {}
    for framework in plan.frameworks:
        session = outcome.session(plan.docname, framework)
        record = outcome.records.get((plan.docname, framework))
        if session is not None and record is not None and session.origin in {Origin.RUN, Origin.STORE}:
            records[framework] = record
    return records


def matched_results(
    plan: PagePlan, outcome: BuildOutcome, sessions: Mapping[str, SessionRecord], tags: Any = None
) -> Matched:
    """Each (cell, framework)'s result: the first cells of each session the build's outcome says
    the page shows (``SessionOutcome.current``, by the one staleness rule)."""
    matched: Matched = {}
    for framework in plan.frameworks:
        record = sessions.get(framework)
        session = outcome.session(plan.docname, framework)
        if record is None or session is None:
            continue
        cells = plan.session(framework, tags).cells
        for cell, result in zip(cells[: session.current], record.cells):
            matched[(cell.index, framework)] = (result, record)
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

