"""Store stage: executed results kept per page, as plain JSON, fit to commit.

One file per page (``<store>/<docname>.json``) holds, per framework session, the session's keys,
each cell's outputs as Jupyter mime bundles, its timing, and where/when/on what it ran. Files are
written atomically (a temporary file renamed over the old one) under a per-page lock, and each
write merges into what is on disk, so two builds sharing one store lose nothing. A damaged file,
or one from a newer format, is reported and never misread; a session whose record does not
have the stored shape (:func:`.schema.check_session`) is left out of what :meth:`load` returns
and reported, so that it runs again. The checks' verdicts are kept by the file's content (and
the checks' own source), in a mapping the caller may keep between builds: an unchanged file is
not checked again. Nothing here knows Sphinx.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import hashlib
import importlib
import json
import os
import stat
from collections.abc import Iterator, MutableMapping
from pathlib import Path
from typing import Any

from livecells._version import __version__
from livecells.errors import StoreEntryError, StoreError
from livecells.model.records import SessionRecord
from livecells.store.codec import session_from_json, session_to_json
from livecells.store.schema import check_session

FORMAT = 1
SUFFIX = ".json"
#: What happens to a store file that cannot be read: said loudly, since the file is overwritten.
REPLACED = "its results will be recomputed, and the file replaced when they are stored"


#: Each session's problem (None: none), by framework: the checks' verdict on one file's sessions.
Verdicts = dict[str, str | None]


class OutputStore:
    """The folder of stored results.

    ``verdicts``, a mapping its owner keeps (a build's environment), holds the checks' verdicts
    by content digest (:func:`verdict_key`); the digests of the contents this object last read or
    wrote, one per page, are :attr:`checked`, so that the owner can drop the others.
    """

    def __init__(self, root: str | os.PathLike[str], verdicts: MutableMapping[str, Verdicts] | None = None) -> None:
        self.root = Path(root)
        self.verdicts = verdicts
        #: Per page: the digest of the content this object last read or wrote.
        self._current: dict[str, str] = {}

    @property
    def checked(self) -> set[str]:
        """The digests of the pages' contents this object last read or wrote."""
        return set(self._current.values())

    def path(self, docname: str) -> Path:
        return self.root / f"{docname}{SUFFIX}"

    def _lock_path(self, docname: str) -> Path:
        return self.root / ".locks" / (docname.replace("/", "%") + ".lock")

    @contextlib.contextmanager
    def _locked(self, docname: str) -> Iterator[None]:
        lock_path = self._lock_path(docname)
        if not lock_path.parent.is_dir():
            lock_path.parent.mkdir(parents=True, exist_ok=True)
            # The store is committed; its lock files are not.
            (lock_path.parent / ".gitignore").write_text("*\n")
        with open(lock_path, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def load(self, docname: str, problems: list[str] | None = None) -> dict[str, Any]:
        """The page's record (``{"format", "page", "sessions"}``); empty if there is none.

        Raises :class:`StoreError` for a file that is damaged or from a newer format. A
        session whose record has the wrong shape is left out, and why is added to ``problems``.
        """
        path = self.path(docname)
        try:
            raw = _read_bytes(path)
            content = raw.decode("utf-8")
        except FileNotFoundError:
            return _empty(docname)
        except (OSError, UnicodeDecodeError) as err:
            raise StoreError(f"{path}: cannot be read ({err})") from None
        try:
            data = json.loads(content)
        except (ValueError, RecursionError) as err:
            reason = "nested too deeply" if isinstance(err, RecursionError) else str(err)
            raise StoreError(f"{path}: damaged ({reason}); {REPLACED}") from None
        if not isinstance(data, dict) or not isinstance(data.get("sessions"), dict):
            raise StoreError(f"{path}: not a livecells store file; {REPLACED}")
        version = data.get("format")
        if type(version) is not int:
            raise StoreError(
                f"{path}: not a livecells store file (format {version!r}); {REPLACED}"
            )
        if version > FORMAT:
            raise StoreError(
                f"{path}: written in store format {version!r}, newer than this livecells "
                f"understands ({FORMAT}); it is left alone and its results are not used"
            )
        verdicts = self._checked(docname, raw, data["sessions"])
        for framework, why in verdicts.items():
            if why is not None:
                del data["sessions"][framework]
                if problems is not None:
                    problems.append(f"{path}: session {framework!r} is not used ({why}); it runs again")
        return data

    def records(self, docname: str, problems: list[str] | None = None) -> dict[str, SessionRecord]:
        """The page's stored sessions by framework, as records (see :meth:`load`)."""
        return {fw: session_from_json(data) for fw, data in self.load(docname, problems)["sessions"].items()}

    def save_record(self, docname: str, record: SessionRecord) -> None:
        """Write one session's record into the page's file, keeping the other sessions."""
        self.save_session(docname, record.framework, session_to_json(record))

    def save_session(self, docname: str, framework: str, record: dict[str, Any]) -> None:
        """Write one session's record into the page's file, keeping the other sessions."""
        self.root.mkdir(parents=True, exist_ok=True)
        with self._locked(docname):
            try:
                data = self.load(docname)  # sessions of the wrong shape are dropped
            except StoreError as problem:
                if _is_newer(self.path(docname)):
                    raise
                data = _empty(docname)  # a damaged file is replaced
                del problem
            data["sessions"][framework] = _with_stored_devices(record, data["sessions"].get(framework))
            self._write(docname, data)

    def remove(self, docname: str, frameworks: list[str] | None = None) -> bool:
        """Drop a page's results (or some frameworks'); True if anything was removed.

        Raises :class:`StoreError` when the file cannot be changed (or, for some frameworks'
        results, read)."""
        path = self.path(docname)
        root = self.root.resolve()
        if root not in path.resolve().parents:  # "../../tsconfig", "/etc/x": not the store's
            raise StoreError(f"{path}: not in the store folder {root}; left alone")
        if not path.exists():
            return False
        try:
            with self._locked(docname):
                if frameworks is None:
                    if _foreign(path):
                        raise StoreError(
                            f"{path}: JSON that is not a livecells store file; left alone (is "
                            "the store folder right?)"
                        )
                    path.unlink(missing_ok=True)
                    return True
                data = self.load(docname)
                removed = [fw for fw in frameworks if data["sessions"].pop(fw, None) is not None]
                if data["sessions"]:
                    self._write(docname, data)
                else:
                    path.unlink(missing_ok=True)
                return bool(removed)
        except OSError as err:
            raise StoreError(f"{path}: cannot be changed ({err})") from None

    def pages(self) -> list[str]:
        """Every page that has a file in the store."""
        if not self.root.is_dir():
            return []
        return sorted(
            p.relative_to(self.root).as_posix()[: -len(SUFFIX)]
            for p in self.root.rglob(f"*{SUFFIX}")
            if not any(part.startswith(".") for part in p.relative_to(self.root).parts)
        )

    def _write(self, docname: str, data: dict[str, Any]) -> None:
        path = self.path(docname)
        path.parent.mkdir(parents=True, exist_ok=True)
        data["format"] = FORMAT
        data["page"] = docname
        text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n"
        raw = text.encode("utf-8")
        # Not tempfile.mkstemp (always 0600): the store is shared (committed, published by
        # another user), so its files get 0666 less the umask, as any file the user writes.
        tmp = str(path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o666)
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(raw)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        # The written content's verdicts, from what a read of it decodes: a build that writes no
        # page is not pickled by Sphinx, so the next build's reads must find them kept here.
        self._checked(docname, raw, json.loads(text)["sessions"])


    def _checked(self, docname: str, raw: bytes, sessions: dict[str, Any]) -> Verdicts:
        """Each session's verdict, from the kept ones where this content was checked before."""
        key = verdict_key(raw)
        self._current[docname] = key
        found = _VERDICTS.get(key)
        if found is None and self.verdicts is not None:
            found = self.verdicts.get(key)
        if not isinstance(found, dict) or set(found) != set(sessions):  # none, or not of this content
            found = {}
            for framework, record in sessions.items():
                try:
                    check_session(record)
                    found[framework] = None
                except StoreEntryError as err:
                    found[framework] = str(err)
            if len(_VERDICTS) > 4096:
                _VERDICTS.clear()
            _VERDICTS[key] = found
        if self.verdicts is not None:
            self.verdicts[key] = found
        return found


#: The verdicts of this process, by :func:`verdict_key`: a build reads a page's file again,
#: under its lock, to store a session in it; it is checked once.
_VERDICTS: dict[str, Verdicts] = {}

#: What :func:`.schema.check_session` is made of: its module and the livecells modules it imports
#: (tests/store check the list against schema.py's imports).
CHECKS = ("livecells.store.schema", "livecells.errors", "livecells.model.mime", "livecells.model.text",
          "livecells.model.vocabulary")


@functools.cache
def _checks_digest() -> bytes:
    """This livecells' version, the store format and the checks' source: a verdict kept by an
    older livecells, or before the checks were edited in a source tree, is not used."""
    digest = hashlib.sha256(f"{__version__}/{FORMAT}".encode())
    for name in CHECKS:
        try:
            digest.update(Path(importlib.import_module(name).__file__ or "").read_bytes())
        except OSError:
            digest.update(f"{name}: no source".encode())
    return digest.digest()


def verdict_key(raw: bytes) -> str:
    """The key of a store file's verdicts: the digest of its bytes and of the checks."""
    digest = hashlib.sha256(_checks_digest())
    digest.update(raw)
    return digest.hexdigest()


def _with_stored_devices(record: dict[str, Any], stored: dict[str, Any] | None) -> dict[str, Any]:
    """``record`` keeping the devices' timings that the file holds and it lacks, or holds newer
    (another build sharing the store wrote them since this one read the file)."""
    theirs = (stored or {}).get("devices")
    if not isinstance(theirs, dict) or "devices" not in record:
        return record
    devices = dict(record["devices"])
    for name, timings in theirs.items():
        if name not in devices or str(timings.get("date", "")) > str(devices[name].get("date", "")):
            devices[name] = timings
    return {**record, "devices": devices}


def _read_bytes(path: Path) -> bytes:
    """The bytes of the store file ``path``; anything but a regular file (a FIFO someone committed
    or made, a device, a folder) is an :class:`OSError`, never a read that blocks the build."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with open(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError("not a regular file")
        return handle.read()


def _read(path: Path) -> str:
    return _read_bytes(path).decode("utf-8")


def _empty(docname: str) -> dict[str, Any]:
    return {"format": FORMAT, "page": docname, "sessions": {}}


def _foreign(path: Path) -> bool:
    """Whether ``path`` holds JSON that is no livecells store file (a ``package.json`` in a
    store folder given wrong), which ``clear`` must not delete. A damaged file is the store's."""
    try:
        data = json.loads(_read(path))
    except (OSError, ValueError, RecursionError):
        return False
    return not (isinstance(data, dict) and isinstance(data.get("sessions"), dict) and "format" in data)


def _is_newer(path: Path) -> bool:
    try:
        version = json.loads(_read(path)).get("format")
    except (OSError, ValueError, AttributeError, RecursionError):
        return False
    return type(version) is int and version > FORMAT
