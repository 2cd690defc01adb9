"""Lookups by name: code whose reach static reading cannot follow (``getattr(sys.modules[__name__],
name)``, ``globals()[name]``, ``importlib.import_module(name)``, ``Base.__subclasses__()``).

A helper definition or a cell that does one may reach any definition of any helper module, so
the session depends on all of them whole (:mod:`livecells.plan.helpers`). Nothing here knows
Sphinx.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

#: Names that read a namespace, or run or import code, by name.
DYNAMIC_NAMES = frozenset({"globals", "eval", "exec", "__import__", "__builtins__", "breakpoint"})
#: Names that read the namespace they run in when called without arguments (or passed on).
NAMESPACE_CALLS = frozenset({"vars", "locals", "dir"})
#: Attributes that open a namespace, or the classes made from one.
DYNAMIC_ATTRIBUTES = frozenset({
    "__dict__", "__globals__", "__subclasses__", "__builtins__", "__loader__", "__spec__",
    "f_globals", "f_locals", "f_builtins", "user_ns", "user_global_ns",
})  # fmt: skip
#: Modules, and names of modules, that find modules or objects by name: any use of them.
DYNAMIC_MODULES = frozenset({
    "importlib", "imp", "builtins", "gc", "runpy", "pkgutil", "zipimport",
    "sys.modules", "inspect.getmodule", "inspect.getmembers",
})  # fmt: skip
#: Modules that hold one of those: their name passed on (``getattr(sys, name)``), or ``import *``.
HOLDERS = frozenset({"sys", "inspect"}) | {m for m in DYNAMIC_MODULES if "." not in m}
#: IPython magics that run or load code from elsewhere (``%run script.py``).
MAGICS = frozenset({"run", "load", "loadpy", "rerun", "recall", "macro", "autoreload", "aimport", "store"})


def from_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` names, a relative one resolved against
    ``package`` (the importing module's own); "" if it reaches above the top."""
    base = node.module or ""
    if node.level:
        parts = package.split(".") if package else []
        above = parts[: len(parts) - (node.level - 1)] if node.level - 1 <= len(parts) else []
        base = ".".join(p for p in (*above, base) if p)
    return base


def import_bindings(tree: ast.AST, package: str = "") -> dict[str, str]:
    """The names import statements anywhere in ``tree`` bind, each to what it names
    (``import sys as s`` -> ``s: sys``, ``from sys import modules`` -> ``modules: sys.modules``);
    a star import of one of :data:`HOLDERS` binds ``*``. Relative imports are resolved against
    ``package``."""
    found: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    found[alias.asname] = alias.name
                else:
                    top = alias.name.split(".")[0]
                    found[top] = top
        elif isinstance(node, ast.ImportFrom):
            base = from_base(node, package)
            for alias in node.names:
                if alias.name == "*":
                    if base.split(".")[0] in HOLDERS:
                        found["*"] = base
                else:
                    found[alias.asname or alias.name] = f"{base}.{alias.name}" if base else alias.name
    return found


def _qualified(node: ast.expr, bindings: dict[str, str]) -> str | None:
    """``s.modules`` -> ``sys.modules`` where ``s`` is bound to ``sys``; None if not an import's."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bindings:
        return None
    return ".".join([bindings[node.id], *reversed(parts)])


def _dynamic_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in DYNAMIC_MODULES)


def dynamic_lookup(nodes: Iterable[ast.AST], bindings: dict[str, str]) -> str | None:
    """The first lookup by name in ``nodes`` (its source text), or None. ``bindings``: what the
    code's imports bind (:func:`import_bindings`)."""
    if "*" in bindings:
        return f"from {bindings['*']} import *"
    for root in nodes:
        held: set[int] = set()  # names read as `name.attribute`, not passed on
        for node in ast.walk(root):
            if isinstance(node, ast.Attribute):
                held.add(id(node.value))
                qualified = _qualified(node, bindings)
                if node.attr in DYNAMIC_ATTRIBUTES and not (
                    node.attr == "__dict__" and isinstance(node.value, ast.Name) and node.value.id in {"self", "cls"}
                ):
                    return ast.unparse(node)
                if qualified is not None and _dynamic_module(qualified):
                    return ast.unparse(node)
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in NAMESPACE_CALLS:
                    held.add(id(func))
                    if not (node.args or node.keywords):
                        return ast.unparse(node)
                elif isinstance(func, ast.Attribute) and func.attr in {"run_line_magic", "run_cell_magic", "magic"}:
                    first = node.args[0] if node.args else None
                    if isinstance(first, ast.Constant) and str(first.value).split(" ")[0].lstrip("%") in MAGICS:
                        return ast.unparse(node)
            elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
                if node.id in DYNAMIC_NAMES:
                    return node.id
                if node.id in NAMESPACE_CALLS and id(node) not in held:
                    return node.id  # `f = vars`: passed on, then called as the caller likes
                qualified = bindings.get(node.id)
                if qualified is not None and (
                    _dynamic_module(qualified) or (qualified in HOLDERS and id(node) not in held)
                ):
                    return node.id
    return None
