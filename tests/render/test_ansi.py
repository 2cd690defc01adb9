"""ANSI colours in output: the sixteen basic ones, the 256-colour table and true colour, in HTML
(classes, or an inline ``rgb()`` style) and LaTeX (xcolor), as nbconvert's ansi2html keeps them;
the text always escaped, malformed codes ignored. Real colour codes come from rich (its own
terminal rendering, in a build's cell on :class:`helpers.FakeKernels`)."""

from __future__ import annotations

import io
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from livecells.model.text import strip_ansi
from livecells.render.ansi import ansi_runs, ansi_to_html, ansi_to_latex, has_colours

import timing
from helpers import FakeKernels, build_site, cell_with, soup

ESC = "\x1b"


@pytest.mark.parametrize(
    ("text", "html"),
    [
        # 256 colours: the first sixteen are the basic ones (classes), then a 6x6x6 cube and greys.
        (f"{ESC}[38;5;1mx", '<span class="ansi-red-fg">x</span>'),
        (f"{ESC}[38;5;9mx", '<span class="ansi-red-intense-fg">x</span>'),
        (f"{ESC}[38;5;208mx", '<span style="color: rgb(255, 135, 0)">x</span>'),
        (f"{ESC}[38;5;16mx", '<span style="color: rgb(0, 0, 0)">x</span>'),
        (f"{ESC}[38;5;231mx", '<span style="color: rgb(255, 255, 255)">x</span>'),
        (f"{ESC}[38;5;232mx", '<span style="color: rgb(8, 8, 8)">x</span>'),
        (f"{ESC}[38;5;255mx", '<span style="color: rgb(238, 238, 238)">x</span>'),
        (f"{ESC}[48;5;21mx", '<span style="background-color: rgb(0, 0, 255)">x</span>'),
        # True colour, with ";" and with ":" (ITU T.416, with and without the colour space's id).
        (f"{ESC}[38;2;10;20;30mx", '<span style="color: rgb(10, 20, 30)">x</span>'),
        (f"{ESC}[38:2:10:20:30mx", '<span style="color: rgb(10, 20, 30)">x</span>'),
        (f"{ESC}[38:2::10:20:30mx", '<span style="color: rgb(10, 20, 30)">x</span>'),
        (f"{ESC}[48;2;1;2;3mx", '<span style="background-color: rgb(1, 2, 3)">x</span>'),
        (f"{ESC}[1;38:5:1mx", '<span class="ansi-bold ansi-red-fg">x</span>'),
        # With other codes in the same sequence, before and after; then reset by 39 and 0.
        (
            f"{ESC}[1;38;2;1;2;3;4ma{ESC}[39mb{ESC}[0mc",
            '<span class="ansi-bold ansi-underline" style="color: rgb(1, 2, 3)">a</span>'
            '<span class="ansi-bold ansi-underline">b</span>c',
        ),
        (
            f"{ESC}[38;5;208;48;2;0;0;128mx",
            '<span style="color: rgb(255, 135, 0); background-color: rgb(0, 0, 128)">x</span>',
        ),
    ],
)
def test_extended_colours_are_kept_in_html(text, html):
    assert ansi_to_html(text) == html


@pytest.mark.parametrize(
    "code",
    ["38;5", "38;5;256", "38;5;99999999999999999999", "38;2;1;2", "38;2;256;0;0", "38;2", "38", "38:5",
     "38:2:1", "58;5;1", "58;2;1;2;3", "58:2::1:2:3"],
)  # fmt: skip
def test_malformed_extended_colours_change_nothing_and_leave_no_trace(code):
    text = f"a{ESC}[{code}mb"
    assert ansi_to_html(text) == "ab" and ansi_to_latex(text) == "ab" and not has_colours(text)


def test_colours_never_let_markup_or_tex_through():
    hostile = '<script>alert("x")</script> & \\input{/etc/passwd} \\def\\x{y} {$^_%#~}'
    text = f"{ESC}[38;2;255;0;0m{hostile}{ESC}[0m {ESC}[38;5;208m{hostile}"
    html = ansi_to_html(text)
    assert "<script" not in html and "&lt;script&gt;" in html
    assert re.findall(r"<(\w+)", html) == ["span", "span"]
    tex = ansi_to_latex(text)
    # Without Pygments' escapes and the two \\textcolor commands, nothing special to TeX is left
    # but those commands' two closing braces.
    bare = re.sub(r"\\PYGZ\w+\{\}", "", tex)
    bare = re.sub(r"\\textcolor\[RGB\]\{\d+,\d+,\d+\}\{", "", bare)
    assert bare.count("}") == 2 and not set(bare.replace("}", "")) & set("\\{}$^_%#~&"), bare
    assert "\\PYGZbs{}input\\PYGZob{}/etc/passwd\\PYGZcb{}" in tex


def test_latex_commands_never_span_a_line():
    tex = ansi_to_latex(f"{ESC}[1;31mone\ntwo{ESC}[0m\nthree {ESC}[48;5;21mfour\n")
    assert tex.split("\n") == [
        "\\textcolor[RGB]{231,92,88}{\\textbf{one}}",
        "\\textcolor[RGB]{231,92,88}{\\textbf{two}}",
        "three {\\setlength{\\fboxsep}{0pt}\\colorbox[RGB]{0,0,255}{four}}",
        "",
    ]
    for line in tex.split("\n"):
        assert line.count("{") == line.count("}"), line


