"""``convert`` on real d2lbook output: every chapter of ``shared/d2l-corpus``, nothing lost.

The corpus is d2lbook 1.0.3's own RST for eight sections of *Dive into Deep Learning*
(see its README). Every count here is taken from the source by this file's own reading of it
(a line-based walk, not the converter's), and checked against the converted text, and against
the table in the corpus README. The converted corpus is then built (execution off): each d2lbook
tab group must be one tab set, with each framework's prose and figure outputs in its tab. The
corpus sits in ``shared/`` beside the repository (CI puts a copy there); without it the tests
are skipped, except in CI (``CI`` set), where they fail.
``LIVECELLS_D2L_CORPUS`` points elsewhere; from a git worktree, ``../../shared`` is used.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

import pytest

from livecells.convert.rst import ConvertResult, convert_text
from livecells.convert.tree import convert_tree

from helpers import build_site, d2l_corpus, soup

CORPUS = d2l_corpus()
if CORPUS is None:
    if os.environ.get("CI"):
        raise RuntimeError("the d2l corpus is missing (CI must provide shared/d2l-corpus)")
    pytest.skip("no d2l corpus (shared/d2l-corpus)", allow_module_level=True)

CHAPTERS = sorted(p.relative_to(CORPUS).as_posix() for p in CORPUS.glob("chapter_*/*.rst"))

#: The corpus README's table: RST blocks per tab (pytorch, mxnet), shared blocks,
#: text outputs per tab, figures per tab.
TABLE = {
    "chapter_preliminaries/linear-algebra.rst": ((30, 30), 0, (29, 29), (0, 0)),
    "chapter_preliminaries/probability.rst": ((6, 6), 0, (4, 4), (1, 1)),
    "chapter_linear-regression/synthetic-regression-data.rst": ((9, 9), 0, (4, 4), (0, 0)),
    "chapter_linear-regression/linear-regression-scratch.rst": ((7, 7), 2, (1, 1), (1, 1)),
    "chapter_builders-guide/model-construction.rst": ((9, 9), 0, (5, 5), (0, 0)),
    "chapter_builders-guide/parameters.rst": ((7, 7), 0, (6, 6), (0, 0)),
    "chapter_builders-guide/use-gpu.rst": ((14, 14), 0, (0, 11), (0, 0)),
    "chapter_computational-performance/multiple-gpus.rst": ((9, 9), 3, (0, 0), (0, 0)),
}
FRAMEWORKS = ("pytorch", "mxnet")
PANEL = re.compile(r'<div class="mdl-tabs__panel[^"]*" id="(\w+)-\d+-\d+">')
ROLE = re.compile(r":(?:numref|eq|cite:t|cite|math|ref):`[^`]*`")
LABEL = re.compile(r"^\s*\.\. _([^:]+):\s*$")
#: The one thing convert adds: the settings it infers, with their comment.
SETTINGS = re.compile(
    r"^\.\. livecells convert inferred .*\n(   .*\n)*\n\.\. live-settings::\n   :gpus: \d+\n",
    re.M,
)


def test_the_corpus_has_the_chapters_of_its_readme() -> None:
    assert CHAPTERS == sorted([*TABLE, "chapter_references/zreferences.rst"])


# -- an independent reading of both texts -------------------------------------------------------


def explicit_blocks(lines: list[str]):
    """(start, end, head) of every top-level explicit markup block: ``..`` and its indented body."""
    i = 0
    while i < len(lines):
        if lines[i].startswith(".. "):
            j = i + 1
            while j < len(lines) and (not lines[j].strip() or lines[j][:1] in " \t"):
                j += 1
            while not lines[j - 1].strip():
                j -= 1
            yield i, j, lines[i]
            i = j
        else:
            i += 1


def body(lines: list[str], start: int, end: int) -> str:
    """The content of a directive (after its options), dedented."""
    rest = lines[start + 1 : end]
    while rest and (not rest[0].strip() or rest[0].strip().startswith(":")):
        rest = rest[1:]
    indent = min(len(x) - len(x.lstrip()) for x in rest if x.strip())
    return "\n".join(x[indent:].rstrip() for x in rest)


def items(text: str, source: bool) -> list[tuple[str, str, str]]:
    """The cells and outputs, in order: (kind, framework, content).

    In the source a cell's framework is its panel's ("all" outside panels); in the converted
    text it is the live-cell's argument, and an output takes the framework of the cell before it.
    """
    lines = text.splitlines()
    panel_at: dict[int, str] = {}  # line -> the panel it lies in
    current = "all"
    if source:
        for start, end, head in explicit_blocks(lines):
            payload = "\n".join(lines[start + 1 : end]).strip()
            if head.startswith(".. raw:: html"):
                match = PANEL.fullmatch(payload)
                current = match[1] if match else ("all" if payload == "</div>" else current)
            panel_at[start] = current
    found: list[tuple[str, str, str]] = []
    framework = "all"
    for start, end, head in explicit_blocks(lines):
        if source and head == ".. code:: python":
            found.append(("cell", panel_at[start], body(lines, start, end)))
        elif not source and head.startswith(".. live-cell:: "):
            framework = head.split("::", 1)[1].strip()
            found.append(("cell", framework, body(lines, start, end)))
        elif head == ".. parsed-literal::" and lines[start + 1].strip() == ":class: output":
            owner = panel_at[start] if source else framework
            found.append(("text", owner, body(lines, start, end)))
        elif re.fullmatch(r"\.\. figure:: output_\S+", head) and end == start + 1:
            found.append(("figure", panel_at[start] if source else framework, head))
    return found


def prose_lines(text: str, source: bool) -> Counter[tuple[str, str]]:
    """Non-blank lines outside cells and outputs, stripped, with the framework whose tab they are
    in ("" for none): in the source, the panel's; in the converted text, the live-text's."""
    lines = text.splitlines()
    skip: set[int] = set()
    where = [""] * len(lines)
    current = ""
    for start, end, head in explicit_blocks(lines):
        payload = "\n".join(lines[start + 1 : end]).strip()
        kind = head.split("::")[0]
        if source and head == ".. raw:: html":
            match = PANEL.fullmatch(payload)
            current = match[1] if match else ("" if payload == "</div>" else current)
        for k in range(start, end):
            where[k] = current
        if kind in (".. raw", ".. code", ".. live-cell", ".. parsed-literal") or (
            re.fullmatch(r"\.\. figure:: output_\S+", head) and end == start + 1
        ):
            skip.update(range(start, end))
        elif head.startswith(".. live-text:: "):
            skip.add(start)
            for k in range(start + 1, end):
                where[k] = head.split("::", 1)[1].strip()
        if source:
            for k in range(end, len(lines)):  # prose after a block, up to the next one
                if lines[k].startswith(".. "):
                    break
                where[k] = current
    return Counter(
        (where[k], line.strip()) for k, line in enumerate(lines) if line.strip() and k not in skip
    )


def labels(text: str) -> Counter[str]:
    return Counter(m[1] for line in text.splitlines() if (m := LABEL.match(line)))


def roles(text: str) -> Counter[str]:
    return Counter(ROLE.findall(text))


# -- every chapter --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def converted() -> dict[str, tuple[str, ConvertResult]]:
    out = {}
    for name in CHAPTERS:
        source = (CORPUS / name).read_text(encoding="utf-8")
        out[name] = (source, convert_text(source, source=name))
    return out


@pytest.mark.parametrize("name", CHAPTERS)
def test_no_cell_output_or_figure_lost_or_moved(converted, name: str) -> None:
    source, result = converted[name]
    assert result.warnings == []
    before, after = items(source, True), items(result.text, False)
    assert after == before  # same cells, code, outputs and frameworks, in the same order
    assert result.cells_in == sum(1 for kind, _, _ in before if kind == "cell")
    assert result.outputs == sum(1 for kind, _, _ in before if kind == "text")
    assert result.figures == sum(1 for kind, _, _ in before if kind == "figure")
    for marker in ("mdl-tabs", "tagClick", "diilbookstyle", ".. raw:: html", ".. raw:: latex",
                   ".. code:: python"):
        assert marker not in result.text


@pytest.mark.parametrize("name", sorted(TABLE))
def test_counts_match_the_corpus_readme(converted, name: str) -> None:
    source, result = converted[name]
    blocks, shared, texts, figures = TABLE[name]
    for text, is_source in ((source, True), (result.text, False)):
        found = Counter((kind, fw) for kind, fw, _ in items(text, is_source))
        assert tuple(found["cell", fw] for fw in FRAMEWORKS) == blocks
        assert found["cell", "all"] == shared
        assert tuple(found["text", fw] for fw in FRAMEWORKS) == texts
        assert tuple(found["figure", fw] for fw in FRAMEWORKS) == figures
    assert result.frameworks == {
        **dict(zip(FRAMEWORKS, blocks)), **({"all": shared} if shared else {})
    }


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_prose_line_kept_in_its_tab(converted, name: str) -> None:
    source, result = converted[name]
    text = SETTINGS.sub("", result.text)
    before, after = prose_lines(source, True), prose_lines(text, False)
    assert not before - after, f"prose lost or out of its tab: {sorted(before - after)[:5]}"
    assert not after - before, f"prose added: {sorted(after - before)[:5]}"


@pytest.mark.parametrize("name", CHAPTERS)
def test_labels_and_roles_kept(converted, name: str) -> None:
    source, result = converted[name]
    assert labels(result.text) == labels(source)
    assert roles(result.text) == roles(source)
    for directive in (".. math::", ".. figure:: ../img/", ".. only:: html", ".. bibliography::"):
        assert result.text.count(directive) == source.count(directive)


@pytest.mark.parametrize("name", CHAPTERS)
def test_converting_a_converted_chapter_changes_nothing(converted, name: str) -> None:
    _, once = converted[name]
    twice = convert_text(once.text, source=name)
    assert twice.text == once.text
    assert (twice.warnings, twice.cells, twice.gpus) == ([], 0, None)


def test_framework_prose_of_text_panels(converted) -> None:
    _, result = converted["chapter_builders-guide/use-gpu.rst"]
    text = result.text
    torch_prose = ".. live-text:: pytorch\n\n   In PyTorch, the CPU and GPU can be indicated by"
    assert torch_prose in text
    after = text[text.index(torch_prose):]
    # The prose is right before its framework's cell; mxnet's prose and cell follow, adjacent.
    assert re.match(
        r"\.\. live-text:: pytorch\n\n(   .*\n|\n)+?\.\. live-cell:: pytorch\n\n   def cpu\(\):"
        r"(.*\n|\n)+?\.\. live-text:: mxnet\n\n   In MXNet, the CPU(.*\n|\n)+?"
        r"\.\. live-cell:: mxnet\n\n   def cpu\(\):", after)
    assert text.count(".. live-text:: pytorch") == text.count(".. live-text:: mxnet") == 5
    # The "Discussions" panels end the chapter as framework prose.
    assert re.search(r"\.\. live-text:: pytorch\n\n   `Discussions <[^>]+>`__\n\n"
                     r"\.\. live-text:: mxnet\n\n   `Discussions <[^>]+>`__\n$", text)


def test_shared_and_joined_blocks(converted) -> None:
    _, result = converted["chapter_linear-regression/linear-regression-scratch.rst"]
    assert ".. live-cell:: all\n\n   @d2l.add_to_class(LinearRegressionScratch)  #@save\n" \
        "   def configure_optimizers(self):" in result.text
    _, result = converted["chapter_linear-regression/synthetic-regression-data.rst"]
    joined = [c for kind, _, c in items(result.text, False)
              if kind == "cell" and "def get_tensorloader" in c]
    assert len(joined) == 2 and all("def get_dataloader" in c for c in joined)


def test_figure_outputs_stay_right_after_their_cell_in_their_tab(converted) -> None:
    _, result = converted["chapter_linear-regression/linear-regression-scratch.rst"]
    assert re.search(
        r"\.\. live-cell:: pytorch\n\n(   .*\n)+\n\.\. figure:: output_linear-regression-scratch_"
        r"b94b4e_54_0\.svg\n\n\.\. live-cell:: mxnet\n\n(   .*\n)+\n\.\. figure:: output_linear-"
        r"regression-scratch_b94b4e_57_0\.svg\n", result.text)


def test_ipython_lines_kept_in_code(converted) -> None:
    _, result = converted["chapter_linear-regression/linear-regression-scratch.rst"]
    assert ".. live-cell:: pytorch\n\n   %matplotlib inline\n   import torch\n" in result.text


@pytest.mark.parametrize(
    ("name", "gpus"),
    [
        ("chapter_builders-guide/use-gpu.rst", 2),
        ("chapter_computational-performance/multiple-gpus.rst", 2),
        ("chapter_preliminaries/linear-algebra.rst", None),
        ("chapter_builders-guide/parameters.rst", None),
    ],
)
def test_inferred_gpu_settings(converted, name: str, gpus: int | None) -> None:
    _, result = converted[name]
    assert result.gpus == gpus
    if gpus is None:
        assert "live-settings" not in result.text
        return
    title = re.search(r"\n(.+)\n(=+)\n\n", result.text)
    rest = result.text[title.end():]
    assert re.match(
        r"\.\. livecells convert inferred the live-settings below: the code asks for 2 devices "
        r"in [^\n]+\n(   [^\n]+\n)*\n\.\. live-settings::\n   :gpus: 2\n\n", rest)
    assert "inferred live-settings :gpus: 2" in result.summary(name)
    if name.endswith("use-gpu.rst"):
        # try_gpu(10) shows d2l's fall-back to the CPU: not a request for 11 GPUs.
        assert "not counted as devices: try_gpu(10)" in result.summary(name)


# -- the converted corpus builds ----------------------------------------------------------------

#: What a plain Sphinx build of the unconverted corpus gives (its README), less the two
#: parsed-literal outputs read as markup (recorded outputs are literal): references to sections
#: of the book that the corpus does not hold.
DANGLING = re.compile(
    r"WARNING: (undefined label: '[\w-]+'|equation not found: (eq_mse|eq_linreg-y-vec))"
)
CONF = """
extensions = ["livecells", "sphinxcontrib.bibtex"]
bibtex_bibfiles = ["d2l.bib"]
numfig = True
math_numfig = True
livecells_execute = "off"
exclude_patterns = ["d2l", "_make"]


