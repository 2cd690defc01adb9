"""Outputs and store files: no output or store entry can crash a build, reach a page raw, or be lost.

Written from the classes of issue 12, not from its examples alone:

1. one bad output or store entry must not crash the build (nor every later build): a store file
   or session of any wrong shape is a located ``livecells.store.files`` warning naming the file, and
   its session runs again (or, in a ``cache`` build, the page shows what it would without it);
2. nothing from a cell or a store reaches HTML, LaTeX, a notebook, the report or the terminal
   raw: markup is escaped, escape sequences and control characters are removed per builder;
3. a store that cannot be written leaves the pages of this build's results, with a warning;
7. output and messages are bounded where they are stored, shown and warned, with a note.

Most tests write store files by hand and build with ``livecells_execute = "cache"`` (no
kernel), or run their sessions on :class:`helpers.FakeKernels` where the store, not the kernel,
is the subject; one module-scoped real-kernel build covers what only a kernel produces.
"""

from __future__ import annotations

import base64
import hashlib
import importlib
import json
import os
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

from livecells.errors import StoreEntryError
from livecells.model.text import css_name, strip_ansi, strip_controls
from livecells.render.ansi import ansi_to_html
from livecells.store.files import OutputStore, verdict_key
from livecells.store.schema import check_output, check_session, repair_session

import paths
import timing
from helpers import FakeKernels, build_site, cell_with, livecells_cli, outputs, soup

EXT = str(paths.EXT)

#: The cells of the test-harden root, per page: (index, framework, code).
INDEX = [
    (0, "alpha", 'print("first")'),
    (1, "alpha", "second = 2"),
    (2, "alpha", 'print("third")'),
    (3, "beta", 'print("beta cell")'),
]
OTHER = [(0, "alpha", 'print("other page")')]
#: Every C0 and C1 control but newline and tab.
CONTROLS = [chr(c) for c in [*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0)]]


def sha(code: str) -> str:
    return hashlib.sha256(code.encode()).hexdigest()[:16]


def stream(text: str, name: str = "stdout") -> dict:
    return {"output_type": "stream", "name": name, "text": text}


def cell(index: int, code: str, *outs: dict, **extra) -> dict:
    return {
        "index": index,
        "code_sha": sha(code),
        "status": "ok",
        "outputs": list(outs),
        "time": 0.01,
        "execution_count": index + 1,
        **extra,
    }


def session(cells: list, **extra) -> dict:
    return {
        "framework": "alpha",
        "key": "k",
        "environment": "e",
        "status": "ok",
        "message": None,
        "duration": 0.1,
        "run_id": "stored-run",
        "cells": cells,
        "provenance": {"date": "2026-01-01T00:00:00+00:00", "host": "box", "device": "CPU X"},
        **extra,
    }


def good_sessions(cells=INDEX) -> dict:
    """Valid stored sessions of a page: each cell prints '<code> out'."""
    by_fw: dict[str, list] = {}
    for index, framework, code in cells:
        by_fw.setdefault(framework, []).append(cell(index, code, stream(f"{code} out\n")))
    return {fw: session(cs, framework=fw) for fw, cs in by_fw.items()}


def write_store(src: Path, docname: str, sessions=None, *, text: str | None = None) -> Path:
    path = src / "_livecells" / f"{docname}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    if text is None:
        text = json.dumps({"format": 1, "page": docname, "sessions": sessions})  # \ud800 escaped
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def site(tmp_path, rootdir):
    src = tmp_path / "site"
    shutil.copytree(rootdir / "test-harden", src)
    write_store(src, "other", good_sessions(OTHER))
    return src


def cache_build(src: Path, builder: str = "html", **overrides):
    conf = {"livecells_execute": "cache", **{f"livecells_{k}": v for k, v in overrides.items()}}
    return build_site(src, builder, freshenv=True, confoverrides=conf)


def page(app, name: str = "index"):
    return soup(app.outdir / f"{name}.html")


def warnings_of(warnings: str, subtype: str) -> list[str]:
    return [line for line in warnings.splitlines() if f"[livecells.{subtype}]" in line]


def assert_others_survive(app, name: str = "index") -> None:
    """The valid beta session of page ``name`` and the other page still show their stored output."""
    assert "beta cell\") out" in outputs(cell_with(page(app, name), "beta cell"))
    assert "print(\"other page\") out" in outputs(cell_with(page(app, "other"), "other page"))


def assert_page_clean(html: str) -> None:
    """Nothing raw: no injected tag, no control character, no escape sequence."""
    assert "<img onerror" not in html and "<script>alert" not in html
    assert not any(c in html for c in CONTROLS), [hex(ord(c)) for c in CONTROLS if c in html]


# -- class 1: a store file or session of the wrong shape ------------------------------------------

BAD_FILES = {
    "a JSON number": "42",
    "a JSON list": "[1, 2]",
    "a JSON string": '"sessions"',
    "null": "null",
    "sessions is a list": '{"format": 1, "sessions": []}',
    "format is a string": '{"format": "1", "sessions": {}}',
    "format is missing": '{"sessions": {}}',
    "a depth bomb": "[" * 100_000 + "]" * 100_000,
    "a huge integer": '{"format": 1, "sessions": {}, "x": ' + "9" * 10_000 + "}",
    "truncated JSON": '{"format": 1, "sessions": {"alpha": {"cells": [',
    "empty": "",
}


def index_copies(src: Path, kind: str, whys) -> dict[str, str]:
    """A copy of the index page (its cells and their recorded output) per member of ``whys``,
    each in index's toctree; their docnames, by member."""
    text = (src / "index.rst").read_text()
    cells = text[text.index(".. live-cell::"):]
    docnames = {why: f"{kind}-{n:02}" for n, why in enumerate(whys)}
    for docname in docnames.values():
        (src / f"{docname}.rst").write_text(f"{docname}\n{'=' * len(docname)}\n\n{cells}")
    (src / "index.rst").write_text(text.replace("   other\n", "   other\n" + "".join(f"   {d}\n" for d in docnames.values())))
    return docnames


@pytest.fixture(scope="module")
def bad_site(tmp_path_factory, rootdir):
    """One cache build of the test-harden site with a copy of its index page per bad store file
    (:data:`BAD_FILES`) and per bad session (:data:`RENDERED_BAD`), each page with its own store
    file: in place of a build per member, each test reads its own page, and the warnings located
    there or naming its store file. The app, the warnings, and by member its docname and store file."""
    src = tmp_path_factory.mktemp("bad") / "site"
    shutil.copytree(rootdir / "test-harden", src)
    write_store(src, "other", good_sessions(OTHER))
    docnames = {**index_copies(src, "file", BAD_FILES), **index_copies(src, "session", RENDERED_BAD)}
    paths = {why: write_store(src, docnames[why], text=BAD_FILES[why]) for why in BAD_FILES}
    for why in RENDERED_BAD:
        paths[why] = write_store(src, docnames[why], {**good_sessions(), "alpha": BAD_SESSIONS[why]})
    app, warnings = cache_build(src)
    return app, warnings, docnames, paths


