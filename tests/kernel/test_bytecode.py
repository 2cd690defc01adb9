"""kernel_side/bytecode.py: a book's module saved again within one second, at the same size, is
imported as saved, not from the cache Python wrote of its earlier version; in Pythons of their
own (the hook as a kernel loads it), in this process with the loader alone, and in real kernels,
plain and forked (tests/kernel/test_forkserver.py has the template's case)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from livecells.execute.kernels.session import KernelSession
from livecells.kernel_side import bytecode
from livecells.model.frameworks import FrameworkSpec

import timing

#: A whole second long ago, and two times within it: the two saves of one second.
SECOND_NS = 1_700_000_000 * 10**9
FIRST, SECOND = SECOND_NS + 100_000_000, SECOND_NS + 600_000_000

#: Run by a Python of its own: install the hook (or not), import ``saved``, print what it says.
PROGRAM = textwrap.dedent("""\
    import importlib.util, json, sys
    guarded, installed = json.loads(sys.argv[1]), json.loads(sys.argv[2])
    if guarded:
        spec = importlib.util.spec_from_file_location("_livecells_bytecode", {path!r})
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        module.install(installed)
    import saved
    print(json.dumps([saved.VERSION, type(saved.__loader__).__name__]))
""").format(path=bytecode.__file__)


def save(module: Path, version: int, mtime_ns: int) -> None:
    """Write ``module`` (always the same size) and give it the modification time ``mtime_ns``."""
    module.write_text(f"VERSION = {version}\n")
    os.utime(module, ns=(mtime_ns, mtime_ns))


def imported(folder: Path, guarded: bool, installed: list[str] = ()) -> list:
    """What ``saved`` says in a new Python with ``folder`` on its path (bytecode written)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    env["PYTHONPATH"] = str(folder)
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, json.dumps(guarded), json.dumps(list(installed))],
        env=env, capture_output=True, text=True, timeout=timing.PYTHON_CHECK, check=True,
    )
    return json.loads(done.stdout)


def cached(folder: Path) -> Path:
    [found] = (folder / "__pycache__").glob("saved.*.pyc")
    return found


@pytest.mark.process
def test_a_module_saved_again_within_its_second_is_imported_as_saved(tmp_path: Path) -> None:
    """Python alone imports the first save's cache (the hazard is real on this Python); with the
    hook, the second save is imported, and its cache rewritten and then used."""
    for guarded, folder in ((False, tmp_path / "plain"), (True, tmp_path / "guarded")):
        folder.mkdir()
        save(folder / "saved.py", 1, FIRST)
        assert imported(folder, guarded)[0] == 1
        save(folder / "saved.py", 2, SECOND)
        assert imported(folder, guarded)[0] == (2 if guarded else 1)
    rewritten = cached(tmp_path / "guarded").stat().st_mtime_ns
    assert imported(tmp_path / "guarded", True) == [2, "FreshSourceLoader"]
    assert cached(tmp_path / "guarded").stat().st_mtime_ns == rewritten  # read, not written again


@pytest.mark.process
def test_a_cache_written_after_its_source_changed_is_used(tmp_path: Path) -> None:
    """An unchanged module's cache is read as Python reads it: its content, not the source's."""
    save(tmp_path / "saved.py", 1, FIRST)
    assert imported(tmp_path, True)[0] == 1
    pyc = cached(tmp_path)
    written = pyc.stat().st_mtime_ns
    assert imported(tmp_path, True)[0] == 1 and pyc.stat().st_mtime_ns == written


@pytest.mark.process
def test_the_installed_folders_keep_pythons_own_loader_and_rule(tmp_path: Path) -> None:
    """A folder among the installed ones is Python's: its loader, its whole-second rule (their
    files and caches may share one time stamp, and an install changes the fingerprint)."""
    save(tmp_path / "saved.py", 1, FIRST)
    assert imported(tmp_path, True, [str(tmp_path)]) == [1, "SourceFileLoader"]
    save(tmp_path / "saved.py", 2, SECOND)
    assert imported(tmp_path, True, [str(tmp_path)]) == [1, "SourceFileLoader"]


