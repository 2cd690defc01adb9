"""The oracle test: the corpus in tests/data/oracle/cells.py through nbclient and through livecells.

nbclient is Jupyter's own executor; what it stores for a cell is what a notebook stores, and
what JupyterLab shows for that is its outputs after JupyterLab's output area has joined streams
and applied ``\\r`` and ``\\b`` (:func:`livecells.model.streams.shown_outputs` does what it does; that
module's tests check it rule by rule). Each cell is compared twice:

* **stored**: the outputs in livecells' store file against nbclient's, as JupyterLab would save
  them (streams joined and processed);
* **shown**: the text of each output on the HTML page against what JupyterLab shows for
  nbclient's outputs: stream and traceback text as the browser shows the ``<pre>`` (its line
  breaks), HTML and Markdown as their rendered text, math as its TeX, images as images, JSON as
  its value.

What may differ, and why, is listed once, in :data:`KNOWN`. One HTML build runs the corpus; a
LaTeX build from the store (no kernel) checks the LaTeX side.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import textwrap
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import nbformat
import pytest
from bs4 import BeautifulSoup
from nbclient import NotebookClient

from livecells.model.streams import shown_outputs
from livecells.model.text import strip_ansi

import timing
from helpers import build_site, built_page, cells
from paths import DATA

CORPUS = DATA / "oracle" / "cells.py"
FRAMEWORKS = ("pytorch", "mxnet")

_IPYKERNEL_FILE = re.compile(r"/tmp/ipykernel_\d+/\d+\.py")
_TIMES = re.compile(r"\d+(\.\d+)?\s*(ns|\u00b5s|\u03bcs|us|ms|s)(?!\w)")


def _svg_placeholder(output: dict[str, Any]) -> dict[str, Any]:
    data = output.get("data", {})
    if "image/svg+xml" in data:
        data = {**data, "image/svg+xml": "<svg>"}
    return {**output, "data": data}


def _by_stream_name(items: list[Any]) -> list[Any]:
    """Outputs, or what the page shows, with each stream's text joined (and nothing else).

    What the page shows has lost, per block, whether the block ended in a newline (its line
    breaks are what is compared): there the lines are compared without their breaks.
    """
    joined: dict[str, str] = {}
    for item in items:
        name, text = (item.get("name"), item.get("text")) if isinstance(item, dict) else item
        joined[name] = joined.get(name, "") + (text if isinstance(item, dict) else text.replace("\n", ""))
    return sorted(joined.items())


#: Known differences between Jupyter (nbclient, JupyterLab) and livecells, by cell name: why, and
#: how both sides' outputs are normalised (one output at a time, or the cell's list of outputs,
#: or of what the page shows) before they are compared. Nothing else may differ.
KNOWN: dict[str, tuple[str, Callable[[dict[str, Any]], dict[str, Any]]]] = {
    "magic-timeit": (
        "a timing: the numbers differ from run to run",
        lambda o: {**o, "text": _TIMES.sub("T", o["text"])} if "text" in o else o,
    ),
    "warning": (
        "the warning names the cell's file, /tmp/ipykernel_<kernel pid>/<hash>.py: another pid",
        lambda o: {**o, "text": _IPYKERNEL_FILE.sub("CELL.py", o["text"])} if "text" in o else o,
    ),
    **{
        name: ("matplotlib writes the date and random ids into an SVG: the bytes differ", _svg_placeholder)
        for name in ("matplotlib-svg", "d2l-animator", "d2l-progress-board")
    },
}
def _stream_characters(items: list[Any]) -> list[Any]:
    """Each stream's characters, in no order (and without line breaks, as :func:`_by_stream_name`)."""
    return [(name, sorted(text.replace("\n", ""))) for name, text in _by_stream_name(items)]


def _stream_characters_but_fd(items: list[Any]) -> list[Any]:
    """:func:`_stream_characters`, less the text the cell wrote to fd 1 ("fd")."""
    return [(name, sorted(text.replace("\n", "").replace("fd", ""))) for name, text in _by_stream_name(items)]


