"""Converting a chapter or a tree of them: which reader, the walk, and ``convert``'s driver.

A chapter is read by its format's reader: d2lbook's RST (:mod:`livecells.convert.rst`) or
d2lbook's Markdown (:mod:`livecells.convert.markdown`). Which one is chosen here, in one place
(:func:`source_format`). The exit status follows one policy for both: 0 when everything was
converted (warnings or not), 2 for a usage error or an input that cannot be read (a missing file,
a file that is not UTF-8), 1 when the output cannot be written. A tree's ``config.ini`` settings
that livecells has values for go into the output's conf.py (:mod:`livecells.convert.book_conf`).
"""

from __future__ import annotations

import os
import shutil
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Literal

from livecells.convert.book_conf import conf_values, write_conf
from livecells.convert.markdown import book_ini, book_tabs, convert_markdown
from livecells.convert.md_blocks import is_d2lbook_markdown
from livecells.convert.result import Result
from livecells.convert.rst import convert_text
from livecells.errors import UnreadableError

Format = Literal["markdown", "rst"]
#: What the exit status says (see the module's docstring).
OK, UNWRITABLE, UNREADABLE = 0, 1, 2


def source_format(path: str | os.PathLike[str]) -> Format:
    """The format ``convert IN`` reads when not told: ``markdown`` for an ``.md`` file or a folder
    with an ``.md`` file that has d2lbook's cell markers (a tree of d2lbook RST may hold other
    ``.md`` files), else ``rst``."""
    path = Path(path)
    if not path.is_dir():
        return "markdown" if path.suffix == ".md" else "rst"
    for md in path.rglob("*.md"):
        if "_build" in md.parts or any(p.startswith(".") for p in md.relative_to(path).parts):
            continue
        try:
            if is_d2lbook_markdown(md.read_text(encoding="utf-8")):
                return "markdown"
        except (OSError, UnicodeDecodeError):
            continue
    return "rst"


