"""Editing one saved function of the book's ``d2l`` package: which sessions rerun, and whether
the results kept are still what the edited code gives.

``PYTHONPATH=ext .venv/bin/python bench/helper_deps.py [--edit NAME ...] [--chart PNG] [--json PATH]``

The d2l corpus (``../shared/d2l-corpus``: real d2lbook chapters, the real ``d2l`` package) is
converted with ``python -m livecells convert``'s own code into a site whose conf.py says
``livecells_depends = ["d2l/*.py"]`` and preloads ``d2l.torch`` / ``d2l.mxnet`` (as the
migration guide advises), and built twice from cold in two copies, which differ in
``livecells_depends_granularity`` only:

- ``definitions`` (the default): a session's key covers what it reaches of the d2l modules;
- ``files``: every session's key covers every d2l file (what livecells did before; the baseline).

Then, edit by edit (``--edit``, default: all of :data:`EDITS`, each on top of the last), one
``#@save`` function of ``d2l/torch.py`` or ``d2l/mxnet.py`` is edited in both copies and each is
rebuilt: the sessions rerun are counted from the store (a session that ran has the rebuild's run
id). The ``files`` copy reruns every session, so its store then holds what the edited code gives
everywhere: each result the ``definitions`` copy kept is compared with it, cell by cell (status,
error, outputs; not times). To tell a stale result from a cell whose output is random (random
initial weights, sampled data), the ``files`` copy is built once more with ``livecells_execute =
"force"``: a cell whose output was seen to differ between two runs of the same code anywhere in
the script (the two cold builds, each edit's two full reruns) is nondeterministic, and compared by
shape only (status, error name, output types). Two runs can agree by chance (a coin tossed ten
times), which is why every pair counts. Exit status 1 if a kept result differs otherwise. Paths
of the site are compared as ``<src>``; an SVG figure without its date and its random ids.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchlib import REPO, describe, fresh_copy, machine, run, sphinx_build, table, write_json

from livecells.convert.rst import convert_text
from livecells.store import OutputStore

CHAPTERS = [
    "chapter_preliminaries/linear-algebra",
    "chapter_preliminaries/probability",
    "chapter_linear-regression/synthetic-regression-data",
    "chapter_linear-regression/linear-regression-scratch",
    "chapter_builders-guide/model-construction",
    "chapter_builders-guide/parameters",
    "chapter_builders-guide/use-gpu",
]
CONF = """\
extensions = ["livecells", "sphinxcontrib.bibtex"]
project = "d2l corpus"
bibtex_bibfiles = ["d2l.bib"]
suppress_warnings = ["ref", "bibtex"]
livecells_depends = ["d2l/*.py"]
livecells_depends_granularity = {granularity!r}
livecells_timeout = 300
livecells_frameworks = {{
    "pytorch": {{"label": "PyTorch", "preload": ["torch", "d2l.torch"]}},
    "mxnet": {{"label": "MXNet", "preload": ["mxnet", "d2l.mxnet"]}},
}}
"""
#: One saved function each, edited as an author would (most edits add a line, so every later
#: definition of the file moves down). Applied in this order, each on top of the one before.
EDITS = {
    "torch:use_svg_display": (
        "torch",
        "    backend_inline.set_matplotlib_formats('svg')\n",
        "    formats = ('svg',)\n    backend_inline.set_matplotlib_formats(*formats)\n",
    ),
    "torch:SyntheticRegressionData.get_dataloader": (
        "torch",
        "        i = slice(0, self.num_train) if train else slice(self.num_train, None)\n",
        "        start, stop = (0, self.num_train) if train else (self.num_train, None)\n"
        "        i = slice(start, stop)\n",
    ),
    "torch:try_gpu": (
        "torch",
        "    if num_gpus() >= i + 1:\n        return gpu(i)\n    return cpu()\n",
        "    if num_gpus() > i:\n        return gpu(i)\n    return cpu()\n",
    ),
    "mxnet:use_svg_display": (
        "mxnet",
        "    backend_inline.set_matplotlib_formats('svg')\n",
        "    formats = ('svg',)\n    backend_inline.set_matplotlib_formats(*formats)\n",
    ),
}


def corpus() -> Path:
    for base in (REPO.parent, REPO.parent.parent):
        if (base / "shared" / "d2l-corpus" / "README.md").is_file():
            return base / "shared" / "d2l-corpus"
    raise SystemExit("the d2l corpus (shared/d2l-corpus beside the checkout) is not here")


def make_site(source: Path, target: Path, granularity: str) -> Path:
    target.mkdir(parents=True)
    for folder in ("d2l", "img"):
        shutil.copytree(source / folder, target / folder)
    shutil.copy(source / "d2l.bib", target)
    for chapter in CHAPTERS:
        rst = source / f"{chapter}.rst"
        out = target / f"{chapter}.rst"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(convert_text(rst.read_text(encoding="utf-8"), source=str(rst)).text, encoding="utf-8")
        for figure in rst.parent.glob(f"output_{rst.stem}_*"):
            shutil.copy(figure, out.parent)
    (target / "conf.py").write_text(CONF.format(granularity=granularity), encoding="utf-8")
    toctree = "".join(f"   {c}\n" for c in CHAPTERS)
    (target / "index.rst").write_text(f"d2l corpus\n==========\n\n.. toctree::\n\n{toctree}", encoding="utf-8")
    return target


def build(src: Path, what: str, *extra: str) -> float:
    """One build, as a child process (the kernels find ``d2l`` on PYTHONPATH); its seconds."""
    cmd = sphinx_build(src)
    path = os.pathsep.join([str(src), str(REPO / "ext")])  # the kernels import d2l from the site
    done = run([*cmd[:-2], *extra, *cmd[-2:]], env={"PYTHONPATH": path}).check(what)
    if done.leftovers:
        raise SystemExit(f"{what} left processes running: {done.leftovers}")
    return done.seconds


def stored(src: Path) -> dict[tuple[str, str], Any]:
    store = OutputStore(src / "_livecells")
    found = {}
    for chapter in CHAPTERS:
        for framework, record in store.records(chapter).items():
            found[(chapter, framework)] = record
    return found


def _svg(text: str) -> str:
    """An SVG as matplotlib writes it, less what differs between two writes of one figure: its
    date and the ids it draws at random (clip paths, glyphs)."""
    text = re.sub(r"<dc:date>.*?</dc:date>", "", text, flags=re.S)
    ids: dict[str, str] = {}
    for found in re.findall(r'id="([^"]+)"', text):
        ids.setdefault(found, f"id{len(ids)}")
    return re.sub(r'(?<=["#])(' + "|".join(map(re.escape, sorted(ids, key=len, reverse=True))) + r')(?=["\)])',
                  lambda m: ids[m.group(1)], text) if ids else text


def cell_view(cell: Any, root: Path) -> str:
    """What a reader sees of a cell's result: status, error, outputs; not its time."""
    outputs = []
    for output in cell.outputs:
        output = {k: v for k, v in output.items() if k not in {"execution_count", "metadata"}}
        data = dict(output.get("data", {}))
        if "image/svg+xml" in data:
            data["image/svg+xml"] = _svg("".join(data["image/svg+xml"]))
        if data:
            output["data"] = data
        outputs.append(output)
    text = json.dumps([str(cell.status), cell.error, outputs], sort_keys=True)
    return text.replace(str(root), "<src>")


