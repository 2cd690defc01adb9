"""A helper module as session keys read it: what runs on import, its top-level definitions and
what each reads (:mod:`livecells.plan.helpers` says what a session reaches of it).

Read with :mod:`ast` from the module's source text: a definition is its source segment
(decorators included), hashed; what runs on import is every top-level statement that is not a
plain ``def`` or ``class``, and the calls a definition makes when it is defined. Nothing here
knows Sphinx.
"""

from __future__ import annotations

import ast
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from livecells.plan.lookups import dynamic_lookup, from_base, import_bindings

#: Bumped when what :func:`read_module` finds changes: a module cached by an older livecells is
#: read again.
READER = 2


def module_name(path: str, root: str | None = None) -> str:
    """The import name of the Python file ``path``: its stem, under each folder above it that
    holds an ``__init__.py`` (``d2l/torch.py`` -> ``d2l.torch``, ``d2l/__init__.py`` -> ``d2l``),
    up to ``root`` (the folder its pattern is relative to, which a kernel has on ``sys.path``
    rather than imports as a package: a source folder with an ``__init__.py`` of its own)."""
    folder, file = os.path.split(os.path.abspath(path))
    parts = [] if file == "__init__.py" else [file[: -len(".py")]]
    stop = os.path.abspath(root) if root is not None else None
    while folder != stop and os.path.isfile(os.path.join(folder, "__init__.py")):
        folder, name = os.path.split(folder)
        parts.insert(0, name)
        if not name:
            break
    return ".".join(parts)


def digest_of(*parts: object) -> str:
    """SHA-256 of ``parts`` as JSON: what a key holds of a definition, or of a module's usage."""
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


def _self_aliases(tree: ast.Module, name: str, bindings: dict[str, str]) -> tuple[set[str], list[ast.stmt]]:
    """The names bound to the module itself (``d2l = sys.modules[__name__]`` at the top level, an
    import of its own name anywhere) and the top-level statements that bind the first kind."""
    found = {bound for bound, module in bindings.items() if module == name}
    statements = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and "sys.modules[__name__]" == ast.unparse(node.value):
            found.update(t.id for t in node.targets if isinstance(t, ast.Name))
            statements.append(node)
    return found, statements


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


def _references(
    nodes: Iterable[ast.AST], aliases: set[str], bindings: dict[str, str]
) -> tuple[set[str], bool]:
    """The names ``nodes`` read (``name``, ``alias.name``) and whether they may read a helper
    module as a whole: a bare alias or a dunder attribute of it, a lookup by name
    (:func:`~livecells.plan.lookups.dynamic_lookup`: ``globals()``, ``sys.modules``...)."""
    names: set[str] = set()
    whole = dynamic_lookup(nodes, bindings) is not None
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
    return names, whole


def _registering(tree: ast.Module) -> set[str]:
    """Top-level classes whose definition runs code of the module's own: those with a
    ``metaclass=``, or a base (of the module, at any depth) that defines ``__init_subclass__``
    or has one (a registry: ``class Relu(Activation)`` files itself under ``"relu"``)."""
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    found = {
        name for name, node in classes.items()
        if any(k.arg == "metaclass" for k in node.keywords)
        or any(getattr(s, "name", None) == "__init_subclass__" for s in node.body)
    }  # fmt: skip
    grown = True
    while grown:
        grown = False
        for name, node in classes.items():
            if name not in found and any(isinstance(b, ast.Name) and b.id in found for b in node.bases):
                found.add(name)
                grown = True
    return found


def imported_modules(tree: ast.AST, package: str) -> set[str]:
    """Every module an import statement anywhere in ``tree`` names (and the parents), relative
    ones (``from .tools import area``) resolved against ``package``, the module's own package."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.update(prefixes(alias.name))
        elif isinstance(node, ast.ImportFrom):
            base = from_base(node, package)
            if not base:
                continue
            found.update(prefixes(base))
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return found


def prefixes(name: str) -> list[str]:
    """``a.b.c`` -> ``a``, ``a.b``, ``a.b.c``: what importing it imports."""
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
    #: False: the file could not be read as Python; whoever imports it depends on all of it.
    readable: bool = True
    #: The :data:`READER` that read it.
    reader: int = READER
    #: The digest of what runs on import, and the top-level names that code reads.
    import_digest: str = ""
    import_names: frozenset[str] = frozenset()
    #: Per top-level definition (plain ``def``/``class``): the digest of its source.
    definitions: Mapping[str, str] = field(default_factory=dict)
    #: Per definition: the top-level names it reads.
    references: Mapping[str, frozenset[str]] = field(default_factory=dict)
    #: Definitions that may read a helper module as a whole (``globals()``, the module object,
    #: a lookup by name): a session that reaches one depends on every helper module whole.
    whole_definitions: frozenset[str] = frozenset()
    #: What runs on import does such a lookup: every importer depends on every helper whole.
    dynamic: bool = False
    #: Absolute module names its import statements name (to find other helper modules).
    imports: frozenset[str] = frozenset()
    #: The file's absolute path (not part of any key): which file a kernel imports by a name.
    location: str = ""

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
    package = name if path.endswith("__init__.py") else name.rpartition(".")[0]
    bindings = import_bindings(tree, package)
    aliases, alias_statements = _self_aliases(tree, name, bindings)
    registering = _registering(tree)
    starts = [0]
    for line in source.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))
    on_import: list[ast.AST] = []
    import_text: list[str] = []
    segments: dict[str, list[str]] = {}
    bodies: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        calls = None if isinstance(node, ast.ClassDef) and node.name in registering else _import_time(node)
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
        for bound in _bound(node) & set(segments) if isinstance(node, ast.stmt) else ():
            import_text.extend(segments.pop(bound))
            on_import.extend(bodies.pop(bound))
    top = set(segments)
    references, whole = {}, set()
    for definition, nodes in bodies.items():
        read, reads_all = _references(nodes, aliases, bindings)
        references[definition] = frozenset(read & top - {definition})
        if reads_all:
            whole.add(definition)
    import_read, import_all = _references([n for n in on_import if n not in alias_statements], aliases, bindings)
    return HelperModule(
        name,
        path,
        digest,
        import_digest=digest_of(import_text),
        import_names=frozenset(import_read & top),
        definitions={k: digest_of(v) for k, v in segments.items()},
        references=references,
        whole_definitions=frozenset(whole),
        dynamic=import_all,
        imports=frozenset(imported_modules(tree, package)),
    )
