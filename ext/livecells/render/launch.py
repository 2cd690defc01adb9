"""Launch links: open a page's notebook of one framework in Colab, Binder, Studio Lab or any
service whose URL template ``livecells_launch`` gives (see :mod:`livecells.model.launch`).

The notebooks are those :mod:`.notebooks` writes for download; ``{path}`` is where one lies in
the built site. The links follow each framework's download link; under sphinx-book-theme they
are also entries of the theme's launch menu (the rocket), which the theme builds from the page's
``header_buttons`` context: livecells adds its entries to the theme's own launch group, or adds
that group when the theme made none (the theme only makes it for notebook pages).
"""

from __future__ import annotations

import html
from typing import Any

from docutils import nodes
from markupsafe import Markup
from sphinx.application import Sphinx

from livecells.config import get_config
from livecells.read.collect import plans

#: The label of sphinx-book-theme's launch group in ``header_buttons``.
BOOK_THEME_GROUP = "launch-buttons"


def launch_links(app: Sphinx, docname: str, framework: str, path: str) -> list[tuple[str, str, str]]:
    """``(label, url, icon)`` of each configured service that has a template for ``framework``.
    ``path`` is the download notebook's; a service with notebooks of its own
    (``livecells_hosted``) opens its own, at its path in the service's folder."""
    config = get_config(app.env)
    hosted = {service.name: service for service in config.hosted}
    links = []
    for target in config.launch:
        service = hosted.get(target.name)
        url = target.url(framework, docname, service.notebook_path(docname) if service else path)
        if url is not None:
            links.append((target.label, url, target.icon))
    return links


def launch_nodes(app: Sphinx, docname: str, framework: str, path: str) -> list[nodes.Node]:
    """`` (open in Colab · Binder)`` after a framework's download link; nothing without links."""
    links = launch_links(app, docname, framework, path)
    if not links:
        return []
    out: list[nodes.Node] = [nodes.Text(" (open in ")]
    for number, (label, url, _) in enumerate(links):
        if number:
            out.append(nodes.Text(" · "))
        out.append(nodes.reference(label, label, refuri=url, classes=["livecells-launch"]))
    out.append(nodes.Text(")"))
    return out


def add_to_launch_menu(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any], doctree: Any) -> None:
    """Under a theme that builds its header from ``header_buttons`` (sphinx-book-theme), the
    page's launch links as entries of its launch menu. Values are escaped here: the theme's
    template writes them into its markup as they are."""
    buttons = context.get("header_buttons")
    if not isinstance(buttons, list) or not get_config(app.env).launch:
        return
    from livecells.render.notebooks import notebook_path, writes_notebooks

    plan = plans(app.env).get(pagename)
    if plan is None or not writes_notebooks(app):
        return
    config = get_config(app.env)
    entries = []
    for session in plan.sessions(config.framework_names(), app.tags):
        spec = config.frameworks[session.framework]
        for label, url, icon in launch_links(app, pagename, spec.name, notebook_path(pagename, spec.name)):
            text = f"{label} ({spec.label})"
            entries.append({
                "type": "link",
                "text": Markup(html.escape(text)),
                "tooltip": Markup(html.escape(f"Open the {spec.label} notebook in {label}")),
                "icon": icon or "fas fa-rocket",
                "url": Markup(html.escape(url)),
            })  # fmt: skip
    if not entries:
        return
    group = next((b for b in buttons if isinstance(b, dict) and b.get("label") == BOOK_THEME_GROUP), None)
    if group is None:
        group = {
            "type": "group",
            "tooltip": "Launch interactive content",
            "icon": "fas fa-rocket",
            "buttons": [],
            "label": BOOK_THEME_GROUP,
        }
        buttons.insert(0, group)  # where the theme puts its own: first
    group["buttons"].extend(entries)


def setup_launch(app: Sphinx) -> None:
    # After sphinx-book-theme's own launch buttons (its handlers run at priority 501).
    app.connect("html-page-context", add_to_launch_menu, priority=502)
