"""Notebooks for hosted services (``livecells_hosted``): Colab's, SageMaker's, as d2lbook made them.

While a page's download notebooks are written (:mod:`.notebooks`), each service gets the same
notebook of each framework, dressed by :func:`livecells.model.hosted.dress` (installation cell,
kernelspec, GPU accelerator), its images at their published URLs, written to
``<folder>/<docname>.ipynb`` (the folder: the service's, per framework, relative to the HTML
output folder). A launch link of the same service (``livecells_launch``) has that path as its
``{path}``. At the end of a build, notebooks a service no longer has are removed from its
folders: only those livecells wrote (its ``livecells`` metadata names the service).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from livecells.config import WARNING_TYPE, get_config
from livecells.model.hosted import HostedService, dress, page_image_path
from livecells.model.vocabulary import WarningSubtype
from livecells.read.collect import plans
from livecells.sphinx_util import node_location, origin

logger = logging.getLogger(__name__)


def hosted_file(app: Sphinx, service: HostedService, framework: str, docname: str) -> Path:
    """Where the service's notebook of a page in ``framework`` is written."""
    return Path(app.builder.outdir) / service.folder_of(framework) / service.notebook_path(docname)


def release_of(app: Sphinx, service: HostedService) -> str:
    """What ``==RELEASE`` stands for: the service's ``release``, else conf.py's ``release``."""
    return service.release if service.release is not None else str(app.config.release or "")


def write_hosted(
    app: Sphinx,
    docname: str,
    framework: str,
    kernelspec: dict[str, str],
    make: Callable[[Callable[[str, nodes.Element], str | None]], dict[str, Any]],
    first: bool,
) -> None:
    """Write each service's notebook of the page in ``framework``; ``make(image_url)`` is the
    page's notebook with images at ``image_url``'s URLs. ``first``: the page's first framework,
    whose images are warned of (once a page)."""
    from livecells.render.notebooks import remote_image, write_json

    for service in get_config(app.env).hosted:
        unplaced: list[nodes.Element] = []

        def image_url(uri: str, node: nodes.Element, service: HostedService = service) -> str | None:
            remote = remote_image(uri)
            if remote is not None or uri.startswith("data:"):
                return remote
            url = service.image_url(uri)
            if url is None:
                unplaced.append(node)
                return page_image_path(uri, docname)
            return url

        notebook = dress(
            make(image_url), service, framework, docname, release_of(app, service),
            service.kernelspec(framework, kernelspec),
        )
        target = hosted_file(app, service, framework, docname)
        try:
            write_json(target, notebook)
        except OSError as err:
            _unwritable(app, service, target, err)
        if first and service.images:
            for node in unplaced:
                logger.warning(
                    f"livecells_hosted[{service.name!r}]: image {node.get('uri')!r} is in no folder of its "
                    "images; the notebook links it relative to itself",
                    type=WARNING_TYPE, subtype=WarningSubtype.HOSTED,
                    location=node_location(docname, node),
                )


def _unwritable(app: Sphinx, service: HostedService, target: Path, err: OSError) -> None:
    """A notebook that cannot be written: a warning, once a build per service; the build goes on."""
    warned = app.builder.__dict__.setdefault("_livecells_hosted_unwritable", set())
    if service.name in warned:
        return
    warned.add(service.name)
    location, given = origin(app, "hosted")
    logger.warning(
        f"livecells_hosted{given}: {service.name!r}: cannot write {target} ({err.strerror or err}); "
        "its notebooks are left out",
        type=WARNING_TYPE, subtype=WarningSubtype.HOSTED, location=location,
    )


def wanted(app: Sphinx) -> dict[Path, tuple[str, str]]:
    """Every hosted notebook the book has now: its file -> (its page, its service)."""
    from livecells.render.notebooks import writes_notebooks

    if not getattr(app, "builder", None) or not writes_notebooks(app):
        return {}
    config = get_config(app.env)
    return {
        hosted_file(app, service, session.framework, docname): (docname, service.name)
        for docname, plan in plans(app.env).items()
        for session in plan.sessions(config.framework_names(), app.tags)
        for service in config.hosted
    }


def missing_notebooks(app: Sphinx, env: Any, added: set[str], changed: set[str], removed: set[str]) -> list[str]:
    """Pages whose hosted notebooks are missing (a folder emptied, a fresh checkout): read and
    written again, so that the folders always hold every page."""
    return sorted({
        docname for path, (docname, _) in wanted(app).items() if docname not in removed and not path.is_file()
    })  # fmt: skip


def prune_hosted(app: Sphinx, exception: BaseException | None) -> None:
    """Remove the notebooks livecells wrote for a service that it no longer has (a page gone, a
    framework's cells gone); other files of the folders stay."""
    from livecells.render.notebooks import writes_notebooks

    if exception is not None or not writes_notebooks(app):
        return
    config = get_config(app.env)
    files = wanted(app)
    for service in config.hosted:
        for framework in config.framework_names():
            folder = Path(app.builder.outdir) / service.folder_of(framework)
            if not folder.is_dir():
                continue
            for path in folder.rglob("*.ipynb"):
                if path not in files and _written_for(path, service.name):
                    path.unlink(missing_ok=True)


def _written_for(path: Path, service: str) -> bool:
    try:
        metadata = json.loads(path.read_text(encoding="utf-8")).get("metadata", {})
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(metadata, dict) and isinstance(metadata.get("livecells"), dict) and (
        metadata["livecells"].get("service") == service
    )


def check_release(app: Sphinx) -> None:
    """A service that pins a lib to ``==RELEASE`` without a release: warned of at its conf.py
    line; its notebooks leave that lib out."""
    for service in get_config(app.env).hosted:
        if service.needs_release() and not release_of(app, service):
            location, given = origin(app, "hosted")
            logger.warning(
                f"livecells_hosted{given}: {service.name!r} pins libs to ==RELEASE, and neither its "
                "release nor conf.py's release is set; its notebooks leave those libs out",
                type=WARNING_TYPE, subtype=WarningSubtype.CONFIG, location=location,
            )


def setup_hosted(app: Sphinx) -> None:
    app.connect("builder-inited", check_release)
    app.connect("env-get-outdated", missing_notebooks)
    app.connect("build-finished", prune_hosted)
