"""Kernel side: what a Python interpreter has installed, as the environment fingerprint needs it.

:mod:`livecells.execute.environment` calls :func:`details` in-process for the kernels that run
the build's own Python, and runs this file with any other kernelspec's Python (``python -c BOOT
interpreter.py MODULES_JSON``, see :data:`livecells.kernel_side.template.BOOT`), which need not have
livecells installed: standard library only. It prints one line of JSON.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import platform
import sys
from importlib import metadata
from importlib.machinery import ModuleSpec, PathFinder
from typing import Any, Callable, Mapping


def version(
    module: str, providers: Callable[[], Mapping[str, list[str]]] = metadata.packages_distributions
) -> str:
    """The version of the distribution that provides ``module`` (for ``a.b``, the one that
    provides ``a``); for the standard library, Python's; ``"unversioned"`` for a module found
    outside site-packages (on PYTHONPATH, say); "" if not found.

    Nothing is imported: for ``a.b`` the package ``a`` is looked into, not run (its
    ``__init__`` may be a book's own code, with side effects in the build's process).

    ``providers``: which distributions provide each top-level module (reading it opens every
    installed distribution's file list, slow where many are installed): asked only for a
    module in site-packages whose distribution has another name (``PIL``, of Pillow).
    """
    top = module.partition(".")[0]
    try:
        return metadata.version(top)
    except Exception:
        pass
    if top in getattr(sys, "stdlib_module_names", ()) or top in sys.builtin_module_names:
        return f"stdlib {platform.python_version()}"
    try:
        found = locate(module)  # a submodule lies in its package's folder: the same site dir
    except Exception:
        return ""
    if found is None:
        return ""
    if _in_site_packages(found):
        try:
            dists = providers().get(top, [])
            if dists:
                return metadata.version(dists[0])
        except Exception:
            pass
    return "unversioned"


def _in_site_packages(spec: ModuleSpec) -> bool:
    places = [spec.origin] if spec.origin else list(spec.submodule_search_locations or [])
    sites = [os.path.join(d, "") for d in site_dirs()]
    return any(str(place).startswith(tuple(sites)) for place in places if place)


def site_dirs() -> list[str]:
    return [d for d in sys.path if d.endswith("-packages")]


def locate(module: str) -> ModuleSpec | None:
    """The spec of ``module`` as a kernel's import would find it, found without running any
    code: a top-level name through ``sys.meta_path``, or in the folders of ``PYTHONPATH`` as it
    is now (what kernels inherit; asked in the build's process, it may have been set since
    this process started); a submodule in its package's folders."""
    first, *rest = module.split(".")
    spec = importlib.util.find_spec(first)  # a top-level name: its parent is not imported
    if spec is None:
        folders = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        spec = PathFinder.find_spec(first, folders) if folders else None
    for part in rest:
        if spec is None or spec.submodule_search_locations is None:
            return None
        spec = PathFinder.find_spec(part, list(spec.submodule_search_locations))
    return spec


def details(modules: list[str]) -> dict[str, Any]:
    """This interpreter's version and path, ``modules``' versions, its site-packages folders."""
    providers = functools.lru_cache(maxsize=None)(metadata.packages_distributions)  # once, if at all
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": {m: version(m, providers) for m in modules},
        "site_dirs": site_dirs(),
    }


if __name__ == "__main__":
    print(json.dumps(details(json.loads(sys.argv[2]))))