def test_rich_output_keeps_its_colours():
    rich = pytest.importorskip("rich.console")
    # Colours of their own per colour system: rich keeps a parsed style's codes whatever the system.
    for system, (orange, navy, near), shown in (
        ("256", ("#ff8700", "rgb(0,0,128)", "rgb(1,2,3)"), ("255, 135, 0", "0, 0, 135", "0, 0, 0")),
        ("truecolor", ("#ff8701", "rgb(0,0,129)", "rgb(1,2,4)"), ("255, 135, 1", "0, 0, 129", "1, 2, 4")),
    ):
        markup = f"[{orange}]orange[/] [bold red]red[/] [on {navy}]navy[/] [{near}]near black[/]"
        out = io.StringIO()
        rich.Console(file=out, force_terminal=True, color_system=system, width=200, highlight=False).print(markup)
        text = out.getvalue()
        assert ("[38;5;" if system == "256" else "[38;2;") in text and has_colours(text), text
        html = ansi_to_html(text)
        assert f'<span style="color: rgb({shown[0]})">orange</span>' in html, (system, html)
        assert '<span class="ansi-bold ansi-red-fg">red</span>' in html, (system, html)
        assert f'<span style="background-color: rgb({shown[1]})">navy</span>' in html, (system, html)
        assert f'<span style="color: rgb({shown[2]})">near black</span>' in html, (system, html)
        assert "".join(part for part, _ in ansi_runs(text)) == "orange red navy near black\n"


RICH_PAGE = '''Colours
=======

.. live-cell:: pytorch

   from rich.console import Console
   console = Console(force_terminal=True, color_system="truecolor", width=100, highlight=False)
   console.print("[#ff8000]orange[/] [bold red]red[/] <b>not bold</b> \\\\input{x}")
   console.print("[on rgb(0,0,130)]navy[/]")
'''


@pytest.fixture(scope="module")
def rich_site(tmp_path_factory, rootdir):
    pytest.importorskip("rich")
    src = tmp_path_factory.mktemp("ansi") / "src"
    shutil.copytree(rootdir / "test-looks", src)
    (src / "index.rst").write_text(RICH_PAGE)
    kernels = FakeKernels()
    html_app, html_warnings = build_site(src, kernels=kernels)
    latex_app, latex_warnings = build_site(src, "latex", kernels=kernels)
    return {
        "html": Path(html_app.outdir), "latex": Path(latex_app.outdir),
        "warnings": html_warnings + latex_warnings, "ran": kernels.take(),
    }  # fmt: skip


def test_a_cells_rich_output_keeps_its_colours_in_html(rich_site):
    assert rich_site["ran"] == [("index", "pytorch")]
    assert "WARNING" not in rich_site["warnings"].replace("no-such-kernel", ""), rich_site["warnings"]
    cell = cell_with(soup(rich_site["html"] / "index.html"), "Console")
    out = cell.select_one("div.livecells-stdout pre")
    assert out.select_one('span[style="color: rgb(255, 128, 0)"]').get_text() == "orange"
    assert out.select_one("span.ansi-bold.ansi-red-fg").get_text() == "red"
    assert out.select_one('span[style="background-color: rgb(0, 0, 130)"]').get_text() == "navy"
    assert "<b>not bold</b> \\input{x}" in out.get_text() and out.select_one("b") is None


def test_a_cells_rich_output_keeps_its_colours_in_latex(rich_site):
    main = next(rich_site["latex"].glob("*.tex"))
    tex = main.read_text(encoding="utf-8")
    block = re.search(
        r"\\begingroup\\livecellsstyleoutputcell\n\\begin\{sphinxVerbatim\}\[commandchars=\\\\\\\{\\\}\]\n"
        r"(.*?)\n\\end\{sphinxVerbatim\}\n\\endgroup",
        tex, re.S,
    )  # fmt: skip
    assert block is not None, tex[-3000:]
    lines = block.group(1).split("\n")
    assert lines[0].startswith("\\textcolor[RGB]{255,128,0}{orange} \\textcolor[RGB]{231,92,88}{\\textbf{red}} ")
    assert "\\PYGZlt{}b\\PYGZgt{}not bold\\PYGZlt{}/b\\PYGZgt{} \\PYGZbs{}input\\PYGZob{}x\\PYGZcb{}" in lines[0]
    assert lines[1] == "{\\setlength{\\fboxsep}{0pt}\\colorbox[RGB]{0,0,130}{navy}}"
    assert "\x1b" not in tex and "[38;2" not in tex
    if shutil.which("latexmk") is None:
        return  # TeX is not installed here: the .tex is checked, not compiled
    done = subprocess.run(
        ["latexmk", "-pdf", "-interaction=nonstopmode", "-halt-on-error", main.name],
        cwd=rich_site["latex"], capture_output=True, text=True, timeout=timing.PROCESS,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:]


def test_ansi_is_stripped_or_turned_into_escaped_spans():
    text = "\x1b[31mred <b>\x1b[0m plain \x1b[2K"
    assert strip_ansi(text) == "red <b> plain "
    assert ansi_to_html(text) == '<span class="ansi-red-fg">red &lt;b&gt;</span> plain '
