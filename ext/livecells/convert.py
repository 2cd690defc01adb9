"""``python -m livecells convert``: turn a d2lbook-generated RST chapter into ``live-cell`` form.

d2lbook (``d2lbook build rst --tab all``) writes each framework's cells into HTML tab panels::

    .. raw:: html

        <div class="mdl-tabs__panel is-active" id="pytorch-1-0">

    .. raw:: latex

       \\diilbookstyleinputcell

    .. code:: python

        x = torch.ones(2)

followed by ``.. parsed-literal::`` blocks of class ``output``. The converter replaces each
notebook cell by ``.. live-cell:: <framework>`` (the framework taken from the enclosing panel),
keeps its outputs as recorded outputs, and drops the tab HTML and the d2lbook LaTeX style markers.
Per-framework prose (d2lbook's ``:begin_tab:`` text tabs, such as the "Discussions" link that ends
every d2l chapter) becomes a sphinx-design ``tab-set`` synced with the cells' tabs. Everything
else is kept as it is. A shape it does not understand is kept verbatim, with a warning that names
its line. Converting converted text changes nothing.

A cell outside any panel: in a chapter with tab groups, d2lbook leaves a cell untabbed only when
it ran in every tab (``#@tab all``), so it becomes ``all``; in a chapter without tabs every cell
belongs to one framework, ``default_framework``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path

_EXPLICIT = re.compile(r"\.\.(\s|$)")
_DIRECTIVE = re.compile(r"\.\.\s+([\w.+:-]+?)::(?:\s+(.*?))?\s*$")
_TAB_BAR = re.compile(
    r'<div class="mdl-tabs mdl-js-tabs mdl-js-ripple-effect">'
    r'<div class="mdl-tabs__tab-bar[\w -]*">((?:<a [^>]*>\w+</a>)+)</div>'
)
_TAB_LINK = re.compile(
    r'<a href="#(\w+)-\d+-\d+" onclick="tagClick\(\'(\w+)\'\); return false;" '
    r'class="mdl-tabs__tab[\w -]*">(\w+)</a>'
)
_PANEL = re.compile(r'<div class="mdl-tabs__panel[\w -]*" id="(\w+)-\d+-\d+">')
_LATEX_MARKERS = {"\\diilbookstyleinputcell", "\\diilbookstyleoutputcell"}
#: Roles of blocks that are a cell's output when they follow it.
_OUTPUTS = ("output", "image-output", "html")
#: Tab labels for the prose tab sets (the cells' tabs take theirs from ``livecells_frameworks``).
_LABELS = {"pytorch": "PyTorch", "mxnet": "MXNet", "tensorflow": "TensorFlow", "jax": "JAX"}
#: Warnings for blocks kept as they are, by role.
_KEPT = {
    "panel": "d2lbook tab panel outside a tab group: kept as is",
    "close": "closing </div> outside a tab group: kept as is",
    "bad-html": "d2lbook tab HTML not understood: kept as is",
    "bad-latex": "d2lbook LaTeX style block not understood: kept as is",
    "markdown-code": "python code indented 3 (a markdown code block, not a cell): kept as is",
    "static": "'.. code:: python' with options or without code: kept as is",
}
INDENT = "   "


@dataclass
class ConvertResult:
    """A converted chapter: its text, how many cells it has, and ``source:line`` warnings."""

    text: str
    cells: int = 0
    warnings: list[str] = field(default_factory=list)


@dataclass
class _Block:
    """A run of source lines: blank lines, an explicit-markup block, or other text."""

    kind: str  # "blank" | "explicit" | "text"
    start: int  # index of its first line
    lines: list[str]
    name: str = ""  # directive name, e.g. "raw"
    arg: str = ""
    role: str = "other"
    framework: str = ""

    @property
    def end(self) -> int:
        return self.start + len(self.lines)


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" "))


def _tokenize(lines: list[str]) -> list[_Block]:
    """Split lines into blocks; an explicit-markup block owns its indented body."""
    blocks: list[_Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        j = i + 1
        if not line.strip():
            while j < len(lines) and not lines[j].strip():
                j += 1
            blocks.append(_Block("blank", i, lines[i:j]))
        elif _EXPLICIT.match(line):
            while j < len(lines) and (not lines[j].strip() or lines[j][0] in " \t"):
                j += 1
            while not lines[j - 1].strip():
                j -= 1
            block = _Block("explicit", i, lines[i:j])
            if match := _DIRECTIVE.match(line):
                block.name, block.arg = match[1].lower(), match[2] or ""
            blocks.append(block)
        else:
            while j < len(lines) and lines[j].strip() and not _EXPLICIT.match(lines[j]):
                j += 1
            blocks.append(_Block("text", i, lines[i:j]))
        i = j
    return blocks


def _body(block: _Block) -> tuple[list[str], list[str], int]:
    """Options, content and common indent of a directive's body (docutils' reading of it)."""
    body = block.lines[1:]
    indent = min((_indent(x) for x in body if x.strip()), default=0)
    options: list[str] = []
    k = 0
    while k < len(body) and body[k].strip().startswith(":"):
        options.append(body[k].strip())
        k += 1
    content = [x[indent:] if x.strip() else "" for x in body[k:]]
    while content and not content[0]:
        content.pop(0)
    return options, content, indent


def _classify(block: _Block) -> str:
    """The role of a block in a d2lbook chapter."""
    if block.kind != "explicit" or not block.name:
        return "other"
    options, content, indent = _body(block)
    payload = "\n".join(content).strip()
    if block.name == "raw" and block.arg == "html" and not options:
        if match := _TAB_BAR.fullmatch(payload):
            links = list(_TAB_LINK.finditer(match[1]))
            names_agree = all(x[1] == x[2] == x[3] for x in links)
            if "".join(x[0] for x in links) == match[1] and names_agree:
                return "bar"
        elif match := _PANEL.fullmatch(payload):
            block.framework = match[1]
            return "panel"
        elif payload == "</div>":
            return "close"
        return "bad-html" if ("mdl-tabs" in payload or "tagClick" in payload) else "html"
    if block.name == "raw" and block.arg == "latex":
        if payload in _LATEX_MARKERS and not options:
            return "marker"
        return "bad-latex" if "diilbookstyle" in payload else "other"
    if block.name == "code" and block.arg == "python":
        if options or not content:
            return "static"
        # nbconvert indents notebook cells by 4; pandoc's 3 is a markdown code block.
        return "cell" if indent >= 4 else "markdown-code"
    if block.name == "parsed-literal" and options == [":class: output"]:
        return "output"
    if block.name in ("figure", "image") and os.path.basename(block.arg).startswith("output_"):
        return "image-output"
    if block.name == "live-cell":
        return "live-cell"
    return "other"


class _Converter:
    """One pass over a chapter's blocks, writing the converted lines to ``out``."""

    def __init__(self, text: str, default_framework: str, source: str) -> None:
        self.lines = text.splitlines()
        self.blocks = _tokenize(self.lines)
        self.source = source
        self.warnings: list[str] = []
        self.cells = 0
        for block in self.blocks:
            block.role = _classify(block)
        tabbed = any(b.role == "bar" for b in self.blocks)
        self.untabbed = "all" if tabbed else default_framework
        self.out: list[str] = []
        self.blanks: list[str] = []  # blank lines waiting to be written before the next item
        self.dirty = False  # something was dropped or rewritten since the last item
        self.prev_new = False  # the last item written was new text
        self.after = ""  # "cell", "live-cell" or "": what an output here would belong to

    def warn(self, block: _Block, message: str) -> None:
        self.warnings.append(f"{self.source}:{block.start + 1}: WARNING: {message}")

    def emit(self, lines: list[str], new: bool) -> None:
        """Write an item; around new or dropped text, items are one blank line apart."""
        if self.out or not self.dirty:
            changed = self.dirty or new or self.prev_new
            self.out.extend([""] if self.out and changed else self.blanks)
        self.out.extend(lines)
        self.blanks, self.dirty, self.prev_new = [], False, new

    def run(self) -> ConvertResult:
        """Convert the chapter."""
        stray = ""  # the framework of a panel outside any tab group understood
        i = 0
        while i < len(self.blocks):
            block = self.blocks[i]
            if block.role != "bar":
                if block.role in ("panel", "close"):
                    stray = block.framework
                self.step(block, stray or self.untabbed)
                i += 1
                continue
            end, panels, problem = self.parse_group(i)
            parts = _split_panels(panels) if not problem else None
            if parts is None:
                problem = problem or "its panels interleave prose and cells"
                self.warn(block, f"tab group kept as is: {problem}")
                self.emit(self.lines[block.start : self.blocks[end - 1].end], False)
                self.after = ""
            else:
                self.emit_group(parts)
            i = end
        if not (self.dirty or self.prev_new):
            self.out.extend(self.blanks)
        text = "\n".join(self.out) + "\n" if self.out else ""
        return ConvertResult(text, self.cells, self.warnings)

    def parse_group(self, first: int) -> tuple[int, list[tuple[str, list[_Block]]], str]:
        """Read the tab group whose bar is ``blocks[first]``: (end, panels, problem or "")."""
        panels: list[tuple[str, list[_Block]]] = []
        inside = False
        for j in range(first + 1, len(self.blocks)):
            block = self.blocks[j]
            if block.kind == "blank":
                if inside:
                    panels[-1][1].append(block)
            elif inside and block.role == "close":
                inside = False
            elif inside and block.role not in ("bar", "panel", "bad-html"):
                panels[-1][1].append(block)
            elif not inside and block.role == "panel":
                inside = True
                panels.append((block.framework, []))
            elif not inside and block.role == "close" and panels:
                return j + 1, panels, ""
            else:
                while self.blocks[j - 1].kind == "blank":
                    j -= 1
                return j, [], f"unexpected block at line {block.start + 1}"
        end = len(self.blocks) - (self.blocks[-1].kind == "blank")
        return end, [], "it is never closed"

    def emit_group(self, parts: list[_Panel]) -> None:
        """Write a well-formed tab group: its cells, and its prose as a synced tab set."""
        self.dirty, self.after = True, ""
        prose_first = all(p.prose_first for p in parts)
        if prose_first:
            self.emit_prose_tabs(parts)
        for part in parts:
            self.after = ""
            for block in part.code:
                self.step(block, part.framework)
        if not prose_first:
            self.emit_prose_tabs(parts)
        self.dirty, self.after = True, ""  # the group's closing HTML

    def emit_prose_tabs(self, parts: list[_Panel]) -> None:
        """Write the per-framework prose of a tab group as a ``tab-set`` synced with the cells."""
        if not any(part.prose for part in parts):
            return
        lines = [".. tab-set::", f"{INDENT}:sync-group: framework"]
        for part in parts:
            if not part.prose:
                continue
            label = _LABELS.get(part.framework, part.framework)
            lines += ["", f"{INDENT}.. tab-item:: {label}", f"{INDENT * 2}:sync: {part.framework}"]
            for block in part.prose:
                lines += [""] + [INDENT * 2 + x if x.strip() else "" for x in block.lines]
        self.emit(lines, True)
        self.after = ""

    def step(self, block: _Block, framework: str) -> None:
        """Write one block that is not a tab bar."""
        role = block.role
        if block.kind == "blank":
            self.blanks = block.lines
            return
        if role == "marker":
            self.dirty = True
            return
        if role == "cell":
            _, content, _ = _body(block)
            self.emit([f".. live-cell:: {framework}", ""] + _indented(content), True)
            self.cells += 1
            self.after = "cell"
            return
        if role == "output" and self.after == "cell":
            _, content, _ = _body(block)
            head = [".. parsed-literal::", f"{INDENT}:class: output", ""]
            self.emit(head + _indented(content), True)
            return
        if role in ("image-output", "html") and self.after == "cell":
            self.warn(block, "rich output kept as static content after its cell")
        elif role == "output" and self.after != "live-cell":
            self.warn(block, "output block with no cell before it kept as is")
        elif role in _KEPT:
            self.warn(block, _KEPT[role])
        self.emit(block.lines, False)
        if role == "live-cell":
            self.after = "live-cell"
        elif not (role in _OUTPUTS and self.after):
            self.after = ""


