"""Fine-grained dependencies on the book's own Python helper modules (``d2l/torch.py``).

A ``.py`` file that ``livecells_depends`` (or a page's ``:depends:``) matches is read as the module
its cells import: its name comes from its package folders (``d2l/torch.py`` beside
``d2l/__init__.py`` is ``d2l.torch``; a file outside any package is named by its stem). A
session's key then covers, of each such module, only what the session can reach:

- what runs on import (:mod:`livecells.plan.modules`: every top-level statement that is not a
  plain ``def`` or ``class``, and the calls a definition makes when it is defined), with what it
  reads, when the session imports the module (its cells, or the framework's ``preload``), or one
  of its submodules;
- the source of each top-level definition the cells reference (``d2l.Trainer``, ``from d2l.torch
  import plot``, ``class X(d2l.Module)``), followed through the module's own definitions (a name
  a definition reads, ``d2l.X`` through the module's ``d2l = sys.modules[__name__]``).

Where static reading cannot see, the session depends on the whole file: the module object used
other than by ``module.name`` (passed, ``getattr``, ``vars``), a dunder attribute, ``import *``,
a string that names the package (``importlib.import_module``, ``%run``), a cell that does not
parse, a definition that reads its own module as a whole (``globals()``, ``eval``), a module that
imports another helper module or does not parse. Nothing here knows Sphinx.
"""

from __future__ import annotations

import ast
import dataclasses
import functools
import hashlib
import json
import os
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from livecells.plan.lookups import dynamic_lookup, import_bindings
from livecells.plan.modules import (
    READER,
    HelperModule,
    digest_of,
    imported_modules,
    module_name,
    prefixes,
    read_module,
)

#: A definition that is not there (yet): adding it changes the keys of the sessions that named it.
ABSENT = "<absent>"


@dataclass
class Usage:
    """What a session's cells reach of the helper modules, by module name."""

    imported: set[str] = field(default_factory=set)
    names: dict[str, set[str]] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)
    #: The top-level names of the other modules the cells import (a module of the book's own
    #: folder may import a helper module in turn).
    others: set[str] = field(default_factory=set)
    #: Every module name the cells import (``from a import b``: ``a`` and ``a.b``), to find the
    #: helper files a kernel imports by a name other than livecells' own.
    named: set[str] = field(default_factory=set)

    def use(self, module: str, name: str) -> None:
        self.names.setdefault(module, set()).add(name)


@functools.cache
def _transformer() -> Any:
    try:
        from IPython.core.inputtransformer2 import TransformerManager
    except ImportError:
        return None
    return TransformerManager()


def _python(code: str) -> str | None:
    """A cell's code as the Python IPython runs (magics become calls); None if IPython is not
    importable and the code is not plain Python."""
    manager = _transformer()
    if manager is None:
        return code
    try:
        return manager.transform_cell(code)
    except Exception:  # IPython's transformers raise what they raise on odd input
        return None


#: Line magics whose argument is code (``%time d2l.plot(x)``).
CODE_MAGICS = frozenset({"time", "timeit", "prun", "capture", "debug"})


