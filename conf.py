"""Sphinx configuration of the livecells docs and sample book: sphinx-build -c . docs _build/html."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "ext"))
# The docs' own directive: the table of config values, generated from livecells.config.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "docs", "_ext"))

project = "livecells"
author = "the livecells authors"
copyright = "2026, the livecells authors"
language = "en"

extensions = ["livecells", "livecells_config_table"]

html_theme = "furo"
html_title = "livecells"
exclude_patterns = ["_build", "_livecells", "**/.ipynb_checkpoints"]

# Each framework's cells run in its own kernel per page: torch and mxnet side by side.
livecells_frameworks = {
    "pytorch": {"label": "PyTorch", "kernel": "python3", "preload": ["torch"]},
    "mxnet": {"label": "MXNet", "kernel": "python3", "preload": ["mxnet"]},
}
livecells_timeout = 600

# PDF (make pdf): the sample chapter is Japanese, so xelatex with CJK fonts
# (Debian: texlive-xetex, latexmk, fonts-noto-cjk).
latex_engine = "xelatex"
latex_use_xindy = False
latex_elements = {
    "fontpkg": r"""
\setmainfont{Noto Serif CJK JP}
\setsansfont{Noto Sans CJK JP}
\setmonofont{Noto Sans Mono CJK JP}
\XeTeXlinebreaklocale "ja"
""",
}
