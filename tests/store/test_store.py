"""The store: results kept per page, re-run only what changed, published without a GPU.

What runs, what is kept and what the pages show is policy: these builds run their sessions on
:class:`helpers.FakeKernels` (livecells' scheduler over in-process sessions), so each test can
say exactly which sessions ran. The first test runs the same site on real kernels and checks
that the fake gives what they give; the kernel's own behaviour is tested in test_core and others.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp

from livecells.errors import StoreError
from livecells.model.text import strip_ansi
from livecells.store.files import FORMAT, OutputStore

import timing
from helpers import (
    FakeKernels,
    build_site,
    cell_with,
    livecells_cli,
    meta,
    outputs,
    soup,
)

ALL = [("index", "alpha"), ("index", "beta"), ("other", "alpha"), ("other", "beta")]


def build(src: Path, kernels: FakeKernels | None, *, fresh: bool = False, **overrides):
    """Build ``src`` (on real kernels where ``kernels`` is None); the app's livecells state,
    the warnings and the app."""
    app, warnings = build_site(
        src, kernels=kernels, freshenv=fresh,
        confoverrides={f"livecells_{k}": v for k, v in overrides.items()},
    )
    return app.env.livecells_outcome, warnings, app


@pytest.fixture
def fake() -> FakeKernels:
    return FakeKernels()


@pytest.fixture
def site(tmp_path, rootdir):
    src = tmp_path / "site"
    shutil.copytree(rootdir / "test-store", src)
    return src


@pytest.fixture(scope="module")
def built_once(tmp_path_factory, rootdir) -> Path:
    """The test-store site after one build on fake kernels (every session ran and is stored)."""
    src = tmp_path_factory.mktemp("built") / "site"
    shutil.copytree(rootdir / "test-store", src)
    kernels = FakeKernels()
    state, warnings, _ = build(src, kernels)
    assert (state.ran, state.cached) == (4, 0) and kernels.take() == ALL, warnings
    return src


@pytest.fixture
def built(built_once, tmp_path) -> Path:
    """A copy of :func:`built_once` as it is published: the sources and the store, no _build (so
    every test starts from the same store, and its builds are its own)."""
    src = tmp_path / "site"
    shutil.copytree(built_once, src, ignore=shutil.ignore_patterns("_build"))
    return src


def page(app, name="index"):
    return soup(app.outdir / f"{name}.html")


def stored(src: Path, docname: str) -> dict:
    return json.loads((src / "_livecells" / f"{docname}.json").read_text())


#: Cells of the kinds policy tests use, beyond print: a value, a display, stderr, an error.
MORE_CELLS = """
.. live-cell:: alpha

   import sys
   from IPython.display import HTML, Image, display
   print("to stderr", file=sys.stderr)
   display(HTML("<b>bold</b>"), Image(data=bytes.fromhex(
       "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
       "1f15c4890000000d4944415478da63f8ffff3f0005fe02fea7d6a4f50000000049454e44ae426082")))
   {"answer": 6 * 7, "list": list(range(3))}

.. live-cell:: alpha
   :raises: ValueError

   raise ValueError("expected")