def store_warnings_of(bad_site, why: str) -> list[str]:
    """The store warnings of ``why``'s page: those that name its store file, which must be those
    located on its page; and every store warning of the build is located on one page and names
    that page's store file."""
    _, warnings, docnames, paths = bad_site
    found = warnings_of(warnings, "store")
    located = {each: [w for w in found if f"{docnames[each]}.rst" in w.split("WARNING")[0]] for each in paths}
    assert sorted(w for ws in located.values() for w in ws) == sorted(found), warnings
    for each, path in paths.items():
        assert [w for w in found if str(path) in w] == located[each], warnings
    return located[why]


@pytest.mark.parametrize("why", list(BAD_FILES))
def test_a_bad_store_file_is_a_located_warning_and_nothing_else(bad_site, why):
    app, warnings, docnames, _ = bad_site
    found = store_warnings_of(bad_site, why)
    assert found, warnings
    assert "Traceback" not in warnings and "Exception occurred" not in warnings
    # The page is written: its cells show their recorded output or nothing, never a crash.
    assert "RECORDED-BETA" in outputs(cell_with(page(app, docnames[why]), "beta cell"))
    assert "other page\") out" in outputs(cell_with(page(app, "other"), "other page"))


@pytest.mark.slow
def test_a_store_file_that_is_not_utf8_is_a_warning(site):
    path = site / "_livecells" / "index.json"
    path.parent.mkdir(exist_ok=True)
    path.write_bytes(b'{"format": 1, "sessions": {"\xff\xfe": 1}}')
    app, warnings = cache_build(site)
    assert any(str(path) in w for w in warnings_of(warnings, "store")), warnings
    assert (app.outdir / "index.html").exists()


