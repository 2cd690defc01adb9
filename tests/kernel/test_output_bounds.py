"""Bounded memory (issue 23, class 4): no output of a cell reaches the build whole, however big,
many or odd its messages are; a real kernel floods, and the build's peak stays well under one flood."""

from __future__ import annotations

import pytest

import timing

FLOODS = {
    "stream": "import sys; sys.stdout.write('x' * (64 << 20))",
    "stream from C": "import os; os.write(1, b'y' * (64 << 20))",
    "display": "from IPython.display import display; display({'text/html': 'x' * (64 << 20)}, raw=True)",
    "result": "class Big:\n    def _repr_html_(self):\n        return 'x' * (64 << 20)\nBig()",
    "error": "raise ValueError('x' * (64 << 20))",
    "many": "for i in range(400_000):\n    print(i)",
    "displays": "from IPython.display import display\nfor i in range(10_050):\n    display(i)",
    "comm": "from comm import create_comm\nc = create_comm(target_name='t', data={'x': 'x' * (64 << 20)})",
    "metadata": "from IPython.display import display\ndisplay({'text/plain': 'm'}, metadata={'x': 'x' * (64 << 20)}, raw=True)",
    "payload": "get_ipython().set_next_input('x' * (64 << 20))",
}


@pytest.mark.kernel
@pytest.mark.timeout(timing.FLOODS)
def test_no_output_reaches_the_build_whole(tmp_path):
    import asyncio
    import tracemalloc

    from livecells.execute.kernels.session import KernelSession
    from livecells.kernel_side import budget
    from livecells.model.frameworks import FrameworkSpec

    spec = FrameworkSpec(name="alpha", label="Alpha")

    async def session() -> dict:
        found = {}
        async with KernelSession(spec, cwd=tmp_path, output_limit=1000) as kernel:
            for name, code in FLOODS.items():
                tracemalloc.start()
                found[name] = await kernel.run_cell(code, timing.CELL)
                found[name + " peak"] = tracemalloc.get_traced_memory()[1]
                tracemalloc.stop()
            found["after"] = await kernel.run_cell("print('still here')", timing.CELL)
        return found

    found = asyncio.run(session())
    for name in FLOODS:  # the build's Python objects at their peak: well under one flood's size
        assert found[f"{name} peak"] < 64 << 20, (name, found[f"{name} peak"] >> 20)
    for name in ["stream", "stream from C", "many"]:
        out = found[name].outputs[0]
        assert len(out["text"]) == 1000 and out["truncated"], name
    (shown,) = found["display"].outputs
    assert shown["data"] == {"text/plain": f"[livecells: a text/html output of {64 << 20:,} characters was not sent: the limit is {budget.VALUE_CAP:,}]"}
    assert "text/html" not in found["result"].outputs[0]["data"]
    error = found["error"].error
    assert error["ename"] == "ValueError" and len(error["evalue"]) < budget.STREAM_MIN + 100
    assert "more characters were not sent" in error["evalue"]
    assert len(found["displays"].outputs) == 501  # the collector's 500, and its note
    for name, what in [("comm", "comm_open"), ("metadata", "display_data")]:
        (note,) = found[name].outputs
        assert note["name"] == "stderr" and f"a {what} message of 67,1" in note["text"], name
    assert found["payload"].outputs[0]["text"].startswith("[livecells: a payload of 67,1")
    assert found["after"].outputs[0]["text"] == "still here\n"
