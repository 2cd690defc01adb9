"""Notebooks for hosted services (``livecells_hosted``): the rules of :mod:`livecells.model.hosted`
(installation cell, kernel, GPU, image URLs), the value checked entry by entry with located
warnings, and books built with it: the files, their launch links, odd page names, images the
settings do not place, notebooks pruned and written again. The rules against d2lbook's own
output on real d2l pages: tests/render/test_hosted_d2l.py."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import nbformat
import pytest

from livecells.config import read_config
from livecells.model.hosted import HostedService, dress, hosted_service, imported_modules

from helpers import FakeKernels, build_site, said, soup

# -- the rules ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "modules"),
    [
        ("import torch\nfrom torch import nn", {"torch"}),
        ("from d2l import torch as d2l", {"d2l"}),
        ("import jax.numpy as jnp, flax.linen", {"jax", "flax"}),
        ("from .local import thing\nfrom . import other", set()),
        ("# import d2l\nx = 'import mxnet'", set()),
        ("def f():\n    import optax\n    return optax", {"optax"}),
        # IPython's own syntax: its lines are left out, the rest parses.
        ("%matplotlib inline\nimport numpy as np\n!pip list\nfrom d2l import torch as d2l", {"numpy", "d2l"}),
        # Does not parse: read line by line.
        ("import torch\nprint(1 +)\n  from d2l import torch as d2l\nx = 1  # import mxnet", {"torch", "d2l"}),
    ],
)
def test_the_modules_a_cell_imports(code, modules):
    assert imported_modules(code) == modules


D2L = hosted_service("colab", {
    "libs": {"mxnet": {"mxnet": "-U mxnet-cu112==1.9.1", "d2l": "d2l==RELEASE"}, "jax": {"d2l": "d2l==RELEASE", "flax": "flax"}},
    "requires": {"ch/rl": ['"gym==0.21.0"', "wheel"]},
    "header": "Libraries first.",
    "gpu_pattern": "gpu",
    "images": {"img": "http://d2l.ai/_images/"},
})  # fmt: skip


def test_the_installation_is_the_imported_libs_in_the_settings_order_then_the_pages():
    code = ["from flax import linen as nn", "from d2l import jax as d2l"]
    assert D2L.installs("jax", code, "ch/rl", "1.0.3") == ["d2l==1.0.3", "flax", '"gym==0.21.0"', "wheel"]
    assert D2L.installs("jax", ["import jax"], "ch/other", "1.0.3") == []
    assert D2L.installs("pytorch", ["from d2l import torch"], "ch/rl", "1.0.3") == ['"gym==0.21.0"', "wheel"]
    # Without a release, a lib pinned to it is left out (the build warns of it).
    assert D2L.installs("mxnet", ["from d2l import mxnet", "import mxnet"], "x", "") == ["-U mxnet-cu112==1.9.1"]


def page_notebook(*code: str) -> dict:
    cells = [{"cell_type": "markdown", "id": "cell-0", "metadata": {}, "source": "# Page"}]
    cells += [{"cell_type": "code", "id": f"cell-{n}", "execution_count": None, "metadata": {}, "outputs": [], "source": c}
              for n, c in enumerate(code, 1)]
    return {"cells": cells, "metadata": {"kernelspec": {"name": "own"}, "livecells": {"page": "p"}}, "nbformat": 4, "nbformat_minor": 5}


def test_dress_puts_the_installation_and_header_first_and_sets_the_kernel_and_gpu():
    page = page_notebook("from d2l import mxnet as d2l", "x = d2l.try_gpu()")
    before = json.dumps(page)
    notebook = dress(page, D2L, "mxnet", "ch/page", "1.0.3", D2L.kernelspec("mxnet", {"name": "own"}))
    assert json.dumps(page) == before  # the page's notebook is left as it was
    assert [c["source"] for c in notebook["cells"][:2]] == ["Libraries first.", "!pip install d2l==1.0.3\n"]
    assert [c["id"] for c in notebook["cells"]] == [f"cell-{n}" for n in range(5)]
    assert notebook["metadata"]["kernelspec"] == {"name": "python3", "display_name": "Python 3"}
    assert notebook["metadata"]["accelerator"] == "GPU"
    assert notebook["metadata"]["livecells"] == {"page": "p", "service": "colab"}
    nbformat.validate(nbformat.from_dict(notebook))
    # Nothing to install: no header either; no "gpu" in the code: no accelerator.
    plain = dress(page_notebook("print('GPU')"), D2L, "mxnet", "ch/page", "1.0.3", {"name": "x", "display_name": "x"})
    assert [c["cell_type"] for c in plain["cells"]] == ["markdown", "code"] and "accelerator" not in plain["metadata"]


def test_the_kernel_per_framework_else_the_services_else_the_frameworks_own():
    own = {"name": "torch-env", "display_name": "PyTorch (torch-env)", "language": "python"}
    sagemaker = hosted_service("sagemaker", {"kernel": {"pytorch": "conda_pytorch_p36"}})
    assert sagemaker.kernelspec("pytorch", own) == {"name": "conda_pytorch_p36", "display_name": "conda_pytorch_p36"}
    assert sagemaker.kernelspec("mxnet", own) == own
    assert hosted_service("colab", {}).kernelspec("mxnet", own) == {"name": "python3", "display_name": "Python 3"}
    assert hosted_service("lab", {"kernel": "python3"}).kernelspec("mxnet", own)["display_name"] == "Python 3"


def test_images_under_a_folder_go_to_its_url_quoted():
    assert D2L.image_url("img/lenet.svg") == "http://d2l.ai/_images/lenet.svg"
    assert D2L.image_url("img/sub/a b(1)#.png") == "http://d2l.ai/_images/sub/a%20b%281%29%23.png"
    assert D2L.image_url("imgs/lenet.svg") is None and D2L.image_url("other/img/x.png") is None
    everything = hosted_service("lab", {"images": {"": "https://example.org/src"}})
    assert everything.image_url("ch/fig.png") == "https://example.org/src/ch/fig.png"


def test_an_entry_gives_back_what_conf_py_gave():
    assert hosted_service("colab", D2L.raw()) == D2L


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        ({"lib": {}}, "unknown setting 'lib'"),
        ({"folder": "out/{page}"}, "unknown placeholder {page}"),
        ({"folder": ""}, "folder: must be a non-empty string"),
        ({"libs": {"pytorch": {"d2l": "d2l\n!rm -rf ~"}}}, "must be one line"),
        ({"libs": {"pytorch": {"d2l.torch": "d2l"}}}, "is not a module's name"),
        ({"libs": {"pytorch": ["d2l"]}}, "must be a mapping of module -> pip arguments"),
        ({"requires": {"ch/p": "gpytorch"}}, "must be a list of pip arguments"),
        ({"requires": {"ch/p": ["gpy\x00torch"]}}, "without control characters"),
        ({"kernel": "conda python3"}, "is not a kernel's name"),
        ({"images": {"img": "javascript:alert(1)"}}, "must start with https:// or http://"),
        ({"images": {"img": 'https://x.org/"><script>'}}, "characters a URL cannot hold"),
        ({"images": {"img": "https://x.org/a(b)"}}, "parentheses would end a markdown link"),
        ({"images": {"../img": "https://x.org"}}, "is not a folder relative to the source folder"),
        ({"header": "\ud800"}, "lone surrogates"),
        ("colab", "must be a mapping of settings"),
    ],
)
def test_a_bad_entry_is_refused_with_its_reason(entry, why):
    with pytest.raises(ValueError, match=re.escape(why)):
        hosted_service("colab", entry)


def test_entries_are_checked_against_the_books_frameworks():
    messages: list[str] = []
    config = read_config({
        "frameworks": {"pytorch": {}, "mxnet": {}},
        "hosted": {
            "colab": {"libs": {"pytorch": {"d2l": "d2l"}, "pytroch": {"d2l": "d2l"}}},
            "flat": {"folder": "one"},
            "again": {"folder": "_hosted/colab/{framework}"},
            "bad name/": {},
        },
    }, said(messages))  # fmt: skip
    assert [s.name for s in config.hosted] == ["colab"]
    assert dict(config.hosted[0].libs) == {"pytorch": (("d2l", "d2l"),)}
    assert messages == [
        "livecells_hosted: entry 'bad name/': the service's name must be letters, digits, '.', '_' or '-'; "
        "that entry is ignored",
        "livecells_hosted: entry 'colab': libs or kernel for pytroch, not in livecells_frameworks (pytorch, mxnet); "
        "those are ignored",
        "livecells_hosted: entry 'flat': folder 'one' has no {framework}: the notebooks of several frameworks "
        "would overwrite each other; that entry is ignored",
        "livecells_hosted: entry 'again': its folder is 'colab''s too; that entry is ignored",
    ]


# -- books built with it -------------------------------------------------------------------------------

FIGURES = """\
Figures "and" <b>tags</b>
=========================

