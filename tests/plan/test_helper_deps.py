"""Fine-grained dependencies on the book's helper modules (``livecells.plan.helpers``).

The static reading is tested on the real ``d2l/torch.py`` of the d2l corpus (real d2l code, with
its ``d2l = sys.modules[__name__]`` and ``#@save`` blocks): an edit to one saved function changes
the keys of the sessions that reach it and of no other; an edit to what runs on import changes
every importer's; each place where static reading cannot see depends on the whole file. The
builds (FakeKernels) show what reruns after an edit to a helper package of a site.
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import textwrap
from pathlib import Path

import pytest

from livecells.plan.helpers import Helpers, read_helpers
from livecells.plan.modules import module_name, read_module

from helpers import FakeKernels, build_site, d2l_corpus

CORPUS = d2l_corpus()
TORCH_PRELOAD = ("torch", "d2l.torch")


@pytest.fixture(scope="module")
def torch_source() -> str:
    if CORPUS is None:
        if os.environ.get("CI"):
            pytest.fail("the d2l corpus (../shared/d2l-corpus) is missing on CI")
        pytest.skip("the d2l corpus (../shared/d2l-corpus) is not here")
    return (CORPUS / "d2l" / "torch.py").read_text(encoding="utf-8")


@functools.cache
def d2l(source: str) -> Helpers:
    """The d2l package with ``source`` as its torch module (and the corpus' own __init__)."""
    init = (CORPUS / "d2l" / "__init__.py").read_text(encoding="utf-8")
    return Helpers([
        read_module("d2l", "d2l/__init__.py", str(hash(init)), init),
        read_module("d2l.torch", "d2l/torch.py", str(hash(source)), source),
    ])


def edit(source: str, anchor: str, new: str) -> str:
    """``source`` with ``anchor`` (which must be there, once) replaced."""
    assert source.count(anchor) == 1, anchor
    return source.replace(anchor, new)


# Real d2l sessions, as d2lbook wrote them for the corpus chapters.
SCRATCH = [
    "%matplotlib inline\nimport torch\nfrom d2l import torch as d2l",
    "class LinearRegressionScratch(d2l.Module):  #@save\n    def __init__(self, num_inputs, lr, sigma=0.01):\n"
    "        super().__init__()\n        self.save_hyperparameters()",
    "@d2l.add_to_class(LinearRegressionScratch)  #@save\ndef forward(self, X):\n    return torch.matmul(X, self.w) + self.b",
    "model = LinearRegressionScratch(2, lr=0.03)\ndata = d2l.SyntheticRegressionData(w=torch.tensor([2, -3.4]), b=4.2)\n"
    "trainer = d2l.Trainer(max_epochs=3)\ntrainer.fit(model, data)",
]
PLOT = ["%matplotlib inline\nimport numpy as np\nfrom d2l import torch as d2l",
        "x = np.arange(0, 3, 0.1)\nd2l.plot(x, [x ** 2, 2 * x - 3], 'x', 'f(x)', legend=['f(x)', 'Tangent line'])"]
PLAIN = ["import torch\nx = torch.arange(12)\nx.reshape(3, 4)"]

# Edits of #@save blocks of d2l/torch.py (each keeps it valid Python).
SGD_STEP = ("            param -= self.lr * param.grad\n", "            param -= 0.5 * self.lr * param.grad\n")
SET_AXES = ("    axes.set_xlim(xlim),     axes.set_ylim(ylim)\n", "    axes.set_ylim(ylim),     axes.set_xlim(xlim)\n")
BOARD_DRAW = ("            self.fig = d2l.plt.figure(figsize=self.figsize)\n",
              "            self.fig = d2l.plt.figure(figsize=self.figsize, dpi=90)\n")
TRAINER_FIT = ("        self.epoch = 0\n", "        self.epoch = 0  # from the start\n")
VOCAB = ("        self.idx_to_token = list(sorted(set(['<unk>'] + reserved_tokens + [\n",
         "        self.idx_to_token = list(sorted(set(['<unk>', '<pad>'] + reserved_tokens + [\n")


def changed(source: str, cells: list[str], change: tuple[str, str], preload=TORCH_PRELOAD) -> bool:
    """Whether ``change`` to d2l/torch.py changes the helper part of the session's key."""
    before = d2l(source).digest(cells, preload)
    after = d2l(edit(source, *change)).digest(cells, preload)
    return before != after


def test_real_d2l_definitions_are_followed_through_calls_and_bases(torch_source):
    module = read_module("d2l.torch", "d2l/torch.py", "d", torch_source)
    assert module.readable and len(module.definitions) > 150
    trainer, _ = module.closure({"Trainer"})
    assert {"Trainer", "HyperParameters"} <= trainer and "Module" not in trainer
    base, _ = module.closure({"Module"})  # d2l.Module reads d2l.ProgressBoard through d2l.X
    assert {"Module", "HyperParameters", "ProgressBoard"} <= base
    plot, _ = module.closure({"plot"})
    assert {"plot", "set_axes", "set_figsize", "use_svg_display"} <= plot and "Trainer" not in plot
    # `def train_ch13(..., devices=d2l.try_all_gpus())` calls try_all_gpus on import.
    assert "try_all_gpus" in module.import_names


@pytest.mark.slow
def test_a_saved_function_edit_changes_only_the_sessions_that_reach_it(torch_source):
    # linear-regression-scratch defines its own SGD in a cell: d2l.SGD is not its optimizer.
    assert not changed(torch_source, SCRATCH, SGD_STEP)
    assert changed(torch_source, SCRATCH + ["trainer = d2l.SGD([model.w], 0.1)"], SGD_STEP)
    assert changed(torch_source, SCRATCH, TRAINER_FIT)
    assert not changed(torch_source, PLOT, TRAINER_FIT)
    assert changed(torch_source, PLOT, SET_AXES)  # plot -> set_axes
    assert not changed(torch_source, SCRATCH, SET_AXES)
    assert changed(torch_source, SCRATCH, BOARD_DRAW)  # class X(d2l.Module) -> ProgressBoard
    for cells in (SCRATCH, PLOT, PLAIN):
        assert not changed(torch_source, cells, VOCAB)  # no session here uses d2l.Vocab


def test_what_runs_on_import_reaches_every_importer(torch_source):
    url = ("DATA_URL = 'http://d2l-data.s3-accelerate.amazonaws.com/'\n", "DATA_URL = 'https://example.org/'\n")
    for cells in (SCRATCH, PLOT, PLAIN):  # PLAIN imports d2l.torch through the preload only
        assert changed(torch_source, cells, url)
    assert not changed(torch_source, PLAIN, url, preload=("torch",))  # nothing imports it
    # A function the module calls on import (a default argument) reaches every importer.
    gpus = ("    return [gpu(i) for i in range(num_gpus())]\n", "    return [gpu(i) for i in range(num_gpus() - 1)]\n")
    assert changed(torch_source, PLAIN, gpus)


UNSEEN = {
    "getattr": "getattr(d2l, 'plot')(1, 2)",
    "module passed": "show = d2l\nshow.plot(1, 2)",
    "module printed": "print(d2l)",
    "star import": "from d2l.torch import *\nplot(1, 2)",
    "dunder": "d2l.__dict__['plot'](1, 2)",
    "import by string": "import importlib\nimportlib.import_module('d2l.torch').plot(1, 2)",
    "run magic": "%run d2l/torch.py",
    "unparsable": "d2l.plot(1, 2\n",
    "submodule as object": "import d2l\nhelpers = d2l.torch\nhelpers.plot(1, 2)",
}


@pytest.mark.parametrize("case", UNSEEN)
def test_what_static_reading_cannot_see_depends_on_the_whole_module(torch_source, case):
    """Editing a function the session does not name (Vocab) still changes its key."""
    cells = ["import torch\nfrom d2l import torch as d2l", UNSEEN[case]]
    assert changed(torch_source, cells, VOCAB)
    assert changed(torch_source, cells, SET_AXES)


@pytest.mark.slow
@pytest.mark.parametrize("cells", [
    ["import d2l.torch\nd2l.torch.plot(1, 2)"],
    ["import d2l.torch as helpers\nhelpers.plot(1, 2)"],
    ["from d2l.torch import plot\nplot(1, 2)"],
    ["from d2l import torch\ntorch.plot(1, 2)"],
])
def test_every_import_form_reaches_the_function_it_names(torch_source, cells):
    assert changed(torch_source, cells, SET_AXES)
    assert not changed(torch_source, cells, VOCAB)


def test_module_internals_read_as_a_whole_or_unreadable_are_whole():
    source = "import sys\nd2l = sys.modules[__name__]\n\ndef a():\n    return 1\n\ndef b():\n    return globals()['a']()\n"
    module = read_module("lib", "lib.py", "d", source)
    assert module.closure({"b"})[1] and not module.closure({"a"})[1]
    helpers = Helpers([module])
    other = Helpers([read_module("lib", "lib.py", "e", source.replace("return 1", "return 2"))])
    assert helpers.digest(["import lib\nlib.b()"]) != other.digest(["import lib\nlib.b()"])
    broken = Helpers([read_module("lib", "lib.py", "d", "def a(:\n")])
    assert broken.digest(["import lib\nlib.a()"]) != Helpers([read_module("lib", "lib.py", "e", "def a(:\n")]).digest(["import lib\nlib.a()"])
    # Decorated on import (`@add_to_class(Trainer)`): it changes another definition, so it is
    # code that runs on import.
    decorated = "def add(cls):\n    return lambda f: setattr(cls, f.__name__, f)\n\nclass T:\n    pass\n\n@add(T)\ndef go(self):\n    return 1\n"
    edited = decorated.replace("return 1", "return 2")
    cells = ["import lib\nlib.T().go()"]
    assert Helpers([read_module("lib", "lib.py", "d", decorated)]).digest(cells) != Helpers(
        [read_module("lib", "lib.py", "e", edited)]
    ).digest(cells)


def test_a_module_is_named_by_its_package_folders(tmp_path):
    (tmp_path / "d2l").mkdir()
    (tmp_path / "d2l" / "__init__.py").write_text("")
    (tmp_path / "d2l" / "torch.py").write_text("")
    (tmp_path / "tools.py").write_text("def a():\n    return 1\n")
    assert module_name(str(tmp_path / "d2l" / "torch.py")) == "d2l.torch"
    assert module_name(str(tmp_path / "d2l" / "__init__.py")) == "d2l"
    assert module_name(str(tmp_path / "tools.py")) == "tools"
    helpers = read_helpers(str(tmp_path), [str(tmp_path / "tools.py")])
    edited = Helpers([read_module("tools", "tools.py", "x", "def a():\n    return 2\n")])
    # A top-level module reached through a package name it does not know of (a namespace
    # package, a folder on sys.path): the whole file.
    for cells in (["from book import tools\ntools.b()"], ["import book.tools"], ["open('tools.py')"]):
        assert helpers.digest(cells) != edited.digest(cells)
    assert helpers.digest(["print(3)"]) == ""  # nothing of it named: not used


# --- builds ---------------------------------------------------------------------------------

TOOLS = '''\
"""A book's helper module."""
SCALE = 1


def shout(text):
    return text.upper() * SCALE


def area(width, height):
    return width * height


def describe(width, height):
    return f"{area(width, height)} square units"
'''
CONF = '\nlivecells_depends = ["booktools/*.py"]\n'


def page(code: str) -> str:
    body = "\n".join("   " + line if line else "" for line in code.splitlines())
    return f"\n.. live-cell:: alpha\n\n{body}\n"


@pytest.fixture
def book(tmp_path, rootdir, monkeypatch):
    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-procs", src)
    pages = {
        "page1": "from booktools import tools\nprint(tools.shout('one'))",
        "page2": "from booktools import tools\nprint(tools.describe(2, 3))",
        "page3": "import booktools.tools\nf = getattr(booktools.tools, 'area')\nprint(f(1, 1))",
    }
    for name, code in pages.items():
        (src / f"{name}.rst").write_text(f"{name}\n=====\n{page(code)}", encoding="utf-8")
    (src / "booktools").mkdir()
    (src / "booktools" / "__init__.py").write_text("")
    (src / "booktools" / "tools.py").write_text(TOOLS)
    with open(src / "conf.py", "a", encoding="utf-8") as handle:
        handle.write(CONF)
    # FakeKernels run the cells in this process: they import the site's package from here.
    monkeypatch.syspath_prepend(str(src))
    yield src
    forget(src)


def forget(src: Path) -> None:
    """Forget the site's modules that this process imported (FakeKernels' cells ran here)."""
    for name, module in list(sys.modules.items()):
        if str(getattr(module, "__file__", None) or "").startswith(str(src)):
            del sys.modules[name]


def rebuild(src: Path, kernels: FakeKernels, **kwargs) -> list[str]:
    """Build; the pages whose sessions ran (their cells ran in this process: forget its imports)."""
    forget(src)
    app, warnings = build_site(src, kernels=kernels, **kwargs)
    assert "WARNING" not in warnings, warnings
    outcome = app.env.livecells_outcome
    assert outcome.failed == 0 and not any(s.shown.failed for s in outcome.sessions.values())
    return [docname for docname, _ in kernels.take()]


def change(src: Path, old: str, new: str) -> None:
    path = src / "booktools" / "tools.py"
    text = path.read_text()
    assert text.count(old) == 1
    path.write_text(text.replace(old, new))


@pytest.mark.slow
def test_an_edited_helper_function_reruns_the_pages_that_use_it_and_no_other(book):
    kernels = FakeKernels()
    assert rebuild(book, kernels) == ["index", "page1", "page2", "page3"]
    assert rebuild(book, kernels) == []
    change(book, "return text.upper() * SCALE", "return text.upper() * SCALE + '!'")
    assert rebuild(book, kernels) == ["page1", "page3"]  # page3 reads the module by getattr
    change(book, "return width * height", "return height * width")  # describe -> area
    assert rebuild(book, kernels) == ["page2", "page3"]
    assert rebuild(book, kernels) == []
    change(book, "SCALE = 1", "SCALE = 1  # once")  # what runs on import: every importer
    assert rebuild(book, kernels) == ["page1", "page2", "page3"]
    # The store holds each page's result from its helper code: the kept page2 says what it says.
    assert "6 square units" in (book / "_build" / "html" / "page2.html").read_text()


@pytest.mark.slow
def test_granularity_files_reruns_every_page_on_any_edit(book):
    kernels = FakeKernels()
    files = {"confoverrides": {"livecells_depends_granularity": "files"}}
    assert rebuild(book, kernels, **files) == ["index", "page1", "page2", "page3"]
    change(book, "return width * height", "return height * width")
    assert rebuild(book, kernels, **files) == ["index", "page1", "page2", "page3"]


@pytest.mark.slow
def test_what_a_session_reaches_is_read_once_while_its_code_is_the_same(torch_source, monkeypatch):
    usages: dict = {}
    module = read_module("d2l.torch", "d2l/torch.py", "d", torch_source)
    first = Helpers([module], usages).digest(PLOT, TORCH_PRELOAD, "probability [pytorch]")
    assert list(usages) == ["probability [pytorch]"]
    # The next build (a new Helpers on the environment's cache) reads no cell again.
    monkeypatch.setattr(Helpers, "_usage", lambda *a: pytest.fail("read again"))
    assert Helpers([module], usages).digest(PLOT, TORCH_PRELOAD, "probability [pytorch]") == first
    monkeypatch.undo()
    changed_code = [PLOT[0], PLOT[1].replace("d2l.plot", "d2l.Trainer()\nd2l.plot")]
    assert Helpers([module], usages).digest(changed_code, TORCH_PRELOAD, "probability [pytorch]") != first
    assert len(usages) == 1  # one entry per session


def test_two_files_of_one_module_name_count_whole_both():
    """Whichever of the two a kernel imports: an edit to what the cells do not name counts too."""
    cells = ["import tools\ntools.a()"]
    one = read_module("tools", "a/tools.py", "1", "def a():\n    return 1\n\ndef b():\n    return 1\n")
    edited = read_module("tools", "a/tools.py", "2", "def a():\n    return 1\n\ndef b():\n    return 2\n")
    other = read_module("tools", "b/tools.py", "3", "def a():\n    return 1\n")
    assert Helpers([one]).digest(cells) == Helpers([edited]).digest(cells)  # one file: per definition
    for order in (lambda x, y: [x, y], lambda x, y: [y, x]):
        assert Helpers(order(one, other)).digest(cells) != Helpers(order(edited, other)).digest(cells)
    assert Helpers([one, one]).modules["tools"].readable  # the same file twice (book and page)
    # The same file through the book's pattern and a page's ../ pattern: one module.
    again = read_module("tools", "../a/tools.py", "1", "def a():\n    return 1\n\ndef b():\n    return 1\n")
    assert Helpers([one, again]).modules["tools"].readable


@pytest.mark.slow
def test_a_pages_own_python_depends_count_per_definition_and_unchanged_modules_are_not_read_again(
    book, monkeypatch
):
    (book / "pagetools.py").write_text("def one():\n    return 1\n\n\ndef two():\n    return 2\n")
    settings = ".. live-settings::\n   :depends: pagetools.py\n"
    for name, code in {"page4": "import pagetools\nprint(pagetools.one())", "page5": "import pagetools\nprint(pagetools.two())"}.items():
        (book / f"{name}.rst").write_text(f"{name}\n=====\n\n{settings}{page(code)}", encoding="utf-8")
    kernels = FakeKernels()
    assert rebuild(book, kernels) == ["index", "page1", "page2", "page3", "page4", "page5"]
    # Nothing changed: no helper module is parsed again (the environment keeps them).
    import livecells.plan.helpers

    with monkeypatch.context() as patch:
        patch.setattr(livecells.plan.helpers, "read_module", lambda *a: pytest.fail("parsed again"))
        assert rebuild(book, kernels) == []
    path = book / "pagetools.py"
    path.write_text(path.read_text().replace("return 2", "return 22"))
    assert rebuild(book, kernels) == ["page5"]
    assert "22" in (book / "_build" / "html" / "page5.html").read_text()


@pytest.mark.parametrize("init", ["from .tools import area\n", "from . import tools\n", "from booktools.tools import *\n"])
def test_a_package_that_imports_its_own_modules_counts_them_whole(tmp_path, init):
    """``booktools/__init__.py`` re-exports ``area`` from ``tools.py``: a session that calls
    ``booktools.area()`` reaches tools.py through an import the cells never wrote."""
    package = tmp_path / "booktools"
    package.mkdir()
    (package / "__init__.py").write_text(init)
    (package / "tools.py").write_text("def area(w, h):\n    return w * h\n")
    files = [str(package / "__init__.py"), str(package / "tools.py")]
    cells = ["import booktools\nbooktools.area(2, 3)"]
    before = read_helpers(str(tmp_path), files).digest(cells)
    (package / "tools.py").write_text("def area(w, h):\n    return h * w\n")
    assert read_helpers(str(tmp_path), files).digest(cells) != before


def test_a_module_of_the_books_own_that_imports_a_helper_module_counts_it_whole(tmp_path):
    """``mylib.py`` beside the page is no helper module of livecells_depends, but it imports one:
    a session that imports mylib (or preloads it) reaches the helper module through it."""
    package = tmp_path / "booktools"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "tools.py").write_text("def area(w, h):\n    return w * h\n")
    (tmp_path / "pages").mkdir()
    (tmp_path / "pages" / "mylib.py").write_text("from wrapped import double\n")
    (tmp_path / "pages" / "wrapped.py").write_text("from booktools.tools import area\n\ndef double(w):\n    return area(w, 2)\n")
    (tmp_path / "pages" / "plain.py").write_text("def double(w):\n    return 2 * w\n")
    files = [str(package / "__init__.py"), str(package / "tools.py")]
    folders = [str(tmp_path / "pages")]

    def digests(cells, preload=()):
        return read_helpers(str(tmp_path), files).digest(cells, preload, folders=folders)

    before = {
        "cell": digests(["import mylib\nmylib.double(3)"]),
        "preload": digests(["print(1)"], ["mylib"]),
        "plain": digests(["import plain\nplain.double(3)"]),
    }
    (package / "tools.py").write_text("def area(w, h):\n    return h * w\n")
    assert digests(["import mylib\nmylib.double(3)"]) != before["cell"]
    assert digests(["print(1)"], ["mylib"]) != before["preload"]
    assert digests(["import plain\nplain.double(3)"]) == before["plain"] == ""  # imports none