@dataclass
class Round:
    """One edit: the sessions each copy reran, its rebuild's seconds, and per cell kept what the
    per-definition copy shows and what the two full reruns of the edited code gave."""

    edit: str
    rerun: dict[str, list[tuple[str, str]]]
    seconds: dict[str, float]
    #: (session, cell index) -> (kept, first rerun, second rerun), as :func:`cell_view` shows them.
    kept: dict[tuple[tuple[str, str], int], tuple[str, str, str]] = field(default_factory=dict)
    stale: list[str] = field(default_factory=list)
    same: int = 0
    nondeterministic: int = 0


def apply(site: Path, edit: str) -> None:
    module, old, new = EDITS[edit]
    path = site / "d2l" / f"{module}.py"
    text = path.read_text(encoding="utf-8")
    if text.count(old) != 1:
        raise SystemExit(f"the edit {edit} does not apply to d2l/{module}.py")
    path.write_text(text.replace(old, new), encoding="utf-8")


def one_edit(edit: str, fine: Path, whole: Path) -> Round:
    """Edit both copies, rebuild both, rebuild the per-file copy once more with everything forced;
    keep, per cell the per-definition copy kept, what it shows and what the two full reruns gave."""
    before = {"definitions": stored(fine), "files": stored(whole)}
    for site in (fine, whole):
        apply(site, edit)
    seconds = {
        "definitions": build(fine, f"rebuild after {edit}, definitions"),
        "files": build(whole, f"rebuild after {edit}, files"),
    }
    after = {"definitions": stored(fine), "files": stored(whole)}
    build(whole, f"forced rebuild after {edit}", "-D", "livecells_execute=force")
    again = stored(whole)
    sessions = sorted(before["definitions"])
    rerun = {
        kind: sorted(s for s in sessions if after[kind][s].run_id != before[kind][s].run_id)
        for kind in ("definitions", "files")
    }
    found = Round(edit, rerun, seconds)
    for session in sessions:
        if session in rerun["definitions"]:
            continue
        mine, theirs, twice = after["definitions"][session], after["files"][session], again[session]
        if not len(mine.cells) == len(theirs.cells) == len(twice.cells):
            found.stale.append(f"{session}: {len(mine.cells)} cells kept, {len(theirs.cells)} run")
            continue
        for n, cells in enumerate(zip(mine.cells, theirs.cells, twice.cells)):
            kept, once, again_ = (cell_view(c, root) for c, root in zip(cells, (fine, whole, whole)))
            found.kept[(session, n)] = (kept, once, again_)
    return found


