"""Session keys: what decides whether a stored session's results still stand.

Each session's key is a hash of everything besides the machine that decides what the session
gives: its cells' code in order, each with the timeout it runs under (its ``:timeout:``, else
``livecells_timeout``) and the errors its ``:raises:`` expects (what the stored status says),
the page's ``live-settings`` (``:gpus:``, the ``:timeout:`` budget), the page's ``:depends:``
files (and the book's ``livecells_depends``), ``livecells_output_limit``, ``livecells_env_drop``
(what of the environment a cell sees), and the framework's ``sync`` and probe code (what the
timing line measures and says). A stored result stands only for the settings it ran under
(:class:`RunSettings`). The environment's fingerprint (kernelspec, versions) is kept beside the
key, not in it, so the device policy can tell "the code changed" from "the machine changed".
Nothing here knows Sphinx.
"""

from __future__ import annotations

import fnmatch
import functools
import glob
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from livecells.model.frameworks import FrameworkSpec
from livecells.model.plans import PagePlan, SessionPlan
from livecells.plan.helpers import Helpers, ModuleCache, UsageCache, read_helpers

#: Bumped when the way a session is executed changes what it would produce.
KEY_VERSION = 2
#: ``json.dumps(entry, default=repr)``, without a new encoder for each of a book's cells.
_CELL_ENCODER = json.JSONEncoder(default=repr)


@dataclass(frozen=True)
class RunSettings:
    """The book's settings that change what a session gives, besides its page: the timeout of
    cells without ``:timeout:``, the output limit, each framework's spec, and the patterns of
    environment variables kept from the kernels."""

    timeout: float = 600.0
    output_limit: int = 100_000
    frameworks: Mapping[str, FrameworkSpec] = field(default_factory=dict)
    env_drop: tuple[str, ...] = ()


def session_key(session: SessionPlan, depends_digest: str, settings: RunSettings | None = None) -> str:
    """Hash of what decides a session's results, besides the machine: its cells' code in order,
    each with its timeout, the page's settings and ``:depends:`` files, and the book's
    ``settings``."""
    settings = settings or RunSettings()
    spec = settings.frameworks.get(session.framework)
    digest = hashlib.sha256()
    header = {
        "v": KEY_VERSION,
        "framework": session.framework,
        "depends": depends_digest,
        "gpus": session.settings.gpus,
        "budget": _seconds(session.settings.timeout),
        "output_limit": settings.output_limit,
        "env_drop": sorted({pattern.upper() for pattern in settings.env_drop}),  # as kept_environ reads them
        # What the timing line measures (sync) and says (the device, the version).
        "spec": [spec.sync, spec.gpu_used, spec.version_module] if spec is not None else None,
    }
    digest.update(json.dumps(header, sort_keys=True).encode())
    for cell in session.cells:
        timeout = cell.timeout or settings.timeout  # as run_session gives it
        # :raises: decides the cell's stored ``expected`` and the session's status, which the
        # command line's report reads without the page.
        raises = None if cell.raises is None else sorted(cell.raises)
        entry: list[Any] = [cell.code, _seconds(timeout), raises]
        if cell.allow_errors:  # livecells_allow_errors does what a bare :raises: does
            entry.append("allow-errors")
        if cell.repeat > 1:  # a repeated cell's samples (a cell run once keeps its old key)
            entry.append([cell.repeat, cell.warmup])
        if cell.options:  # keyed options of read/cell_options.py with no field of their own
            entry.append({"options": [[name, value] for name, value in cell.options]})
        digest.update(_CELL_ENCODER.encode(entry).encode())
        digest.update(b"\0")
    return digest.hexdigest()


def _seconds(value: float | None) -> float | None:
    """A timeout as the key holds it: ``30`` and ``30.0`` are the same setting."""
    return None if value is None else float(value)

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
    if not S_ISREG(stat.st_mode):  # a FIFO would block the build forever
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


