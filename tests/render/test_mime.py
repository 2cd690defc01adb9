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

from helpers import build_site, cell_with, declared_entry_points, install_plugin, outputs, said, soup
from paths import EXT

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
    [("html", "bmp", 1), ("html", "image/", 1), ("html", "text/plain"), ("html", "text/plain", "1"),
     ("html", "text/plain", True), ("", "text/plain", 1), "html", None, ("html", 5, 1)],
)
def test_a_bad_entry_is_refused_with_a_reason(entry):
    with pytest.raises(ValueError, match=r"\S"):
        priority_override(entry)


def test_a_bad_entry_is_dropped_and_the_good_ones_kept():
    messages: list[str] = []
    config = read_config(
        {"mime_priority": [("html", "text/plain", 0), ("html", "bmp", 1), ["*", "text/latex", None]]},
        said(messages),
    )
    assert config.mime_priority == (
        PriorityOverride("html", "text/plain", 0), PriorityOverride("*", "text/latex", None)
    )
    assert len(messages) == 1 and "entry 2" in messages[0] and "'bmp'" in messages[0], messages
    assert read_config({"mime_priority": "text/plain"}, said(messages)).mime_priority == ()
    assert len(messages) == 2 and "using the default" in messages[1]


# -- real builds ----------------------------------------------------------------------------------


@pytest.mark.slow
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


@pytest.mark.slow
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


@pytest.mark.slow
@pytest.mark.parametrize(
    ("entry", "said"),
    [('("html", "image/bmp", 1)', "neither livecells nor an installed mime renderer shows"),
     ('("html", "bmp", 1)', "not a mime type")],
)
def test_a_bad_override_is_a_warning_at_its_conf_py_line_and_the_rest_applies(site, entry, said):
    """A malformed entry is refused when conf.py is read; a well-formed type that no renderer
    shows (a typo, or a renderer not installed) is warned of when the build starts."""
    text, warnings = build(site, "html", f'[("html", "text/plain", 0), {entry}]')
    line = len((site / "conf.py").read_text().splitlines())
    found = [w for w in warnings.splitlines() if "[livecells.config]" in w]
    assert len(found) == 1 and f"conf.py:{line}:" in found[0], warnings
    assert "livecells_mime_priority: entry 2" in found[0] and said in found[0]
    assert shown(text) == {"PLAINREP", "PLAINTWO"}


# -- mime renderers from other packages (render/mime_plugins.py) ----------------------------------

ROWS = "application/vnd.livecells-test.rows+json"


def _rows_site(site: Path) -> Path:
    """The site with the first cell's outputs replaced by one bundle: rows, and plain text."""
    path = site / "_livecells" / "index.json"
    store = json.loads(path.read_text(encoding="utf-8"))
    data = {ROWS: [["name", "<b>not bold</b>"], ["x", "1"]], "text/plain": "PLAINREP"}
    store["sessions"]["alpha"]["cells"][0]["outputs"] = [{"output_type": "display_data", "data": data, "metadata": {}}]
    path.write_text(json.dumps(store), encoding="utf-8")
    return site


@pytest.mark.process
def test_an_installed_package_shows_its_mime_type_by_its_entry_point(site, tmp_path):
    """tests/plugins/mime_renderer, installed as a user installs a package (pip, into a folder of
    its own on the build's path): its type is shown on every builder, before the text; nothing
    in ext/ names it. Without it, the same store shows the text."""
    import os
    import subprocess
    import sys

    env = install_plugin("mime_renderer", tmp_path)
    src = _rows_site(site)

    def sphinx(builder: str, with_plugin: bool = True) -> Path:
        out = tmp_path / f"out-{builder}-{with_plugin}"
        done = subprocess.run([sys.executable, "-m", "sphinx", "-b", builder, "-q", "-E",
                               "-D", "livecells_execute=cache", str(src), str(out)],
                              env=env if with_plugin else os.environ, capture_output=True, text=True)
        assert done.returncode == 0 and "[livecells.output]" not in done.stderr, done.stderr
        return out

    page = cell_with(soup(sphinx("html") / "index.html"), 'print("first")')
    table = page.select_one("table.rows-plugin")
    assert table is not None and "PLAINREP" not in outputs(page)
    assert [td.get_text(strip=True) for td in table.select("td")] == ["name", "<b>not bold</b>", "x", "1"]
    assert table.find("b") is None  # the value is text, escaped by the writer
    assert "not bold" in next(sphinx("latex").glob("*.tex")).read_text()
    assert "PLAINREP" in outputs(cell_with(soup(sphinx("html", with_plugin=False) / "index.html"), 'print("first")'))
    assert "livecells_rows_renderer" not in "".join(p.read_text() for p in EXT.rglob("*.py"))


