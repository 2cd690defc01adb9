"""livecells' version, pyproject.toml's as installed (also by ``pip install -e``): a module of its
own, so that the stages that record it (the scheduler, the CLI) need not import the package face."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("livecells")
except PackageNotFoundError:  # a source tree on sys.path, never installed
    __version__ = "0+unknown"
