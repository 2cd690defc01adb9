"""The framework tabs in a real browser: headless Chromium, driven by Playwright, over a built site.

tests/roots/test-browser is two pages (furo, the theme of the livecells docs), each with two
pytorch/mxnet tab sets whose cells print which page, set and framework they are, and a third page
of framework prose (``live-text``): in the tabs of a cell group, and standing alone. The site is built
once (its sessions on :class:`helpers.FakeKernels`: the tabs are the subject), served by
``http.server`` on 127.0.0.1, and each test gets a fresh browser context (so an empty
localStorage, where sphinx-design keeps the chosen tab).
"""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Iterator
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from importlib.metadata import version
from pathlib import Path
from typing import Any

import pytest

from helpers import FakeKernels, build_site

# sphinx-design 0.8 keeps the reader's choice across pages (localStorage) and rings the focused tab;
# it needs Python 3.11, and before it neither happens (docs/installation.rst).
SPHINX_DESIGN_0_8 = pytest.mark.skipif(
    tuple(int(n) for n in version("sphinx-design").split(".")[:2]) < (0, 8),
    reason="sphinx-design < 0.8 (the newest on Python 3.10) keeps no choice across pages, rings no focused tab",
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]

sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (the test extra)")
if not CHROMIUM.exists():
    pytest.skip(f"no Chromium at {CHROMIUM} (.ci/run installs Debian's chromium)", allow_module_level=True)
expect = sync_api.expect

LABELS = {"pytorch": "PyTorch", "mxnet": "MXNet"}

# Each tab set's visible panels, by the label of their tab.
SHOWN_JS = """() => Array.from(document.querySelectorAll('div.sd-tab-set')).map(set =>
  Array.from(set.querySelectorAll(':scope > .sd-tab-content'))
    .filter(panel => panel.checkVisibility())
    .map(panel => panel.previousElementSibling.textContent.trim()))"""
# What has the keyboard focus: the label of a focused tab radio, else the tag name.
FOCUS_JS = """() => { const el = document.activeElement;
  if (el && el.matches('div.sd-tab-set > input')) {
    return {tab: el.nextElementSibling.textContent.trim(),
            set: Array.from(document.querySelectorAll('div.sd-tab-set')).indexOf(el.parentElement),
            outline: getComputedStyle(el.nextElementSibling).outlineStyle};
  }
  return {tag: el ? el.tagName : null}; }"""


