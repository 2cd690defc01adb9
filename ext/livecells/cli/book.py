"""What ``report`` and ``clear`` take from the book: its ``conf.py``, read as ``sphinx-build``
reads it (Sphinx's ``Config.read``, with ``-D`` as sphinx-build's), and, for ``report
--fail-on``, what its pages show, read as a build reads them with the book's settings, running
nothing (a book that runs is read with ``livecells_execute = 'cache'``; the build's files go to
a temporary folder, nothing into the book).

Sphinx is imported here only when a command asks for one of these, never when the command line
is imported (a Dask worker imports the package without Sphinx).
"""

from __future__ import annotations

import io
import sys
import tempfile
from contextlib import ExitStack, redirect_stdout
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from livecells.errors import BookError
from livecells.model.records import BuildOutcome, outcome_of

#: Where the store is when conf.py does not say (livecells_store's default).
DEFAULT_STORE = "_livecells"


@dataclass(frozen=True)
class Book:
    """A book's source folder and the folder of its conf.py (None: it has none)."""

    source: Path
    confdir: Path | None
    #: Settings given as sphinx-build's ``-D`` gives them: (name, value as written).
    overrides: tuple[tuple[str, str], ...] = ()

    @classmethod
    def at(cls, source: str, confdir: str | None, overrides: tuple[tuple[str, str], ...] = ()) -> Book:
        """``confdir`` (``-c``) must hold a conf.py; without it the source folder's is used, if
        there is one."""
        folder = Path(confdir if confdir is not None else source)
        if (folder / "conf.py").is_file():
            return cls(Path(source), folder, overrides)
        if confdir is not None:
            raise BookError(f"-c {confdir}: no conf.py in that folder")
        return cls(Path(source), None, overrides)

    def setting(self, name: str, default: Any) -> Any:
        """A value of conf.py, or of ``-D`` (``default`` without conf.py, or when neither sets it)."""
        return self.settings({name: default})[name]

    def settings(self, defaults: dict[str, Any]) -> dict[str, Any]:
        """Values of conf.py or ``-D``, conf.py run once (each name's default without conf.py, or
        when neither sets it)."""
        if self.confdir is None:
            return dict(defaults)
        from sphinx.config import Config
        from sphinx.errors import ConfigError
        from sphinx.util.tags import Tags

        try:
            with redirect_stdout(sys.stderr):  # what conf.py prints is not the command's output
                config = Config.read(self.confdir.resolve(), overrides=dict(self.overrides), tags=Tags())
            for name, default in defaults.items():
                if name not in config.values:
                    config.add(name, default, "env", ())
            config.init_values()  # Sphinx before 7.3 takes conf.py's values only here
            return {name: getattr(config, name) for name in defaults}
        except (ConfigError, OSError) as err:
            raise BookError(f"{self.confdir / 'conf.py'}: {err}") from None

    def store(self) -> Path:
        """The store folder ``livecells_store`` names, from the source folder."""
        value = self.setting("livecells_store", DEFAULT_STORE)
        return self.source / (value if isinstance(value, str) and value else DEFAULT_STORE)

    def pages_outcome(self, store: Path | None = None) -> BuildOutcome:
        """What a build of the book would show now, running nothing: the pages read (their
        plans, keys and the store's records) with the book's settings and ``-D``, a book that
        runs (``livecells_execute`` ``auto`` or ``force``) read as ``cache``. The build's
        warnings go to stderr; ``store``: another store folder (``--store``)."""
        if self.confdir is None:
            raise BookError(
                f"{self.source}: no conf.py; reading the pages needs the book's (-c CONFDIR)"
            )
        from sphinx.application import Sphinx
        from sphinx.errors import SphinxError
        from sphinx.util.console import color_terminal, nocolor
        from sphinx.util.docutils import docutils_namespace, patch_docutils

        overrides: dict[str, Any] = dict(self.overrides)
        if self.setting("livecells_execute", "auto") != "off":  # off shows recorded outputs: kept
            overrides["livecells_execute"] = "cache"
        if store is not None:
            overrides["livecells_store"] = str(store.resolve())
        with ExitStack() as stack:
            work = stack.enter_context(tempfile.TemporaryDirectory(prefix="livecells-report-"))
            stack.enter_context(redirect_stdout(sys.stderr))
            # As sphinx-build: what the read registers in docutils (nodes, directives) goes with it.
            stack.enter_context(patch_docutils(str(self.confdir)))
            stack.enter_context(docutils_namespace())
            if not color_terminal():  # as sphinx-build: colour codes only for a terminal
                nocolor()
            try:
                app = Sphinx(
                    str(self.source), str(self.confdir), f"{work}/out", f"{work}/doctrees", "dummy",
                    confoverrides=overrides, status=io.StringIO(), warning=sys.stderr, freshenv=True,
                )
                app.build()
            except SphinxError as err:
                raise BookError(f"reading the pages of {self.source}: {err}") from None
            if "livecells" not in app.extensions:
                raise BookError(f"{self.confdir / 'conf.py'}: livecells is not in its extensions")
            return outcome_of(app.env)