"""


@pytest.mark.kernel
def test_fake_kernels_give_what_real_kernels_give(tmp_path, rootdir, no_kernel_left):
    """The same site on real kernels and on :class:`FakeKernels`: the same stored cells, pages."""
    built = {}
    for name, kernels in (("real", None), ("fake", FakeKernels())):
        src = tmp_path / name
        shutil.copytree(rootdir / "test-store", src)
        with open(src / "other.rst", "a") as other:
            other.write(MORE_CELLS)
        state, warnings, app = build(src, kernels)
        assert (state.ran, state.cached) == (4, 0) and "WARNING" not in warnings, warnings
        built[name] = src, app
    assert kernels.take() == ALL

    def cells(src: Path, docname: str) -> dict:
        sessions = stored(src, docname)["sessions"]
        keep = ("index", "code_sha", "status", "outputs", "execution_count")
        found = {fw: [{k: c.get(k) for k in keep} for c in s["cells"]] for fw, s in sessions.items()}
        for output in (o for cs in found.values() for c in cs for o in c["outputs"]):
            if output["output_type"] == "error":  # IPython's traceback is not the fake's
                output["traceback"] = strip_ansi("\n".join(output["traceback"])).strip().splitlines()[-1:]
        return found

    (real, real_app), (fake_src, fake_app) = built["real"], built["fake"]
    for docname in ("index", "other"):
        assert cells(real, docname) == cells(fake_src, docname)
        for fw, session in stored(real, docname)["sessions"].items():
            other = stored(fake_src, docname)["sessions"][fw]
            assert (session["key"], session["environment"]) == (other["key"], other["environment"])
            assert set(session) == set(other) and set(session["provenance"]) == set(other["provenance"])
        shown = [page(app, docname).select(".livecells-output") for app in (real_app, fake_app)]
        assert len(shown[0]) == len(shown[1])
        for one, two in zip(*shown):
            if "Traceback" in one.get_text():  # only the traceback's last line is the fake's
                assert one.get_text().strip().splitlines()[-1] == two.get_text().strip().splitlines()[-1]
            else:
                assert str(one) == str(two)

    # An edit re-runs that session only, on real kernels as on fake ones.
    for src, kernels in ((real, None), (fake_src, kernels)):
        other = src / "other.rst"
        other.write_text(other.read_text().replace('print("other beta")', 'print("other beta, edited")'))
        state, _, app = build(src, kernels)
        assert (state.ran, state.cached) == (1, 3)
        assert "other beta, edited" in outputs(cell_with(page(app, "other"), "other beta"))
    assert kernels.take() == [("other", "beta")]


@pytest.mark.slow
def test_rebuilds_run_only_what_changed(site, fake):
    state, _, app = build(site, fake)
    assert (state.ran, state.cached) == (4, 0) and fake.take() == ALL
    assert "alpha reads first version" in outputs(cell_with(page(app), "alpha reads"))

    # -E re-reads every page but runs nothing: every key is in the store.
    state, _, app = build(site, fake, fresh=True)
    assert (state.ran, state.cached) == (0, 4) and fake.take() == []
    text = outputs(cell_with(page(app), "alpha reads"))
    assert "alpha reads first version" in text and "RECORDED-ALPHA" not in text

    # Prose-only edit: the page is re-read, nothing runs.
    index = site / "index.rst"
    index.write_text(index.read_text().replace("Store\n=====", "Store\n=====\n\nSome prose."))
    state, _, _ = build(site, fake)
    assert state.ran == 0 and fake.take() == []

    # Editing one cell re-runs that page's session for that framework only.
    other = site / "other.rst"
    other.write_text(other.read_text().replace('print("other beta")', 'print("other beta, edited")'))
    before = stored(site, "other")["sessions"]["alpha"]["run_id"]
    state, _, app = build(site, fake)
    assert state.ran == 1 and fake.take() == [("other", "beta")]
    sessions = stored(site, "other")["sessions"]
    assert sessions["alpha"]["run_id"] == before
    assert sessions["beta"]["run_id"] != before
    assert "other beta, edited" in outputs(cell_with(page(app, "other"), "other beta"))

    # A page removed from the book keeps its stored results (only ``clear`` deletes them): the
    # page may come back, on another branch, say.
    (site / "gone.rst").write_text("Gone\n====\n\n.. live-cell:: alpha\n\n   print('soon gone')\n")
    index.write_text(index.read_text().replace("   other\n", "   other\n   gone\n"))
    state, _, _ = build(site, fake)
    assert fake.take() == [("gone", "alpha")] and (site / "_livecells" / "gone.json").exists()
    kept = (site / "_livecells" / "gone.json").read_bytes()
    (site / "gone.rst").unlink()
    index.write_text(index.read_text().replace("   gone\n", ""))
    build(site, fake)
    assert (site / "_livecells" / "gone.json").read_bytes() == kept and fake.take() == []

    # Changing a :depends: file re-reads and re-runs that page, though its source is unchanged.
    (site / "data" / "input.txt").write_text("second version\n")
    state, _, app = build(site, fake)
    assert fake.take() == [("index", "alpha"), ("index", "beta")]  # they share the page's :depends:
    assert "alpha reads second version" in outputs(cell_with(page(app), "alpha reads"))


def test_each_pages_keys_are_computed_once_a_build_and_again_for_a_new_plan(built, fake, monkeypatch):
    """env-get-outdated and env-updated share a page's keys while its plan is the same; a page
    read again (a new plan) gets keys of its own, and a :depends: edit still re-runs its page."""
    from livecells.pipeline import run as run_module

    made: list[str] = []
    real = run_module.session_keys

    def counted(page, *args):
        made.append(page.docname)
        return real(page, *args)

    monkeypatch.setattr(run_module, "session_keys", counted)
    build(built, fake)  # published: the doctrees are new, every page is read
    assert sorted(made) == ["index", "other"] and fake.take() == []
    made.clear()
    state, _, _ = build(built, fake)  # a no-op
    assert sorted(made) == ["index", "other"] and state.cached == 4
    made.clear()
    (built / "data" / "input.txt").write_text("second version\n")
    state, _, _ = build(built, fake)
    # index: once for env-get-outdated (outdated by its :depends:), once for its new plan.
    assert sorted(made) == ["index", "index", "other"], made
    assert fake.take() == [("index", "alpha"), ("index", "beta")]


def test_gpu_required_on_a_cpu_machine_shows_stored_results(built, fake):
    state, warnings, app = build(built, fake, device="gpu")  # the store, published
    assert state.ran == 0 and fake.take() == []
    cell = cell_with(page(app), "alpha reads")
    assert "alpha reads first version" in outputs(cell)
    line = " ".join(meta(cell))
    assert "stored result from" in line
    assert "livecells" not in warnings


def test_auto_keeps_a_stored_gpu_result_on_a_cpu_machine(built, fake):
    site = built
    path = site / "_livecells" / "index.json"
    data = json.loads(path.read_text())
    for session in data["sessions"].values():
        session["provenance"].update(devices_leased=1, device="NVIDIA H200", device_kind="gpu")
        session["environment"] = "a-gpu-machine-with-other-versions"
    path.write_text(json.dumps(data))
    # A library upgrade re-runs a CPU result...
    other = site / "_livecells" / "other.json"
    data = json.loads(other.read_text())
    data["sessions"]["alpha"]["environment"] = "an-older-torch"
    other.write_text(json.dumps(data))
    state, _, app = build(site, fake, fresh=True)
    assert fake.take() == [("other", "alpha")]
    # ...but never replaces a GPU result by a CPU run while the code is the same.
    assert stored(site, "index")["sessions"]["alpha"]["provenance"]["device"] == "NVIDIA H200"
    cell = cell_with(page(app), "alpha reads")
    assert "NVIDIA H200" in " ".join(meta(cell))
    assert "stored result from" in " ".join(meta(cell))


def test_sessions_lease_the_gpus_found_and_a_page_asking_for_more_is_not_run(site, fake, monkeypatch):
    from livecells.execute.devices import GPU
    from livecells.pipeline import run

    gpus = [GPU(index=0, name="Fake GPU A"), GPU(index=1, name="Fake GPU B")]
    monkeypatch.setattr(run, "detect_gpus", lambda: gpus)
    other = site / "other.rst"
    other.write_text(other.read_text().replace("=====\n", "=====\n\n.. live-settings::\n   :gpus: 3\n", 1))
    state, warnings, app = build(site, fake)
    assert fake.take() == [("index", "alpha"), ("index", "beta")]
    assert re.search(r"other\.rst:\d+: WARNING: .*needs 3 GPU\(s\).*2 are available.*\[livecells\.device\]", warnings), warnings
    for session in stored(site, "index")["sessions"].values():
        provenance = session["provenance"]
        assert provenance["device_kind"] == "gpu" and provenance["devices_leased"] == 1
        assert provenance["device"] in {"Fake GPU A", "Fake GPU B"}
    assert not (site / "_livecells" / "other.json").exists()
    assert "Fake GPU" in " ".join(meta(cell_with(page(app), "alpha reads")))
    # On a machine without GPUs, auto keeps the GPU results: the code did not change.
    monkeypatch.setattr(run, "detect_gpus", lambda: [])
    state, warnings, _ = build(site, fake, fresh=True)
    assert fake.take() == [] and state.cached == 2  # other still asks for 3 GPUs: 0 are here
    assert "needs 3 GPU(s) (live-settings :gpus:) but 0 are available" in warnings
    assert stored(site, "index")["sessions"]["alpha"]["provenance"]["device_kind"] == "gpu"


def test_execute_off_shows_recorded_outputs(site, fake):
    state, _, app = build(site, fake, execute="off")
    assert state.ran == 0 and fake.take() == []
    cell = cell_with(page(app), "alpha reads")
    assert "RECORDED-ALPHA" in outputs(cell)
    assert any("recorded output" in line for line in meta(cell))
    assert not (site / "_livecells").exists()


@pytest.mark.slow
def test_cache_mode_never_runs(site, fake):
    state, _, app = build(site, fake, execute="cache")
    assert state.ran == 0 and fake.take() == []
    assert "RECORDED-BETA" in outputs(cell_with(page(app), "beta says"))
    build(site, fake)
    assert fake.take() == ALL
    state, _, app = build(site, fake, execute="cache", fresh=True)
    assert state.ran == 0 and fake.take() == []
    assert "beta says 42" in outputs(cell_with(page(app), "beta says"))


def test_force_runs_everything(built, fake):
    state, _, _ = build(built, fake, execute="force", fresh=True)
    assert state.ran == 4 and fake.take() == ALL


def test_a_damaged_store_file_is_reported_once_and_recomputed(built, fake):
    site = built
    path = site / "_livecells" / "index.json"
    path.write_text(path.read_text()[: len(path.read_text()) // 2])
    state, warnings, app = build(site, fake, fresh=True)
    assert warnings.count("[livecells.store]") == 1
    assert "): damaged (" in warnings or ".json: damaged" in warnings
    # The one store file a build overwrites without `clear`: said in the warning.
    assert "the file replaced when they are stored" in warnings
    assert state.ran == 2 and fake.take() == [("index", "alpha"), ("index", "beta")]
    assert "alpha reads first version" in outputs(cell_with(page(app), "alpha reads"))
    json.loads(path.read_text())


def test_a_newer_store_format_is_not_misread_nor_overwritten(built, fake):
    site = built
    path = site / "_livecells" / "other.json"
    data = json.loads(path.read_text())
    data["format"] = FORMAT + 1
    path.write_text(json.dumps(data))
    state, warnings, _ = build(site, fake, fresh=True)
    assert "newer than this livecells understands" in warnings
    assert json.loads(path.read_text())["format"] == FORMAT + 1


@pytest.mark.slow
def test_two_builds_sharing_one_store_lose_nothing(tmp_path, rootdir):
    store = tmp_path / "shared-store"
    sites = []
    for framework, other in (("alpha", "beta"), ("beta", "alpha")):
        src = tmp_path / f"site-{framework}"
        shutil.copytree(rootdir / "test-store", src)
        # Each copy has page "other" in one framework only, so both write the same store file.
        (src / "other.rst").write_text(
            f"Other\n=====\n\n.. live-cell:: {framework}\n\n   print('{framework} here')\n"
        )
        (src / "conf.py").write_text(
            (src / "conf.py").read_text() + f"\nlivecells_store = {str(store)!r}\n" + FakeKernels.CONF
        )
        sites.append(src)
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "sphinx", "-q", "-b", "html", str(src), str(src / "_build")],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for src in sites
    ]
    for proc in procs:
        out, _ = proc.communicate(timeout=timing.PROCESS)
        assert proc.returncode == 0, out.decode()
    data = json.loads((store / "other.json").read_text())
    assert set(data["sessions"]) == {"alpha", "beta"}
    assert data["sessions"]["alpha"]["provenance"]["kernelspec"]["display_name"].startswith("in-process")
    assert set(json.loads((store / "index.json").read_text())["sessions"]) == {"alpha", "beta"}


def test_a_build_killed_during_a_store_write_leaves_the_old_file(tmp_path):
    store = OutputStore(tmp_path / "store")
    store.save_session("page", "alpha", {"cells": [], "key": "old"})
    before = (tmp_path / "store" / "page.json").read_text()
    script = textwrap.dedent(
        f"""
        import os, signal
        from livecells.store.files import OutputStore
        os.fsync = lambda fd: os.kill(os.getpid(), signal.SIGKILL)  # die mid-write
        OutputStore({str(tmp_path / 'store')!r}).save_session("page", "alpha", {{"key": "new"}})
        """
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True)
    assert proc.returncode == -9
    assert (tmp_path / "store" / "page.json").read_text() == before
    assert store.pages() == ["page"]
    store.save_session("page", "beta", {"cells": [], "key": "b"})
    assert set(store.load("page")["sessions"]) == {"alpha", "beta"}


def test_store_problems_are_plain_exceptions(tmp_path):
    store = OutputStore(tmp_path)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(StoreError, match="damaged"):
        store.load("bad")
    (tmp_path / "list.json").write_text("[]")
    with pytest.raises(StoreError, match="not a livecells store file"):
        store.load("list")
    assert store.load("missing")["sessions"] == {}


def test_cli_report_and_clear(built, fake):
    site = built
    # The command run in this process (test_store_files spawns ``python -m livecells report``).
    report = livecells_cli("report", "-s", str(site))
    assert report.returncode == 0, report.stderr
    report = report.stdout
    assert "index" in report and "other" in report and "alpha" in report and "beta" in report
    assert "4 session(s)" in report
    listed = livecells_cli("report", "-s", str(site), "--json")
    assert listed.returncode == 0, listed.stderr
    rows = json.loads(listed.stdout)
    assert {(r["page"], r["framework"]) for r in rows} == {
        ("index", "alpha"), ("index", "beta"), ("other", "alpha"), ("other", "beta")
    }
    cleared = livecells_cli("clear", "-s", str(site), "other", "-f", "beta")
    assert cleared.returncode == 0, cleared.stderr
    cleared = cleared.stdout
    assert "cleared other [beta]" in cleared
    assert set(stored(site, "other")["sessions"]) == {"alpha"}
    state, _, _ = build(site, fake)
    assert fake.take() == [("other", "beta")]


def test_an_unmatched_depends_pattern_warns_once_per_page(site, fake):
    index = site / "index.rst"
    index.write_text(index.read_text().replace(":depends: data/*.txt", ":depends: data/*.txt, missing/*.csv"))
    _, warnings, _ = build(site, fake)
    assert warnings.count("'missing/*.csv' matches no file") == 1  # the page has two sessions
    assert "[livecells.depends]" in warnings


@pytest.mark.slow
def test_a_partial_build_deletes_no_store_file(built, fake):
    """A build that leaves pages out (``-D exclude_patterns``) keeps their committed results."""
    site = built
    kept = (site / "_livecells" / "other.json").read_bytes()
    state, _, _ = build(site, fake)  # an environment that knows both pages
    assert fake.take() == [] and state.cached == 4
    app, warnings = build_site(site, kernels=fake, confoverrides={"exclude_patterns": ["other.rst"]})
    assert fake.take() == [] and "other" not in app.env.found_docs
    assert (site / "_livecells" / "other.json").read_bytes() == kept
    state, _, _ = build(site, fake)  # the page is back: its results are used, nothing runs
    assert fake.take() == [] and state.cached == 4


@pytest.mark.parametrize("umask", [0o022, 0o002, 0o077])
def test_store_files_and_folders_follow_the_umask(tmp_path, umask):
    """The store is shared (committed, published by another user): modes are 0666/0777 less the
    umask, as for any file the user writes; never a private 0600."""
    old = os.umask(umask)
    try:
        store = OutputStore(tmp_path / "store")
        store.save_session("chapter/page", "alpha", {"cells": [], "key": "k"})
        store.save_session("chapter/page", "beta", {"cells": [], "key": "k"})  # a replaced file
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "store" / "chapter" / "page.json").stat().st_mode) == 0o666 & ~umask
    for folder in (tmp_path / "store", tmp_path / "store" / "chapter"):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o777 & ~umask
    assert not [p for p in (tmp_path / "store" / "chapter").iterdir() if p.name.endswith(".tmp")]


def test_the_pages_show_the_store_file_as_the_build_read_it(built, fake):
    """A store file replaced between the plan and the pages being written (a concurrent build,
    a ``git pull``) changes nothing this build shows: the plan's read is the one the pages use."""
    site = built
    path = site / "_livecells" / "index.json"
    another = json.loads(path.read_text())
    for session in another["sessions"].values():
        for cell in session["cells"]:
            for output in cell["outputs"]:
                if output.get("output_type") == "stream":
                    output["text"] = "FROM ANOTHER VERSION\n"

    def replace(app, builder=None):
        path.write_text(json.dumps(another))

    app = SphinxTestApp("html", srcdir=site, freshenv=True, confoverrides={"livecells_executor": fake})
    app.connect("write-started", replace)
    try:
        app.build()
    finally:
        app.cleanup()
    assert fake.take() == [] and app.env.livecells_outcome.cached == 4
    assert json.loads(path.read_text()) == another  # replaced before the page was written
    text = outputs(cell_with(page(app), "alpha reads"))
    assert "alpha reads first version" in text and "ANOTHER" not in text


