"""Values in prose: what a cell names, how prose names it, and how it is written as text.

A cell names a value in one of two ways, neither of which needs livecells in the kernel:

- ``:value: NAME`` on the ``live-cell``: the cell's result (its last expression's output) is
  the value ``NAME``; it is shown at the cell as usual.
- a display whose metadata says so, ``IPython.display.display(v, metadata={"livecells":
  {"name": "NAME"}})``: a value that is not shown at the cell. MyST-NB's and scrapbook's
  ``glue`` outputs (metadata ``scrapbook``) are read the same way.

Prose quotes ``[framework/]name[:format-spec]`` (:func:`parse_reference`). This module is pure
(no Sphinx): the page's table of values is built from its results (:func:`page_values`), and the
text of a value, a time or a ratio is made here (:func:`format_plain`, :func:`cell_seconds`).
"""

from __future__ import annotations

import ast
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from livecells.model.records import CellRecord, SessionRecord
from livecells.model.vocabulary import CellStatus

#: The output metadata key that names a value: ``{"livecells": {"name": "x"}}``.
METADATA_KEY = "livecells"
#: MyST-NB's and scrapbook's key (``{"scrapbook": {"name": "x", "mime_prefix": "..."}}``).
SCRAPBOOK_KEY = "scrapbook"

#: A number as a framework's or NumPy's text shows it: ``tensor(0.25)``, ``np.float64(0.25)``,
#: ``array(3)``, ``tensor(0.25, device='cuda:0')``; only a wrapper around one number.
_WRAPPED_NUMBER = re.compile(
    r"[A-Za-z_][\w.]*\(\s*([-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|\.\d+(?:[eE][-+]?\d+)?|nan|inf))"
    r"\s*(?:,[^()]*)?\)"
)
_INT_TYPES = frozenset("bcdoxX")
_FLOAT_TYPES = frozenset("eEfFgGn%")


def value_name(output: Any) -> str | None:
    """The name an output's metadata gives it as a value (a display of a named value), if any."""
    if not isinstance(output, Mapping) or output.get("output_type") not in {"display_data", "execute_result"}:
        return None
    metadata = output.get("metadata")
    if not isinstance(metadata, Mapping):
        return None
    for key in (METADATA_KEY, SCRAPBOOK_KEY):
        entry = metadata.get(key)
        if isinstance(entry, Mapping) and isinstance(entry.get("name"), str) and entry["name"]:
            return str(entry["name"])
    return None


def hidden(output: Any) -> bool:
    """Whether an output is a named value that the cell does not show: livecells' own always,
    MyST-NB's when it was glued with ``display=False`` (its data under a mime prefix)."""
    if value_name(output) is None:
        return False
    metadata = output.get("metadata") or {}
    if isinstance(metadata.get(METADATA_KEY), Mapping):
        return True
    return bool((metadata.get(SCRAPBOOK_KEY) or {}).get("mime_prefix"))


def value_data(output: Mapping[str, Any]) -> dict[str, Any]:
    """A named output's mime bundle, a MyST-NB prefix taken off its types."""
    data = output.get("data")
    if not isinstance(data, Mapping):
        return {}
    scrapbook = (output.get("metadata") or {}).get(SCRAPBOOK_KEY)
    prefix = scrapbook.get("mime_prefix") if isinstance(scrapbook, Mapping) else None
    if isinstance(prefix, str) and prefix:
        return {k[len(prefix):] if k.startswith(prefix) else k: v for k, v in data.items()}
    return dict(data)


@dataclass(frozen=True)
class Reference:
    """What prose names: ``[framework/]name[:spec]`` (``framework`` None: the page decides)."""

    name: str
    framework: str | None = None
    spec: str = ""


def split_framework(text: str, frameworks: Iterable[str]) -> tuple[str | None, str]:
    """``pytorch/x`` -> ``("pytorch", "x")`` when ``pytorch`` is one of ``frameworks``; else the
    whole text is the name (a name may hold a slash)."""
    head, sep, rest = text.partition("/")
    if sep and head.strip() in set(frameworks) and rest.strip():
        return head.strip(), rest.strip()
    return None, text.strip()


def parse_reference(text: str, frameworks: Iterable[str]) -> Reference:
    """``[framework/]name[:spec]`` of a ``live-value`` role (a name holds no colon)."""
    target, _, spec = text.strip().partition(":")
    framework, name = split_framework(target, frameworks)
    return Reference(name=name, framework=framework, spec=spec.strip())


def plain_text(data: Mapping[str, Any]) -> str | None:
    """A bundle's ``text/plain`` as one string (nbformat may keep it as a list of lines)."""
    value = data.get("text/plain")
    if isinstance(value, list):
        value = "".join(str(v) for v in value)
    return value if isinstance(value, str) else None


