"""The render stage against snapshots: pages built from a committed store, compared as doctrees.

tests/roots/test-snapshot holds a store (``_livecells/index.json``, made once by
:class:`helpers.FakeKernels`) and is built with ``livecells_execute = "cache"``, so no kernel
runs and the doctree depends on render alone. Each builder's doctree of the page, after Sphinx's
post-transforms (those of the builder: the LaTeX one has no tabs), is compared with ``tests/snapshots/render-<builder>.txt``, as MyST-NB compares
its rendered notebooks. After an intended change of render, regenerate them with
``LIVECELLS_SNAPSHOT_UPDATE=1 pytest tests/render/test_render_snapshots.py`` and read the diff.
"""

from __future__ import annotations

import os
import shutil
from importlib.metadata import version
from io import StringIO
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp

SNAPSHOTS = Path(__file__).parent / "snapshots"
UPDATE = os.environ.get("LIVECELLS_SNAPSHOT_UPDATE") == "1"
#: What a doctree's text depends on besides livecells (attribute spellings, node names): the
#: snapshots' first line records it; the version matrix's other stacks skip the comparison.
STACK = " ".join(f"{name}=={version(name)}" for name in ("sphinx", "docutils", "sphinx-design"))


@pytest.mark.parametrize("builder", ["html", "latex"])
def test_a_page_from_a_committed_store_renders_as_its_snapshot(tmp_path, rootdir, builder):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-snapshot", src)
    app = SphinxTestApp(builder, srcdir=src, warning=(warnings := StringIO()))
    try:
        app.build()
        doctree = app.env.get_doctree("index")
        app.env.apply_post_transforms(doctree, "index")
    finally:
        app.cleanup()
    got = doctree.pformat().replace(str(src), "<srcdir>")
    # The one cell that fails without :raises: is a located warning, in a cache build too; no other.
    said = [line for line in warnings.getvalue().splitlines() if "WARNING" in line]
    assert len(said) == 1 and "index.rst:34" in said[0] and "ValueError: not <expected>" in said[0], said
    snapshot = SNAPSHOTS / f"render-{builder}.txt"
    if UPDATE or not snapshot.exists():
        snapshot.write_text(f"{STACK}\n{got}")
        pytest.fail(f"{snapshot} written: read its diff, then commit it")
    recorded, _, expected = snapshot.read_text().partition("\n")
    if recorded != STACK:
        # The version matrix runs other stacks; anywhere else a new stack means new snapshots.
        if os.environ.get("LIVECELLS_SNAPSHOT_ANY_STACK") == "1":
            pytest.skip(f"{snapshot.name} was made with {recorded}; this is {STACK}")
        pytest.fail(f"{snapshot.name} was made with {recorded}, this is {STACK}: LIVECELLS_SNAPSHOT_UPDATE=1 rewrites it")
    assert got == expected, f"the doctree differs from {snapshot} (LIVECELLS_SNAPSHOT_UPDATE=1 rewrites it)"