def test_a_modules_getattr_answers_for_the_names_it_does_not_define():
    source = "def __getattr__(name):\n    return len(name)\n\ndef other():\n    return 1\n"
    cells = ["import lazy\nlazy.anything"]
    before = Helpers([read_module("lazy", "lazy.py", "1", source)]).digest(cells)
    after = Helpers([read_module("lazy", "lazy.py", "2", source.replace("len(name)", "name"))]).digest(cells)
    unrelated = Helpers([read_module("lazy", "lazy.py", "3", source.replace("return 1", "return 2"))]).digest(cells)
    assert before != after and before == unrelated


# --- lookups by name, and other import names: the whole of every helper module ----------------

#: A helper module's ways of finding one of its definitions by name (the imports, the lookup).
LOOKUP_STYLES = {
    "getattr of sys.modules": ("import sys\n", "getattr(sys.modules[__name__], name)()"),
    "sys.modules dict": ("import sys\n", "sys.modules[__name__].__dict__[name]()"),
    "from sys import modules": ("from sys import modules as loaded\n", "getattr(loaded[__name__], name)()"),
    "sys passed on": ("import sys\n", "getattr(getattr(sys, 'mod' + 'ules')[__name__], name)()"),
    "globals": ("", "globals()[name]()"),
    "vars of the alias": ("import sys\nTHIS = sys.modules[__name__]\n", "vars(THIS)[name]()"),
    "importlib": ("import importlib\n", "getattr(importlib.import_module(__name__), name)()"),
    "__import__": ("", "getattr(__import__(__name__), name)()"),
    "eval": ("", "eval(name + '()')"),
    "exec": ("", "exec(name + '()') or 0"),
    "frame globals": ("import sys\n", "sys._getframe(0).f_globals[name]()"),
    "function globals": ("", "look.__globals__[name]()"),
    "inspect.getmodule": ("import inspect\n", "getattr(inspect.getmodule(look), name)()"),
    "a self import": ("", "getattr(__import__('lib'), name)()"),
}


