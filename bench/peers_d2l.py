"""livecells against MyST-NB and d2lbook on six real d2l sections, one kernel environment for all,
each at its best, and against the floor of what its cells cost.

    .venv/bin/python bench/peers_d2l.py [--rounds 3] [--jobs 1 2] [--corpus ../shared/d2l-corpus]

The same six sections of *Dive into Deep Learning* (pytorch and mxnet tabs; the d2l-corpus ones
that run on a CPU), built each way, cold, as a no-op rebuild and after one PyTorch cell of one
section is edited, in alternating rounds; the tools that take a parallelism at each ``--jobs`` N:

- livecells: the corpus RST through ``python -m livecells convert``, default config but
  ``livecells_jobs = N`` (sessions at once), fresh store, ``sphinx-build -j N -b html``; and the
  same with the opt-in ``livecells_keep_warm`` (``livecells-warm``);
- MyST-NB with jupyter-cache (``nb_execution_mode = "cache"``), as its users run it, from the
  per-framework notebooks livecells offers for download (the same code cells, prose as markdown),
  ``sphinx-build -j N -b html`` (N notebooks at once: it executes each as Sphinx reads it) in a
  venv of its own;
- execution off (``execoff``): the livecells pages with ``-D livecells_execute=off``,
  ``sphinx-build -j N``: Sphinx's own part of the floor;

and once, with its own parallelism, d2lbook 1.0.3 from d2l-en's markdown as d2l-en's CI builds:
``d2lbook build eval``, ``d2lbook build eval --tab mxnet`` (its scheduler: 2 notebooks at once on
a machine without GPUs), ``d2lbook build html --tab all`` (``sphinx-build -j 4``).

Every kernel is one kernelspec (``python3``, in a temporary ``JUPYTER_PATH``) that runs this
Python, with the corpus's ``d2l`` package on ``PYTHONPATH`` and one BLAS/OpenMP thread. Each build
is checked from the tool's own records to have run what it should (livecells' store and summary
line, jupyter-cache's cache records, d2lbook's evaluated notebooks; execution off: nothing run,
and Sphinx's own count of the pages it read). Each round also times each framework's import in a
fresh Python. Prints the medians, each tool ÷ MyST-NB at the same N, livecells ÷ d2lbook, and
livecells ÷ its floor (``floor.py``): cold ÷ (execution-off cold + the imports + the cells'
in-kernel time as livecells' store records it, on N slots the makespan bound), no-op ÷ the
execution-off no-op, edit ÷ (the edited session's cells + the execution-off rebuild after the same
edit). Every line names each tool's configuration.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import benchlib
import floor
from benchlib import PYTHON, REPO, Run, median, run

from livecells.model.frameworks import DEFAULT_FRAMEWORKS

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
TOOLS = ("livecells", "livecells-warm", "mystnb", "execoff", "d2lbook")
#: The tools built at each --jobs N; d2lbook has its own parallelism (d2l-en's CI's).
PER_JOBS = ("livecells", "livecells-warm", "mystnb", "execoff")
#: livecells-warm: the same builds with the opt-in livecells_keep_warm (templates outlive a build).
KEEP_WARM = 30
KINDS = ("cold", "noop", "edit")
#: Issue #35's targets for livecells ÷ MyST-NB at its best and ÷ the floor (none for the edit's
#: floor), and the d2lbook ratios of its held-out run, which must get no worse.
MYSTNB_GOALS = {"cold": 0.30, "noop": 0.50, "edit": 0.50}
FLOOR_GOALS = {"cold": 1.25, "noop": 1.15}
D2LBOOK_BEFORE = {"cold": 0.16, "noop": 0.09, "edit": 0.15}
THREADS = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS", "NUMEXPR_NUM_THREADS")
#: What each framework's template imports before its sessions fork: the floor's imports.
IMPORTS = {fw: DEFAULT_FRAMEWORKS[fw]["preload"] for fw in FRAMEWORKS}
#: d2lbook 1.0.3 on a machine without GPUs (build.py: num_cpu_workers = 2; sphinx_opts = '-j 4').
D2LBOOK_EVAL_WORKERS = 2
D2LBOOK_SPHINX_JOBS = 4


@dataclass(frozen=True)
class Config:
    """One tool in one configuration: what a row of the figures is."""

    tool: str
    jobs: int | None  # None: d2lbook, with the parallelism of its own

    @property
    def key(self) -> str:
        return self.tool if self.jobs is None else f"{self.tool} -j{self.jobs}"

    @property
    def label(self) -> str:
        """Short, but naming the configuration: the rows and ratio lines use it."""
        n = self.jobs
        return {
            "livecells": f"livecells [livecells_jobs={n}, -j {n}]",
            "livecells-warm": f"livecells [livecells_jobs={n}, keep_warm={KEEP_WARM}, -j {n}]",
            "mystnb": f"MyST-NB [cache, -j {n}]",
            "execoff": f"execution off [livecells_execute=off, -j {n}]",
            "d2lbook": f"d2lbook [CI: eval {D2LBOOK_EVAL_WORKERS} at once x 2 tabs, html -j {D2LBOOK_SPHINX_JOBS}]",
        }[self.tool]

    def describe(self, versions: dict[str, str]) -> str:
        """The whole configuration, for the legend and the JSON."""
        n = self.jobs
        v = versions
        return {
            "livecells": f"livecells {v['livecells']} (Sphinx {v['sphinx']}), defaults but livecells_jobs = {n}; "
                         f"sphinx-build -j {n} -b html",
            "livecells-warm": f"the same with -D livecells_keep_warm={KEEP_WARM}",
            "mystnb": f"MyST-NB {v['myst_nb']} + jupyter-cache {v['jupyter_cache']} (Sphinx {v['mystnb_sphinx']}), "
                      f'nb_execution_mode = "cache"; sphinx-build -j {n} -b html',
            "execoff": f"the livecells pages, -D livecells_execute=off (no kernel); sphinx-build -j {n} -b html",
            "d2lbook": f"d2lbook {v['d2lbook']} as d2l-en's CI: build eval; build eval --tab mxnet "
                       f"({D2LBOOK_EVAL_WORKERS} notebooks at once, its scheduler without GPUs); "
                       f"build html --tab all (sphinx-build -j {D2LBOOK_SPHINX_JOBS})",
        }[self.tool]


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
    """The source trees (made once, copied fresh for each cold build) and the environment."""

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
        # livecells' user cache (its templates' probe answers) of this run alone: the first cold
        # build makes it, later builds read it, as on an author's machine.
        self.env["LIVECELLS_CACHE_DIR"] = str(work / "livecells-cache")
        self.livecells = self._livecells(corpus, work / "src-livecells")
        self.execoff = self.livecells  # the same pages, built with execution off
        self.mystnb = self._mystnb(work / "src-mystnb")
        self.d2lbook = self._d2lbook(corpus, work / "src-d2lbook") if "d2lbook" not in args.skip else None

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

    def build(self, config: Config, src: Path) -> tuple[float, list[Run]]:
        env = dict(self.env)
        tool, jobs = config.tool, ["-j", str(config.jobs)]
        if tool in ("livecells", "livecells-warm", "execoff"):
            # Not -q: the summary line says how many sessions ran, Sphinx how many pages it read.
            extra = {
                "livecells": ["-D", f"livecells_jobs={config.jobs}"],
                "livecells-warm": ["-D", f"livecells_jobs={config.jobs}", "-D", f"livecells_keep_warm={KEEP_WARM}"],
                "execoff": ["-D", "livecells_execute=off"],
            }[tool]
            runs = [run([PYTHON, "-m", "sphinx", "-b", "html", *jobs, *extra, str(src), str(src / "_build/html")],
                        env=env, timeout=self.args.timeout)]
        elif tool == "mystnb":
            python = str(Path(self.args.mystnb_venv) / "bin/python")
            runs = [run([python, "-m", "sphinx", "-q", "-b", "html", *jobs, str(src), str(src / "_build/html")],
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
            if tool == "mystnb" and result.returncode and RACE.search(result.stdout + result.stderr):
                raise PeerRace(f"{RACE.search(result.stdout + result.stderr).group(0)} ({result.seconds:.0f} s)")
            result.check(f"{config.label} build")
        return sum(r.seconds for r in runs), runs

    def versions(self) -> dict[str, str]:
        """The versions every configuration names."""
        import sphinx

        from livecells._version import __version__

        script = ("import importlib.metadata as m, json\n"
                  "print(json.dumps({n: m.version(n) for n in ('myst-nb', 'jupyter-cache', 'sphinx')}))\n")
        mystnb = {"myst-nb": "-", "jupyter-cache": "-", "sphinx": "-"}
        if "mystnb" not in self.args.skip:
            mystnb = json.loads(run([str(Path(self.args.mystnb_venv) / "bin/python"), "-c", script])
                                .check("MyST-NB's versions").stdout)
        found = {"livecells": __version__, "sphinx": sphinx.__version__, "myst_nb": mystnb["myst-nb"],
                 "jupyter_cache": mystnb["jupyter-cache"], "mystnb_sphinx": mystnb["sphinx"], "d2lbook": "-"}
        if self.d2lbook is not None:
            script = "import importlib.metadata as m; print(m.version('d2lbook'))"
            found["d2lbook"] = run([str(Path(self.args.d2lbook_venv) / "bin/python"), "-c", script]
                                   ).check("d2lbook's version").stdout.strip()
        return found

    def edit(self, tool: str, src: Path) -> None:
        """The same one-line edit of the same cell, in the tool's own source."""
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
        if tool in ("livecells", "livecells-warm", "execoff"):
            found = {k: (v.run_id, v.cells, v.ok, v.status) for k, v in floor.stored_sessions(src).items()}
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