def _bad_sessions() -> dict[str, dict]:
    """One bad alpha session per member of the class; the beta session stays valid."""
    code0, code1, code2 = INDEX[0][2], INDEX[1][2], INDEX[2][2]

    def alpha(*outs, **cell_extra):
        return session([cell(0, code0, *outs, **cell_extra), cell(1, code1), cell(2, code2)])

    deep: dict = {}
    level = deep
    for _ in range(500):
        level["x"] = {}
        level = level["x"]
    return {
        "session is a list": [1, 2],
        "session is a string": "ok",
        "cells is a dict": session({"0": cell(0, code0)}),
        "cells missing": {k: v for k, v in session([]).items() if k != "cells"},
        "a cell is a number": session([7]),
        "time is a string": alpha(time="1.5"),
        "time is NaN": alpha(time=float("nan")),
        "time is inf": alpha(time=float("inf")),
        "time is negative": alpha(time=-3.0),
        "time is a bool": alpha(time=True),
        "index is a string": session([{**cell(0, code0), "index": "0"}]),
        "status missing": session([{k: v for k, v in cell(0, code0).items() if k != "status"}]),
        "status unknown": alpha(status="exploded"),
        "code_sha is a number": session([{**cell(0, code0), "code_sha": 5}]),
        "outputs is a string": session([{**cell(0, code0), "outputs": "hello"}]),
        "bad base64 image": alpha({"output_type": "display_data", "data": {"image/png": "abc"}, "metadata": {}}),
        "image value is a number": alpha({"output_type": "display_data", "data": {"image/png": 5}, "metadata": {}}),
        "image value is a dict": alpha({"output_type": "display_data", "data": {"image/jpeg": {}}, "metadata": {}}),
        "text/plain is a list of numbers": alpha({"output_type": "execute_result", "data": {"text/plain": [1, 2]}}),
        "data is a list": alpha({"output_type": "display_data", "data": ["text/plain"], "metadata": {}}),
        "metadata depth bomb": alpha({"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": deep}),
        "unknown output_type": alpha({"output_type": "telepathy", "text": "?"}),
        "output is a list": alpha(["stream", "stdout", "x"]),
        "stream text is a number": alpha({"output_type": "stream", "name": "stdout", "text": 3}),
        "stream name is null": alpha({"output_type": "stream", "name": None, "text": "x"}),
        "lone surrogate in text": alpha(stream("bad \ud800 text")),
        "lone surrogate in a key": alpha({"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {"\udc80": 1}}),
        "traceback is a string": alpha(status="error", error={"ename": "E", "evalue": "v", "traceback": "tb"}),
        "error is a list": alpha(status="error", error=["E"]),
        "evalue is a number": alpha({"output_type": "error", "ename": "E", "evalue": 1, "traceback": []}),
        "execution_count is a string": alpha(execution_count="1"),
        "duration is a string": {**alpha(), "duration": "long"},
        "duration is NaN": {**alpha(), "duration": float("nan")},
        "provenance is a list": {**alpha(), "provenance": ["CPU"]},
        "host is a number": {**alpha(), "provenance": {"host": 5}},
        "device is a dict": {**alpha(), "provenance": {"device": {"name": "x"}}},
        "kernelspec is a list": {**alpha(), "provenance": {"kernelspec": ["python3"]}},
        "kernelspec name is a number": {**alpha(), "provenance": {"kernelspec": {"name": 3}}},
        "fallbacks is a string": {**alpha(), "provenance": {"fallbacks": "none"}},
        "a fallback is a number": {**alpha(), "provenance": {"fallbacks": ["ok", 3]}},
        "status is a number": {**alpha(), "status": 0},
        "key is a list": {**alpha(), "key": ["k"]},
        "message is a list": {**alpha(), "message": ["x"]},
    }


BAD_SESSIONS = _bad_sessions()
#: The bad sessions also built into a page (the schema test below refuses every one).
RENDERED_BAD = ["session is a list", "time is NaN", "bad base64 image", "lone surrogate in text",
                "cells is a dict", "unknown output_type", "metadata depth bomb", "host is a number"]


@pytest.mark.parametrize("why", list(BAD_SESSIONS))
def test_the_schema_refuses_each_wrong_shape(why):
    with pytest.raises(StoreEntryError):
        check_session(BAD_SESSIONS[why])


def test_the_schema_accepts_what_livecells_writes():
    for record in good_sessions().values():
        check_session(record)
    image = {"output_type": "display_data", "data": {"image/png": "iVBORw0KGgo=\n", "text/plain": ["a", "b"],
                                                      "application/json": {"a": [1, None, True]}}, "metadata": {}}
    check_output(image)
    check_output({"output_type": "error", "ename": "E", "evalue": "", "traceback": ["x"]})


def test_math_from_a_cell_never_carries_tex_primitives_into_latex(site):
    """text/latex and Markdown math are native math in LaTeX, but never \\input, \\write, ..."""
    def latex(value: str, plain: str) -> dict:
        return {"output_type": "display_data", "data": {"text/latex": value, "text/plain": plain}, "metadata": {}}

    sessions = good_sessions()
    sessions["alpha"]["cells"][0]["outputs"] = [
        latex(r"$\input{/etc/passwd}$", "plainone"),
        {"output_type": "display_data", "metadata": {},
         "data": {"text/markdown": r"$$\immediate\write18{touch pwned}$$", "text/plain": "plaintwo"}},
        latex(r"$^^5cinput{x}$", "plainthree"),
        latex(r"$\frac{a}{b} + x^2$", "plainfour"),
        latex(r"$\pdffiledump offset 0 length 99{/etc/passwd}$", "plainfive"),
        latex(r"$\global\everypar{\input{x}}$ and $\AtEndDocument{\filedump}$", "plainsix"),
        {"output_type": "display_data", "metadata": {}, "data": {"text/latex": r"$\openout1=x$"}},
    ]
    write_store(site, "index", sessions)
    app, warnings = cache_build(site, "latex")
    tex = next(Path(app.outdir).glob("*.tex")).read_text()
    for bad in (r"\input{/etc/passwd}", r"\write18", "^^5cinput", r"\pdffiledump", r"\everypar", r"\AtEndDocument"):
        assert bad not in tex, bad  # not even as text: the next representation is shown
    assert all(f"plain{n}" in tex for n in ("one", "two", "three", "five", "six"))
    assert r"\frac{a}{b} + x^2" in tex and "plainfour" not in tex  # real math stays math
    assert r"\PYGZbs{}openout1=x" in tex  # nothing else to show: the source, as verbatim text
    assert len([w for w in warnings_of(warnings, "output") if "not on the list of math commands" in w]) == 6


@pytest.mark.parametrize("builder", ["html", "latex"])
def test_links_in_a_cells_markdown_never_run_anything(site, builder):
    """run: is a launch action in a PDF (LaTeX's hyperref), an app's scheme opens the app: such a
    link is its text. markdown-it already keeps javascript:, file: and data: from being links."""
    links = "[RUN](run:/usr/bin/xcalc) <run:/usr/bin/xterm> [JS](javascript:alert(1)) [FILE](file:///etc/passwd)"
    links += " [APP](ms-settings:x) [WEB](https://example.org/a) [MAIL](mailto:a@example.org) [PAGE](other.html#x)"
    sessions = good_sessions()
    sessions["alpha"]["cells"][0]["outputs"] = [
        {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": links, "text/plain": "p"}}
    ]
    write_store(site, "index", sessions)
    app, _ = cache_build(site, builder)
    out = next(Path(app.outdir).glob("*.tex" if builder == "latex" else "index.html")).read_text()
    for text in ("RUN", "/usr/bin/xterm", "JS", "FILE", "APP", "WEB", "MAIL", "PAGE"):
        assert text in out, text  # every link's text is shown
    targets = re.findall(r'href="([^"]*)"' if builder == "html" else r"\\(?:sphinx)?href\{([^}]*)\}", out)
    for kept in ("https://example.org/a", "mailto:a", "other.html"):  # a relative link stays one
        assert any(t.startswith(kept) for t in targets), (kept, targets)
    assert not [t for t in targets if t.split(":")[0] in {"run", "javascript", "file", "ms-settings"}], targets


def test_the_math_allowlist_passes_math_and_nothing_else():
    from livecells.render.safe_tex import unsafe_tex

    sympy_like = [
        r"\left[\begin{matrix}1 & 2\\3 & 4\end{matrix}\right]", r"\frac{d}{d x} \sin{\left(x \right)}",
        r"\begin{cases} x & \text{for}\: x > 0 \\ 0 & \text{otherwise} \end{cases}",
        r"\int\limits_{0}^{\infty} e^{- x^{2}}\, dx", r"\sqrt[3]{\alpha_{1}} \leq \mathbb{R}^{n}",
        r"\operatorname{sign}{\left(x \right)}", r"\begin{align}a &= b \nonumber\end{align}",
        r"\sum_{i=1}^{n} \hat{y}_i \cdot \mathbf{w}", r"\left\{ 1, \ 2\right\}", r"100\%\ \$5",
    ]  # fmt: skip
    for tex in sympy_like:
        assert unsafe_tex(tex) is None, tex
    refused = {
        r"\href{javascript:alert(1)}{x}": r"\href", r"\style{color:red}{x}": r"\style",
        r"\class{x}{y}": r"\class", r"\cssId{x}{y}": r"\cssId", r"\require{html}": r"\require",
        r"\pdffiledump offset 0 length 9{f}": r"\pdffiledump", r"\filedump": r"\filedump",
        r"\global\everypar{}": r"\global", r"\AtEndDocument{}": r"\AtEndDocument",
        r"\begin{filecontents}{x}": r"\begin{filecontents}", r"\end": r"\end", r"\end {document}": r"\end{document}",
        r"\url{x}": r"\url", r"\htmlData{a=b}{x}": r"\htmlData", r"\input x": r"\input", "^^5cinput": "^^",
        r"\def\x{}": r"\def", r"\let\x\y": r"\let", r"\catcode`\@=11": r"\catcode", "#1": "#", "x % y": "%", "a $ b": "$",
        r"\csname input\endcsname": r"\csname", r"\immediate\write18{x}": r"\immediate",
        r"\openout1": r"\openout", r"\read1to\x": r"\read", r"\special{x}": r"\special",
        r"\unicode{x}": r"\unicode", r"\color{red}x": r"\color", "x\\": "\\", r"\@x": r"\@",
    }  # fmt: skip
    for tex, first in refused.items():
        assert (unsafe_tex(tex) or "").startswith(f"{first!r}, which is not on the list of math"), tex
    # What would end or swallow the page's own groups and environments.
    unbalanced = {
        "}": "'}', which closes nothing", "{a": "'{', which it leaves open",
        r"\end{matrix}": r"'\\end{matrix}', which closes nothing",
        r"\begin{matrix}a": r"'\\begin{matrix}', which it leaves open",
        r"\begin{matrix}\end{pmatrix}": r"'\\end{pmatrix}', which closes nothing",
        r"\left(x": r"'\\left', which it leaves open", r"x\right)": r"'\\right', which closes nothing",
        r"{\left(}\right)": "'}', which closes nothing",
    }  # fmt: skip
    for tex, why in unbalanced.items():
        assert (unsafe_tex(tex) or "").startswith(why), (tex, unsafe_tex(tex))


def test_every_image_type_the_collector_keeps_is_shown(site):
    """webp too, as JupyterLab shows it: a stored display of each kind becomes an <img>."""
    import base64

    kinds = {"image/png": ".png", "image/jpeg": ".jpg", "image/gif": ".gif", "image/webp": ".webp"}
    displays = [
        {"output_type": "display_data", "data": {mime: base64.b64encode(mime.encode()).decode(),
                                                 "text/plain": f"<{mime}>"}, "metadata": {}}
        for mime in kinds
    ]
    sessions = good_sessions()
    sessions["alpha"]["cells"][0]["outputs"] = displays
    write_store(site, "index", sessions)
    app, warnings = cache_build(site)
    shown = cell_with(page(app), 'print("first")')
    assert sorted(Path(img["src"]).suffix for img in shown.select("img")) == sorted(kinds.values())
    assert "<image/" not in outputs(shown) and "livecells.output" not in warnings


@pytest.mark.parametrize("why", RENDERED_BAD)
def test_a_bad_session_is_a_located_warning_and_the_rest_renders(bad_site, why):
    app, warnings, docnames, _ = bad_site
    name = docnames[why]
    found = store_warnings_of(bad_site, why)
    assert len(found) == 1 and "'alpha'" in found[0], warnings
    assert "runs again" in found[0]
    assert "Traceback" not in warnings
    assert_others_survive(app, name)
    # The bad session is not shown: alpha's cells have no stored output.
    assert "first\") out" not in outputs(cell_with(page(app, name), 'print("first")'))
    # Its notebook download is still a valid notebook, without the bad outputs.
    notebook = json.loads((app.outdir / f"_downloads/livecells/{name}.alpha.ipynb").read_text())
    assert all(c.get("outputs", []) == [] for c in notebook["cells"] if c["cell_type"] == "code")
    beta = json.loads((app.outdir / f"_downloads/livecells/{name}.beta.ipynb").read_text())
    assert any(c.get("outputs") for c in beta["cells"] if c["cell_type"] == "code")


def test_a_bad_session_runs_again_and_is_replaced(site):
    sessions = good_sessions()
    sessions["alpha"] = BAD_SESSIONS["bad base64 image"]
    path = write_store(site, "index", sessions)
    kernels = FakeKernels()
    app, warnings = build_site(site, kernels=kernels, freshenv=True)
    assert len(warnings_of(warnings, "store")) == 1, warnings
    # (The hand-written sessions have made-up keys: the good ones run again too.)
    stored = json.loads(path.read_text())["sessions"]
    check_session(stored["alpha"])
    assert stored["alpha"]["run_id"] == app.env.livecells_outcome.run_id
    assert "first" in outputs(cell_with(page(app), 'print("first")'))
    assert kernels.take() == [("index", "alpha"), ("index", "beta"), ("other", "alpha")]
    app, warnings = build_site(site, kernels=kernels)
    assert not warnings_of(warnings, "store") and app.env.livecells_outcome.ran == 0 and kernels.take() == []


def test_a_store_file_is_checked_again_exactly_when_its_content_or_the_checks_changed(site, monkeypatch):
    """The verdicts are kept in the environment by content: a no-op build checks no unchanged
    file, and a file whose bytes changed (here in place, to a bad session of the same size) is
    checked and warned of, whatever its times say; so is every file after the checks change."""
    from livecells.store import files

    checked: list[str] = []

    def counting(record):
        checked.append(record.get("framework"))
        return check_session(record)

    monkeypatch.setattr(files, "check_session", counting)
    monkeypatch.setattr(files, "_VERDICTS", {})  # (this process checked the same files' contents before)
    path = write_store(site, "index", good_sessions())
    conf = {"livecells_execute": "cache"}
    build_site(site, freshenv=True, confoverrides=conf)
    assert sorted(checked) == ["alpha", "alpha", "beta"]  # index's two sessions, other's one
    files._VERDICTS.clear()  # a new build process: only the environment's verdicts
    checked.clear()
    app, warnings = build_site(site, confoverrides=conf)
    assert checked == [] and not warnings_of(warnings, "store"), warnings
    assert app.env.livecells_outcome.cached == 3
    good = path.read_bytes()
    bad = good.replace(b'"status": "ok", "outputs"', b'"status": "OK", "outputs"', 1)
    assert bad != good and len(bad) == len(good)
    times = os.stat(path)
    with open(path, "r+b") as handle:
        handle.write(bad)
    os.utime(path, ns=(times.st_atime_ns, times.st_mtime_ns))
    files._VERDICTS.clear()
    app, warnings = build_site(site, confoverrides=conf)
    assert checked == ["alpha", "beta"], checked
    found = warnings_of(warnings, "store")
    assert len(found) == 1 and "'alpha'" in found[0] and "index.rst" in found[0], warnings
    assert app.env.livecells_outcome.cached == 2
    # Another livecells (or edited checks): every file is checked again.
    files._VERDICTS.clear()
    checked.clear()
    monkeypatch.setattr(files, "__version__", "99.0")
    files._checks_digest.cache_clear()
    try:
        build_site(site, confoverrides=conf)
    finally:
        files._checks_digest.cache_clear()
    assert sorted(checked) == ["alpha", "alpha", "beta"], checked


def test_the_files_a_build_writes_are_not_checked_again_by_the_next(site, monkeypatch):
    """Sphinx pickles no environment after a build that wrote no page, so the verdicts a no-op
    takes are lost: the build that ran the sessions keeps those of the files it wrote."""
    from livecells.store import files

    checked: list[str] = []

    def counting(record):
        checked.append(record.get("framework"))
        return check_session(record)

    monkeypatch.setattr(files, "check_session", counting)
    monkeypatch.setattr(files, "_VERDICTS", {})  # (this process's cache, cleared per build below)
    (site / "_livecells" / "other.json").unlink()
    kernels = FakeKernels()
    build_site(site, kernels=kernels, freshenv=True)
    assert kernels.take() == [("index", "alpha"), ("index", "beta"), ("other", "alpha")]
    for _ in range(2):
        files._VERDICTS.clear()  # a new build process: only the environment's verdicts
        checked.clear()
        app, warnings = build_site(site, kernels=kernels)
        assert kernels.take() == [] and app.env.livecells_outcome.cached == 3
        assert checked == [] and not warnings_of(warnings, "store"), warnings
    written = {verdict_key(p.read_bytes()) for p in (site / "_livecells").glob("*.json")}
    assert set(app.env.livecells.store_verdicts) == written


def test_the_collector_pauses_while_the_store_is_read_and_never_while_cells_run(site, monkeypatch):
    """The stored records are read with the cyclic collector paused (pipeline/run.py's
    collector_paused); cells run with it on, and a build leaves it as it found it."""
    import gc

    from livecells.store import files

    index = site / "index.rst"
    index.write_text(index.read_text().replace('print("first")', "import gc; print('collector', gc.isenabled())"))
    reads: list[bool] = []
    records = files.OutputStore.records

    def reading(self, docname, problems=None):
        reads.append(gc.isenabled())
        return records(self, docname, problems)

    monkeypatch.setattr(files.OutputStore, "records", reading)
    app, _ = build_site(site, kernels=FakeKernels(), freshenv=True)
    assert "collector True" in outputs(cell_with(page(app), "gc.isenabled()"))
    assert reads and not any(reads) and gc.isenabled()
    gc.disable()  # a book's conf.py (or a caller) that turned it off keeps it off
    try:
        reads.clear()
        build_site(site, confoverrides={"livecells_execute": "cache"})
        assert reads and not gc.isenabled()
    finally:
        gc.enable()


def test_the_kept_verdicts_are_those_of_the_last_builds_files(site):
    """A file's old contents leave no verdict behind in the environment."""
    path = write_store(site, "index", good_sessions())
    conf = {"livecells_execute": "cache"}
    app, _ = build_site(site, freshenv=True, confoverrides=conf)
    first = set(app.env.livecells.store_verdicts)
    assert len(first) == 2  # index's and other's files
    sessions = good_sessions()
    sessions["beta"]["duration"] = 0.2
    write_store(site, "index", sessions)
    app, _ = build_site(site, confoverrides=conf)
    second = set(app.env.livecells.store_verdicts)
    assert second == {verdict_key(path.read_bytes()), verdict_key((site / "_livecells" / "other.json").read_bytes())}
    assert len(first & second) == 1


def test_the_checks_digest_covers_every_livecells_module_the_checks_import():
    """store/files.py's CHECKS against schema.py's own imports: a module added there and not
    here would let a verdict outlive an edit of it."""
    import ast

    from livecells.store import files, schema

    tree = ast.parse(Path(schema.__file__).read_text(encoding="utf-8"))
    imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and node.module and node.module.startswith("livecells")}
    imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import)
                 for alias in node.names if alias.name.startswith("livecells")}
    assert set(files.CHECKS) == {"livecells.store.schema"} | imported
    for name in imported:  # and those modules import no other livecells module
        source = Path(importlib.import_module(name).__file__).read_text(encoding="utf-8")
        assert "from livecells" not in source and "import livecells" not in source, name


