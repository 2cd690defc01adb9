"""Read stage: each page's ``live_cell`` nodes become a :class:`~livecells.model.PagePlan`.

While Sphinx reads (possibly in parallel with ``-j``), :class:`PlanCollector` keeps each page's
plan in the build environment (``clear_doc`` and ``merge_other`` keep ``-j`` clean).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.environment.collectors import EnvironmentCollector
from sphinx.util import logging

from livecells.config import WARNING_TYPE, get_config
from livecells.model.plans import CellPlan, PagePlan, PageSettings, SessionPlan
from livecells.model.vocabulary import ExecuteMode, StderrMode, WarningSubtype
from livecells.read.cell_options import plan_options
from livecells.read.env_state import env_state
from livecells.read.nodes import ALL, live_cell, live_settings

logger = logging.getLogger(__name__)


def _page_plan(app: Sphinx, doctree: nodes.document, docname: str) -> PagePlan | None:
    config = get_config(app.env)
    cells = list(doctree.findall(live_cell))
    if not cells:
        return None
    source = app.env.doc2path(docname)
    named = [fw for c in cells for fw in c["frameworks"] if fw != ALL]
    page_frameworks = [fw for fw in config.framework_names() if fw in named]
    if not page_frameworks:
        # A page of only `all` cells runs in the book's default (first) framework.
        page_frameworks = config.framework_names()[:1]
    plans = []
    for cell in cells:
        is_all = ALL in cell["frameworks"]
        frameworks = tuple(page_frameworks) if is_all else tuple(cell["frameworks"])
        raises = cell.get("raises")
        only = []
        parent = cell.parent
        while parent is not None:
            if isinstance(parent, addnodes.only):
                only.append(parent["expr"])
            parent = parent.parent
        plans.append(
            CellPlan(
                index=cell["index"],
                frameworks=frameworks,
                code=cell["code"],
                line=cell.line or 0,
                code_line=cell.get("code_line", cell.line or 0),
                timeout=cell.get("timeout"),
                raises=None if raises is None else tuple(raises),
                stderr=StderrMode(cell.get("stderr", StderrMode.SHOW)),
                source=cell.source or str(source),
                only=tuple(reversed(only)),
                unknown=tuple(cell.get("unknown") or ()),
                allow_errors=config.allow_errors,
                repeat=cell.get("repeat", 1),
                warmup=cell.get("warmup", 0) if cell.get("repeat", 1) > 1 else 0,
                options=plan_options(cell),
            )
        )
    settings_nodes = list(doctree.findall(live_settings))
    for extra in settings_nodes[1:]:
        logger.warning(
            "live-settings appears more than once on the page; only the first is used",
            location=extra,
            type=WARNING_TYPE,
            subtype=WarningSubtype.CONFIG,
        )
    settings = PageSettings()
    if settings_nodes:
        first = settings_nodes[0]
        settings = PageSettings(
            gpus=first.get("gpus"),
            timeout=first.get("timeout"),
            depends=tuple(first.get("depends", ())),
            execute=ExecuteMode(first["execute"]) if first.get("execute") else None,
        )
    return PagePlan(docname=docname, source=str(source), cells=tuple(plans), settings=settings)


class PlanCollector(EnvironmentCollector):
    """Keeps every page's :class:`PagePlan` in the environment (:func:`plans`)."""

    def clear_doc(self, app: Sphinx, env: BuildEnvironment, docname: str) -> None:
        plans(env).pop(docname, None)

    def merge_other(
        self, app: Sphinx, env: BuildEnvironment, docnames: set[str], other: BuildEnvironment
    ) -> None:
        mine, theirs = plans(env), plans(other)
        for docname in docnames:
            if docname in theirs:
                mine[docname] = theirs[docname]

    def process_doc(self, app: Sphinx, doctree: nodes.document) -> None:
        docname = app.env.docname
        plan = _page_plan(app, doctree, docname)
        if plan is not None:
            plans(app.env)[docname] = plan


def plans(env: BuildEnvironment) -> dict[str, PagePlan]:
    """Every page's plan, kept in (and pickled with) the build environment."""
    return env_state(env).plans


def session_plans(env: BuildEnvironment, order: Iterable[str], tags: Any = None) -> list[SessionPlan]:
    order = list(order)
    result: list[SessionPlan] = []
    for docname in sorted(plans(env)):
        result.extend(plans(env)[docname].sessions(order, tags))
    return result


def setup_collect(app: Sphinx) -> None:
    app.add_env_collector(PlanCollector)
