"""The RST examples in docs/*.rst are valid livecells pages: each ``.. code-block:: rst`` example
of a live-cell, live-text, live-settings or live-report directive becomes a page of one build
with ``livecells_execute = "off"`` (no kernel: ``make docs`` runs the same cells for real), which
must give no warning and a cell, prose or report node for each directive in it."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest

from helpers import build_site
from paths import DOCS

#: Generic forms (``.. live-cell:: FRAMEWORKS``), not examples.
PLACEHOLDER = re.compile(r"^\.\. live-\w+:: [A-Z]+$", re.M)
DIRECTIVE = re.compile(r"^\s*\.\. (live-cell|live-text|live-settings|live-report)::", re.M)
#: Figures of recorded output that an example names but the docs do not have.
FIGURE = re.compile(r"^\.\. figure:: (\S+)$", re.M)


def examples() -> list[tuple[str, str]]:
    """(``file:line``, the example's RST) for each rst code block that uses a livecells directive."""
    found = []
    for path in sorted(DOCS.glob("*.rst")):
        lines = path.read_text().split("\n")
        for n, line in enumerate(lines):
            head = re.match(r"(\s*)\.\. code-block:: rst\s*$", line)
            if not head:
                continue
            end = n + 1
            while end < len(lines) and (not lines[end].strip() or lines[end].startswith(head.group(1) + " ")):
                end += 1
            text = textwrap.dedent("\n".join(lines[n + 1 : end])).strip("\n") + "\n"
            if DIRECTIVE.search(text) and not PLACEHOLDER.search(text):
                found.append((f"{path.name}:{n + 1}", text))
    return found


EXAMPLES = examples()


def test_the_docs_have_examples_of_each_directive():
    used = {m for _, text in EXAMPLES for m in DIRECTIVE.findall(text)}
    assert used == {"live-cell", "live-text", "live-settings", "live-report"}
    assert len(EXAMPLES) >= 20


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, rootdir: Path) -> dict:
    src = tmp_path_factory.mktemp("examples")
    (src / "conf.py").write_text('extensions = ["livecells"]\nlivecells_execute = "off"\n')
    pages = {}
    for n, (where, text) in enumerate(EXAMPLES):
        name = f"example{n:02d}"
        pages[name] = where
        for figure in FIGURE.findall(text):
            (src / figure).write_text('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>')
        (src / f"{name}.rst").write_text(f"{where}\n{'=' * len(where)}\n\n{text}")
    (src / "d2l").mkdir()
    (src / "d2l" / "__init__.py").write_text("")
    toc = "".join(f"   {name}\n" for name in pages)
    (src / "index.rst").write_text(f"Examples\n========\n\n.. toctree::\n\n{toc}")
    app, warnings = build_site(src)
    return {"outdir": Path(app.outdir), "warnings": warnings, "pages": pages}


def test_the_examples_build_without_warnings(built):
    said = built["warnings"]
    for name, where in built["pages"].items():
        said = said.replace(f"{name}.rst", f"{name}.rst (docs/{where})")
    assert said.strip() == "", said


@pytest.mark.parametrize("where,text", EXAMPLES, ids=[where for where, _ in EXAMPLES])
def test_each_example_gives_its_nodes(built, where, text):
    name = next(name for name, w in built["pages"].items() if w == where)
    html = (built["outdir"] / f"{name}.html").read_text()
    kinds = DIRECTIVE.findall(text)
    # A cell of n frameworks is n cells, one per tab.
    assert html.count('class="livecells-cell ') >= kinds.count("live-cell"), where
    assert html.count('class="livecells-text ') >= kinds.count("live-text"), where
    assert html.count('class="livecells-report ') == kinds.count("live-report"), where
