"""The display options of ``live-cell``: line numbers, emphasised lines, code below its output,
collapsed code and output, an output image's size and alt text, the output as a numbered figure.

tests/roots/test-display uses each of them in tab sets, ``all`` cells, a MyST page and with bad
values; its sessions run on :class:`helpers.FakeKernels` (how a cell is shown is the subject).
Sphinx's HTML and LaTeX writers draw what the options ask for; these tests read what they wrote.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from helpers import FakeKernels, build_site, built_page, cell_with, one_page_book

PNG_ALT = 'A "dot" <script>alert(1)</script>'


@pytest.fixture(scope="module")
def site(tmp_path_factory, rootdir) -> dict[str, Any]:
    """The root built to HTML, then to LaTeX; the pages, the warnings, the sessions that ran."""
    src = tmp_path_factory.mktemp("display") / "src"
    shutil.copytree(rootdir / "test-display", src)
    kernels = FakeKernels()
    app, warnings = build_site(src, kernels=kernels)
    ran = kernels.take()
    latex_app, latex_warnings = build_site(src, "latex", kernels=kernels)
    return {
        "src": src,
        "html": Path(app.outdir),
        "warnings": warnings,
        "ran": ran,
        "tex": (Path(latex_app.outdir) / "projectnamenotset.tex").read_text(encoding="utf-8"),
        "latex_warnings": latex_warnings,
    }


def page(site: dict[str, Any], name: str) -> Any:
    return built_page(site["html"] / f"{name}.html")


def numbered_lines(cell: Any) -> tuple[list[str], list[str]]:
    """The line numbers a cell's code shows, and the text of its emphasised lines."""
    code = cell.select_one(".livecells-input pre")
    numbers = [n.get_text().strip() for n in code.select("span.linenos")]
    emphasised = [h.get_text().strip() for h in code.select("span.hll")]
    return numbers, emphasised


def parts(cell: Any) -> list[str]:
    """What a rendered cell shows, in order: code, output, output tabs, figure, collapsed code or
    output, meta."""
    found = []
    for child in cell.find_all(recursive=False):
        classes = child.get("class", [])
        if "livecells-collapsed-code" in classes:
            found.append("collapsed-code")
        elif "livecells-collapsed-output" in classes:
            found.append("collapsed-output")
        elif "livecells-input" in classes:
            found.append("code")
        elif child.name == "figure":
            found.append("figure")
        elif "sd-tab-set" in classes:
            found.append("tabs")
        elif "livecells-output" in classes:
            found.append("output")
        elif "livecells-meta" in classes:
            found.append("meta")
    return found


def test_the_book_builds_with_warnings_only_for_its_bad_values(site):
    assert site["ran"] == [("bad", "alpha"), ("index", "alpha"), ("index", "beta"), ("md", "alpha")]
    said = [line for line in site["warnings"].splitlines() if "WARNING" in line or "ERROR" in line]
    assert said and all("bad.rst:" in line for line in said), said
    assert [line for line in site["latex_warnings"].splitlines() if "index.rst" in line or "md.md" in line] == []


def test_line_numbers_and_emphasis_as_code_block_draws_them(site):
    index = page(site, "index")
    assert numbered_lines(cell_with(index, 'FRAMEWORK = "alpha"')) == (
        ["1", "2", "3", "4", "5"], ["2a = 1", "4c = 3", '5print("tabbed", FRAMEWORK)']
    )
    # :lineno-start: alone numbers the lines (as code-block); in a tab, and in an `all` cell.
    assert numbered_lines(cell_with(index, 'FRAMEWORK = "beta"')) == (["7", "8"], [])
    assert numbered_lines(cell_with(index, "same everywhere")) == (["10", "11"], ['10print("same everywhere")'])
    assert numbered_lines(cell_with(index, "a table, say")) == ([], [])  # no option: as before


def test_code_below_puts_the_code_after_the_output(site):
    index = page(site, "index")
    assert parts(cell_with(index, 'FRAMEWORK = "beta"')) == ["collapsed-output", "collapsed-code", "meta"]
    assert parts(cell_with(index, '"differs"')) == ["figure", "collapsed-code", "meta", "meta"]
    assert parts(cell_with(index, 'FRAMEWORK = "alpha"')) == ["code", "output", "meta"]


