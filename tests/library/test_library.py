"""The book's library (``livecells_library``, ``python -m livecells lib``) against d2lbook.

The fixture (tests/data/d2l-lib, ``make_fixtures.py``) is a d2lbook book of seven whole d2l-en
pages with d2l-en's config.ini, and ``expected/`` what d2lbook 1.0.3's ``build lib`` writes of
it. Converted by ``convert`` (which carries config.ini into conf.py), its ``d2l/`` deleted, the
``lib`` command must write the same four files, byte for byte. The whole book: the test at the
end, with ``LIVECELLS_D2L_EN``. Then what cannot be used (a saved block that is not Python, a name
saved twice, a file that is not d2lbook's), the reader against Sphinx's own reading of the same
pages, and the build: the library written before the sessions, and an edited ``#@save`` function
rerunning the sessions that reach it and no other (real kernels).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest

from livecells.convert.tree import convert_tree
from livecells.library import book_pages
from livecells.read.collect import plans

from helpers import build_site, livecells_cli
from paths import DATA

FIXTURE = DATA / "d2l-lib"
LIBS = ["torch.py", "mxnet.py", "jax.py", "tensorflow.py"]


def converted(tmp_path: Path) -> Path:
    """The fixture book converted, its d2l/ package deleted (the library is made anew)."""
    book = tmp_path / "book"
    convert_tree(FIXTURE / "book", book, markdown=True, warn=lambda message: None)
    shutil.rmtree(book / "d2l")
    return book


def test_a_converted_d2l_book_gives_d2lbooks_library_byte_for_byte(tmp_path):
    book = converted(tmp_path)
    run = livecells_cli("lib", str(book))
    assert run.returncode == 0, run.stderr
    for name in LIBS:
        assert (book / "d2l" / name).read_bytes() == (FIXTURE / "expected" / name).read_bytes(), name
    assert f"{book / 'd2l' / 'torch.py'}: written (pytorch: 31 saved blocks from 8 pages)" in run.stdout
    # Two d2l pages save Trainer.prepare_batch, differently: kept both (as d2lbook), and said.
    warned = [line for line in run.stderr.splitlines() if "saved again" in line]
    assert len(warned) == 3 and all("'Trainer.prepare_batch'" in line for line in warned), run.stderr
    use_gpu = book / "chapter_builders-guide" / "use-gpu.md"
    line = int(re.match(rf"{re.escape(str(use_gpu))}:(\d+): WARNING", warned[0])[1])
    assert "@d2l.add_to_class(d2l.Trainer)  #@save" in use_gpu.read_text().splitlines()[line - 1]
    # Again: nothing to write, nothing touched.
    stamps = {name: (book / "d2l" / name).stat().st_mtime_ns for name in LIBS}
    again = livecells_cli("lib", str(book))
    assert again.returncode == 0 and "torch.py: unchanged" in again.stdout
    assert stamps == {name: (book / "d2l" / name).stat().st_mtime_ns for name in LIBS}


def test_the_version_file_gets_the_release_and_o_writes_elsewhere(tmp_path):
    book = converted(tmp_path)
    out = tmp_path / "out"
    (out / "d2l").mkdir(parents=True)
    init = (FIXTURE / "book" / "d2l" / "__init__.py").read_text().replace('"1.0.3"', '"0.17.6"')
    (out / "d2l" / "__init__.py").write_text(init)
    run = livecells_cli("lib", str(book), "-o", str(out))
    assert run.returncode == 0, run.stderr
    assert (out / "d2l" / "__init__.py").read_bytes() == (FIXTURE / "expected" / "__init__.py").read_bytes()
    assert (out / "d2l" / "mxnet.py").read_bytes() == (FIXTURE / "expected" / "mxnet.py").read_bytes()
    assert not (book / "d2l").exists()


def test_a_saved_block_that_is_not_python_keeps_the_last_good_file(tmp_path):
    book = converted(tmp_path)
    assert livecells_cli("lib", str(book)).returncode == 0
    page = book / "chapter_linear-regression" / "oo-design.md"
    text = page.read_text()
    broken = "def add_to_class(Class):  #@save\n    \"\"\"Register functions as methods in created class.\"\"\"\n"
    assert text.count(broken) == 1  # a cell of all frameworks
    page.write_text(text.replace(broken, broken.replace("(Class):", "(Class:")))
    first = text.splitlines().index(broken.splitlines()[0]) + 1
    run = livecells_cli("lib", str(book))
    assert run.returncode == 1
    said = [line for line in run.stderr.splitlines() if "not Python" in line]
    assert [line.partition(": WARNING: ")[0] for line in said] == [f"{page}:{first}"] * 4, run.stderr
    assert [re.search(r"#@save \[(\w+)\]", line)[1] for line in said] == ["pytorch", "mxnet", "jax", "tensorflow"]
    for name in LIBS:  # each framework's file as it was: the last good one
        assert f"{name}: left as it was" in run.stdout
        assert (book / "d2l" / name).read_bytes() == (FIXTURE / "expected" / name).read_bytes(), name


def test_a_file_that_is_not_d2lbooks_is_not_overwritten(tmp_path):
    book = converted(tmp_path)
    (book / "d2l").mkdir()
    (book / "d2l" / "jax.py").write_text("# kept by hand\n")
    conf = (book / "conf.py").read_text()
    # Without the header convert carried, the file's own head would be taken: it has none.
    (book / "conf.py").write_text(re.sub(r'("lib_file": "d2l/jax.py",.*?)"header": [^\n]*\n', r"\1", conf, flags=re.S))
    run = livecells_cli("lib", str(book))
    assert run.returncode == 1
    assert "d2l/jax.py has no line '#################   WARNING   ################'" in run.stderr
    assert (book / "d2l" / "jax.py").read_text() == "# kept by hand\n"
    assert (book / "d2l" / "torch.py").read_bytes() == (FIXTURE / "expected" / "torch.py").read_bytes()


def test_lib_needs_a_library_in_conf_py(tmp_path):
    (tmp_path / "conf.py").write_text("extensions = ['livecells']\n")
    run = livecells_cli("lib", str(tmp_path))
    assert run.returncode == 2 and "livecells_library is not set" in run.stderr


@pytest.mark.slow
def test_a_build_warns_of_a_name_saved_again_under_a_subtype_of_its_own(tmp_path):
    """d2l redefines names on purpose (``Trainer.prepare_batch`` for GPUs): those warnings can be
    hidden alone, and the library's other warnings still show."""
    pytest.importorskip("myst_parser")
    book = converted(tmp_path)
    _, warnings = build_site(book, "dummy", confoverrides={"livecells_execute": "off"})
    redefined = [w for w in warnings.splitlines() if "[livecells.library-redefined]" in w]
    assert len(redefined) == 3 and all("'Trainer.prepare_batch' is saved again" in w for w in redefined), warnings
    (book / "chapter_builders-guide" / "use-gpu.md").write_text(
        (book / "chapter_builders-guide" / "use-gpu.md").read_text() + "\n```{live-cell} pytorch\ndef broken(:  #@save\n```\n"
    )
    _, warnings = build_site(book, "dummy", confoverrides={
        "livecells_execute": "off", "suppress_warnings": ["livecells.library-redefined"]})
    assert "library-redefined" not in warnings and "saved again" not in warnings
    assert "[livecells.library]" in warnings and "is not Python" in warnings, warnings


