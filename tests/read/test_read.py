"""The read stage's authoring checks: each mistake is a located ``livecells.config`` warning."""

from __future__ import annotations

import re

import pytest

from helpers import build_site

PAGE = """\
Page
====

.. live-cell:: pytorch, jax

   x = 1

.. live-cell:: pytorch

.. live-text:: mxnet

   Prose for a framework that no cell of this page uses.

.. live-text:: pytorch

.. live-cell:: pytorch

   y = 2
"""

OTHER = """\
Other
=====

.. live-cell:: all, pytorch

   z = 3
"""

#: (page, the directive's line, the warning's text)
EXPECTED = [
    ("index", 4, "live-cell: unknown framework 'jax' (livecells_frameworks has pytorch, mxnet); the cell is shown but not run"),
    ("index", 8, "live-cell: the cell has no code"),
    ("index", 10, "live-text: no cell of this page is for 'mxnet' (its cells are for pytorch); the prose gets a tab of its own"),
    ("index", 14, "live-text: the prose is empty"),
    ("other", 4, "live-cell: 'all' cannot be combined with other frameworks; using 'all'"),
]


@pytest.fixture
def src(tmp_path):
    (tmp_path / "conf.py").write_text('extensions = ["livecells"]\nlivecells_execute = "off"\n')
    (tmp_path / "index.rst").write_text(PAGE + "\n.. toctree::\n\n   other\n")
    (tmp_path / "other.rst").write_text(OTHER)
    return tmp_path


def test_each_authoring_mistake_is_a_config_warning_at_its_directive(src):
    _, warnings = build_site(src, freshenv=True)
    for page, line, text in EXPECTED:
        assert re.search(rf"{page}\.rst:{line}: WARNING: {re.escape(text)} \[livecells\.config\]", warnings), (
            text, warnings
        )
    assert len(re.findall(r"\[livecells\.config\]", warnings)) == len(EXPECTED), warnings


def test_suppress_warnings_silences_them(src):
    _, warnings = build_site(src, freshenv=True, confoverrides={"suppress_warnings": ["livecells.config"]})
    assert "live-cell:" not in warnings and "live-text:" not in warnings, warnings
