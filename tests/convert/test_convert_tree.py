"""``livecells.convert.tree``: one walk, one driver and one exit status for both formats.

The readers have their own tests (test_convert.py for RST, test_markdown.py for Markdown); these
check what the two share: which reader a source gets, what a tree walk keeps and skips, the
result's report line, and the exit status of ``python -m livecells convert``.
"""

from __future__ import annotations

import errno
import shutil
import stat
from pathlib import Path

import pytest

from livecells.cli.main import main
from livecells.convert.markdown import MarkdownResult, convert_markdown
from livecells.convert.rst import ConvertResult
from livecells.convert.tree import convert_tree, source_format

from paths import DATA

RST = DATA / "convert" / "untabbed.d2lbook.rst"
CHAPTER = "# Title\n\n```{.python .input}\n#@tab pytorch\nx = 1\n```\n"
TWO_GPUS = "# GPUs\n\n```{.python .input}\n#@tab pytorch\nx = try_gpu(1)\n```\n"


def md_book(root: Path) -> Path:
    (root / "chapter").mkdir(parents=True)
    (root / "chapter" / "one.md").write_text(CHAPTER, encoding="utf-8")
    (root / "chapter" / "old.rst").write_text(RST.read_text(encoding="utf-8"), encoding="utf-8")
    (root / "config.ini").write_text("[build]\ntabs = pytorch, mxnet\n", encoding="utf-8")
    return root


def test_the_reader_is_chosen_in_one_place(tmp_path: Path) -> None:
    book = md_book(tmp_path / "book")
    assert source_format(book) == "markdown"
    assert source_format(book / "chapter" / "one.md") == "markdown"
    assert source_format(book / "chapter" / "old.rst") == "rst"
    (book / "chapter" / "one.md").write_text("# Just prose\n", encoding="utf-8")
    assert source_format(book) == "rst"  # an .md file without d2lbook's markers: an RST tree


def test_a_markdown_tree_gives_each_format_its_own_result(tmp_path: Path) -> None:
    results = convert_tree(md_book(tmp_path / "book"), tmp_path / "out", markdown=True)
    md, rst = results[Path("chapter/one.md")], results[Path("chapter/old.rst")]
    assert isinstance(md, MarkdownResult) and md.cells == 1
    assert isinstance(rst, ConvertResult) and rst.cells_in == 2  # not wrapped: its counts kept
    assert "2 cells in; cells out: 2 pytorch" in rst.summary("old.rst")
    assert (tmp_path / "out" / "config.ini").is_file()


def test_a_markdown_tree_follows_linked_folders_as_an_rst_tree_does(tmp_path: Path) -> None:
    book, shared = md_book(tmp_path / "book"), tmp_path / "shared"
    (shared / "deeper").mkdir(parents=True)
    (shared / "figure.svg").write_bytes(b"<svg/>")
    (shared / "deeper" / "linked.md").write_text(CHAPTER, encoding="utf-8")
    (shared / "deeper" / "back").symlink_to("../../shared")  # a loop through the link
    (book / "img").symlink_to("../shared")
    said: list[str] = []
    results = convert_tree(book, tmp_path / "out", markdown=True, warn=said.append)
    assert (tmp_path / "out" / "img" / "figure.svg").read_bytes() == b"<svg/>"
    assert results[Path("img/deeper/linked.md")].cells == 1
    assert said == [
        f"{book}/img/deeper/back: a link to {shared}, which holds this folder: not followed (it would loop)",
        f"{tmp_path / 'out' / 'conf.py'}: livecells_frameworks from config.ini",  # its [build] tabs
    ]


def test_build_output_is_not_input_in_either_format(tmp_path: Path) -> None:
    for markdown in (False, True):
        book = md_book(tmp_path / f"book{markdown}")
        (book / "_build" / "rst").mkdir(parents=True)
        shutil.copy(RST, book / "_build" / "rst" / "built.rst")
        results = convert_tree(book, tmp_path / f"out{markdown}", markdown=markdown)
        assert Path("_build/rst/built.rst") not in results
        assert not (tmp_path / f"out{markdown}" / "_build").exists()


