"""The import rules of ARCHITECTURE.md, read from the package's own source.

Each stage is a package; a stage may import only the stages it comes after (and the shared
``model``), never another stage's private names; render never imports execute, plan or the
orchestration (``pipeline``); model, plan, store, execute, convert and cli never import Sphinx or
docutils, not even through another livecells module, so a Dask worker or a kernel-side program
needs neither.
"""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

import pytest

from paths import PACKAGE

#: What each part of the package may import from livecells (besides itself).
ALLOWED = {
    "model": set(),
    "store": {"model"},
    "plan": {"model"},
    "kernel_side": set(),
    "execute": {"model", "kernel_side"},
    "sphinx_util": set(),
    "config_checks": {"model"},
    "config": {"model", "config_checks", "sphinx_util"},
    "read": {"model", "config", "config_checks", "sphinx_util"},
    "render": {"model", "config", "read", "store", "sphinx_util"},
    "library": {"model"},
    "pipeline": {"model", "config", "read", "plan", "store", "execute", "kernel_side", "library", "sphinx_util"},
    "convert": {"model"},
    "cli": {"model", "store", "convert", "library"},
    "__init__": {"config", "read", "render", "pipeline"},
    "__main__": {"cli"},
    "_version": set(),
    "errors": set(),
}
#: Leaves that every part may import: the version (a module of its own, so that what records it
#: need not import the package face; its leading underscore is the convention, not privacy).
LEAVES = {"_version", "errors"}
#: Parts that never import Sphinx or docutils, directly or through another livecells module.
SPHINX_FREE = {"model", "store", "plan", "execute", "kernel_side", "library", "convert", "cli"}
#: Modules of the Sphinx-side stages that are pure all the same, unit-tested without Sphinx.
PURE = {"livecells.render.timing"}
SPHINX = ("sphinx", "docutils")


@functools.cache
def tree_of(path: Path) -> ast.Module:
    """The file's syntax tree, parsed once for all the tests here (they only read it)."""
    return ast.parse(path.read_text(encoding="utf-8"), str(path))


def modules() -> dict[str, Path]:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def part_of(module: str) -> str:
    """``livecells.execute.kernels.session`` -> ``execute``; the package's own ``__init__`` -> ``__init__``."""
    pieces = module.split(".")
    return pieces[1] if len(pieces) > 1 else "__init__"


def _loaded_on_import(tree: ast.Module, as_main: bool = False) -> list[ast.stmt]:
    """The statements that run when the module is imported: not function bodies, not the
    ``if TYPE_CHECKING:`` blocks (``as_main``: run as a program, so not the ``else`` of an
    ``if __name__ == "__main__":``)."""
    found: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo.extend(node.orelse)
            continue
        if as_main and isinstance(node, ast.If) and ast.unparse(node.test).startswith("__name__ == '__main__'"):
            todo.extend(node.body)
            continue
        found.append(node)
        for field in ("body", "orelse", "finalbody", "handlers"):
            todo.extend(getattr(node, field, []) or [])
    return found


def imports(
    path: Path, module: str, on_import: bool = False, as_main: bool = False
) -> list[tuple[int, str, list[str]]]:
    """Every import in the file (``on_import``: only those that run when it is imported):
    (line, the module imported, the names taken from it)."""
    tree = tree_of(path)
    is_package = path.name == "__init__.py"
    found = []
    nodes = _loaded_on_import(tree, as_main) if on_import else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name, []) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = node.module or ""
            if node.level:
                base = module.split(".")
                base = base if is_package else base[:-1]
                base = base[: len(base) - node.level + 1]
                target = ".".join([*base, target] if target else base)
            found.append((node.lineno, target, [alias.name for alias in node.names]))
    return found


