"""Helper dependencies against the truth: every session that an edit to a helper changes runs again.

A book of hand-made helper modules, one for each way code reaches a definition other than by
``helper.name`` (a registry by name through ``sys.modules``, ``globals()``, ``__dict__``,
``importlib``, ``__import__``, ``eval``, a frame's globals, ``__init_subclass__`` and
``__subclasses__``, decorators, star imports, lookups by name in cells, a package folder whose
module the kernel imports by another name), beside the real ``d2l`` package of the corpus. It
is built once with real kernels (livecells' default granularity: per definition). Then each
definition in turn gets an edit that changes what it does (it prints when called), and:

- **livecells**: a ``livecells_execute = "cache"`` build of the edited book says which sessions'
  stored results are stale (their key changed): those an ``auto`` build runs again;
- **the truth**: every session that read the edited file is run fresh, in one real kernel kept
  for the test (the helper modules, every module imported from the book, forgotten and the
  namespace reset before each session; an audit hook tells which of the book's files a session
  opened, so a session that never opened a file cannot be changed by it).

Every session whose output changed must be stale. The truth runner is checked against the
build: it prints what livecells' kernels printed.
"""

from __future__ import annotations

import ast
import json
import os
import shutil
import textwrap
import time
from pathlib import Path

import pytest
from jupyter_client.manager import KernelManager

import timing
from helpers import build_site, d2l_corpus

# The real d2l sessions need torch and d2l's own dependencies: left out of the matrix.
pytestmark = [pytest.mark.kernel, pytest.mark.frameworks]

CORPUS = d2l_corpus()

CONF = """\
extensions = ["livecells"]
livecells_frameworks = {
    "alpha": {"label": "Alpha", "kernel": "python3"},
    "torchy": {"label": "Torch", "kernel": "python3", "preload": ["torch", "d2l.torch"]},
}
livecells_timeout = 120
livecells_depends = ["tools/*.py", "pkgfolder/*.py", "d2l/*.py"]
"""

#: Ways a helper module looks one of its definitions up by name (its imports, the lookup).
LOOKUPS = {
    "globals": ("", "globals()[name]()"),
    "alias": ("import sys\n\nTHIS = sys.modules[__name__]\n", "vars(THIS)[name]()"),
    "dict": ("import sys\n", "sys.modules[__name__].__dict__[name]()"),
    "importlib": ("import importlib\n", "getattr(importlib.import_module(__name__), name)()"),
    "import": ("", "getattr(__import__(__name__, fromlist=[name]), name)()"),
    "eval": ("", "eval(name + '()')"),
    "frame": ("import sys\n", "sys._getframe(0).f_globals[name]()"),
}


def _lookup_module(head: str, lookup: str) -> str:
    """A module whose ``look`` finds ``target`` by name: one module and one session per way."""
    return f"{head}\n\ndef target():\n    return 'target'\n\n\ndef look(name):\n    return {lookup}\n"


HELPERS = {
    "tools/__init__.py": "",
    # The case (a): a config names an activation; the module finds it by name.
    "tools/registry.py": '''
        import sys


        def relu(x):
            return max(x, 0)


        def leaky(x):
            return x if x > 0 else 0.5 * x


        def activation(name):
            return getattr(sys.modules[__name__], name)
    ''',
    # Registries that classes fill as they are defined, and the classes found by their base.
    "tools/kinds.py": '''
        KINDS = {}


        class Shape:
            def __init_subclass__(cls, **kwargs):
                super().__init_subclass__(**kwargs)
                KINDS[cls.__name__.lower()] = cls


        class Square(Shape):
            def area(self, side):
                return side * side


        def make(kind):
            return KINDS[kind]()
    ''',
    "tools/family.py": '''
        class Animal:
            def sound(self):
                return "..."


        class Dog(Animal):
            def sound(self):
                return "woof"


        def find(name):
            return next(c for c in Animal.__subclasses__() if c.__name__ == name)()
    ''',
    # A registry that a decorator fills on import.
    "tools/plugins.py": '''
        HANDLERS = {}


        def handler(function):
            HANDLERS[function.__name__] = function
            return function


        @handler
        def upper(text):
            return text.upper()


        def run(name, text):
            return HANDLERS[name](text)
    ''',
    "tools/basic.py": '''
        SCALE = 2


        def inc(x):
            return x + 1


        def double(x):
            return x * SCALE


        def square(x):
            return x * x


        def cube(x):
            return x * x * x
    ''',
    # Everything of basic, by a star import in a helper module.
    "tools/star.py": '''
        from tools.basic import *


        def shout():
            return inc(41)
    ''',
    # The case (b): a source folder that is a package; its page imports `helper`.
    "pkgfolder/__init__.py": "",
    "pkgfolder/helper.py": '''
        import sibling


        def greet():
            return "hello"


        def loud():
            return sibling.exclaim(greet())
    ''',
    "pkgfolder/sibling.py": '''
        def exclaim(text):
            return text.upper() + "!"
    ''',
    **{f"tools/by_{style}.py": _lookup_module(*way) for style, way in LOOKUPS.items()},
}

