"""Sphinx-side helpers for warnings about config values: where a value was set (its conf.py line,
or ``-D`` on the command line), what a ``-D`` string stands for, and the application behind an
environment."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx


def conf_location(confdir: str | Path | None, name: str) -> str | None:
    """``conf.py:LINE`` of the line that sets config value ``name``; None when no line does (a
    default, a ``-D`` override, a value set indirectly) or there is no conf.py. Never a bare path:
    Sphinx would take it for a document name (``conf.py.rst``, or a crash before the environment
    exists)."""
    if not confdir:
        return None
    path = Path(confdir) / "conf.py"
    setting = re.compile(rf"^\s*{re.escape(name)}\s*(=|\[|:|\+=|\.)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    found = [number for number, line in enumerate(lines, 1) if setting.match(line)]
    return f"{path}:{found[-1]}" if found else None  # the last assignment wins


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def from_command_line(raw: str, default: Any) -> Any:
    """The value ``-D name=RAW`` stands for, given the value's ``default``: words for booleans,
    numbers for numbers; anything else stays the string, for the validator to accept or refuse
    (Sphinx's own conversion raises on a bad boolean before any extension can catch it)."""
    if isinstance(default, bool):
        word = raw.strip().lower()
        return True if word in TRUE_WORDS else False if word in FALSE_WORDS else raw
    if isinstance(default, (int, float)):
        for number in (int, float):
            try:
                return number(raw)
            except ValueError:
                pass
    return raw


def origin(app: Sphinx, name: str) -> tuple[str | None, str]:
    """Where config value ``livecells_<name>`` was set, for a warning about it: its conf.py line
    as the location, or no location and " (given with -D)" to add to the message."""
    key = f"livecells_{name}"
    overrides = getattr(app.config, "overrides", {})
    if key in overrides or any(k.startswith(key + ".") for k in overrides):
        return None, " (given with -D)"
    return conf_location(app.confdir, key), ""


def app_of(env: Any) -> Sphinx:
    """The application behind a build environment (``env.app`` is deprecated in Sphinx 9)."""
    app = getattr(env, "_app", None)
    return app if app is not None else env.app


def node_location(docname: str, node: Any) -> tuple[str, int | None]:
    """A warning's location for ``node`` on page ``docname``, with its line. docutils 0.20 gives an
    image its source but no line (Sphinx then prints ``page.rst::``): the line is then the first
    one of the source that starts the node's own text (its directive), else its nearest ancestor's."""
    line = getattr(node, "line", None)
    if line is None:
        line = _line_of_text(node)
    while node is not None and line is None:
        node = getattr(node, "parent", None)
        line = getattr(node, "line", None)
    return docname, line


def _line_of_text(node: Any) -> int | None:
    """The line of ``node``'s source file that holds the first line of its raw text, or None."""
    raw = (getattr(node, "rawsource", "") or "").strip()
    source = next((n.source for n in _ancestors(node) if getattr(n, "source", None)), None)
    if not raw or not source:
        return None
    try:
        lines = Path(source).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    first = raw.splitlines()[0].strip()
    return next((number for number, text in enumerate(lines, 1) if text.strip() == first), None)


def _ancestors(node: Any):
    while node is not None:
        yield node
        node = getattr(node, "parent", None)
