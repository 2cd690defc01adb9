"""Launch links: URL templates that open a page's notebook of one framework in a notebook service.

``livecells_launch`` maps a service to a URL template, or to one template per framework (as
d2l.ai keeps one repository of notebooks per framework). A template is an ``http(s)`` URL with
the placeholders of :data:`PLACEHOLDERS`; each value is percent-encoded before it is put in, and
a template with characters that a URL cannot hold as they are (spaces, quotes, angle brackets,
backslashes) is refused, so that a made URL is safe in any attribute. Nothing here knows Sphinx.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

#: What a template may hold in braces: the notebook's path in the built site (relative to its
#: root), the page's name, the framework's name.
PLACEHOLDERS = ("path", "docname", "framework")
#: The services livecells knows by name: their label, and the logo sphinx-book-theme has for them.
SERVICES = {
    "colab": ("Colab", "_static/images/logo_colab.png"),
    "binder": ("Binder", "_static/images/logo_binder.svg"),
    "studiolab": ("SageMaker Studio Lab", ""),
}
#: The characters a template's text may hold (RFC 3986's, with ``%`` for escapes made by hand).
_URL_TEXT = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")


@dataclass(frozen=True)
class LaunchTarget:
    """One service: its name in the config, the label the page shows, and its templates per
    framework (``None``: every framework)."""

    name: str
    label: str
    templates: tuple[tuple[str | None, str], ...]

    def url(self, framework: str, docname: str, path: str) -> str | None:
        """The link for one framework's notebook of a page (None: no template for it)."""
        template = dict(self.templates).get(framework, dict(self.templates).get(None))
        if template is None:
            return None
        values = {"path": path, "docname": docname, "framework": framework}
        return template.format(**{k: quote(v, safe="/") for k, v in values.items()})

    def raw(self) -> Any:
        """The value as conf.py gives it."""
        if len(self.templates) == 1 and self.templates[0][0] is None:
            return self.templates[0][1]
        return {framework: template for framework, template in self.templates}

    @property
    def icon(self) -> str:
        return SERVICES.get(self.name, ("", ""))[1]


def check_url(url: Any) -> str:
    """``url`` if it is an ``http(s)`` URL whose characters a URL may hold as they are (no
    spaces, quotes, angle brackets, backslashes, braces), else ValueError saying why."""
    if not isinstance(url, str) or not url:
        raise ValueError("the URL must be a non-empty string")
    if not url.lower().startswith(("https://", "http://")):
        raise ValueError("the URL must start with https:// or http://")
    if not _URL_TEXT.fullmatch(url):
        bad = sorted({c for c in url if not _URL_TEXT.fullmatch(c)})
        raise ValueError(f"the URL holds characters a URL cannot hold as they are: {bad}")
    return url


def check_template(template: Any) -> str:
    """``template`` if it is a usable URL template, else ValueError saying why."""
    if not isinstance(template, str) or not template:
        raise ValueError("the template must be a non-empty string")
    if not template.lower().startswith(("https://", "http://")):
        raise ValueError("the template must start with https:// or http://")
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as err:
        raise ValueError(f"the template's braces do not match ({err})") from None
    for text, name, spec, conversion in parsed:
        if not _URL_TEXT.fullmatch(text):
            bad = sorted({c for c in text if not _URL_TEXT.fullmatch(c)})
            raise ValueError(f"the template holds characters a URL cannot hold as they are: {bad}")
        if name is not None and (name not in PLACEHOLDERS or spec or conversion):
            shown = ", ".join(f"{{{p}}}" for p in PLACEHOLDERS)
            raise ValueError(f"unknown placeholder {{{name}}}; the placeholders are {shown}")
    return template


def launch_target(name: Any, value: Any) -> LaunchTarget:
    """One entry of ``livecells_launch``, checked; ValueError says what is wrong with it."""
    if not isinstance(name, str) or not name.strip():
        raise ValueError("the service's name must be a non-empty string")
    if isinstance(value, Mapping):
        if not value:
            raise ValueError("no framework's template given")
        templates: list[tuple[str | None, str]] = []
        for framework, template in value.items():
            if not isinstance(framework, str) or not framework:
                raise ValueError(f"{framework!r} is not a framework's name")
            try:
                templates.append((framework, check_template(template)))
            except ValueError as err:
                raise ValueError(f"{framework}: {err}") from None
    else:
        templates = [(None, check_template(value))]
    label = SERVICES.get(name, (name.strip(), ""))[0]
    return LaunchTarget(name, label, tuple(templates))
