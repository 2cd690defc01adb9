"""Notebooks for Colab and SageMaker (``livecells_hosted``) on real d2l-en pages, against d2lbook.

The fixtures (tests/data/d2l-hosted) are excerpts of seven d2l-en pages, cut by
``make_fixtures.py``, which also recorded the Colab and SageMaker notebooks that d2lbook 1.0.3
makes of them with d2l-en's own config.ini (``d2lbook.json``). Here ``convert`` turns them, with
that config.ini, into a book whose conf.py carries d2l-en's ``[colab]`` and ``[sagemaker]``
settings; Sphinx builds it (nothing runs: d2lbook's were not run either), and each service's
notebook of each page and framework is compared with d2lbook's: which exist, the installation cell and its header, the kernelspec,
Colab's GPU accelerator, the URLs of the images; and the launch link of each against the file.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest

from livecells.convert.tree import convert_tree

import paths
from helpers import build_site, soup

DATA = paths.DATA / "d2l-hosted"
TABS = ["pytorch", "mxnet", "jax", "tensorflow"]
PAGES = sorted(p.relative_to(DATA).with_suffix("").as_posix() for p in DATA.glob("*/*.md"))
SERVICES = ("colab", "sagemaker")
IMAGE = re.compile(r"!\[[^\]]*\]\(([^)]*)\)")

#: d2l-en's [colab] and [sagemaker] (config.ini) as livecells_hosted, read by hand.
HOSTED = {
    "colab": {
        "libs": {
            "mxnet": {"mxnet": "-U mxnet-cu112==1.9.1", "d2l": "d2l==RELEASE"},
            "pytorch": {"d2l": "d2l==RELEASE"},
            "tensorflow": {"d2l": "d2l==RELEASE"},
            "jax": {"d2l": "d2l==RELEASE", "flax": "flax", "jaxlib": "jaxlib"},
        },
        "gpu_pattern": "gpu",
        "images": {"img": "http://d2l.ai/_images"},
        # [colab] and [sagemaker] leave libs_header out: d2lbook's default.
        "header": "The following additional libraries are needed to run this\nnotebook. Note that running on "
        "Colab is experimental, please report a Github\nissue if you have any problem.",
    },
    "sagemaker": {
        "libs": {
            "mxnet": {"mxnet": "-U mxnet-cu112==1.9.1", "d2l": "..  # installing d2l"},
            "pytorch": {"d2l": ".. # installing d2l"},
            "tensorflow": {"d2l": ".. # installing d2l"},
            "jax": {"d2l": ".. # installing d2l"},
        },
        "kernel": {
            "mxnet": "conda_mxnet_p36", "pytorch": "conda_pytorch_p36",
            "tensorflow": "conda_tensorflow_p36", "jax": "conda_jax_p36",
        },
        "header": "Installing (updating) the following libraries for your Sagemaker\ninstance.",
    },
}
# The chapters' own # required_libs(...), in both.
for _entry in HOSTED.values():
    _entry["requires"] = {
        "chapter_gaussian-processes/gp-inference": ['"gpytorch"'],
        "chapter_reinforcement-learning/value-iter": ['"setuptools==66"', '"wheel==0.38.4"', '"gym==0.21.0"'],
    }
REPOS = {"mxnet": "d2l-en-colab", "pytorch": "d2l-pytorch-colab", "tensorflow": "d2l-tensorflow-colab", "jax": "d2l-jax-colab"}
COLAB = "https://colab.research.google.com/github/d2l-ai/{repo}/blob/master/{{path}}"
#: What the test adds to the conf.py that convert wrote.
CONF = f"""
source_suffix = {{".md": "markdown"}}
myst_enable_extensions = ["dollarmath"]
exclude_patterns = ["_build/**"]
livecells_execute = "off"
livecells_frameworks = {{t: {{"kernel": "python3", "preload": []}} for t in {TABS!r}}}
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("hosted-d2l")
    src = work / "d2l"
    for page in PAGES:
        (src / page).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(DATA / f"{page}.md", src / f"{page}.md")
    shutil.copy(DATA / "config.ini", src / "config.ini")
    book = work / "book"
    convert_tree(src, book, markdown=True)
    (book / "index.md").write_text("# Index\n\n```{toctree}\n" + "\n".join(PAGES) + "\n```\n", encoding="utf-8")
    conf: dict = {}
    exec((book / "conf.py").read_text(encoding="utf-8"), conf)
    with open(book / "conf.py", "a", encoding="utf-8") as handle:
        handle.write(CONF)
    app, warnings = build_site(book)
    expected = json.loads((DATA / "d2lbook.json").read_text(encoding="utf-8"))
    for tabs in expected.values():  # as nbformat reads a file: each text joined
        for notebooks in tabs.values():
            for page, notebook in notebooks.items():
                for number, cell in enumerate((notebook or {}).get("cells", [])):
                    cell["id"] = f"d2lbook-{number}"  # make_fixtures.py left out d2lbook's random ones
                notebooks[page] = notebook and nbformat.reads(json.dumps(notebook), as_version=4)
    return {"out": Path(app.outdir), "hosted": Path(app.outdir) / "_hosted", "warnings": warnings, "d2lbook": expected, "conf": conf}


