"""Where the tests find the checkout and their shared inputs, whichever stage's folder they are in.

A test file names these rather than counting ``Path(__file__).parents``: the test folders are
the package's stages (tests/README.md), and a file that moves between them keeps its paths.
"""

from __future__ import annotations

from pathlib import Path

#: tests/, the folder of this module, conftest.py and helpers.py (on ``sys.path``: pyproject.toml).
TESTS = Path(__file__).resolve().parent
#: The checkout's root (pyproject.toml, ext/, docs/).
REPO = TESTS.parent
#: The livecells under test in the checkout (what a process started by a test puts on its path).
EXT = REPO / "ext"
#: The package's own source, for the tests that read it.
PACKAGE = EXT / "livecells"
#: The documentation's sources (docs/*.rst, the sample book's d2l/).
DOCS = REPO / "docs"
#: Fixtures shared between stages: d2lbook output, committed stores, the oracle's cells.
DATA = TESTS / "data"
#: The small Sphinx sites of ``sphinx.testing`` (conftest.py's ``rootdir``).
ROOTS = TESTS / "roots"
#: Plug-in packages (an executor, a mime renderer) that tests install into a venv.
PLUGINS = TESTS / "plugins"
#: The scripts that make the TensorFlow and JAX kernel environments.
ENVS = TESTS / "envs"
