"""The shape of a stored session, checked wherever results enter livecells.

A session's JSON (see :mod:`.records`) comes from two places nobody here controls: a kernel (a
cell can print or display anything) and a store file (committed, edited by hand, merged by
git). :func:`check_session` checks a session read from the store, entry by entry: one that fails
is not used (its session runs again). :func:`repair_session` makes a freshly executed session
safe to store and show: an output that cannot be shown is replaced by a note, lone surrogates
become U+FFFD, and text that is too long is cut, with a note saying what was cut.
:func:`check_output` is what the render stage checks before it turns an output into nodes.
Nothing here knows Sphinx.
"""

from __future__ import annotations

import base64
import binascii
import math
from collections.abc import Callable
from typing import Any

from livecells.errors import StoreEntryError
from livecells.model.mime import BASE64_TYPES, MARKUP_TYPES
from livecells.model.text import ESCAPE, cut_text, fix_surrogates, has_surrogates, one_line
from livecells.model.vocabulary import STORED_CELL_STATUSES, STORED_SESSION_STATUSES

OUTPUT_TYPES = ("stream", "error", "execute_result", "display_data")
#: Nested data (metadata, application/json) deeper than this is refused: it is no output
#: anyone reads, and deep enough it breaks ``repr`` and ``deepcopy`` at render time.
MAX_DEPTH = 64
#: The longest exception message kept (the traceback, which holds it too, is kept longer).
MAX_MESSAGE = 10_000

_BASE64_ALPHABET = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


# -- checks ------------------------------------------------------------------------------------------


def _fail(where: str, why: str) -> StoreEntryError:
    return StoreEntryError(f"{where}: {why}" if where else why)


def _str(value: Any, where: str) -> str:
    if not isinstance(value, str):
        raise _fail(where, f"a string was expected, not {type(value).__name__}")
    if not value.isascii() and has_surrogates(value):  # (isascii: free for base64 images)
        raise _fail(where, "holds a lone surrogate (not valid Unicode)")
    return value


def _opt_str(value: Any, where: str) -> None:
    if value is not None:
        _str(value, where)


def _int(value: Any, where: str, optional: bool = False) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise _fail(where, f"an integer was expected, not {type(value).__name__}")


def _seconds(value: Any, where: str) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(where, f"a number of seconds was expected, not {type(value).__name__}")
    if not math.isfinite(value) or value < 0:
        raise _fail(where, f"{value!r} is not a number of seconds")


def _samples(value: Any, where: str) -> None:
    """A list of seconds (a repeated cell's runs), or nothing."""
    if value is None:
        return
    for n, item in enumerate(_list(value, where)):
        if item is None:
            raise _fail(f"{where}[{n}]", "a number of seconds was expected, not None")
        _seconds(item, f"{where}[{n}]")