def _lookup(head: str, lookup: str, target: str = "1") -> Helpers:
    source = f"{head}\n\ndef target():\n    return {target}\n\n\ndef look(name):\n    return {lookup}\n"
    return Helpers([read_module("lib", "lib.py", target, source), read_module("other", "other.py", "o", "def f():\n    return 1\n")])


@pytest.mark.parametrize("style", LOOKUP_STYLES)
def test_a_definition_that_looks_up_by_name_depends_on_every_helper_module_whole(style):
    """The key of a session that calls ``lib.look('target')`` covers ``target``, and the other
    helper modules (``sys.modules[name]`` may be any of them)."""
    cells = ["import lib, other\nlib.look('target')"]
    before = _lookup(*LOOKUP_STYLES[style]).digest(cells)
    assert _lookup(*LOOKUP_STYLES[style], target="2").digest(cells) != before
    edited = _lookup(*LOOKUP_STYLES[style])
    edited.modules["other"] = read_module("other", "other.py", "p", "def f():\n    return 2\n")
    assert edited.digest(cells) != before


def test_a_module_that_imports_itself_is_read_through_that_name():
    """``import lib as me`` inside lib.py: ``me.target`` is lib's ``target``."""
    cells = ["import lib, other\nlib.look('target')"]
    way = ("import lib as me\n", "{'target': me.target}[name]()")
    assert _lookup(*way).digest(cells) != _lookup(*way, target="2").digest(cells)
    edited = _lookup(*way)
    edited.modules["other"] = read_module("other", "other.py", "p", "def f():\n    return 2\n")
    assert edited.digest(cells) == _lookup(*way).digest(cells)


