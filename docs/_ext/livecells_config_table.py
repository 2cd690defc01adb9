"""The docs' table of every ``livecells_*`` value, made from the config's own fields
(:data:`livecells.config.CONFIG_FIELDS`: their type, default and help), so that it cannot lag
the code. Used as ``.. livecells-config-table::`` in docs/configuration.rst."""

from __future__ import annotations

from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

from livecells.config import CONFIG_FIELDS, raw_default

HEADER = ("Value", "Type", "Default", "What it sets")


def default_shown(name: str) -> str:
    """The default of ``livecells_<name>`` as conf.py would spell it (frameworks: their names)."""
    value = raw_default(name)
    return ", ".join(value) if name == "frameworks" else repr(value)


class ConfigTable(SphinxDirective):
    """A table with one row per config value, each name a link to its ``confval`` section."""

    def run(self) -> list[nodes.Node]:
        widths = (22, 16, 20, 42)
        group = nodes.tgroup(cols=len(widths))
        group += [nodes.colspec(colwidth=width) for width in widths]
        group += nodes.thead("", self._row([nodes.paragraph("", text) for text in HEADER]))
        body = nodes.tbody()
        for name, f in CONFIG_FIELDS.items():
            body += self._row([
                *self.parse_text_to_nodes(f":confval:`livecells_{name}`"),
                nodes.paragraph("", "", nodes.literal("", f.metadata["type"])),
                nodes.paragraph("", "", nodes.literal("", default_shown(name))),
                nodes.paragraph("", f.metadata["help"]),
            ])  # fmt: skip
        group += body
        table = nodes.table("", group, classes=["livecells-config-table"])
        return [table]

    @staticmethod
    def _row(cells: list[nodes.Node]) -> nodes.row:
        return nodes.row("", *(nodes.entry("", cell) for cell in cells))


def setup(app: Sphinx) -> dict[str, Any]:
    app.add_directive("livecells-config-table", ConfigTable)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
