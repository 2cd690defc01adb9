"""Fine-grained dependencies on the book's own Python helper modules (``d2l/torch.py``).

A ``.py`` file that ``livecells_depends`` (or a page's ``:depends:``) matches is read as the module
its cells import: its name comes from its package folders (``d2l/torch.py`` beside
``d2l/__init__.py`` is ``d2l.torch``; a file outside any package is named by its stem). A
session's key then covers, of each such module, only what the session can reach:

- what runs on import (every top-level statement that is not a plain ``def`` or ``class``, and
  those whose decorators, defaults or class-level code call something), with what it reads,
  when the session imports the module (its cells, or the framework's ``preload``), or one of its
  submodules;
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
import functools
import hashlib
import json
import os
import re
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: ``livecells_depends_granularity``: per definition (the default), or per file (each session's key
#: covers every matched file, as before).
GRANULARITIES = ("definitions", "files")
#: A definition that is not there (yet): adding it changes the keys of the sessions that named it.
ABSENT = "<absent>"
#: Calls that read a module's namespace as a whole (the last three without arguments).
WHOLE_CALLS = frozenset({"globals", "eval", "exec", "__import__", "vars", "locals", "dir"})


def module_name(path: str) -> str:
    """The import name of the Python file ``path``: its stem, under each folder above it that
    holds an ``__init__.py`` (``d2l/torch.py`` -> ``d2l.torch``, ``d2l/__init__.py`` -> ``d2l``)."""
    folder, file = os.path.split(os.path.abspath(path))
    parts = [] if file == "__init__.py" else [file[: -len(".py")]]
    while os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, name = os.path.split(folder)
        parts.insert(0, name)
        if not name:
            break
    return ".".join(parts)


def _digest(*parts: object) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def _segment(source: str, lines: list[int], node: ast.stmt) -> str:
    """A top-level statement's source text, its decorators included."""
    first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
    end = node.end_lineno or node.lineno
    return source[lines[first - 1] : lines[end]] if end < len(lines) else source[lines[first - 1] :]


#: Method decorators that only wrap the method they decorate.
PLAIN_DECORATORS = frozenset({"property", "staticmethod", "classmethod", "abstractmethod", "cached_property"})


def _plain_method(node: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return all(
        (isinstance(d, ast.Name) and d.id in PLAIN_DECORATORS)
        or (isinstance(d, ast.Attribute) and d.attr in {"setter", "getter", "deleter"})
        for d in node.decorator_list
    )


def _import_time(node: ast.stmt) -> list[ast.expr] | None:
    """What of a top-level statement runs on import beyond binding a name: None for the whole
    statement (not a ``def`` or ``class``; a decorated one, as ``@add_to_class(Trainer)`` changes
    another class; class-level code other than definitions), else the expressions of a ``def`` or
    ``class`` that call something when it is defined (defaults, bases, class attributes)."""
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) or node.decorator_list:
        return None
    found: list[ast.expr] = []
    if isinstance(node, ast.ClassDef):
        found += [*node.bases, *(k.value for k in node.keywords)]
        for statement in node.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if not _plain_method(statement):
                    return None
                found += [*statement.args.defaults, *filter(None, statement.args.kw_defaults)]
            elif isinstance(statement, ast.Pass) or (
                isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant)
            ):
                continue
            elif isinstance(statement, (ast.Assign, ast.AnnAssign)):
                targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
                if not all(isinstance(t, ast.Name) for t in targets):
                    return None
                if statement.value is not None:
                    found.append(statement.value)
            else:
                return None
    else:
        found += [*node.args.defaults, *filter(None, node.args.kw_defaults)]
    return [e for e in found if any(isinstance(n, ast.Call) for n in ast.walk(e))]


def _self_aliases(tree: ast.Module) -> set[str]:
    """Top-level names bound to the module itself: ``d2l = sys.modules[__name__]``."""
    found = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and "sys.modules[__name__]" == ast.unparse(node.value):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return found