def test_a_plain_definition_keeps_its_precision_beside_one_that_looks_up():
    cells = ["import lib\nlib.target()"]
    assert _lookup(*LOOKUP_STYLES["globals"]).digest(cells) == _lookup(
        LOOKUP_STYLES["globals"][0], LOOKUP_STYLES["globals"][1].replace("[name]", "['target']")
    ).digest(cells)


REGISTRIES = {
    "__init_subclass__": (
        "KINDS = {}\n\nclass Base:\n    def __init_subclass__(cls):\n        KINDS[cls.__name__] = cls\n\n"
        "class Kind(Base):\n    def value(self):\n        return 1\n\ndef make(name):\n    return KINDS[name]()\n"
    ),
    "metaclass": (
        "KINDS = {}\n\nclass Meta(type):\n    def __init__(cls, *args):\n        KINDS[cls.__name__] = cls\n\n"
        "class Base(metaclass=Meta):\n    pass\n\nclass Kind(Base):\n    def value(self):\n        return 1\n\n"
        "def make(name):\n    return KINDS[name]()\n"
    ),
    "__subclasses__": (
        "class Base:\n    pass\n\nclass Kind(Base):\n    def value(self):\n        return 1\n\n"
        "def make(name):\n    return next(c for c in Base.__subclasses__() if c.__name__ == name)()\n"
    ),
    "decorator": (
        "KINDS = {}\n\ndef register(cls):\n    KINDS[cls.__name__] = cls\n    return cls\n\n"
        "@register\nclass Kind:\n    def value(self):\n        return 1\n\ndef make(name):\n    return KINDS[name]()\n"
    ),
}