def _literal(text: str) -> Any:
    """The Python value a ``text/plain`` shows, when it is a literal; else the text."""
    try:
        return ast.literal_eval(text.strip())
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return text


def _number(value: Any, text: str) -> float:
    """A number for a numeric format: the literal's, or the one a wrapper holds."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    # Short texts only: a wrapper around one number is short, and the pattern backtracks on
    # long runs of digits.
    match = _WRAPPED_NUMBER.fullmatch(text.strip()) if len(text) <= 200 else None
    if match:
        return float(match.group(1))
    return float(value)  # a string such as "1e3"; ValueError when it is none


def format_plain(text: str, spec: str) -> str:
    """A value's ``text/plain`` formatted by a format spec (Python's mini-language): the text read
    as a literal (quotes taken off a string), converted as the spec's type asks (for a number,
    ``tensor(0.25)`` and ``np.float64(0.25)`` are read as 0.25). ValueError when it cannot be."""
    value = _literal(text)
    if not spec:
        return str(value)
    kind = spec[-1]
    try:
        if kind in _INT_TYPES:
            number = _number(value, text)
            if not number.is_integer():
                raise ValueError(f"{text.strip()[:60]!r} is not an integer")
            value = int(number)
        elif kind in _FLOAT_TYPES:
            value = _number(value, text)
        elif kind == "s":
            value = str(value)
        return format(value, spec)
    except (TypeError, ValueError, OverflowError) as err:
        raise ValueError(f"cannot format {text.strip()[:60]!r} with {spec!r}: {err}") from None


def cell_seconds(result: CellRecord) -> float | None:
    """The run time that prose quotes for a cell: the one place it is read from a result (a
    repeated cell's is the median of its timed runs)."""
    return result.time


def format_ratio(ratio: float) -> str:
    """A ratio of two run times, with as many digits as it is worth: ``464``, ``46.4``, ``2.51``."""
    if not math.isfinite(ratio):
        return str(ratio)
    if ratio >= 100:
        return f"{ratio:.0f}"
    if ratio >= 10:
        return f"{ratio:.1f}"
    if ratio >= 1:
        return f"{ratio:.2f}"
    return f"{ratio:.3g}"


@dataclass
class Value:
    """A named value of a page: its bundle, the cell that made it and its session's record."""

    name: str
    framework: str
    data: dict[str, Any]
    index: int  # the cell's position among the page's cells
    #: The session's record; None: the cell's recorded output, from the page's source.
    session: SessionRecord | None


@dataclass
class PageValues:
    """A page's values by (framework, name), and what was wrong in naming them."""

    values: dict[tuple[str, str], Value] = field(default_factory=dict)
    #: (cell index, framework, message): a name given twice, a ``:value:`` cell without a result.
    problems: list[tuple[int, str, str]] = field(default_factory=list)

    def frameworks_of(self, name: str) -> list[str]:
        return [fw for (fw, n) in self.values if n == name]


def page_values(
    results: Sequence[tuple[int, str, CellRecord, SessionRecord]], named_cells: Mapping[int, str]
) -> PageValues:
    """The values of a page's shown results (``(cell index, framework, result, session)`` in each
    session's order); ``named_cells``: the ``:value:`` name of each cell that has one. A name
    given again in the same framework is a problem, and the later value stands (as in Python)."""
    page = PageValues()
    made: dict[tuple[str, str], int] = {}

    def add(name: str, framework: str, data: dict[str, Any], index: int, session: SessionRecord) -> None:
        earlier = made.get((framework, name))
        if earlier is not None and earlier != index:
            page.problems.append(
                (index, framework, f"the value {name!r} was named before, by cell {earlier + 1}: this one is quoted")
            )
        made[(framework, name)] = index
        page.values[(framework, name)] = Value(name, framework, data, index, session)

    for index, framework, result, session in results:
        for output in result.outputs:
            name = value_name(output)
            if name is not None:
                add(name, framework, value_data(output), index, session)
        option = named_cells.get(index)
        if option:
            shown = [
                o for o in result.outputs
                if isinstance(o, Mapping) and o.get("output_type") == "execute_result" and not hidden(o)
            ]
            data = shown[-1].get("data") if shown else None
            if isinstance(data, Mapping):
                add(option, framework, dict(data), index, session)
            elif result.status == CellStatus.OK:
                page.problems.append(
                    (index, framework, f":value: {option} names the cell's result, but the cell has none "
                     "(its last line is no expression, or its value is None)")
                )
    return page
