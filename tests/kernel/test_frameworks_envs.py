"""TensorFlow and JAX tabs in kernel environments as d2l-en's CI images pin them (TensorFlow
2.12, JAX 0.4.13, matplotlib 3.7.2, the newest ipykernel and IPython), made by
tests/envs/make.sh under ``$LIVECELLS_ENVS`` (default ``~/.cache/livecells-envs``), ~2 GB each.

Each framework's page is built with the migration guide's conf (its kernel, ``preload`` the
framework and ``d2l.<framework>``, forked kernels) and compared cell by cell with nbclient
running the same cells in a fresh kernel of the same environment; so is d2l-en's
linear-regression-scratch chapter (training), converted for each tab. Marked ``frameworks_extra``:
``make test-frameworks`` runs them; ``make test`` does not (making an environment takes
minutes). Where an environment cannot be made, the tests skip and say why.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from concurrent.futures import ThreadPoolExecutor
from io import StringIO
from pathlib import Path
from typing import Any

import nbformat
import pytest
from nbclient import NotebookClient

from livecells.model.streams import shown_outputs

import timing
from helpers import build_site, built_page
from paths import DATA

pytestmark = pytest.mark.frameworks_extra

ENVS = Path(os.environ.get("LIVECELLS_ENVS") or Path.home() / ".cache" / "livecells-envs")
MAKE = ENVS / "make.sh"

FRAMEWORKS = {
    "tensorflow": {
        "folder": "tf",
        "version": "tensorflow 2.12.0",
        "env": ("TF_FORCE_GPU_ALLOW_GROWTH", "true"),
        "cells": [
            "%matplotlib inline\nfrom d2l import tensorflow as d2l\nimport tensorflow as tf",
            "x = tf.range(12, dtype=tf.float32)\nprint(x.numpy())\nx.shape",
            "d2l.plot(x.numpy(), [x.numpy() ** 2], 'x', 'f(x)')",
            "%matplotlib inline\nprint(tf.reduce_sum(x * x).numpy())",
        ],
    },
    "jax": {
        "folder": "jax",
        "version": "jax 0.4.13",
        "env": ("XLA_PYTHON_CLIENT_PREALLOCATE", "false"),
        "cells": [
            "%matplotlib inline\nfrom d2l import jax as d2l\nimport jax\nfrom jax import numpy as jnp",
            "x = jnp.arange(12.0)\nprint(x)\nx.shape",
            "d2l.plot(x, [x ** 2], 'x', 'f(x)')",
            "%matplotlib inline\nprint(jnp.sum(x * x))",
        ],
    },
}

def extra_cells(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """Cells livecells' page runs after those compared with Jupyter, and what each prints: the
    framework's variable reached the kernel; JAX's sync ran after the cells (it waits on every
    live array through jax.block_until_ready, here counted)."""
    cells = [(f"import os\nprint(os.environ.get({spec['env'][0]!r}))", spec["env"][1] + "\n")]
    if spec["env"][0].startswith("XLA"):
        cells += [
            ("_waited = []\n_wait = jax.block_until_ready\n"
             "jax.block_until_ready = lambda x: _waited.append(1) or _wait(x)\ny = x * 2", ""),
            ("print(len(_waited) > 0)", "True\n"),
        ]
    return cells


# TensorFlow's C++ log lines start with a timestamp.
_STAMP = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+")


def kernel_environment(framework: str) -> Path:
    """The framework's environment, made (or found) by tests/envs/make.sh; skip if it cannot be."""
    target = ENVS / FRAMEWORKS[framework]["folder"]
    python = os.environ.get("LIVECELLS_ENV_PYTHON", "python3.11")
    if not (target / ".livecells-env-ok").exists() and shutil.which(python) is None:
        pytest.skip(f"cannot make the {framework} environment: no {python} (set LIVECELLS_ENV_PYTHON)")
    try:
        made = subprocess.run([str(MAKE), framework, str(target)], capture_output=True, text=True, timeout=timing.ENV_BUILD)
    except subprocess.TimeoutExpired:
        pytest.skip(f"cannot make the {framework} environment in {target}: tests/envs/make.sh took over 30 min")
    if made.returncode != 0:
        tail = (made.stderr or made.stdout).strip().splitlines()[-3:]
        pytest.skip(f"cannot make the {framework} environment in {target} (tests/envs/make.sh): {' | '.join(tail)}")
    return target


