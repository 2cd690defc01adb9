"""Read stage: the ``live-cell`` options that change how a cell is shown, never what runs.

Line numbers and emphasised lines (as Sphinx's ``code-block``), code below its output (as
jupyter-sphinx's ``:code-below:``), collapsed code or output, the size and alt text of an output
image, and the cell's output as a numbered figure. They become attributes of the ``live_cell``
node (and, for a figure, a ``figure`` child that carries its caption and label from reading on,
so that Sphinx numbers it and ``:numref:`` finds it); the cell's plan, and so its session key,
never sees them. A bad value is a located warning and is left out: the cell still runs and shows.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from docutils import nodes
from docutils.parsers.rst import directives

from livecells.config_checks import IMAGE_CHECKS

#: The options, all read as text here and checked in :func:`display_attributes`.
DISPLAY_OPTIONS: dict[str, Callable[[str | None], Any]] = {
    "linenos": directives.flag,
    "lineno-start": directives.unchanged_required,
    "emphasize-lines": directives.unchanged_required,
    "code-below": directives.flag,
    "collapse-code": directives.unchanged,
    "collapse-output": directives.unchanged,
    "image-width": directives.unchanged_required,
    "image-height": directives.unchanged_required,
    "image-alt": directives.unchanged_required,
    "image-class": directives.unchanged_required,
    "figure-caption": directives.unchanged_required,
    "figure-name": directives.unchanged_required,
}

#: What an option that shapes the code, or the output, means nothing without.
_CODE_OPTIONS = ("linenos", "lineno-start", "emphasize-lines", "code-below", "collapse-code")
_OUTPUT_OPTIONS = (
    "collapse-output", "image-width", "image-height", "image-alt", "image-class", "figure-caption", "figure-name"
)

#: Image options: the image node's attribute, whose check is the image directive's own.
_IMAGE = {"image-width": "width", "image-height": "height", "image-alt": "alt", "image-class": "classes"}

Warn = Callable[..., None]


def parse_line_spec(spec: str, total: int) -> list[int]:
    """0-based line indexes of a spec such as ``"1,3-5,8-"`` (as Sphinx's ``:emphasize-lines:``
    reads it: ``-N`` from the first line, ``N-`` to the last). ValueError if it is not one."""
    found: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        try:
            if not part:
                raise ValueError
            if "-" not in part:
                found.append(int(part) - 1)
                continue
            start, _, end = part.partition("-")
            first = int(start) if start.strip() else 1
            last = int(end) if end.strip() else max(first, total)
            if first < 1 or last < first:
                raise ValueError
            found.extend(range(first - 1, last))
        except ValueError:
            raise ValueError(f"invalid line number spec: {spec!r}") from None
    return found


def display_attributes(directive: Any, code: str, warn: Warn) -> tuple[dict[str, Any], list[nodes.Node]]:
    """The ``live_cell`` attributes of a directive's display options, and the children they add
    (a figure placeholder). ``warn(location, message, *args)`` says what was left out."""
    options = directive.options
    where = directive.get_location()
    attributes: dict[str, Any] = {
        "linenos": "linenos" in options or "lineno-start" in options,
        "code_below": "code-below" in options,
        "collapse_code": _summary(options, "collapse-code"),
        "collapse_output": _summary(options, "collapse-output"),
    }
    for hidden, names in (("hide-code", _CODE_OPTIONS), ("hide-output", _OUTPUT_OPTIONS)):
        useless = [f":{n}:" for n in names if n in options]
        if hidden in options and useless:
            warn(where, "live-cell: %s %s no effect with :%s:", ", ".join(useless),
                 "has" if len(useless) == 1 else "have", hidden)
    if "lineno-start" in options:
        try:
            attributes["lineno_start"] = int(options["lineno-start"])
        except ValueError:
            warn(where, "live-cell: :lineno-start: must be a whole number, not %r; numbering from 1",
                 options["lineno-start"])
    if "emphasize-lines" in options:
        attributes["emphasize"] = _emphasized(options["emphasize-lines"], code, where, warn)
    image: dict[str, Any] = {}
    for name, attribute in _IMAGE.items():
        if name in options:
            try:
                image[attribute] = IMAGE_CHECKS[attribute](options[name])
            except ValueError as err:
                warn(where, "live-cell: :%s: %s; left out", name, " ".join(str(err).split()).rstrip("."))
    attributes["image"] = image
    children: list[nodes.Node] = []
    if ("figure-caption" in options or "figure-name" in options) and "hide-output" not in options:
        children.append(_figure(directive, options))
    return attributes, children


def _summary(options: dict[str, Any], name: str) -> str | None:
    """None: not collapsed; "": collapsed under the default summary; else the author's."""
    if name not in options:
        return None
    return " ".join((options[name] or "").split())


def _emphasized(spec: str, code: str, where: Any, warn: Warn) -> list[int]:
    """1-based lines to emphasise, as ``code-block`` keeps them (``highlight_args['hl_lines']``)."""
    total = len(code.splitlines())
    try:
        lines = parse_line_spec(spec, total)
    except ValueError as err:
        warn(where, "live-cell: :emphasize-lines: %s; no line is emphasised", err)
        return []
    if any(not 0 <= i < total for i in lines):
        warn(where, "live-cell: :emphasize-lines: line number spec is out of range (1-%d): %r", total, spec)
    return sorted({i + 1 for i in lines if 0 <= i < total})


def _figure(directive: Any, options: dict[str, Any]) -> nodes.figure:
    """The figure that will hold the cell's output: its caption (inline markup of the page's own
    syntax, RST or MyST) and its label, registered now, as the ``figure`` directive does."""
    figure = nodes.figure(classes=["livecells-output-figure"])
    directive.set_source_info(figure)
    caption_text = options.get("figure-caption")
    if caption_text:
        # Markup errors in it are reported where they are parsed; the nodes need not stay.
        inline, _messages = directive.state.inline_text(caption_text, directive.lineno)
        caption = nodes.caption(caption_text, "", *inline)
        directive.set_source_info(caption)
        figure += caption
    if options.get("figure-name"):
        name = nodes.fully_normalize_name(options["figure-name"])
        figure["names"].append(name)
        directive.state.document.note_explicit_target(figure, figure)
    return figure
