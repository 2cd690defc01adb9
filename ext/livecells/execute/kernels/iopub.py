"""A cell's output as a notebook front end shows it, gathered from the kernel's IOPub messages.

:class:`OutputCollector` turns ``stream``, ``display_data``, ``execute_result``, ``error``,
``clear_output`` and ``update_display_data`` messages into nbformat-style outputs, and keeps
floods small before they reach the store; :class:`SessionDisplays` carries display ids from one
cell of a session to the next. Nothing here knows Jupyter's client or Sphinx.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from livecells.model.mime import IMAGE_TYPES, MAX_IMAGE_BYTES, MIME_TYPES
from livecells.model.streams import StreamText

MAX_OUTPUTS = 500


class SessionDisplays:
    """Outputs that carry a display id, in every cell of one session, as nbclient tracks them.

    ``update_display_data`` (and a new output with an id already shown) replaces the data of
    every earlier output with that id, in any cell; an immediate ``clear_output`` in a cell
    forgets that cell's outputs. Each operation costs the outputs it touches.
    """

    def __init__(self) -> None:
        self._targets: dict[str, dict[int, list[dict[str, Any]]]] = {}  # id -> cell -> outputs
        self._ids_of: dict[int, set[str]] = {}  # cell -> the ids its outputs carry
        self._cells = 0

    def new_cell(self) -> int:
        """A number for the next cell of the session (never reused, unlike an object's id)."""
        self._cells += 1
        return self._cells

    def add(self, cell: int, display_id: str, output: dict[str, Any]) -> None:
        self._targets.setdefault(display_id, {}).setdefault(cell, []).append(output)
        self._ids_of.setdefault(cell, set()).add(display_id)

    def update(self, display_id: str, data: Mapping[str, Any], metadata: Mapping[str, Any]) -> None:
        for outputs in self._targets.get(display_id, {}).values():
            for output in outputs:
                output["data"] = dict(data)
                output["metadata"] = dict(metadata)

    def forget(self, cell: int) -> None:
        for display_id in self._ids_of.pop(cell, ()):
            self._targets.get(display_id, {}).pop(cell, None)


class OutputCollector:
    """Turns iopub messages into nbformat-style outputs, the way a notebook front end shows them.

    Every message costs time in proportion to its own size (never to the cell's output so far):
    a stream's text is kept as JupyterLab keeps it (:class:`~livecells.model.streams.StreamText`, carriage
    returns and backspaces applied as it arrives), and stored as JupyterLab would save it.
    Floods stay small: each stream name keeps at most ``limit`` characters (in as many outputs as
    the kernel interleaved stdout and stderr), a cell at most :data:`MAX_OUTPUTS` displays (its
    error and result always), an image over
    :data:`MAX_IMAGE_BYTES` becomes a note. What was left out is said in a note of its own, after
    the outputs, that no later output is ever written into. Display ids are tracked across the
    session's cells through ``displays``.
    """

    def __init__(self, limit: int, displays: SessionDisplays | None = None) -> None:
        self._outputs: list[dict[str, Any]] = []
        self.limit = limit
        self.dropped = 0
        self._displayed = 0  # display_data outputs kept
        self._clear_pending = False
        self._displays = displays if displays is not None else SessionDisplays()
        self._cell = self._displays.new_cell()
        self.error: dict[str, Any] | None = None
        self._truncated: set[str] = set()
        self._stream: StreamText | None = None  # the text of the last output, if a stream
        self._stream_chars: dict[str, int] = {}  # per stream name, in earlier stream outputs

    @property
    def outputs(self) -> list[dict[str, Any]]:
        """The outputs so far (a new list), with the note on what was left out, if anything was."""
        if self._stream is not None:
            self._outputs[-1]["text"] = self._stream.text
        if not self.dropped:
            return list(self._outputs)
        note = f"[{self.dropped} more output(s) left out: a cell keeps at most {MAX_OUTPUTS} displays]\n"
        return [
            *self._outputs,
            {"output_type": "stream", "name": "stdout", "text": note, "livecells_note": True},
        ]

    def handle(self, msg_type: str, content: Mapping[str, Any]) -> None:
        transient = content.get("transient") or {}
        display_id = transient.get("display_id") if isinstance(transient, Mapping) else None
        if msg_type == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self._clear()
            return
        if msg_type == "update_display_data":
            # Updates change outputs in place: they neither add one nor end a pending clear.
            if display_id:
                data = dict(content.get("data") or {})
                _refuse_large_images(data)
                self._displays.update(display_id, data, content.get("metadata") or {})
            return
        if msg_type not in {"stream", "execute_result", "display_data", "error"}:
            return
        if self._clear_pending:
            self._clear()
        if msg_type == "stream":
            self._add_stream(str(content.get("name", "stdout")), str(content.get("text", "")))
            return
        if msg_type == "error":
            self.error = {
                "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""),
                "traceback": list(content.get("traceback", [])),
            }
            self._append({"output_type": "error", **self.error})
            return
        data = dict(content.get("data") or {})
        refused = _refuse_large_images(data)
        if display_id:  # a display id shown again: every earlier output with it shows this
            self._displays.update(display_id, data, content.get("metadata") or {})
        if msg_type == "display_data":
            if self._displayed >= MAX_OUTPUTS:
                self.dropped += 1
                return
            self._displayed += 1
        output: dict[str, Any] = {
            "output_type": msg_type,
            "data": data,
            "metadata": dict(content.get("metadata") or {}),
        }
        if refused:
            output["livecells_refused"] = refused
        if msg_type == "execute_result":
            output["execution_count"] = content.get("execution_count")
        if display_id:
            self._displays.add(self._cell, display_id, output)
        self._append(output)

    def _clear(self) -> None:
        self._outputs.clear()
        self._stream = None
        self._stream_chars.clear()
        self._truncated.clear()
        self.dropped = self._displayed = 0
        self._clear_pending = False
        self._displays.forget(self._cell)

    def _append(self, output: dict[str, Any]) -> None:
        if self._stream is not None:  # the stream before it is finished: store its text
            last = self._outputs[-1]
            last["text"] = self._stream.text
            self._stream_chars[last["name"]] = self._stream_chars.get(last["name"], 0) + len(last["text"])
            self._stream = None
        self._outputs.append(output)

    def _add_stream(self, name: str, text: str) -> None:
        if name in self._truncated or not text:
            return
        if self._stream is None or self._outputs[-1]["name"] != name:
            self._append({"output_type": "stream", "name": name, "text": ""})
            self._stream = StreamText()
        stream = self._stream
        stream.feed(text)
        room = self.limit - self._stream_chars.get(name, 0)
        if len(stream) > room:
            stream.truncate(room)
            self._truncated.add(name)
            self._outputs[-1]["truncated"] = True


def _refuse_large_images(data: dict[str, Any]) -> str:
    """Replace images over the size limit by a note in place; return the note (or "")."""
    note = ""
    for mime in IMAGE_TYPES:
        value = data.get(mime)
        if isinstance(value, list):
            value = "".join(value)
        if isinstance(value, str):
            size = MIME_TYPES[mime].decoded_size(value)
            if size > MAX_IMAGE_BYTES:
                del data[mime]
                note = (
                    f"an image of {size / 2**20:.1f} MiB was left out: the limit is "
                    f"{MAX_IMAGE_BYTES // 2**20} MiB"
                )
                data["text/plain"] = f"[{note}]"
    return note
