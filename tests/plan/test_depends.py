"""Bounded work (issue 23, class 4): walks that links cannot make endless, and a build's memory
that no output of a cell can blow up."""

from __future__ import annotations

import glob
import os
from pathlib import Path

import pytest

from livecells.plan import keys
from livecells.plan.keys import files_digest, glob_files

from helpers import FakeKernels, build_site

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


@pytest.mark.timeout(60)
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


@pytest.mark.timeout(120)
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


# --- Memory: no output of a cell reaches the build whole -------------------------------------

FLOODS = {
    "stream": "import sys; sys.stdout.write('x' * (64 << 20))",
    "stream from C": "import os; os.write(1, b'y' * (64 << 20))",
    "display": "from IPython.display import display; display({'text/html': 'x' * (64 << 20)}, raw=True)",
    "result": "class Big:\n    def _repr_html_(self):\n        return 'x' * (64 << 20)\nBig()",
    "error": "raise ValueError('x' * (64 << 20))",
    "many": "for i in range(400_000):\n    print(i)",
    "displays": "from IPython.display import display\nfor i in range(10_050):\n    display(i)",
    "comm": "from comm import create_comm\nc = create_comm(target_name='t', data={'x': 'x' * (64 << 20)})",
    "metadata": "from IPython.display import display\ndisplay({'text/plain': 'm'}, metadata={'x': 'x' * (64 << 20)}, raw=True)",
    "payload": "get_ipython().set_next_input('x' * (64 << 20))",
}


@pytest.mark.kernel
@pytest.mark.timeout(300)
def test_no_output_reaches_the_build_whole(tmp_path):
    import asyncio
    import tracemalloc

    from livecells.execute.kernels.session import KernelSession
    from livecells.kernel_side import budget
    from livecells.model.frameworks import FrameworkSpec

    spec = FrameworkSpec(name="alpha", label="Alpha")

    async def session() -> dict:
        found = {}
        async with KernelSession(spec, cwd=tmp_path, output_limit=1000) as kernel:
            for name, code in FLOODS.items():
                tracemalloc.start()
                found[name] = await kernel.run_cell(code, 120)
                found[name + " peak"] = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            found["after"] = await kernel.run_cell("print('still here')", 30)
        return found

    found = asyncio.run(session())
    for name in FLOODS:  # the build's Python objects at their peak: well under one flood's size
        assert found[f"{name} peak"] < 64 << 20, (name, found[f"{name} peak"] >> 20)
    for name in ["stream", "stream from C", "many"]:
        out = found[name].outputs[0]
        assert len(out["text"]) == 1000 and out["truncated"], name
    (shown,) = found["display"].outputs
    assert shown["data"] == {"text/plain": f"[livecells: a text/html output of {64 << 20:,} characters was not sent: the limit is {budget.VALUE_CAP:,}]"}
    assert "text/html" not in found["result"].outputs[0]["data"]
    error = found["error"].error
    assert error["ename"] == "ValueError" and len(error["evalue"]) < budget.STREAM_MIN + 100
    assert "more characters were not sent" in error["evalue"]
    assert len(found["displays"].outputs) == 501  # the collector's 500, and its note
    for name, what in [("comm", "comm_open"), ("metadata", "display_data")]:
        (note,) = found[name].outputs
        assert note["name"] == "stderr" and f"a {what} message of 67,1" in note["text"], name
    assert found["payload"].outputs[0]["text"].startswith("[livecells: a payload of 67,1")
    assert found["after"].outputs[0]["text"] == "still here\n"
