"""Rich outputs as docutils nodes: ``text/latex`` as math, ``text/markdown`` through myst-parser.

Math from a cell carries only math commands (an allowlist: :func:`checked_math`) into a
``.tex`` file, or to MathJax when HTML from cells is off.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from urllib.parse import urlsplit

from docutils import nodes

from livecells.errors import UnsafeMathError
from livecells.render.safe_tex import unsafe_tex

# Math in a text/latex output, as MathJax finds it in JupyterLab: display math, environments and
# inline math; the text around it is text.
_LATEX_MATH = re.compile(
    r"\$\$(?P<dd>.+?)\$\$|\\\[(?P<bd>.+?)\\\]|(?P<env>\\begin\{(?P<name>[A-Za-z]+\*?)\}.+?\\end\{(?P=name)\})"
    r"|(?<![\\$])\$(?P<di>[^$]+?)\$|\\\((?P<bi>.+?)\\\)",
    re.DOTALL,
)


#: Classes that keep MathJax (3 and 4: ``mathjax_*``; 2: ``tex2jax_*``) out of an output, and let
#: it into the math that passed the check.
MATHJAX_IGNORE = ["mathjax_ignore", "tex2jax_ignore"]
MATHJAX_PROCESS = ["mathjax_process", "tex2jax_process"]


def checked_math(box: nodes.Element, builder_format: str, allow_html: bool) -> nodes.Element:
    """``box`` marked for MathJax (inside a cell that is kept from it): all of it, as JupyterLab
    typesets an output, where HTML from cells is allowed; else only its math, and only if every
    command is on the allowlist (else :class:`UnsafeMathError`), as for a ``.tex`` file always."""
    if builder_format == "html" and allow_html:
        box["classes"] = [*box["classes"], *MATHJAX_PROCESS]
        return box
    for node in box.findall(lambda n: isinstance(n, (nodes.math, nodes.math_block))):
        found = unsafe_tex(node.astext())
        if found is not None:
            raise UnsafeMathError(f"its math holds {found}")
        if builder_format == "html":
            node["classes"] = [*node["classes"], *MATHJAX_PROCESS]
    return box


def latex_nodes(text: str) -> list[nodes.Node]:
    """A text/latex output as math nodes (MathJax in HTML, native math in LaTeX) and text."""
    out: list[nodes.Node] = []
    para = nodes.paragraph()
    at = 0
    for match in _LATEX_MATH.finditer(text):
        before = text[at : match.start()]
        if before.strip():
            para += nodes.Text(before)
        at = match.end()
        display = match.group("dd") or match.group("bd")
        if display is not None or match.group("env"):
            if len(para):
                out.append(para)
                para = nodes.paragraph()
            body = match.group("env") or display or ""
            block = nodes.math_block(body, body, nowrap=bool(match.group("env")), number=None, label=None)
            out.append(block)
        else:
            inline = match.group("di") or match.group("bi") or ""
            para += nodes.math(inline, inline)
    rest = text[at:]
    if rest.strip():
        para += nodes.Text(rest)
    if len(para):
        out.append(para)
    return out


def _has_lexer(name: str) -> bool:
    from pygments.lexers import get_lexer_by_name
    from pygments.util import ClassNotFound

    if name in {"none", "default"}:
        return True
    try:
        get_lexer_by_name(name)
    except ClassNotFound:
        return False
    return True


#: URL schemes a link in a cell's Markdown may have ("": a relative link, or one in the page).
LINK_SCHEMES = frozenset({"", "http", "https", "mailto", "ftp"})


def markdown_nodes(text: str, builder_format: str, allow_html: bool) -> list[nodes.Node]:
    """A text/markdown output as formatted nodes, parsed by myst-parser (CommonMark, $math$).

    Headings become rubrics (an output is no section of the page), ids are dropped (they would
    clash with the page's), HTML in the Markdown stays HTML only where text/html would, and
    images that a LaTeX build cannot include show their alt text, links other than http(s),
    mailto, ftp or relative ones their text. Without myst-parser the Markdown is shown as text.
    """
    try:
        from docutils.core import publish_doctree
        from myst_parser.parsers.docutils_ import Parser
    except ImportError:
        return [text_block(text, ["livecells-result"])]
    document = publish_doctree(
        text,
        parser=Parser(),
        settings_overrides={
            "myst_enable_extensions": ["dollarmath", "strikethrough"],  # as JupyterLab's GFM
            "myst_all_links_external": True,  # a link is a URL (LINK_SCHEMES below), as in Jupyter
            "doctitle_xform": False,
            "report_level": 5,
            "halt_level": 5,
            "warning_stream": io.StringIO(),
            "file_insertion_enabled": False,
            "raw_enabled": True,  # HTML in the Markdown: kept below, or made text
        },
    )
    _strike_through(document)
    for node in list(document.findall(nodes.Element)):
        for attribute in ("ids", "names", "dupnames", "backrefs"):
            if attribute in node:
                node[attribute] = []
        if isinstance(node, nodes.system_message):
            node.parent.remove(node)
        elif isinstance(node, nodes.raw):
            if not (allow_html and builder_format == "html" and node.get("format") == "html"):
                node.replace_self(nodes.Text(node.astext()))
        elif isinstance(node, nodes.math_block):
            node["number"] = None
        elif isinstance(node, nodes.literal_block):
            # A fence's language (myst names it in the classes) where Pygments knows it, else text.
            named = [c for c in node["classes"] if c != "code"]
            language = node.get("language") or (named[0] if named else "none")
            node["language"] = language if _has_lexer(language) else "none"
        elif isinstance(node, nodes.image) and builder_format == "latex":
            node.replace_self(nodes.Text(node.get("alt", "")))
        elif isinstance(node, nodes.reference) and urlsplit(node.get("refuri", "")).scheme.lower() not in LINK_SCHEMES:
            # A link that runs something where clicked (run:, a PDF's launch action; an app's
            # own scheme): its text only. markdown-it already drops javascript:, file: and data:.
            node.replace_self(nodes.inline("", "", *node.children))
    for section in list(document.findall(nodes.section)):
        title = section.next_node(nodes.title)
        replacement: list[nodes.Node] = []
        for child in section.children:
            if child is title:
                replacement.append(nodes.rubric("", "", *title.children))
            else:
                replacement.append(child)
        section.replace_self(replacement)
    return list(document.children)


def _strike_through(document: nodes.document) -> None:
    """``~~text~~`` (which myst-parser gives as raw ``<s>``...``</s>``) as struck-through text.

    Every builder gets an inline node (``livecells-strike``: a line through it in HTML, plain
    text in LaTeX), so no raw markup is needed; an ``<s>``...``</s>`` written as HTML in the
    Markdown becomes the same (and nothing else is raw any more). Unpaired markers stay raw.
    """
    def marker(node: nodes.Node, tag: str) -> bool:
        return isinstance(node, nodes.raw) and node.get("format") == "html" and node.astext() == tag

    for start in [n for n in document.findall(nodes.raw) if marker(n, "<s>")]:
        parent = start.parent
        if parent is None:
            continue
        siblings = parent.children[parent.index(start) + 1 :]
        end = next((i for i, n in enumerate(siblings) if marker(n, "</s>")), None)
        if end is None:
            continue
        inner = siblings[:end]
        for node in [*inner, siblings[end]]:
            parent.remove(node)
        start.replace_self(nodes.inline("", "", *inner, classes=["livecells-strike"]))




def text_block(text: str, classes: Sequence[str]) -> nodes.literal_block:
    """A preformatted output block, never highlighted."""
    block = nodes.literal_block(text, text, classes=["output", "livecells-output", *classes])
    block["language"] = "none"
    return block
