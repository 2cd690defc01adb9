"""Launch links (``livecells_launch``): each page's notebook of each framework opened in Colab,
Binder, Studio Lab or an author's service, beside its download link and, under
sphinx-book-theme, in the theme's launch menu; URLs made from checked templates with escaped
values; a bad template is a located warning and only that entry is dropped. The pages are
tests/roots/test-alabaster's (sessions on :class:`helpers.FakeKernels`)."""

from __future__ import annotations

import importlib.util
import re
import shutil
from pathlib import Path

import pytest

from livecells.model.launch import LaunchTarget, check_template, launch_target

from helpers import FakeKernels, build_site, soup

COLAB = "https://colab.research.google.com/github/ORG/REPO/blob/gh-pages/{path}"
BINDER = "https://mybinder.org/v2/gh/ORG/REPO/main?labpath={path}"
STUDIOLAB = "https://studiolab.sagemaker.aws/import/github/ORG/d2l-{framework}-sagemaker/blob/main/{docname}.ipynb"
LAUNCH = f"""
livecells_launch = {{
    "colab": {COLAB!r},
    "binder": {BINDER!r},
    "studiolab": {{"pytorch": {STUDIOLAB!r}}},
    "bad": "javascript:alert(1)//{{path}}",
    "Own hub": "https://hub.example.org/open?nb={{path}}&fw={{framework}}&page={{docname}}",
}}
"""


def site(tmp_path: Path, rootdir: Path, conf: str, **overrides) -> tuple[Path, Path, str]:
    """The alabaster root with ``conf`` added to its conf.py, built: its source, output, warnings."""
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-alabaster", src)
    with open(src / "conf.py", "a") as handle:
        handle.write(conf)
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={"html_theme": "alabaster", **overrides})
    return src, Path(app.outdir), warnings


# -- templates -------------------------------------------------------------------------------------


def test_a_url_puts_in_each_value_percent_encoded():
    target = launch_target("Own hub", "https://hub.example.org/{framework}/{docname}?p={path}")
    assert target.label == "Own hub" and target.raw() == "https://hub.example.org/{framework}/{docname}?p={path}"
    url = target.url("pytorch", 'a dir/we"ird<&>#?page', '_downloads/livecells/a dir/we"ird<&>#?page.pytorch.ipynb')
    assert url == (
        "https://hub.example.org/pytorch/a%20dir/we%22ird%3C%26%3E%23%3Fpage"
        "?p=_downloads/livecells/a%20dir/we%22ird%3C%26%3E%23%3Fpage.pytorch.ipynb"
    )
    assert not set(url) & set(' "<>\\')


def test_known_services_have_their_labels_and_per_framework_templates():
    target = launch_target("studiolab", {"pytorch": STUDIOLAB})
    assert isinstance(target, LaunchTarget) and target.label == "SageMaker Studio Lab"
    assert target.url("mxnet", "index", "x") is None
    assert target.url("pytorch", "ch/index", "x") == (
        "https://studiolab.sagemaker.aws/import/github/ORG/d2l-pytorch-sagemaker/blob/main/ch/index.ipynb"
    )
    assert launch_target("colab", COLAB).label == "Colab" and launch_target("binder", BINDER).label == "Binder"