.. figure:: img/a&b(1).svg

   A [caption] with *markup* and a \\\\ backslash.

.. image:: pics/other.svg
   :alt: not placed

.. live-cell:: pytorch

   import json  # a gpu
   print("</script>")

.. live-cell:: mxnet

   import base64
"""
SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="4" height="4"><rect width="4" height="4"/></svg>'
# FakeKernels run the cells in the test's process: the libs are keyed by light modules.
CONF = """
release = "2.0"
livecells_hosted = {
    "colab": {"libs": {"pytorch": {"json": "d2l==RELEASE"}}, "header": "Install first.", "gpu_pattern": "gpu",
              "images": {"img": "https://example.org/_images"}},
    "sagemaker": {"kernel": {"pytorch": "conda_pytorch_p36"}, "libs": {"mxnet": {"base64": "mxnet==RELEASE"}},
                  "release": "1.9.1", "requires": {"c#dir/odd page?": ['"gpytorch"']}},
}
livecells_launch = {
    "colab": "https://colab.research.google.com/github/o/d2l-{framework}-colab/blob/master/{path}",
    "binder": "https://mybinder.org/v2/gh/o/site/gh-pages?labpath={path}",
}
"""
ODD = "c#dir/odd page?"


@pytest.fixture(scope="module")
def book(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("hosted") / "src"
    shutil.copytree(rootdir / "test-book", src)
    with open(src / "conf.py", "a") as handle:
        handle.write(CONF)
    (src / "index.rst").write_text((src / "index.rst").read_text().replace("   other\n", f"   other\n   {ODD}\n"))
    (src / f"{ODD}.rst").parent.mkdir(parents=True)
    (src / f"{ODD}.rst").write_text(FIGURES.replace("img/", "../img/").replace("pics/", "../pics/"))
    for image in ("img/a&b(1).svg", "pics/other.svg"):
        (src / image).parent.mkdir(exist_ok=True)
        (src / image).write_text(SVG)
    kernels = FakeKernels()
    app, warnings = build_site(src, kernels=kernels)
    return {"src": src, "out": Path(app.outdir), "warnings": warnings, "kernels": kernels}


def hosted(book, service: str, framework: str, docname: str) -> nbformat.NotebookNode:
    notebook = nbformat.read(book["out"] / "_hosted" / service / framework / f"{docname}.ipynb", as_version=4)
    nbformat.validate(notebook)
    return notebook


def test_each_service_has_each_pages_notebook_of_each_framework(book):
    folder = book["out"] / "_hosted"
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.ipynb"))
    pages = sorted(f"{d}.ipynb" for d in ("index", "other", ODD))
    assert files == sorted(f"{s}/{fw}/{p}" for s in ("colab", "sagemaker") for fw in ("mxnet", "pytorch") for p in pages)
    for path in folder.rglob("*.ipynb"):
        nbformat.validate(nbformat.read(path, as_version=4))


def test_a_notebook_is_the_download_with_the_services_cells_and_metadata(book):
    colab = hosted(book, "colab", "pytorch", ODD)
    download = nbformat.read(book["out"] / "_downloads" / "livecells" / f"{ODD}.pytorch.ipynb", as_version=4)
    assert [c.source for c in colab.cells[:2]] == ["Install first.", "!pip install d2l==2.0\n"]
    assert [c.source for c in colab.cells[3:]] == [c.source for c in download.cells[1:]]
    assert [c.get("outputs") for c in colab.cells[3:]] == [c.get("outputs") for c in download.cells[1:]]
    assert colab.cells[3].outputs[0]["text"] == "</script>\n"
    assert colab.metadata.kernelspec == {"name": "python3", "display_name": "Python 3"}
    assert colab.metadata.accelerator == "GPU"
    sagemaker = hosted(book, "sagemaker", "pytorch", ODD)
    assert sagemaker.metadata.kernelspec == {"name": "conda_pytorch_p36", "display_name": "conda_pytorch_p36"}
    assert [c.source for c in sagemaker.cells[:1]] == ['!pip install "gpytorch"\n'] and "accelerator" not in sagemaker.metadata
    # The service's own release; and the framework's own kernel where the service names none.
    mxnet = hosted(book, "sagemaker", "mxnet", ODD)
    assert mxnet.cells[0].source == '!pip install mxnet==1.9.1\n!pip install "gpytorch"\n'
    assert mxnet.metadata.kernelspec == download.metadata.kernelspec
    assert hosted(book, "colab", "mxnet", "index").cells[0].source.startswith("# Book")  # nothing to install


def test_images_at_the_services_urls_the_downloads_at_the_sites_copies(book):
    colab = hosted(book, "colab", "pytorch", ODD).cells[2].source
    assert "![A \\[caption\\] with *markup* and a \\\\ backslash.](https://example.org/_images/a%26b%281%29.svg)" in colab
    assert "![not placed](../pics/other.svg)" in colab  # in no folder of its images: relative, as in the source
    sagemaker = hosted(book, "sagemaker", "pytorch", ODD).cells[1].source
    assert "(../img/a%26b%281%29.svg)" in sagemaker and "(../pics/other.svg)" in sagemaker
    download = nbformat.read(book["out"] / "_downloads" / "livecells" / f"{ODD}.pytorch.ipynb", as_version=4)
    urls = re.findall(r"\]\(([^)]*)\)", download.cells[0].source)
    assert urls == ["../../../_images/a%26b%281%29.svg", "../../../_images/other.svg"]
    folder = (book["out"] / "_downloads" / "livecells" / ODD).parent
    assert all((folder / unquote(u)).resolve().is_file() for u in urls)


def test_an_image_in_no_folder_of_the_services_images_is_warned_of_at_its_line(book):
    lines = [w for w in book["warnings"].splitlines() if "[livecells.hosted]" in w]
    src = book["src"] / f"{ODD}.rst"
    assert lines == [
        f"{src}:8: WARNING: livecells_hosted['colab']: image 'pics/other.svg' is in no folder of its images; "
        "the notebook links it relative to itself [livecells.hosted]"
    ], book["warnings"]


def test_a_launch_link_of_a_service_with_notebooks_opens_its_notebook(book):
    html = soup(book["out"] / f"{ODD}.html")
    links = [a["href"] for a in html.select("a.livecells-launch")]
    colab = [u for u in links if "colab" in u]
    assert colab == [
        "https://colab.research.google.com/github/o/d2l-pytorch-colab/blob/master/c%23dir/odd%20page%3F.ipynb",
        "https://colab.research.google.com/github/o/d2l-mxnet-colab/blob/master/c%23dir/odd%20page%3F.ipynb",
    ]
    for url, framework in zip(colab, ("pytorch", "mxnet")):
        path = unquote(url.split("/blob/master/", 1)[1])
        assert (book["out"] / "_hosted" / "colab" / framework / path).is_file()
    # A service without notebooks of its own still opens the download.
    binder = [u for u in links if "binder" in u]
    assert binder[0].endswith("labpath=_downloads/livecells/c%23dir/odd%20page%3F.pytorch.ipynb")


@pytest.mark.slow
def test_notebooks_gone_from_the_book_are_removed_others_stay_missing_ones_come_back(book, tmp_path):
    src = tmp_path / "src"
    shutil.copytree(book["src"], src, ignore=shutil.ignore_patterns("_build"))
    out = src / "_build" / "html"
    kernels = FakeKernels()
    build_site(src, kernels=kernels)
    folder = out / "_hosted" / "colab" / "pytorch"
    foreign = folder / "GettingStarted.ipynb"
    foreign.write_text(json.dumps({"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}))
    (folder / "other.ipynb").unlink()
    (src / "index.rst").write_text((src / "index.rst").read_text().replace(f"   {ODD}\n", ""))
    (src / f"{ODD}.rst").unlink()
    _, warnings = build_site(src, kernels=kernels)
    assert not (folder / f"{ODD}.ipynb").exists() and foreign.is_file()
    assert (folder / "other.ipynb").is_file()  # written again, though the page did not change
    assert kernels.take() == []  # from the store


def test_bad_entries_are_warnings_at_their_conf_line_and_release_is_needed(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-book", src)
    with open(src / "conf.py", "a") as handle:
        handle.write('livecells_hosted = {\n    "colab": {"libs": {"pytorch": {"d2l": "d2l==RELEASE"}}},\n'
                     '    "bad": {"kernel": "a b"},\n}\n')  # fmt: skip
    number = next(n for n, line in enumerate((src / "conf.py").read_text().splitlines(), 1) if "livecells_hosted" in line)
    _, warnings = build_site(src, kernels=FakeKernels())
    lines = [w for w in warnings.splitlines() if "livecells_hosted" in w]
    assert lines == [
        f"{src / 'conf.py'}:{number}: WARNING: livecells_hosted: entry 'bad': kernel: 'a b' is not a kernel's name "
        "(letters, digits, '.', '_', '-'); that entry is ignored [livecells.config]",
        f"{src / 'conf.py'}:{number}: WARNING: livecells_hosted: 'colab' pins libs to ==RELEASE, and neither its "
        "release nor conf.py's release is set; its notebooks leave those libs out [livecells.config]",
    ], warnings
    notebook = nbformat.read(src / "_build" / "html" / "_hosted" / "colab" / "pytorch" / "index.ipynb", as_version=4)
    assert "pip" not in notebook.cells[0].source
    assert not (src / "_build" / "html" / "_hosted" / "bad").exists()


def test_images_cells_draw_are_in_the_notebook(book):
    outputs = [o for c in hosted(book, "colab", "pytorch", "index").cells for o in c.get("outputs", [])]
    assert any("image/png" in o.get("data", {}) for o in outputs)


def test_a_folder_that_cannot_be_written_is_one_warning_and_the_build_goes_on(tmp_path, rootdir):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-book", src)
    blocker = tmp_path / "a-file"  # a folder under a file cannot be made, by root either
    blocker.write_text("")
    with open(src / "conf.py", "a") as handle:
        handle.write(f"livecells_hosted = {{'colab': {{'folder': {str(blocker / '{framework}')!r}}}}}\n")
    app, warnings = build_site(src, kernels=FakeKernels())
    lines = [w for w in warnings.splitlines() if "cannot write" in w]
    assert len(lines) == 1 and "[livecells.hosted]" in lines[0], warnings
    assert (Path(app.outdir) / "index.html").is_file()


def test_no_builder_but_htmls_writes_them(book, tmp_path):
    app, _ = build_site(book["src"], "text", builddir=tmp_path / "text", kernels=FakeKernels(),
                        confoverrides={"livecells_execute": "cache"})  # fmt: skip
    assert not list(Path(app.outdir).rglob("*.ipynb"))


def test_services_of_the_model_are_plain_data():
    assert HostedService("x") == hosted_service("x", {})
