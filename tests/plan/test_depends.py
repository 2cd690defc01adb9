"""The files a session depends on (``:depends:``, ``livecells_depends``; :mod:`livecells.plan.keys`).

Walks that links cannot make endless (issue 23, class 4: a ``**`` pattern over linked folders
ends, and is cut with a located warning past its cap); files read in chunks and once while
unchanged, and every page run again when a book-wide dependency changes (issue 12, class 7).
The bounded memory of the other half of issue 23's class 4 is kernel/test_output_bounds.py's."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from livecells.plan import keys
from livecells.plan.keys import files_digest, glob_files

import timing
from helpers import FakeKernels, build_site, live_cell, procs_site

PATTERNS = [
    "**", "**/*.py", "*/*.py", "a/**/*.py", "**/b/*.py", "**/.h.py", "**/*", "a/**", "*.txt",
    "**/b/**/*.txt", "nothing/**/*.py", ".git/**", "a/*/c/*",
]


def tree(root: Path) -> Path:
    for name in ["a/x.py", "a/b/y.py", "a/b/c/z.txt", "a/.hid/w.py", ".h.py", "t.txt", ".git/c.py",
                 "a/b/c/d.py", "e/f/g/h.txt"]:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(name)
    return root


def test_depends_globs_match_as_glob_does_on_a_tree_without_links(tmp_path):
    root = tree(tmp_path)
    for pattern in PATTERNS:
        expected = sorted(m for m in glob.glob(str(root / pattern), recursive=True) if os.path.isfile(m))
        assert glob_files(str(root), pattern) == (expected, False), pattern


@pytest.mark.timeout(timing.ENDLESS_WALK)
def test_links_back_up_the_tree_end_the_walk(tmp_path):
    # Two links back to the folder: glob.glob(recursive=True) walks 2^depth paths, never ending.
    root = tree(tmp_path / "src")
    os.symlink("..", root / "a" / "up")
    os.symlink("../..", root / "a" / "b" / "top")
    os.symlink(str(tmp_path / "elsewhere"), root / "out")  # a folder outside, found through a link
    tree(tmp_path / "elsewhere")
    files, cut = glob_files(str(root), "**/*.py")
    assert not cut
    visible = ["a/x.py", "a/b/y.py", "a/b/c/d.py"]  # not .h.py, a/.hid/w.py, .git/c.py
    expected = {str((base / name).resolve()) for base in (root, tmp_path / "elsewhere") for name in visible}
    assert {os.path.realpath(f) for f in files} == expected
    assert len(files) == len(expected)  # each file once, by its real path first


@pytest.mark.timeout(timing.LINKED_BUILD)
def test_a_build_with_linked_folders_in_a_depends_glob_ends_and_sees_changes(tmp_path, rootdir):
    src = tmp_path / "src"
    (src / "data" / "sub").mkdir(parents=True)
    for target, name in [("..", "up"), ("../..", "top")]:
        os.symlink(target, src / "data" / "sub" / name)
    (src / "data" / "sub" / "x.txt").write_text("1")
    index = "index\n=====\n\n.. live-settings::\n   :depends: data/**/*.txt\n\n.. live-cell:: alpha\n\n   print(1)\n"
    conf = "extensions = ['livecells']\nlivecells_frameworks = {'alpha': {'kernel': 'python3'}}\n"
    # Sphinx itself walks the source folder following links: the linked folder is excluded.
    (src / "conf.py").write_text(conf + "livecells_depends = ['**/*.txt']\nexclude_patterns = ['data']\n")
    (src / "index.rst").write_text(index)
    kernels = FakeKernels()
    app, warnings = build_site(src, kernels=kernels)
    assert "depends" not in warnings and kernels.take() == [("index", "alpha")]
    (src / "data" / "sub" / "x.txt").write_text("2")
    app, warnings = build_site(src, kernels=kernels)
    assert kernels.take() == [("index", "alpha")]  # the change was seen: the page ran again


def test_a_walk_over_the_cap_is_cut_with_a_located_warning(tmp_path, rootdir, monkeypatch):
    monkeypatch.setattr(keys, "MAX_FOLDERS", 3)
    root = tree(tmp_path / "t")
    digest, problems = files_digest(str(root), ["**/*.py", "*.txt"])
    assert problems == ["'**/*.py' was cut short: a '**' walks at most 3 folders and 200,000 entries"]
    src = tmp_path / "src"
    tree(src / "data")
    (src / "conf.py").write_text("extensions = ['livecells']\nlivecells_frameworks = {'alpha': {'kernel': 'python3'}}\n")
    (src / "index.rst").write_text(
        "index\n=====\n\n.. live-settings::\n   :depends: data/**/*.py\n\n.. live-cell:: alpha\n\n   print(1)\n"
    )
    _, warnings = build_site(src, kernels=FakeKernels())
    assert "index.rst: WARNING: live-settings :depends: 'data/**/*.py' was cut short" in warnings


# --- Dependency files: read in chunks, once while unchanged (issue 12, class 7) --------------


def test_dependency_files_are_hashed_in_chunks_and_once_while_unchanged(tmp_path, monkeypatch):
    import builtins
    import tracemalloc

    from livecells.plan.keys import file_digest

    big = tmp_path / "big.bin"
    with open(big, "wb") as handle:  # 64 MB, sparse: cheap to make, read as zeros; 8 times the bound
        handle.truncate(64 << 20)
    hashes: dict = {}
    tracemalloc.start()
    first = file_digest(str(big), hashes)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 8 << 20, peak  # never the whole file in memory
    with monkeypatch.context() as patched:
        patched.setattr(builtins, "open", lambda *a, **k: pytest.fail("read again"))
        assert file_digest(str(big), hashes) == first  # unchanged: not read
    assert file_digest(str(big)) == first  # a fresh clone (no cache) reads it and agrees
    # Same size, and the old mtime put back: the change is still seen (ctime, and the cache key).
    stat = big.stat()
    with open(big, "r+b") as handle:
        handle.write(b"x")
    os.utime(big, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_digest(str(big), hashes) != first


BOOK_CONF = '\nlivecells_depends = ["d2l/*.py", "nothing/*.txt"]\n'
# Per file: with the default ("definitions"), a page that imports none of them does not rerun
# (tests/plan/test_helper_deps.py).
FILES_CONF = '\nlivecells_depends_granularity = "files"\n'


@pytest.mark.slow
def test_livecells_depends_reruns_every_page_when_a_file_changes(tmp_path, rootdir):
    src = procs_site(
        tmp_path,
        rootdir,
        {"page1.rst": live_cell("print('one')"), "page2.rst": live_cell("print('two')")},
        conf=BOOK_CONF + FILES_CONF,
    )
    (src / "d2l").mkdir()
    (src / "d2l" / "torch.py").write_text("VERSION = 1\n")
    kernels = FakeKernels()  # what runs is the subject, not how
    every = [("index", "alpha"), ("page1", "alpha"), ("page2", "alpha")]
    app, warnings = build_site(src, kernels=kernels)
    assert app.env.livecells_outcome.ran == 3 and kernels.take() == every
    line = (src / "conf.py").read_text().splitlines().index(BOOK_CONF.strip()) + 1
    assert f"conf.py:{line}: WARNING: livecells_depends: 'nothing/*.txt' matches no file" in warnings
    app, _ = build_site(src, kernels=kernels)
    assert app.env.livecells_outcome.ran == 0 and kernels.take() == []  # unchanged: nothing runs
    (src / "d2l" / "torch.py").write_text("VERSION = 2\n")
    app, _ = build_site(src, kernels=kernels)
    assert kernels.take() == every  # every page
    app, _ = build_site(src, kernels=kernels)
    assert app.env.livecells_outcome.ran == 0 and kernels.take() == []
