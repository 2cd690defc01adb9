"""``python -m livecells convert``: turn a d2lbook-generated RST chapter into ``live-cell`` form.

d2lbook 1.0 (``d2lbook build rst --tab all``) writes each framework's cells, and its
``:begin_tab:`` prose, into HTML tab panels: a group is a tab bar, one panel per tab and a
closing ``</div>``, each a ``.. raw:: html`` block (the shape is described in
``shared/d2l-corpus/README.md``). A cell is a ``.. code:: python`` block (after a
``\\diilbookstyleinputcell`` LaTeX marker), followed by its outputs: ``.. parsed-literal::`` blocks
of class ``output`` and bare ``.. figure:: output_<stem>_<sha>_<n>_0.svg`` images.

The converter walks each panel in order and writes, in place:

- each cell as ``.. live-cell:: <framework>`` (the framework of its panel), its code unchanged;
- each output right after its cell, as a recorded output: text as ``.. parsed-literal::`` of
  class ``output`` (the directive shows it literally), an image as the same bare figure;
- each run of prose between them as ``.. live-text:: <framework>`` (framework prose), so that
  the frameworks' prose and cells stay adjacent and form one tab group again;
- and it drops the tab HTML and the d2lbook LaTeX style markers.

A cell outside any panel: in a chapter with tab groups, d2lbook leaves a cell untabbed only when
its code is the same in every tab and it has no output (``merge_tab_notebooks``), so it becomes
``all``; in a chapter without tabs every cell belongs to one framework, ``default_framework``.
Where the converted code asks for two devices or more (``gpu(1)``, ``'cuda:1'``, ...), an explicit
``.. live-settings:: :gpus: N`` is written under the title, with a comment that says it was
inferred (see :mod:`livecells.convert.gpus`). Everything else is kept as it is. A shape it
does not understand is kept verbatim, with a warning that names its line. Converting converted
text changes nothing.

Its size (about 580 lines) is the grammar of one input format, d2lbook's RST, read in one pass;
the tree walk and the command line come at the end. Split, the shapes it knows would no longer
read side by side.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from livecells.convert.gpus import GpuInference, infer_gpus, settings_lines, where

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
#: A recorded image output as d2lbook writes it (nbconvert's name, ``image`` made ``figure``).
_IMAGE_OUTPUT = re.compile(r"output_[\w.+-]*_\d+_\d+\.(?:svg|png|jpe?g|gif|pdf)")
#: Warnings for blocks kept as they are, by role.
_KEPT = {
    "panel": "d2lbook tab panel outside a tab group: kept as is",
    "close": "closing </div> outside a tab group: kept as is",
    "bad-html": "d2lbook tab HTML not understood: kept as is",
    "bad-latex": "d2lbook LaTeX style block not understood: kept as is",
    "markdown-code": "python code indented 3 (a markdown code block, not a cell): kept as is",
    "static": "'.. code:: python' with options or without code: kept as is",
}
#: livecells records text and figure outputs only: other outputs stay, beside the live one.
_NOT_RECORDED = {
    role: f"{kind} output kept as static content after its cell, shown beside its live output: "
    "it is not a recorded output (text and figure outputs are)"
    for role, kind in (("html", "HTML"), ("math-output", "math"))
}
INDENT = "   "


@dataclass
class ConvertResult:
    """A converted chapter: its text, what was converted, and ``source:line`` warnings."""

    text: str
    cells: int = 0  # cells converted (an ``all`` cell once)
    warnings: list[str] = field(default_factory=list)
    cells_in: int = 0  # d2lbook cells (``.. code:: python`` blocks) in the source
    frameworks: dict[str, int] = field(default_factory=dict)  # cells converted per framework
    outputs: int = 0  # recorded text outputs kept
    figures: int = 0  # recorded figure outputs kept
    prose: int = 0  # framework prose blocks (``live-text``) written
    kept: int = 0  # ``live-cell``s already there (a converted chapter), left as they are
    gpus: int | None = None  # the ``:gpus:`` written, if any
    settings_kept: bool = False  # the chapter has a ``live-settings`` already: not changed
    gpu_inference: GpuInference = field(default_factory=GpuInference)

    def summary(self, source: str) -> str:
        """One line for the report: cells in and out, outputs kept, settings inferred."""
        out = ", ".join(f"{n} {name}" for name, n in self.frameworks.items()) or "none"
        already = f" ({self.kept} live-cells already there, kept)" if self.kept else ""
        text = (
            f"{source}: {self.cells_in} cells in{already}; cells out: {out}; "
            f"recorded outputs kept: {self.outputs} text, {self.figures} figures; "
            f"framework prose blocks: {self.prose}"
        )
        inference = self.gpu_inference
        if self.gpus:
            text += f"; inferred live-settings :gpus: {self.gpus} from {where(inference.evidence)}"
        elif self.settings_kept:
            text += f"; its live-settings kept (the code asks for {inference.gpus} devices)"
        if inference.ignored:
            text += f"; not counted as devices: {where(inference.ignored)}"
        return text


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
    body = _expanded(block.lines[1:])
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
    if block.name == "figure" and len(block.lines) == 1 and _IMAGE_OUTPUT.fullmatch(block.arg):
        return "image-output"  # bare: a figure with options or a caption is content
    if block.name == "live-cell":
        return "live-cell"
    if block.name == "math" and payload.startswith("\\displaystyle"):
        return "math-output"  # IPython's Math display as nbconvert writes it (after a cell)
    return "other"


class _Converter:
    """One pass over a chapter's blocks, writing the converted lines to ``out``."""

    def __init__(self, lines: list[str], default_framework: str, source: str) -> None:
        self.lines = lines
        self.blocks = _tokenize(self.lines)
        self.source = source
        self.result = ConvertResult("")
        self.code: list[tuple[int, list[str]]] = []  # converted cells: first line, code
        for block in self.blocks:
            block.role = _classify(block)
        self.result.cells_in = sum(1 for b in self.blocks if b.role == "cell")
        self.result.kept = sum(1 for b in self.blocks if b.role == "live-cell")
        tabbed = any(b.role == "bar" for b in self.blocks)
        self.untabbed = "all" if tabbed else default_framework
        self.out: list[str] = []
        self.blanks: list[str] = []  # blank lines waiting to be written before the next item
        self.dirty = False  # something was dropped or rewritten since the last item
        self.prev_new = False  # the last item written was new text
        self.after = ""  # "cell", "live-cell" or "": what an output here would belong to

    def warn(self, block: _Block, message: str) -> None:
        self.result.warnings.append(f"{self.source}:{block.start + 1}: WARNING: {message}")

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
            if problem:
                self.warn(block, f"tab group kept as is: {problem}")
                self.emit(self.lines[block.start : self.blocks[end - 1].end], False)
                self.after = ""
            else:
                self.emit_group(panels)
            i = end
        if not (self.dirty or self.prev_new):
            self.out.extend(self.blanks)
        self.add_settings()
        self.result.text = "\n".join(self.out) + "\n" if self.out else ""
        return self.result

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

    def emit_group(self, panels: list[tuple[str, list[_Block]]]) -> None:
        """Write a well-formed tab group, panel by panel, in place: cells, outputs and prose.

        A panel's cells become ``live-cell``s of its framework, each followed by its recorded
        outputs; each run of prose between them becomes a ``live-text`` of that framework, where
        it was. The frameworks' cells and prose stay adjacent, so they form one tab group again.
        """
        self.dirty, self.after = True, ""  # the group's opening HTML
        for framework, blocks in panels:
            self.after = ""
            prose: list[_Block] = []
            for block in blocks:
                role = block.role
                if block.kind == "blank":
                    if prose and prose[-1].kind != "blank":  # (a marker dropped between)
                        prose.append(block)
                elif role == "marker":
                    self.dirty = True
                elif role in ("html", "math-output") and self.after == "cell" and not prose:
                    # Kept as the framework's prose: raw HTML between two cells would split the
                    # tab set, and the output would show under every framework's tab.
                    self.warn(block, _NOT_RECORDED[role] + f", in the {framework} tab")
                    prose.append(block)
                    self.emit_prose(prose, framework)
                    prose = []
                elif role == "cell" or (role in _OUTPUTS and self.after == "cell" and not prose):
                    self.emit_prose(prose, framework)
                    prose = []
                    self.step(block, framework)
                elif _has_title(block):
                    self.emit_prose(prose, framework)
                    prose = []
                    self.warn(block, f"a section title in the {framework} tab cannot be "
                              "framework prose: kept outside it, shown for every framework")
                    self.emit(_expanded(block.lines), True)
                    self.after = ""
                else:
                    if role in ("output", "image-output"):
                        self.warn(block, f"output block with no cell before it kept as "
                                  f"{framework} prose")
                    elif role in _KEPT and role not in ("panel", "close"):
                        self.warn(block, _KEPT[role])
                    prose.append(block)
            self.emit_prose(prose, framework)
        self.dirty, self.after = True, ""  # the group's closing HTML

    def emit_prose(self, prose: list[_Block], framework: str) -> None:
        """Write a run of a panel's prose as ``.. live-text:: framework``."""
        while prose and prose[-1].kind == "blank":
            prose.pop()
        if not prose:
            return
        content = _expanded([line for block in prose for line in block.lines])
        self.emit([f".. live-text:: {framework}", ""] + _indented(content), True)
        self.result.prose += 1
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
            self.result.cells += 1
            self.result.frameworks[framework] = self.result.frameworks.get(framework, 0) + 1
            self.code.append((block.start + 1 + _first_content(block), content))
            self.after = "cell"
            return
        if role == "output" and self.after == "cell":
            _, content, _ = _body(block)
            head = [".. parsed-literal::", f"{INDENT}:class: output", ""]
            self.emit(head + _indented(content), True)
            self.result.outputs += 1
            return
        if role == "image-output" and self.after == "cell":
            self.emit(block.lines, True)
            self.result.figures += 1
            return
        if role in ("html", "math-output") and self.after == "cell":
            self.warn(block, _NOT_RECORDED[role])
        elif role in ("output", "image-output") and self.after != "live-cell":
            self.warn(block, "output block with no cell before it kept as is")
        elif role in _KEPT:
            self.warn(block, _KEPT[role])
        self.emit(block.lines, False)
        if role == "live-cell":
            self.after = "live-cell"
        elif not (role in _OUTPUTS and self.after):
            self.after = ""

    def add_settings(self) -> None:
        """Write the ``live-settings`` that the converted cells' devices ask for, if any."""
        inference = infer_gpus(self.code)
        self.result.gpu_inference = inference
        if not inference.settings:
            return
        if any(b.name == "live-settings" for b in self.blocks):
            self.result.settings_kept = True
            return
        block = settings_lines(inference, INDENT)
        at = _after_first_title(self.out)
        if at < len(self.out) and self.out[at].strip():
            block = block + [""]
        self.out[at:at] = ([""] if at else []) + block
        self.result.gpus = inference.gpus