@dataclass
class _Panel:
    """A tab panel split into its cells (with their outputs) and its prose."""

    framework: str
    code: list[_Block]
    prose: list[_Block]
    prose_first: bool


def _split_panels(panels: list[tuple[str, list[_Block]]]) -> list[_Panel] | None:
    """Split each panel; None if prose and cells interleave (they cannot be kept in order)."""
    parts: list[_Panel] = []
    for framework, blocks in panels:
        part = _Panel(framework, [], [], True)
        shape, after = "", False
        for block in blocks:
            if block.kind == "blank" or block.role == "marker":
                continue
            after = block.role == "cell" or (after and block.role in _OUTPUTS)
            (part.code if after else part.prose).append(block)
            kind = "C" if after else "P"
            shape += "" if shape.endswith(kind) else kind
        if shape not in ("", "C", "P", "PC", "CP"):
            return None
        part.prose_first = shape != "CP"
        parts.append(part)
    prose_last = any(not p.prose_first for p in parts)
    if prose_last and any(p.prose and p.prose_first and p.code for p in parts):
        return None
    return parts


def _indented(content: list[str]) -> list[str]:
    return [INDENT + x if x else "" for x in content]


def convert_text(
    text: str, *, default_framework: str = "pytorch", source: str = "<string>"
) -> ConvertResult:
    """Convert one d2lbook-generated RST chapter; ``source`` names it in warnings."""
    return _Converter(text, default_framework, source).run()