@pytest.mark.slow
def test_the_reader_finds_the_cells_sphinx_reads(tmp_path):
    """The library's own reading of the pages (no Sphinx: it runs before any page is read)
    against the collector's, on the converted d2l pages (MyST)."""
    pytest.importorskip("myst_parser")
    book = converted(tmp_path)
    app, _ = build_site(book, "html", confoverrides={"livecells_execute": "off", "suppress_warnings": ["*"]})
    read = plans(app.env)
    pages, problems = book_pages(book)
    assert problems == [] and [p.docname for p in pages][:3] == ["index", "chapter_preface/index", "chapter_preliminaries/calculus"]
    frameworks = ["pytorch", "mxnet", "jax", "tensorflow"]
    compared = 0
    for page in pages:
        plan = read.get(page.docname)
        ours = page.cells()
        if plan is None:
            assert ours == [], page.docname
            continue
        compared += len(ours)
        named = [f for c in ours for f in c.frameworks if f != "all"]
        on_page = [f for f in frameworks if f in named] or frameworks[:1]
        theirs = [(c.frameworks, c.code, c.line) for c in plan.cells]
        assert [(tuple(on_page) if c.frameworks == ("all",) else c.frameworks, c.code, c.line) for c in ours] == theirs
    assert compared == sum(len(plan.cells) for plan in read.values()) > 150