def _first_content(block: _Block) -> int:
    """The offset in ``block.lines`` of its directive's first line of content."""
    body = block.lines[1:]
    k = 0
    while k < len(body) and (not body[k].strip() or body[k].strip().startswith(":")):
        k += 1
    return k + 1


_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1{2,}\s*")


def _has_title(block: _Block) -> bool:
    """Whether a text block holds a section title or a transition (no directive may)."""
    return block.kind == "text" and any(_ADORNMENT.fullmatch(x) for x in block.lines)


def _after_first_title(out: list[str]) -> int:
    """The index just after the first section title's underline in ``out`` (0 if none)."""
    for i in range(1, len(out)):
        line, title = out[i], out[i - 1]
        if (
            _ADORNMENT.fullmatch(line)
            and title.strip()
            and not title[0].isspace()
            and not _ADORNMENT.fullmatch(title)
            and (i < 2 or not out[i - 2].strip() or _ADORNMENT.fullmatch(out[i - 2]))
        ):
            return i + 1
    return 0


def _expanded(lines: list[str]) -> list[str]:
    """Lines with tabs expanded as docutils expands them (before their indentation changes)."""
    return [x.expandtabs(8) if "\t" in x else x for x in lines]


def _indented(content: list[str]) -> list[str]:
    return [INDENT + x if x else "" for x in content]


