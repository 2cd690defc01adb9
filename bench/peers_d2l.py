"""livecells against MyST-NB and d2lbook on six real d2l sections, one kernel environment for all.

    .venv/bin/python bench/peers_d2l.py [--rounds 3] [--corpus ../shared/d2l-corpus]

The same six sections of *Dive into Deep Learning* (pytorch and mxnet tabs; the d2l-corpus ones
that run on a CPU), built three ways, each cold, as a no-op rebuild and after one PyTorch cell of
one section is edited, in alternating rounds:

- livecells: the corpus RST through ``python -m livecells convert``, default config, fresh store,
  ``sphinx-build -b html``;
- MyST-NB with jupyter-cache (``nb_execution_mode = "cache"``), from the per-framework notebooks
  livecells offers for download (the same code cells, prose as markdown), ``sphinx-build -b html``
  in a venv of its own;
- d2lbook 1.0.3 from d2l-en's markdown, as d2l-en's CI builds: ``d2lbook build eval``,
  ``d2lbook build eval --tab mxnet``, ``d2lbook build html --tab all``.

Every kernel is one kernelspec (``python3``, in a temporary ``JUPYTER_PATH``) that runs this
Python, with the corpus's ``d2l`` package on ``PYTHONPATH`` and one BLAS/OpenMP thread. Each build
is checked from the tool's own records to have run what it should (livecells' store, jupyter-cache's
cache records, d2lbook's evaluated notebooks). Prints the medians and the ratios
livecells ÷ MyST-NB and livecells ÷ d2lbook.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import benchlib
from benchlib import PYTHON, REPO, Run, median, run

SECTIONS = (
    "chapter_preliminaries/linear-algebra",
    "chapter_preliminaries/probability",
    "chapter_linear-regression/synthetic-regression-data",
    "chapter_linear-regression/linear-regression-scratch",
    "chapter_builders-guide/model-construction",
    "chapter_builders-guide/parameters",
)
FRAMEWORKS = ("pytorch", "mxnet")
D2L_EN_COMMIT = "23d7a5aecceee57d1292c56e90cce307f183bb0a"
#: The edited cell: one PyTorch-only cell of model-construction, in every tool's source.
EDIT_PAGE = "chapter_builders-guide/model-construction"
EDIT_ANCHOR = "X = torch.rand(2, 20)"
EDIT_LINE = "edited = 1"
TOOLS = ("livecells", "livecells-warm", "mystnb", "d2lbook")
#: livecells-warm: the same builds with the opt-in livecells_keep_warm (templates outlive a build).
KEEP_WARM = 30
KINDS = ("cold", "noop", "edit")
#: The issue's targets for livecells ÷ MyST-NB, and d2lbook ratios "no worse than" these.
MYSTNB_GOALS = {"cold": 0.35, "noop": 0.50, "edit": 0.60}
D2LBOOK_BEFORE = {"cold": 0.18, "noop": 0.08, "edit": 0.21}
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
SUMMARY = re.compile(r"livecells: (\d+) session\(s\) run")


def edit_text(text: str, where: str) -> str:
    """``text`` with a line added after the one anchor line (same indentation)."""
    lines = text.split("\n")
    hits = [i for i, line in enumerate(lines) if line.strip() == EDIT_ANCHOR]
    if len(hits) != 1:
        raise SystemExit(f"{where}: expected the edit anchor {EDIT_ANCHOR!r} once, found {len(hits)}")
    line = lines[hits[0]]
    lines.insert(hits[0] + 1, line[: len(line) - len(line.lstrip())] + EDIT_LINE)
    return "\n".join(lines)


def executed(nb: dict[str, Any]) -> tuple[int, int, int]:
    """(code cells, cells with an execution count, error outputs) of a notebook."""
    code = [c for c in nb["cells"] if c["cell_type"] == "code"]
    errors = sum(o.get("output_type") == "error" for c in code for o in c.get("outputs", []))
    return len(code), sum(c.get("execution_count") is not None for c in code), errors


class Sources:
    """The three source trees (made once, copied fresh for each cold build) and the environment."""

    def __init__(self, args: argparse.Namespace, work: Path) -> None:
        self.args = args
        self.work = work
        corpus = Path(args.corpus)
        jupyter = work / "jupyter"
        spec = jupyter / "kernels" / "python3"
        spec.mkdir(parents=True)
        (spec / "kernel.json").write_text(json.dumps({
            "argv": [args.kernel_python, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
            "display_name": "Python 3 (shared)", "language": "python",
        }))
        pkg = work / "pythonpath"
        shutil.copytree(corpus / "d2l", pkg / "d2l")
        self.env = {name: "1" for name in THREADS}
        self.env["JUPYTER_PATH"] = str(jupyter)
        self.env["PYTHONPATH"] = os.pathsep.join([str(REPO / "ext"), str(pkg)])
        self.env["PYDEVD_DISABLE_FILE_VALIDATION"] = "1"
        self.livecells = self._livecells(corpus, work / "src-livecells")
        self.mystnb = self._mystnb(work / "src-mystnb")
        self.d2lbook = self._d2lbook(corpus, work / "src-d2lbook")

    def _livecells(self, corpus: Path, out: Path) -> Path:
        raw = self.work / "corpus-rst"
        for section in SECTIONS:
            target = raw / section
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy(corpus / f"{section}.rst", target.with_suffix(".rst"))
            for figure in corpus.glob(f"{section.split('/')[0]}/output_{section.split('/')[1]}_*"):
                shutil.copy(figure, target.parent / figure.name)
        shutil.copytree(corpus / "img", raw / "img")
        run([PYTHON, "-m", "livecells", "convert", str(raw), "-o", str(out)], env=self.env).check("convert")
        (out / "conf.py").write_text('project = "d2l: six sections"\nextensions = ["livecells"]\n')
        toc = "".join(f"   {s}\n" for s in SECTIONS)
        (out / "index.rst").write_text(f"Six d2l sections\n================\n\n.. toctree::\n\n{toc}")
        return out

    def _mystnb(self, out: Path) -> Path:
        # livecells' downloadable per-framework notebooks: written without running anything.
        html = self.work / "notebooks-html"
        run([PYTHON, "-m", "sphinx", "-q", "-b", "html", "-D", "livecells_execute=off",
             str(self.livecells), str(html)], env=self.env).check("notebook export")
        for section in SECTIONS:
            for fw in FRAMEWORKS:
                nb = json.loads((html / "_downloads/livecells" / f"{section}.{fw}.ipynb").read_text())
                for cell in nb["cells"]:
                    if cell["cell_type"] == "code":
                        cell["outputs"], cell["execution_count"] = [], None
                nb["metadata"]["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
                target = out / f"{section}.{fw}.ipynb"
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(json.dumps(nb, indent=1))
        shutil.copytree(self.livecells / "img", out / "img")
        (out / "conf.py").write_text(
            "import os\n"
            'project = "d2l: six sections"\n'
            'extensions = ["myst_nb"]\n'
            'myst_enable_extensions = ["dollarmath", "amsmath"]\n'
            'nb_execution_mode = "cache"\n'
            "nb_execution_timeout = 1200\n"
            'nb_execution_cache_path = os.path.join(os.path.dirname(__file__), "_build", ".jupyter_cache")\n'
            'exclude_patterns = ["_build"]\n'
        )
        toc = "".join(f"   {s}.{fw}\n" for s in SECTIONS for fw in FRAMEWORKS)
        (out / "index.rst").write_text(f"Six d2l sections\n================\n\n.. toctree::\n\n{toc}")
        return out

    def _d2lbook(self, corpus: Path, out: Path) -> Path:
        git = ["git", "--git-dir", self.args.d2l_en_git, "show"]

        def show(path: str) -> bytes:
            return subprocess.run([*git, f"{D2L_EN_COMMIT}:{path}"], capture_output=True, check=True).stdout

        images = set()
        for section in SECTIONS:
            text = show(f"{section}.md")
            (out / section).parent.mkdir(parents=True, exist_ok=True)
            (out / f"{section}.md").write_bytes(text)
            images.update(re.findall(r"\.\./(img/[A-Za-z0-9_.-]+)", text.decode()))
        for path in sorted(images) + ["d2l.bib", "setup.py", "static/d2l.css", "static/favicon.png",
                                      "static/logo-with-text.png", "static/logo.png"]:
            (out / path).parent.mkdir(parents=True, exist_ok=True)
            (out / path).write_bytes(show(path))
        shutil.copytree(corpus / "d2l", out / "d2l")  # the corpus's d2l (torchvision import patched)
        shutil.copy(corpus / "_make/logs/config.ini", out / "config.ini")  # pytorch, mxnet tabs
        toc = "\n".join(SECTIONS)
        (out / "index.md").write_text(f"Six d2l sections\n================\n\n```toc\n:maxdepth: 1\n\n{toc}\n```\n")
        return out

    # -- the builds ---------------------------------------------------------------------------

    def build(self, tool: str, src: Path) -> tuple[float, list[Run]]:
        env = dict(self.env)
        if tool.startswith("livecells"):
            # Not -q: the summary line says how many sessions ran.
            warm = ["-D", f"livecells_keep_warm={KEEP_WARM}"] if tool == "livecells-warm" else []
            runs = [run([PYTHON, "-m", "sphinx", "-b", "html", *warm, str(src), str(src / "_build/html")],
                        env=env, timeout=self.args.timeout)]
        elif tool == "mystnb":
            python = str(Path(self.args.mystnb_venv) / "bin/python")
            runs = [run([python, "-m", "sphinx", "-q", "-b", "html", str(src), str(src / "_build/html")],
                        env=env, timeout=self.args.timeout)]
        else:
            venv = Path(self.args.d2lbook_venv) / "bin"
            env["PATH"] = f"{venv}{os.pathsep}{os.environ['PATH']}"
            d2lbook = str(venv / "d2lbook")
            runs = []
            for step in (["build", "eval"], ["build", "eval", "--tab", "mxnet"], ["build", "html", "--tab", "all"]):
                if step[1] == "html" and self.args.d2lbook_pythonpath:  # no kernel runs in this step
                    env["PYTHONPATH"] = os.pathsep.join([self.args.d2lbook_pythonpath, self.env["PYTHONPATH"]])
                runs.append(run([d2lbook, *step], cwd=src, env=env, timeout=self.args.timeout))
                if runs[-1].returncode:
                    break
        for result in runs:
            result.check(f"{tool} build")
        return sum(r.seconds for r in runs), runs

    def edit(self, tool: str, src: Path) -> None:
        if tool == "mystnb":
            path = src / f"{EDIT_PAGE}.pytorch.ipynb"
            nb = json.loads(path.read_text())
            hits = [c for c in nb["cells"] if c["cell_type"] == "code" and EDIT_ANCHOR in "".join(c["source"])]
            if len(hits) != 1:
                raise SystemExit(f"{path}: expected one cell with the edit anchor, found {len(hits)}")
            hits[0]["source"] = edit_text("".join(hits[0]["source"]), str(path))
            path.write_text(json.dumps(nb, indent=1))
        else:
            path = src / f"{EDIT_PAGE}.{'md' if tool == 'd2lbook' else 'rst'}"
            path.write_text(edit_text(path.read_text(), str(path)))

    # -- what each build ran, from the tool's own records ------------------------------------

    def state(self, tool: str, src: Path) -> dict[str, Any]:
        """Per session/notebook: an id that changes when it runs again, and its cell counts."""
        found: dict[str, Any] = {}
        if tool.startswith("livecells"):
            for path in sorted((src / "_livecells").rglob("*.json")):
                data = json.loads(path.read_text())
                for fw, rec in data.get("sessions", {}).items():
                    cells = rec.get("cells") or []
                    found[f"{path.relative_to(src / '_livecells').with_suffix('')}/{fw}"] = (
                        rec.get("run_id"), len(cells), sum(c["status"] == "ok" for c in cells),
                        rec.get("status"),
                    )
        elif tool == "mystnb":
            script = (
                "import json, sys\nfrom jupyter_cache import get_cache\n"
                "cache = get_cache(sys.argv[1]); out = {}\n"
                "for r in cache.list_cache_records():\n"
                "    nb = cache.get_cache_bundle(r.pk).nb\n"
                "    code = [c for c in nb.cells if c.cell_type == 'code']\n"
                "    err = sum(o.get('output_type') == 'error' for c in code for o in c.get('outputs', []))\n"
                "    ran = sum(c.get('execution_count') is not None for c in code)\n"
                "    out[r.uri] = [r.pk, len(code), ran, 'error' if err else 'ok']\n"
                "print(json.dumps(out))\n"
            )
            cache = src / "_build/.jupyter_cache"
            if cache.exists():
                result = run([str(Path(self.args.mystnb_venv) / "bin/python"), "-c", script, str(cache)],
                             env=self.env).check("reading jupyter-cache")
                found = {str(Path(k).relative_to(src)): tuple(v) for k, v in json.loads(result.stdout).items()}
        else:
            for folder in ("eval", "eval_mxnet"):
                for path in sorted((src / "_build" / folder).rglob("*.ipynb")):
                    if path.stat().st_size == 0 or ".ipynb_checkpoints" in path.parts:
                        continue
                    code, ran, errors = executed(json.loads(path.read_text()))
                    if not code:  # the index page
                        continue
                    found[f"{folder}/{path.relative_to(src / '_build' / folder)}"] = (
                        path.stat().st_mtime_ns, code, ran, "error" if errors else "ok",
                    )
        return found


def check_runs(tool: str, kind: str, before: dict, after: dict, runs: list[Run]) -> dict[str, Any]:
    """What the build ran (sessions or notebooks whose id changed); raise if it is not right."""
    ran = sorted(k for k, v in after.items() if before.get(k, (None,))[0] != v[0])
    cells = sum(after[k][2] for k in ran)
    bad = [k for k in ran if after[k][3] != "ok" or after[k][2] != after[k][1]]
    expected = {"cold": len(SECTIONS) * len(FRAMEWORKS), "noop": 0}.get(kind)
    problem = ""
    if bad:
        problem = f"not every cell ran without error in {bad}"
    elif expected is not None and len(ran) != expected:
        problem = f"ran {len(ran)} sessions/notebooks, expected {expected}: {ran}"
    elif kind == "edit" and not any(EDIT_PAGE in k and ("pytorch" in k or k.startswith("eval/")) for k in ran):
        problem = f"the edited page's pytorch session/notebook did not run: {ran}"
    elif kind == "edit" and tool != "d2lbook" and len(ran) != 1:
        problem = f"ran {len(ran)} sessions/notebooks after one cell was edited: {ran}"
    if tool.startswith("livecells"):
        match = SUMMARY.search("".join(r.stdout + r.stderr for r in runs))
        if match is None or int(match.group(1)) != len(ran):
            problem = problem or f"summary line says {match and match.group(1)}, store says {len(ran)}"
    if problem:
        raise SystemExit(f"{tool} {kind}: {problem}")
    return {"ran": ran, "cells": cells, "warnings": sum(len(r.warnings) for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--corpus", default=str(REPO.parent / "shared/d2l-corpus"))
    parser.add_argument("--d2l-en-git", default="/work/.mirror/d2l-ai+d2l-en/repo",
                        help=f"git dir of a d2l-en clone holding commit {D2L_EN_COMMIT[:8]}")
    parser.add_argument("--d2lbook-venv", default="/work/venvs/d2lbook", help="a venv with d2lbook==1.0.3")
    parser.add_argument("--d2lbook-pythonpath", default="/work/venvs/d2lbook-pybtex",
                        help="put first on PYTHONPATH for 'd2lbook build html' only: pybtex 0.24, which "
                        "d2lbook's sphinxcontrib-bibtex 2.4.2 needs ('' for none)")
    parser.add_argument("--mystnb-venv", default="/work/venvs/mystnb", help="a venv with myst-nb, jupyter-cache")
    parser.add_argument("--kernel-python", default=sys.executable, help="the Python every kernel runs")
    parser.add_argument("--skip", action="append", default=[], choices=TOOLS)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--json")
    args = parser.parse_args()
    info = benchlib.machine()
    print(benchlib.describe(info), flush=True)
    tools = [t for t in TOOLS if t not in args.skip]
    work = Path(tempfile.mkdtemp(prefix="peers-d2l-"))
    times: dict[str, dict[str, list[float]]] = {t: {k: [] for k in KINDS} for t in tools}
    records: list[dict[str, Any]] = []
    try:
        sources = Sources(args, work)
        for n in range(args.rounds):
            order = tools[n % len(tools):] + tools[: n % len(tools)]
            print(f"round {n + 1}: {', '.join(order)}", flush=True)
            for tool in order:
                src = work / "build" / tool
                if src.exists():
                    shutil.rmtree(src)
                shutil.copytree(getattr(sources, tool.split("-")[0]), src)
                for kind in KINDS:
                    if kind == "edit":
                        sources.edit(tool, src)
                        time.sleep(1)  # mtimes that every tool sees as newer
                    before = sources.state(tool, src)
                    seconds, runs = sources.build(tool, src)
                    ran = check_runs(tool, kind, before, sources.state(tool, src), runs)
                    times[tool][kind].append(seconds)
                    records.append({"round": n + 1, "tool": tool, "kind": kind, "seconds": seconds, **ran})
                    leftovers = [x for r in runs for x in r.leftovers]
                    print(f"  {tool} {kind}: {seconds:.2f} s, {len(ran['ran'])} run ({ran['cells']} cells)"
                          + (f"; LEFT RUNNING (ended): {leftovers}" if leftovers else ""), flush=True)
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    medians = {t: {k: median(v) for k, v in times[t].items()} for t in tools}
    print()
    print(benchlib.table([[t, *(medians[t][k] for k in KINDS)] for t in tools], ["median s", *KINDS]))
    ratios: dict[str, dict[str, float]] = {}
    rows = []
    for ours in ("livecells", "livecells-warm"):
        for peer, goals in (("mystnb", MYSTNB_GOALS), ("d2lbook", D2LBOOK_BEFORE)):
            if ours not in tools or peer not in tools:
                continue
            ratios[f"{ours}/{peer}"] = {k: medians[ours][k] / medians[peer][k] for k in KINDS}
            for k in KINDS:
                value = ratios[f"{ours}/{peer}"][k]
                goal = "goal" if peer == "mystnb" else "before"
                rows.append([f"{ours} / {peer}", k, value, f"{goal} {goals[k]}", benchlib.verdict(value, goals[k])])
    if rows:
        print()
        print(benchlib.table(rows, ["ratio", "build", "value", "target", "verdict"]))
    benchlib.write_json(args.json, {"machine": info, "times": times, "medians": medians,
                                    "ratios": ratios, "runs": records})


if __name__ == "__main__":
    main()