def _internal_imports(on_import: bool = False) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in modules().items():
        found = imports(path, module, on_import)
        graph[module] = {target for _, target, _ in found if target.split(".")[0] == "livecells"}
        # ``from livecells.x import y`` may import the module livecells.x.y.
        graph[module] |= {f"{target}.{name}" for _, target, names in found for name in names if target.split(".")[0] == "livecells"}
    return graph


def test_the_package_has_the_stages_of_the_pipeline():
    parts = {part_of(m) for m in modules()}
    assert {"model", "read", "plan", "execute", "store", "render", "pipeline", "convert", "cli"} <= parts
    assert parts <= set(ALLOWED), f"a part the rules do not know: {parts - set(ALLOWED)}"


@pytest.mark.slow
def test_each_stage_imports_only_the_stages_before_it():
    wrong = []
    for module, path in modules().items():
        mine = part_of(module)
        for line, target, _ in imports(path, module):
            if target.split(".")[0] != "livecells" or target == "livecells":
                continue
            theirs = part_of(target)
            if theirs != mine and theirs not in ALLOWED[mine] | LEAVES:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line}: {mine} imports {target}")
    assert not wrong, "\n".join(wrong)


def test_no_stage_imports_another_stages_private_names():
    wrong = []
    for module, path in modules().items():
        for line, target, names in imports(path, module):
            if target.split(".")[0] != "livecells" or part_of(target) in {part_of(module), *LEAVES}:
                continue
            private = [n for n in names if n.startswith("_") and not n.startswith("__")] + [
                p for p in target.split(".") if p.startswith("_") and p != "__init__"
            ]
            if private:
                wrong.append(f"{path.relative_to(PACKAGE)}:{line}: {target} {private}")
    assert not wrong, "\n".join(wrong)


def test_render_never_reaches_back_into_execution_or_the_orchestration():
    graph = _internal_imports()
    for module, targets in graph.items():
        if part_of(module) == "render":
            assert not {part_of(t) for t in targets} & {"execute", "pipeline", "plan"}, module


def test_the_sphinx_free_stages_and_pure_modules_never_import_sphinx_even_indirectly():
    graph = _internal_imports(on_import=True)
    direct = {
        module: [t for _, t, _ in imports(path, module, on_import=True) if t.split(".")[0] in SPHINX]
        for module, path in modules().items()
    }
    wrong = []
    for module in graph:
        if part_of(module) not in SPHINX_FREE and module not in PURE:
            continue
        seen, todo = set(), [module]
        while todo:
            current = todo.pop()
            if current in seen or current not in graph:
                continue
            seen.add(current)
            if direct.get(current):
                wrong.append(f"{module} -> {current} imports {direct[current]}")
            todo.extend(graph[current])
            # Importing livecells.x.y runs livecells/__init__ and livecells/x/__init__ first.
            pieces = current.split(".")
            todo.extend(".".join(pieces[:n]) for n in range(1, len(pieces)))
    assert not wrong, "\n".join(wrong)


@pytest.mark.slow
@pytest.mark.parametrize(
    "names",
    [
        ["livecells.execute.scheduler", "livecells.execute.executors", "livecells.execute.dask.scheduler", "livecells.model.records"],
        ["livecells.store", "livecells.plan.decide", "livecells.plan.keys"],
        ["livecells.cli.main", "livecells.convert.tree", "livecells.execute.dask.worker"],
    ],
)
def test_what_a_dask_worker_loads_does_not_load_sphinx(names):
    """The same rule, in a real interpreter: what a worker unpickles and runs leaves Sphinx out."""
    code = (
        "import sys\n"
        + "".join(f"import {name}\n" for name in names)
        + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('sphinx', 'docutils'))\n"
        + "print(bad)\nsys.exit(1 if bad else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env={"PYTHONPATH": str(PACKAGE.parent)}
    )
    assert result.returncode == 0, result.stdout + result.stderr


