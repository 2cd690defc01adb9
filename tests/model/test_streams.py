"""Stream text processing (livecells.model.streams) and the output collector (livecells.execute.kernels.iopub).

The expected values follow JupyterLab's output area (``OutputAreaModel`` in
``@jupyterlab/outputarea`` 4.x); the first cases are the ones its own test suite checks.
:func:`reference` below is a direct, quadratic restatement of the same rules over plain strings,
used to cross-check the linear implementation on random text.
"""

from __future__ import annotations

import functools
import random

import pytest

from livecells.execute.kernels.iopub import MAX_OUTPUTS, OutputCollector, SessionDisplays
from livecells.model.streams import StreamText, process_stream, shown_outputs


def reference(text: str, start: str = "", cursor: int | None = None) -> tuple[str, int]:
    """The rules one character at a time over a string and a cursor index (slow, obvious)."""
    out = start
    at = len(out) if cursor is None else cursor
    for char in text:
        if char == "\n":
            out += "\n"
            at = len(out)
        elif char == "\r":
            while at > 0 and out[at - 1] != "\n":
                at -= 1
        elif char == "\b":
            if at > 0 and out[at - 1] != "\n":
                out = out[: at - 1] + out[at + 1 :]
                at -= 1
        else:
            out = out[:at] + char + out[at + 1 :]
            at += 1
    return out, at


# -- one test per rule ------------------------------------------------------------------------


def test_jupyterlab_own_cases_across_messages():
    stream = StreamText("Jupyter\rj")
    assert stream.text == "jupyter"
    stream.feed("\njj\bupyter")
    assert stream.text == "jupyter\njupyter"
    stream.feed("\r\r\njupyter")
    assert stream.text == "jupyter\njupyter\njupyter"


def test_plain_text_is_unchanged():
    for text in ["", "x", "a\nb\n", "\n\n\n", "tab\tand \x1b[31mcolour\x1b[0m\n"]:
        assert process_stream(text) == text


def test_carriage_return_overwrites_character_by_character():
    text = "epoch 10 loss 0.912345, train acc 0.500\rfinished"
    assert process_stream(text) == "finished loss 0.912345, train acc 0.500"
    assert process_stream("progress 10%\rprogress 100%\ndone") == "progress 100%\ndone"
    assert process_stream("abc\rX") == "Xbc"


def test_newline_goes_to_the_end_of_an_overwritten_line():
    assert process_stream("abcdef\rXY\nZ") == "XYcdef\nZ"


def test_carriage_return_before_newline_keeps_the_line():
    assert process_stream("abc\r\n") == "abc\n"
    assert process_stream("abc\r\r\ndef\r\n") == "abc\ndef\n"
    assert process_stream("\r\n\r\n") == "\n\n"


def test_carriage_return_only_reaches_the_start_of_its_line():
    assert process_stream("one\ntwo\rT") == "one\nTwo"
    assert process_stream("one\n\rtwo") == "one\ntwo"


def test_trailing_carriage_return_keeps_the_text_for_the_next_message():
    stream = StreamText("loss 0.9\r")
    assert stream.text == "loss 0.9"
    stream.feed("loss 0.5\r")
    stream.feed("lo")
    assert stream.text == "loss 0.5"


def test_backspace_at_the_end_deletes_the_previous_character():
    assert process_stream("abc\b\bXY") == "aXY"
    assert process_stream("50%\b\b\b60%") == "60%"
    assert process_stream("loss: 0.5\b\b\b0.4") == "loss: 0.4"
    assert process_stream("a b\b\b!") == "a!"
    assert process_stream("|\b/\b-\b\\\b|") == "|"


def test_backspace_at_the_start_of_a_line_does_nothing():
    assert process_stream("\b\bx") == "x"
    assert process_stream("ab\n\b\bc") == "ab\nc"
    assert process_stream("ab\r\b\bc") == "cb"


def test_long_run_of_backspaces_stops_at_the_line_start():
    assert process_stream("keep\n" + "x" * 10 + "\b" * 1000 + "y") == "keep\ny"


def test_backspace_inside_a_line_also_removes_the_character_under_the_cursor():
    # JupyterLab deletes text[i - 1] and text[i] when the cursor is at i inside the line.
    assert process_stream("abc\rX\b") == "c"
    assert process_stream("abcdef\rXY\b\b") == "ef"


