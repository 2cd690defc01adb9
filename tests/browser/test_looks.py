"""Each kind of output looks like itself in every theme, light and dark: Chromium's computed styles.

tests/roots/test-looks is one page with a normal output, an error, a stderr output, a stored one
(its session ran in the first of two builds) and a recorded one (its framework's kernel does not
exist). It is built under alabaster, furo, pydata-sphinx-theme and sphinx-book-theme (sessions on
:class:`helpers.FakeKernels`: the looks are the subject), and looked at in headless Chromium in
each theme's light and dark mode (the operating system's choice, which furo, pydata and the book
theme follow by default; alabaster has no dark mode). Screenshots go to the test's tmp folder.
"""

from __future__ import annotations

import importlib.util
import itertools
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

import timing
from browsing import chromium, serving
from helpers import FakeKernels, build_site

pytestmark = pytest.mark.browser

#: theme -> its module (to skip a theme that is not installed) and its modes.
THEMES = {
    "alabaster": ("alabaster", ("light",)),
    "furo": ("furo", ("light", "dark")),
    "pydata_sphinx_theme": ("pydata_sphinx_theme", ("light", "dark")),
    "sphinx_book_theme": ("sphinx_book_theme", ("light", "dark")),
}
CASES = [(theme, mode) for theme, (_, modes) in THEMES.items() for mode in modes]
#: Each kind's output block, and the label it must carry (None: no label).
KINDS = {
    "normal": (".livecells-cell > div.livecells-stdout", None),
    "error": ("div.livecells-error", "error"),
    "stderr": ("div.livecells-stderr", "stderr"),
    "stored": (".livecells-from-store > div.livecells-stdout", "stored"),
    "recorded": ("div.livecells-recorded", "recorded"),
}
#: What Chromium computes for each kind: its <pre>'s left border and background, and the label
#: (the block's ::before content), the label's colour and its font size.
LOOK_JS = """([selectors, kinds]) => {
  const out = {};
  kinds.forEach((kind, i) => {
    const blocks = document.querySelectorAll(selectors[i]);
    if (blocks.length !== 1) { out[kind] = {count: blocks.length}; return; }
    const block = blocks[0], pre = block.querySelector('pre');
    const style = getComputedStyle(pre), label = getComputedStyle(block, '::before');
    const box = block.getBoundingClientRect();
    out[kind] = {count: 1, border: style.borderLeftColor, borderStyle: style.borderLeftStyle,
      borderWidth: style.borderLeftWidth, background: style.backgroundColor, text: pre.textContent,
      label: label.content, labelColor: label.color, labelDisplay: label.display,
      visible: box.width > 0 && box.height > 0};
  });
  out.page = getComputedStyle(document.body).backgroundColor;
  out.pageHtml = getComputedStyle(document.documentElement).backgroundColor;
  return out;
}"""


def installed(theme: str) -> bool:
    return importlib.util.find_spec(THEMES[theme][0]) is not None


@pytest.fixture(scope="module")
def sites(tmp_path_factory, rootdir) -> dict[str, Path]:
    """The root built twice under each installed theme: the second build runs the pytorch session
    again (its code changed) and shows the mxnet one from the store."""
    built = {}
    for theme in THEMES:
        if not installed(theme):
            continue
        src = tmp_path_factory.mktemp(f"looks-{theme}") / "src"
        shutil.copytree(rootdir / "test-looks", src)
        kernels = FakeKernels()
        overrides = {"html_theme": theme}
        build_site(src, kernels=kernels, confoverrides=overrides)
        first = kernels.take()
        page = src / "index.rst"
        page.write_text(page.read_text().replace('print("normal output")', 'print("normal output")  # again'))
        app, warnings = build_site(src, kernels=kernels, confoverrides=overrides)
        assert first == [("index", "mxnet"), ("index", "pytorch")], theme
        assert kernels.take() == [("index", "pytorch")], theme  # mxnet: from the store
        # The only warnings: the framework whose kernel does not exist, and its page.
        lines = [w for w in warnings.splitlines() if "WARNING" in w]
        assert len(lines) == 2 and all("no-such-kernel" in w for w in lines), warnings
        built[theme] = Path(app.outdir)
    return built


@pytest.fixture(scope="module")
def browser(sites) -> Any:
    """Debian's Chromium, started after the builds (see test_browser)."""
    with chromium() as started:
        yield started


def rgba(colour: str) -> tuple[float, ...]:
    """A computed colour (``rgb(...)``, ``rgba(...)``) as four numbers, alpha 1 by default."""
    numbers = [float(n) for n in re.findall(r"[\d.]+", colour)]
    assert len(numbers) in (3, 4), colour
    return tuple(numbers) + ((1.0,) if len(numbers) == 3 else ())


def luminance(colour: str) -> float:
    r, g, b, _ = rgba(colour)
    return (0.2126 * r + 0.7152 * g + 0.0722 * b) / 255


@pytest.mark.parametrize(("theme", "mode"), CASES)
def test_each_kind_of_output_looks_different(theme, mode, sites, browser, tmp_path):
    if not installed(theme):
        pytest.skip(f"{theme} is not installed")
    context = browser.new_context(color_scheme=mode, viewport={"width": 1100, "height": 1400})
    context.set_default_timeout(timing.BROWSER_MS)
    try:
        page = context.new_page()
        with serving(sites[theme]) as url:
            page.goto(url + "index.html")
            page.wait_for_load_state("load")
            page.screenshot(path=str(tmp_path / f"{theme}-{mode}.png"), full_page=True)
            look = page.evaluate(LOOK_JS, [[s for s, _ in KINDS.values()], list(KINDS)])
    finally:
        context.close()
    background = look["page"] if rgba(look["page"])[3] else look["pageHtml"]
    if mode == "dark":  # the theme did switch: otherwise the dark case tests nothing new
        assert luminance(background) < 0.3, (theme, background)
    for kind, (_, label) in KINDS.items():
        found = look[kind]
        assert found["count"] == 1 and found["visible"], (theme, mode, kind, found)
        assert found["borderWidth"] != "0px" and rgba(found["border"])[3] > 0, (theme, mode, kind, found)
        if label is None:
            assert found["label"] in ("none", "normal"), (theme, mode, kind, found)
        else:  # a word, not colour alone; in its own colour, readable on the page
            assert found["label"] == f'"{label}"' and found["labelDisplay"] != "none", (theme, mode, kind, found)
            assert abs(luminance(found["labelColor"]) - luminance(background)) > 0.25, (theme, mode, kind, found)
    assert "normal output" in look["normal"]["text"] and "stored output" in look["stored"]["text"]
    assert "recorded output" in look["recorded"]["text"] and "to stderr" in look["stderr"]["text"]
    assert "ValueError" in look["error"]["text"]
    # Each kind differs from normal output and from each other kind: border colour or style, or tint.
    seen = {kind: (found["border"], found["borderStyle"], found["background"]) for kind, found in look.items()
            if kind in KINDS}
    for one, other in itertools.combinations(KINDS, 2):
        assert seen[one] != seen[other], (theme, mode, one, other, seen)
    # Errors and stderr are tinted, and the tint is not the page's own background.
    for kind in ("error", "stderr"):
        assert rgba(seen[kind][2])[3] > 0 and seen[kind][2] != background, (theme, mode, kind, seen)
    assert seen["error"][0] != seen["stderr"][0], (theme, mode, seen)