PAGES = {
    **{f"by_{style}": [f"from tools import by_{style}", f"print(by_{style}.look('target'))"] for style in LOOKUPS},
    "registry": ["from tools import registry", "print(registry.activation('relu')(-2), registry.activation('leaky')(-2))"],
    "kinds": ["from tools import kinds", "print(kinds.make('square').area(3))"],
    "family": ["from tools import family", "print(family.find('Dog').sound())"],
    "plugins": ["from tools import plugins", "print(plugins.run('upper', 'Hi'))"],
    "static": ["from tools import basic", "print(basic.double(4))"],
    "star_cell": ["from tools.basic import *", "print(square(5))"],
    "star_module": ["from tools import star", "print(star.shout())"],
    # Lookups by name in the cells themselves.
    "cell_eval": ["import tools.basic as b", "print(eval('b.cube(2)'))"],
    "cell_globals": ["from tools import basic", "print(basic.inc.__globals__['square'](6))"],
    "cell_importlib": ["import importlib", "print(importlib.import_module('sloot'[::-1] + '.basic').cube(3))"],
    "pkgfolder/hello": ["import helper", "print(helper.greet())", "print(helper.loud())"],
}

# Real d2l sessions (framework "torchy": the template preloads torch and d2l.torch).
D2L_PAGES = {
    **{f"by_{style}": [f"from tools import by_{style}", f"print(by_{style}.look('target'))"] for style in LOOKUPS},
    "d2l_hparams": [
        "from d2l import torch as d2l",
        "class Net(d2l.HyperParameters):\n    def __init__(self, width, depth=2):\n        self.save_hyperparameters()\n"
        "net = Net(3)\nprint(net.width, net.depth)",
    ],
    "d2l_vocab": [
        "from d2l import torch as d2l",
        "vocab = d2l.Vocab(['b', 'a', 'b', 'c'])\nprint(len(vocab), vocab.to_tokens([1, 2]), vocab['b'])",
    ],
    "d2l_data": [
        "import torch\nfrom d2l import torch as d2l",
        "torch.manual_seed(0)\ndata = d2l.SyntheticRegressionData(w=torch.tensor([2, -3.4]), b=4.2, num_train=6, num_val=2)\n"
        "X, y = next(iter(data.train_dataloader()))\nprint(tuple(X.shape), tuple(y.shape))",
    ],
    "d2l_model": [
        "from d2l import torch as d2l",
        "model = d2l.LinearRegression(lr=0.03)\nprint(model.lr, type(model.net).__name__)",
    ],
    "d2l_accuracy": [
        "import torch\nfrom d2l import torch as d2l",
        "metric = d2l.Accumulator(2)\nmetric.add(d2l.accuracy(torch.tensor([[0.1, 0.9], [0.8, 0.2]]), torch.tensor([1, 1])), 2)\n"
        "print(metric[0] / metric[1], d2l.cpu())",
    ],
}
#: Definitions of the real d2l/torch.py edited: what the sessions reach, and some they do not.
D2L_SAMPLE = ["HyperParameters", "Vocab", "SyntheticRegressionData", "Module", "ProgressBoard", "accuracy", "cpu", "tokenize"]

#: Edits of code that runs on import (each must be there once).
IMPORT_EDITS = [
    ("tools/basic.py", "SCALE = 2\n", "SCALE = 3\n"),
    ("tools/kinds.py", "KINDS = {}\n", "KINDS = {'square': dict}\n"),
]


def _page(docname: str, framework: str, cells: list[str]) -> str:
    title = docname.rsplit("/", 1)[-1]
    body = "".join(f"\n.. live-cell:: {framework}\n\n{textwrap.indent(code, '   ')}\n" for code in cells)
    return f"{title}\n{'=' * len(title)}\n{body}"


def _book(src: Path) -> None:
    src.mkdir(parents=True)
    (src / "conf.py").write_text(CONF)
    for path, text in HELPERS.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(textwrap.dedent(text).lstrip("\n"))
    (src / "d2l").mkdir()
    for name in ("__init__.py", "torch.py"):
        shutil.copyfile(CORPUS / "d2l" / name, src / "d2l" / name)  # not its read-only mode
    pages = {**{d: ("alpha", c) for d, c in PAGES.items()}, **{d: ("torchy", c) for d, c in D2L_PAGES.items()}}
    for docname, (framework, cells) in pages.items():
        (src / f"{docname}.rst").write_text(_page(docname, framework, cells))
    toctree = "".join(f"   {d}\n" for d in pages)
    (src / "index.rst").write_text(f"Helpers\n=======\n\n.. toctree::\n\n{toctree}")