@pytest.mark.parametrize("style", REGISTRIES)
def test_a_registry_reaches_the_classes_it_files(style):
    cells = ["import lib\nlib.make('Kind').value()"]
    source = REGISTRIES[style]
    before = Helpers([read_module("lib", "lib.py", "1", source)]).digest(cells)
    after = Helpers([read_module("lib", "lib.py", "2", source.replace("return 1", "return 2"))]).digest(cells)
    assert before != after


CELL_LOOKUPS = {
    "eval": ["import booktools.tools as t", "eval('t.area(1, 2)')"],
    "exec": ["import booktools.tools as t", "exec('t.area(1, 2)')"],
    "globals": ["import booktools.tools as t", "globals()['t'].area(1, 2)"],
    "function globals": ["from booktools.tools import plain", "plain.__globals__['area'](1, 2)"],
    "importlib": ["import importlib", "importlib.import_module('sloot'[::-1]).area(1, 2)"],
    "sys.modules": ["import sys\nimport booktools.tools as t", "sys.modules[t.plain.__module__].area(1, 2)"],
    "subclasses": ["import booktools.tools as t", "t.Base.__subclasses__()"],
    "%run": ["%run script.py"],
    "%%time": ["%%time\nimport importlib\nimportlib.import_module('sloot'[::-1]).area(1, 2)"],
    "user_ns": ["import booktools.tools as t", "get_ipython().user_ns['t'].area(1, 2)"],
}
TOOLS_PACKAGE = "class Base:\n    pass\n\ndef plain():\n    return 0\n\ndef area(w, h):\n    return w * h\n"