def test_collapsed_parts_are_details_elements_with_a_summary(site):
    index = page(site, "index")
    beta = cell_with(index, 'FRAMEWORK = "beta"')
    output, code = beta.select("details")
    # The author's summary is text (markup in it too); the default says what opening does.
    assert output.summary.get_text() == "What <b>beta</b> printed" and output.summary.b is None
    assert "tabbed beta" in output.get_text() and not output.has_attr("open")
    assert [s.get_text() for s in code.summary.select("span")] == ["Show code", "Hide code"]
    assert code.select_one("span.livecells-when-closed").get_text() == "Show code"
    assert code.select_one(".livecells-input") is not None
    # Inside the tab set of its group, and for an `all` cell (its output collapsed, once).
    assert beta.find_parent("div", class_="sd-tab-set") is not None
    shared = cell_with(index, "same everywhere")
    assert [d["class"] for d in shared.select("details")] == [["livecells-collapsed", "livecells-collapsed-output"]]
    assert shared.select_one("details summary").get_text() == "Show outputHide output"
    assert cell_with(index, '"differs"').select_one("details summary").get_text() == "The loop"


def test_image_size_and_alt_text(site):
    index = page(site, "index")
    images = index.select("img.livecells-image")
    assert len(images) == 2  # the comma-list cell's, in each framework's tab
    for image in images:
        assert image["alt"] == PNG_ALT
        assert image["style"].replace(" ", "") == "width:120px;height:3em;"
    html = (site["html"] / "index.html").read_text(encoding="utf-8")
    assert "<script>alert" not in html and "&lt;script&gt;alert(1)" in html
    md = page(site, "md")
    assert md.select_one("img.livecells-image")["alt"] == "MyST dot"
    assert md.select_one("img.livecells-image")["style"].replace(" ", "") == "width:50%;"
    assert md.select_one("img.livecells-image")["class"] == ["livecells-image", "shadow", "framed"]


def test_an_output_is_a_numbered_figure_that_numref_finds(site):
    index = page(site, "index")
    alpha, beta = (cell.select_one("figure") for cell in index.select("div.livecells-cell") if cell.select("img"))
    assert alpha["id"] == "fig-dot" and alpha.select_one("img.livecells-image") is not None
    number = alpha.select_one("span.caption-number").get_text().strip()
    assert number == "Fig. 3"
    caption = alpha.select_one("span.caption-text")
    assert caption.strong.get_text() == "dot" and "<script>alert(2)</script> & more" in caption.get_text()
    # The other framework's tab shows the same figure, number and caption, and no second label.
    assert beta["id"] != "fig-dot" and beta.select_one("span.caption-number").get_text().strip() == number
    assert beta.select_one("span.caption-text").get_text() == f"{number} {caption.get_text()}"
    refs = {a.get_text(): a["href"] for a in index.select("p a.reference.internal")}
    assert refs == {"Fig. 3": "#fig-dot", "Fig. 2": "#fig-disagree", "the dot": "#fig-dot"}
    # An `all` cell whose frameworks disagree: its output tabs inside one figure.
    disagree = index.select_one("figure#fig-disagree")
    assert disagree.select_one("div.sd-tab-set") is not None and "differs beta" in disagree.get_text()
    # A caption without a name: numbered all the same.
    assert cell_with(index, "a table, say").select_one("figure span.caption-number").get_text().strip() == "Fig. 4"


def test_myst_pages_take_the_same_options(site):
    md = page(site, "md")
    cell = cell_with(md, "md_value")
    assert numbered_lines(cell) == (["1", "2"], ['2print("myst", md_value + 1)'])
    assert parts(cell) == ["collapsed-code", "collapsed-output", "meta"]
    figure = md.select_one("figure#fig-md")
    assert figure.select_one("span.caption-text em").get_text() == "MyST"  # the caption is MyST
    assert figure.select_one("span.caption-text code").get_text() == "code"
    refs = [(a.get_text(), a["href"]) for a in md.select("p a.reference.internal")]
    assert refs == [("Fig. 1", "#fig-md"), ("Fig. 3", "index.html#fig-dot")]