def _without_fd_lines(items: list[Any]) -> list[Any]:
    """The streams, less the lines that the cell wrote to fds 1 and 2 ("fd one", "fd two"...)."""
    kept = []
    for name, text in _by_stream_name(items):
        rest = "".join(line for line in text.splitlines(keepends=True) if not line.startswith("fd "))
        if rest:
            kept.append((name, rest))
    return kept


LIST_KNOWN: dict[str, tuple[str, Callable[[list[Any]], list[Any]]]] = {
    "mx-flood": (
        "where interleaved stdout and stderr split into outputs depends on when ipykernel flushes",
        _by_stream_name,
    ),
    "fd-and-print": (
        "ipykernel's thread that reads fd 1 races the cell's own sys.stdout writes: in Jupyter too "
        "the text comes out as 'fd\\npy\\n', 'py\\nfd\\n' or 'pyfd\\n\\n' from run to run; and "
        "on a loaded machine Jupyter's fd text can come after the cell went idle (shown under a "
        "later cell, or nowhere), which livecells' drain prevents: compared without it, and "
        "livecells' own cell must hold it (test_fd_output_stays_in_its_cell)",
        _stream_characters_but_fd,
    ),
    **{
        name: (
            "Jupyter's fd text comes late or not at all on a loaded machine (as for fd-and-print): "
            "compared without it, and livecells' own cell must hold it (test_fd_output_stays_in_its_cell)",
            _without_fd_lines,
        )
        for name in ("fd-write-stdout", "fd-write-stderr")
    },
}


@dataclass
class Cell:
    framework: str
    name: str
    code: str
    raises: bool


def corpus() -> list[Cell]:
    found: list[Cell] = []
    for block in re.split(r"^# %% ", CORPUS.read_text(), flags=re.M)[1:]:
        header, _, code = block.partition("\n")
        framework, name, *flags = header.split()
        found.append(Cell(framework, name, code.strip("\n"), "raises" in flags))
    return found


def page_source(framework: str, cells_: list[Cell]) -> str:
    parts = [f"{framework}\n{'=' * len(framework)}\n"]
    for cell in cells_:
        options = "   :raises:\n" if cell.raises else ""
        parts.append(f"Cell {cell.name}.\n\n.. live-cell:: {framework}\n{options}\n{textwrap.indent(cell.code, '   ')}\n")
    return "\n".join(parts)


def run_nbclient(cells_: list[Cell], cwd: Path) -> list[list[dict[str, Any]]]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c.code) for c in cells_])
    # ipykernel stops capturing fds 1 and 2 under pytest; a notebook kernel is not under pytest.
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
    NotebookClient(
        notebook, kernel_name="python3", timeout=timing.ORACLE_CELL, allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    ).execute(env=env)
    return [[json.loads(json.dumps(o)) for o in cell.outputs] for cell in notebook.cells]