def setup(app):
    # zreferences.rst asks for pybtex's "apa" style, a plugin (pybtex-apa-style) that may not be
    # installed; any style does for this build.
    import pybtex.plugin
    from pybtex.style.formatting.unsrt import Style

    pybtex.plugin.register_plugin("pybtex.style.formatting", "apa", Style)  # unless there is one
"""
LABELS = {"pytorch": "PyTorch", "mxnet": "MXNet"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, str]:
    """The converted corpus, built with execution off (each cell shows its recorded outputs)."""
    src = tmp_path_factory.mktemp("corpus") / "book"
    results = convert_tree(CORPUS, src)
    assert all(r.warnings == [] for r in results.values())
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    _, warnings = build_site(src, freshenv=True)
    return src / "_build" / "html", warnings


@pytest.mark.slow
def test_the_converted_corpus_builds_with_only_its_dangling_references(built) -> None:
    _, warnings = built
    problems = [
        line for line in warnings.splitlines()
        if ("WARNING" in line or "ERROR" in line or "SEVERE" in line) and not DANGLING.search(line)
    ]
    assert problems == []
    # Exactly the dangling references of the corpus README: the ones in framework prose resolve
    # as well as the others (oo-design-utilities, in the SGD panels, is among them).
    assert len(re.findall(r"WARNING: undefined label", warnings)) == 18
    assert len(re.findall(r"WARNING: equation not found", warnings)) == 2


def tab_of(node) -> str:
    """The label of the tab whose content holds ``node`` ("" outside any tab)."""
    content = node.find_parent("div", class_="sd-tab-content")
    if content is None:
        return ""
    return content.find_previous_sibling("label", class_="sd-tab-label").get_text(strip=True)


@pytest.mark.slow
@pytest.mark.parametrize("name", CHAPTERS)
def test_each_d2lbook_tab_group_is_one_tab_set_with_its_prose_and_figures(built, name) -> None:
    html, _ = built
    source = (CORPUS / name).read_text(encoding="utf-8")
    page = soup(html / name.replace(".rst", ".html"))
    sets = page.select("div.sd-tab-set")
    assert len(sets) == source.count('<div class="mdl-tabs__tab-bar')
    for tab_set in sets:
        labels = [x.get_text(strip=True) for x in tab_set.find_all("label", recursive=False)]
        assert labels == ["PyTorch", "MXNet"]
    # Each figure output is shown in its framework's tab, as its cell's recorded output.
    for kind, framework, figure in items(source, True):
        if kind == "figure":
            image = page.find("img", src=re.compile(re.escape(figure.split("::")[1].strip())))
            assert tab_of(image) == LABELS[framework]
            assert "livecells-recorded" in image.parent["class"]
    # Each panel's prose is in its framework's tab: the Discussions links, for one.
    links = re.findall(r'id="(\w+)-\d+-\d+">\n\n`Discussions <([^>]+)>`__', source)
    for framework, url in links:
        assert tab_of(page.find("a", href=url)) == LABELS[framework]
    assert len(links) == (0 if "zreferences" in name else 2)


@pytest.mark.slow
def test_text_panel_prose_is_in_its_tab_beside_its_cells(built) -> None:
    html, _ = built
    page = soup(html / "chapter_builders-guide" / "use-gpu.html")
    for label, words in (("PyTorch", "In PyTorch, the CPU"), ("MXNet", "In MXNet, the CPU")):
        paragraph = next(p for p in page.find_all("p") if p.get_text().startswith(words))
        assert tab_of(paragraph) == label
        cell = paragraph.find_parent("div", class_="sd-tab-content").select_one(".livecells-cell")
        assert "def cpu():" in cell.get_text()
