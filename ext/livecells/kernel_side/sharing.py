"""Template side: what a fork-server template may share with its kernels, and how it knows.

A template imports a framework once so that its kernels need not (see :mod:`.template`). Only
what changes nothing a cell can see is shared: :func:`probe_imports` and :func:`shared_roots` find,
in a forked probe, the modules that ask for IPython's shell as they are imported (those, and what
imports them, are left to each kernel); :func:`captured` and :func:`stash_output` keep what the
shared imports print for the kernel's first cell; :func:`imported_files` records the files the
imports read outside the interpreter's own folders, so that a launcher never forks old code
(:func:`file_state`, read by :mod:`livecells.execute.forkserver.server` too);
:func:`cuda_touched` refuses a template that
met CUDA, whose state does not survive a fork.

It runs in the kernel's own Python, loaded by path beside ``template.py``: standard library only.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import site
import sys
import sysconfig
import traceback
from collections.abc import Mapping
from typing import Any

#: Where the template leaves what its imports printed, for the kernel's first cell (hook.install).
PRELOAD_OUTPUT = "_livecells_preload_output"


def probe_imports(preload: list[str]) -> dict[str, Any]:
    """Import ``preload`` here, recording each new module's importer and which modules ask for
    IPython's shell while they are being imported (they and their importers: unsafe)."""
    before = set(sys.modules)
    parent: dict[str, str | None] = {}
    unsafe: dict[str, str] = {}  # module -> the module whose body asks for the shell

    def importing(frame: Any) -> list[str]:
        """The new modules whose bodies run on this stack, innermost first."""
        names = []
        while frame is not None:
            name = frame.f_globals.get("__name__")
            if frame.f_code.co_name == "<module>" and name in parent:
                names.append(name)
            frame = frame.f_back
        return names

    class Tracer:
        @staticmethod
        def find_spec(name: str, path: Any = None, target: Any = None) -> None:
            outer = importing(sys._getframe(1))
            parent.setdefault(name, outer[0] if outer else None)
            return None

    def traced(original: Any) -> Any:
        def asks_for_the_shell(*args: Any, **kwargs: Any) -> Any:
            outer = importing(sys._getframe(1))
            for name in outer:
                unsafe.setdefault(name, outer[0])  # the module that calls it
            return original(*args, **kwargs)

        return asks_for_the_shell

    # How code finds IPython's shell: get_ipython(), or the shell class's singleton methods
    # (IPython.display.display asks InteractiveShell.initialized()).
    for module in ("IPython", "IPython.core.getipython"):
        if hasattr(sys.modules.get(module), "get_ipython"):
            setattr(sys.modules[module], "get_ipython", traced(sys.modules[module].get_ipython))
    shell = getattr(sys.modules.get("IPython.core.interactiveshell"), "InteractiveShell", None)
    for method in ("initialized", "instance") if shell is not None else ():
        setattr(shell, method, traced(getattr(shell, method)))
    sys.meta_path.insert(0, Tracer)  # type: ignore[arg-type]
    error = None
    try:
        for name in preload:
            importlib.import_module(name)
    except BaseException:  # noqa: BLE001 - the template's own import says it again
        error = traceback.format_exc(limit=-3)
    order = [name for name in sys.modules if name not in before and name in parent]
    # With what the answer rests on, for a cache of it (see cached_probe).
    rests_on = installed_state({n: m for n, m in sys.modules.items() if n not in before})
    return {"order": order, "parent": parent, "unsafe": unsafe, "error": error, **rests_on}


def probe_identity(preload: list[str]) -> dict[str, Any]:
    """What else a probe's answer depends on: the preload, this interpreter, its environment
    and where it looks for modules (``sys.path``): not the book, so that one user's books and
    checkouts share the answers (see ``pipeline/processes.probe_folder``)."""
    environ = hashlib.sha256(json.dumps(sorted(os.environ.items())).encode()).hexdigest()
    return {"preload": list(preload), "python": [sys.executable, sys.version], "environ": environ,
            "path": list(sys.path)}


def cached_probe(path: str, preload: list[str]) -> dict[str, Any] | None:
    """The probe's answer kept at ``path`` by an earlier template, if nothing it rests on has
    changed since (the same preload, interpreter and environment; every file the probe imported
    and every installed folder as it was); else None. It saves a template a second import of
    its framework, in a child, on every build."""
    try:
        with open(path, encoding="utf-8") as handle:
            kept = json.load(handle)
        found = kept["found"]
        if kept["identity"] != probe_identity(preload) or found["folders"] != folder_states():
            return None
        for file, state in found["files"].items():
            if file_state(os.stat(file)) != state:
                return None
        shapes = {"order": list, "parent": dict, "unsafe": dict, "error": (str, type(None))}
        if not all(key in found and isinstance(found[key], shape) for key, shape in shapes.items()):
            return None  # another livecells version's answer, or not an answer
        return found
    except (OSError, ValueError, KeyError, TypeError):
        return None


def keep_probe(path: str, preload: list[str], found: Mapping[str, Any]) -> None:
    """Keep the probe's answer at ``path`` for later templates (written whole, or not at all)."""
    temporary = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(temporary, "w", encoding="utf-8") as handle:
            json.dump({"identity": probe_identity(preload), "found": found}, handle)
        os.replace(temporary, path)
    except OSError:
        try:
            os.unlink(temporary)
        except OSError:
            pass