def ours(built, service: str, framework: str, page: str) -> nbformat.NotebookNode | None:
    path = built["hosted"] / service / framework / f"{page}.ipynb"
    if not path.is_file():
        return None
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_convert_carries_d2l_ens_settings_into_conf_py(built):
    conf = built["conf"]
    assert conf["livecells_hosted"] == HOSTED
    assert conf["livecells_launch"] == {"colab": {fw: COLAB.format(repo=repo) for fw, repo in REPOS.items()}}
    assert conf["release"] == "1.0.3" and list(conf["livecells_frameworks"]) == ["pytorch", "mxnet", "jax", "tensorflow"]


def cases():
    return [(s, t, p) for s in SERVICES for t in TABS for p in PAGES]


def _install(notebook) -> tuple[str | None, str | None]:
    """The header's and the installation cell's text (None: no installation cell)."""
    cells = notebook.cells
    if len(cells) > 1 and cells[1].cell_type == "code" and cells[1].source.startswith("!pip install"):
        return cells[0].source, cells[1].source
    return None, None


def test_the_fixtures_are_what_make_fixtures_records():
    expected = json.loads((DATA / "d2lbook.json").read_text(encoding="utf-8"))
    assert sorted(expected) == list(SERVICES)
    assert all(sorted(expected[s][t]) == PAGES for s in SERVICES for t in TABS)


@pytest.mark.parametrize(("service", "framework", "page"), cases())
def test_a_notebook_where_d2lbook_makes_one_with_its_kernel_installation_and_gpu(built, service, framework, page):
    theirs = built["d2lbook"][service][framework][page]
    mine = ours(built, service, framework, page)
    assert (mine is None) == (theirs is None)
    if theirs is None:
        return
    assert mine.metadata.kernelspec == theirs.metadata.kernelspec
    assert mine.metadata.get("accelerator") == theirs.metadata.get("accelerator")
    header, install = _install(mine)
    their_header, their_install = _install(theirs)
    assert header == their_header
    if their_install is None:
        assert install is None
        return
    # d2lbook orders the imported libs by a set (PYTHONHASHSEED): livecells by the settings.
    # The page's requirements follow them, in the page's order, in both.
    assert sorted(install.splitlines()) == sorted(their_install.splitlines())
    required = [f"!pip install {r}" for r in HOSTED[service]["requires"].get(page, [])]
    assert install.splitlines()[len(install.splitlines()) - len(required) :] == required
    assert their_install.splitlines()[len(their_install.splitlines()) - len(required) :] == required
    assert install.endswith("\n") and their_install.endswith("\n")


@pytest.mark.parametrize(("service", "framework", "page"), cases())
def test_images_at_d2lbooks_urls_and_at_their_own_where_d2lbook_misses_them(built, service, framework, page):
    theirs = built["d2lbook"][service][framework][page]
    if theirs is None:
        return
    mine = ours(built, service, framework, page)
    their_urls = [u for c in theirs.cells if c.cell_type == "markdown" for u in IMAGE.findall(c.source)]
    my_urls = [u for c in mine.cells if c.cell_type == "markdown" for u in IMAGE.findall(c.source)]
    assert len(my_urls) == len(their_urls)
    for my, their in zip(my_urls, their_urls):
        if their.startswith("http"):
            assert my == their  # replace_svg_url's rewrite, the same
        elif service == "colab":
            # Left relative by d2lbook (PNGs; SVGs with a "-" in the name): at d2l.ai here.
            assert my == "http://d2l.ai/_images/" + their.removeprefix("../img/")
        else:
            assert my == their  # SageMaker has no image rule: relative to the page in both


def test_which_images_d2lbook_leaves_relative_on_colab(built):
    """What livecells rewrites beyond d2lbook, named: a PNG, and an SVG whose name has a "-"
    (d2lbook's pattern ``[\\.-_\\w\\d]+`` is a range from "." to "_", without "-")."""
    relative = sorted({
        u for t in TABS for nb in built["d2lbook"]["colab"][t].values() if nb
        for c in nb.cells if c.cell_type == "markdown"
        for u in IMAGE.findall(c.source) if not u.startswith("http")
    })  # fmt: skip
    assert relative == ["../img/filters.png", "../img/lenet-vert.svg"]


def test_each_colab_link_opens_the_pages_colab_notebook(built):
    checked = 0
    for page in PAGES:
        html = soup(built["out"] / f"{page}.html")
        for link in html.select("a.livecells-launch"):
            match = re.fullmatch(r"https://colab\.research\.google\.com/github/d2l-ai/([^/]+)/blob/master/(.+)", link["href"])
            assert match, link["href"]
            framework = next(fw for fw, repo in REPOS.items() if repo == match[1])
            assert (built["hosted"] / "colab" / framework / unquote(match[2])).is_file()
            checked += 1
    assert checked == sum(1 for t in TABS for p in PAGES if built["d2lbook"]["colab"][t][p] is not None)


def test_the_code_is_the_pages(built):
    """A hosted notebook's code cells are the download notebook's: the code the page shows."""
    for service, framework, page in cases():
        mine = ours(built, service, framework, page)
        if mine is None:
            continue
        download = nbformat.read(built["out"] / "_downloads" / "livecells" / f"{page}.{framework}.ipynb", as_version=4)
        code = [c.source for c in mine.cells if c.cell_type == "code"]
        assert code[1 if _install(mine)[1] else 0 :] == [c.source for c in download.cells if c.cell_type == "code"]