def test_copies_of_a_read_only_source_are_the_owners_to_change(tmp_path: Path) -> None:
    """A corpus shared read-only (CI's ../shared) converted twice into one output: the second
    run failed with EACCES for every user but root, as did an edit of a copy."""
    book = md_book(tmp_path / "book")
    (book / "d2l.bib").write_text("@book{x, title={X}}\n", encoding="utf-8")
    (book / "run.sh").write_text("#!/bin/sh\n", encoding="utf-8")
    (book / "d2l.bib").chmod(0o444)
    (book / "run.sh").chmod(0o555)
    out = tmp_path / "out"
    first = convert_tree(book, out, markdown=True)
    assert stat.S_IMODE((out / "d2l.bib").stat().st_mode) == 0o644  # the source's, and its owner's write
    assert stat.S_IMODE((out / "run.sh").stat().st_mode) == 0o755
    assert convert_tree(book, out, markdown=True).keys() == first.keys()
    assert (out / "d2l.bib").read_text(encoding="utf-8") == "@book{x, title={X}}\n"


def test_settings_kept_and_written_are_reported_alike_in_both_formats() -> None:
    once = convert_markdown(TWO_GPUS)
    assert once.gpus == 2 and "inferred live-settings :gpus: 2 from try_gpu(1) (line 5)" in once.summary("c.md")
    assert convert_markdown(once.text).text == once.text
    own = convert_markdown(TWO_GPUS + "\n```{live-settings}\n:gpus: 4\n```\n")  # the author's own
    assert own.gpus is None and own.settings_kept and own.text.count("live-settings") == 1
    assert "its live-settings kept (the code asks for 2 devices)" in own.summary("c.md")


def test_from_says_which_reader(tmp_path: Path, capsys) -> None:
    book = md_book(tmp_path / "book")
    assert main(["convert", str(book), "--from", "rst", "-o", str(tmp_path / "rst")]) == 0
    assert (tmp_path / "rst" / "chapter" / "one.md").read_text(encoding="utf-8") == CHAPTER  # copied
    assert "live-cell:: pytorch" in (tmp_path / "rst" / "chapter" / "old.rst").read_text(encoding="utf-8")
    chapter = tmp_path / "chapter.txt"
    chapter.write_text(CHAPTER, encoding="utf-8")
    assert main(["convert", str(chapter), "--from", "markdown"]) == 0
    assert capsys.readouterr().out.startswith("# Title\n\n```{live-cell} pytorch\n")


@pytest.mark.parametrize("markdown", [False, True])
def test_one_exit_status_for_both_formats(tmp_path: Path, markdown: bool, monkeypatch, capsys) -> None:
    """2: usage or input that cannot be read; 1: output that cannot be written (in place too)."""
    book = md_book(tmp_path / "book")
    form = ["--from", "markdown" if markdown else "rst"]
    assert main(["convert", str(book), *form]) == 2  # a tree needs -o
    (book / "img.svg").write_bytes(b"<svg/>")
    real_copy = shutil.copy2

    def copy_fails_reading(src, dst, **kwargs):
        if Path(src).name == "img.svg":
            raise PermissionError(errno.EACCES, "Permission denied", str(src))
        return real_copy(src, dst, **kwargs)

    monkeypatch.setattr(shutil, "copy2", copy_fails_reading)
    assert main(["convert", str(book), *form, "-o", str(tmp_path / "out")]) == 2
    monkeypatch.undo()
    (tmp_path / "file").write_text("")
    assert main(["convert", str(book), *form, "-o", str(tmp_path / "file")]) == 1

    def read_only(self, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(self))

    monkeypatch.setattr(Path, "write_text", read_only)
    assert main(["convert", str(book), *form, "-o", str(book)]) == 1  # in place
    monkeypatch.undo()
    (book / "chapter" / "bad.md").write_bytes(b"\xff\xfe\xfa")
    (book / "chapter" / "bad.rst").write_bytes(b"\xff\xfe\xfa")
    assert main(["convert", str(book), *form, "-o", str(tmp_path / "out2")]) == 2
    err = capsys.readouterr().err
    assert "cannot read" in err and "cannot write" in err and "is not UTF-8" in err
