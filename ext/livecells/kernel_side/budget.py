"""Kernel side: the output budget, what a cell may send the build, cut in the kernel before it is sent.

The build's Jupyter client reads each message whole, several times its size in memory, so a
cell that prints gigabytes must be cut where it prints, not where the build reads:
:class:`OutputBudget` hooks ipykernel's streams and display publisher (its public
``register_hook``), :func:`bound_output` caps results, errors and payloads, :func:`bound_iopub`
every other message. The timing hook (:mod:`livecells.kernel_side.hook`) installs it.

Like the hook, this file is not imported by name in the kernel (whose Python need not have
livecells): the launch (:func:`livecells.execute.kernels.hook_call.hook_request`) loads it by its path as
a module of its own. So it imports only the standard library at the top, and
ipykernel and zmq inside functions. Imported in the build process (by tests), it installs nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

#: What a cell may send the build, cut here before it is sent (the build's Jupyter client reads
#: each message whole, several times its size in memory): per stream and cell, and per error's
#: message and traceback, the larger of STREAM_FACTOR times ``livecells_output_limit`` and
#: STREAM_MIN characters; per value of a display or a result, VALUE_CAP characters (a 10 MiB
#: image in base64 fits); per cell, MAX_DISPLAYS displays (and as many ``clear_output``).
STREAM_FACTOR = 10
STREAM_MIN = 1 << 20
VALUE_CAP = 16 << 20
MAX_DISPLAYS = 10_000
#: Whatever else a kernel publishes (comm messages, metadata, a child process's output): at most
#: MAX_MESSAGE_BYTES a message and MAX_MESSAGES messages a cell, status messages aside.
MAX_MESSAGE_BYTES = 32 << 20
MAX_MESSAGES = 100_000
#: The execute reply's payloads (``set_next_input``, pages): each at most the stream budget,
#: at most MAX_PAYLOADS a cell.
MAX_PAYLOADS = 100


def _size(value: Any) -> int:
    """Characters of a mime value (a string or a list of strings); 0 for other JSON."""
    if isinstance(value, str):
        return len(value)
    if isinstance(value, list):
        return sum(len(v) for v in value if isinstance(v, str))
    return 0


def cap_bundle(data: Any) -> Any:
    """``data`` (a mime bundle) with each value over :data:`VALUE_CAP` replaced by a note, in place."""
    if not isinstance(data, dict):
        return data
    for mime in [m for m, v in data.items() if _size(v) > VALUE_CAP]:
        size = _size(data.pop(mime))
        data["text/plain"] = (
            f"[livecells: a {mime} output of {size:,} characters was not sent: "
            f"the limit is {VALUE_CAP:,}]"
        )
    return data


def cap_text(text: str, limit: int = VALUE_CAP) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]}\n[livecells: {len(text) - limit:,} more characters were not sent]"


def cap_lines(lines: Sequence[str], limit: int) -> list[str]:
    """Traceback lines, at most ``limit`` characters in all."""
    kept, left = [], limit
    for line in lines:
        text = str(line)
        if len(text) > left:
            kept.append(cap_text(text, left))
            break
        kept.append(text)
        left -= len(text)
    return kept


class OutputBudget:
    """ipykernel message hooks (its public ``register_hook``) that cut a cell's output before it
    is sent: streams past their budget, displays past :data:`MAX_DISPLAYS`, values past
    :data:`VALUE_CAP`. A cell is an execute request (the messages' parent)."""

    def __init__(self, limit: int) -> None:
        self.stream_budget = max(STREAM_FACTOR * limit, STREAM_MIN)
        self.request: Any = None
        self.sent: dict[Any, int] = {}
        self.displays = self.clears = 0
        #: What :func:`bound_output` found not as it knows ipykernel and IPython, and so left
        #: uncut: the hook's probe hands these to the build (a ``livecells.kernel`` warning).
        self.fallbacks: list[str] = []

    def fell_back(self, what: str) -> None:
        if what not in self.fallbacks:
            self.fallbacks.append(what)

    def _cell(self, msg: dict[str, Any]) -> None:
        request = (msg.get("parent_header") or {}).get("msg_id")
        if request != self.request:
            self.request, self.sent, self.displays, self.clears = request, {}, 0, 0

    def stream(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """A stream message, cut where the cell's stream passes its budget; None after that."""
        self._cell(msg)
        content = msg.get("content") or {}
        name, text = content.get("name"), content.get("text")
        if not isinstance(text, str):
            return msg
        sent = self.sent.get(name, 0)
        if sent > self.stream_budget:
            return None
        self.sent[name] = sent + len(text)
        if self.sent[name] > self.stream_budget:
            content["text"] = text[: self.stream_budget - sent] + (
                f"\n[livecells: this cell's {name} went on past {self.stream_budget:,} characters; "
                "the rest was not sent]\n"
            )
        return msg

    def error(self, result: Any) -> None:
        """The post-run hook's part: the cell's exception message cut to the stream budget."""
        cap_error(result, self.stream_budget)

    def display(self, msg: dict[str, Any]) -> dict[str, Any] | None:
        """A display message with its values capped; None past the cell's :data:`MAX_DISPLAYS`
        (and ``clear_output`` past as many: a flood of small messages fills memory too)."""
        self._cell(msg)
        content = msg.get("content") or {}
        if "data" not in content:  # clear_output
            self.clears += 1
            return msg if self.clears <= MAX_DISPLAYS else None
        self.displays += 1
        if self.displays > MAX_DISPLAYS + 1:
            return None
        if self.displays > MAX_DISPLAYS:
            content["data"] = {
                "text/plain": f"[livecells: this cell's displays went on past {MAX_DISPLAYS:,}; "
                "the rest were not sent]"
            }
            content["transient"] = {}
            msg.setdefault("header", {})["msg_type"] = msg["msg_type"] = "display_data"
            return msg
        cap_bundle(content["data"])
        return msg


def bound_output(shell: Any, limit: int) -> OutputBudget:
    """Install :class:`OutputBudget`'s hooks on the kernel's streams and display publisher, and
    cap the values of results (the display formatter) and of errors (the traceback shown)."""
    import json
    import threading

    budget = OutputBudget(limit)
    for name, stream in (("stdout", sys.stdout), ("stderr", sys.stderr)):
        if not callable(getattr(stream, "register_hook", None)):
            budget.fell_back(f"sys.{name} has no register_hook (not ipykernel's stream): not cut in the kernel")
            continue
        stream.register_hook(budget.stream)  # hooks are per thread: where a flush runs
        thread = getattr(stream, "pub_thread", None)
        if not callable(getattr(thread, "schedule", None)):
            budget.fell_back(f"sys.{name} has no IO thread to schedule on: what it flushes there is not cut")
            continue
        done = threading.Event()

        def register(stream: Any = stream, done: threading.Event = done) -> None:
            stream.register_hook(budget.stream)
            done.set()

        thread.schedule(register)
        if not done.wait(5):
            budget.fell_back(f"sys.{name}'s IO thread did not take the hook in 5 s: what it flushes is not cut")
    publisher = getattr(shell, "display_pub", None)
    if callable(getattr(publisher, "register_hook", None)):
        publisher.register_hook(budget.display)
    else:
        budget.fell_back("the shell's display publisher has no register_hook: displays are not cut in the kernel")
    formatter = getattr(shell, "display_formatter", None)
    if formatter is not None and callable(getattr(formatter, "format", None)):
        formatted = formatter.format

        def format(obj: Any, include: Any = None, exclude: Any = None) -> Any:
            data, metadata = formatted(obj, include=include, exclude=exclude)
            return cap_bundle(data), metadata

        formatter.format = format
    else:
        budget.fell_back("the shell has no display_formatter.format: results' values are not cut in the kernel")
    shown = getattr(shell, "_showtraceback", None)
    if callable(shown):

        def showtraceback(etype: Any, evalue: Any, stb: Any) -> Any:
            try:
                evalue = cap_text(str(evalue), budget.stream_budget)
            except Exception:
                pass
            return shown(etype, evalue, cap_lines(stb or [], budget.stream_budget))

        shell._showtraceback = showtraceback
    else:
        budget.fell_back("the shell has no _showtraceback: errors' tracebacks are not cut in the kernel")
    payloads = getattr(shell, "payload_manager", None)
    if payloads is not None and callable(getattr(payloads, "write_payload", None)):
        # What the execute reply carries besides the status (set_next_input, pages).
        write = payloads.write_payload

        def write_payload(data: Any, single: bool = True) -> Any:
            try:
                size = len(json.dumps(data, default=str))
            except Exception:
                size = 0
            if size > budget.stream_budget or len(payloads.read_payload()) >= MAX_PAYLOADS:
                print(f"[livecells: a payload of {size:,} characters was not sent]", file=sys.stderr)
                return None
            return write(data, single=single)

        payloads.write_payload = write_payload
    else:
        budget.fell_back("the shell has no payload_manager.write_payload: payloads are not cut in the kernel")
    try:
        bounded = bound_iopub(budget)
    except Exception as err:  # not ipykernel's layout: the hooks above still hold
        bounded, why = False, f" ({type(err).__name__}: {err})"
    else:
        why = ""
    if not bounded:
        budget.fell_back(f"ipykernel's IOPub thread could not be wrapped{why}: other messages are not cut")
    return budget


def _nbytes(part: Any) -> int:
    return part.nbytes if isinstance(part, memoryview) else len(part)


def bound_iopub(budget: OutputBudget) -> bool:
    """Wrap the kernel's IOPub thread's ``send_multipart``, which every message it publishes
    passes: one over :data:`MAX_MESSAGE_BYTES`, or past a cell's :data:`MAX_MESSAGES` (status
    messages aside, the build waits for them), is not sent; a note on stderr says so, once."""
    import json
    import threading

    from ipykernel.kernelapp import IPKernelApp

    app = IPKernelApp.instance()
    thread, session = getattr(app, "iopub_thread", None), getattr(app, "session", None)
    if thread is None or session is None or not callable(getattr(thread, "send_multipart", None)):
        return False
    send = thread.send_multipart
    lock = threading.Lock()
    counts: dict[Any, int] = {}

    def note(idents: list[Any], parent: dict[str, Any], text: str) -> None:
        msg = session.msg("stream", {"name": "stderr", "text": f"[livecells: {text}]\n"}, parent=parent)
        send(session.serialize(msg, ident=idents))

    def bounded(parts: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            at = next(i for i, part in enumerate(parts) if isinstance(part, bytes) and part == b"<IDS|MSG>")
            msg_type = json.loads(parts[at + 2]).get("msg_type")
            parent = json.loads(parts[at + 3])
            request = parent.get("msg_id")
        except Exception:
            return send(parts, *args, **kwargs)
        if msg_type == "status":
            return send(parts, *args, **kwargs)
        size = sum(_nbytes(part) for part in parts)
        with lock:
            if request not in counts:
                counts.clear()  # one cell at a time
            counts[request] = count = counts.get(request, 0) + 1
        if count > MAX_MESSAGES:
            if count == MAX_MESSAGES + 1:
                note(parts[:at], parent, f"this cell's messages went on past {MAX_MESSAGES:,}; the rest "
                     "were not sent")
            return None
        if size > MAX_MESSAGE_BYTES:
            note(parts[:at], parent, f"a {msg_type} message of {size:,} bytes was not sent: the limit "
                 f"is {MAX_MESSAGE_BYTES:,}")
            return None
        return send(parts, *args, **kwargs)

    thread.send_multipart = bounded
    return True


def cap_error(result: Any, limit: int) -> None:
    """The cell's exception, if its message is over ``limit`` characters, replaced by one of the
    same name with the message cut (ipykernel's reply repeats the message whole)."""
    err = getattr(result, "error_in_exec", None)
    if err is None:
        return
    try:
        text = str(err)
    except Exception:
        return
    if len(text) > limit:
        result.error_in_exec = type(type(err).__name__, (Exception,), {})(cap_text(text, limit))