LONG = """Long
====

.. live-cell:: alpha

   print("x" * 300)
"""

OWN_TIMEOUTS = """Own
===

.. live-cell:: alpha
   :timeout: 20

   print("own timeout")
"""


@pytest.mark.slow
def test_a_stored_result_stands_only_for_the_settings_it_ran_under(site, fake):
    """livecells_output_limit, livecells_timeout and the page's time budget are in the key:
    raising one reruns what it changes (and only that), so no output cut at an old limit is
    shown under a note that states the new one."""
    (site / "long.rst").write_text(LONG)
    (site / "own.rst").write_text(OWN_TIMEOUTS)
    everything = sorted([*ALL, ("long", "alpha"), ("own", "alpha")])
    _, _, app = build(site, fake, output_limit=100)
    assert fake.take() == everything
    text = cell_with(page(app, "long"), "x").get_text()
    assert "x" * 101 not in text and "Output truncated at 100 characters" in text
    _, _, app = build(site, fake, output_limit=100)
    assert fake.take() == []

    _, _, app = build(site, fake, output_limit=1000)
    assert fake.take() == everything
    text = cell_with(page(app, "long"), "x").get_text()
    assert "x" * 300 in text and "truncated" not in text

    # The conf.py's livecells_timeout is 30: cells with a :timeout: of their own keep their results.
    build(site, fake, output_limit=1000, timeout=45)
    assert fake.take() == [j for j in everything if j != ("own", "alpha")]

    other = site / "other.rst"
    other.write_text(other.read_text().replace("=====\n", "=====\n\n.. live-settings::\n   :timeout: 100\n", 1))
    build(site, fake, output_limit=1000, timeout=45)
    assert fake.take() == [("other", "alpha"), ("other", "beta")]