def read_chapter(path: str | os.PathLike[str]) -> str:
    """A chapter's text (a byte-order mark dropped); :class:`UnreadableError` says why not."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise UnreadableError(f"{path} is not UTF-8: {err.reason}") from err
    except OSError as err:
        raise UnreadableError(f"cannot read {path}: {err}") from err


def convert_chapter(
    text: str, source: str, *, markdown: bool, tabs: list[str] | None, default_framework: str
) -> Result:
    """Convert one chapter: with the markdown reader when ``markdown``, else the RST one."""
    if markdown:
        return convert_markdown(text, tabs=tabs, default_framework=default_framework, source=source)
    return convert_text(text, default_framework=default_framework, source=source)


def convert_tree(
    src_dir: str | os.PathLike[str],
    out_dir: str | os.PathLike[str],
    *,
    markdown: bool = False,
    tabs: list[str] | None = None,
    default_framework: str = "pytorch",
    warn: Callable[[str], None] | None = None,
) -> dict[Path, Result]:
    """Convert every chapter under ``src_dir`` into ``out_dir``, copying other files as they are.

    The chapters are the ``.rst`` files, and with ``markdown`` the ``.md`` files too (d2lbook
    markdown, the book's frameworks ``tabs``, by default those of its ``config.ini``). Returns
    the result per chapter (relative path). ``out_dir`` may be ``src_dir`` (in place) or lie
    inside it (it is then not walked). Hidden folders and ``_build`` are skipped. A linked folder
    (``img -> ../shared-img``) is copied as a folder, its files followed, unless following it
    would loop (it holds a folder it is reached from) or, in place, write outside the tree: then
    ``warn`` (default: stderr) names it, as it names a broken link or a named pipe (which would
    block the copy). An input that cannot be read raises :class:`UnreadableError`; an output that
    cannot be written, :class:`OSError`.
    """
    say = warn or (lambda message: print(f"livecells convert: {message}", file=sys.stderr))
    src, out = Path(src_dir).resolve(), Path(out_dir).resolve()
    if markdown:
        tabs = tabs or book_tabs(src)
    suffixes = (".rst", ".md") if markdown else (".rst",)
    results: dict[Path, Result] = {}
    for root, dirs, files in os.walk(src, followlinks=True):
        here = Path(root)
        # The real folders this one is reached through: a link to any of them is a loop.
        through = {p.resolve() for p in [here, *here.parents] if p.is_relative_to(src)}
        kept = []
        for name in sorted(d for d in dirs if not d.startswith(".") and d != "_build"):
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
                if name.endswith(suffixes):
                    say(f"{Path(src_dir) / rel}: a link to {path.resolve()}: not converted in place")
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            if name.endswith(suffixes):
                result = convert_chapter(
                    read_chapter(path), str(Path(src_dir) / rel), markdown=name.endswith(".md"),
                    tabs=tabs, default_framework=default_framework,
                )
                target.write_text(result.text, encoding="utf-8")
                results[rel] = result
            elif target != path:
                _copy(path, target)
    _carry_settings(src, out, results, tabs or book_tabs(src) or [default_framework], markdown, say)
    return results


def _carry_settings(
    src: Path, out: Path, results: dict[Path, Result], tabs: list[str], markdown: bool, say: Callable[[str], None]
) -> None:
    """The settings of the book's ``config.ini`` that livecells has values for, into ``out``'s
    conf.py (:mod:`livecells.convert.book_conf`)."""
    ini = book_ini(src)
    if ini is None:
        return
    requires = {rel.with_suffix("").as_posix(): r.requires for rel, r in sorted(results.items()) if r.requires}
    values = conf_values(ini, tabs, requires, say, src)
    conf, theirs = write_conf(out, values, ["myst_parser", "livecells"] if markdown else ["livecells"])
    written = [name for name in values if name not in theirs]
    if conf is not None and written:
        say(f"{conf}: {', '.join(written)} from config.ini")
    if theirs:
        say(f"{out / 'conf.py'}: sets {', '.join(theirs)} itself: config.ini's left out")


def _copy(path: Path, target: Path) -> None:
    """Copy a file that is not a chapter: a source that cannot be read is :class:`UnreadableError`.

    The copy is the owner's to change, as the converted chapters are, whatever the source's
    mode: a read-only source (a shared corpus) must not make the next ``convert`` into the same
    output, or an edit of the copy, fail for any user but root."""
    try:
        shutil.copy2(path, target)
        target.chmod(stat.S_IMODE(target.stat().st_mode) | stat.S_IWUSR)
    except OSError as err:
        if err.filename is not None and Path(err.filename) == path:
            raise UnreadableError(f"cannot read {path}: {err.strerror}") from err
        raise


def run(
    input_path: str | os.PathLike[str],
    output: str | os.PathLike[str] | None = None,
    *,
    default_framework: str = "pytorch",
    source: Format | Literal["auto"] = "auto",
) -> int:
    """``convert IN [-o OUT]``: the exit status as the module's docstring says.

    ``source`` is the format read (``auto``: :func:`source_format`). The converted text goes to
    ``output`` (for a file, stdout without one); the warnings and one summary line per chapter
    go to stderr.
    """
    src = Path(input_path)
    markdown = (source_format(src) if source == "auto" else source) == "markdown"
    try:
        if src.is_dir():
            if not output:
                print(f"livecells convert: {src} is a directory: give -o OUT", file=sys.stderr)
                return UNREADABLE
            results = convert_tree(src, output, markdown=markdown, default_framework=default_framework)
            named = [(str(src / rel), result) for rel, result in results.items()]
        else:
            text = read_chapter(src)
            if markdown and not is_d2lbook_markdown(text):
                notice = f"{src}: no d2lbook cell markers; only its marks are converted"
                print(f"livecells convert: {notice}", file=sys.stderr)
            result = convert_chapter(
                text, str(src), markdown=markdown, tabs=book_tabs(src) if markdown else None,
                default_framework=default_framework,
            )
            named = [(str(src), result)]
            if output:
                Path(output).write_text(result.text, encoding="utf-8")
            else:
                sys.stdout.write(result.text)
    except UnreadableError as err:
        print(f"livecells convert: {err}", file=sys.stderr)
        return UNREADABLE
    except OSError as err:
        print(f"livecells convert: cannot write {err.filename or output}: {err.strerror or err}", file=sys.stderr)
        return UNWRITABLE
    for _, result in named:
        for warning in result.warnings:
            print(warning, file=sys.stderr)
    for name, result in named:
        print(result.summary(name), file=sys.stderr)
    return OK
