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

import glob
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISREG
from typing import Any

from livecells.model.frameworks import FrameworkSpec
from livecells.model.plans import PagePlan, SessionPlan

#: Bumped when the way a session is executed changes what it would produce.
KEY_VERSION = 2


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
        digest.update(json.dumps([cell.code, _seconds(timeout), raises]).encode())
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
    settings: RunSettings | None = None,
) -> tuple[dict[str, str], list[str]]:
    """Each of the page's sessions' key by framework (the :depends: files read once), and the
    :depends: patterns that matched nothing. ``book`` is the digest of ``livecells_depends``."""
    digest, unmatched = depends_digest(page, hashes)
    if book:
        digest = hashlib.sha256(f"{digest}/{book}".encode()).hexdigest()
    keys = {s.framework: session_key(s, digest, settings) for s in page.sessions(order, tags)}
    return keys, unmatched