def _without_late_fd(cells_: list[Cell], outputs: list[list[dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Jupyter's outputs, less the "fd" line that cell fd-and-print wrote to fd 1 where Jupyter
    shows it under a later cell: ipykernel's fd reader can pass it on after that cell went idle,
    on a loaded machine (see LIST_KNOWN; livecells' drain keeps it in its own cell)."""
    names = [c.name for c in cells_]
    if "fd-and-print" not in names:
        return outputs
    cleaned = [list(o) for o in outputs]
    for i in range(names.index("fd-and-print") + 1, len(cells_)):
        for j, output in enumerate(cleaned[i]):
            if output.get("name") == "stdout" and output.get("text", "").startswith("fd\n"):
                cleaned[i][j] = {**output, "text": output["text"][len("fd\n"):]}
                cleaned[i] = [o for o in cleaned[i] if not (o.get("name") == "stdout" and o.get("text") == "")]
                return cleaned
    return cleaned


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, rootdir):
    src = tmp_path_factory.mktemp("oracle") / "src"
    shutil.copytree(rootdir / "test-oracle", src)
    by_framework = {fw: [c for c in corpus() if c.framework == fw] for fw in FRAMEWORKS}
    for framework, cells_ in by_framework.items():
        (src / f"{framework}.rst").write_text(page_source(framework, cells_))
    (src / "index.rst").write_text("Oracle\n======\n\n.. toctree::\n\n   pytorch\n   mxnet\n")
    work = tmp_path_factory.mktemp("nbclient")
    # Jupyter's run goes on in a thread while livecells builds: the two kernels share the cores.
    with ThreadPoolExecutor(1) as pool:
        running = pool.submit(lambda: {fw: run_nbclient(cells_, work) for fw, cells_ in by_framework.items()})
        app, warnings = build_site(src)
        latex, latex_warnings = build_site(src, "latex", confoverrides={"livecells_execute": "cache"})
        jupyter = {fw: _without_late_fd(by_framework[fw], outputs) for fw, outputs in running.result().items()}
    return {
        "src": src, "app": app, "out": Path(app.outdir), "latex": Path(latex.outdir), "cells": by_framework,
        "jupyter": jupyter, "warnings": warnings + latex_warnings,
    }


def test_the_corpus_is_large_enough():
    found = corpus()
    assert len(found) >= 60 and len({c.name for c in found}) == len(found)


# -- stored outputs ---------------------------------------------------------------------------

LIVECELLS_KEYS = ("truncated", "livecells_refused", "livecells_note")


def stored_form(outputs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    """Outputs as JupyterLab would save them, with the cell's known differences normalised."""
    normalise = KNOWN.get(name, ("", lambda o: o))[1]
    kept = []
    for output in shown_outputs(outputs):
        output = {k: v for k, v in output.items() if k not in LIVECELLS_KEYS and k != "transient"}
        if isinstance(output.get("text"), list):
            output["text"] = "".join(output["text"])
        kept.append(normalise(output))
    return LIST_KNOWN.get(name, ("", lambda o: o))[1](kept)


def stored_cells(oracle, framework: str) -> list[dict[str, Any]]:
    record = json.loads((oracle["src"] / "_livecells" / f"{framework}.json").read_text())
    return sorted(record["sessions"][framework]["cells"], key=lambda c: c["index"])


@pytest.mark.kernel
@pytest.mark.frameworks
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_stored_outputs_match_jupyter(oracle, framework):
    stored = stored_cells(oracle, framework)
    differ = []
    for cell, result, expected in zip(oracle["cells"][framework], stored, oracle["jupyter"][framework]):
        ours, theirs = stored_form(result["outputs"], cell.name), stored_form(expected, cell.name)
        if ours != theirs:
            differ.append(f"{cell.name}:\n  livecells: {ours!r}\n  jupyter:   {theirs!r}")
    assert len(stored) == len(oracle["cells"][framework])
    assert not differ, "\n".join(differ)


# -- what the page shows ----------------------------------------------------------------------

JUPYTERLAB_ORDER = (
    "text/html", "text/markdown", "text/latex", "image/svg+xml", "image/png", "image/jpeg",
    "image/gif", "application/json", "text/plain",
)
_MATH_DELIMITERS = re.compile(r"\$\$|\$|\\\[|\\\]|\\\(|\\\)")


def _words(text: str) -> str:
    """Rendered text, its math as its TeX (MathJax shows ``$x$`` and ``\\(x\\)`` alike)."""
    return " ".join(_MATH_DELIMITERS.sub("", text).split())


def _tex(text: str) -> str:
    return "".join(_MATH_DELIMITERS.sub("", text).split())


def _lines(text: str) -> str:
    """Text as a ``<pre>`` shows it: no line after its last newline."""
    return text[:-1] if text.endswith("\n") else text


def jupyterlab_shows(outputs: list[dict[str, Any]], name: str) -> list[tuple[str, Any]]:
    from markdown_it import MarkdownIt

    normalise = KNOWN.get(name, ("", lambda o: o))[1]
    shown: list[tuple[str, Any]] = []
    for output in shown_outputs(outputs):
        output = normalise(output)
        kind = output["output_type"]
        if kind == "stream":  # JupyterLab shows ANSI colours as colours
            shown.append((output["name"], _lines(strip_ansi(output["text"]))))
        elif kind == "error":
            shown.append(("text", _lines(strip_ansi("\n".join(output["traceback"])))))
        else:
            data = output["data"]
            mime = next(m for m in JUPYTERLAB_ORDER if m in data)
            value = data[mime]
            if mime == "text/html":
                shown.append(("html", _words(BeautifulSoup(value, "html.parser").get_text())))
            elif mime == "text/markdown":
                # JupyterLab's Markdown is GitHub's (marked, gfm): tables and strikethrough too.
                html = MarkdownIt("commonmark").enable(["table", "strikethrough"]).render(value)
                shown.append(("html", _words(BeautifulSoup(html, "html.parser").get_text())))
            elif mime == "text/latex":
                shown.append(("math", _tex(value)))
            elif mime.startswith("image/"):
                shown.append(("image", mime))
            elif mime == "application/json":
                shown.append(("json", value))
            else:
                shown.append(("text", _lines(value)))
    return LIST_KNOWN.get(name, ("", lambda o: o))[1](shown)


def page_shows(cell, out: Path, page: Path, name: str) -> list[tuple[str, Any]]:
    normalise = KNOWN.get(name, ("", lambda o: o))[1]
    shown: list[tuple[str, Any]] = []
    for node in cell.select(".livecells-output"):
        classes = node.get("class", [])
        if "livecells-html" in classes or "livecells-markdown" in classes:
            shown.append(("html", _words(node.get_text())))
        elif "livecells-latex" in classes:
            shown.append(("math", _tex(node.get_text())))
        elif "livecells-figure" in classes:
            image = node.find("img")
            assert (page.parent / image["src"]).is_file()
            suffix = Path(image["src"]).suffix
            shown.append(("image", {".svg": "image/svg+xml", ".png": "image/png", ".jpg": "image/jpeg"}[suffix]))
        elif "livecells-json" in classes:
            shown.append(("json", json.loads(node.get_text())))
        else:
            text = node.find("pre").get_text()
            # A browser drops one newline right after <pre>; then no line after the last one.
            text = text[1:] if text.startswith("\n") else text
            stream = next((n for n in ("stdout", "stderr") if f"livecells-{n}" in classes), "text")
            shown.append((stream, _lines(normalise({"text": text})["text"])))
    return LIST_KNOWN.get(name, ("", lambda o: o))[1](shown)


@pytest.mark.kernel
@pytest.mark.frameworks
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_pages_show_what_jupyterlab_shows(oracle, framework):
    page_path = oracle["out"] / f"{framework}.html"
    page = built_page(page_path)
    rendered = cells(page)
    assert len(rendered) == len(oracle["cells"][framework])
    differ = []
    for cell, node, expected in zip(oracle["cells"][framework], rendered, oracle["jupyter"][framework]):
        ours = page_shows(node, oracle["out"], page_path, cell.name)
        theirs = jupyterlab_shows(expected, cell.name)
        if ours != theirs:
            differ.append(f"{cell.name}:\n  page:       {ours!r}\n  jupyterlab: {theirs!r}")
    assert not differ, "\n".join(differ)


@pytest.mark.kernel
def test_no_highlighting_or_output_warnings(oracle):
    problems = [
        line for line in oracle["warnings"].splitlines()
        if "lex" in line.lower() or "pygments" in line.lower() or "livecells.output" in line
    ]
    assert not problems, problems


@pytest.mark.kernel
def test_code_is_highlighted_as_ipython(oracle):
    page = built_page(oracle["out"] / "pytorch.html")
    blocks = page.select("div.highlight-ipython3")
    assert len(blocks) == len(oracle["cells"]["pytorch"])
    shell = next(b for b in blocks if "hi from the shell" in b.get_text())
    assert shell.select("span"), "the shell escape is highlighted, not left as plain text"


@pytest.mark.kernel
@pytest.mark.frameworks
def test_latex_gets_native_math_and_formatted_rich_outputs(oracle):
    tex = next(oracle["latex"].glob("*.tex")).read_text()
    assert r"\int_0^1 x\,dx = \frac{1}{2}" in tex
    assert r"\frac{a}{b} + \sqrt{c}" in tex
    assert "A title" in tex and r"\sphinxstylestrong{bold}" in tex
    for kind in ("Markdown", "Latex", "Math", "JSON"):
        assert f"IPython.core.display.{kind} object" not in tex
    # Only an HTML display, which LaTeX cannot show, falls back to its text form (as in nbconvert).
    assert tex.count("IPython.core.display.HTML object") == 2  # HTML() and %%html
    assert "PYGZdq{}c\\PYGZdq{}: \\PYGZdq{}d\\PYGZdq{}" in tex or '"c": "d"' in tex


@pytest.mark.kernel
@pytest.mark.frameworks
def test_a_traceback_over_the_limit_only_in_colour_is_kept_whole(oracle):
    """The limit bounds a traceback as it is shown: without IPython's colours (which make it several times as long)."""
    names = [c.name for c in oracle["cells"]["pytorch"]]
    index = names.index("error-recursion")
    theirs = "\n".join(oracle["jupyter"]["pytorch"][index][-1]["traceback"])
    ours = "\n".join(stored_cells(oracle, "pytorch")[index]["outputs"][-1]["traceback"])
    limit = oracle["app"].config.livecells_output_limit
    assert len(strip_ansi(theirs)) < limit < len(theirs)
    assert strip_ansi(ours) == strip_ansi(theirs)
    assert "livecells_output_limit" not in ours


@pytest.mark.kernel
@pytest.mark.frameworks
def test_a_flood_of_interleaved_streams_loses_nothing(oracle):
    names = [c.name for c in oracle["cells"]["mxnet"]]
    result = stored_cells(oracle, "mxnet")[names.index("mx-flood")]
    for name, prefix in (("stdout", "out"), ("stderr", "err")):
        text = "".join(o["text"] for o in result["outputs"] if o.get("name") == name)
        assert text == "".join(f"{prefix} {i}\n" for i in range(10_000)), name


@pytest.mark.kernel
@pytest.mark.frameworks
def test_fd_output_stays_in_its_cell(oracle):
    """What a cell writes to fd 1 (C code, os.write) is in that cell's output, whatever the load."""
    names = [c.name for c in oracle["cells"]["pytorch"]]
    result = stored_cells(oracle, "pytorch")[names.index("fd-and-print")]
    text = "".join(o["text"] for o in result["outputs"] if o.get("name") == "stdout")
    # The two writes race (see LIST_KNOWN): in either order, or interleaved, but both in the cell.
    assert sorted(text.replace("\n", "")) == sorted("fdpy") and text.count("\n") == 2, text
    for name, stream, expected in (
        ("fd-write-stdout", "stdout", "fd one\nfd one again\n"), ("fd-write-stderr", "stderr", "fd two\n")
    ):
        result = stored_cells(oracle, "pytorch")[names.index(name)]
        assert "".join(o["text"] for o in result["outputs"] if o.get("name") == stream) == expected, result


# -- rendering units that need no build -------------------------------------------------------


def test_latex_outputs_become_math_nodes():
    from docutils import nodes

    from livecells.render.markup import latex_nodes

    found = latex_nodes(r"Euler: $e^{i\pi} + 1 = 0$ and $$\int x$$ \begin{align}a &= b\end{align} \alpha")
    kinds = [type(n).__name__ for n in found]
    assert kinds == ["paragraph", "math_block", "math_block", "paragraph"]
    assert found[0].next_node(nodes.math).astext() == r"e^{i\pi} + 1 = 0"
    assert found[1].astext() == r"\int x" and not found[1]["nowrap"]
    assert found[2]["nowrap"] and found[2].astext().startswith(r"\begin{align}")
    assert found[3].astext().strip() == r"\alpha"  # no delimiters: text, as MathJax leaves it


def test_markdown_outputs_become_formatted_nodes_without_sections_ids_or_raw_html():
    from docutils import nodes

    from livecells.render.markup import markdown_nodes

    text = "# Title\n\n## Sub\n\n**b** $x$ <script>x()</script>\n\n![alt](local.png)"
    for fmt, allow in (("html", False), ("latex", True)):
        found = markdown_nodes(text, fmt, allow)
        tree = nodes.container("", *found)
        assert not list(tree.findall(nodes.section)) and len(list(tree.findall(nodes.rubric))) == 2
        assert not any(n["ids"] for n in tree.findall(nodes.Element))
        assert not list(tree.findall(nodes.raw)) and "<script>" in tree.astext()
        assert list(tree.findall(nodes.math)) and list(tree.findall(nodes.strong))
    assert not list(nodes.container("", *markdown_nodes(text, "latex", True)).findall(nodes.image))
    fences = nodes.container("", *markdown_nodes("```nosuchlang\nx\n```\n\n```python\ny = 1\n```", "html", True))
    assert [b["language"] for b in fences.findall(nodes.literal_block)] == ["none", "python"]
    raw = nodes.container("", *markdown_nodes(text, "html", True))
    assert [n.astext() for n in raw.findall(nodes.raw)] == ["<script>", "</script>"]


def test_mime_order_follows_jupyterlab_and_allow_html():
    from livecells.model.mime import mime_priority

    html = mime_priority("html", "html")
    assert [mime for mime in html if mime in JUPYTERLAB_ORDER] == list(JUPYTERLAB_ORDER)
    # Only when nothing else is there, as text.
    assert mime_priority("html", "html", html_as_markup=False)[-1] == "text/html"
    latex = mime_priority("latex", "latex")
    assert "text/html" not in latex and "image/svg+xml" not in latex


@pytest.mark.kernel
def test_the_client_never_drops_iopub_messages(tmp_path):
    """ZMQ drops what a SUB socket cannot queue: IOPub's receive limit must be off (a flood of
    40,000 flushed messages lost an eighth of them with the default limit of 1,000)."""
    import asyncio

    import zmq

    from livecells.execute.kernels.session import KernelSession
    from livecells.model.frameworks import FrameworkSpec

    async def run() -> tuple[int, str]:
        async with KernelSession(FrameworkSpec(name="alpha", label="Alpha"), cwd=tmp_path) as kernel:
            result = await kernel.run_cell("print('alive')", timing.CELL)
            return kernel.kc.iopub_channel.socket.getsockopt(zmq.RCVHWM), result.outputs[0]["text"]

    assert asyncio.run(run()) == (0, "alive\n")


def test_markdown_strikethrough_is_struck_in_every_builder_without_raw_markup():
    from docutils import nodes

    from livecells.render.markup import markdown_nodes

    for fmt, allow in (("html", True), ("html", False), ("latex", True)):
        tree = nodes.container("", *markdown_nodes("a ~~b *c*~~ d <s>e</s> ~~f <s>", fmt, allow))
        struck = [n for n in tree.findall(nodes.inline) if "livecells-strike" in n["classes"]]
        assert [n.astext() for n in struck] == ["b c", "e"]
        raw = [n.astext() for n in tree.findall(nodes.raw)]
        assert raw == (["<s>"] if allow and fmt == "html" else []), raw  # an unpaired one: as HTML is
        assert "~~f" in tree.astext()