def test_spinners_and_progress_bars():
    assert process_stream("|\r/\r-\r\\\rdone") == "done"
    bar = "".join(f"\r[{'#' * i}{' ' * (10 - i)}] {i * 10}%" for i in range(11)) + "\n"
    assert process_stream(bar) == "[##########] 100%\n"
    keras = "1/3 [=>...]" + "\b" * 11 + "2/3 [==>..]" + "\b" * 11 + "3/3 [=====]\n"
    assert process_stream(keras) == "3/3 [=====]\n"


def test_trailing_blank_lines_are_kept():
    assert process_stream("a\n\n\n") == "a\n\n\n"
    assert process_stream("a\r\n\n") == "a\n\n"


def test_render_uses_the_same_rules():
    assert process_stream("50%\b\b\b60%") == "60%"


# -- a cell's outputs -------------------------------------------------------------------------


def stream(name: str, text: str, **extra: object) -> dict[str, object]:
    return {"output_type": "stream", "name": name, "text": text, **extra}


def test_consecutive_streams_of_one_name_share_text_and_cursor():
    outputs = [stream("stdout", "loss 0.912\r"), stream("stdout", "loss 0.5"), stream("stdout", "\ndone\n")]
    assert list(shown_outputs(outputs)) == [stream("stdout", "loss 0.512\ndone\n")]
    assert outputs[0]["text"] == "loss 0.912\r"  # the input is not modified


def test_another_output_starts_a_new_text():
    display = {"output_type": "display_data", "data": {"text/plain": "x"}, "metadata": {}}
    outputs = [stream("stdout", "abc\r"), stream("stderr", "E"), stream("stdout", "X"), display, stream("stdout", "Y")]
    assert [o.get("text") for o in shown_outputs(outputs)] == ["abc", "E", "X", None, "Y"]


def test_list_texts_and_truncation_marks_are_kept():
    outputs = [stream("stdout", ["a", "b\r"]), stream("stdout", "c", truncated=True)]
    assert list(shown_outputs(outputs)) == [stream("stdout", "cb", truncated=True)]


# -- adversarial text -------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_random_text_matches_the_rules(seed):
    rng = random.Random(seed)
    alphabet = ["a", "b", "c", "\r", "\n", "\b", "\b\b\b", "\r\n", "xyz" * 3]
    chunks = ["".join(rng.choice(alphabet) for _ in range(rng.randrange(0, 30))) for _ in range(4)]
    stream, start, cursor = StreamText(), "", 0
    for chunk in chunks:
        stream.feed(chunk)
        start, cursor = reference(chunk, start, cursor)
        assert stream.text == start, (seed, chunks)
        assert len(stream) == len(start)


