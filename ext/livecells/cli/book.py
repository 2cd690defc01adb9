"""What ``report`` and ``clear`` take from the book: its ``conf.py``, read as ``sphinx-build``
reads it (Sphinx's ``Config.read``), and, for ``report --fail-on ... stale``, what its pages
show, read as a build reads them with ``livecells_execute = 'cache'`` (no cell runs; the build's
files go to a temporary folder, nothing into the book).

Sphinx is imported here only when a command asks for one of these, never when the command line
is imported (a Dask worker imports the package without Sphinx).
"""

from __future__ import annotations

import io
import sys
import tempfile
from contextlib import redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livecells.model.records import BuildOutcome, outcome_of

#: Where the store is when conf.py does not say (livecells_store's default).
DEFAULT_STORE = "_livecells"


class BookProblem(RuntimeError):
    """The book's conf.py cannot be found or run, or its pages cannot be read."""


@dataclass(frozen=True)
class Book:
    """A book's source folder and the folder of its conf.py (None: it has none)."""

    source: Path
    confdir: Path | None

    @classmethod
    def at(cls, source: str, confdir: str | None) -> Book:
        """``confdir`` (``-c``) must hold a conf.py; without it the source folder's is used, if
        there is one."""
        folder = Path(confdir if confdir is not None else source)
        if (folder / "conf.py").is_file():
            return cls(Path(source), folder)
        if confdir is not None:
            raise BookProblem(f"-c {confdir}: no conf.py in that folder")
        return cls(Path(source), None)

    def setting(self, name: str, default: Any) -> Any:
        """A value of conf.py (``default`` without conf.py, or when it does not set it)."""
        if self.confdir is None:
            return default
        from sphinx.config import Config
        from sphinx.errors import ConfigError
        from sphinx.util.tags import Tags

        try:
            with redirect_stdout(sys.stderr):  # what conf.py prints is not the command's output
                config = Config.read(self.confdir, overrides={}, tags=Tags())
            config.add(name, default, "env", ())
            config.init_values()  # Sphinx before 7.3 takes conf.py's values only here
            return getattr(config, name)
        except (ConfigError, OSError) as err:
            raise BookProblem(f"{self.confdir / 'conf.py'}: {err}") from None

    def store(self) -> Path:
        """The store folder ``livecells_store`` names, from the source folder."""
        value = self.setting("livecells_store", DEFAULT_STORE)
        return self.source / (value if isinstance(value, str) and value else DEFAULT_STORE)

    def pages_outcome(self, store: Path | None = None) -> BuildOutcome:
        """What a build of the book would show now, running nothing: the pages read (their
        plans, keys and the store's records), with ``livecells_execute = 'cache'``. The
        build's warnings go to stderr; ``store``: another store folder (``--store``)."""
        if self.confdir is None:
            raise BookProblem(
                f"{self.source}: no conf.py; reading the pages needs the book's (-c CONFDIR)"
            )
        from sphinx.application import Sphinx
        from sphinx.errors import SphinxError

        overrides: dict[str, Any] = {"livecells_execute": "cache"}
        if store is not None:
            overrides["livecells_store"] = str(store.resolve())
        with tempfile.TemporaryDirectory(prefix="livecells-report-") as work, redirect_stdout(sys.stderr):
            try:
                app = Sphinx(
                    str(self.source), str(self.confdir), f"{work}/out", f"{work}/doctrees", "dummy",
                    confoverrides=overrides, status=io.StringIO(), warning=sys.stderr, freshenv=True,
                )
                app.build()
            except SphinxError as err:
                raise BookProblem(f"reading the pages of {self.source}: {err}") from None
            if "livecells" not in app.extensions:
                raise BookProblem(f"{self.confdir / 'conf.py'}: livecells is not in its extensions")
            return outcome_of(app.env)
