"""Cuts this folder's book from d2l-en and records the library d2lbook makes of it.

``python make_fixtures.py D2L_EN_CHECKOUT D2LBOOK_PYTHON``, where the checkout is d2l-ai/d2l-en
at the commit below and D2LBOOK_PYTHON has d2lbook==1.0.3. ``book/`` is a d2lbook book of seven
whole d2l-en pages (byte for byte), chosen so that every class a saved ``@d2l.add_to_class``
names is saved too (else d2lbook's ``build lib`` stops with a KeyError): the preface (the import
block and ``d2l = sys.modules[__name__]``), calculus (plotting), oo-design (the classes and
``add_to_class``), synthetic-regression-data, linear-regression-scratch, image-classification-dataset
(four tabs, a stub ``show_images``) and use-gpu (``Trainer.prepare_batch``, which
linear-regression-scratch saved, saved again otherwise). Its ``index.md`` is a toc of
them; ``config.ini`` is d2l-en's; ``d2l/`` holds d2l-en's ``__init__.py`` and, of each library
file, the hand-written part above d2lbook's warning line with that line (what d2lbook keeps).
``expected/`` is what ``d2lbook build lib`` then writes into ``d2l/``, the four files and the
version file.
"""

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

COMMIT = "23d7a5aecceee57d1292c56e90cce307f183bb0a"
PAGES = [
    "chapter_preface/index",
    "chapter_preliminaries/calculus",
    "chapter_linear-regression/oo-design",
    "chapter_linear-regression/synthetic-regression-data",
    "chapter_linear-regression/linear-regression-scratch",
    "chapter_linear-classification/image-classification-dataset",
    "chapter_builders-guide/use-gpu",
]
LIBS = ["torch.py", "mxnet.py", "jax.py", "tensorflow.py"]
WARNING = "#################   WARNING   ################"


def main(d2l_en: str, d2lbook_python: str) -> None:
    src, here = Path(d2l_en), Path(__file__).resolve().parent
    head = subprocess.run(["git", "-C", str(src), "rev-parse", "HEAD"], capture_output=True, text=True, check=True)
    assert head.stdout.strip() == COMMIT, f"d2l-en is at {head.stdout.strip()}, not {COMMIT}"
    book = here / "book"
    shutil.rmtree(book, ignore_errors=True)
    for page in PAGES:
        target = book / f"{page}.md"
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src / f"{page}.md", target)
    toc = "\n".join(PAGES)
    (book / "index.md").write_text(f"# A d2l-en library book\n\n```toc\n:maxdepth: 2\n\n{toc}\n```\n", encoding="utf-8")
    shutil.copyfile(src / "config.ini", book / "config.ini")
    (book / "d2l").mkdir()
    shutil.copyfile(src / "d2l" / "__init__.py", book / "d2l" / "__init__.py")
    for name in LIBS:
        text = (src / "d2l" / name).read_text(encoding="utf-8")
        (book / "d2l" / name).write_text(text[: text.index(WARNING) + len(WARNING)] + "\n", encoding="utf-8")
    expected = here / "expected"
    shutil.rmtree(expected, ignore_errors=True)
    with tempfile.TemporaryDirectory() as work:
        copy = Path(work) / "book"
        shutil.copytree(book, copy)
        subprocess.run([d2lbook_python, "-m", "d2lbook.main", "build", "lib"], cwd=copy, check=True)
        shutil.copytree(copy / "d2l", expected)


if __name__ == "__main__":
    main(*sys.argv[1:])