D2L_EN = os.environ.get("LIVECELLS_D2L_EN")


@pytest.mark.slow
@pytest.mark.skipif(
    not (D2L_EN and Path(D2L_EN, "config.ini").is_file() and Path(D2L_EN, "d2l", "torch.py").is_file()),
    reason="the whole-book check needs LIVECELLS_D2L_EN (a d2l-en checkout at 23d7a5a)",
)
def test_the_whole_d2l_en_book_gives_its_committed_library(tmp_path):
    """All of d2l-en converted, its d2l/ deleted: ``lib`` writes d2l-en's committed d2l/torch.py,
    mxnet.py, jax.py and tensorflow.py (10,476 lines that d2lbook's build lib writes), byte for byte."""
    book = tmp_path / "book"
    convert_tree(D2L_EN, book, markdown=True, warn=lambda message: None)
    shutil.rmtree(book / "d2l")
    run = livecells_cli("lib", str(book))
    assert run.returncode == 0, run.stderr
    for name in LIBS:
        assert (book / "d2l" / name).read_bytes() == Path(D2L_EN, "d2l", name).read_bytes(), name
    # The names d2l-en saves twice, differently (a stub show_images, Trainer.prepare_batch for GPUs).
    assert len([line for line in run.stderr.splitlines() if "saved again" in line]) == 9, run.stderr


# --- the build ------------------------------------------------------------------------------

CONF = """\
extensions = ["livecells"]
livecells_frameworks = {"alpha": {"label": "Alpha", "kernel": "python3"}}
livecells_timeout = 60
livecells_library = {"alpha": {"lib_file": "mylib/alpha.py", "header": "import sys\\nlib = sys.modules[__name__]\\n\\n"}}
"""
TOOLS = """\
Tools
=====

.. _sec_tools:

Two functions the other pages use.

.. live-cell:: alpha

   def shout(text):  #@save
       \"\"\"Say it loud.\"\"\"
       return text.upper()

And one more.

.. live-cell:: alpha

   def area(width, height):  #@save
       return width * height

   print(area(1, 1))
"""


def _page(title: str, code: str) -> str:
    body = "\n".join("   " + line for line in code.splitlines())
    return f"{title}\n{'=' * len(title)}\n\n.. live-cell:: alpha\n\n{body}\n"