def convert_text(
    text: str, *, default_framework: str = "pytorch", source: str = "<string>"
) -> ConvertResult:
    """Convert one d2lbook-generated RST chapter; ``source`` names it in warnings."""
    text = text[1:] if text.startswith("\ufeff") else text
    lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    if lines[-1] == "":
        lines.pop()
    return _Converter(lines, default_framework, source).run()


def convert_tree(
    src_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    default_framework: str = "pytorch",
    warn: Callable[[str], None] | None = None,
) -> dict[Path, ConvertResult]:
    """Convert every ``.rst`` under ``src_dir`` into ``out_dir``, copying other files as is.

    Returns the result per converted file (relative path). ``out_dir`` may be ``src_dir``
    (in-place conversion) or lie inside it (it is then not walked). Hidden folders are skipped.
    A linked folder (``img -> ../shared-img``) is copied as a folder, its files followed, unless
    following it would loop (it holds a folder it is reached from) or, in place, write outside
    the tree: then ``warn`` (default: stderr) names it, as it names a broken link or a named
    pipe (which would block the copy).
    """
    say = warn or (lambda message: print(f"livecells convert: {message}", file=sys.stderr))
    src, out = Path(src_dir).resolve(), Path(out_dir).resolve()
    results: dict[Path, ConvertResult] = {}
    for root, dirs, files in os.walk(src, followlinks=True):
        here = Path(root)
        # The real folders this one is reached through: a link to any of them is a loop.
        through = {p.resolve() for p in [here, *here.parents] if p.is_relative_to(src)}
        kept = []
        for name in sorted(d for d in dirs if not d.startswith(".")):
            path = here / name
            real = path.resolve()
            if out != src and real.is_relative_to(out):
                continue  # the output folder (or a link into it) is not input
            if path.is_symlink():
                shown = Path(src_dir) / path.relative_to(src)
                if any(p.is_relative_to(real) for p in through):
                    say(f"{shown}: a link to {real}, which holds this folder: not followed (it would loop)")
                    continue
                if out == src:
                    say(f"{shown}: a link to {real}: not converted in place (it lies outside the tree)")
                    continue
            kept.append(name)
        dirs[:] = kept
        for name in sorted(files):
            path = here / name
            rel = path.relative_to(src)
            target = out / rel
            if not path.exists():
                say(f"{Path(src_dir) / rel}: a broken link: not copied")
                continue
            if not path.is_file():
                say(f"{Path(src_dir) / rel}: not a file (a named pipe, a socket, a device): not copied")
                continue
            if out == src and path.is_symlink():
                if name.endswith(".rst"):
                    say(f"{Path(src_dir) / rel}: a link to {path.resolve()}: not converted in place")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(".rst"):
                try:
                    text = path.read_text(encoding="utf-8-sig")
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
        "it with '.. live-cell::' directives, keeping the outputs as recorded outputs and each "
        "tab's prose as '.. live-text::'; where the code asks for several GPUs, it writes "
        "'.. live-settings:: :gpus: N' and says so. The warnings and a summary per chapter go "
        "to stderr.",
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


