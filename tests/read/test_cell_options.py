"""The table of ``live-cell`` options (read/cell_options.py): the directive, the plan and the
session key all follow it, checked on cells read by Sphinx from a real page."""

from __future__ import annotations

import pytest
from docutils.parsers.rst import directives

from livecells.model.plans import CellPlan, PageSettings, SessionPlan
from livecells.plan.keys import session_key
from livecells.read import cell_options
from livecells.read.cell_options import CELL_OPTIONS, CellOption, plan_options
from livecells.read.collect import plans
from livecells.read.directives import LiveCellDirective

from helpers import build_site, one_page_book

CONF = 'extensions = ["livecells"]\nlivecells_frameworks = {"python": {"kernel": "python3"}}\nlivecells_execute = "off"\n'
#: A value for every option of the table, as an author writes it: a row with none here fails
#: the test, so a new option says which it is. ``warmup`` counts only for a repeated cell.
WRITTEN = {
    "timeout": ["5"], "raises": ["ValueError"], "repeat": ["3"], "warmup": ["2"], "stderr": ["remove"],
    "hide-code": [""], "hide-output": [""], "no-timing": [""], "timings": ["all-devices"],
    "class": ["wide"], "value": ["answer"], "name": ["the-cell"], "linenos": [""], "lineno-start": ["3"],
    "emphasize-lines": ["1"], "code-below": [""], "collapse-code": [""], "collapse-output": [""],
    "image-width": ["10px"], "image-height": ["10px"], "image-alt": ["a plot"], "image-class": ["x"],
    "figure-caption": ["A plot."], "figure-name": ["fig-plot"],
}
BASE = {"warmup": {"repeat": "3"}}  # what the variant is compared with, besides the option


def _cell(options: dict[str, str]) -> str:
    lines = [".. live-cell:: python"] + [f"   :{name}: {value}".rstrip() for name, value in options.items()]
    return "\n".join(lines) + "\n\n   x = 1\n   print(x)\n"


def test_every_option_of_the_directive_is_a_row_of_the_table():
    assert LiveCellDirective.option_spec == {o.name: o.parse for o in CELL_OPTIONS}
    assert len({o.name for o in CELL_OPTIONS}) == len(CELL_OPTIONS)
    assert sorted(WRITTEN) == sorted(o.name for o in CELL_OPTIONS)


def test_an_option_is_in_the_session_key_exactly_when_its_row_says_so(tmp_path):
    """Pairs of cells read from one real page, alike but for one option: their one-cell sessions
    have different keys for a keyed option and the same key for any other."""
    pairs = [(o, BASE.get(o.name, {}), {**BASE.get(o.name, {}), o.name: WRITTEN[o.name][0]}) for o in CELL_OPTIONS]
    page = "Options\n=======\n\n" + "\n".join(_cell(before) + "\n" + _cell(after) for _, before, after in pairs)
    app, warnings = build_site(one_page_book(tmp_path, CONF, page), "html")
    assert "WARNING" not in warnings, warnings
    cells = plans(app.env)["index"].cells
    assert len(cells) == 2 * len(pairs)

    def key(cell: CellPlan) -> str:
        return session_key(SessionPlan("index", "python", "index.rst", (cell,), PageSettings()), "")

    keyed = {o.name for number, (o, *_) in enumerate(pairs) if key(cells[2 * number]) != key(cells[2 * number + 1])}
    assert keyed == {o.name for o in CELL_OPTIONS if o.keyed}
    assert [c.timeout for c in cells[:2]] == [None, 5.0]  # the values themselves reached the plan


def test_a_keyed_option_without_a_field_of_its_own_reaches_the_plan_and_the_key(monkeypatch):
    """What a new keyed option gets from its row alone: its value in ``CellPlan.options`` (and
    so on the kernel side as ``cell.option(name)``) and in the session key."""
    seed = CellOption("seed", directives.nonnegative_int, "seed", keyed=True)
    monkeypatch.setattr(cell_options, "EXTRA_KEYED", (*cell_options.EXTRA_KEYED, seed))
    assert cell_options.EXTRA_KEYED == (seed,)  # today's keyed options all have fields
    found = plan_options({"seed": 7, "timeout": 5.0})
    assert found == (("seed", 7),) and plan_options({}) == ()
    plain = CellPlan(0, ("python",), "x = 1", 1, 1)
    seeded = CellPlan(0, ("python",), "x = 1", 1, 1, options=found)
    assert seeded.option("seed") == 7 and plain.option("seed", 0) == 0

    def key(cell: CellPlan) -> str:
        return session_key(SessionPlan("index", "python", "index.rst", (cell,), PageSettings()), "")

    assert key(plain) != key(seeded)
    assert key(seeded) == key(CellPlan(0, ("python",), "x = 1", 1, 1, options=(("seed", 7),)))
    assert key(seeded) != key(CellPlan(0, ("python",), "x = 1", 1, 1, options=(("seed", 8),)))


@pytest.mark.parametrize("option", [o for o in CELL_OPTIONS if o.default])
def test_a_cell_without_the_option_takes_the_book_wide_setting(option):
    class Config:
        pass

    config = Config()
    setattr(config, option.default, "BOOK")
    assert option.value({}, config) == "BOOK"
    assert option.value({option.name: "CELL"}, config) == "CELL"