def test_a_cache_written_while_its_source_changed_is_removed(tmp_path: Path) -> None:
    """The loader keeps no cache compiled from a source that changed between Python's look at it
    and the cache's write (what it compiled may be the old text): replaced, or written at another
    size (a same-size write within one tick of the clock keeps every stamp, see the module); one
    of an unchanged source stays."""
    source, pyc = tmp_path / "saved.py", tmp_path / "saved.pyc"
    save(source, 1, FIRST)
    loader = bytecode.FreshSourceLoader("saved", str(source))
    loader.path_stats(str(source))
    loader.set_data(str(pyc), b"kept")
    assert pyc.read_bytes() == b"kept"
    for version, write in ((2, "replaced"), (30, "longer")):
        loader.path_stats(str(source))
        if write == "replaced":  # as an editor saves: a new file renamed over it, the same size
            (tmp_path / "new.py").write_text(f"VERSION = {version}\n")
            os.replace(tmp_path / "new.py", source)
        else:
            save(source, version, SECOND)
        loader.set_data(str(pyc), b"compiled from the version before")  # as Python compiles
        assert not pyc.exists(), write


def test_a_cache_is_refused_unless_written_after_its_source_changed(tmp_path: Path) -> None:
    source, pyc = tmp_path / "saved.py", tmp_path / "saved.pyc"
    pyc.write_bytes(b"cache")
    save(source, 1, FIRST)  # an old modification time, set now: the change is now (st_ctime)
    assert not bytecode.written_after(str(pyc), str(source))
    os.utime(pyc, ns=(source.stat().st_ctime_ns + 1,) * 2)
    assert bytecode.written_after(str(pyc), str(source))
    assert not bytecode.written_after(str(tmp_path / "missing.pyc"), str(source))
    loader = bytecode.FreshSourceLoader("saved", str(source))
    assert loader.get_data(str(pyc)) == b"cache" and loader.get_data(str(source)) == b"VERSION = 1\n"
    os.utime(pyc, ns=(source.stat().st_ctime_ns,) * 2)  # within one tick of the clock: refused
    with pytest.raises(OSError, match="not written after"):
        loader.get_data(str(pyc))


def test_install_answers_for_the_book_once_and_forgets_the_finders_made_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Installed in this process (as in a kernel whose startup already looked in the book's
    folders): the book's folder is found again by the hook, an installed one still by Python's,
    a second install changes nothing; what it put in place is taken out after."""
    installed = tmp_path / "installed"
    installed.mkdir()
    monkeypatch.setattr(sys, "path_hooks", list(sys.path_hooks))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    for folder in (tmp_path, installed):
        sys.path_importer_cache[str(folder)] = bytecode.FileFinder(str(folder))
    assert bytecode.install([str(installed)]) is True
    assert bytecode.install([str(installed)]) is False
    assert [getattr(h, bytecode.MARK, False) for h in sys.path_hooks].count(True) == 1
    assert str(tmp_path) not in sys.path_importer_cache and str(installed) in sys.path_importer_cache
    book = sys.path_hooks[0](str(tmp_path))
    (tmp_path / "livecells_test_book_module.py").write_text("")
    spec = book.find_spec("livecells_test_book_module")
    assert isinstance(spec.loader, bytecode.FreshSourceLoader)
    with pytest.raises(ImportError):
        sys.path_hooks[0](str(installed))
    with pytest.raises(ImportError):
        sys.path_hooks[0](str(tmp_path / "livecells_test_book_module.py"))  # a file: zipimport's


@pytest.mark.kernel
def test_a_kernel_imports_a_preload_saved_again_within_its_second_as_saved(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A plain kernel (no fork server) that imports a helper beside the book as its preload, and
    a cell that imports one: after both are saved again within the second their caches were
    written from, at the same size, the next kernel runs the new code."""
    helpers = tmp_path / "helpers"
    helpers.mkdir()
    for name in ("livecells_test_preloaded", "livecells_test_imported"):
        save(helpers / f"{name}.py", 1, FIRST)
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(helpers), os.environ.get("PYTHONPATH")])))
    spec = FrameworkSpec(name="saved", label="Saved", preload=("livecells_test_preloaded",))
    ask = "import livecells_test_preloaded as p, livecells_test_imported as i; print(p.VERSION, i.VERSION)"

    async def session() -> str:
        async with KernelSession(spec, cwd=tmp_path) as kernel:
            result = await kernel.run_cell(ask, timing.CELL)
            return "".join(o.get("text", "") for o in result.outputs)

    assert asyncio.run(session()) == "1 1\n"
    assert len(list((helpers / "__pycache__").glob("*.pyc"))) == 2  # the first save's caches
    for name in ("livecells_test_preloaded", "livecells_test_imported"):
        save(helpers / f"{name}.py", 2, SECOND)
    assert asyncio.run(session()) == "2 2\n"
