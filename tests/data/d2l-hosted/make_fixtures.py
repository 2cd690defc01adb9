"""Cuts this folder's fixtures from d2l-en and records the Colab and SageMaker notebooks d2lbook makes of them.

``python make_fixtures.py D2L_EN_CHECKOUT D2LBOOK`` (with livecells' Python or any other), where
the checkout is d2l-ai/d2l-en at the commit below and D2LBOOK is the ``d2lbook`` command of
d2lbook==1.0.3. It writes:

- ``<page>.md`` for each fixture: the listed line ranges of that d2l-en page, joined by a blank
  line, byte for byte otherwise, under the page's own path (so that its ``../img/`` links and its
  name, which d2l-en's settings never name, are d2l's; the images are not copied: where an image
  goes in a notebook rests on its path alone);
- ``config.ini``: d2l-en's own, byte for byte (what ``convert`` reads);
- ``d2lbook.json``: what ``d2lbook build colab sagemaker --tab all`` makes of the fixtures, in a
  scratch copy whose ``config.ini`` is d2l-en's with three changes: ``eval_notebook = False`` (the
  notebooks are not run: no outputs, so nothing to execute), ``notebooks`` naming the fixtures,
  no ``resources``. Per service (``colab``, ``sagemaker``), tab and page: the notebook without
  its cell ids (random), or None where d2lbook writes an empty file (a page without that tab).
  ``PYTHONHASHSEED=0``: d2lbook orders an installation cell's imported libs by a set.
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "23d7a5aecceee57d1292c56e90cce307f183bb0a"
TABS = ["pytorch", "mxnet", "jax", "tensorflow"]
#: page: [(first line, last line), ...] — what each one shows.
FIXTURES = {
    # Every tab; an SVG d2lbook rewrites and one it does not (a "-" in its name); "gpu" in the
    # code of every tab (num_gpus=1; TensorFlow's try_gpu).
    "chapter_convolutional-neural-networks/lenet": [(1, 80), (231, 233), (300, 336)],
    # A PNG (d2lbook rewrites SVGs only) and an SVG, with :width: and :label: lines.
    "chapter_convolutional-modern/alexnet": [(1, 8), (66, 95), (128, 130), (272, 273)],
    # required_libs of one library, PyTorch only.
    "chapter_gaussian-processes/gp-inference": [(1, 8), (49, 61)],
    # required_libs of three, in double quotes; a %matplotlib line in the importing cell.
    "chapter_reinforcement-learning/value-iter": [(1, 8), (100, 120)],
    # JAX imports flax (a lib of its own) and optax (none); MXNet mxnet and d2l.
    "chapter_linear-regression/linear-regression-concise": [(1, 7), (40, 71)],
    # No tab imports d2l: PyTorch's, JAX's and TensorFlow's notebooks get no installation cell.
    "chapter_preliminaries/ndarray": [(1, 7), (65, 85)],
    # "gpu" in PyTorch's code only in a #@save cell.
    "chapter_builders-guide/use-gpu": [(1, 7), (85, 112), (148, 159)],
}


def cut(checkout: Path, here: Path) -> list[str]:
    pages = []
    for page, ranges in FIXTURES.items():
        lines = (checkout / f"{page}.md").read_text(encoding="utf-8").split("\n")
        text = "\n\n".join("\n".join(lines[first - 1 : last]) for first, last in ranges) + "\n"
        assert text.count("```") % 2 == 0, f"{page}: a range ends inside a code block"
        target = here / f"{page}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
        pages.append(page)
    shutil.copyfile(checkout / "config.ini", here / "config.ini")
    return pages


def run_d2lbook(d2lbook: str, here: Path, pages: list[str]) -> dict:
    with tempfile.TemporaryDirectory() as scratch:
        work = Path(scratch) / "book"
        shutil.copytree(here, work, ignore=shutil.ignore_patterns("*.py", "*.json"))
        ini = (here / "config.ini").read_text(encoding="utf-8")
        for old, new in [
            ("eval_notebook = True", "eval_notebook = False"),
            ("notebooks = *.md */*.md", "notebooks = index.md " + " ".join(f"{p}.md" for p in pages)),
            ("resources = img/ d2l/ d2l.bib setup.py static/latex_style/", "resources ="),
        ]:
            assert old in ini, old
            ini = ini.replace(old, new)
        (work / "config.ini").write_text(ini, encoding="utf-8")
        (work / "index.md").write_text("# Index\n\n```toc\n" + "\n".join(pages) + "\n```\n", encoding="utf-8")
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        subprocess.run([d2lbook, "build", "colab", "sagemaker", "--tab", "all"], cwd=work, env=env, check=True)
        result: dict = {}
        for service in ("colab", "sagemaker"):
            for number, tab in enumerate(TABS):
                folder = work / "_build" / (service if number == 0 else f"{service}_{tab}")
                for page in pages:
                    path = folder / f"{page}.ipynb"
                    notebook = json.loads(path.read_text(encoding="utf-8")) if path.stat().st_size else None
                    for cell in (notebook or {}).get("cells", []):
                        cell.pop("id", None)
                    result.setdefault(service, {}).setdefault(tab, {})[page] = notebook
        return result


def main() -> None:
    checkout, d2lbook = Path(sys.argv[1]), sys.argv[2]
    here = Path(__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(checkout), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    assert head.strip() == COMMIT, f"d2l-en at {head.strip()}, not {COMMIT}"
    pages = cut(checkout, here)
    result = run_d2lbook(d2lbook, here, pages)
    (here / "d2lbook.json").write_text(json.dumps(result, indent=1, sort_keys=True) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