def test_latex_prints_everything_with_sphinx_line_numbers(site):
    tex = site["tex"]
    assert "details" not in tex and "Show code" not in tex and "What <b>" not in tex
    # Line numbers and emphasis through Sphinx's own literal-block machinery.
    assert r"\fvset{hllines={, 2, 4, 5,}}" in tex
    assert "numbers=left,firstnumber=10" in tex and r"\fvset{hllines={, 1,}}" in tex
    # Collapsed parts printed in full (the MyST page's collapsed code and output).
    assert r"\PYG{n}{md\PYGZus{}value} \PYG{o}{=} \PYG{l+m+mi}{41}" in tex and "\nmyst 42\n" in tex


def test_latex_figures_are_floats_that_ref_numbers(site):
    tex = site["tex"]
    # A float with the caption (escaped) and the label that \ref numbers.
    figure = tex[tex.rindex(r"\begin{figure}", 0, tex.index(r"\label{\detokenize{index:fig-dot}}")):]
    figure = figure[: figure.index(r"\end{figure}")]
    assert r"\sphinxincludegraphics[width=120\sphinxpxdimen,height=3em]" in figure
    caption = r"One \sphinxstylestrong{dot} \textless{}script\textgreater{}alert(2)\textless{}/script\textgreater{} \& more"
    assert r"\caption{%s}" % caption in figure
    assert tex.count(r"\label{\detokenize{index:fig-dot}}") == 1
    assert r"\ref{\detokenize{index:fig-dot}}" in tex and r"\ref{\detokenize{md:fig-md}}" in tex
    assert r"\sphinxincludegraphics[width=0.500\linewidth]" in tex


def test_bad_values_are_located_warnings_and_the_cell_still_runs(site):
    said = site["warnings"]
    text = (site["src"] / "bad.rst").read_text()
    first = text.splitlines().index(".. live-cell:: alpha") + 1
    for message in (
        ":lineno-start: must be a whole number, not 'soon'",
        ":emphasize-lines: invalid line number spec: '2-x'",
        ":image-width: '10 furlongs' is not a length or percentage (300px, 80%, 300); left out",
        ':image-class: cannot make "!!!" into a class name; left out',
        ":emphasize-lines: line number spec is out of range (1-1): '1, 9'",
        ":collapse-output:, :figure-caption: have no effect with :hide-output:",
    ):
        line = next(line for line in said.splitlines() if message in line)
        assert re.search(r"bad\.rst:\d+: WARNING: live-cell: ", line) and "[livecells.config]" in line, line
    assert f"bad.rst:{first}: WARNING: live-cell: :lineno-start:" in said
    bad = page(site, "bad")
    still = cell_with(bad, "still runs")
    assert "still runs" in still.select_one(".livecells-output").get_text()
    assert numbered_lines(still) == (["1"], [])
    assert numbered_lines(cell_with(bad, "one line")) == ([], ['print("one line")'])
    hidden = cell_with(bad, '"hidden"')
    assert hidden.select("figure, details, .livecells-output") == []


def test_a_figure_of_a_cell_that_shows_nothing_is_warned_of(tmp_path, rootdir):
    """The caption alone would be a figure of nothing: said at the cell, per framework."""
    src = one_page_book(
        tmp_path, rootdir / "test-display" / "conf.py",
        "T\n=\n\n.. live-cell:: alpha\n   :figure-caption: Nothing shown\n\n   quiet = True\n\n"
        ".. live-cell:: alpha\n   :figure-caption: Something shown\n\n   print('shown')\n",
    )
    _, warnings = build_site(src, confoverrides={"livecells_execute": "off"})
    assert "WARNING" not in warnings  # no result by choice: nothing to say
    _, warnings = build_site(src, kernels=FakeKernels())
    said = [line for line in warnings.splitlines() if "WARNING" in line]
    assert len(said) == 1, said
    assert "index.rst:4: WARNING: live-cell [alpha]: :figure-caption:" in said[0]
    assert "a figure of its caption alone [livecells.output]" in said[0]


