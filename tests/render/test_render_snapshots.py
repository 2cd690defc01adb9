"""The render stage against snapshots: pages built from a committed store, compared as doctrees.

tests/roots/test-snapshot holds a store (``_livecells/``, made once by :class:`helpers.FakeKernels`)
and is built with ``livecells_execute = "cache"``, so no kernel runs and the doctree depends on
render alone. Its ``index`` page shows streams, a value, errors, an image and HTML in two tabs;
each page of ``options/`` shows one ``live-cell`` option of the page's display, on one cell. Each
builder's doctree of each page, after Sphinx's post-transforms (those of the builder: the LaTeX
one has no tabs), is compared with its own file in ``test_render_snapshots/`` through
pytest-regressions' ``file_regression``, as MyST-NB compares its rendered notebooks: a change of
how one option renders shows in that option's file only.

After an intended change of render, regenerate them and read the diff::

    pytest tests/render/test_render_snapshots.py --force-regen

``--force-regen`` rewrites every file that differs (the test fails, naming them; run it again and
it passes), ``--regen-all`` rewrites them all and passes. Either also records the stack that made
them in ``stack.txt``.
"""

from __future__ import annotations

import os
import shutil
from importlib.metadata import version
from io import StringIO
from pathlib import Path

import pytest
from sphinx.testing.util import SphinxTestApp

from paths import ROOTS

#: The snapshots, pytest-regressions' data folder of this module.
SNAPSHOTS = Path(__file__).with_suffix("")
#: What a doctree's text depends on besides livecells (attribute spellings, node names: the
#: lowest Sphinx and docutils write some otherwise), recorded in ``stack.txt`` when they are made.
STACK = " ".join(f"{name}=={version(name)}" for name in ("sphinx", "docutils", "sphinx-design"))
#: The pages of the root: the whole page, then one per option (tests/roots/test-snapshot/options/).
PAGES = ["index", *sorted(f"options/{p.stem}" for p in (ROOTS / "test-snapshot" / "options").glob("*.rst"))]


def regenerating(config: pytest.Config) -> bool:
    return bool(config.getoption("force_regen") or config.getoption("regen_all"))


@pytest.mark.slow
@pytest.mark.parametrize("builder", ["html", "latex"])
def test_a_page_from_a_committed_store_renders_as_its_snapshot(tmp_path, rootdir, builder, file_regression, request):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-snapshot", src)
    app = SphinxTestApp(builder, srcdir=src, warning=(warnings := StringIO()))
    try:
        app.build()
        doctrees = {}
        for page in PAGES:
            doctree = app.env.get_doctree(page)
            app.env.apply_post_transforms(doctree, page)
            doctrees[page] = doctree.pformat().replace(str(src), "<srcdir>")
    finally:
        app.cleanup()
    # The one cell that fails without :raises: is a located warning, in a cache build too; no other.
    said = [line for line in warnings.getvalue().splitlines() if "WARNING" in line]
    assert len(said) == 1 and "index.rst:34" in said[0] and "ValueError: not <expected>" in said[0], said
    stack = SNAPSHOTS / "stack.txt"
    if regenerating(request.config):
        stack.write_text(STACK + "\n")
    recorded = stack.read_text().strip() if stack.exists() else "no stack"
    if recorded != STACK:
        # The version matrix runs other stacks; anywhere else a new stack means new snapshots.
        if os.environ.get("LIVECELLS_SNAPSHOT_ANY_STACK") == "1":
            pytest.skip(f"the snapshots were made with {recorded}; this is {STACK}")
        pytest.fail(f"the snapshots were made with {recorded}, this is {STACK}: --force-regen rewrites them")
    # Every page is compared, and every file that differs named (and rewritten by --force-regen),
    # not only the first.
    differ = []
    for page, got in doctrees.items():
        try:
            file_regression.check(got, basename=f"{page.replace('/', '-')}-{builder}", extension=".txt")
        except (AssertionError, pytest.fail.Exception) as failed:
            differ.append(f"{page}: {failed}")
    assert not differ, "\n\n".join(differ)
