"""Read and plan stages: each page's cells as plain data, and the keys that decide what runs.

While Sphinx reads (possibly in parallel with ``-j``), :class:`PlanCollector` turns each page's
``live_cell`` nodes into a :class:`PagePlan` kept in the build environment (``clear_doc`` and
``merge_other`` keep ``-j`` clean). After reading, each page gives one :class:`SessionPlan` per
framework it uses, and each session gets a key: a hash of its cells' code in order (with the
options that change execution) and of the page's ``:depends:`` files. The environment's
fingerprint (kernelspec, versions) is kept beside the key, not in it, so the device policy can
tell "the code changed" from "the machine changed".
"""

from __future__ import annotations

import glob
import hashlib
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment
from sphinx.environment.collectors import EnvironmentCollector
from sphinx.util import logging

from .config import WARNING_TYPE, get_config
from .directive import ALL, live_cell, live_settings

logger = logging.getLogger(__name__)

#: Bumped when the way a session is executed changes what it would produce.
KEY_VERSION = 1


@dataclass(frozen=True)
class CellPlan:
    """One cell as the sessions that run it see it."""

    index: int  # position among the page's cells
    frameworks: tuple[str, ...]  # resolved: never "all"
    code: str
    line: int  # the directive's line in the source
    code_line: int  # the line of the first line of code
    timeout: float | None = None
    raises: tuple[str, ...] | None = None
    stderr: str = "show"
    is_all: bool = False
    #: The file the cell is written in (an ``include``d one, say); "" = the page's own.
    source: str = ""
    #: The expressions of the ``only`` directives around the cell: it runs only in builds whose
    #: tags satisfy them all (``.. only:: latex`` cells do not run in HTML builds).
    only: tuple[str, ...] = ()

    def location(self, line: int | None = None) -> str:
        """``file:line`` for a warning about this cell (``line``: default, the directive's)."""
        return f"{self.source}:{self.line if line is None else line}"

    def included(self, tags: Any) -> bool:
        """Whether a build with ``tags`` (Sphinx's :class:`~sphinx.util.tags.Tags`) shows the cell."""
        if tags is None or not self.only:
            return True
        try:
            return all(tags.eval_condition(expr) for expr in self.only)
        except Exception:  # noqa: BLE001 - Sphinx warns about a bad expression itself, and keeps it
            return True

    def expects(self, ename: str) -> bool:
        """Whether ``:raises:`` makes an error named ``ename`` expected (bare ``:raises:``: any)."""
        if self.raises is None:
            return False
        return not self.raises or ename in self.raises or ename.rsplit(".", 1)[-1] in self.raises

    @property
    def code_sha(self) -> str:
        return hashlib.sha256(self.code.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class PageSettings:
    gpus: int | None = None
    timeout: float | None = None
    depends: tuple[str, ...] = ()


@dataclass(frozen=True)
class PagePlan:
    """A page's cells in document order, and its settings."""

    docname: str
    source: str  # path of the page's source file
    cells: tuple[CellPlan, ...]
    settings: PageSettings = field(default_factory=PageSettings)

    @property
    def frameworks(self) -> list[str]:
        seen: dict[str, None] = {}
        for cell in self.cells:
            seen.update(dict.fromkeys(cell.frameworks))
        return list(seen)

    def session(self, framework: str, tags: Any = None) -> SessionPlan:
        """The framework's session; with the build's ``tags``, only the cells the build shows."""
        return SessionPlan(
            docname=self.docname,
            framework=framework,
            source=self.source,
            cells=tuple(c for c in self.cells if framework in c.frameworks and c.included(tags)),
            settings=self.settings,
        )

    def sessions(self, order: Iterable[str], tags: Any = None) -> list[SessionPlan]:
        """One session per framework the page uses (and the build shows), in configured order."""
        used = set(self.frameworks)
        found = [self.session(fw, tags) for fw in order if fw in used]
        return [s for s in found if s.cells]


@dataclass(frozen=True)
class SessionPlan:
    """What one kernel must run: one page's cells for one framework, in order."""

    docname: str
    framework: str
    source: str
    cells: tuple[CellPlan, ...]
    settings: PageSettings

    @property
    def cwd(self) -> str:
        return os.path.dirname(self.source)

    @property
    def name(self) -> str:
        return f"{self.docname} [{self.framework}]"

    def code_key(self, depends_digest: str) -> str:
        """Hash of what decides this session's results, besides the machine: its cells' code in
        order (with the options that change execution) and the page's ``:depends:`` files."""
        digest = hashlib.sha256()
        header = {"v": KEY_VERSION, "framework": self.framework, "depends": depends_digest}
        digest.update(json.dumps(header, sort_keys=True).encode())
        for cell in self.cells:
            digest.update(json.dumps([cell.code, cell.timeout]).encode())
            digest.update(b"\0")
        return digest.hexdigest()


#: Per file: (size, mtime_ns, ctime_ns, inode) and the content's digest, kept in the build
#: environment so that an unchanged (perhaps huge) dependency is not read again each build.
FileHashes = dict[str, tuple[tuple[int, int, int, int], str]]
CHUNK = 1 << 20


def file_digest(path: str, hashes: FileHashes | None = None) -> str:
    """SHA-256 of a file's content, read in chunks; reused from ``hashes`` while the file's
    size, times and inode are unchanged. A fresh clone has no ``hashes``: everything is read."""
    try:
        stat = os.stat(path)
    except OSError:
        return "<unreadable>"
    signature = (stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino)
    known = hashes.get(path) if hashes is not None else None
    if known is not None and tuple(known[0]) == signature:
        return known[1]
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as handle:
            while chunk := handle.read(CHUNK):
                digest.update(chunk)
    except OSError:
        return "<unreadable>"
    if hashes is not None:
        hashes[path] = (signature, digest.hexdigest())
    return digest.hexdigest()


def files_digest(
    base: str, patterns: Iterable[str], hashes: FileHashes | None = None
) -> tuple[str, list[str]]:
    """Hash of the files that glob ``patterns`` (relative to ``base``) match, by path and
    content, and the patterns that matched nothing."""
    files: dict[Path, None] = {}
    unmatched = []
    for pattern in patterns:
        matches = sorted(glob.glob(os.path.join(base, pattern), recursive=True))
        matches = [m for m in matches if os.path.isfile(m)]
        if not matches:
            unmatched.append(pattern)
        files.update(dict.fromkeys(Path(m).resolve() for m in matches))
    digest = hashlib.sha256()
    for path in files:
        digest.update(os.fsencode(os.path.relpath(path, base)) + b"\0")
        digest.update(file_digest(str(path), hashes).encode() + b"\0")
    return digest.hexdigest(), unmatched


def depends_digest(page: PagePlan, hashes: FileHashes | None = None) -> tuple[str, list[str]]:
    """Hash of the files the page's ``:depends:`` globs match (paths and contents), and the
    patterns that matched nothing."""
    return files_digest(os.path.dirname(page.source), page.settings.depends, hashes)


def session_keys(
    page: PagePlan,
    order: Iterable[str],
    hashes: FileHashes | None = None,
    book: str = "",
    tags: Any = None,
) -> tuple[dict[str, str], list[str]]:
    """Each of the page's sessions' key by framework (the :depends: files read once), and the
    :depends: patterns that matched nothing. ``book`` is the digest of ``livecells_depends``."""
    digest, unmatched = depends_digest(page, hashes)
    if book:
        digest = hashlib.sha256(f"{digest}/{book}".encode()).hexdigest()
    return {s.framework: s.code_key(digest) for s in page.sessions(order, tags)}, unmatched


def file_hashes(env: BuildEnvironment) -> FileHashes:
    """The environment's cache of dependency digests (see :func:`file_digest`)."""
    if not hasattr(env, "livecells_file_hashes"):
        env.livecells_file_hashes = {}  # type: ignore[attr-defined]
    return env.livecells_file_hashes  # type: ignore[attr-defined,no-any-return]


def _page_plan(app: Sphinx, doctree: nodes.document, docname: str) -> PagePlan | None:
    config = get_config(app)
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
                stderr=cell.get("stderr", "show"),
                is_all=is_all,
                source=cell.source or str(source),
                only=tuple(reversed(only)),
            )
        )
    settings_nodes = list(doctree.findall(live_settings))
    for extra in settings_nodes[1:]:
        logger.warning(
            "live-settings appears more than once on the page; only the first is used",
            location=extra,
            type=WARNING_TYPE,
            subtype="config",
        )
    settings = PageSettings()
    if settings_nodes:
        first = settings_nodes[0]
        settings = PageSettings(
            gpus=first.get("gpus"),
            timeout=first.get("timeout"),
            depends=tuple(first.get("depends", ())),
        )
    return PagePlan(docname=docname, source=str(source), cells=tuple(plans), settings=settings)


class PlanCollector(EnvironmentCollector):
    """Keeps every page's :class:`PagePlan` in ``env.livecells_plans``."""

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
    if not hasattr(env, "livecells_plans"):
        env.livecells_plans = {}  # type: ignore[attr-defined]
    return env.livecells_plans  # type: ignore[attr-defined,no-any-return]


def session_plans(env: BuildEnvironment, order: Iterable[str], tags: Any = None) -> list[SessionPlan]:
    order = list(order)
    result: list[SessionPlan] = []
    for docname in sorted(plans(env)):
        result.extend(plans(env)[docname].sessions(order, tags))
    return result


def setup_plan(app: Sphinx) -> None:
    app.add_env_collector(PlanCollector)