def test_display_options_do_not_run_a_page_again(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-display", src)
    for name in ("md.md", "bad.rst"):
        (src / name).unlink()
    index = src / "index.rst"
    index.write_text(index.read_text().replace("   md\n   bad\n", ""))
    kernels = FakeKernels()
    build_site(src, kernels=kernels)
    assert kernels.take() == [("index", "alpha"), ("index", "beta")]
    text = index.read_text()
    # Every display option off, changed or added; the code and the options that run stay.
    changed = re.sub(r"   :(linenos|code-below|collapse-code|collapse-output|emphasize-lines|image-[a-z]+|"
                     r"figure-[a-z]+|lineno-start):.*\n", "", text)
    changed = changed.replace(".. live-cell:: alpha\n", ".. live-cell:: alpha\n   :linenos:\n   :collapse-code:\n")
    assert changed != text
    index.write_text(changed)
    _, warnings = build_site(src, kernels=kernels)
    assert kernels.take() == []  # nothing ran again
    page = built_page(Path(src / "_build" / "html" / "index.html"))
    assert "tabbed alpha" in page.get_text() and page.select("figure") == [] and page.select("span.linenos") != []
    assert len(page.select("details.livecells-collapsed-code")) == 2  # the two alpha-only cells


def test_a_figure_printed_for_each_framework_in_latex_is_numbered_once(tmp_path, rootdir):
    """With every framework printed, a figure's second copy holds its caption unnumbered:
    LaTeX would number a second float anew."""
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-display", src)
    app, warnings = build_site(src, "latex", kernels=FakeKernels(), confoverrides={"livecells_latex_framework": "all"})
    tex = (Path(app.outdir) / "projectnamenotset.tex").read_text(encoding="utf-8")
    assert tex.count(r"\caption{One \sphinxstylestrong{dot}") == 1
    assert tex.count(r"\label{\detokenize{index:fig-dot}}") == 1
    second = tex[tex.index(r"\label{\detokenize{index:fig-dot}}"):]
    second = second[: second.index("a table, say")]
    assert r"\subsubsection*{Beta}" in second  # the copy, under its framework's label
    assert "livecells-output-figure" in second and "\\sphinxAtStartPar\nOne \\sphinxstylestrong{dot}" in second
    assert r"\begin{figure}" not in second and "fig-dot" not in second.partition("\n")[2]


def test_image_options_reach_a_recorded_figure_too(tmp_path):
    """A cell that does not run shows its recorded figure (d2lbook's ``output_*`` file) sized."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text('extensions = ["livecells"]\nlivecells_execute = "off"\n')
    (src / "output_index_1_0.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg" width="1" height="1"/>')
    (src / "index.rst").write_text(
        "Recorded\n========\n\n.. live-cell:: pytorch\n   :image-width: 50px\n   :image-alt: a recorded plot\n\n"
        "   plot()\n\n.. figure:: output_index_1_0.svg\n"
    )
    app, warnings = build_site(src)
    assert "WARNING" not in warnings, warnings
    image = built_page(Path(app.outdir) / "index.html").select_one("div.livecells-recorded img")
    assert image["alt"] == "a recorded plot" and image["style"].replace(" ", "") == "width:50px;"


def test_a_sized_svg_kept_in_the_page_links_nowhere(tmp_path, rootdir):
    """With HTML from cells off, an SVG output is a data: URI in the page (outputs.py): sized, it
    gets no link to itself, which would open it as a page."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(rootdir / "test-display" / "conf.py", src / "conf.py")
    svg = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'
    (src / "index.rst").write_text(
        "SVG\n===\n\n.. live-cell:: alpha\n   :image-width: 40px\n\n"
        f"   display({{'image/svg+xml': {svg!r}}}, raw=True)\n"
    )
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={"livecells_allow_html": False})
    assert "WARNING" not in warnings, warnings
    image = built_page(Path(app.outdir) / "index.html").select_one("img.livecells-image")
    assert image["src"].startswith("data:image/svg+xml;base64,") and image["style"].replace(" ", "") == "width:40px;"
    assert image.find_parent("a") is None