def printing_edit(source: str, name: str) -> str:
    """``source`` with the top-level definition ``name`` changed: each function it defines
    (the function, or each method of the class) prints ``edited <name>`` first."""
    node = next(n for n in ast.parse(source).body if getattr(n, "name", None) == name)
    functions = [node] if not isinstance(node, ast.ClassDef) else [
        f for f in node.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
    ]
    assert functions, f"{name}: nothing that runs when called"
    lines = source.splitlines(keepends=True)
    for function in sorted(functions, key=lambda f: f.lineno, reverse=True):
        body = function.body
        first = body[1] if len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) else body[0]
        assert first.lineno > function.lineno, f"{name}: a one-line function"
        indent = " " * first.col_offset
        lines.insert(first.lineno - 1, f"{indent}print('edited {name}.{function.name}')\n")
    return "".join(lines)


def _edits(src: Path) -> list[tuple[str, str, str]]:
    """(label, file, edited text): each definition of the hand-made helpers, the d2l sample,
    and the edits of code that runs on import."""
    found = []
    for path in HELPERS:
        text = (src / path).read_text()
        for node in ast.parse(text).body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.append((f"{path}:{node.name}", path, printing_edit(text, node.name)))
    torch = (src / "d2l" / "torch.py").read_text()
    found += [(f"d2l/torch.py:{n}", "d2l/torch.py", printing_edit(torch, n)) for n in D2L_SAMPLE]
    for path, old, new in IMPORT_EDITS:
        text = (src / path).read_text()
        assert text.count(old) == 1, old
        found.append((f"{path}:{old.strip()}", path, text.replace(old, new)))
    return found


TRUTH = '''
import importlib, os, sys

SRC = {src!r}
touched = set()


def _audit(event, args):
    if event == "open" and args and isinstance(args[0], (str, bytes)):
        path = os.path.realpath(os.fsdecode(args[0]))
        if path.startswith(SRC + os.sep):
            touched.add(os.path.relpath(path, SRC))


sys.addaudithook(_audit)
# No bytecode read or written in the book's folders: an edit is always compiled afresh.
sys.dont_write_bytecode = True
sys.pycache_prefix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "no-pycache")


def _places(module):
    """A module's file and package folders (torch's namespaces answer any attribute)."""
    places = [getattr(module, "__file__", None)]
    try:
        places += list(module.__dict__.get("__path__") or ())
    except TypeError:
        pass
    return [p for p in places if isinstance(p, str)]


def fresh(folder):
    """Forget every module imported from the book, reset the namespace, go to the page's folder."""
    for name, module in list(sys.modules.items()):
        if any(os.path.realpath(p).startswith(SRC + os.sep) for p in _places(module)):
            del sys.modules[name]
    importlib.invalidate_caches()
    # As %reset does, without the garbage collection that takes a second with torch imported.
    shell = get_ipython()
    for name in [n for n in shell.user_ns if n not in shell.user_ns_hidden]:
        del shell.user_ns[name]
    shell.history_manager.output_hist.clear()
    os.chdir(folder)
    touched.clear()


def opened():
    print(sorted(touched))
'''


class Truth:
    """One real kernel that runs sessions fresh, one after another (see the module's text)."""

    def __init__(self, src: Path, env: dict[str, str]) -> None:
        self.src = src
        self.manager = KernelManager(kernel_name="python3")
        self.manager.start_kernel(cwd=str(src), env=env)
        self.client = self.manager.client()
        self.client.start_channels()
        self.client.wait_for_ready(timeout=timing.REACH)
        truth = src.parent / "truth"
        truth.mkdir()
        (truth / "_truth.py").write_text(TRUTH.format(src=os.path.realpath(src)))
        self._run(f"import sys; sys.path.insert(0, {str(truth)!r}); import _truth")
        # What d2l imports, imported once (d2l itself is forgotten before each session).
        self.warming = self.client.execute("from d2l import torch")

    def _run(self, code: str) -> list[str]:
        outputs: list[dict] = []

        def hook(message):
            if message["msg_type"] in ("stream", "execute_result", "display_data", "error"):
                outputs.append({"output_type": message["msg_type"], **message["content"]})

        reply = self.client.execute_interactive(code, output_hook=hook, timeout=timing.ORACLE_CELL)
        assert reply["content"]["status"] in ("ok", "error"), reply
        return _printed(outputs)

    def session(self, docname: str, cells: list[str]) -> tuple[list[str], set[str]]:
        """What each cell prints (one string per cell), and the book's files the session opened."""
        folder = (self.src / docname).parent
        assert not self._run(f"__import__('_truth').fresh({str(folder)!r})")
        printed = ["".join(self._run(code)) for code in cells]
        opened = self._run("__import__('_truth').opened()")
        return printed, set(ast.literal_eval(opened[0].partition(": ")[2]))

    def close(self) -> None:
        self.client.stop_channels()
        self.manager.shutdown_kernel(now=True)


