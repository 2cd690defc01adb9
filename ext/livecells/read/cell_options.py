"""Every option of ``live-cell`` in one table (:data:`CELL_OPTIONS`).

A row says how the option is parsed, which ``live_cell`` attribute it becomes, which book-wide
setting a cell without it takes, and whether it enters the session key. The directive's
``option_spec``, the node's attributes, the cell's plan and its key all come from the table, so
an option that changes what runs is one row here plus the code that uses it (it reaches the
kernel side as ``CellPlan.option(name)``). Options that only shape how the cell is shown
(:data:`livecells.read.display.DISPLAY_OPTIONS`) are rows too, checked by read/display.py.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

from docutils.parsers.rst import directives

from livecells.config import STDERR_MODES
from livecells.model.plans import CellPlan
from livecells.model.vocabulary import StderrMode
from livecells.read.display import DISPLAY_OPTIONS
from livecells.read.values import value_option


def _raises(argument: str | None) -> list[str]:
    if not argument:
        return []
    return [part.strip() for part in argument.replace(" ", ",").split(",") if part.strip()]


def seconds(argument: str) -> float:
    """A positive, finite number of seconds (nan and inf would mean no time limit)."""
    value = float(directives.unchanged_required(argument))
    if not math.isfinite(value) or value <= 0:
        raise ValueError("must be a positive, finite number of seconds")
    return value


def _stderr(argument: str) -> StderrMode:
    return StderrMode(directives.choice(argument, STDERR_MODES))


def _count(least: int) -> Callable[[str], int]:
    def check(argument: str) -> int:
        value = int(directives.unchanged_required(argument))
        if value < least:
            raise ValueError(f"must be an integer of at least {least}")
        return value

    return check


@dataclass(frozen=True)
class CellOption:
    """One ``live-cell`` option."""

    #: As written in the page, ``:name:``.
    name: str
    #: docutils' option conversion: a ValueError is the directive's error at its line.
    parse: Callable[[str | None], Any]
    #: The ``live_cell`` attribute it becomes; None: read elsewhere (add_name, read/display.py).
    attribute: str | None = None
    #: The attribute is whether the option is given (a flag), not its value.
    given: bool = False
    #: The :class:`~livecells.config.LivecellsConfig` field a cell without the option takes.
    default: str | None = None
    #: What a cell without it (and with no ``default``) has.
    empty: Any = None
    #: Its value decides what runs: it is in the session key, so a stored result stands only
    #: for the value it ran with.
    keyed: bool = False

    def value(self, options: Mapping[str, Any], config: Any) -> Any:
        """The attribute's value for a cell with directive ``options`` in a book with ``config``."""
        if self.given:
            return self.name in options
        if self.name in options:
            return options[self.name]
        return getattr(config, self.default) if self.default else self.empty


CELL_OPTIONS: tuple[CellOption, ...] = (
    # What runs, and what its result means: in the session key.
    CellOption("timeout", seconds, "timeout", keyed=True),
    CellOption("raises", _raises, "raises", keyed=True),
    CellOption("repeat", _count(1), "repeat", default="repeat", keyed=True),
    CellOption("warmup", _count(0), "warmup", default="warmup", keyed=True),
    # What the page shows of the result: never in the key.
    CellOption("stderr", _stderr, "stderr", default="stderr"),
    CellOption("hide-code", directives.flag, "hide_code", given=True),
    CellOption("hide-output", directives.flag, "hide_output", given=True),
    CellOption("no-timing", directives.flag, "no_timing", given=True),
    CellOption("timings", lambda a: directives.choice(a, ("all-devices",)), "all_devices", given=True),
    CellOption("class", directives.class_option, "classes", empty=[]),
    CellOption("value", value_option, "value"),
    CellOption("name", directives.unchanged_required),  # the cell's label (add_name)
    *(CellOption(name, parse) for name, parse in DISPLAY_OPTIONS.items()),
)

#: The directive's ``option_spec``.
OPTION_SPEC: dict[str, Callable[[str | None], Any]] = {o.name: o.parse for o in CELL_OPTIONS}

_PLAN_FIELDS = frozenset(f.name for f in fields(CellPlan))
#: Keyed options with no field of their own in :class:`CellPlan`: they travel, and are keyed,
#: as its ``options``.
EXTRA_KEYED: tuple[CellOption, ...] = tuple(
    o for o in CELL_OPTIONS if o.keyed and o.attribute and o.attribute not in _PLAN_FIELDS
)


def node_attributes(options: Mapping[str, Any], config: Any) -> dict[str, Any]:
    """The ``live_cell`` attributes a cell's directive ``options`` give in a book with ``config``."""
    return {o.attribute: o.value(options, config) for o in CELL_OPTIONS if o.attribute}


def plan_options(cell: Mapping[str, Any] | Any) -> tuple[tuple[str, Any], ...]:
    """The :data:`EXTRA_KEYED` options a ``live_cell`` node gives (those it has a value for), as
    ``CellPlan.options``."""
    found = ((o.name, cell.get(o.attribute)) for o in EXTRA_KEYED)
    return tuple((name, value) for name, value in found if value is not None)