class PeerRace(Exception):
    """A MyST-NB build at ``-j N`` that failed by a race of its own, which its users meet too; the
    bench says so and builds that configuration again from a fresh copy. Two are known:
    jupyter_client picks a kernel's TCP ports by binding port 0 and letting go, so two notebooks
    started at once can be given the same ports (jax-ml/jax#36130, Qiskit/qiskit#5904); and two
    Sphinx processes that open a jupyter-cache folder that does not exist yet both create its
    SQLite tables ("table ... already exists", a cold build's first notebooks)."""


#: What nbclient says when a kernel it started never answers, or a kernel that found its port
#: taken; what SQLAlchemy says when jupyter-cache's tables were made by the other process first.
RACE = re.compile(r"Kernel didn't respond in \d+ seconds|Address already in use|Kernel died before replying"
                  r"|table \w+ already exists|database is locked")


def build_all_kinds(sources: Sources, config: Config, work: Path, round_no: int) -> list[dict[str, Any]]:
    """One configuration's cold build from a fresh copy, its no-op rebuild and its edit, checked."""
    src = work / "build" / config.key.replace(" ", "_")
    if src.exists():
        shutil.rmtree(src)
    shutil.copytree(getattr(sources, config.tool.split("-")[0]), src)
    done = []
    for kind in KINDS:
        if kind == "edit":
            sources.edit(config.tool, src)
            time.sleep(1)  # mtimes that every tool sees as newer
        before = sources.state(config.tool, src)
        seconds, runs = sources.build(config, src)
        ran = check_runs(config, kind, before, sources.state(config.tool, src), runs)
        if config.tool.startswith("livecells"):
            ran["session_seconds"] = session_seconds(src, ran["ran"])
        done.append({"round": round_no, "config": config.key, "tool": config.tool, "jobs": config.jobs,
                     "kind": kind, "seconds": seconds, **ran})
        leftovers = [x for r in runs for x in r.leftovers]
        cell_time = f", {sum(ran['session_seconds'].values()):.2f} s in the kernels" if "session_seconds" in ran else ""
        print(f"  {config.label} {kind}: {seconds:.2f} s, {len(ran['ran'])} run ({ran['cells']} cells"
              f"{cell_time})" + (f"; LEFT RUNNING (ended): {leftovers}" if leftovers else ""), flush=True)
    return done


