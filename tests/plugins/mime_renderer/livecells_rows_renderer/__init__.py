"""Shows ``application/vnd.livecells-test.rows+json`` (a list of rows of strings) as a table, on
every builder, before any other representation of the output."""

from __future__ import annotations

from typing import Any

from docutils import nodes

ROWS = "application/vnd.livecells-test.rows+json"


class RowsRenderer:
    mime_priority_overrides = [("*", ROWS, 5)]

    @staticmethod
    def handle_mime(outputs: Any, mime: str, value: Any) -> list[nodes.Node] | None:
        if mime != ROWS:
            return None
        rows = [[str(cell) for cell in row] for row in value]
        width = max(len(row) for row in rows)
        group = nodes.tgroup(cols=width)
        group += [nodes.colspec(colwidth=1) for _ in range(width)]
        body = nodes.tbody()
        for row in rows:
            body += nodes.row("", *(nodes.entry("", nodes.paragraph(text=cell)) for cell in row))
        group += body
        return [nodes.table("", group, classes=["rows-plugin"])]