#: How far one ``**`` of a dependency pattern walks: at most this many folders and entries.
#: A folder reached through links is walked once (by device and inode), so links back up the
#: tree end; the caps bound what is left (a huge tree), with a warning.
MAX_FOLDERS = 10_000
MAX_ENTRIES = 200_000


def _component(pattern: str, name: str) -> bool:
    """Whether ``name`` matches one component of a glob pattern (as :mod:`glob`: a hidden name
    only by a pattern that starts with a dot)."""
    if name.startswith(".") and not pattern.startswith("."):
        return False
    return fnmatch.fnmatchcase(name, pattern)


def _matches(pattern: Sequence[str], parts: Sequence[str]) -> bool:
    """Whether path components ``parts`` match ``pattern``'s, where ``**`` stands for any number
    of components (none hidden), as in ``glob(recursive=True)``."""

    @functools.cache
    def match(i: int, j: int) -> bool:
        if i == len(pattern):
            return j == len(parts)
        if pattern[i] == "**":
            return match(i + 1, j) or (
                j < len(parts) and not parts[j].startswith(".") and match(i, j + 1)
            )
        return j < len(parts) and _component(pattern[i], parts[j]) and match(i + 1, j + 1)

    return match(0, 0)


def _walk(root: str, hidden: bool) -> tuple[list[tuple[tuple[str, ...], str]], bool]:
    """Every entry under ``root`` as (components below it, path), and whether a cap cut the walk.

    Folders found through links are walked after the real ones, and each folder once (by device
    and inode): a link back up the tree adds nothing. Hidden folders only when ``hidden``.
    """
    found: list[tuple[tuple[str, ...], str]] = []
    seen: set[tuple[int, int]] = set()
    real: list[tuple[str, tuple[str, ...]]] = [(root, ())]
    linked: list[tuple[str, tuple[str, ...]]] = []
    while real or linked:
        path, parts = real.pop() if real else linked.pop(0)
        try:
            stat = os.stat(path)
        except OSError:
            continue
        if (stat.st_dev, stat.st_ino) in seen:
            continue
        seen.add((stat.st_dev, stat.st_ino))
        if len(seen) > MAX_FOLDERS:
            return found, True
        try:
            with os.scandir(path) as entries:
                for entry in entries:
                    if len(found) >= MAX_ENTRIES:
                        return found, True
                    below = (*parts, entry.name)
                    found.append((below, entry.path))
                    try:
                        folder = entry.is_dir()
                    except OSError:
                        continue
                    if folder and (hidden or not entry.name.startswith(".")):
                        (linked if entry.is_symlink() else real).append((entry.path, below))
        except OSError:
            continue
    return found, False


def glob_files(base: str, pattern: str) -> tuple[list[str], bool]:
    """The files ``pattern`` matches (relative to ``base``, sorted) and whether a walk was cut.

    As ``glob.glob(recursive=True)``, but ``**`` walks a bounded tree (see :data:`MAX_FOLDERS`):
    the standard library follows links to folders with no end (a link to ``..``).
    """
    full = os.path.join(base, pattern)
    components = full.split(os.sep)
    if "**" not in components:
        return sorted(m for m in glob.glob(full) if os.path.isfile(m)), False
    first = components.index("**")
    head, rest = os.sep.join(components[:first]) or os.sep, components[first:]
    roots = glob.glob(head) if glob.has_magic(head) else [head]
    hidden = any(part.startswith(".") for part in rest)
    files, cut = set(), False
    for root in roots:
        entries, stopped = _walk(root, hidden)
        cut = cut or stopped
        files.update(path for parts, path in entries if _matches(rest, parts) and os.path.isfile(path))
    return sorted(files), cut


def files_digest(
    base: str, patterns: Iterable[str], hashes: FileHashes | None = None
) -> tuple[str, list[str]]:
    """Hash of the files that glob ``patterns`` (relative to ``base``) match, by path and
    content; and what to warn of: each pattern that matched nothing, or whose walk was cut."""
    files, problems = matched_files(base, patterns)
    return paths_digest(base, files, hashes), problems