@pytest.mark.parametrize("style", CELL_LOOKUPS)
def test_a_cell_that_looks_up_by_name_depends_on_every_helper_module_whole(style):
    cells = CELL_LOOKUPS[style]

    def digest(source):
        return Helpers([
            read_module("booktools", "booktools/__init__.py", "i", ""),
            read_module("booktools.tools", "booktools/tools.py", source, source),
        ]).digest(cells)

    assert digest(TOOLS_PACKAGE) != digest(TOOLS_PACKAGE.replace("w * h", "h * w"))


def test_a_cells_plain_use_of_importlib_or_eval_is_not_needed_to_keep_precision():
    """The same session without the lookup: an edit of what it does not reach changes nothing."""
    cells = ["import booktools.tools as t", "t.plain()"]
    helpers = [read_module("booktools", "booktools/__init__.py", "i", "")]
    before = Helpers([*helpers, read_module("booktools.tools", "booktools/tools.py", "a", TOOLS_PACKAGE)]).digest(cells)
    edited = TOOLS_PACKAGE.replace("w * h", "h * w")
    assert before == Helpers([*helpers, read_module("booktools.tools", "booktools/tools.py", "b", edited)]).digest(cells)


def _tree(root: Path, files: dict[str, str]) -> list[str]:
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    return [str(root / p) for p in files if p.endswith(".py")]


