"""The guess before reading (pipeline/guess.py): which frameworks' cells changed, from the text.

Checked against what the directives themselves read: the converted d2l corpus (d2lbook's RST)
and d2l-en's markdown pages converted to MyST, built with execution off; each page's sessions,
cell by cell, must be what the guess makes of its text.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from livecells.convert.markdown import convert_markdown
from livecells.convert.tree import convert_tree
from livecells.pipeline.guess import cells, changed_frameworks, frameworks

from helpers import FakeKernels, build_site, d2l_corpus
from paths import DATA

SHAPES = DATA / "d2l-md-shapes"
TABS = ["pytorch", "mxnet", "jax", "tensorflow"]


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    corpus = d2l_corpus()
    if corpus is None:
        pytest.skip("no d2l corpus (shared/d2l-corpus)")
    src = tmp_path_factory.mktemp("guess") / "book"
    convert_tree(corpus, src)
    for page in sorted(SHAPES.glob("*.md")):
        converted = convert_markdown(page.read_text(encoding="utf-8"), tabs=TABS, source=page.name)
        (src / "md" / page.name).parent.mkdir(exist_ok=True)
        (src / "md" / page.name).write_text(converted.text, encoding="utf-8")
    (src / "conf.py").write_text(
        'extensions = ["myst_parser", "livecells"]\n'
        'myst_enable_extensions = ["dollarmath"]\n'
        'exclude_patterns = ["d2l", "_make"]\n'
        'livecells_execute = "off"\n'
        f"livecells_frameworks = {{name: {{}} for name in {TABS!r}}}\n"
    )
    app, _ = build_site(src, "dummy", freshenv=True)
    from livecells.read.collect import plans

    return src, plans(app.env)


@pytest.mark.slow
def test_the_guess_reads_each_cell_as_the_directive_does(book):
    src, found = book
    assert len(found) >= 10 and sum(p.source.endswith(".md") for p in found.values()) >= 2
    for docname, plan in found.items():
        text = Path(plan.source).read_text(encoding="utf-8")
        planned = {fw: [c.code_sha for c in plan.session(fw).cells] for fw in plan.frameworks}
        assert frameworks(cells(text), TABS) == planned, docname


PAGE = """\
Page
====

.. live-cell:: alpha
   :timeout: 5

   a = 1

.. live-cell:: beta

   b = 2

.. live-cell:: all

   print("both")
"""


def test_only_the_framework_whose_cell_changed_is_guessed(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-fast", src)
    (src / "index.rst").write_text(PAGE)
    build_site(src, kernels=FakeKernels())
    stored = src / "_livecells" / "index.json"
    assert changed_frameworks(PAGE, stored, ["alpha", "beta"]) == set()
    assert changed_frameworks(PAGE.replace("a = 1", "a = 10"), stored, ["alpha", "beta"]) == {"alpha"}
    assert changed_frameworks(PAGE.replace("print(", "print(1, "), stored, ["alpha", "beta"]) == {"alpha", "beta"}
    assert changed_frameworks(PAGE + "\n.. live-cell:: beta\n\n   c = 3\n", stored, ["alpha", "beta"]) == {"beta"}
    assert changed_frameworks(PAGE, None, ["alpha", "beta"]) == {"alpha", "beta"}  # nothing stored
    stored.write_text("{not json")
    assert changed_frameworks(PAGE, stored, ["alpha", "beta"]) == {"alpha", "beta"}
    assert stored.read_text() == "{not json"  # only read, never repaired, by the guess


@pytest.mark.kernel
def test_an_edited_cell_starts_its_frameworks_template_before_the_pages_are_read(
    tmp_path, rootdir, monkeypatch, no_kernel_left
):
    """The import overlaps with the reading: the template is asked for at env-before-read-docs,
    for the edited framework only (before, an edit started it only once the sessions were known)."""
    from livecells.execute.forkserver.server import ForkServer

    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-fast", src)
    (src / "index.rst").write_text(PAGE)
    build_site(src)
    asked: list[str] = []
    prepare = ForkServer.prepare

    def recorded(server, framework):
        asked.append(framework.name)
        return prepare(server, framework)

    monkeypatch.setattr(ForkServer, "prepare", recorded)
    (src / "index.rst").write_text(PAGE.replace("a = 1", "a = 10"))
    app, warnings = build_site(src)
    assert asked == ["alpha"], warnings
    assert "1 session(s) run" in app._status.getvalue()