def _stale(src: Path) -> dict[str, bool]:
    """By page: whether a cache-mode build finds its stored session stale (an auto build runs it)."""
    app, warnings = build_site(src, "dummy", confoverrides={"livecells_execute": "cache"})
    assert "livecells.depends" not in warnings, warnings
    return {page: outcome.stale for (page, _), outcome in app.env.livecells_outcome.sessions.items()}


def _printed(outputs: list[dict]) -> list[str]:
    """nbformat outputs as text, one string each; a stream's pieces joined (a kernel sends
    ``print``'s text and its newline as one message or two)."""
    printed: list[str] = []
    stream = None
    for output in outputs:
        kind = output["output_type"]
        if kind == "stream" and stream == output["name"]:
            printed[-1] += output["text"]
            continue
        stream = output["name"] if kind == "stream" else None
        if kind == "stream":
            printed.append(f"{output['name']}: {output['text']}")
        elif kind == "error":
            printed.append(f"error: {output['ename']}: {output['evalue']}")
        else:
            printed.append(f"{kind}: {output['data'].get('text/plain', '')}")
    return printed


def _stored_printed(record) -> list[str]:
    """What a stored session's cells printed, as :meth:`Truth.session` writes it."""
    return ["".join(_printed(cell.outputs)) for cell in record.cells]


def test_every_session_a_helper_edit_changes_runs_again(tmp_path, monkeypatch, no_kernel_left):
    if CORPUS is None:
        if os.environ.get("CI"):
            pytest.fail("the d2l corpus (../shared/d2l-corpus) is missing on CI")
        pytest.skip("the d2l corpus (../shared/d2l-corpus) is not here")
    started = time.monotonic()
    src = tmp_path / "src"
    _book(src)
    # The kernels find the book's d2l on PYTHONPATH, as the migration guide says; a source edit
    # within the same second must never be read from a stale .pyc.
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    pages = {**PAGES, **D2L_PAGES}
    frameworks = {**dict.fromkeys(PAGES, "alpha"), **dict.fromkeys(D2L_PAGES, "torchy")}
    truth = Truth(src, dict(os.environ))
    try:
        app, warnings = build_site(src, "dummy")  # the kernels of the build and the truth's warm up together
        assert "WARNING" not in warnings, warnings
        outcome = app.env.livecells_outcome
        assert outcome.failed == 0 and len(outcome.sessions) == len(pages)
        truth.client.get_shell_msg(timeout=timing.ORACLE_CELL)  # the truth kernel's d2l imports, done
        baseline = {docname: truth.session(docname, cells) for docname, cells in pages.items()}
        for docname, (printed, opened) in baseline.items():
            # The truth runner prints what livecells' kernels printed, and no session fails.
            assert printed == _stored_printed(outcome.records[(docname, frameworks[docname])]), docname
            assert opened and not any(p.startswith("error: ") for p in printed), (docname, printed)
        assert not any(_stale(src).values())  # nothing edited: nothing stale
        edits = _edits(src)
        missed, needless, changes = [], [], 0
        spent = {"stale": 0.0, "truth": 0.0}
        for label, path, edited in edits:
            original = (src / path).read_text()
            (src / path).write_text(edited)
            try:
                t0 = time.monotonic()
                stale = _stale(src)
                spent["stale"] += time.monotonic() - t0
                t0 = time.monotonic()
                for docname, cells in pages.items():
                    if path not in baseline[docname][1]:
                        changed = False  # it never opened the file
                    else:
                        printed = truth.session(docname, cells)[0]
                        changed = printed != baseline[docname][0]
                    changes += changed
                    if changed and not stale[docname]:
                        again = truth.session(docname, cells)[0]
                        missed.append(f"{label} changes {docname}: {baseline[docname][0]} -> {printed}, {again}")
                    elif stale[docname] and not changed:
                        needless.append(f"{label}: {docname}")
                spent["truth"] += time.monotonic() - t0
            finally:
                (src / path).write_text(original)
        report = {"edits": len(edits), "changed sessions": changes, "needless reruns": len(needless),
                  "seconds": round(time.monotonic() - started), **spent}
        print(json.dumps(report))
        assert not missed, "\n".join(missed)
        assert changes >= len(edits) // 2  # the edits change what sessions print
    finally:
        truth.close()
