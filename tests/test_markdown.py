"""MyST Markdown pages (tests/roots/test-myst, beside one RST page) and d2lbook markdown conversion.

The root's two light frameworks run on plain python3 kernels: one HTML build runs every session,
the LaTeX build reads the store, and an ``execute = "off"`` build shows the recorded outputs.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import nbformat
import pytest

from conftest import kernel_processes
from helpers import build_site, cell_with, cells, meta, outputs, soup


def _build(src: Path, builder: str = "html", builddir: Path | None = None, **overrides):
    return build_site(
        src, builder, builddir=builddir, confoverrides={f"livecells_{k}": v for k, v in overrides.items()}
    )


def _line_of(path: Path, text: str) -> int:
    """The 1-based line of the only line of ``path`` that holds ``text``."""
    found = [n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line]
    assert len(found) == 1, (text, found)
    return found[0]


@pytest.fixture(scope="module")
def myst(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("myst") / "src"
    shutil.copytree(rootdir / "test-myst", src)
    html, warnings = _build(src)
    latex, latex_warnings = _build(src, "latex", src / "_latex", execute="cache")
    off, off_warnings = _build(src, "html", src / "_off", execute="off")
    return {
        "src": src,
        "html": html.outdir,
        "index": soup(html.outdir / "index.html"),
        "warnings": warnings,
        "latex": next(latex.outdir.glob("*.tex")).read_text(encoding="utf-8"),
        "latex_warnings": latex_warnings,
        "off": soup(off.outdir / "index.html"),
        "off_warnings": off_warnings,
        "kernels_left": kernel_processes(),
    }


def test_live_output_replaces_both_forms_of_recorded_output(myst):
    page = myst["index"]
    assert "STATIC-" not in page.get_text()
    assert "'alphaalpha'" in outputs(cell_with(page, 'NAME = "alpha"'))
    assert "'betabeta'" in outputs(cell_with(page, 'NAME = "beta"'))


def test_recorded_outputs_are_shown_when_nothing_runs(myst):
    page = myst["off"]
    alpha, beta = cell_with(page, 'NAME = "alpha"'), cell_with(page, 'NAME = "beta"')
    assert outputs(alpha).strip() == "STATIC-ALPHA-OUTPUT"  # the ```output fence
    assert outputs(beta).strip() == "STATIC-BETA-OUTPUT"  # the {parsed-literal} with :class: output
    assert any("recorded output" in line for line in meta(alpha))
    # Neither recorded block is left beside its cell as well.
    assert page.get_text().count("STATIC-ALPHA-OUTPUT") == 1
    assert myst["off_warnings"].count("WARNING") == 2, myst["off_warnings"]  # only the gamma ones


def test_cells_of_a_markdown_page_form_synced_tabs_and_share_state(myst):
    page = myst["index"]
    tab_set = page.select_one("div.sd-tab-set")
    labels = tab_set.select("label.sd-tab-label")
    assert [label.get_text(strip=True) for label in labels] == ["Alpha", "Beta"]
    assert {label["data-sync-group"] for label in labels} == {"framework"}
    assert "ALPHA" in outputs(cell_with(page, "NAME.upper()"))
    everyone = cell_with(page, '"everyone"')
    assert everyone.find_parent("div", class_="sd-tab-set") is None
    assert "everyone alpha" in outputs(everyone) and "everyone beta" in outputs(everyone)


def test_options_work_in_markdown(myst):
    page = myst["index"]
    hidden = [c for c in cells(page) if "SHOWN-OUTPUT-OF-HIDDEN-CODE" in c.get_text()]
    assert len(hidden) == 1 and hidden[0].select_one(".livecells-input") is None
    raised = cell_with(page, "1 / 0")
    assert "ZeroDivisionError" in outputs(raised)
    assert not any(re.search(r"\d s\b", line) for line in meta(raised))  # :no-timing:
    assert "ZeroDivisionError" not in myst["warnings"]
    timed = cell_with(page, "NAME.upper()")
    assert re.match(r"\d+\.\d+ s", meta(timed)[0])
    # :name: makes a target that {ref} resolves.
    link = page.find("a", string=re.compile("the upper cell"))
    assert link is not None and link["href"].startswith("#")


def test_framework_prose_joins_its_panel_or_forms_its_own_tabs(myst):
    page = myst["index"]
    panels = page.select("div.sd-tab-content")
    alpha = next(p for p in panels if "ALPHAPROSE" in p.get_text())
    assert "BETAPROSE" not in alpha.get_text() and "'alphaalpha'" in alpha.get_text()
    beta = next(p for p in panels if "BETAPROSE" in p.get_text())
    assert "'betabeta'" in beta.get_text()
    assert alpha.select_one("a[href='https://example.org']") is not None  # MyST markup is parsed
    alone = next(p for p in panels if "STANDALONEPROSE" in p.get_text())
    label = alone.find_previous_sibling("label")
    assert label["data-sync-group"] == "framework" and label["data-sync-id"] == "alpha"


def test_recorded_figure_and_literal_text_in_markdown(myst):
    live, off = myst["index"], myst["off"]
    assert "output_index_abc123_9_0" not in str(cell_with(live, "figure cell"))
    recorded = cell_with(off, "figure cell")
    assert recorded.select_one("img[src*='output_index_abc123_9_0']") is not None
    assert "recorded output" in " ".join(meta(recorded))
    literal = cell_with(off, 'print("literal")')
    assert outputs(literal).strip() == "dense1_ ( *not emphasis* `tick"
    assert literal.select_one(".livecells-output em") is None


def test_output_is_text_not_markup(myst):
    cell = cell_with(myst["index"], "not bold")
    assert "<b>not bold</b> & *not emphasis*" in outputs(cell)
    assert cell.select_one(".livecells-output b") is None


def test_warnings_point_at_the_failing_line_of_the_markdown_file(myst):
    warnings, src = myst["warnings"], myst["src"]
    index_line = _line_of(src / "index.md", "undefined_in_markdown")
    assert re.search(rf"index\.md:{index_line}: WARNING: live-cell \[alpha\]: NameError: .*undefined_in_markdown", warnings), warnings
    page_line = _line_of(src / "sub" / "page.md", 'raise ValueError')
    assert re.search(rf"sub/page\.md:{page_line}: WARNING: live-cell \[beta\]: ValueError: third line", warnings), warnings
    # Directive problems are located at the fence's line.
    gamma_line = _line_of(src / "sub" / "page.md", "{live-cell} gamma")
    assert re.search(rf"sub/page\.md:{gamma_line}: WARNING: live-cell: unknown framework 'gamma'", warnings), warnings
    prose_line = _line_of(src / "sub" / "page.md", "{live-text} gamma")
    assert re.search(rf"sub/page\.md:{prose_line}: WARNING: live-text: unknown framework 'gamma'", warnings), warnings


def test_rst_and_markdown_pages_in_one_book(myst):
    warnings, src = myst["warnings"], myst["src"]
    rst_line = _line_of(src / "other.rst", "undefined_in_rst")
    assert re.search(rf"other\.rst:{rst_line}: WARNING: live-cell \[beta\]: NameError", warnings), warnings
    other = soup(myst["html"] / "other.html")
    assert "rst alpha" in outputs(cell_with(other, '"rst alpha"'))
    nested = soup(myst["html"] / "sub" / "page.html")
    assert "cwd: sub" in outputs(cell_with(nested, "os.getcwd"))  # the page's own folder
    stored = sorted(p.relative_to(src / "_livecells").as_posix() for p in (src / "_livecells").rglob("*.json"))
    assert [s for s in stored if not s.startswith("_")] == ["index.json", "other.json", "sub/page.json"]
    # Exactly the expected warnings: nothing from MyST itself.
    assert len(re.findall(r"WARNING", warnings)) == 5, warnings


def test_notebooks_of_a_markdown_page(myst):
    path = myst["html"] / "_downloads" / "livecells" / "index.alpha.ipynb"
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code = [c for c in notebook.cells if c.cell_type == "code"]
    assert code[0].source == 'NAME = "alpha"\nNAME * 2'
    assert code[0].outputs[0]["data"]["text/plain"] == "'alphaalpha'"
    assert any("MyST page" in c.source for c in notebook.cells if c.cell_type == "markdown")


def test_latex_of_a_markdown_page_shows_the_first_framework(myst):
    tex = myst["latex"]
    assert "alphaalpha" in tex and "betabeta" not in tex
    assert "ALPHAPROSE" in tex and "BETAPROSE" not in tex
    assert "STATIC-" not in tex


def test_no_kernel_outlives_the_builds(myst):
    assert myst["kernels_left"] == []