@pytest.mark.parametrize(
    ("template", "why"),
    [
        ("javascript:alert(1)", "must start with https:// or http://"),
        ("data:text/html,x", "must start with https:// or http://"),
        ("https://x.org/{pth}", "unknown placeholder {pth}"),
        ("https://x.org/{}", "unknown placeholder {}"),
        ("https://x.org/{0}", "unknown placeholder {0}"),
        ("https://x.org/{path!r}", "unknown placeholder {path}"),
        ("https://x.org/{path:>9}", "unknown placeholder {path}"),
        ("https://x.org/{path", "braces do not match"),
        ("https://x.org/a b/{path}", "characters a URL cannot hold"),
        ('https://x.org/"><script>/{path}', "characters a URL cannot hold"),
        ("https://x.org/\\{path}", "characters a URL cannot hold"),
        ("", "non-empty string"),
        (None, "non-empty string"),
    ],
)
def test_a_bad_template_is_refused_with_its_reason(template, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        check_template(template)


# -- in a build --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def alabaster(tmp_path_factory, rootdir):
    return site(tmp_path_factory.mktemp("launch"), rootdir, LAUNCH)


def test_each_framework_gets_its_links_beside_its_download(alabaster):
    src, out, _ = alabaster
    for page in ("index", "second"):
        para = soup(out / f"{page}.html").select_one("p.livecells-downloads")
        links = [(a.get_text(), a["href"]) for a in para.select("a")]
        path = {fw: f"_downloads/livecells/{page}.{fw}.ipynb" for fw in ("pytorch", "mxnet")}
        assert links == [
            ("PyTorch", path["pytorch"]),
            ("Colab", COLAB.format(path=path["pytorch"])),
            ("Binder", BINDER.format(path=path["pytorch"])),
            ("SageMaker Studio Lab", STUDIOLAB.format(framework="pytorch", docname=page)),
            ("Own hub", f"https://hub.example.org/open?nb={path['pytorch']}&fw=pytorch&page={page}"),
            ("MXNet", path["mxnet"]),
            ("Colab", COLAB.format(path=path["mxnet"])),
            ("Binder", BINDER.format(path=path["mxnet"])),
            ("Own hub", f"https://hub.example.org/open?nb={path['mxnet']}&fw=mxnet&page={page}"),
        ], links
        assert para.get_text(" ", strip=True).startswith("Download notebook: PyTorch (open in Colab · Binder ·")
        for fw in ("pytorch", "mxnet"):  # {path} is where the notebook lies in the built site
            assert (out / path[fw]).is_file()
    assert "&amp;fw=pytorch" in (out / "index.html").read_text(encoding="utf-8")


def test_a_bad_entry_is_a_warning_at_its_conf_line_and_the_rest_stay(alabaster):
    src, out, warnings = alabaster
    lines = [w for w in warnings.splitlines() if "livecells_launch" in w]
    number = next(n for n, line in enumerate((src / "conf.py").read_text().splitlines(), 1) if "livecells_launch" in line)
    assert lines == [
        f"{src / 'conf.py'}:{number}: WARNING: livecells_launch: entry 'bad': the template must start with "
        "https:// or http://; that entry is ignored [livecells.config]"
    ], warnings
    assert "javascript" not in (out / "index.html").read_text(encoding="utf-8")


def test_a_value_that_is_no_mapping_is_a_warning_and_the_page_is_as_without(tmp_path, rootdir):
    _, out, warnings = site(tmp_path, rootdir, f"livecells_launch = [{COLAB!r}]\n")
    assert "livecells_launch = [" in warnings and "must be a mapping" in warnings, warnings
    para = soup(out / "index.html").select_one("p.livecells-downloads")
    assert para.get_text(" ", strip=True) == "Download notebook: PyTorch · MXNet"


# -- sphinx-book-theme's launch menu ----------------------------------------------------------------


BOOK = pytest.mark.skipif(importlib.util.find_spec("sphinx_book_theme") is None, reason="no sphinx-book-theme")


def menu(path: Path) -> list[tuple[str, str]]:
    """The entries of the page's launch menu (sphinx-book-theme's rocket): text, link."""
    return [
        (a.get_text(" ", strip=True), a["href"])
        for a in soup(path).select("div.dropdown-launch-buttons ul.dropdown-menu a.dropdown-item")
    ]


@pytest.mark.slow
@BOOK
def test_the_links_are_in_sphinx_book_themes_launch_menu(tmp_path, rootdir):
    _, out, warnings = site(tmp_path, rootdir, LAUNCH, html_theme="sphinx_book_theme")
    page = soup(out / "index.html")
    assert len(page.select("div.dropdown-launch-buttons")) == 1
    entries = menu(out / "index.html")
    path = "_downloads/livecells/index.pytorch.ipynb"
    assert ("Colab (PyTorch)", COLAB.format(path=path)) in entries, entries
    assert ("SageMaker Studio Lab (PyTorch)", STUDIOLAB.format(framework="pytorch", docname="index")) in entries
    assert [text for text, _ in entries] == [
        "Colab (PyTorch)", "Binder (PyTorch)", "SageMaker Studio Lab (PyTorch)", "Own hub (PyTorch)",
        "Colab (MXNet)", "Binder (MXNet)", "Own hub (MXNet)",
    ]  # fmt: skip
    # The theme's own logos for the services it knows; the URL's & escaped in the markup.
    assert page.select_one('div.dropdown-launch-buttons img[src$="logo_colab.png"]') is not None
    assert "open?nb=_downloads/livecells/index.pytorch.ipynb&amp;fw=pytorch" in (out / "index.html").read_text()


@BOOK
def test_the_links_join_the_themes_own_launch_group(tmp_path, rootdir):
    """A page the theme counts as a notebook (a kernelspec in its metadata) gets the theme's own
    launch group, from its launch_buttons; livecells' entries join it: one menu."""
    src = tmp_path / "src"
    options = (
        '\nhtml_theme_options = {"repository_url": "https://github.com/ORG/REPO", '
        '"launch_buttons": {"colab_url": "https://colab.research.google.com"}}\n'
    )
    shutil.copytree(rootdir / "test-alabaster", src)
    index = src / "index.rst"
    index.write_text(":kernelspec: python3\n\n" + index.read_text())
    with open(src / "conf.py", "a") as handle:
        handle.write(LAUNCH + options)
    app, warnings = build_site(src, kernels=FakeKernels(), confoverrides={"html_theme": "sphinx_book_theme"})
    out = Path(app.outdir)
    assert len(soup(out / "index.html").select("div.dropdown-launch-buttons")) == 1
    texts = [text for text, _ in menu(out / "index.html")]
    assert texts[0] == "Colab" and "Colab (PyTorch)" in texts and "Own hub (MXNet)" in texts, texts
    assert [text for text, _ in menu(out / "second.html")][0] == "Colab (PyTorch)"  # no group of the theme's


@BOOK
@pytest.mark.browser
def test_the_launch_menu_opens_in_chromium_with_the_links(tmp_path, rootdir):
    """The theme's own script opens the menu (Bootstrap's dropdown); a screenshot in tmp_path."""
    _, out, _ = site(tmp_path, rootdir, LAUNCH, html_theme="sphinx_book_theme")
    import browsing  # skips this test without Playwright or Chromium

    with browsing.chromium() as browser, browsing.serving(out) as url:
        context = browser.new_context(viewport={"width": 1200, "height": 800})
        try:
            page = context.new_page()
            page.goto(url + "index.html")
            items = page.locator("div.dropdown-launch-buttons a.dropdown-item")
            assert items.count() == 7 and not items.first.is_visible()
            page.click("div.dropdown-launch-buttons button.dropdown-toggle")
            items.first.wait_for(state="visible")
            page.screenshot(path=str(tmp_path / "launch-menu.png"))
            shown = [(items.nth(n).inner_text().strip(), items.nth(n).get_attribute("href")) for n in range(7)]
        finally:
            context.close()
    path = "_downloads/livecells/index.pytorch.ipynb"
    assert shown[0] == ("Colab (PyTorch)", COLAB.format(path=path)), shown
    assert shown[-1] == ("Own hub (MXNet)", "https://hub.example.org/open?nb=_downloads/livecells/index.mxnet.ipynb&fw=mxnet&page=index")