def _dict(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _fail(where, f"an object was expected, not {type(value).__name__}")
    return value


def _list(value: Any, where: str) -> list[Any]:
    if not isinstance(value, list):
        raise _fail(where, f"a list was expected, not {type(value).__name__}")
    return value


def _json(value: Any, where: str) -> None:
    """Any JSON value, no deeper than :data:`MAX_DEPTH`, with valid strings (walked, not recursed)."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise _fail(where, f"nested deeper than {MAX_DEPTH} levels")
        if isinstance(item, str):
            _str(item, where)
        elif isinstance(item, float):
            if not math.isfinite(item):
                raise _fail(where, f"{item!r} is not a JSON number")
        elif isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
            stack.extend((k, depth + 1) for k in item)
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
        elif item is not None and not isinstance(item, (bool, int)):
            raise _fail(where, f"{type(item).__name__} is not JSON")


def _multiline(value: Any, where: str) -> str:
    """nbformat's multiline string: a string, or a list of strings to be joined."""
    if isinstance(value, list):
        return "".join(_str(part, f"{where}[{n}]") for n, part in enumerate(value))
    return _str(value, where)


def _mime_bundle(data: Any, where: str) -> None:
    for mime, value in _dict(data, where).items():
        _str(mime, where)
        at = f"{where}[{mime!r}]"
        if mime.startswith(("text/", "image/")):
            text = _multiline(value, at)
            if mime in BASE64_TYPES:
                _base64(text, at)
        else:
            _json(value, at)


def _base64(text: str, where: str) -> None:
    """Base64, as Jupyter writes it (line breaks allowed); checked without decoding it when
    it is plainly well formed (decoding is the slow part, and the store holds every image of
    the book)."""
    if text.isascii():
        raw = text.encode("ascii")
        rest = raw.translate(None, _BASE64_ALPHABET)
        padding = rest.translate(None, b" \t\r\n")
        if padding in {b"", b"=", b"=="} and (len(raw) - len(rest) + len(padding)) % 4 == 0:
            if text.rstrip().endswith(padding.decode()):
                return
    try:
        base64.b64decode("".join(text.split()), validate=True)
    except (binascii.Error, ValueError) as err:
        raise _fail(where, f"not base64 ({err})") from None


def check_output(output: Any, where: str = "") -> None:
    """Raise :class:`StoreEntryError` unless ``output`` is an output livecells can store and show."""
    _dict(output, where)
    kind = output.get("output_type")
    if kind not in OUTPUT_TYPES:
        raise _fail(where, f"unknown output_type {one_line(repr(kind), 60)}")
    if kind == "stream":
        _str(output.get("name"), f"{where}.name")
        _multiline(output.get("text"), f"{where}.text")
    elif kind == "error":
        _check_error(output, where)
    else:
        _mime_bundle(output.get("data"), f"{where}.data")
        if "metadata" in output:
            _dict(output["metadata"], f"{where}.metadata")
            _json(output["metadata"], f"{where}.metadata")
        if kind == "execute_result":
            _int(output.get("execution_count"), f"{where}.execution_count", optional=True)
    for key in ("livecells_refused",):
        _opt_str(output.get(key), f"{where}.{key}")


def shown_output(output: Any, limit: int, where: str = "") -> dict[str, Any]:
    """A checked copy of ``output`` as the render stage takes it: nbformat's multiline strings
    joined, text cut to ``limit`` characters (a store written by hand, or by an older livecells,
    may hold more). Raises :class:`StoreEntryError` as :func:`check_output` does."""
    check_output(output, where)
    if output["output_type"] == "stream":
        text = "".join(output["text"]) if isinstance(output["text"], list) else output["text"]
        text, _ = cut_text(text, limit, f"livecells_output_limit is {limit:,}")
        return {**output, "text": text}
    return _bound_output(output, limit)


def _check_error(error: Any, where: str) -> None:
    _dict(error, where)
    _str(error.get("ename", ""), f"{where}.ename")
    _str(error.get("evalue", ""), f"{where}.evalue")
    for n, entry in enumerate(_list(error.get("traceback", []), f"{where}.traceback")):
        _str(entry, f"{where}.traceback[{n}]")


def check_cell(cell: Any, where: str) -> None:
    _dict(cell, where)
    status = _str(cell.get("status"), f"{where}.status")
    if status not in STORED_CELL_STATUSES:
        raise _fail(f"{where}.status", f"unknown status {one_line(repr(status), 60)}")
    _int(cell.get("index"), f"{where}.index")
    _str(cell.get("code_sha"), f"{where}.code_sha")
    _seconds(cell.get("time"), f"{where}.time")
    for key in ("samples", "warmup"):
        _samples(cell.get(key), f"{where}.{key}")
    _int(cell.get("execution_count"), f"{where}.execution_count", optional=True)
    if cell.get("error") is not None:
        _check_error(cell["error"], f"{where}.error")
    for n, output in enumerate(_list(cell.get("outputs"), f"{where}.outputs")):
        check_output(output, f"{where}.outputs[{n}]")


#: Provenance fields and their checks; others may hold any JSON.
_PROVENANCE: dict[str, Callable[[Any, str], object]] = {
    **dict.fromkeys(
        ("date", "host", "device", "device_kind", "framework_version", "python", "kernel", "livecells"), _str
    ),
    "device_count": _int,
    "devices_leased": _int,
}


def _check_provenance(key: str, value: Any) -> None:
    where = f"provenance.{one_line(key, 40)}"
    check = _PROVENANCE.get(key)
    if key == "kernelspec":
        for name, part in _dict(value, where).items():
            _str(part, f"{where}.{one_line(name, 40)}")
    elif key == "fallbacks":
        for n, part in enumerate(_list(value, where)):
            _str(part, f"{where}[{n}]")
    elif check is not None:
        check(value, where)
    else:
        _json(value, where)


def check_session(record: Any) -> None:
    """Raise :class:`StoreEntryError` unless ``record`` is a session record the store can hand out."""
    _dict(record, "")
    for key in ("status", "key", "environment", "run_id", "framework", "message"):
        _opt_str(record.get(key), key)
    status = record.get("status")
    if status is not None and status not in STORED_SESSION_STATUSES:
        raise _fail("status", f"unknown status {one_line(repr(status), 60)}")
    _seconds(record.get("duration"), "duration")
    _seconds(record.get("floor"), "floor")
    _samples(record.get("floor_samples"), "floor_samples")
    provenance = _dict(record.get("provenance", {}), "provenance")
    for key, value in provenance.items():
        _check_provenance(key, value)
    for n, cell in enumerate(_list(record.get("cells"), "cells")):
        check_cell(cell, f"cells[{n}]")
    for name, timings in _dict(record.get("devices", {}), "devices").items():
        _check_timings(timings, f"devices[{one_line(repr(name), 40)}]")


def _check_timings(timings: Any, where: str) -> None:
    """One device's timings (see :func:`livecells.store.codec.timings_to_json`)."""
    _dict(timings, where)
    for key in ("device", "device_kind", "date", "framework_version", "host", "key"):
        _opt_str(timings.get(key), f"{where}.{key}")
    _str(timings.get("device"), f"{where}.device")
    _seconds(timings.get("floor"), f"{where}.floor")
    for n, cell in enumerate(_list(timings.get("cells", []), f"{where}.cells")):
        at = f"{where}.cells[{n}]"
        _dict(cell, at)
        _int(cell.get("index"), f"{at}.index")
        _str(cell.get("code_sha"), f"{at}.code_sha")
        _seconds(cell.get("time"), f"{at}.time")
        _samples(cell.get("samples"), f"{at}.samples")
        if not isinstance(cell.get("ok", True), bool):
            raise _fail(f"{at}.ok", "True or False was expected")


# -- repair, for records just executed ------------------------------------------------------------


def _fixed(value: Any, depth: int = 0) -> Any:
    """``value`` with lone surrogates replaced in every string (keys too)."""
    if isinstance(value, str):
        return fix_surrogates(value)
    if depth > MAX_DEPTH:
        return value  # refused by the check that follows
    if isinstance(value, dict):
        return {_fixed(k, depth + 1): _fixed(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_fixed(v, depth + 1) for v in value]
    return value


def left_out(why: str) -> dict[str, Any]:
    """The note that stands for an output which cannot be shown."""
    note = f"an output was left out: {why}"
    return {
        "output_type": "display_data",
        "data": {"text/plain": f"[{note}]"},
        "metadata": {},
        "livecells_refused": note,
    }


def _bound_output(output: dict[str, Any], limit: int) -> dict[str, Any]:
    """The output with its text cut to ``limit`` characters per value, and a note of what went."""
    notes = []
    why = f"livecells_output_limit is {limit:,}"
    if output.get("output_type") in {"execute_result", "display_data"}:
        data = dict(output.get("data") or {})
        for mime, value in list(data.items()):
            if not mime.startswith("text/") or not isinstance(value, (str, list)):
                continue
            text = "".join(value) if isinstance(value, list) else value
            if len(text) <= limit:
                continue
            if mime in MARKUP_TYPES:  # cut markup would be broken markup: left out whole
                del data[mime]
                notes.append(f"{mime} output of {len(text):,} characters left out ({why})")
            else:
                data[mime], _ = cut_text(text, limit, why)
                notes.append(f"{mime} output of {len(text):,} characters cut to {limit:,} ({why})")
        if notes and not data:
            data["text/plain"] = f"[{notes[-1]}]"
        output = {**output, "data": data}
    elif output.get("output_type") == "error":
        output, cut = _bound_error(output, limit)
        if cut:
            notes.append(f"an exception of {cut:,} characters was cut ({why})")
    if notes:
        refused = [output["livecells_refused"]] if output.get("livecells_refused") else []
        output = {**output, "livecells_refused": "; ".join([*refused, *notes])}
    return output


def _bound_error(error: dict[str, Any], limit: int) -> tuple[dict[str, Any], int]:
    """An error with its message and traceback kept bounded; and how long it was (0: kept whole)."""
    evalue = error.get("evalue", "")
    traceback = error.get("traceback", [])
    if not isinstance(evalue, str) or not isinstance(traceback, list):
        return error, 0
    # Counted as shown: IPython's colour codes can treble a traceback's length.
    total = len(evalue) + sum(len(ESCAPE.sub("", t)) for t in traceback if isinstance(t, str))
    if len(evalue) <= MAX_MESSAGE and total <= limit:
        return error, 0
    kept, room = [], limit
    for number, entry in enumerate(traceback):
        if not isinstance(entry, str):
            continue
        if room <= 0:
            kept.append(f"[… {len(traceback) - number:,} more traceback entries cut]")
            break
        entry, _ = cut_text(entry, max(room, 200), f"livecells_output_limit is {limit:,}")
        kept.append(entry)
        room -= len(entry)
    value, _ = cut_text(evalue, MAX_MESSAGE, "the message was too long")
    return {**error, "evalue": value, "traceback": kept}, total


def _repair_provenance(record: dict[str, Any]) -> list[str]:
    """Provenance fields of the wrong type (the kernel reports them) emptied; what was."""
    provenance = record.get("provenance")
    if not isinstance(provenance, dict):
        record["provenance"] = {}
        return ["provenance: not an object"]
    repaired = []
    for key, value in list(provenance.items()):
        try:
            _check_provenance(key, value)
        except StoreEntryError as err:
            repaired.append(str(err))
            del provenance[key]
    return repaired


def repair_session(record: dict[str, Any], limit: int) -> list[str]:
    """Make a just-executed record fit to store and show, in place; what was repaired, per cell.

    Each output that fails :func:`check_output` becomes a :func:`left_out` note; strings lose
    their lone surrogates; text is cut to ``limit`` characters per value (with a note in the
    output, which the cell's warnings report).
    """
    repaired = []
    for key, value in list(record.items()):
        if key != "cells":
            record[key] = _fixed(value)
    repaired.extend(_repair_provenance(record))
    for position, cell in enumerate(record.get("cells") or []):
        if not isinstance(cell, dict):
            continue
        # A cell can reach livecells' helpers in its kernel: what they measured is checked too.
        for key, check in (("time", _seconds), ("execution_count", _int)):
            try:
                check(cell.get(key), key, *(() if key == "time" else (True,)))
            except StoreEntryError as err:
                repaired.append(f"cells[{position}]: {err}")
                cell[key] = None
        for key in ("samples", "warmup"):
            try:
                _samples(cell.get(key), key)
            except StoreEntryError as err:
                repaired.append(f"cells[{position}]: {err}")
                cell.pop(key, None)
        if isinstance(cell.get("error"), dict):
            cell["error"], _ = _bound_error(_fixed(cell["error"]), limit)
        outputs = []
        for number, output in enumerate(cell.get("outputs") or [], 1):
            output = _fixed(output)
            try:
                check_output(output, f"output {number}")
            except StoreEntryError as err:
                repaired.append(f"cells[{position}]: {err}")
                output = left_out(one_line(str(err), 200))
            outputs.append(_bound_output(output, limit))
        cell["outputs"] = outputs
    return repaired