@pytest.mark.slow
def test_the_report_directive_and_cli_survive_bad_sessions(site):
    sessions = good_sessions()
    sessions["alpha"] = BAD_SESSIONS["time is a string"]
    (site / "other.rst").write_text((site / "other.rst").read_text() + "\n.. live-report::\n")
    write_store(site, "index", sessions)
    write_store(site, "broken", text="[[[")
    app, warnings = cache_build(site, show_host=True)  # the stored host, its controls removed
    assert "Traceback" not in warnings
    assert "box" in page(app, "other").select_one("table.livecells-report").get_text()
    bare = site.parent / "no-conf"  # no conf.py: the stored records alone are counted
    bare.mkdir()
    for extra in ([], ["--json"]):
        # With conf.py, the pages are read as a build reads them: index's alpha shows no result.
        done = livecells_cli("report", "-s", str(site), *extra)
        assert done.returncode == 1, done.stderr
        assert "broken.json" in done.stderr and "'alpha'" in done.stderr
        assert "index [alpha]: 3 not-run" in done.stderr, done.stderr
        assert "beta" in done.stdout and "Traceback" not in done.stderr
        assert livecells_cli("report", "-s", str(site), "--fail-on", "errors", *extra).returncode == 0
        # Without: what it cannot read has no result a build could show: not run, so not a pass.
        done = livecells_cli("report", "-s", str(bare), "--store", str(site / "_livecells"), *extra)
        assert done.returncode == 1, done.stderr
        assert "2 store file(s) or session(s) unusable" in done.stderr
        assert "beta" in done.stdout and "Traceback" not in done.stderr
        assert livecells_cli(
            "report", "-s", str(bare), "--store", str(site / "_livecells"), "--fail-on", "errors", *extra
        ).returncode == 0
    # clear -f on a damaged file: a warning, not a traceback; clear without -f removes it.
    done = livecells_cli("clear", "-s", str(site), "-f", "alpha", "broken")
    assert done.returncode == 0 and "broken.json" in done.stderr and "Traceback" not in done.stderr
    done = livecells_cli("clear", "-s", str(site), "broken")
    assert done.returncode == 0 and not (site / "_livecells" / "broken.json").exists()


