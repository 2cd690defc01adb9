"""The configuration table of the docs is generated from the config's fields: every
``livecells_*`` value is in it, with its type, default and help."""

from __future__ import annotations

import shutil

import pytest

from livecells.config import CONFIG_FIELDS, LivecellsConfig

from helpers import build_site, soup
from paths import DOCS


def test_the_generated_table_lists_every_config_value(tmp_path, rootdir, monkeypatch):
    monkeypatch.syspath_prepend(str(DOCS / "_ext"))
    from livecells_config_table import default_shown

    src = tmp_path / "src"
    shutil.copytree(rootdir / "test-config-table", src)
    app, warnings = build_site(src)
    # Each name links to its confval section (which docs/configuration.rst has; this page does not).
    said = [line.partition(" WARNING: ")[2] for line in warnings.splitlines() if line.startswith(str(src))]
    assert said == [
        f"'confval' reference target not found: livecells_{name} [ref.confval]" for name in CONFIG_FIELDS
    ], warnings
    assert "ERROR" not in warnings
    rows = soup(app.outdir / "index.html").select("table.livecells-config-table tbody tr")
    cells = [[td.get_text(" ", strip=True) for td in row.find_all("td")] for row in rows]
    assert [c[0] for c in cells] == [f"livecells_{name}" for name in CONFIG_FIELDS]
    for (_, shown_type, default, help), (name, f) in zip(cells, CONFIG_FIELDS.items()):
        shown_help = help.replace("\u2019", "'")  # Sphinx's smart quotes: executor\u2019s
        assert (shown_type, shown_help) == (f.metadata["type"], f.metadata["help"]), name
        assert default == default_shown(name), name
    assert cells[0][2] == "pytorch, mxnet" and cells[1][2] == "'auto'"


@pytest.mark.parametrize("name", list(CONFIG_FIELDS))
def test_every_value_has_help_a_shown_type_and_a_section_in_the_docs(name):
    f = CONFIG_FIELDS[name]
    assert f.metadata["help"].endswith(".") and f.metadata["type"], name
    assert f".. confval:: livecells_{name}\n" in (DOCS / "configuration.rst").read_text(encoding="utf-8")
    assert hasattr(LivecellsConfig(), name)