def test_a_helper_imported_by_the_name_its_page_folder_gives_it_counts_whole(tmp_path):
    """The issue's case (b): ``pkg/helper.py`` beside ``pkg/__init__.py`` is ``pkg.helper`` to
    livecells; a page in ``pkg/`` (the kernel's folder) imports it as ``helper``, and its
    ``import sibling`` finds ``pkg/sibling.py``."""
    files = _tree(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/helper.py": "import sibling\n\ndef greet():\n    return 'hi'\n\ndef loud():\n    return sibling.up(greet())\n",
        "pkg/sibling.py": "def up(text):\n    return text.upper()\n",
    })
    cells = ["import helper\nhelper.loud()"]
    folders = [str(tmp_path / "pkg")]
    before = read_helpers(str(tmp_path), files).digest(cells, folders=folders)
    assert before  # the helper is in its key
    for path in ("pkg/helper.py", "pkg/sibling.py"):
        text = (tmp_path / path).read_text()
        (tmp_path / path).write_text(text.replace("text.upper()", "text.lower()").replace("'hi'", "'ho'"))
        assert read_helpers(str(tmp_path), files).digest(cells, folders=folders) != before, path
        (tmp_path / path).write_text(text)
    # From another folder the name finds nothing of the book: the session does not depend on it.
    assert read_helpers(str(tmp_path), files).digest(cells, folders=[str(tmp_path)]) == ""


def test_a_source_folder_with_an_init_is_no_package_of_the_name(tmp_path):
    """``helper.py`` in a source folder that has an ``__init__.py`` is ``helper``, as its pages
    import it, and keeps its precision."""
    files = _tree(tmp_path, {"__init__.py": "", "helper.py": "def a():\n    return 1\n\ndef b():\n    return 1\n"})
    helpers = read_helpers(str(tmp_path), files)
    assert "helper" in helpers.modules
    cells = ["import helper\nhelper.a()"]
    before = helpers.digest(cells, folders=[str(tmp_path)])
    (tmp_path / "helper.py").write_text("def a():\n    return 2\n\ndef b():\n    return 1\n")
    assert read_helpers(str(tmp_path), files).digest(cells, folders=[str(tmp_path)]) != before
    (tmp_path / "helper.py").write_text("def a():\n    return 1\n\ndef b():\n    return 2\n")
    assert read_helpers(str(tmp_path), files).digest(cells, folders=[str(tmp_path)]) == before


