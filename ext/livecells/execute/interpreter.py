"""Kernel side: what a Python interpreter has installed, as the environment fingerprint needs it.

:mod:`livecells.execute.environment` calls :func:`details` in-process for the kernels that run
the build's own Python, and runs this file with any other kernelspec's Python (``python -c BOOT
interpreter.py MODULES_JSON``, see :data:`livecells.execute.template.BOOT`), which need not have
livecells installed: standard library only. It prints one line of JSON.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import platform
import sys
from importlib import metadata
from typing import Any, Callable, Mapping


def version(
    module: str, providers: Callable[[], Mapping[str, list[str]]] = metadata.packages_distributions
) -> str:
    """The version of the distribution that provides ``module``; for the standard library,
    Python's; ``"unversioned"`` for a module importable without metadata; "" if not found.

    ``providers``: which distributions provide each top-level module (reading it opens every
    installed distribution's file list, ~0.6 s with torch and mxnet installed).
    """
    try:
        return metadata.version(module)
    except Exception:
        pass
    try:
        dists = providers().get(module, [])
        if dists:
            return metadata.version(dists[0])
    except Exception:
        pass
    if module in getattr(sys, "stdlib_module_names", ()) or module in sys.builtin_module_names:
        return f"stdlib {platform.python_version()}"
    try:  # importable without distribution metadata (a module on PYTHONPATH)
        return "unversioned" if importlib.util.find_spec(module) is not None else ""
    except Exception:
        return ""


def details(modules: list[str]) -> dict[str, Any]:
    """This interpreter's version and path, ``modules``' versions, its site-packages folders."""
    providers = functools.lru_cache(maxsize=None)(metadata.packages_distributions)  # once, if at all
    return {
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": {m: version(m, providers) for m in modules},
        "site_dirs": [d for d in sys.path if d.endswith("-packages")],
    }


if __name__ == "__main__":
    print(json.dumps(details(json.loads(sys.argv[2]))))