def convert_tree(
    src_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    default_framework: str = "pytorch",
) -> dict[Path, ConvertResult]:
    """Convert every ``.rst`` under ``src_dir`` into ``out_dir``, copying other files as is.

    Returns the result per converted file (relative path). ``out_dir`` may be ``src_dir``
    (in-place conversion) or lie inside it (it is then not walked). Hidden folders are skipped.
    """
    src, out = Path(src_dir).resolve(), Path(out_dir).resolve()
    results: dict[Path, ConvertResult] = {}
    for root, dirs, files in os.walk(src):
        here = Path(root)
        dirs[:] = sorted(
            d for d in dirs if not d.startswith(".") and ((here / d) != out or out == src)
        )
        for name in sorted(files):
            path = here / name
            rel = path.relative_to(src)
            target = out / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".rst"):
                try:
                    text = path.read_text(encoding="utf-8")
                except UnicodeDecodeError as err:
                    raise ValueError(f"{path} is not UTF-8: {err.reason}") from err
                source = str(Path(src_dir) / rel)
                result = convert_text(text, default_framework=default_framework, source=source)
                target.write_text(result.text, encoding="utf-8")
                results[rel] = result
            elif target != path:
                shutil.copy2(path, target)
    return results


def add_subcommand(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Register ``convert`` on the ``python -m livecells`` parser."""
    parser = subparsers.add_parser(
        "convert",
        help="turn d2lbook-generated RST into live-cell directives",
        description="Read a chapter (or a tree of .rst files) as d2lbook emits it and write "
        "it with '.. live-cell::' directives, keeping the outputs as recorded outputs.",
    )
    parser.add_argument("input", metavar="IN", help="an .rst file or a directory")
    parser.add_argument(
        "-o", "--output", metavar="OUT",
        help="output file or directory (default for a file: stdout; required for a directory)",
    )
    parser.add_argument(
        "--default-framework", metavar="NAME", default="pytorch",
        help="framework of the cells in a chapter without tabs (default: pytorch)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Run ``convert``: 0 on success (warnings or not), 2 for unreadable input, 1 if unwritable."""
    src = Path(args.input)
    if src.is_dir():
        if not args.output:
            print(f"livecells convert: {src} is a directory: give -o OUT", file=sys.stderr)
            return 2
        try:
            results = convert_tree(src, args.output, default_framework=args.default_framework)
        except ValueError as err:
            print(f"livecells convert: {err}", file=sys.stderr)
            return 2
        except OSError as err:
            print(f"livecells convert: {err}", file=sys.stderr)
            written = Path(args.output).resolve()
            failed = Path(err.filename or written).resolve()
            return 1 if failed.is_relative_to(written) and written != src.resolve() else 2
        warnings = [w for r in results.values() for w in r.warnings]
    else:
        try:
            text = src.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            print(f"livecells convert: cannot read {src}: {err}", file=sys.stderr)
            return 2
        result = convert_text(text, default_framework=args.default_framework, source=str(src))
        warnings = result.warnings
        try:
            if args.output:
                Path(args.output).write_text(result.text, encoding="utf-8")
            else:
                sys.stdout.write(result.text)
        except OSError as err:
            print(f"livecells convert: cannot write {args.output}: {err}", file=sys.stderr)
            return 1
    for warning in warnings:
        print(warning, file=sys.stderr)
    return 0