def test_a_helper_found_by_another_name_on_pythonpath_counts_whole(tmp_path, monkeypatch):
    files = _tree(tmp_path, {"lib/__init__.py": "", "lib/inner/__init__.py": "", "lib/inner/tools.py": "def a():\n    return 1\n\ndef b():\n    return 1\n"})
    cells = ["from inner import tools\ntools.a()"]
    monkeypatch.setenv("PYTHONPATH", str(tmp_path / "lib"))
    before = read_helpers(str(tmp_path), files).digest(cells)
    (tmp_path / "lib/inner/tools.py").write_text("def a():\n    return 1\n\ndef b():\n    return 2\n")
    assert read_helpers(str(tmp_path), files).digest(cells) != before


def test_a_package_init_that_is_no_helper_and_imports_its_modules_counts_them_whole(tmp_path):
    files = _tree(tmp_path, {"pkg/__init__.py": "from .tools import a\n", "pkg/tools.py": "def a():\n    return 1\n"})
    cells = ["import pkg\npkg.a()"]
    helpers = files[1:]  # tools.py only: __init__.py is not in livecells_depends
    before = read_helpers(str(tmp_path), helpers).digest(cells)
    (tmp_path / "pkg/tools.py").write_text("def a():\n    return 2\n")
    assert read_helpers(str(tmp_path), helpers).digest(cells) != before


def test_every_definition_of_the_real_d2l_keeps_its_precision(torch_source):
    """None of d2l/torch.py's definitions looks up by name: all stay per definition."""
    module = read_module("d2l.torch", "d2l/torch.py", "d", torch_source)
    assert module.readable and not module.dynamic
    assert len(module.definitions) >= 160 and not module.whole_definitions


def _corpus_sessions() -> list[tuple[str, str, list[str]]]:
    """Each (chapter, framework, cells) of the corpus chapters, converted as ``convert`` does:
    a ``live-cell:: all`` belongs to every framework's session."""
    import re

    from livecells.convert.rst import convert_text

    found = []
    for rst in sorted(CORPUS.glob("chapter_*/*.rst")):
        text = convert_text(rst.read_text(encoding="utf-8"), source=str(rst)).text
        cells = [
            (m[1], textwrap.dedent(re.sub(r"^   :[\w-]+:.*\n", "", m[2], flags=re.M)))
            for m in re.finditer(r"^\.\. live-cell:: (\w+)\n\n((?:   .*\n|\n)+)", text, flags=re.M)
        ]
        for framework in sorted({f for f, _ in cells} - {"all"}):
            found.append((rst.stem, framework, [c for f, c in cells if f in (framework, "all")]))
    return found


@pytest.mark.slow
def test_no_session_of_the_real_d2l_chapters_depends_on_a_whole_d2l_module(torch_source):
    """Every session of the corpus chapters keys per definition: an edit of a function none of
    them reaches (``bleu``) changes no key."""
    sessions = _corpus_sessions()
    assert len(sessions) >= 16
    sources = {n: (CORPUS / "d2l" / f"{n}.py").read_text(encoding="utf-8") for n in ("torch", "mxnet")}

    def helpers(edit: str | None) -> Helpers:
        modules = [read_module("d2l", "d2l/__init__.py", "i", (CORPUS / "d2l" / "__init__.py").read_text())]
        for name, source in sources.items():
            text = source if name != edit else source.replace("    len_pred, len_label = ", "    len_label, len_pred = ")
            assert text != source or name != edit
            modules.append(read_module(f"d2l.{name}", f"d2l/{name}.py", str(hash(text)), text))
        return Helpers(modules)

    preload = {"pytorch": ("torch", "d2l.torch"), "mxnet": ("mxnet", "d2l.mxnet")}
    books = {edit: helpers(edit) for edit in (None, "torch", "mxnet")}
    for chapter, framework, cells in sessions:
        module = "torch" if framework == "pytorch" else "mxnet"
        before = books[None].digest(cells, preload[framework])
        assert before and books[module].digest(cells, preload[framework]) == before, (chapter, framework)


def test_a_module_of_the_books_own_that_imports_a_helper_by_another_name_counts_it_whole(tmp_path):
    """``mylib.py`` in the page's folder ``pkg/`` imports ``helper`` (livecells' ``pkg.helper``)."""
    files = _tree(tmp_path, {"pkg/__init__.py": "", "pkg/helper.py": "def a():\n    return 1\n"})
    (tmp_path / "pkg" / "mylib.py").write_text("import helper\n\ndef twice():\n    return 2 * helper.a()\n")
    cells, folders = ["import mylib\nmylib.twice()"], [str(tmp_path / "pkg")]
    before = read_helpers(str(tmp_path), files).digest(cells, folders=folders)
    (tmp_path / "pkg" / "helper.py").write_text("def a():\n    return 2\n")
    assert read_helpers(str(tmp_path), files).digest(cells, folders=folders) != before
