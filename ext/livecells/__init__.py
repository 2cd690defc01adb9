"""livecells: execute framework-tabbed code cells at sphinx-build time and show their live output.

The build runs in stages, one subpackage each, handing the next typed records (:mod:`.model`):
:mod:`.read` (directives, each page's plan), :mod:`.plan` (session keys, what runs),
:mod:`.execute` (kernels), :mod:`.store` (JSON files) and :mod:`.render` (pages, notebooks,
the report). :mod:`.pipeline` wires them to Sphinx's events; this module only registers them.
See ARCHITECTURE.md.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from livecells._version import __version__

if TYPE_CHECKING:  # importing livecells (a Dask worker unpickling a job) does not load Sphinx
    from sphinx.application import Sphinx


def setup(app: Sphinx) -> dict[str, Any]:
    _check_platform()
    from livecells.config import setup_config
    from livecells.pipeline.events import setup_pipeline
    from livecells.read.collect import setup_collect
    from livecells.read.directives import setup_directives
    from livecells.read.grouping import setup_grouping
    from livecells.read.nodes import setup_nodes
    from livecells.read.slides import setup_slides_read
    from livecells.read.values import setup_values_read
    from livecells.render.cells import setup_render
    from livecells.render.hosted import setup_hosted
    from livecells.render.latex import setup_latex
    from livecells.render.launch import setup_launch
    from livecells.render.mime_plugins import setup_mime_plugins
    from livecells.render.notebooks import setup_notebooks
    from livecells.render.report import setup_report
    from livecells.render.slides import setup_slides
    from livecells.render.values import setup_values_render

    app.setup_extension("sphinx_design")
    setup_config(app)
    setup_nodes(app)
    setup_directives(app)
    setup_grouping(app)
    setup_collect(app)
    setup_pipeline(app)
    setup_render(app)
    setup_mime_plugins(app)
    setup_notebooks(app)
    setup_hosted(app)
    setup_launch(app)
    setup_report(app)
    setup_latex(app)
    setup_values_read(app)
    setup_values_render(app)
    setup_slides_read(app)
    setup_slides(app)
    app.connect("builder-inited", _add_static_path)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True, "env_version": 6}


def _check_platform() -> None:
    """livecells needs POSIX (its store locks files with ``fcntl``; kernels are managed as POSIX
    processes): elsewhere, say so at setup instead of an ImportError from deep inside."""
    try:
        import fcntl  # noqa: F401
    except ImportError:
        from sphinx.errors import ExtensionError

        raise ExtensionError(
            f"livecells runs on POSIX systems (Linux; macOS untested), not on {sys.platform}: "
            "its result store locks files with fcntl, which this platform lacks"
        ) from None


def _add_static_path(app: Sphinx) -> None:
    static = str(Path(__file__).parent / "static")
    if static not in app.config.html_static_path:
        app.config.html_static_path.append(static)