class _QuietHandler(SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base's name
        """Keep the request log out of the test output."""


@pytest.fixture(scope="module")
def site(tmp_path_factory, rootdir) -> dict[str, Any]:
    """Build the browser root once; its pages, warnings and the sessions that ran."""
    src = tmp_path_factory.mktemp("browser") / "src"
    shutil.copytree(rootdir / "test-browser", src)
    kernels = FakeKernels()
    app, warnings = build_site(src, kernels=kernels)
    return {"outdir": Path(app.outdir), "warnings": warnings, "ran": kernels.take()}


@pytest.fixture(scope="module")
def server(site) -> Iterator[str]:
    """The built site over HTTP on a free port of 127.0.0.1; its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(site["outdir"]))
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, name="test-browser-http", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=10)


@pytest.fixture(scope="module")
def browser(site) -> Iterator[Any]:
    """Debian's Chromium, headless, through Playwright (no browser download). After the build:
    Playwright's sync API runs an asyncio loop in this thread, where the build's kernels cannot
    start theirs (so a test run alone, ``-k``, would otherwise fail)."""
    playwright = sync_api.sync_playwright().start()
    try:
        chromium = playwright.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield chromium
        finally:
            chromium.close()
    finally:
        playwright.stop()


@pytest.fixture
def page(browser) -> Iterator[Any]:
    """A page in a fresh context: no tab chosen yet."""
    context = browser.new_context()
    context.set_default_timeout(10_000)
    try:
        yield context.new_page()
    finally:
        context.close()


def shown(page: Any) -> list[list[str]]:
    return page.evaluate(SHOWN_JS)


def expect_framework(page: Any, prefix: str, framework: str, other: str) -> None:
    """Every tab set of the page shows ``framework``'s panel, its output visible, the other's not."""
    assert shown(page) == [[LABELS[framework]], [LABELS[framework]]]
    for tab_set in ("one", "two"):
        expect(output(page, f"{prefix}-{tab_set} {framework}")).to_be_visible()
        expect(output(page, f"{prefix}-{tab_set} {other}")).to_be_hidden()


def output(page: Any, text: str) -> Any:
    return page.locator("div.livecells-output", has_text=text)


def prose(page: Any, text: str) -> Any:
    return page.locator("div.livecells-text", has_text=text)


def expect_prose_page(page: Any, framework: str, other: str) -> None:
    """prose.html's two sets (cells with prose in their tabs; prose alone) show ``framework``'s
    code and prose, and none of the other's."""
    assert shown(page) == [[LABELS[framework]], [LABELS[framework]]]
    for name, visible in ((framework, True), (other, False)):
        for element in (
            output(page, f"prose-code {name}"),
            prose(page, f"prose-panel {name}"),
            prose(page, f"prose-alone {name}"),
        ):
            if visible:
                expect(element).to_be_visible()
            else:
                expect(element).to_be_hidden()


def test_site_built_cleanly(site):
    assert "WARNING" not in site["warnings"], site["warnings"]
    assert site["ran"] == [(page, fw) for page in ("index", "next", "prose") for fw in ("mxnet", "pytorch")]
    for name in ("index.html", "next.html", "prose.html"):
        assert (site["outdir"] / name).read_text(encoding="utf-8").count('class="sd-tab-set') == 2


@SPHINX_DESIGN_0_8
def test_choice_syncs_every_tab_set_and_persists_to_the_next_page(page, server):
    page.goto(server + "next.html")
    expect_framework(page, "next", "pytorch", "mxnet")  # the default, before any choice

    page.goto(server + "index.html")
    expect_framework(page, "index", "pytorch", "mxnet")
    page.locator("div.sd-tab-set").nth(1).locator("label.sd-tab-label", has_text="MXNet").click()
    expect_framework(page, "index", "mxnet", "pytorch")  # the first set follows the second
    assert page.evaluate("() => localStorage.getItem('sphinx-design-tab-id-framework')") == "mxnet"

    page.locator("article").get_by_role("link", name="the next page").click()
    page.wait_for_url("**/next.html")
    expect_framework(page, "next", "mxnet", "pytorch")

    page.locator("div.sd-tab-set").first.locator("label.sd-tab-label", has_text="PyTorch").click()
    page.go_back()
    page.wait_for_url("**/index.html")
    page.reload()
    expect_framework(page, "index", "pytorch", "mxnet")


@SPHINX_DESIGN_0_8
def test_keyboard_reaches_and_switches_the_tabs(page, server):
    page.goto(server + "index.html")
    focus: dict[str, Any] = {}
    for _ in range(60):  # Tab through the furo header and sidebar to the first tab set
        page.keyboard.press("Tab")
        focus = page.evaluate(FOCUS_JS)
        if "tab" in focus:
            break
    # One tab stop per tab set, on the chosen tab, with a visible focus ring on its label.
    assert focus == {"tab": "PyTorch", "set": 0, "outline": "auto"}

    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUS_JS)["tab"] == "MXNet"
    expect_framework(page, "index", "mxnet", "pytorch")
    page.keyboard.press("ArrowLeft")
    expect_framework(page, "index", "pytorch", "mxnet")
    page.keyboard.press("ArrowDown")
    expect_framework(page, "index", "mxnet", "pytorch")

    page.keyboard.press("Tab")  # on to the second set, whose chosen tab is MXNet too
    assert page.evaluate(FOCUS_JS) == {"tab": "MXNet", "set": 1, "outline": "auto"}
    page.keyboard.press("ArrowUp")
    expect_framework(page, "index", "pytorch", "mxnet")

    # Space selects a focused tab that is not chosen (where a screen reader's cursor can put it).
    page.locator("div.sd-tab-set").first.locator("input").nth(1).focus()
    expect_framework(page, "index", "pytorch", "mxnet")
    page.keyboard.press("Space")
    expect_framework(page, "index", "mxnet", "pytorch")

    page.goto(server + "next.html")  # a choice made with the keyboard persists like a click
    expect_framework(page, "next", "mxnet", "pytorch")


@SPHINX_DESIGN_0_8
def test_one_choice_switches_code_and_prose_on_every_page(page, server):
    page.goto(server + "prose.html")
    expect_prose_page(page, "pytorch", "mxnet")
    sets = page.locator("div.sd-tab-set")
    sets.nth(1).locator("label.sd-tab-label", has_text="MXNet").click()  # in the prose-only set
    expect_prose_page(page, "mxnet", "pytorch")  # the code, and the prose in its tab, follow
    assert page.evaluate("() => localStorage.getItem('sphinx-design-tab-id-framework')") == "mxnet"

    page.locator("article").get_by_role("link", name="the first page").click()
    page.wait_for_url("**/index.html")
    expect_framework(page, "index", "mxnet", "pytorch")
    sets.first.locator("label.sd-tab-label", has_text="PyTorch").click()  # a code tab, elsewhere
    page.goto(server + "prose.html")
    expect_prose_page(page, "pytorch", "mxnet")

    sets.first.locator("label.sd-tab-label", has_text="MXNet").click()  # the cells' set
    expect_prose_page(page, "mxnet", "pytorch")


@SPHINX_DESIGN_0_8
def test_keyboard_in_a_prose_only_set_switches_the_code_too(page, server):
    page.goto(server + "prose.html")
    page.locator("div.sd-tab-set").nth(1).locator("input:checked").focus()
    assert page.evaluate(FOCUS_JS) == {"tab": "PyTorch", "set": 1, "outline": "auto"}
    page.keyboard.press("ArrowRight")
    assert page.evaluate(FOCUS_JS)["tab"] == "MXNet"
    expect_prose_page(page, "mxnet", "pytorch")
    page.keyboard.press("ArrowLeft")
    expect_prose_page(page, "pytorch", "mxnet")