@pytest.mark.kernel
@pytest.mark.parametrize("fork", [True, False], ids=["forked", "fresh"])
def test_a_kernel_that_could_not_start_is_no_result_and_is_tried_again(site, monkeypatch, no_kernel_left, fork):
    """A preload that fails (here: on real kernels, an import error) fails the session in this
    build, is not stored, and the next build runs the page again (old: stored, never retried)."""
    helpers = site.parent / "helpers"
    helpers.mkdir()
    (helpers / "flaky_preload.py").write_text("raise ImportError('not ready yet')\n")
    monkeypatch.setenv("PYTHONPATH", str(helpers))
    monkeypatch.syspath_prepend(str(helpers))
    conf = site / "conf.py"
    conf.write_text(conf.read_text().replace(
        '"alpha": {"label": "Alpha", "kernel": "python3"}',
        '"alpha": {"label": "Alpha", "kernel": "python3", "preload": ["flaky_preload"]}',
    ))
    state, warnings, app = build(site, None, fork_kernels=fork)
    assert state.failed == 2 and state.ran == 4, warnings
    assert "not ready yet" in warnings and "[livecells.kernel]" in warnings
    assert set(stored(site, "index")["sessions"]) == {"beta"}  # the failure is not stored
    assert "not ready yet" in page(app).get_text()  # it is shown in this build

    (helpers / "flaky_preload.py").write_text("READY = True\n")
    state, warnings, app = build(site, None, fork_kernels=fork)
    assert (state.ran, state.failed, state.cached) == (2, 0, 2), warnings
    assert set(stored(site, "index")["sessions"]) == {"alpha", "beta"}
    assert "alpha reads first version" in outputs(cell_with(page(app), "alpha reads"))


