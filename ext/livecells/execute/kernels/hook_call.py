"""The build's half of the hook: the request that installs it in a kernel, and what is asked back.

:func:`hook_request` is the expression sent with every kernel's launch: the kernel-side files
:mod:`livecells.kernel_side.hook` and :mod:`livecells.kernel_side.budget` loaded by their paths,
each a module of its own (never in ``sys.modules``), as every kernel-side program is loaded; then
:func:`livecells.kernel_side.bytecode.install` (a book's stale bytecode never imported) and
``hook.install`` called with the framework's settings. Loaded by path, not imported by name: the
kernel's Python need not have livecells installed. After each cell :data:`TIME_EXPRESSION` (and
after the last, :data:`PROBE_EXPRESSION`) reads back what the hook kept; :func:`measured` and
:func:`probe_value` read the answers as literals, never evaluating them.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from typing import Any

from livecells.kernel_side import budget, bytecode, hook, sharing
from livecells.model.frameworks import FrameworkSpec
from livecells.model.records import Probe

TIME_EXPRESSION = f"__import__('sys').modules[{hook.STATE!r}].last"
PROBE_EXPRESSION = f"__import__('json').dumps(__import__('sys').modules[{hook.STATE!r}].probe())"

#: Run in the kernel first: ``_load(name, path)``, a kernel-side file as a module of its own, by
#: its path (as the fork-server template loads the files beside it).
LOADER = """\
def _load(name, path):
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
"""
#: The names the hook and the budget are loaded under in the kernel: the hook's functions (the
#: callbacks it registers) belong to the state module's name, ``_livecells_kernel``.
HOOK_MODULE = hook.STATE
BUDGET_MODULE = "_livecells_budget"
BYTECODE_MODULE = "_livecells_bytecode"
SHARING_MODULE = "_livecells_sharing"


def hook_request(framework: FrameworkSpec, output_limit: int = 100_000) -> str:
    """The expression sent with the launch (a user expression of an empty silent cell): run in a
    namespace of its own (never the user's), it loads the hook and the budget by their paths,
    installs :mod:`~livecells.kernel_side.bytecode`'s path hook (before the preload is imported)
    and calls :func:`~livecells.kernel_side.hook.install` with ``framework``'s settings and the
    budget's ``bound_output``."""
    fresh = (  # a forked kernel has it from its template: the installed folders are not looked up
        f"_fresh = _load({BYTECODE_MODULE!r}, {bytecode.__file__!r})\n"
        f"if not _fresh.installed():\n"
        f"    _fresh.install(_load({SHARING_MODULE!r}, {sharing.__file__!r}).installed_folders())"
    )
    bounds = f"_load({BUDGET_MODULE!r}, {budget.__file__!r}).bound_output"
    call = (
        f"_load({HOOK_MODULE!r}, {hook.__file__!r}).install(get_ipython(), sync={framework.sync!r}, "
        f"gpu_used={framework.gpu_used!r}, preload={list(framework.preload)!r}, "
        f"version_module={framework.version_module!r}, output_limit={int(output_limit)!r}, "
        f"bound_output={bounds})"
    )
    return f"exec({LOADER + fresh + chr(10) + call + chr(10)!r}, {{'get_ipython': get_ipython}})"


def probe_value(result: Mapping[str, Any]) -> Probe:
    """The probe's user expression as a :class:`Probe` (an empty one if it failed)."""
    if result.get("status") != "ok":
        return Probe()
    try:  # text/plain is the repr of a JSON string: read it as a literal, never evaluate it.
        value = json.loads(ast.literal_eval(result["data"]["text/plain"]))
    except (KeyError, TypeError, ValueError, SyntaxError):
        return Probe()
    return Probe.from_json(value)


def measured(result: Mapping[str, Any], count: Any) -> float | None:
    """The time the hook measured for the cell of execution count ``count``, or None: a time
    measured for another cell (the cell unregistered the hook's events) is never its own."""
    if result.get("status") != "ok":
        return None
    try:  # the repr of [count, seconds]: read as a literal, never evaluated
        measured_count, seconds = ast.literal_eval(result["data"]["text/plain"])
    except (KeyError, TypeError, ValueError, SyntaxError):
        return None
    if measured_count != count or count is None or not isinstance(seconds, (int, float)):
        return None
    return float(seconds)