@pytest.mark.slow
def test_the_cli_report_counts_a_session_that_did_not_start_as_failed(site):
    """A record with a message (its kernel did not start) is a failure in a build whatever its
    status says; the command line's exit status says so too."""
    sessions = good_sessions()
    sessions["alpha"]["message"] = "the kernel did not start"
    write_store(site, "index", sessions)
    done = livecells_cli("report", "-s", str(site), "--json")
    assert done.returncode == 1, done.stderr
    statuses = {(r["page"], r["framework"]): r["status"] for r in json.loads(done.stdout)}
    assert statuses[("index", "alpha")] == "failed" and statuses[("index", "beta")] == "ok"
    assert livecells_cli("report", "-s", str(site), "--fail-on", "errors").returncode == 1
    # The build that shows it counts it so too, as its warning says.
    app, warnings = cache_build(site, raise_on_error=True)
    assert "the kernel did not start" in warnings and app.statuscode == 1, warnings
    assert app.env.livecells_outcome.session("index", "alpha").status == "failed"


def test_the_cli_report_prints_no_control_characters(site):
    sessions = good_sessions()
    sessions["alpha"]["provenance"]["host"] = "\x1b]0;pwned\x07box\x1b[2J"
    write_store(site, "index", sessions)
    done = livecells_cli("report", "-s", str(site))
    assert done.returncode == 0
    assert "\x1b" not in done.stdout and "\x07" not in done.stdout


def test_the_writer_replaces_a_bad_session_and_keeps_the_good_ones(tmp_path):
    store = OutputStore(tmp_path / "_livecells")
    sessions = good_sessions()
    sessions["alpha"] = BAD_SESSIONS["lone surrogate in text"]
    write_store(tmp_path, "index", sessions)
    problems: list[str] = []
    assert set(store.load("index", problems)["sessions"]) == {"beta"} and len(problems) == 1
    store.save_session("index", "gamma", good_sessions()["beta"])  # never crashes on the bad one
    assert set(store.load("index")["sessions"]) == {"beta", "gamma"}


# -- class 2: nothing reaches the page raw ---------------------------------------------------------

HOSTILE = '"><img onerror=alert(1)>'
NASTY_TEXT = (
    "<script>alert(1)</script> & \\ { } % ^^ $ # _ ~ "
    "\x1b[38:5:1mcolon\x1b[0m \x1b[38;2;1;2;3mtrue\x1b[0m \x1bc \x1b7 \x1b8 \x1b(B "
    "\x1b]0;title\x07 \x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\ \x9b31m "
    + "".join(c for c in CONTROLS if c not in "\x1b\x9b\r\b")  # (\r, \b act as in a terminal)
    + " END"
)


def hostile_sessions() -> dict:
    sessions = good_sessions()
    code0, code1, code2 = (c for _, _, c in INDEX[:3])
    svg = '<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>'
    sessions["alpha"] = session(
        [
            cell(0, code0, stream("named badly\n", name=HOSTILE), stream(NASTY_TEXT + "\n"),
                 {"output_type": "stream", "name": "stdout", "text": ["multi", "line\n"]}),
            cell(1, code1, {"output_type": "display_data", "data": {"image/svg+xml": svg, "text/plain": "svg"},
                            "metadata": {}},
                 {"output_type": "execute_result", "data": {"text/plain": NASTY_TEXT}, "execution_count": 2}),
            cell(2, code2, stream("third out\n"), status="error",
                 error={"ename": "Boom<b>", "evalue": NASTY_TEXT, "traceback": [NASTY_TEXT]}),
        ],
        provenance={"date": "2026\x07-01", "host": "<b>host</b>\x1b[2J", "device": "GPU\x0c<i>"},
    )
    return sessions


@pytest.mark.slow
def test_a_hostile_stored_session_reaches_no_page_raw(site):
    write_store(site, "index", hostile_sessions())
    (site / "other.rst").write_text((site / "other.rst").read_text() + "\n.. live-report::\n")
    app, warnings = cache_build(site)
    html = (app.outdir / "index.html").read_text()
    assert_page_clean(html)
    assert "<b>host" not in html and "<i>" not in html and "Boom<b>" not in html
    assert "[2J" not in html
    report = (app.outdir / "other.html").read_text()
    assert_page_clean(report)
    assert "<b>host" not in report and "[2J" not in report
    # The stream named badly is shown, under a safe class, with a located warning.
    found = warnings_of(warnings, "output")
    assert any("index.rst:" in w and "stream named" in w for w in found), warnings
    first = cell_with(page(app), 'print("first")')
    assert "named badly" in outputs(first) and "colon" in outputs(first) and "END" in outputs(first)
    assert "multiline" in outputs(first)  # nbformat's list form of a stream's text
    # An SVG with a script is an <img>, never inline.
    second = cell_with(page(app), "second = 2")
    assert second.select_one("img") is not None and second.select_one("svg") is None
    svg_file = next((app.outdir / "_images").glob("livecells-*.svg"))
    assert "<script>" in svg_file.read_text()  # the file as written; browsers run no script in <img>
    assert "third out" in outputs(cell_with(page(app), 'print("third")'))
    assert_others_survive(app)
    notebook = nbformat.read(app.outdir / "_downloads/livecells/index.alpha.ipynb", as_version=4)
    nbformat.validate(notebook)
    assert any(o.get("name") == HOSTILE for c in notebook.cells for o in c.get("outputs", []))