def check_runs(config: Config, kind: str, before: dict, after: dict, runs: list[Run]) -> dict[str, Any]:
    """What the build ran (sessions or notebooks whose id changed); raise if it is not right."""
    tool = config.tool
    output = "".join(r.stdout + r.stderr for r in runs)
    ran = sorted(k for k, v in after.items() if before.get(k, (None,))[0] != v[0])
    cells = sum(after[k][2] for k in ran)
    if tool == "execoff":
        problem = floor.check_execution_off(kind, output, after, len(SECTIONS) + 1)
        if problem:
            raise SystemExit(f"{config.label} {kind}: {problem}")
        return {"ran": [], "cells": 0, "warnings": sum(len(r.warnings) for r in runs)}
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
        counts = floor.summary(output)
        if counts is None or counts[0] != len(ran):
            problem = problem or f"summary line says {counts and counts[0]}, store says {len(ran)}"
    if problem:
        raise SystemExit(f"{config.label} {kind}: {problem}")
    return {"ran": ran, "cells": cells, "warnings": sum(len(r.warnings) for r in runs)}


def session_seconds(src: Path, ran: list[str]) -> dict[str, float]:
    """The in-kernel seconds of each session ``ran``, from livecells' store (the floor's cells)."""
    stored = floor.stored_sessions(src)
    try:
        return {k: stored[k].seconds for k in ran}
    except ValueError as err:
        raise SystemExit(f"{src}: {err}: the store cannot give the floor") from None