@pytest.mark.slow
@pytest.mark.parametrize("folder", ["..", ".", "/", "sub/../.."])
def test_a_store_that_is_the_source_dir_or_above_it_is_refused(site, fake, folder):
    """Its files would mix with the book's (an ``index.json`` beside anything, up to ``/``) and
    ``clear`` would empty the folder: a located config warning, and the default store."""
    before = {p for p in site.parent.rglob("*.json")}
    app, warnings = build_site(site, kernels=fake, confoverrides={"livecells_store": folder})
    assert f"livecells_store (given with -D) = {folder!r}: the store must be a folder of its own" in warnings
    assert "[livecells.config]" in warnings and "Traceback" not in warnings
    made = {p for p in site.parent.rglob("*.json") if site / "_build" not in p.parents} - before
    assert made and all(p.parent == site / "_livecells" for p in made), made
    assert not Path("/index.json").exists()


def test_clear_deletes_no_json_that_is_not_a_store_file(built):
    """``clear`` with the store folder given wrong leaves other JSON alone, and a store folder
    that is the book's own folder is refused before anything is read."""
    site = built
    foreign = site / "_livecells" / "package.json"
    foreign.write_text('{"name": "book"}')
    done = livecells_cli("clear", "-s", str(site))
    assert done.returncode == 0 and "package.json: JSON that is not a livecells store file" in done.stderr
    assert foreign.exists() and not (site / "_livecells" / "index.json").exists()
    # A page name that leads out of the store (a damaged JSON file there is not the store's).
    (site / "tsconfig.json").write_text('{"a": 1, // a comment\n}')
    done = livecells_cli("clear", "-s", str(site), "../tsconfig")
    assert "not in the store folder" in done.stderr and (site / "tsconfig.json").exists()
    (site / "settings.json").write_text("{}")
    for store in (str(site), str(site.parent)):
        done = livecells_cli("clear", "-s", str(site), "--store", store)
        assert done.returncode != 0 and "a folder of its own" in done.stderr
    assert (site / "settings.json").exists()
