"""The build's half of the hook: the request that installs it in a kernel, and what is asked back.

:func:`hook_request` is the expression sent with every kernel's launch: the text of the
kernel-side files :mod:`livecells.execute.hook` and :mod:`livecells.execute.budget`, run in the
kernel in namespaces of their own, then ``hook.install`` called with the framework's settings.
Sent as text, not imported: the kernel's Python need not have livecells installed. After each cell
:data:`TIME_EXPRESSION` (and after the last, :data:`PROBE_EXPRESSION`) reads back what the hook
kept; :func:`measured` and :func:`probe_value` read the answers as literals, never evaluating them.
"""

from __future__ import annotations

import ast
import functools
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from livecells.execute import budget, hook
from livecells.model.frameworks import FrameworkSpec
from livecells.model.records import Probe

TIME_EXPRESSION = f"__import__('sys').modules[{hook.STATE!r}].last"
PROBE_EXPRESSION = f"__import__('json').dumps(__import__('sys').modules[{hook.STATE!r}].probe())"


@functools.cache
def hook_source() -> str:
    """The text of :mod:`livecells.execute.hook`, read once per process (the kernel runs it)."""
    return Path(hook.__file__).read_text(encoding="utf-8")


@functools.cache
def budget_source() -> str:
    """The text of :mod:`livecells.execute.budget`, read once per process (the kernel runs it)."""
    return Path(budget.__file__).read_text(encoding="utf-8")


def hook_request(framework: FrameworkSpec, output_limit: int = 100_000) -> str:
    """The expression sent with the launch (a user expression of an empty silent cell): the
    hook's file run in a namespace of its own (never the user's), the budget's made a module of
    its own (``hook.load``), then :func:`~livecells.execute.hook.install` called with
    ``framework``'s settings and the budget's ``bound_output``.
    """
    bounds = f"load('_livecells_budget', {budget_source()!r}, {budget.__file__!r}).bound_output"
    call = (
        f"install(get_ipython(), sync={framework.sync!r}, gpu_used={framework.gpu_used!r}, "
        f"preload={list(framework.preload)!r}, version_module={framework.version_module!r}, "
        f"output_limit={int(output_limit)!r}, bound_output={bounds})"
    )
    program = f"{hook_source()}\n{call}\n"  # after the file's last line: its line numbers hold
    namespace = f"{{'get_ipython': get_ipython, '__name__': {hook.STATE!r}}}"
    return f"exec(compile({program!r}, {hook.__file__!r}, 'exec'), {namespace})"


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