MB = 2**20
ADVERSARIAL = {
    "backspaces after a long line": "x" * (MB // 2) + "\b" * (MB // 2),
    "a carriage return per character": "ab\r" * (MB // 3),
    "backspace inside a long line": "x" * (MB // 2) + "\r" + "y\b" * (MB // 4),
    "overwrites inside a long line": "x" * (MB // 2) + "\r" + "yz" * (MB // 8) + "\b" * (MB // 8),
    "carriage returns then newlines": "x" * (MB // 4) + "\r\r\n" * (MB // 4),
    "backspaces at line starts": "\n\b\b" * (MB // 3),
    "alternating everything": "ab\bc\rd\n" * (MB // 7),
}


@functools.cache
def fed(name: str) -> StreamText:
    """The adversarial text ``name`` fed once to a :class:`StreamText` (about a second of work
    each): the linear-work test and the result test below read the same one."""
    return StreamText(ADVERSARIAL[name])


@pytest.mark.slow
@pytest.mark.parametrize("name", list(ADVERSARIAL))
def test_megabyte_text_takes_linear_work(name):
    text = ADVERSARIAL[name]
    stream = fed(name)
    # Each input character writes, moves or deletes a bounded number of characters.
    assert stream.operations <= 4 * len(text), (name, stream.operations)
    out = stream.text
    assert "\r" not in out and "\b" not in out
    assert len(out) == len(stream) <= len(text)


@pytest.mark.slow
def test_megabyte_results_are_right():
    assert process_stream(ADVERSARIAL["backspaces after a long line"]) == ""
    assert fed("a carriage return per character").text == "ab"
    # Each "y\b" inside the line overwrites one x and deletes it with the next one.
    assert fed("backspace inside a long line").text == ""
    assert process_stream("x" * 10 + "\r" + "y\b" * 3) == "x" * 4
    assert fed("carriage returns then newlines").text == "x" * (MB // 4) + "\n" * (MB // 4)


def test_megabyte_text_split_into_many_messages_takes_linear_work():
    stream = StreamText()
    for i in range(100_000):
        stream.feed(f"\r{i:>8}")
    assert stream.text == f"{99_999:>8}"
    assert stream.operations <= 4 * 100_000 * 9


# -- the output collector ---------------------------------------------------------------------


def test_collector_stores_streams_as_jupyterlab_saves_them():
    collector = OutputCollector(limit=1000)
    for i in range(5):
        collector.handle("stream", {"name": "stdout", "text": f"\rstep {i}"})
    collector.handle("stream", {"name": "stdout", "text": "\n50%\b\b\b60%\n\n"})
    assert collector.outputs == [stream("stdout", "step 4\n60%\n\n")]


def test_collector_keeps_every_interleaved_stream_message():
    collector = OutputCollector(limit=10**7)
    for i in range(20_000):
        collector.handle("stream", {"name": "stdout" if i % 2 else "stderr", "text": f"{i}\n"})
    outputs = collector.outputs
    assert len(outputs) == 20_000 and not collector.dropped
    assert "".join(o["text"] for o in outputs if o["name"] == "stdout") == "".join(f"{i}\n" for i in range(1, 20_000, 2))


def test_collector_work_per_message_does_not_grow_with_the_output():
    # The stream kept so far is never re-read: each message costs its own characters.
    collector = OutputCollector(limit=10**8)
    for i in range(10_000):
        collector.handle("stream", {"name": "stdout", "text": f"line {i}\n"})
        collector.handle("stream", {"name": "stderr", "text": "e"})
    assert collector._stream is not None and collector._stream.operations < 10


def test_collector_cap_note_is_never_written_into():
    collector = OutputCollector(limit=1000)
    for i in range(MAX_OUTPUTS + 3):
        collector.handle("display_data", {"data": {"text/plain": str(i)}, "metadata": {}})
    collector.handle("stream", {"name": "stdout", "text": "printed after the cap\n"})
    collector.handle("execute_result", {"data": {"text/plain": "42"}, "metadata": {}, "execution_count": 1})
    collector.handle("error", {"ename": "E", "evalue": "v", "traceback": ["tb"]})
    outputs = collector.outputs
    assert outputs[MAX_OUTPUTS] == stream("stdout", "printed after the cap\n")
    assert [o["output_type"] for o in outputs[-3:]] == ["execute_result", "error", "stream"]
    assert outputs[-1]["livecells_note"] and "3 more output(s) left out" in outputs[-1]["text"]
    # The note is separate from the streams in what the page shows.
    assert [o.get("text") for o in shown_outputs(outputs)][-1] == outputs[-1]["text"]


def test_collector_limit_counts_shown_characters_per_stream_name():
    collector = OutputCollector(limit=10)
    collector.handle("stream", {"name": "stdout", "text": "x" * 8 + "\r" + "y" * 8})  # shows 8
    collector.handle("stream", {"name": "stderr", "text": "e"})
    collector.handle("stream", {"name": "stdout", "text": "abcdef"})
    outputs = collector.outputs
    assert outputs[0]["text"] == "y" * 8 and "truncated" not in outputs[0]
    assert outputs[2] == stream("stdout", "ab", truncated=True)
    collector.handle("stream", {"name": "stdout", "text": "more"})
    assert len(collector.outputs) == 3


def display(collector, kind, value, display_id, **extra):
    content = {"data": {"text/plain": value}, "metadata": {}, "transient": {"display_id": display_id}, **extra}
    collector.handle(kind, content)


def test_display_updates_reach_earlier_cells_of_the_session():
    displays = SessionDisplays()
    first, second, third = (OutputCollector(100, displays) for _ in range(3))
    display(first, "display_data", "a", "d")
    display(second, "display_data", "other", "e")
    display(third, "update_display_data", "b", "d")
    assert first.outputs[0]["data"] == {"text/plain": "b"}
    assert second.outputs[0]["data"] == {"text/plain": "other"} and third.outputs == []


def test_a_later_cells_clear_output_leaves_earlier_cells_targets_alone():
    """As run_cell does: each cell's collector is dropped when the cell ends, so a later one may
    get the same address; an immediate clear_output in it must not forget the earlier cells'."""
    displays = SessionDisplays()
    kept = []
    for value in ("a", "b"):
        collector = OutputCollector(100, displays)
        display(collector, "display_data", value, f"d-{value}")
        kept.append(collector.outputs)  # the outputs outlive the collector, as in the store
        del collector
    later = OutputCollector(100, displays)
    later.handle("clear_output", {"wait": False})
    display(later, "update_display_data", "A", "d-a")
    display(later, "update_display_data", "B", "d-b")
    assert [outputs[0]["data"]["text/plain"] for outputs in kept] == ["A", "B"]


def test_a_repeated_display_id_shows_the_latest_value_everywhere():
    displays = SessionDisplays()
    first, second = OutputCollector(100, displays), OutputCollector(100, displays)
    display(first, "display_data", "a", "d")
    display(second, "display_data", "b", "d")
    assert [o["data"]["text/plain"] for o in first.outputs + second.outputs] == ["b", "b"]


def test_clear_wait_then_update_keeps_the_updated_output():
    collector = OutputCollector(100)
    display(collector, "display_data", "a", "d")
    collector.handle("clear_output", {"wait": True})
    display(collector, "update_display_data", "b", "d")
    assert [o["data"]["text/plain"] for o in collector.outputs] == ["b"]
    collector.handle("stream", {"name": "stdout", "text": "after"})
    assert collector.outputs == [stream("stdout", "after")]


def test_a_cleared_output_is_no_longer_updated():
    displays = SessionDisplays()
    first, second = OutputCollector(100, displays), OutputCollector(100, displays)
    display(first, "display_data", "a", "d")
    first.handle("clear_output", {"wait": False})
    display(first, "display_data", "a2", "d")
    display(second, "update_display_data", "b", "d")
    assert first.outputs[0]["data"] == {"text/plain": "b"}
    first.handle("clear_output", {})
    display(second, "update_display_data", "c", "d")
    assert first.outputs == [] and second.outputs == []


def test_transient_none_and_updates_without_target_are_harmless():
    collector = OutputCollector(100)
    collector.handle("display_data", {"data": {"text/plain": "x"}, "metadata": {}, "transient": None})
    display(collector, "update_display_data", "y", "missing")
    assert collector.outputs[0]["data"] == {"text/plain": "x"}


def test_streams_apply_carriage_returns_like_a_terminal():
    assert process_stream("progress 10%\rprogress 100%\ndone") == "progress 100%\ndone"


def test_collector_merges_streams_and_caps_floods():
    collector = OutputCollector(limit=10)
    collector.handle("stream", {"name": "stdout", "text": "12345"})
    collector.handle("stream", {"name": "stdout", "text": "67890abc"})
    collector.handle("stream", {"name": "stderr", "text": "err"})
    assert collector.outputs[0] == {"output_type": "stream", "name": "stdout", "text": "1234567890", "truncated": True}
    assert collector.outputs[1]["text"] == "err"
    for i in range(MAX_OUTPUTS + 5):
        collector.handle("display_data", {"data": {"text/plain": str(i)}, "metadata": {}})
    assert len(collector.outputs) == 2 + MAX_OUTPUTS + 1  # streams do not count: their limit is in characters
    assert "5 more output(s) left out" in collector.outputs[-1]["text"]


def test_collector_handles_clear_output_and_display_updates():
    collector = OutputCollector(limit=100)
    collector.handle("display_data", {"data": {"text/plain": "a"}, "metadata": {}, "transient": {"display_id": "d"}})
    collector.handle("update_display_data", {"data": {"text/plain": "b"}, "metadata": {}, "transient": {"display_id": "d"}})
    assert collector.outputs[0]["data"] == {"text/plain": "b"}
    collector.handle("clear_output", {"wait": True})
    collector.handle("stream", {"name": "stdout", "text": "after"})
    assert [o.get("text") for o in collector.outputs] == ["after"]


def test_collector_refuses_huge_images():
    collector = OutputCollector(limit=100)
    collector.handle("display_data", {"data": {"image/png": "A" * 20_000_000}, "metadata": {}})
    output = collector.outputs[0]
    assert "image/png" not in output["data"] and "left out" in output["livecells_refused"]