def shared_roots(
    order: list[str], parent: Mapping[str, str | None], unsafe: Mapping[str, str], preload: list[str]
) -> tuple[list[str], dict[str, str]]:
    """The modules the template imports (each safe module whose importer is not imported with
    it, in import order) and the preloads left to the kernel, with why."""
    def clean(name: str) -> bool:  # neither it nor a package above it is unsafe
        parts = name.split(".")
        return not any(".".join(parts[:i]) in unsafe for i in range(1, len(parts) + 1))

    roots = [
        name for name in order
        if clean(name) and (parent.get(name) is None or not clean(parent[name]) or parent[name] not in order)
    ]
    left = {
        name: f"{unsafe[name]}{'' if unsafe[name] == name else ', which it imports,'} asks for "
        "IPython's shell (get_ipython()) as it is imported"
        for name in preload if name in unsafe
    }
    return roots, left


def unshared_imported(imported: set[str], left: Mapping[str, str]) -> str | None:
    """Why the template may not serve: importing the shareable modules here imported a preload
    left to the kernels after all (the probe saw another order)."""
    if any(name in imported for name in left):
        return f"importing the preloads' shareable modules imported {sorted(n for n in left if n in imported)}"
    return None


class captured:  # noqa: N801 - used as a function, in a with statement
    """What is written to fds 1 and 2 (by Python or by C) while the block runs: a list of
    ``[stream name, text]``, filled when it ends."""

    def __enter__(self) -> list[list[str]]:
        import tempfile

        sys.stdout.flush()
        sys.stderr.flush()
        self.files = [tempfile.TemporaryFile(), tempfile.TemporaryFile()]
        self.saved = [os.dup(1), os.dup(2)]
        for fd, file in zip((1, 2), self.files):
            os.dup2(file.fileno(), fd)
        self.output: list[list[str]] = []
        return self.output

    def __exit__(self, *exc_info: object) -> None:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, saved, file, name in zip((1, 2), self.saved, self.files, ("stdout", "stderr")):
            os.dup2(saved, fd)
            os.close(saved)
            file.seek(0)
            text = file.read().decode(errors="replace")
            file.close()
            if text:
                self.output.append([name, text])


def stash_output(output: list[list[str]]) -> None:
    """Leave what the shared imports printed where the kernel's hook finds it (and the log)."""
    import types

    for _, text in output:
        os.write(2, text.encode(errors="replace"))
    if output:
        stash = types.ModuleType(PRELOAD_OUTPUT)
        stash.output = output  # type: ignore[attr-defined]
        sys.modules[PRELOAD_OUTPUT] = stash


def installed_folders() -> list[str]:
    """This interpreter's own folders (the standard library, site-packages): what changes there
    comes with an install, which the environment's fingerprint sees."""
    paths = sysconfig.get_paths()
    folders = {paths.get(name) for name in ("stdlib", "platstdlib", "purelib", "platlib")}
    folders.update(getattr(site, "getsitepackages", list)())  # absent in old virtualenvs
    if site.ENABLE_USER_SITE:
        folders.add(site.getusersitepackages())
    return sorted(os.path.realpath(folder) for folder in folders if folder)


def imported_files(modules: Mapping[str, Any], installed: list[str]) -> dict[str, list[int]]:
    """The files of the imported ``modules`` outside the ``installed`` folders (a book's helper
    package, an editable install, a module on ``PYTHONPATH``), each with what a change alters:
    ``[mtime_ns, ctime_ns, size, inode]``."""
    roots = tuple(os.path.join(folder, "") for folder in installed)
    found: dict[str, list[int]] = {}
    for module in list(modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or path in found or os.path.realpath(path).startswith(roots):
            continue
        try:
            found[path] = file_state(os.stat(path))
        except OSError:
            continue
    return found


def installed_state(modules: Mapping[str, Any]) -> dict[str, dict[str, list[int]]]:
    """What a template kept warm for later builds rests on besides :func:`imported_files`: every
    imported file in the installed folders too, and those folders themselves (an install or an
    uninstall changes a folder), each as :func:`file_state` reads it."""
    return {"files": imported_files(modules, []), "folders": folder_states()}


def folder_states() -> dict[str, list[int]]:
    """The interpreter's installed folders, each as :func:`file_state` reads it."""
    folders = {}
    for folder in installed_folders():
        try:
            folders[folder] = file_state(os.stat(folder))
        except OSError:
            continue
    return folders


def file_state(stat: os.stat_result) -> list[int]:
    """What changes when a file is written or replaced: ``[mtime_ns, ctime_ns, size, inode]``."""
    return [stat.st_mtime_ns, stat.st_ctime_ns, stat.st_size, stat.st_ino]


def cuda_touched() -> str | None:
    """Why the template may not fork (CUDA state does not survive a fork), or None."""

    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_initialized():
        return "the preload initialised CUDA (torch.cuda.is_initialized())"
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}").startswith("/dev/nvidia"):
                return "the preload opened a GPU device (CUDA initialised)"
        except OSError:
            continue
    return None