def test_the_book_sets_every_image_and_a_cell_overrides_it(tmp_path, rootdir):
    """livecells_image_options (MyST-NB's nb_render_image_options): a bad entry is a warning and
    left out, the rest reach every output image that its cell's :image-*: options do not set."""
    src = tmp_path / "src"
    src.mkdir()
    shutil.copy(rootdir / "test-display" / "conf.py", src / "conf.py")
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
    show = f"   import base64\n   from IPython.display import Image\n   Image(data=base64.b64decode({png!r}))\n"
    (src / "index.rst").write_text(
        f"Images\n======\n\n.. live-cell:: alpha\n\n{show}\n"
        f".. live-cell:: alpha\n   :image-width: 10px\n   :image-alt: its own\n\n{show}"
    )
    options = {"width": "77px", "alt": "a <plot>", "classes": ["wide"], "height": "tall", "scale": 50}
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={"livecells_image_options": options})
    said = [line for line in warnings.splitlines() if "WARNING" in line]
    assert said == [
        "WARNING: livecells_image_options: height: 'tall' is not a length (200px, 10em, 200); that entry is ignored "
        "[livecells.config]",
        "WARNING: livecells_image_options: 'scale': not one of width, height, alt, classes; that entry is ignored "
        "[livecells.config]",
    ], said
    first, second = built_page(Path(app.outdir) / "index.html").select("img.livecells-image")
    assert (first["alt"], first["style"].replace(" ", ""), first["class"]) == ("a <plot>", "width:77px;", ["livecells-image", "wide"])
    assert (second["alt"], second["style"].replace(" ", ""), second["class"]) == ("its own", "width:10px;", ["livecells-image", "wide"])


def test_downloaded_notebooks_mark_collapsed_cells_as_jupyter_does(site):
    """A collapsed part is collapsed in the page's notebook too: Jupyter's ``source_hidden`` and
    ``outputs_hidden``, and MyST-NB's ``hide-input``/``hide-output`` tags; other cells have none."""
    import json

    import nbformat

    def cells(framework: str) -> list[dict[str, Any]]:
        path = site["html"] / "_downloads" / "livecells" / f"index.{framework}.ipynb"
        nbformat.validate(nbformat.read(path, as_version=4))
        return [c for c in json.loads(path.read_text())["cells"] if c["cell_type"] == "code"]

    def marks(cell: dict[str, Any]) -> tuple[dict[str, bool], list[str]]:
        return cell["metadata"].get("jupyter", {}), cell["metadata"].get("tags", [])

    alpha, beta = cells("alpha"), cells("beta")
    # alpha: the tabbed cell (nothing), the `all` cells (output; code), the dot, the plain one.
    assert [marks(c) for c in alpha[:3]] == [
        ({}, []),
        ({"outputs_hidden": True}, ["hide-output"]),
        ({"source_hidden": True}, ["hide-input"]),
    ]
    assert marks(beta[0]) == ({"source_hidden": True, "outputs_hidden": True}, ["hide-input", "hide-output"])
    assert all(marks(c) == ({}, []) for c in alpha[3:])


@pytest.mark.browser
def test_printed_text_in_a_figure_keeps_its_lines_left_aligned(site):
    """A figure centres its content; a figure's printed output must not centre each of its lines
    (a printed table would fall apart): Chromium's computed alignment of the output's <pre>."""
    from browsing import chromium, serving

    with chromium() as browser, serving(site["html"]) as url:
        page = browser.new_page()
        page.goto(url + "index.html")
        aligned = page.evaluate(
            """() => Array.from(document.querySelectorAll('figure .livecells-output pre'))
                 .map(pre => getComputedStyle(pre).textAlign)"""
        )
        page.close()
    assert aligned and set(aligned) <= {"left", "start"}, aligned


@pytest.mark.slow
def test_a_collapsed_output_with_nothing_to_show_is_no_empty_toggle(tmp_path, rootdir):
    """A cell whose output is collapsed but shows nothing (no output, or only a named display,
    which prose quotes) gets no "Show output" line that opens onto nothing."""
    src = one_page_book(
        tmp_path, rootdir / "test-display" / "conf.py",
        "Empty\n=====\n\n.. live-cell:: alpha\n   :collapse-output:\n\n   x = 1\n\n"
        ".. live-cell:: alpha\n   :collapse-output: The value\n\n"
        "   display(3, metadata={'livecells': {'name': 'three'}})\n\n"
        ".. live-cell:: alpha\n   :collapse-output:\n\n   print('shown')\n\n"
        "Three is :live-value:`three`.\n"
    )
    app, warnings = build_site(src, kernels=FakeKernels())
    assert "WARNING" not in warnings, warnings
    index = built_page(Path(app.outdir) / "index.html")
    assert [d.get_text(" ", strip=True) for d in index.select("details")] == ["Show output Hide output shown"]