def _magic_code(tree: ast.AST) -> list[str]:
    """The code that a cell's magics run: a cell magic's body, a ``%time``'s line."""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args):
            continue
        name = node.args[0].value if isinstance(node.args[0], ast.Constant) else None
        values = [a.value for a in node.args[1:] if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if node.func.attr == "run_cell_magic" and len(node.args) == 3:
            found.extend(values[-1:])
        elif node.func.attr == "run_line_magic" and name in CODE_MAGICS:
            found.extend(values[:1])
    return found


#: What sessions reach, by session (or by code): the code's digest and the :class:`Usage`. Kept
#: in the build environment, so that a build reads again only the sessions whose code changed.
UsageCache = dict[Hashable, tuple[str, Usage]]


class Helpers:
    """The helper modules a session's key may cover, by import name."""

    def __init__(
        self, modules: Iterable[HelperModule], usages: UsageCache | None = None, roots: Iterable[str] = ()
    ) -> None:
        by_name: dict[str, dict[str, HelperModule]] = {}
        for module in modules:  # the same file from the book's and a page's patterns: once
            by_name.setdefault(module.name, {}).setdefault(module.digest, module)
        #: One module per name; two files of one name and other contents (``a/tools.py``,
        #: ``b/tools.py``), whichever a kernel imports, count whole, both.
        self.modules = {
            name: next(iter(found.values())) if len(found) == 1 else HelperModule(
                name, "; ".join(sorted(found)), digest_of(sorted((m.path, m.digest) for m in found.values())),
                readable=False,
            )
            for name, found in sorted(by_name.items())
        }
        #: Every package a helper module lives in, and the helpers themselves.
        self.known = {p for name in self.modules for p in prefixes(name)}
        self.packages = {name.split(".")[0] for name in self.modules}
        #: Top-level helper modules (no package): a cell may reach them by another name.
        self.stems = {name for name in self.modules if "." not in name}
        words = sorted(self.packages)
        self._mention = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b") if words else None
        #: The folders the helper modules' patterns were relative to (the source folder).
        self.roots: tuple[str, ...] = tuple(roots)
        self.usages: UsageCache = {} if usages is None else usages
        self._names = json.dumps([sorted(self.known), sorted(self.stems)])
        #: Each module by its file (the real path), and what a name finds from a folder.
        self._files = {os.path.realpath(m.location): m.name for m in self.modules.values() if m.location}
        self._found: dict[tuple[str, str], frozenset[str]] = {}

    def __bool__(self) -> bool:
        return bool(self.modules)

    def under(self, name: str) -> set[str]:
        """The helper modules at or below ``name`` (a module, or a package that holds some)."""
        return {m for m in self.modules if m == name or m.startswith(name + ".")}

    def usage(self, cells: Sequence[str], preload: Iterable[str] = (), slot: Hashable = None) -> Usage:
        """What ``cells`` (a session's code, in order) and the framework's ``preload`` reach.

        Kept in :attr:`usages` under ``slot`` (a session's name; ``None``: by its code), and
        reused while the code, the preload and the helper modules' names are the same."""
        preload = tuple(preload)
        digest = digest_of(READER, list(cells), list(preload), self._names)
        known = self.usages.get(digest if slot is None else slot)
        if known is not None and known[0] == digest:
            return known[1]
        usage = self._usage(cells, preload)
        self.usages[digest if slot is None else slot] = (digest, usage)
        return usage

    def _usage(self, cells: Sequence[str], preload: Iterable[str]) -> Usage:
        usage = Usage()
        for module in preload:
            usage.imported.update(p for p in prefixes(module) if p in self.known)
        bound: dict[str, str] = {}  # a name -> the helper module or package it is bound to
        trees = []
        todo = list(cells)
        while todo:
            code = todo.pop(0)
            python = _python(code)
            try:
                tree = ast.parse(python) if python is not None else None
            except (SyntaxError, ValueError):
                tree = None
            if tree is not None:
                todo.extend(_magic_code(tree))  # `%%time` and `%time`: their code is a string
            if tree is None:
                # Not read: whatever it names of the packages is used as a whole.
                mentioned = set(self._mention.findall(code)) if self._mention else set()
                mentioned |= {s for s in self.stems if re.search(rf"\b{re.escape(s)}\b", code)}
                for word in mentioned:
                    usage.whole |= self.under(word)
                continue
            trees.append(tree)
            self._bind(tree, bound, usage)
        bindings: dict[str, str] = {}
        for tree in trees:
            bindings.update(import_bindings(tree))
        for tree in trees:
            self._read(tree, bound, usage)
            if dynamic_lookup([tree], bindings) is not None:
                usage.whole |= set(self.modules)  # `globals()`, `sys.modules[name]`, `eval(...)`
        return usage

    def _bind(self, tree: ast.Module, bound: dict[str, str], usage: Usage) -> None:
        """The names the cells' imports bind to helper modules or their packages."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    usage.named.update(prefixes(alias.name))
                    usage.imported.update(p for p in prefixes(alias.name) if p in self.known)
                    usage.others.add(alias.name.split(".")[0])
                    self._other_name(alias.name, usage)
                    if alias.asname and alias.name in self.known:
                        bound[alias.asname] = alias.name
                    elif not alias.asname and alias.name.split(".")[0] in self.known:
                        bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                base = node.module
                usage.named.update(prefixes(base))
                usage.named.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
                usage.others.add(base.split(".")[0])
                self._other_name(base, usage)
                if base not in self.known:
                    for alias in node.names:
                        self._other_name(f"{base}.{alias.name}", usage)
                    continue
                usage.imported.update(p for p in prefixes(base) if p in self.known)
                for alias in node.names:
                    full = f"{base}.{alias.name}"
                    if alias.name == "*":
                        usage.whole |= self.under(base)
                    elif full in self.known:
                        usage.imported.add(full)
                        bound[alias.asname or alias.name] = full
                    else:
                        usage.use(base, alias.name)

    def _other_name(self, name: str, usage: Usage) -> None:
        """A helper module reached under a package it does not know of (a namespace package, a
        folder on ``sys.path``): ``import pkg.helpers`` for ``helpers.py`` uses all of it."""
        for module in self.modules:
            if name.endswith("." + module):
                usage.whole.add(module)

    def _read(self, tree: ast.Module, bound: dict[str, str], usage: Usage) -> None:
        """Each use of a bound name: ``d2l.name`` uses ``name``; anything else, the whole module."""
        chained: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and id(node) not in chained:
                chain, root = [], node
                while isinstance(root, ast.Attribute):
                    chained.add(id(root))
                    chain.append(root.attr)
                    root = root.value
                if isinstance(root, ast.Name) and root.id in bound:
                    chained.add(id(root))
                    self._attribute(bound[root.id], chain[::-1], usage)
            elif isinstance(node, ast.Name) and id(node) not in chained:
                if node.id in bound and not isinstance(node.ctx, ast.Store):
                    usage.whole |= self.under(bound[node.id])  # the module itself: passed, aliased
                elif node.id in self.packages and node.id not in bound:
                    usage.whole |= self.under(node.id)  # a package name no import binds here
            elif isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)):
                text = node.value if isinstance(node.value, str) else node.value.decode("latin-1")
                for word in set(self._mention.findall(text)) if self._mention else ():
                    usage.whole |= self.under(word)
                for stem in self.stems:
                    if re.search(rf"\b{re.escape(stem)}\b", text):
                        usage.whole.add(stem)

    def _attribute(self, module: str, chain: list[str], usage: Usage) -> None:
        """``module.a.b...``: walk down submodules; the first other name is the one used."""
        for i, name in enumerate(chain):
            if name.startswith("__"):
                usage.whole |= self.under(module)
                return
            if f"{module}.{name}" in self.known:
                module = f"{module}.{name}"
                usage.imported.add(module)
                continue
            usage.use(module, name)
            return
        usage.whole |= self.under(module)  # the chain ends at a module: used as an object

    def found(self, name: str, folders: Iterable[str]) -> set[str]:
        """The helper modules that importing ``name`` with ``folders`` on ``sys.path`` runs: the
        file it names, or, for a package whose ``__init__.py`` is not a helper module, every
        helper module below it (its ``__init__`` may import them)."""
        found: set[str] = set()
        if not self._files:
            return found
        for folder in folders:
            known = self._found.get((folder, name))
            if known is None:
                known = frozenset(self._find(name, folder))
                self._found[(folder, name)] = known
            found |= known
        return found

    def _find(self, name: str, folder: str) -> set[str]:
        path = os.path.join(folder, *name.split("."))
        for file in (path + ".py", os.path.join(path, "__init__.py")):
            if os.path.isfile(file):
                real = os.path.realpath(file)
                if real in self._files:
                    return {self._files[real]}
                if file.endswith("__init__.py") and self._init_imports(file, name):
                    below = os.path.dirname(real) + os.sep
                    return {m for f, m in self._files.items() if f.startswith(below)}
                return set()
        return set()

    def _init_imports(self, path: str, name: str) -> bool:
        """Whether a package's ``__init__.py`` (not a helper module) may import a helper."""
        try:
            tree = ast.parse(_source(path) or "")
        except (SyntaxError, ValueError):
            return True
        if dynamic_lookup([tree], import_bindings(tree, name)) is not None:
            return True
        return any(m == name or m.startswith(name + ".") or m in self.known for m in imported_modules(tree, name))

    def _local_import(self, names: Iterable[str], folders: Sequence[str]) -> bool:
        """Whether one of ``names`` is a module of the book's own (``name.py`` or a package in one
        of ``folders``) whose source names a helper package, or imports one that does."""
        todo, seen = list(names), set()
        while todo:
            name = todo.pop()
            if name in seen or name in self.known or self.found(name, folders):
                continue  # a helper module (by another name: counted whole where it is found)
            seen.add(name)
            for folder in folders:
                for path in (os.path.join(folder, f"{name}.py"), os.path.join(folder, name, "__init__.py")):
                    source = _source(path)
                    if source is None:
                        continue
                    if self._mention and self._mention.search(source) or any(
                        re.search(rf"\b{re.escape(stem)}\b", source) for stem in self.stems
                    ):
                        return True
                    try:
                        imports = imported_modules(ast.parse(source), name)
                    except (SyntaxError, ValueError):
                        return True
                    if any(self.found(m, folders) for m in imports):
                        return True  # a helper by the name a folder on sys.path gives it
                    todo.extend(m.split(".")[0] for m in imports)
                    if path.endswith("__init__.py"):  # its modules: the whole folder's .py files
                        todo.extend(f"{name}/{f[:-3]}" for f in _python_files(os.path.dirname(path)))
        return False

    def digest(
        self, cells: Sequence[str], preload: Iterable[str] = (), slot: Hashable = None, folders: Iterable[str] = ()
    ) -> str:
        """The part of a session's key that the helper modules make: what it reaches of each.
        ``folders``: where a kernel finds the book's own modules (the page's folder), besides
        the folders the helper modules were found from."""
        preload = tuple(preload)
        folders = tuple(folders)
        usage = self.usage(cells, preload, slot)
        wholes = set(usage.whole) & set(self.modules)
        others = (usage.others | {p.split(".")[0] for p in preload}) - self.known
        # Where a kernel finds modules by name: the page's folder, the source folder, PYTHONPATH.
        search = (*folders, *self.roots, *_pythonpath())
        if others and self._local_import(others, search):
            wholes |= set(self.modules)  # through a module of the book's own that imports one
        # The files a kernel imports by a name other than livecells' own (`import helper` for
        # pkg/helper.py from the page's folder pkg/): all of each.
        for named in usage.named | {p for m in preload for p in prefixes(m)}:
            wholes |= {m for m in self.found(named, search) if m != named}
        imported = set(usage.imported) | set(usage.names) | wholes
        # Importing a module runs its packages' __init__ first, and the modules its code imports.
        todo = list(imported)
        while todo:
            name = todo.pop()
            module = self.modules.get(name)
            reached = set(prefixes(name))
            if module is not None:
                inner = {m for m in module.imports if m in self.modules and m != name}
                inner |= {f for m in module.imports for f in self.found(m, search) if f != m}
                if inner or not module.readable:
                    wholes.add(name)
                    wholes |= inner
                reached |= inner
            for other in reached & set(self.modules) - imported:
                imported.add(other)
                todo.append(other)
        # A definition or import that looks up by name may reach any helper module.
        used: dict[str, set[str]] = {}
        for name, module in self.modules.items():
            if name not in imported:
                continue
            if name not in wholes:
                # A module's __getattr__ answers for the names it does not define (PEP 562).
                names = {*usage.names.get(name, ()), *module.import_names, "__getattr__"}
                used[name], all_of_it = module.closure(names)
                if all_of_it:
                    wholes |= set(self.modules)
            if module.dynamic or (name in wholes and module.whole_definitions):
                wholes |= set(self.modules)
        parts = []
        for name, module in self.modules.items():
            if name in wholes:
                parts.append([name, "whole", module.path, module.digest])
            elif name in imported:
                definitions = sorted((n, module.definitions.get(n, ABSENT)) for n in used[name])
                parts.append([name, "import", module.path, module.import_digest, definitions])
        return digest_of(parts) if parts else ""


def _source(path: str) -> str | None:
    """A file's text, or None if it is not there (or not text)."""
    try:
        with open(path, encoding="utf-8") as handle:
            return handle.read()
    except (OSError, UnicodeDecodeError, ValueError):
        return None


def _pythonpath() -> list[str]:
    """The folders of ``PYTHONPATH``, which the kernels inherit."""
    return [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]


def _python_files(folder: str) -> list[str]:
    try:
        return sorted(f for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py")
    except OSError:
        return []


#: The helper modules last read, by (path, name): kept in the build environment, so that an
#: unchanged module (the same content digest) is not parsed again by the next build.
ModuleCache = dict[tuple[str, str], HelperModule]


def read_helpers(
    base: str,
    files: Iterable[str],
    cache: ModuleCache | None = None,
    usages: UsageCache | None = None,
    names: Mapping[str, str] | None = None,
) -> Helpers:
    """The helper modules among ``files`` (the ``.py`` ones), each parsed once per content;
    ``names``: the import names of some of them (by path), instead of their package folders'."""
    modules = []
    for path in files:
        if not path.endswith(".py"):
            continue
        relative, name = os.path.relpath(path, base), (names or {}).get(path) or module_name(path, base)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            modules.append(HelperModule(name, relative, "<unreadable>", readable=False))
            continue
        digest = hashlib.sha256(data).hexdigest()
        known = cache.get((relative, name)) if cache is not None else None
        if known is None or known.digest != digest or known.reader != READER:
            try:
                source: str | None = data.decode("utf-8")
            except UnicodeDecodeError:
                source = None
            known = read_module(name, relative, digest, source)
            if cache is not None:
                cache[(relative, name)] = known
        location = os.path.abspath(path)
        modules.append(known if known.location == location else dataclasses.replace(known, location=location))
    return Helpers(modules, usages, [base])