def floors(records: list[dict[str, Any]], configs: list[Config], imports: list[dict[str, float]]
           ) -> dict[str, dict[str, Any]]:
    """Per livecells configuration: its floor for each kind, median of the rounds, and the parts."""
    found: dict[str, dict[str, Any]] = {}
    by = {(r["round"], r["config"], r["kind"]): r for r in records}
    for config in configs:
        if not config.tool.startswith("livecells"):
            continue
        off = Config("execoff", config.jobs).key
        parts: dict[str, list[float]] = {k: [] for k in (
            "execoff_cold", "execoff_noop", "execoff_edit", "imports", "cells_total", "longest_session",
            "cells_makespan", "edited_cells", "cold", "noop", "edit")}
        for n, round_imports in enumerate(imports, 1):
            if (n, off, "cold") not in by or (n, config.key, "cold") not in by:
                continue
            cells = list(by[n, config.key, "cold"]["session_seconds"].values())
            edited = sum(by[n, config.key, "edit"]["session_seconds"].values())
            values = {
                "execoff_cold": by[n, off, "cold"]["seconds"], "execoff_noop": by[n, off, "noop"]["seconds"],
                "execoff_edit": by[n, off, "edit"]["seconds"], "imports": sum(round_imports.values()),
                "cells_total": sum(cells), "longest_session": max(cells),
                "cells_makespan": floor.makespan_bound(cells, config.jobs or 1), "edited_cells": edited,
            }
            values["cold"] = values["execoff_cold"] + values["imports"] + values["cells_makespan"]
            values["noop"] = values["execoff_noop"]
            values["edit"] = values["edited_cells"] + values["execoff_edit"]
            for name, value in values.items():
                parts[name].append(value)
        if parts["cold"]:
            found[config.key] = {"rounds": parts, **{k: median(v) for k, v in parts.items()}}
    return found


def floor_label(jobs: int) -> str:
    return f"floor [execution off -j {jobs} + imports + cells on {jobs} slot{'s' if jobs > 1 else ''}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, nargs="+", action="extend", metavar="N",
                        help="parallelism of MyST-NB, livecells and execution off (sphinx-build -j N, "
                        "livecells_jobs = N); repeatable or a list (default: 1)")
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
    parser.add_argument("--attempts", type=int, default=3,
                        help="builds of a configuration (cold, no-op, edit, from a fresh copy) to try when one "
                        "fails by a race of MyST-NB's own at -j N (PeerRace); each failure is reported")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    parser.add_argument("--json")
    args = parser.parse_args()
    jobs = sorted(set(args.jobs or [1]))
    if jobs[0] < 1:
        parser.error("--jobs: each N must be 1 or more")
    info = benchlib.machine()
    print(benchlib.describe(info), flush=True)
    configs = [Config(t, n) for n in jobs for t in PER_JOBS if t not in args.skip]
    configs += [Config("d2lbook", None)] if "d2lbook" not in args.skip else []
    work = Path(tempfile.mkdtemp(prefix="peers-d2l-"))
    times: dict[str, dict[str, list[float]]] = {c.key: {k: [] for k in KINDS} for c in configs}
    records: list[dict[str, Any]] = []
    imports: list[dict[str, float]] = []
    failures: list[dict[str, Any]] = []
    try:
        # Every tool with its bytecode cached, as its users' installs have it (livecells: this tree).
        for python in sorted({str(Path(args.mystnb_venv) / "bin/python"), str(Path(args.d2lbook_venv) / "bin/python"),
                              args.kernel_python, PYTHON}):
            if Path(python).exists():
                also = [REPO / "ext"] if python == PYTHON else []
                print(f"bytecode of {python}'s packages compiled ({benchlib.compile_environment(python, *also):.1f} s)",
                      flush=True)
        sources = Sources(args, work)
        versions = sources.versions()
        print("configurations:")
        for config in configs:
            print(f"  {config.label}: {config.describe(versions)}")
        print(f"  floor: execution off at the same -j, + {' + '.join(m for ms in IMPORTS.values() for m in ms)} "
              "imported once each in a fresh Python, + the cells' in-kernel time from livecells' store "
              "(N slots: max(longest session, total / N))", flush=True)
        for n in range(args.rounds):
            imports.append({module: floor.import_seconds(args.kernel_python, module, sources.env)
                            for modules in IMPORTS.values() for module in modules})
            order = configs[n % len(configs):] + configs[: n % len(configs)]
            print(f"round {n + 1}: imports {', '.join(f'{m} {s:.2f} s' for m, s in imports[-1].items())}; "
                  f"{', '.join(c.key for c in order)}", flush=True)
            for config in order:
                for attempt in range(1, args.attempts + 1):
                    try:
                        done = build_all_kinds(sources, config, work, n + 1)
                        break
                    except PeerRace as race:
                        failures.append({"round": n + 1, "config": config.key, "attempt": attempt, "why": str(race)})
                        again = "again from a fresh copy" if attempt < args.attempts else "no attempt left"
                        print(f"  {config.label}: FAILED, {race}; {again}", flush=True)
                else:
                    raise SystemExit(f"{config.label}: failed {args.attempts} times (--attempts)")
                for record in done:
                    times[config.key][record["kind"]].append(record["seconds"])
                records += done
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(args, info, versions, configs, times, records, imports, failures)