def _bound(node: ast.AST) -> set[str]:
    """The top-level names a statement that runs on import binds (not inside a def or class)."""
    found: set[str] = set()
    todo: list[ast.AST] = [node]
    while todo:
        item = todo.pop()
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            found.add(item.name)
            continue
        if isinstance(item, ast.Lambda):
            continue
        if isinstance(item, ast.Name) and isinstance(item.ctx, (ast.Store, ast.Del)):
            found.add(item.id)
        elif isinstance(item, ast.alias) and item.name != "*":
            found.add(item.asname or item.name.split(".")[0])
        todo.extend(ast.iter_child_nodes(item))
    return found


def _references(nodes: Iterable[ast.AST], aliases: set[str]) -> tuple[set[str], bool]:
    """The names ``nodes`` read (``name``, ``alias.name``) and whether they read the module as a
    whole (a bare alias, a dunder attribute of it, ``globals()``...)."""
    names: set[str] = set()
    whole = False
    for root in nodes:
        attribute_values = set()
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
                attribute_values.add(id(node.value))
                if node.attr.startswith("__"):
                    whole = True
                names.add(node.attr)
            elif isinstance(node, ast.Name):
                if node.id in aliases and id(node) not in attribute_values and not isinstance(node.ctx, ast.Store):
                    whole = True
                names.add(node.id)
            elif isinstance(node, ast.Call) and _reads_namespace(node):
                whole = True
    return names, whole


def _reads_namespace(call: ast.Call) -> bool:
    """``globals()``, ``eval(...)``, ``vars()``: a call that reads the namespace it runs in."""
    if not isinstance(call.func, ast.Name) or call.func.id not in WHOLE_CALLS:
        return False
    return call.func.id not in {"vars", "locals", "dir"} or not (call.args or call.keywords)


def _imported_modules(tree: ast.AST) -> set[str]:
    """Every absolute module an import statement anywhere in ``tree`` names (and the parents)."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(_prefixes(alias.name))
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.update(_prefixes(node.module))
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
    return found


def _prefixes(name: str) -> list[str]:
    parts = name.split(".")
    return [".".join(parts[: i + 1]) for i in range(len(parts))]


@dataclass(frozen=True)
class HelperModule:
    """One helper module as its keys read it."""

    name: str
    #: The path the key names it by (relative to the folder its pattern is relative to).
    path: str
    #: The whole file's digest.
    digest: str
    #: None: the file could not be read as Python; whoever imports it depends on all of it.
    readable: bool = True
    #: The digest of what runs on import, and the top-level names that code reads.
    import_digest: str = ""
    import_names: frozenset[str] = frozenset()
    #: Per top-level definition (plain ``def``/``class``): the digest of its source.
    definitions: Mapping[str, str] = field(default_factory=dict)
    #: Per definition: the top-level names it reads.
    references: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Definitions that read the module as a whole (``globals()``, the module object).
    whole_definitions: frozenset[str] = frozenset()
    #: Absolute module names its import statements name (to find other helper modules).
    imports: frozenset[str] = frozenset()

    def closure(self, names: Iterable[str]) -> tuple[set[str], bool]:
        """The definitions ``names`` reach through the module's own definitions (with the names
        that are no definition), and whether one of them reads the module as a whole."""
        seen: set[str] = set()
        todo = list(names)
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name in self.whole_definitions:
                return seen, True
            todo.extend(self.references.get(name, ()))
        return seen, False


def read_module(name: str, path: str, digest: str, source: str | None) -> HelperModule:
    """Read one helper module: what runs on import, its definitions and what each reads."""
    if source is None:
        return HelperModule(name, path, digest, readable=False)
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return HelperModule(name, path, digest, readable=False)
    aliases = _self_aliases(tree)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    on_import: list[ast.AST] = []
    import_text: list[str] = []
    segments: dict[str, list[str]] = {}
    bodies: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        calls = _import_time(node)
        if calls is None:
            on_import.append(node)
            import_text.append(_segment(source, starts, node))
            continue
        assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        segments.setdefault(node.name, []).append(_segment(source, starts, node))
        bodies.setdefault(node.name, []).append(node)
        # What its definition calls runs on import: `def f(devices=try_all_gpus())`.
        on_import.extend(calls)
        import_text.extend(f"{node.name}: {ast.unparse(e)}" for e in calls)
    # A name bound both ways (a def, then `name = other`) is read as code that runs on import.
    for node in list(on_import):
        for name in _bound(node) & set(segments) if isinstance(node, ast.stmt) else ():
            import_text.extend(segments.pop(name))
            on_import.extend(bodies.pop(name))
    top = set(segments)
    references, whole = {}, set()
    for definition, nodes in bodies.items():
        read, reads_all = _references(nodes, aliases)
        references[definition] = frozenset(read & top - {definition})
        if reads_all:
            whole.add(definition)
    import_read, import_all = _references(on_import, aliases)
    if import_all:
        return HelperModule(name, path, digest, readable=False)
    return HelperModule(
        name,
        path,
        digest,
        import_digest=_digest(import_text),
        import_names=frozenset(import_read & top),
        definitions={k: _digest(v) for k, v in segments.items()},
        references=references,
        whole_definitions=frozenset(whole),
        imports=frozenset(_imported_modules(tree)),
    )


@dataclass
class Usage:
    """What a session's cells reach of the helper modules, by module name."""

    imported: set[str] = field(default_factory=set)
    names: dict[str, set[str]] = field(default_factory=dict)
    whole: set[str] = field(default_factory=set)

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