#: Programs that run in a kernel's (or the guard's) own interpreter, as files: that interpreter
#: may be another Python, without livecells, Sphinx or any site-packages. Every module of
#: ``kernel_side/`` is one.
KERNEL_SIDE = tuple(
    str(p.relative_to(PACKAGE)) for p in sorted((PACKAGE / "kernel_side").glob("*.py")) if p.name != "__init__.py"
)


def test_the_kernel_side_programs_are_the_kernel_side_package():
    assert len(KERNEL_SIDE) == 8, KERNEL_SIDE
    others = [m for m in modules() if m.startswith("livecells.execute.")]
    assert not [m for m in others if m.rsplit(".", 1)[-1] in {Path(k).stem for k in KERNEL_SIDE}]


@pytest.mark.parametrize("relative", KERNEL_SIDE)
def test_kernel_side_programs_import_only_the_standard_library(relative):
    path = PACKAGE / relative
    module = "livecells." + relative[:-3].replace("/", ".")
    loaded = {target.split(".")[0] for _, target, _ in imports(path, module, on_import=True, as_main=True)}
    assert loaded <= set(sys.stdlib_module_names) | {"__future__"}, loaded - set(sys.stdlib_module_names)


#: The executors' implementations: packages under ``execute/`` that the registry names by string.
EXECUTOR_PACKAGES = ("livecells.execute.dask",)


def test_only_an_executor_knows_its_own_implementation():
    """The build and the config ask the executor (``execute/executors.py``) what to do; none of
    their modules imports an executor's package or compares ``livecells_executor`` with a name."""
    wrong = []
    for module, path in modules().items():
        if module.startswith(EXECUTOR_PACKAGES):
            continue
        for line, target, names in imports(path, module):
            named = [target] + [f"{target}.{name}" for name in names]
            if any(n == p or n.startswith(p + ".") for n in named for p in EXECUTOR_PACKAGES):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line}: imports {target}")
        if part_of(module) in {"pipeline", "config"}:
            for node in ast.walk(tree_of(path)):
                if isinstance(node, ast.Compare) and any(
                    isinstance(c, ast.Constant) and c.value == "local" for c in [node.left, *node.comparators]
                ):
                    wrong.append(f"{path.relative_to(PACKAGE)}:{node.lineno}: compares with 'local'")
    assert not wrong, "\n".join(wrong)


def test_no_module_imports_both_sphinx_and_jupyter_client():
    wrong = []
    for module, path in modules().items():
        roots = {target.split(".")[0] for _, target, _ in imports(path, module)}
        if roots & set(SPHINX) and "jupyter_client" in roots:
            wrong.append(str(path.relative_to(PACKAGE)))
    assert not wrong, wrong


def test_the_extension_and_the_executor_registry_load_no_jupyter_client():
    """Builds that run no cell never import jupyter_client (the registry names executors by
    string) nor asyncio (a no-op rebuild's few milliseconds)."""
    code = (
        "import sys, livecells, livecells.pipeline.events, livecells.execute.executors\n"
        "sys.exit('jupyter_client' in sys.modules or 'asyncio' in sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], env={"PYTHONPATH": str(PACKAGE.parent)})
    assert result.returncode == 0


def test_every_exception_of_livecells_is_in_errors_under_one_base():
    """nbclient's habit: one module of exceptions, one base; each keeps its builtin base."""
    import livecells.errors as errors

    found = []
    for module, path in modules().items():
        for node in ast.walk(tree_of(path)):
            if isinstance(node, ast.ClassDef) and any(
                isinstance(b, ast.Name) and (b.id.endswith(("Error", "Exception")) or b.id in {"Exception", "BaseException"})
                for b in node.bases
            ):
                found.append(f"{module}.{node.name}")
    assert {f for f in found if not f.startswith("livecells.errors.")} == set(), found
    own = [v for v in vars(errors).values() if isinstance(v, type) and v.__module__ == errors.__name__]
    assert len(own) >= 11 and all(issubclass(c, errors.LivecellsError) for c in own)
    assert all(c.__name__.endswith("Error") for c in own)
