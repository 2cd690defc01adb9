"""Stream text as a notebook shows it: carriage returns and backspaces applied, in linear time.

JupyterLab's output area (``@jupyterlab/outputarea``, ``OutputAreaModel``, 4.x) keeps one text
and a cursor per stream output and applies each message's text to them:

* ordinary characters are written at the cursor, *overwriting* what is there
  (``"0.912345 done\\r0.5"`` shows ``0.512345 done``), and the cursor moves on;
* ``\\r`` moves the cursor back to the start of its line;
* ``\\n`` appends a newline at the *end* of the text (the rest of an overwritten line stays)
  and puts the cursor after it;
* ``\\b`` at the start of a line does nothing; elsewhere it removes the character before the
  cursor and, when the cursor is inside the line (after a ``\\r``), also the one under it,
  and moves the cursor back one place.

The cursor is always on the last line (only ``\\n`` leaves a line, and it goes to the end), so
finished lines never change. :class:`StreamText` keeps them as a list and the current line as a
gap buffer: the characters before the cursor, and those from the cursor on in reverse. Every
operation then costs at most the characters it writes or deletes, or, for ``\\r``, the characters
written since the previous ``\\r``: a text of *n* characters takes O(n) whatever it contains.
Consecutive stream outputs of the same name form one text in JupyterLab, and the cursor carries
over from one message to the next; :func:`shown_outputs` does the same for a cell's outputs.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

# One token: a run of ordinary characters, a run of backspaces, or one \r or \n.
_TOKEN = re.compile(r"[^\r\n\b]+|\x08+|\r|\n")


class StreamText:
    """One stream output's text and cursor, as JupyterLab keeps them; :meth:`feed` adds text."""

    __slots__ = ("_done", "_done_chars", "_left", "_right", "operations")

    def __init__(self, text: str = "") -> None:
        self._done: list[str] = []  # finished lines, each with its "\n"
        self._done_chars = 0
        self._left: list[str] = []  # the current line up to the cursor
        self._right: list[str] = []  # the current line from the cursor on, reversed
        #: Characters moved, written or deleted so far (for tests that the work stays linear).
        self.operations = 0
        if text:
            self.feed(text)

    def feed(self, text: str) -> None:
        """Apply ``text`` at the cursor."""
        left, right = self._left, self._right
        for match in _TOKEN.finditer(text):
            token = match.group()
            first = token[0]
            if first == "\n":
                # The newline goes at the end of the line, whatever the cursor overwrote.
                right.reverse()
                self._done.append("".join(left) + "".join(right) + "\n")
                self._done_chars += len(left) + len(right) + 1
                self.operations += len(left) + len(right) + 1
                left.clear()
                right.clear()
            elif first == "\r":
                # Back to the start of the line: what is left of the cursor moves right of it.
                left.reverse()
                right.extend(left)
                self.operations += len(left) + 1
                left.clear()
            elif first == "\b":
                # Each backspace after the line's start deletes the character before the cursor
                # and the one under it (JupyterLab's slice(0, i - 1) + slice(i + 1)).
                count = min(len(token), len(left))
                if count:
                    del left[len(left) - count :]
                    del right[max(len(right) - count, 0) :]
                self.operations += len(token) + 2 * count
            else:
                # Overwrite as many characters as there are under the cursor, then append.
                covered = min(len(token), len(right))
                if covered:
                    del right[len(right) - covered :]
                left.extend(token)
                self.operations += len(token) + covered

    @property
    def text(self) -> str:
        line = "".join(self._left) + "".join(reversed(self._right))
        return "".join(self._done) + line

    def __len__(self) -> int:
        return self._done_chars + len(self._left) + len(self._right)

    def truncate(self, size: int) -> None:
        """Keep the first ``size`` characters; the cursor goes to the end."""
        text = self.text[: max(size, 0)]
        head, newline, tail = text.rpartition("\n")
        self._done = [head + newline] if newline else []
        self._done_chars = len(head) + len(newline)
        self._left[:] = list(tail)
        self._right.clear()


def process_stream(text: str) -> str:
    """What JupyterLab shows for one stream output's text (no ``\\r`` or ``\\b`` remain)."""
    if "\r" not in text and "\b" not in text:
        return text
    return StreamText(text).text


def shown_outputs(outputs: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    """A cell's outputs as JupyterLab's output area holds them after loading them.

    Consecutive ``stream`` outputs of the same name become one, their texts applied one after
    the other to one :class:`StreamText` (as JupyterLab's ``fromJSON`` does); other outputs pass
    through unchanged. Stream outputs come out as new dicts; the input is not modified.
    """
    current: dict[str, Any] | None = None
    buffer: StreamText | None = None
    for output in outputs:
        if output.get("output_type") == "stream":
            text = output.get("text", "")
            if isinstance(text, list):
                text = "".join(str(t) for t in text)
            if (
                current is not None
                and buffer is not None
                and output.get("name") == current.get("name")
                and not output.get("livecells_note")
                and not current.get("livecells_note")
            ):
                buffer.feed(str(text))
                if output.get("truncated"):
                    current["truncated"] = True
                continue
            if current is not None and buffer is not None:
                current["text"] = buffer.text
                yield current
            current = dict(output)
            buffer = StreamText(str(text))
            continue
        if current is not None and buffer is not None:
            current["text"] = buffer.text
            yield current
            current = buffer = None
        yield output
    if current is not None and buffer is not None:
        current["text"] = buffer.text
        yield current