def matched_files(base: str, patterns: Iterable[str]) -> tuple[list[Path], list[str]]:
    """The files ``patterns`` match, once each, and what to warn of (see :func:`files_digest`)."""
    files: dict[Path, None] = {}
    problems = []
    for pattern in patterns:
        matches, cut = glob_files(base, pattern)
        if cut:
            problems.append(
                f"{pattern!r} was cut short: a '**' walks at most {MAX_FOLDERS:,} folders and "
                f"{MAX_ENTRIES:,} entries"
            )
        elif not matches:
            problems.append(f"{pattern!r} matches no file")
        files.update(dict.fromkeys(Path(m).resolve() for m in matches))
    return list(files), problems


def paths_digest(base: str, files: Iterable[Path], hashes: FileHashes | None = None) -> str:
    """Hash of ``files`` by path (relative to ``base``) and content."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(os.fsencode(os.path.relpath(path, base)) + b"\0")
        digest.update(file_digest(str(path), hashes).encode() + b"\0")
    return digest.hexdigest()


def depends_split(
    base: str,
    patterns: Iterable[str],
    hashes: FileHashes | None = None,
    cache: ModuleCache | None = None,
    usages: UsageCache | None = None,
    modules: Mapping[str, str] | None = None,
) -> tuple[str, Helpers, list[str]]:
    """As :func:`files_digest`, but the Python files among the matches are helper modules
    (:mod:`livecells.plan.helpers`), which each session's key covers as far as it uses them:
    the hash of the other files, the helper modules, and what to warn of. ``modules``: more
    helper modules, by path (relative to ``base``) -> import name (the book's library files,
    named by their path), read when they are there."""
    files, problems = matched_files(base, patterns)
    names = {str(Path(base, path).resolve()): name for path, name in (modules or {}).items()}
    files = list(dict.fromkeys([*files, *(Path(p) for p in names if os.path.isfile(p))]))
    python = [path for path in files if path.suffix == ".py"]
    others = [path for path in files if path.suffix != ".py"]
    helpers = read_helpers(base, map(str, python), cache, usages, names)
    return paths_digest(base, others, hashes), helpers, problems


def depends_digest(page: PagePlan, hashes: FileHashes | None = None) -> tuple[str, list[str]]:
    """Hash of the files the page's ``:depends:`` globs match (paths and contents), and what to
    warn of (see :func:`files_digest`)."""
    return files_digest(os.path.dirname(page.source), page.settings.depends, hashes)


def session_keys(
    page: PagePlan,
    order: Iterable[str],
    hashes: FileHashes | None = None,
    book: str = "",
    tags: Any = None,
    settings: RunSettings | None = None,
    helpers: Helpers | None = None,
    cache: ModuleCache | None = None,
) -> tuple[dict[str, str], list[str]]:
    """Each of the page's sessions' key by framework (the :depends: files read once), and what
    to warn of its :depends: patterns. ``book`` is the digest of ``livecells_depends``.

    ``helpers``: the book's helper modules (``livecells_depends_granularity = "definitions"``);
    then the Python files of the page's :depends: are helper modules too, and each session's key
    covers only what it reaches of them. None: every file counts whole."""
    if helpers is None:
        digest, problems = depends_digest(page, hashes)
    else:
        base = os.path.dirname(page.source)
        digest, mine, problems = depends_split(base, page.settings.depends, hashes, cache)
        if mine:
            helpers = Helpers([*helpers.modules.values(), *mine.modules.values()], helpers.usages, helpers.roots)
    if book:
        digest = hashlib.sha256(f"{digest}/{book}".encode()).hexdigest()
    frameworks = (settings or RunSettings()).frameworks
    keys = {}
    for session in page.sessions(order, tags):
        own = digest
        spec = frameworks.get(session.framework)
        preload = spec.preload if spec else ()
        code = [c.code for c in session.cells]
        used = helpers.digest(code, preload, session.name, [os.path.dirname(page.source)]) if helpers else ""
        if used:
            own = hashlib.sha256(f"{digest}/{used}".encode()).hexdigest()
        keys[session.framework] = session_key(session, own, settings)
    return keys, problems