@pytest.mark.parametrize("builder", ["latex", "text"])
def test_a_hostile_stored_session_reaches_no_tex_or_text_raw(site, builder):
    write_store(site, "index", hostile_sessions())
    app, warnings = cache_build(site, builder)
    out = next(Path(app.outdir).glob("*.tex" if builder == "latex" else "index.txt")).read_text()
    assert not any(c in out for c in CONTROLS), [hex(ord(c)) for c in CONTROLS if c in out]
    assert "colon" in out and "END" in out and "third out" in out
    if builder == "latex":
        # Output special characters are escaped by the verbatim environment, not passed raw.
        body = out[out.index("colon") - 200 : out.index("END")]
        for escaped in ["\\PYGZbs{}", "\\PYGZob{}", "\\PYGZcb{}", "\\PYGZpc{}", "\\PYGZca{}\\PYGZca{}"]:
            assert escaped in body, escaped
        assert "\\begin{sphinxVerbatim}" in out[: out.index("colon")]


#: What XML 1.0 cannot hold, but a cell can print: C0 controls, lone surrogates, U+FFFE/U+FFFF.
NOT_XML = "a\x00b\x01c\x0bd\ud800e\udfffg\ufffeh\uffffi"


def test_junit_xml_stays_xml_1_0_whatever_the_problems_hold():
    import xml.etree.ElementTree as ET

    from livecells.model.records import Problem, SessionOutcome
    from livecells.pipeline.summary import junit_xml

    problem = Problem(NOT_XML, f"page{NOT_XML}.rst:3", f"boom {NOT_XML}", f"Traceback {NOT_XML}")
    failed = SessionOutcome(f"page{NOT_XML}", f"fw{NOT_XML}", f"src{NOT_XML}", "run", "error", problems=[problem])
    skipped = SessionOutcome("other", "fw", "src", "recorded", "not-run", reason=f"why {NOT_XML}")
    suite = ET.fromstring(junit_xml([failed, skipped], {"seconds": 1.0}))  # a strict parser
    text = ET.tostring(suite, encoding="unicode")
    assert "boom abcd\ufffde\ufffdghi" in text and "why abcd" in text and "pageabcd" in text