@pytest.fixture
def small_book(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    (src / "conf.py").write_text(CONF)
    (src / "index.rst").write_text("Book\n====\n\n.. toctree::\n\n   tools\n   page_a\n   page_b\n   page_c\n")
    (src / "tools.rst").write_text(TOOLS)
    (src / "page_a.rst").write_text(_page("A", "from mylib import alpha as lib\nprint(lib.shout('one'))"))
    (src / "page_b.rst").write_text(_page("B", "from mylib import alpha as lib\nprint(lib.area(2, 3))"))
    (src / "page_c.rst").write_text(_page("C", "print(1 + 1)"))
    return src


def _build(src: Path) -> tuple[list[str], str]:
    """Build with real kernels: the pages whose sessions ran, and the warnings."""
    from livecells.model.vocabulary import Origin

    app, warnings = build_site(src)
    outcome = app.env.livecells_outcome
    return sorted(s.page for s in outcome.sessions.values() if s.origin == Origin.RUN), warnings


def _shown(src: Path, page: str) -> str:
    return (src / "_build" / "html" / f"{page}.html").read_text()


@pytest.mark.slow
def test_an_edited_saved_function_reruns_its_page_and_the_pages_that_use_it(small_book):
    """Real kernels: the library is written before the sessions (page_a imports it on the first
    build), and is one of their dependencies, per definition."""
    src = small_book
    ran, warnings = _build(src)
    assert ran == ["page_a", "page_b", "page_c", "tools"] and "WARNING" not in warnings, warnings
    library = (src / "mylib" / "alpha.py").read_text()
    assert library.startswith("import sys\nlib = sys.modules[__name__]\n\n#################   WARNING")
    # d2lbook's rule: the label of the prose before the cell, but not of the prose right before it.
    assert 'def shout(text):\n    """Say it loud."""\n    return text.upper()' in library
    assert 'def area(width, height):\n    """Defined in :numref:`sec_tools`"""\n    return width * height' in library
    assert "ONE" in _shown(src, "page_a") and ">6<" in _shown(src, "page_b").replace("\n", "")
    assert _build(src)[0] == []

    tools = src / "tools.rst"
    tools.write_text(TOOLS.replace("return width * height", "return width * height * 10"))
    ran, warnings = _build(src)
    assert ran == ["page_b", "tools"] and "WARNING" not in warnings, warnings
    assert "60" in _shown(src, "page_b")

    # A saved block that is not Python: a warning at its line, the last good library kept; the
    # page itself runs (its code changed) and shows the error, no other page runs.
    good = (src / "mylib" / "alpha.py").read_text()
    tools.write_text(tools.read_text().replace("def shout(text):", "def shout(text:"))
    ran, warnings = _build(src)
    assert ran == ["tools"]
    line = TOOLS.splitlines().index("   def shout(text):  #@save") + 1
    assert f"tools.rst:{line}: WARNING: #@save [alpha]: the saved code is not Python" in warnings, warnings
    assert (src / "mylib" / "alpha.py").read_text() == good
    assert "ONE" in _shown(src, "page_a")


def test_a_bad_entry_of_livecells_library_is_dropped_alone():
    from livecells.config import read_config

    from helpers import said

    warnings: list[str] = []
    config = read_config({
        "frameworks": {"pytorch": {}, "mxnet": {}},
        "library": {
            "version_file": 3,
            "pytorch": {"lib_file": "d2l/torch.py", "lib_name": "torch", "aliases": "x"},
            "mxnet": {"lib_file": "../outside.py"},
            "jax": {"lib_file": "d2l/jax.py"},
            "tensorflow": "d2l/tensorflow.py",
        },
    }, said(warnings))  # fmt: skip
    assert [(f.framework, f.lib_file, f.module) for f in config.library.files] == [("pytorch", "d2l/torch.py", "d2l.torch")]
    assert config.library.version_file == ""
    assert [w.partition(": ")[2] for w in warnings] == [
        "version_file: must be a path (a string); that entry is ignored",
        "'pytorch': 'aliases': not one of lib_file, lib_name, simple_alias, fluent_alias, args_alias, alias, header; "
        "that entry is ignored",
        "'mxnet': lib_file '../outside.py': must be a .py file inside the source folder; that entry is ignored",
        "'tensorflow': neither version_file nor a framework's dict of lib_file, lib_name, simple_alias, fluent_alias, "
        "args_alias, alias, header; that entry is ignored",
        "'jax': not a framework in livecells_frameworks (pytorch, mxnet); that entry is ignored",
    ], warnings