@pytest.mark.process
def test_the_book_orders_an_installed_renderers_type_by_livecells_mime_priority(site, tmp_path):
    """The book's own entry for a type only a plug-in shows: taken, after the plug-in's own, and
    warned of (it changes nothing) only where no installed renderer shows that type."""
    import subprocess
    import sys

    env = install_plugin("mime_renderer", tmp_path)
    src = _rows_site(site)
    with open(src / "conf.py", "a", encoding="utf-8") as conf:
        conf.write(f"livecells_mime_priority = [('html', {ROWS!r}, None)]\n")

    def sphinx(environ: dict[str, str]) -> tuple[Path, str]:
        out = tmp_path / f"out-{len(environ)}-{id(environ)}"
        done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E",
                               "-D", "livecells_execute=cache", str(src), str(out)],
                              env=environ, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return out, done.stderr

    out, stderr = sphinx(env)
    page = cell_with(soup(out / "index.html"), 'print("first")')
    assert page.select_one("table.rows-plugin") is None and "PLAINREP" in outputs(page)
    assert "livecells_mime_priority" not in stderr, stderr
    import os

    _, stderr = sphinx(dict(os.environ))
    assert "livecells_mime_priority: entry 1" in stderr and "[livecells.config]" in stderr, stderr


def test_a_renderer_that_fails_is_a_located_warning_and_the_next_representation_shown(site, monkeypatch):
    from livecells.render import mime_plugins

    def broken(outputs: object, mime: str, value: object) -> None:
        raise RuntimeError("cannot draw <this>")

    def declines(outputs: object, mime: str, value: object) -> None:
        return None

    builtin, *_ = mime_plugins.renderers()
    fake = (builtin, mime_plugins.Renderer("broken", broken, mime_plugins._overrides([("*", ROWS, 5)])),
            mime_plugins.Renderer("declines", declines, ()))
    monkeypatch.setattr(mime_plugins, "renderers", lambda: fake)
    text, warnings = build(_rows_site(site), "html")
    assert "PLAINREP" in text
    assert re.search(r"index\.rst:\d+: WARNING: a application/vnd\.livecells-test\.rows\+json output could not be "
                     r"shown by the mime renderer 'broken' \(RuntimeError: cannot draw <this>\)", warnings), warnings


def test_a_renderer_that_cannot_be_loaded_or_has_bad_overrides_is_left_out_with_a_warning(monkeypatch):
    from importlib.metadata import EntryPoint

    from livecells.render import mime_plugins

    bad = [EntryPoint("gone", "no_such_package:Renderer", mime_plugins.ENTRY_POINTS),
           EntryPoint("odd", "json:JSONDecoder", mime_plugins.ENTRY_POINTS)]  # no handle_mime
    monkeypatch.setattr(mime_plugins, "entry_points", lambda group: bad)
    warned = []
    monkeypatch.setattr(mime_plugins.logger, "warning", lambda message, **kwargs: warned.append(message))
    mime_plugins.renderers.cache_clear()
    try:
        assert [r.name for r in mime_plugins.renderers()] == ["livecells"]
    finally:
        mime_plugins.renderers.cache_clear()
    assert len(warned) == 2 and "'gone'" in warned[0] and "'odd'" in warned[1]
    for entries in ["x", [("html", "nope", 1)], [("html", ROWS, "high")], [("", ROWS, 1)]]:
        with pytest.raises(ValueError):
            mime_plugins._overrides(entries)


def test_livecells_own_renderer_is_the_first_entry_of_its_group():
    declared = declared_entry_points()
    from livecells.render import mime_plugins

    assert declared[mime_plugins.ENTRY_POINTS] == {mime_plugins.BUILTIN: "livecells.render.outputs:Builtin"}