@pytest.mark.slow
def test_outputs_that_xml_cannot_hold_leave_every_xml_output_valid(site):
    """junit.xml parses with a strict XML parser; the HTML and the epub's XHTML hold none of them.
    (A store holds no lone surrogate: one is refused when read, and repaired when written.)"""
    import xml.etree.ElementTree as ET

    bad = NOT_XML.replace("\ud800", "").replace("\udfff", "")

    sessions = good_sessions()
    sessions["alpha"]["cells"][0]["outputs"] = [
        stream(f"out {bad}\n"),
        {"output_type": "display_data", "metadata": {},
         "data": {"text/markdown": f"*md* {bad} $x^{bad}$", "text/plain": "p"}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/latex": f"$y_{bad}$ {bad}"}},
        {"output_type": "display_data", "metadata": {}, "data": {"application/json": {bad: bad}}},
        {"output_type": "error", "ename": "ValueError", "evalue": bad, "traceback": [f"ValueError: {bad}"]},
    ]  # fmt: skip
    sessions["alpha"]["cells"][0]["status"] = "error"
    write_store(site, "index", sessions)
    app, _ = cache_build(site)
    ET.parse(app.doctreedir / "livecells-summary" / "junit.xml")
    html = (app.outdir / "index.html").read_text(encoding="utf-8")
    assert "out abcdeg" in html and "md" in html
    assert not any(c in html for c in "\x00\x01\x0b\ufffe\uffff")
    app, _ = cache_build(site, "epub")
    # (Not parsed whole: sphinx-design's tab markup, an unclosed <input>, is no XHTML.)
    not_xml = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
    pages = {page.name: page.read_text(encoding="utf-8") for page in Path(app.outdir).rglob("*.xhtml")}
    assert "out abcdeg" in pages["index.xhtml"]
    assert not any(not_xml.search(text) for text in pages.values())


def test_ansi_and_controls_are_removed_for_every_builder():
    for text in [NASTY_TEXT, *CONTROLS, "\x1b", "\x1b[", "\x1b]unterminated", "\x1b[38:5:1"]:
        plain, html = strip_ansi(text), ansi_to_html(text)
        for out in (plain, html):
            assert not any(c in out for c in CONTROLS), (text, out)
        assert "<script" not in html
    assert strip_ansi("a\tb\nc") == "a\tb\nc"
    assert ansi_to_html("\x1b[31mred\x1b[0m") == '<span class="ansi-red-fg">red</span>'
    assert ansi_to_html("\x1b[1;38:5:1mx") == '<span class="ansi-bold ansi-red-fg">x</span>'
    assert strip_controls("a\x00b\x85c\u2028d") == "abc\u2028d"


def test_css_names_are_safe_whatever_they_are_made_of():
    for name in [HOSTILE, "", "stdout", "a b", "ü", "x" * 500, "'", "--", 5, None]:
        made = css_name(name)
        assert re.fullmatch(r"[A-Za-z0-9_-]{1,40}", made), made
    assert css_name("stdout") == "stdout" and css_name("stderr") == "stderr"


# -- class 7: bounded where stored, shown and warned -------------------------------------------------


def test_huge_reprs_and_messages_are_cut_with_a_note():
    # Issue 12's 30 MB repr and 5 MB message, a tenth as long: still 30 times the limit and 50
    # times MAX_MESSAGE (the cuts are the same; the time to make and walk them is not).
    code0 = INDEX[0][2]
    huge = "x" * 3_000_000
    record = session([cell(0, code0,
                           {"output_type": "execute_result", "data": {"text/plain": huge, "text/html": huge},
                            "execution_count": 1, "metadata": {}},
                           {"output_type": "error", "ename": "E", "evalue": "m" * 500_000,
                            "traceback": ["t" * 500_000, "u" * 10]},
                           status="error", error={"ename": "E", "evalue": "m" * 500_000,
                                                  "traceback": ["t" * 500_000]})])
    repair_session(record, 100_000)
    check_session(record)
    size = len(json.dumps(record))
    assert size < 500_000, size
    result, error = record["cells"][0]["outputs"]
    assert "characters cut" in result["data"]["text/plain"][-200:]
    assert "text/html" not in result["data"]  # cut markup would be broken markup
    assert "3,000,000" in result["livecells_refused"] and "text/html" in result["livecells_refused"]
    assert len(error["evalue"]) < 20_000 and "characters cut" in error["evalue"]
    assert "1,000,010 characters was cut" in error["livecells_refused"]
    assert len(record["cells"][0]["error"]["evalue"]) < 20_000


@pytest.mark.slow
def test_a_huge_stored_output_is_cut_when_shown(site):
    sessions = good_sessions()
    code0 = INDEX[0][2]
    # 10 times the limit each (shown whole, the page would be 4 MB).
    sessions["alpha"]["cells"][0] = cell(
        0, code0, stream("s" * 1_000_000),
        {"output_type": "execute_result", "data": {"text/plain": "p" * 1_000_000}, "execution_count": 1},
        {"output_type": "error", "ename": "E", "evalue": "e" * 1_000_000, "traceback": ["t" * 1_000_000]},
    )
    write_store(site, "index", sessions)
    app, warnings = cache_build(site)
    assert (app.outdir / "index.html").stat().st_size < 1_000_000
    assert (app.outdir / "index.html").read_text().count("more characters cut") == 3
    assert_others_survive(app)


def test_repair_makes_what_a_cell_can_tamper_with_storable():
    """A cell can reach livecells' helpers in its kernel (the timer, the probe)."""
    code0 = INDEX[0][2]
    for bad in [{"time": float("nan")}, {"time": "1"}, {"time": -1.0}, {"execution_count": "x"}]:
        record = session([cell(0, code0, **bad)],
                         provenance={"host": 5, "kernelspec": ["x"], "odd": {"k": float("inf")}, "device": "CPU",
                                     "fallbacks": [1]})
        assert repair_session(record, 100_000)
        check_session(record)
        assert record["provenance"] == {"device": "CPU"}
    record = session([cell(0, code0, status="error", error={"ename": "E", "evalue": "v", "traceback": ["x"] * 200_000})])
    repair_session(record, 100_000)
    check_session(record)
    assert "more traceback entries cut" in record["cells"][0]["error"]["traceback"][-1]


def test_repair_turns_every_bad_output_into_a_note_and_keeps_the_rest():
    code0 = INDEX[0][2]
    bad = [
        {"output_type": "display_data", "data": {"image/png": "abc"}, "metadata": {}},
        {"output_type": "display_data", "data": {"image/png": 5}, "metadata": {}},
        {"output_type": "telepathy"},
        "not an output",
    ]
    record = session([cell(0, code0, stream("before\n"), *bad, stream("lone \ud800\n"), stream("after\n"))])
    repaired = repair_session(record, 100_000)
    check_session(record)
    outs = record["cells"][0]["outputs"]
    assert len(repaired) == len(bad) and len(outs) == len(bad) + 3
    assert outs[0]["text"] == "before\n" and outs[-1]["text"] == "after\n"
    assert outs[-2]["text"] == "lone \ufffd\n"
    assert all(o.get("livecells_refused", "").startswith("an output was left out") for o in outs[1:-2])
    json.dumps(record, ensure_ascii=False).encode("utf-8")  # storable


# -- the real kernel: what only a cell produces ------------------------------------------------------

KERNEL_PAGE = r'''
Kernel
======

.. live-cell:: alpha

   print("before the bad ones")

.. live-cell:: alpha

   from IPython.display import display
   display({"image/png": "abc"}, raw=True)
   display({"image/png": 5, "text/plain": "five"}, raw=True)
   print("printed after the bad image")

.. live-cell:: alpha

   import sys
   sys.stdout.name = '"><img onerror=alert(1)>'
   print("stdout with a hostile name")

.. live-cell:: alpha

   print("\x1b[38:5:1mcolon\x1b[0m \x1bc \x1b7 \x07\x0c\x0b \\ { } % ^^ <script>x</script> END")

.. live-cell:: alpha

   class Big:
       def __repr__(self):
           return "r" * 3_000_000
   Big()

.. live-cell:: alpha
   :raises: ValueError

   raise ValueError("v" * 2_000_000)

.. live-cell:: alpha

   print("the last cell ran")
'''


@pytest.fixture(scope="module")
def kernel_site(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("kernel") / "site"
    shutil.copytree(rootdir / "test-harden", src)
    (src / "index.rst").write_text(KERNEL_PAGE)
    (src / "other.rst").unlink()
    app, warnings = build_site(src, freshenv=True)
    return src, app, warnings


@pytest.mark.kernel
def test_bad_outputs_from_a_kernel_are_warnings_and_the_build_goes_on(kernel_site, no_kernel_left):
    src, app, warnings = kernel_site
    html = (app.outdir / "index.html").read_text()
    assert_page_clean(html)
    found = warnings_of(warnings, "output")
    assert any("left out" in w and "index.rst:" in w for w in found), warnings
    for text in ["before the bad ones", "printed after the bad image", "stdout with a hostile name",
                 "colon", "END", "the last cell ran"]:
        assert text in html, text
    # What was stored is valid: the next build (the publishing cache build too) reads it.
    record = json.loads((src / "_livecells" / "index.json").read_text())
    check_session(record["sessions"]["alpha"])
    assert (src / "_livecells" / "index.json").stat().st_size < 1_000_000
    app2, warnings2 = cache_build(src)
    assert not warnings_of(warnings2, "store") and "Traceback" not in warnings2
    assert "the last cell ran" in (app2.outdir / "index.html").read_text()


@pytest.mark.kernel
def test_huge_output_from_a_kernel_is_bounded_in_page_store_and_warning(kernel_site):
    src, app, warnings = kernel_site
    assert (app.outdir / "index.html").stat().st_size < 1_000_000
    assert max(len(line) for line in warnings.splitlines()) < 2_000
    assert any("cut" in w for w in warnings_of(warnings, "output")), warnings
    html = (app.outdir / "index.html").read_text()
    assert "characters cut" in html


@pytest.mark.kernel
def test_a_kernel_build_to_latex_from_the_store_is_clean(kernel_site):
    src, _, _ = kernel_site
    app, warnings = cache_build(src, "latex")
    tex = next(Path(app.outdir).glob("*.tex")).read_text()
    assert not any(c in tex for c in CONTROLS)
    assert "colon" in tex and "END" in tex


# -- class 3: a store that cannot be written ---------------------------------------------------------


def _unwritable(src: Path, how: str) -> dict:
    """Make the store unwritable in one way; return the config overrides that go with it."""
    if how == "a file where the folder should be":
        (src / "_livecells").write_text("not a folder")
        return {}
    if how == "a file where the page's folder should be":
        (src / "sub").mkdir()
        (src / "sub" / "page.rst").write_text("Sub\n===\n\n.. live-cell:: alpha\n\n   print('in sub')\n")
        (src / "index.rst").write_text((src / "index.rst").read_text().replace("   other\n", "   other\n   sub/page\n"))
        (src / "_livecells").mkdir()
        (src / "_livecells" / "sub").write_text("not a folder")
        return {}
    if how == "deleted and replaced by a file mid-build":
        (src / "index.rst").write_text(
            (src / "index.rst").read_text().replace(
                'print("first")',
                'import shutil, os; shutil.rmtree("_livecells", ignore_errors=True); '
                'open("_livecells", "w").close(); print("first")',
            )
        )
        return {}
    raise AssertionError(how)


@pytest.mark.slow
@pytest.mark.parametrize(
    "how", ["a file where the folder should be", "a file where the page's folder should be",
            "deleted and replaced by a file mid-build"],
)
def test_an_unwritable_store_still_shows_this_builds_results(site, how):
    shutil.rmtree(site / "_livecells")
    (site / "other.rst").write_text((site / "other.rst").read_text() + "\n.. live-report::\n")
    _unwritable(site, how)
    app, warnings = build_site(site, kernels=FakeKernels(), freshenv=True)
    found = warnings_of(warnings, "store")
    assert any("not stored" in w for w in found), warnings
    assert "Traceback" not in warnings
    assert "first" in outputs(cell_with(page(app), 'print("first")'))
    assert "third" in outputs(cell_with(page(app), 'print("third")'))
    assert "beta cell" in outputs(cell_with(page(app), "beta cell"))
    assert "other page" in outputs(cell_with(page(app, "other"), "other page"))
    assert "this build" in page(app, "other").select_one("table.livecells-report").get_text()
    if how == "a file where the page's folder should be":
        assert "in sub" in outputs(cell_with(page(app, "sub/page"), "in sub"))


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_a_read_only_store_still_shows_this_builds_results(site):
    store = site / "_livecells"
    shutil.rmtree(store)
    store.mkdir()
    store.chmod(stat.S_IRUSR | stat.S_IXUSR)
    try:
        app, warnings = build_site(site, kernels=FakeKernels(), freshenv=True)
    finally:
        store.chmod(stat.S_IRWXU)
    assert any("not stored" in w for w in warnings_of(warnings, "store")), warnings
    assert "first" in outputs(cell_with(page(app), 'print("first")'))


def test_a_store_that_refuses_writes_still_shows_this_builds_results(site, monkeypatch):
    """Read-only, as root sees it too: every write into the store fails with EACCES."""
    import livecells.store.files

    def refuse(*args, **kwargs):
        raise PermissionError(13, "Permission denied", str(site / "_livecells"))

    monkeypatch.setattr(livecells.store.files.OutputStore, "_write", refuse)
    app, warnings = build_site(site, kernels=FakeKernels(), freshenv=True)
    assert any("Permission denied" in w and "not stored" in w for w in warnings_of(warnings, "store")), warnings
    assert "first" in outputs(cell_with(page(app), 'print("first")'))
    assert "beta cell" in outputs(cell_with(page(app), "beta cell"))


# -- found by the outsider reproducers (issue 12) ---------------------------------------------------


def test_8bit_escape_sequences_are_removed_whole():
    """C1 forms arrive as U+0080-U+009F: CSI 0x9b left "31m" as text; OSC 0x9d its title."""
    text = "a\x9b31mred\x9b0m b \x9d0;title\x9c c \x90q\x07 d"
    assert strip_ansi(text) == "ared b  c  d"
    assert ansi_to_html(text).startswith('a<span class="ansi-red-fg">red</span>')
    assert "31m" not in ansi_to_html(text) and "title" not in ansi_to_html(text)
    # A lone 8-bit string control (mis-decoded UTF-8: "ß" read as Latin-1) eats nothing after it.
    assert strip_ansi("Stra\xc3\x9fe und mehr") == "Stra\xc3e und mehr"


@pytest.mark.slow
def test_a_fifo_where_a_store_file_should_be_is_a_warning_not_a_hang(site):
    """Reading a FIFO blocks until someone writes to it: the build (and the report) hung forever."""
    path = site / "_livecells" / "index.json"
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    env = {**os.environ, "PYTHONPATH": EXT}
    done = subprocess.run([sys.executable, "-m", "sphinx", "-b", "html", "-q", "-E", "-D", "livecells_execute=cache",
                           str(site), str(site.parent / "out")], capture_output=True, text=True, env=env, timeout=timing.PROCESS)
    assert done.returncode == 0, done.stderr
    assert str(path) in done.stderr and "not a regular file" in done.stderr and "Traceback" not in done.stderr
    assert "other page\") out" in outputs(cell_with(soup(site.parent / "out" / "other.html"), "other page"))
    done = subprocess.run([sys.executable, "-m", "livecells", "report", "-s", str(site)],
                          capture_output=True, text=True, env=env, timeout=timing.PROCESS)
    # Not a hang; and what it cannot read counts as not run, as in a build (exit status 1).
    assert done.returncode == 1 and "not a regular file" in done.stderr


@pytest.mark.parametrize("entry", [
    [1], "x", {"proof": "p", "sources": ["a"], "info": {}}, {"proof": "p", "sources": {}},
    {"proof": "p", "sources": {"site_dirs": "abc"}, "info": {}}, {"proof": 5, "sources": {}, "info": {}},
    {"proof": "p", "sources": {"kernel_json": 3}, "info": {}},
])
def test_a_damaged_fingerprint_cache_is_recomputed(tmp_path, entry, monkeypatch):
    import livecells.execute.environment as environment
    from livecells.model.frameworks import FrameworkSpec

    framework = FrameworkSpec("alpha", "Alpha")
    key = json.dumps([framework.kernel, sorted(framework.preload)])
    cache = tmp_path / "livecells-fingerprints.json"
    cache.write_text(json.dumps({key: entry}))
    fresh = environment.Fingerprint({"python": "3"}, None, {}, "")
    monkeypatch.setattr(environment, "fingerprint", lambda fw: fresh)
    assert environment.cached_fingerprint(cache, framework) is fresh


SCRIPTED_SVG = (
    '<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10">'
    "<script>alert(document.domain)</script><rect width='10' height='10'/></svg>"
)


@pytest.mark.parametrize("allow_html", [False, True])
def test_an_svg_from_a_cell_is_no_file_of_the_site_when_html_is_off(site, allow_html):
    """A file of the site that a reader opens runs its scripts on the site's origin: with HTML
    from cells off, an SVG is only ever an <img> of the page (a data: URI); on, a file as before."""
    sessions = good_sessions()
    svg = {"output_type": "display_data", "data": {"image/svg+xml": SCRIPTED_SVG, "text/plain": "<SVG>"}, "metadata": {}}
    sessions["alpha"]["cells"][0]["outputs"] = [svg]
    write_store(site, "index", sessions)
    app, warnings = cache_build(site, allow_html=allow_html)
    image = cell_with(page(app), 'print("first")').select_one("img.livecells-image")
    files = list((app.outdir / "_images").glob("livecells-*.svg"))
    if allow_html:
        assert len(files) == 1 and image["src"] == f"_images/{files[0].name}"
    else:
        assert files == [] and image["src"].startswith("data:image/svg+xml;base64,")
        assert base64.b64decode(image["src"].split(",", 1)[1]).decode() == SCRIPTED_SVG


@pytest.mark.slow
def test_a_warning_given_while_a_page_is_written_is_given_again_by_an_unchanged_build(site):
    """Math refused by the allowlist is found when the page is written: a build that wrote
    nothing (nothing changed) passed -W while the page still showed the refused math as text."""
    sessions = good_sessions()
    latex = {"output_type": "display_data", "data": {"text/latex": r"$\def\x{1}\x$"}, "metadata": {}}
    sessions["alpha"]["cells"][0]["outputs"] = [latex]
    write_store(site, "index", sessions)
    conf = {"livecells_execute": "cache", "livecells_allow_html": False}
    for fresh in (True, False, False):
        _, warnings = build_site(site, freshenv=fresh, confoverrides=conf)
        assert len([w for w in warnings_of(warnings, "output") if "is not shown as math" in w]) == 1, warnings
