"""Turn a d2lbook-generated RST chapter into ``live-cell`` form (``python -m livecells convert``).

d2lbook 1.0 (``d2lbook build rst --tab all``) writes each framework's cells, and its
``:begin_tab:`` prose, into HTML tab panels: a group is a tab bar, one panel per tab and a
closing ``</div>``, each a ``.. raw:: html`` block. A cell is a ``.. code:: python`` block (after a
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
text changes nothing. The tree walk and the command line's driver are in
:mod:`livecells.convert.tree`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from livecells.convert.gpus import infer_gpus, settings_lines
from livecells.convert.result import Result

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
class ConvertResult(Result):
    """A converted RST chapter, with what was converted (``cells``: an ``all`` cell once)."""

    cells_in: int = 0  # d2lbook cells (``.. code:: python`` blocks) in the source
    frameworks: dict[str, int] = field(default_factory=dict)  # cells converted per framework
    outputs: int = 0  # recorded text outputs kept
    figures: int = 0  # recorded figure outputs kept
    prose: int = 0  # framework prose blocks (``live-text``) written
    kept: int = 0  # ``live-cell``s already there (a converted chapter), left as they are

    def converted(self, source: str) -> str:
        """Cells in and out, outputs kept, prose blocks written."""
        out = ", ".join(f"{n} {name}" for name, n in self.frameworks.items()) or "none"
        already = f" ({self.kept} live-cells already there, kept)" if self.kept else ""
        return (
            f"{source}: {self.cells_in} cells in{already}; cells out: {out}; "
            f"recorded outputs kept: {self.outputs} text, {self.figures} figures; "
            f"framework prose blocks: {self.prose}"
        )


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
