"""Mime types as data: one registry, a priority per builder, and ``livecells_mime_priority``.

The builds show a hand-written store (``livecells_execute = "cache"``, no kernel) of one cell
whose outputs offer several representations, with real Sphinx builders (html, latex, text), and
check which representation each page shows, by default and after an override in conf.py.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
from pathlib import Path

import pytest

from livecells.config import read_config
from livecells.model.mime import (
    BASE64_TYPES,
    IMAGE_TYPES,
    MARKUP_TYPES,
    MIME_TYPES,
    PRIORITIES,
    PriorityOverride,
    mime_priority,
    priority_override,
)
from livecells.render.outputs import _SHOWN_AS

from helpers import build_site, cell_with, outputs, said, soup

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n not really a png").decode()
#: The first cell's outputs: one bundle with HTML, an image and text; one with Markdown and text.
BUNDLES = [
    {"text/html": "<b>HTMLREP</b>", "image/png": PNG, "text/plain": "PLAINREP"},
    {"text/markdown": "**MDREP**", "text/plain": "PLAINTWO"},
]


def _stored(code: str, outs: list[dict]) -> dict:
    return {
        "index": 0,
        "code_sha": hashlib.sha256(code.encode()).hexdigest()[:16],
        "status": "ok",
        "outputs": outs,
        "time": 0.01,
        "execution_count": 1,
    }


@pytest.fixture
def site(tmp_path, rootdir):
    src = tmp_path / "site"
    shutil.copytree(rootdir / "test-harden", src)
    outs = [{"output_type": "display_data", "data": data, "metadata": {}} for data in BUNDLES]
    session = {
        "framework": "alpha", "key": "k", "environment": "e", "status": "ok", "message": None,
        "duration": 0.1, "run_id": "stored-run", "cells": [_stored('print("first")', outs)],
        "provenance": {"date": "2026-01-01T00:00:00+00:00", "host": "box", "device": "CPU X"},
    }
    (src / "_livecells").mkdir()
    store = {"format": 1, "page": "index", "sessions": {"alpha": session}}
    (src / "_livecells" / "index.json").write_text(json.dumps(store), encoding="utf-8")
    return src


def build(src: Path, builder: str, overrides: str | None = None) -> tuple[str, str]:
    """Build ``src`` from its store; the index page's output and the warnings. ``overrides``:
    Python source of ``livecells_mime_priority``, written into conf.py."""
    if overrides is not None:
        with (src / "conf.py").open("a") as conf:
            conf.write(f"livecells_mime_priority = {overrides}\n")
    app, warnings = build_site(src, builder, freshenv=True, confoverrides={"livecells_execute": "cache"})
    out = Path(app.outdir)
    if builder == "html":
        return outputs(cell_with(soup(out / "index.html"), 'print("first")')), warnings
    if builder == "latex":
        return next(out.glob("*.tex")).read_text(), warnings
    return (out / "index.txt").read_text(), warnings


def shown(text: str) -> set[str]:
    """The representations a page shows: the markers' names, IMAGE for an image in LaTeX."""
    found = re.findall(r"HTMLREP|PLAINREP|MDREP|PLAINTWO|includegraphics\{\{livecells-\w+\}\.png\}", text)
    return {"IMAGE" if s.startswith("includegraphics") else s for s in found}


# -- the registry -------------------------------------------------------------------------------


def test_every_type_has_one_way_to_be_shown_and_every_priority_is_a_known_type():
    assert all(t.shown_as in _SHOWN_AS for t in MIME_TYPES.values())
    assert all(mime in MIME_TYPES for table in PRIORITIES.values() for mime in table)
    # What the other stages read is derived from the one registry.
    assert IMAGE_TYPES["image/svg+xml"] == ".svg" and "image/svg+xml" not in BASE64_TYPES
    assert set(BASE64_TYPES) == {"image/png", "image/jpeg", "image/gif", "image/webp"}
    assert set(MARKUP_TYPES) == {"text/html", "text/markdown", "text/latex"}
    assert MIME_TYPES["image/svg+xml"].decoded("<svg/>") == b"<svg/>"
    assert MIME_TYPES["image/png"].decoded(PNG).startswith(b"\x89PNG")