def report(args: argparse.Namespace, info: dict[str, Any], versions: dict[str, str], configs: list[Config],
           times: dict[str, dict[str, list[float]]], records: list[dict[str, Any]],
           imports: list[dict[str, float]], failures: list[dict[str, Any]]) -> None:
    medians = {c.key: {k: median(v) for k, v in times[c.key].items()} for c in configs}
    label = {c.key: c.label for c in configs}
    print()
    print(benchlib.table([[c.label, *(medians[c.key][k] for k in KINDS)] for c in configs],
                         [f"median of {args.rounds} (s)", *KINDS]))
    for config in configs:
        failed = [f for f in failures if f["config"] == config.key]
        if failed:
            print(f"{config.label}: {len(failed)} attempt(s) failed and were built again, not timed: "
                  + "; ".join(f"round {f['round']}: {f['why']}" for f in failed))
    found = floors(records, configs, imports)
    if found:
        print()
        print(benchlib.table(
            [[label[key], f["execoff_cold"], f["imports"], f["cells_total"], f["longest_session"],
              f["cells_makespan"], f["cold"], f["execoff_noop"], f["edited_cells"], f["execoff_edit"], f["edit"]]
             for key, f in found.items()],
            ["floor parts, median (s)", "off cold", "imports", "cells", "longest", "makespan", "= cold",
             "off no-op", "edited cells", "off edit", "= edit"]))
    ratios: dict[str, dict[str, float]] = {}
    rows = []

    def add(ours: Config, theirs: str, name: str | dict[str, str], goals: dict[str, float] | None, word: str,
            denominators: dict[str, float]) -> None:
        ratios[f"{ours.key} / {theirs}"] = {k: medians[ours.key][k] / denominators[k] for k in KINDS}
        for k in KINDS:
            value = ratios[f"{ours.key} / {theirs}"][k]
            goal = (goals or {}).get(k)
            target = f"{word} {goal}" if goal is not None else "-"
            verdict = benchlib.verdict(value, goal) if goal is not None else ""
            rows.append([f"{ours.label} / {name if isinstance(name, str) else name[k]}", k, value, target, verdict])

    keys = {c.key for c in configs}
    for ours in configs:
        if not ours.tool.startswith("livecells"):
            continue
        peer = Config("mystnb", ours.jobs)
        if peer.key in keys:
            add(ours, peer.key, peer.label, MYSTNB_GOALS, "goal", medians[peer.key])
        if "d2lbook" in keys:
            add(ours, "d2lbook", Config("d2lbook", None).label, D2LBOOK_BEFORE, "before", medians["d2lbook"])
        if ours.key in found:
            off = Config("execoff", ours.jobs).label
            names = {"cold": floor_label(ours.jobs or 1), "noop": f"{off} no-op",
                     "edit": f"(edited session's cells + {off} edit)"}
            add(ours, "floor", names, FLOOR_GOALS, "goal", found[ours.key])
    if rows:
        print()
        print(benchlib.table(rows, ["ratio", "build", "value", "target", "verdict"]))
    benchlib.write_json(args.json, {
        "machine": info, "versions": versions, "rounds": args.rounds,
        "configurations": {c.key: {"label": c.label, "tool": c.tool, "jobs": c.jobs, "describe": c.describe(versions)}
                           for c in configs},
        "imports": imports, "failures": failures, "times": times, "medians": medians, "floors": found, "ratios": ratios,
        "runs": records,
    })


if __name__ == "__main__":
    main()