def read_chapter(src: Path) -> str | None:
    """A chapter's text (a BOM dropped); None after saying why it cannot be read."""
    try:
        return src.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as err:
        print(f"livecells convert: cannot read {src}: {err}", file=sys.stderr)
        return None


def write_converted(text: str, output: str | None) -> bool:
    """Write a converted chapter to ``output`` (stdout without one); False after saying why not."""
    try:
        if output:
            Path(output).write_text(text, encoding="utf-8")
        else:
            sys.stdout.write(text)
    except OSError as err:
        print(f"livecells convert: cannot write {output}: {err}", file=sys.stderr)
        return False
    return True


def run(args: argparse.Namespace) -> int:
    """Run ``convert``: 0 on success (warnings or not), 2 for unreadable input, 1 if unwritable.

    The converted text goes to ``-o`` (or stdout); the warnings and one summary line per
    chapter go to stderr.
    """
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
        named = [(str(src / rel), result) for rel, result in results.items()]
    else:
        text = read_chapter(src)
        if text is None:
            return 2
        result = convert_text(text, default_framework=args.default_framework, source=str(src))
        named = [(str(src), result)]
        if not write_converted(result.text, args.output):
            return 1
    for _, result in named:
        for warning in result.warnings:
            print(warning, file=sys.stderr)
    for source, result in named:
        print(result.summary(source), file=sys.stderr)
    return 0
