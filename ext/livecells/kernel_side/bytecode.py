"""Kernel side: a book's cached bytecode is trusted only where it is newer than its source.

Python reuses a ``__pycache__`` file while its header matches the source's size and modification
time in whole seconds. A helper saved twice within one second at the same size (a formatter run
on save, a second save after a build had started) therefore imports the first version's code,
and the rerun that livecells starts because the helper changed would show the old result as new.
:func:`install` makes the kernel (and a fork server's template, before its imports) read the
cached file of a source outside the interpreter's own folders only if it was written after the
source last changed (its ``st_ctime``, which every write and every ``utime`` moves), and remove
the one it wrote if the source changed while it was compiled (as far as the change time, size
and inode tell: a same-size write within one tick of the clock does not show); otherwise Python
compiles the source and rewrites the cache, as for any stale one. The installed folders keep
Python's own rule: what changes there comes with an install, which the environment's
fingerprint sees, and their files and caches may carry equal time stamps (conda, reproducible
images). Left to Python's own check: a cache that another process (not a livecells kernel)
compiled while the source changed under it.

It runs in the kernel's own Python, loaded by path: standard library only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterable
from importlib.machinery import (
    BYTECODE_SUFFIXES,
    EXTENSION_SUFFIXES,
    SOURCE_SUFFIXES,
    ExtensionFileLoader,
    FileFinder,
    SourceFileLoader,
    SourcelessFileLoader,
)
from typing import Any

#: The attribute that marks livecells' path hook (installing twice, in a forked kernel, is a no-op).
MARK = "_livecells_fresh_bytecode"


class FreshSourceLoader(SourceFileLoader):
    """Python's loader of source files, which reads a cached file only if it was written after
    its source last changed (:func:`written_after`; a refused one reads as missing, so Python
    compiles again), and removes the one it wrote if the source changed while it compiled."""

    def path_stats(self, path: str) -> dict[str, Any]:
        stat = os.stat(path)
        self._compiled_from = (path, state(stat))
        return {"mtime": stat.st_mtime, "size": stat.st_size}

    def get_data(self, path: str) -> bytes:
        if path.endswith(tuple(BYTECODE_SUFFIXES)) and not written_after(path, self.path):
            raise OSError(f"{path} was not written after {self.path} last changed")
        return super().get_data(path)

    def set_data(self, path: str, data: bytes, **options: Any) -> None:
        super().set_data(path, data, **options)
        source, before = getattr(self, "_compiled_from", (None, None))
        if source is None or not path.endswith(tuple(BYTECODE_SUFFIXES)):
            return
        try:
            if state(os.stat(source)) == before:
                return
        except OSError:
            pass
        try:  # compiled from what the source held before it changed, perhaps
            os.unlink(path)
        except OSError:
            pass


def state(stat: os.stat_result) -> tuple[int, int, int]:
    """What a write or a replacement changes: the change time, the size, the inode (a save within
    one tick of a coarse clock keeps the time; an editor that saves by renaming changes the inode)."""
    return changed_ns(stat), stat.st_size, stat.st_ino


def changed_ns(stat: os.stat_result) -> int:
    """When the file last changed: its content (``st_mtime``), or its times or status
    (``st_ctime``: a ``utime`` that sets an old modification time moves it)."""
    return max(stat.st_mtime_ns, stat.st_ctime_ns)


def written_after(cached: str, source: str) -> bool:
    """Whether file ``cached`` was last written after file ``source`` last changed (False if
    either is missing). Equal times do not count: a coarse clock gives two writes within its
    tick one time stamp."""
    try:
        return os.stat(cached).st_mtime_ns > changed_ns(os.stat(source))
    except OSError:
        return False


def path_hook(installed: Iterable[str]) -> Callable[[str], Any]:
    """A ``sys.path_hooks`` entry that finds modules in a folder outside ``installed`` with
    :class:`FreshSourceLoader` (and extensions and bare bytecode as Python does); for a folder
    inside them, or anything not a folder, it declines, so Python's own hooks answer."""
    roots = tuple(os.path.join(os.path.realpath(folder), "") for folder in installed)
    finder = FileFinder.path_hook(
        (ExtensionFileLoader, EXTENSION_SUFFIXES),
        (FreshSourceLoader, SOURCE_SUFFIXES),
        (SourcelessFileLoader, BYTECODE_SUFFIXES),
    )

    def hook(entry: str) -> Any:
        if os.path.join(os.path.realpath(entry or os.getcwd()), "").startswith(roots):
            raise ImportError("an installed folder: Python's own loaders")
        return finder(entry)  # ImportError for anything but a folder

    setattr(hook, MARK, True)
    return hook


def installed() -> bool:
    """Whether :func:`install` ran in this process (or the template it was forked from)."""
    return any(getattr(hook, MARK, False) for hook in sys.path_hooks)


def install(installed_folders: Iterable[str]) -> bool:
    """Put :func:`path_hook` first in ``sys.path_hooks`` and forget the finders already made for
    the folders it answers for (so that they are made again by it). False if it was there."""
    if installed():
        return False
    hook = path_hook(installed_folders)
    sys.path_hooks.insert(0, hook)
    for entry, finder in list(sys.path_importer_cache.items()):
        if not isinstance(finder, FileFinder):
            continue
        try:
            hook(entry)
        except Exception:  # declined (ImportError), or an entry no folder can be
            continue
        sys.path_importer_cache.pop(entry, None)
    return True