def test_priority_is_the_formats_table_then_the_overrides_in_order():
    html = mime_priority("html", "html")
    assert html[0] == "text/html" and html[-1] == "text/plain"
    assert mime_priority("html", "html", html_as_markup=False)[-1] == "text/html"
    assert "image/png" not in mime_priority("text", "text")  # any other format: the "" table
    overrides = [
        PriorityOverride("*", "text/plain", 0),
        PriorityOverride("dirhtml", "text/html", None),
        PriorityOverride("html", "text/plain", 200),  # later, and for this builder: it wins
    ]
    assert mime_priority("html", "html", overrides)[:2] == ["text/html", "text/markdown"]
    assert mime_priority("html", "html", overrides)[-1] == "text/plain"
    dirhtml = mime_priority("dirhtml", "html", overrides)
    assert dirhtml[0] == "text/plain" and "text/html" not in dirhtml
    assert mime_priority("text", "text", [PriorityOverride("text", "image/png", 1)])[0] == "image/png"


@pytest.mark.parametrize(
    "entry",
    [("html", "image/bmp", 1), ("html", "text/plain"), ("html", "text/plain", "1"),
     ("html", "text/plain", True), ("", "text/plain", 1), "html", None, ("html", 5, 1)],
)
def test_a_bad_entry_is_refused_with_a_reason(entry):
    with pytest.raises(ValueError, match=r"\S"):
        priority_override(entry)


def test_a_bad_entry_is_dropped_and_the_good_ones_kept():
    messages: list[str] = []
    config = read_config(
        {"mime_priority": [("html", "text/plain", 0), ("html", "image/bmp", 1), ["*", "text/latex", None]]},
        said(messages),
    )
    assert config.mime_priority == (
        PriorityOverride("html", "text/plain", 0), PriorityOverride("*", "text/latex", None)
    )
    assert len(messages) == 1 and "entry 2" in messages[0] and "image/bmp" in messages[0], messages
    assert read_config({"mime_priority": "text/plain"}, said(messages)).mime_priority == ()
    assert len(messages) == 2 and "using the default" in messages[1]


# -- real builds ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("builder", "expected"),
    [
        ("html", {"HTMLREP", "MDREP"}),
        ("latex", {"IMAGE", "MDREP"}),
        ("text", {"PLAINREP", "MDREP"}),
    ],
)
def test_each_builder_shows_its_best_representation(site, builder, expected):
    text, warnings = build(site, builder)
    assert shown(text) == expected, (text[-3000:], warnings)
    assert "livecells.output" not in warnings and "livecells.config" not in warnings


@pytest.mark.parametrize(
    ("builder", "overrides", "expected"),
    [
        ("html", '[("html", "text/plain", 0)]', {"PLAINREP", "PLAINTWO"}),
        ("html", '[("*", "text/markdown", None), ("latex", "text/plain", 0)]', {"HTMLREP", "PLAINTWO"}),
        ("latex", '[("latex", "image/png", None), ("*", "text/markdown", None)]', {"PLAINREP", "PLAINTWO"}),
        ("text", '[("text", "text/html", 5)]', {"HTMLREP", "MDREP"}),
    ],
)
def test_conf_py_overrides_change_what_a_builder_shows(site, builder, overrides, expected):
    text, warnings = build(site, builder, overrides)
    assert shown(text) == expected, (text[-3000:], warnings)
    assert "livecells.output" not in warnings and "livecells.config" not in warnings
    if builder == "text":  # text/html on a text page is its text, not markup
        assert "<b>HTMLREP</b>" in text


def test_a_bad_override_is_a_warning_at_its_conf_py_line_and_the_rest_applies(site):
    text, warnings = build(site, "html", '[("html", "text/plain", 0), ("html", "image/bmp", 1)]')
    line = len((site / "conf.py").read_text().splitlines())
    found = [w for w in warnings.splitlines() if "[livecells.config]" in w]
    assert len(found) == 1 and f"conf.py:{line}:" in found[0], warnings
    assert "livecells_mime_priority: entry 2" in found[0] and "'image/bmp'" in found[0]
    assert shown(text) == {"PLAINREP", "PLAINTWO"}