def run_nbclient(kernel: str, cells: list[str], cwd: Path, env: dict[str, str]) -> list[list[dict[str, Any]]]:
    notebook = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(code) for code in cells])
    NotebookClient(
        notebook, kernel_name=kernel, timeout=timing.ORACLE_CELL, allow_errors=True,
        resources={"metadata": {"path": str(cwd)}},
    ).execute(env=env)
    return [[json.loads(json.dumps(o)) for o in cell.outputs] for cell in notebook.cells]


def comparable(outputs: list[dict[str, Any]]) -> list[Any]:
    """Outputs as JupyterLab shows them (streams joined), figures by kind only (matplotlib
    writes dates and random ids into an SVG), log timestamps blanked."""
    found: list[Any] = []
    for output in shown_outputs(outputs):
        if output["output_type"] == "stream":
            found.append((output["name"], _STAMP.sub("T", output["text"])))
        elif output["output_type"] == "error":
            found.append(("error", output["ename"], output["evalue"]))
        else:
            data = output.get("data", {})
            plain = data.get("text/plain", "")
            found.append((output["output_type"], sorted(data), "" if "<Figure" in plain else plain))
    return found


@pytest.fixture(scope="module", params=list(FRAMEWORKS))
def built(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    framework = request.param
    spec = FRAMEWORKS[framework]
    environment = kernel_environment(framework)
    kernel = f"d2l-{framework}"
    src = tmp_path_factory.mktemp(framework) / "src"
    src.mkdir()
    (src / "conf.py").write_text(
        'extensions = ["livecells"]\n'
        f"livecells_frameworks = {{{framework!r}: {{'kernel': {kernel!r}, "
        f"'preload': [{framework!r}, 'd2l.{framework}']}}}}\n"
        "livecells_timeout = 300\n"
    )
    body = "\n".join(
        f"Cell {i}.\n\n.. live-cell:: {framework}\n\n" + "".join(f"   {line}\n" for line in code.splitlines())
        for i, code in enumerate(spec["cells"] + [code for code, _ in extra_cells(spec)])
    )
    (src / "index.rst").write_text(f"{framework}\n{'=' * len(framework)}\n\n{body}")
    saved = os.environ.get("JUPYTER_PATH")
    os.environ["JUPYTER_PATH"] = str(environment / "share" / "jupyter")
    try:
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        with ThreadPoolExecutor(1) as pool:
            jupyter = pool.submit(run_nbclient, kernel, spec["cells"], tmp_path_factory.mktemp("nb"), env)
            status = StringIO()
            app, warnings = build_site(src, status=status)
            expected = jupyter.result()
    finally:
        if saved is None:
            os.environ.pop("JUPYTER_PATH", None)
        else:
            os.environ["JUPYTER_PATH"] = saved
    record = json.loads((src / "_livecells" / "index.json").read_text())["sessions"][framework]
    return {
        "framework": framework, "spec": spec, "record": record, "jupyter": expected,
        "warnings": warnings, "page": built_page(Path(app.outdir) / "index.html"),
        "status": status.getvalue(),
    }


def test_every_cell_shows_what_jupyter_shows(built: dict[str, Any]) -> None:
    cells = sorted(built["record"]["cells"], key=lambda c: c["index"])
    differ = []
    for i, expected in enumerate(built["jupyter"]):
        ours, theirs = comparable(cells[i]["outputs"]), comparable(expected)
        if ours != theirs:
            differ.append(f"cell {i}:\n  livecells: {ours!r}\n  jupyter:   {theirs!r}")
    assert not differ, "\n".join(differ)
    # The figure made without plt.show() is there (the inline backend's hook is the kernel's).
    assert any(o["output_type"] == "display_data" for o in cells[2]["outputs"])


def test_the_session_is_timed_synced_and_named(built: dict[str, Any]) -> None:
    record, spec = built["record"], built["spec"]
    assert record["status"] == "ok" and "WARNING" not in built["warnings"]
    # Forked from the framework's template (its env is the template's too), d2l left to the kernel.
    assert "start normally" not in built["status"], built["status"]
    assert f"preload 'd2l.{built['framework']}'" in built["status"]
    assert all(c["status"] == "ok" and not c.get("sync_error") for c in record["cells"])
    assert record["provenance"]["device_kind"] == "cpu"
    shown = built["page"].get_text(" ")
    assert spec["version"] in shown and record["provenance"]["device"] in shown
    cells = sorted(record["cells"], key=lambda c: c["index"])[len(spec["cells"]):]
    printed = ["".join(o.get("text", "") for o in cell["outputs"]) for cell in cells]
    assert printed == [expected for _, expected in extra_cells(spec)]


D2L_MD = DATA / "d2l-md"
TRAINING = "chapter_linear-regression/linear-regression-scratch"


def _shape(outputs: list[dict[str, Any]]) -> list[Any]:
    """What a cell shows, but for numbers and pictures that differ from run to run (random
    initial weights, losses): each output's kind, its stream or formats, its error."""
    return [
        (o["output_type"], o.get("name") or o.get("ename") or sorted(o.get("data", {})))
        for o in shown_outputs(outputs)
    ]


@pytest.mark.parametrize("framework", list(FRAMEWORKS))
def test_a_training_chapter_shows_what_jupyter_shows(framework: str, tmp_path: Path) -> None:
    """d2l-en's linear-regression-scratch (Markdown, converted for this one tab), built with the
    migration guide's conf in the framework's environment, against nbclient running the page's
    notebook again in a fresh kernel: training with d2l's Trainer and ProgressBoard (a figure
    redrawn with clear_output), every cell the same kinds of output."""
    from livecells.convert.markdown import convert_markdown

    environment = kernel_environment(framework)
    kernel = f"d2l-{framework}"
    src = tmp_path / "src"
    page = src / f"{TRAINING}.md"
    page.parent.mkdir(parents=True)
    source = D2L_MD / f"{TRAINING}.md"
    page.write_text(convert_markdown(source.read_text(), tabs=[framework], source=str(source)).text)
    (src / "conf.py").write_text(
        'extensions = ["myst_parser", "livecells"]\nmyst_enable_extensions = ["dollarmath"]\n'
        f"livecells_frameworks = {{{framework!r}: {{'kernel': {kernel!r}, "
        f"'preload': [{framework!r}, 'd2l.{framework}']}}}}\n"
        "livecells_timeout = 600\nsuppress_warnings = ['ref', 'myst']\n"
    )
    (src / "index.md").write_text(f"# Book\n\n```{{toctree}}\n{TRAINING}\n```\n")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("JUPYTER_PATH", str(environment / "share" / "jupyter"))
        app, _ = build_site(src)
        ours = nbformat.read(Path(app.outdir) / "_downloads" / "livecells" / f"{TRAINING}.{framework}.ipynb", 4)
        theirs = nbformat.from_dict(json.loads(json.dumps(ours)))
        for cell in theirs.cells:
            if cell.cell_type == "code":
                cell.outputs = []
        env = {k: v for k, v in os.environ.items() if k != "PYTEST_CURRENT_TEST"}
        NotebookClient(
            theirs, kernel_name=kernel, timeout=timing.ORACLE_CELL_FRAMEWORKS, allow_errors=True,
            resources={"metadata": {"path": str(page.parent)}},
        ).execute(env=env)
    pairs = [(a, b) for a, b in zip(ours.cells, theirs.cells) if a.cell_type == "code"]
    differ = [
        f"{a.source[:60]!r}:\n  livecells: {_shape(a.outputs)}\n  jupyter:   {_shape(b.outputs)}"
        for a, b in pairs if _shape(a.outputs) != _shape(b.outputs)
    ]
    assert len(pairs) >= 8 and not differ, "\n".join(differ)
    errors = [o for a, _ in pairs for o in a.outputs if o["output_type"] == "error"]
    assert not errors and any(o["output_type"] == "display_data" for a, _ in pairs for o in a.outputs)