def judge(rounds: list[Round], random: set[tuple[tuple[str, str], int]]) -> None:
    """Each kept cell: the same as the reruns, nondeterministic (its output was seen to differ
    between two runs of the same code, anywhere in this script: it is then compared by shape
    only), or stale."""
    for found in rounds:
        for (session, n), (kept, once, twice) in found.kept.items():
            where = f"{session[0]} [{session[1]}] cell {n + 1}"
            if (session, n) in random:
                found.nondeterministic += 1
                if shape(kept) != shape(once):
                    found.stale.append(f"{where} (its shape)")
            elif kept == once:
                found.same += 1
            else:
                found.stale.append(where)


def shape(view: str) -> str:
    """What of a cell's result randomness leaves alone: its status, error name, output types."""
    status, error, outputs = json.loads(view)
    kinds = [[o.get("output_type"), o.get("name"), sorted(o.get("data", {}))] for o in outputs]
    return json.dumps([status, (error or {}).get("ename"), kinds])


def chart(rounds: list[Round], sessions: int, path: str) -> None:
    """Sessions rerun per edit, per definition against per file (matplotlib, PNG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(figsize=(7.5, 3.2), dpi=110)
    names = [r.edit.replace(":", "\n", 1) for r in rounds]
    x = range(len(rounds))
    for shift, kind, label, color in ((-0.2, "files", "per file (before)", "0.7"),
                                      (0.2, "definitions", "per definition", "C0")):
        axes.bar([i + shift for i in x], [len(r.rerun[kind]) for r in rounds], 0.4, label=label, color=color)
    axes.set_xticks(list(x), names, fontsize=7)
    axes.set_ylabel(f"sessions rerun (of {sessions})")
    axes.set_ylim(0, sessions * 1.35)
    axes.set_yticks(range(0, sessions + 1, max(1, sessions // 6)))
    axes.legend(fontsize=8, loc="upper center", ncol=2)
    axes.set_title("Sessions rerun after editing one saved function of d2l", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--edit", nargs="+", choices=list(EDITS), default=list(EDITS),
                        help="the edits, applied in turn (default: all)")
    parser.add_argument("--json", help="also write the figures here")
    parser.add_argument("--chart", metavar="PNG", help="draw the sessions rerun per edit into this file")
    parser.add_argument("--keep", action="store_true", help="keep the work folder")
    args = parser.parse_args()
    source = corpus()
    info = machine()
    print(f"machine: {describe(info)}")
    work = Path(tempfile.mkdtemp(prefix="livecells-helper-deps-"))
    try:
        fine = make_site(source, work / "template-definitions", "definitions")
        whole = make_site(source, work / "template-files", "files")
        fine, whole = fresh_copy(fine, work, "definitions"), fresh_copy(whole, work, "files")
        cold = {"definitions": build(fine, "cold build, definitions"), "files": build(whole, "cold build, files")}
        first = {"definitions": stored(fine), "files": stored(whole)}
        sessions = sorted(first["definitions"])
        # Runs of the same code: the two cold builds, and each round's two reruns.
        random = {
            (session, n)
            for session in sessions
            for n, (a, b) in enumerate(zip(first["definitions"][session].cells, first["files"][session].cells))
            if cell_view(a, fine) != cell_view(b, whole)
        }
        rounds = [one_edit(edit, fine, whole) for edit in args.edit]
        random |= {cell for r in rounds for cell, (_, once, twice) in r.kept.items() if once != twice}
        judge(rounds, random)
    finally:
        if args.keep:
            print(f"work folder kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"\n{len(sessions)} sessions ({len(CHAPTERS)} chapters x pytorch, mxnet, as many as ran: "
          "use-gpu asks for 2 GPUs); cold builds: "
          f"{cold['definitions']:.1f} s (definitions), {cold['files']:.1f} s (files)")
    rows = [
        [r.edit, len(r.rerun["definitions"]), len(r.rerun["files"]), r.seconds["definitions"],
         r.seconds["files"], r.seconds["definitions"] / r.seconds["files"]]
        for r in rounds
    ]
    print(table(rows, ["edit", "rerun (definitions)", "rerun (files)", "rebuild s", "rebuild s (files)", "ratio"]))
    for r in rounds:
        print(f"\n{r.edit}: rerun {', '.join(f'{p} [{f}]' for p, f in r.rerun['definitions']) or 'nothing'}")
        print(f"  kept: {len(r.kept)} cells against two full reruns of the edited code: {r.same} the same, "
              f"{r.nondeterministic} nondeterministic (the same shape: status, error, output types), "
              f"{len(r.stale)} stale")
        for cell in r.stale:
            print(f"    STALE: {cell}")
    print(f"\nnondeterministic cells (outputs seen to differ between two runs of the same code): {len(random)}")
    for (session, n) in sorted(random):
        print(f"  {session[0]} [{session[1]}] cell {n + 1}")
    if args.chart:
        chart(rounds, len(sessions), args.chart)
        print(f"chart written to {args.chart}")
    write_json(args.json, {
        "machine": info, "sessions": len(sessions), "cold_seconds": cold,
        "nondeterministic": sorted(f"{s[0]} [{s[1]}] cell {n + 1}" for s, n in random),
        "rounds": [
            {"edit": r.edit, "rerun": {k: [list(s) for s in v] for k, v in r.rerun.items()}, "seconds": r.seconds,
             "kept_cells": len(r.kept), "same": r.same, "nondeterministic": r.nondeterministic, "stale": r.stale}
            for r in rounds
        ],
    })
    return 1 if any(r.stale for r in rounds) else 0


if __name__ == "__main__":
    sys.exit(main())
