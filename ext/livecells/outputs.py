"""A cell's output as a notebook front end shows it, gathered from the kernel's IOPub messages.

:class:`OutputCollector` turns ``stream``, ``display_data``, ``execute_result``, ``error``,
``clear_output`` and ``update_display_data`` messages into nbformat-style outputs, and keeps
floods small before they reach the store. Nothing here knows Jupyter's client or Sphinx.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


IMAGE_TYPES = ("image/png", "image/jpeg", "image/gif", "image/svg+xml", "image/webp")
MAX_IMAGE_BYTES = 10 * 2**20
MAX_OUTPUTS = 500


class OutputCollector:
    """Turns iopub messages into nbformat-style outputs, the way a notebook front end shows them.

    Floods stay small: each stream keeps at most ``limit`` characters, a cell at most
    :data:`MAX_OUTPUTS` rich outputs, and an image over :data:`MAX_IMAGE_BYTES` becomes a note.
    """

    def __init__(self, limit: int) -> None:
        self.outputs: list[dict[str, Any]] = []
        self.limit = limit
        self.dropped = 0
        self._clear_pending = False
        self._display_ids: dict[str, list[int]] = {}
        self.error: dict[str, Any] | None = None
        self._truncated: set[str] = set()

    def handle(self, msg_type: str, content: Mapping[str, Any]) -> None:
        if msg_type == "clear_output":
            if content.get("wait"):
                self._clear_pending = True
            else:
                self.outputs.clear()
                self._display_ids.clear()
            return
        if msg_type not in {"stream", "execute_result", "display_data", "update_display_data", "error"}:
            return
        if self._clear_pending:
            self.outputs.clear()
            self._display_ids.clear()
            self._clear_pending = False
        if msg_type == "stream":
            self._stream(content["name"], content.get("text", ""))
        elif msg_type == "error":
            self.error = {
                "ename": content.get("ename", ""),
                "evalue": content.get("evalue", ""),
                "traceback": list(content.get("traceback", [])),
            }
            self.outputs.append({"output_type": "error", **self.error})
        elif msg_type == "update_display_data":
            display_id = content.get("transient", {}).get("display_id")
            for position in self._display_ids.get(display_id, []):
                self.outputs[position]["data"] = dict(content.get("data", {}))
                self.outputs[position]["metadata"] = dict(content.get("metadata", {}))
        else:
            if len(self.outputs) >= MAX_OUTPUTS:
                self.dropped += 1
                self._note_dropped()
                return
            data = dict(content.get("data", {}))
            refused = _refuse_large_images(data)
            output: dict[str, Any] = {
                "output_type": msg_type,
                "data": data,
                "metadata": dict(content.get("metadata", {})),
            }
            if refused:
                output["livecells_refused"] = refused
            if msg_type == "execute_result":
                output["execution_count"] = content.get("execution_count")
            display_id = content.get("transient", {}).get("display_id")
            if display_id:
                self._display_ids.setdefault(display_id, []).append(len(self.outputs))
            self.outputs.append(output)

    def _note_dropped(self) -> None:
        note = f"[{self.dropped} more output(s) left out: a cell keeps at most {MAX_OUTPUTS}]"
        last = self.outputs[-1]
        if last.get("livecells_note"):
            last["text"] = note + "\n"
        else:
            self.outputs.append(
                {"output_type": "stream", "name": "stdout", "text": note + "\n", "livecells_note": True}
            )

    def _stream(self, name: str, text: str) -> None:
        last = self.outputs[-1] if self.outputs else None
        if last is not None and last["output_type"] == "stream" and last["name"] == name:
            target = last
        else:
            target = {"output_type": "stream", "name": name, "text": ""}
            self.outputs.append(target)
        if name in self._truncated:
            return
        room = self.limit - sum(
            len(o["text"]) for o in self.outputs if o["output_type"] == "stream" and o["name"] == name
        )
        if len(text) > room:
            text = text[: max(room, 0)]
            self._truncated.add(name)
            target["truncated"] = True
        target["text"] += text


def _refuse_large_images(data: dict[str, Any]) -> str:
    """Replace images over the size limit by a note in place; return the note (or "")."""
    note = ""
    for mime in IMAGE_TYPES:
        value = data.get(mime)
        if isinstance(value, list):
            value = "".join(value)
        if isinstance(value, str):
            size = len(value) if mime == "image/svg+xml" else len(value) * 3 // 4
            if size > MAX_IMAGE_BYTES:
                del data[mime]
                note = (
                    f"an image of {size / 2**20:.1f} MiB was left out: the limit is "
                    f"{MAX_IMAGE_BYTES // 2**20} MiB"
                )
                data["text/plain"] = f"[{note}]"
    return note