#: What sessions reach, by session (or by code): the code's digest and the :class:`Usage`. Kept
#: in the build environment, so that a build reads again only the sessions whose code changed.
UsageCache = dict[Hashable, tuple[str, Usage]]


class Helpers:
    """The helper modules a session's key may cover, by import name."""

    def __init__(self, modules: Iterable[HelperModule], usages: UsageCache | None = None) -> None:
        by_name: dict[str, dict[str, HelperModule]] = {}
        for module in modules:
            by_name.setdefault(module.name, {})[module.path] = module
        #: One module per name; two files of one name (``a/tools.py``, ``b/tools.py``), whichever
        #: a kernel imports, count whole, both.
        self.modules = {
            name: next(iter(found.values())) if len(found) == 1 else HelperModule(
                name, "; ".join(sorted(found)), _digest(sorted((m.path, m.digest) for m in found.values())),
                readable=False,
            )
            for name, found in sorted(by_name.items())
        }
        #: Every package a helper module lives in, and the helpers themselves.
        self.known = {p for name in self.modules for p in _prefixes(name)}
        self.packages = {name.split(".")[0] for name in self.modules}
        #: Top-level helper modules (no package): a cell may reach them by another name.
        self.stems = {name for name in self.modules if "." not in name}
        words = sorted(self.packages)
        self._mention = re.compile(r"\b(" + "|".join(map(re.escape, words)) + r")\b") if words else None
        self.usages: UsageCache = {} if usages is None else usages
        self._names = json.dumps([sorted(self.known), sorted(self.stems)])

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
        digest = _digest(list(cells), list(preload), self._names)
        known = self.usages.get(digest if slot is None else slot)
        if known is not None and known[0] == digest:
            return known[1]
        usage = self._usage(cells, preload)
        self.usages[digest if slot is None else slot] = (digest, usage)
        return usage

    def _usage(self, cells: Sequence[str], preload: Iterable[str]) -> Usage:
        usage = Usage()
        for module in preload:
            usage.imported.update(p for p in _prefixes(module) if p in self.known)
        bound: dict[str, str] = {}  # a name -> the helper module or package it is bound to
        trees = []
        for code in cells:
            python = _python(code)
            try:
                tree = ast.parse(python) if python is not None else None
            except (SyntaxError, ValueError):
                tree = None
            if tree is None:
                # Not read: whatever it names of the packages is used as a whole.
                mentioned = set(self._mention.findall(code)) if self._mention else set()
                mentioned |= {s for s in self.stems if re.search(rf"\b{re.escape(s)}\b", code)}
                for word in mentioned:
                    usage.whole |= self.under(word)
                continue
            trees.append(tree)
            self._bind(tree, bound, usage)
        for tree in trees:
            self._read(tree, bound, usage)
        return usage

    def _bind(self, tree: ast.Module, bound: dict[str, str], usage: Usage) -> None:
        """The names the cells' imports bind to helper modules or their packages."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    usage.imported.update(p for p in _prefixes(alias.name) if p in self.known)
                    self._other_name(alias.name, usage)
                    if alias.asname and alias.name in self.known:
                        bound[alias.asname] = alias.name
                    elif not alias.asname and alias.name.split(".")[0] in self.known:
                        bound[alias.name.split(".")[0]] = alias.name.split(".")[0]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                base = node.module
                self._other_name(base, usage)
                if base not in self.known:
                    for alias in node.names:
                        self._other_name(f"{base}.{alias.name}", usage)
                    continue
                usage.imported.update(p for p in _prefixes(base) if p in self.known)
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
        """A top-level helper module reached by another name (a namespace package, a folder on
        ``sys.path``): ``import pkg.helpers`` for ``helpers.py`` uses all of it."""
        last = name.split(".")[-1]
        if last in self.stems and name != last:
            usage.whole.add(last)

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

    def digest(self, cells: Sequence[str], preload: Iterable[str] = (), slot: Hashable = None) -> str:
        """The part of a session's key that the helper modules make: what it reaches of each."""
        usage = self.usage(cells, preload, slot)
        wholes = set(usage.whole)
        imported = set(usage.imported) | set(usage.names)
        # Importing a module runs its packages' __init__ first, and the modules its code imports.
        todo = list(imported)
        while todo:
            name = todo.pop()
            for parent in _prefixes(name):
                if parent in self.modules and parent not in imported:
                    imported.add(parent)
                    todo.append(parent)
            module = self.modules.get(name)
            if module is None:
                continue
            others = {m for m in module.imports if m in self.modules and m != name}
            if others or not module.readable:
                wholes.add(name)
                wholes |= others
        parts = []
        for name, module in self.modules.items():
            if name in wholes:
                parts.append([name, "whole", module.path, module.digest])
                continue
            if name not in imported:
                continue
            used, all_of_it = module.closure({*usage.names.get(name, ()), *module.import_names})
            if all_of_it:
                parts.append([name, "whole", module.path, module.digest])
                continue
            definitions = sorted((n, module.definitions.get(n, ABSENT)) for n in used)
            parts.append([name, "import", module.path, module.import_digest, definitions])
        return _digest(parts) if parts else ""


#: The helper modules last read, by (path, name): kept in the build environment, so that an
#: unchanged module (the same content digest) is not parsed again by the next build.
ModuleCache = dict[tuple[str, str], HelperModule]


def read_helpers(
    base: str, files: Iterable[str], cache: ModuleCache | None = None, usages: UsageCache | None = None
) -> Helpers:
    """The helper modules among ``files`` (the ``.py`` ones), each parsed once per content."""
    modules = []
    for path in files:
        if not path.endswith(".py"):
            continue
        relative, name = os.path.relpath(path, base), module_name(path)
        try:
            with open(path, "rb") as handle:
                data = handle.read()
        except OSError:
            modules.append(HelperModule(name, relative, "<unreadable>", readable=False))
            continue
        digest = hashlib.sha256(data).hexdigest()
        known = cache.get((relative, name)) if cache is not None else None
        if known is None or known.digest != digest:
            try:
                source: str | None = data.decode("utf-8")
            except UnicodeDecodeError:
                source = None
            known = read_module(name, relative, digest, source)
            if cache is not None:
                cache[(relative, name)] = known
        modules.append(known)
    return Helpers(modules, usages)
