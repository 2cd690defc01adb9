# The oracle corpus: cells run once through nbclient (Jupyter itself) and once through livecells
# by tests/kernel/test_oracle.py, and compared cell by cell. A line "# %% <framework> <name> [raises]"
# starts a cell; the cells of one framework run in order in one session (one notebook).
# This file is data, not a module: it is never imported.

# %% pytorch imports
import os, sys, time
import torch

# %% pytorch print
print("hello")

# %% pytorch stdout-and-stderr
print("to stdout")
print("to stderr", file=sys.stderr)
print("stdout again")

# %% pytorch backspace-after-punctuation
print("50%\b\b\b60%")

# %% pytorch backspace-after-letters
print("abc\b\bXY")

# %% pytorch backspace-number
print("loss: 0.5\b\b\b0.4")

# %% pytorch spinner
for c in "|/-\\":
    print(f"\r{c}", end="", flush=True)
    time.sleep(0.01)
print("\rdone")

# %% pytorch keras-progress-bar
for i in range(1, 4):
    bar = f"{i}/3 [{'=' * i}{'.' * (3 - i)}]"
    print(bar + "\b" * len(bar) if i < 3 else bar, end="", flush=True)
    time.sleep(0.01)
print()

# %% pytorch carriage-return-over-longer-line
print("epoch 10 loss 0.912345, train acc 0.500", end="\r")
print("finished")

# %% pytorch carriage-return-progress
for i in range(0, 101, 25):
    print(f"\rprogress {i:3d}%", end="", flush=True)
    time.sleep(0.01)
print()

# %% pytorch carriage-return-newline
print("x\r\r\ny\r\nz")

# %% pytorch long-backspace-run
print("keep")
print("x" * 10 + "\b" * 1000 + "y")

# %% pytorch backspace-at-line-start
print("ab\n\b\bc")

# %% pytorch trailing-blank-lines
print("a\n\n\n")

# %% pytorch empty-print
print()

# %% pytorch no-newline
sys.stdout.write("no newline at the end")

# %% pytorch ansi-colour
print("\x1b[31mred\x1b[0m and \x1b[1mbold\x1b[0m")

# %% pytorch unicode
print("héllo ✓ 你好")

# %% pytorch hundred-lines
print("\n".join(f"line {i}" for i in range(100)))

# %% pytorch flushes-over-time
for i in range(3):
    print(i, end=" ", flush=True)
    time.sleep(0.05)

# %% pytorch result-int
6 * 7

# %% pytorch no-output
x = 1

# %% pytorch result-string
"a string"

# %% pytorch result-none
None

# %% pytorch print-then-result
print("before")
x + 1

# %% pytorch last-result
_

# %% pytorch display-loop
from IPython.display import display, clear_output
for i in range(3):
    display(i)

# %% pytorch print-display-print
print("one")
display("two")
print("three")

# %% pytorch display-id
h = display("first value", display_id=True)

# %% pytorch display-update-later-cell
h.update("second value")

# %% pytorch display-id-repeated-a
display("v1", display_id="same")

# %% pytorch display-id-repeated-b
display("v2", display_id="same")

# %% pytorch clear-wait-then-update
h3 = display("before clear", display_id=True)
clear_output(wait=True)
h3.update("after update")

# %% pytorch clear-wait-then-print
print("cleared away")
clear_output(wait=True)
print("what stays")

# %% pytorch clear-now
print("gone")
clear_output()
print("kept")

# %% pytorch html
from IPython.display import HTML, Markdown, Latex, Math, JSON, Image
HTML("<b>bold</b> <i>html</i> text")

# %% pytorch pandas
import pandas as pd
pd.DataFrame({"a": [1, 2], "b": ["x", "y"]})

# %% pytorch markdown
Markdown("# A title\n\nSome **bold**, *italic* and `code`.\n\n- one\n- two")

# %% pytorch latex
Latex(r"$$\int_0^1 x\,dx = \frac{1}{2}$$")

# %% pytorch math
Math(r"\frac{a}{b} + \sqrt{c}")

# %% pytorch markdown-table
Markdown("| a | b |\n|---|---|\n| 1 | 2 |\n\n~~struck~~")

# %% pytorch markdown-math
Markdown("Inline $x^2$ and <b>html</b>\n\n$$y = 2$$")

# %% pytorch display-several-rich
display(Markdown("*m*"), Math("x^2"), Latex(r"$\alpha$"), 4)

# %% pytorch display-raw-bundle
display({"text/plain": "plain", "text/markdown": "**raw md**"}, raw=True)

# %% pytorch update-display-three-cells-a
display("step 0", display_id="three")

# %% pytorch update-display-three-cells-b
from IPython.display import update_display
update_display("step 1", display_id="three")
update_display("never shown", display_id="no-such-id")

# %% pytorch update-display-three-cells-c
update_display(Markdown("**step 2**"), display_id="three")

# %% pytorch clear-now-between-displays
display("d1")
clear_output()
display("d2")

# %% pytorch json
JSON({"a": [1, 2, 3], "b": {"c": "d"}})

# %% pytorch matplotlib-png
%matplotlib inline
import matplotlib.pyplot as plt
plt.figure(figsize=(2, 1.5))
plt.plot([1, 2, 3], [1, 4, 9])
plt.show()

# %% pytorch image-display
import io
buffer = io.BytesIO()
plt.figure(figsize=(1, 1))
plt.plot([0, 1])
plt.savefig(buffer, format="png")
plt.close()
Image(data=buffer.getvalue())

# %% pytorch matplotlib-svg
from matplotlib_inline.backend_inline import set_matplotlib_formats
set_matplotlib_formats("svg")
plt.figure(figsize=(2, 1.5))
plt.plot([1, 2, 3], [3, 1, 2])
plt.show()

# %% pytorch d2l-animator
sys.path.insert(0, "/work/shared/d2l-corpus")
from d2l import torch as d2l
animator = d2l.Animator(xlabel="epoch", xlim=[1, 3], legend=["train loss"])
for epoch in range(1, 4):
    animator.add(epoch, 1 / epoch)

# %% pytorch d2l-progress-board
import numpy as np
board = d2l.ProgressBoard("x")
for x in np.arange(0, 2, 0.1):
    board.draw(x, np.sin(x), "sin", every_n=5)

# %% pytorch figure-clear-loop
for i in range(3):
    fig = plt.figure(figsize=(1, 1))
    plt.plot([0, i])
    display(fig)
    plt.close(fig)
    clear_output(wait=True)
print("after the figures")

# %% pytorch magic-precision
%precision 3
3.14159265

# %% pytorch magic-env
%env LIVECELLS_ORACLE=yes

# %% pytorch magic-timeit
%timeit -n 1 -r 1 sum(range(10))

# %% pytorch magic-capture
%%capture
print("captured, not shown")

# %% pytorch cell-magic-html
%%html
<p>from a <em>cell magic</em></p>

# %% pytorch cell-magic-markdown
%%markdown
*from* the **markdown** magic

# %% pytorch shell-echo
!echo hi from the shell

# %% pytorch shell-stderr
!echo to stderr from the shell 1>&2

# %% pytorch shell-capture
files = !printf 'a\nb\n'
files

# %% pytorch fd-write-stdout
n = os.write(1, b"fd one\n")
n = os.write(1, b"fd one again\n")

# %% pytorch fd-write-stderr
n = os.write(2, b"fd two\n")

# %% pytorch error-zero raises
1 / 0

# %% pytorch error-value raises
def inner():
    raise ValueError("bad <value> & more")
inner()

# %% pytorch error-syntax raises
def broken(:
    pass

# %% pytorch error-stdin raises
input("never answered")

# %% pytorch warning
import warnings
warnings.warn("careful")

# %% pytorch torch-value
torch.ones(2, 3)

# %% pytorch torch-print
print(torch.arange(6).reshape(2, 3))

# %% pytorch torch-error raises
torch.ones(2, 3) @ torch.ones(2, 3)

# %% pytorch fd-and-print
n = os.write(1, b"fd\n")
print("py")

# %% pytorch kernel-environment
{k: os.environ.get(k) for k in ("PYDEVD_USE_FRAME_EVAL", "MPLBACKEND", "TERM", "CLICOLOR", "PAGER")}

# %% pytorch top-level-await
import asyncio
await asyncio.sleep(0.01)
print("awaited")

# %% pytorch dataloader-workers
from torch.utils.data import DataLoader, TensorDataset
[b[0].tolist() for b in DataLoader(TensorDataset(torch.arange(8.0)), batch_size=4, num_workers=2)]

# %% pytorch error-chained-cause raises
try:
    {}["k"]
except KeyError as e:
    raise ValueError("wrapped") from e

# %% pytorch error-recursion raises
def forever(n):
    # Each frame of the traceback shows these lines, and IPython colours each keyword on its own:
    # with its colour codes, a line is six times as long as without them.
    v0 = not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not n
    v1 = not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not n
    v2 = not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not not n
    return forever(n + 1) if n >= 0 else (v0, v1, v2)
def depth():
    frame, n = sys._getframe(1), 0
    while frame is not None:
        frame, n = frame.f_back, n + 1
    return n
limit = sys.getrecursionlimit()
# About 28 frames (IPython takes 10 to 25 ms a frame to format), whatever the kernel's own depth: a
# traceback of 130,000 characters, 25,000 without its colours, so over the default
# livecells_output_limit only with them.
sys.setrecursionlimit(depth() + 30)
try:
    forever(0)
finally:
    sys.setrecursionlimit(limit)

# %% pytorch keyboard-interrupt raises
raise KeyboardInterrupt

# %% pytorch stack-depth
import inspect
len(inspect.stack()), sys.getrecursionlimit()

# %% pytorch recursion-depth
def depth(n=0):
    try:
        return depth(n + 1)
    except RecursionError:
        return n
depth() - len(inspect.stack())

# %% mxnet mx-imports
from mxnet import np, npx
npx.set_np()

# %% mxnet mx-value
np.ones((2, 3))

# %% mxnet mx-reshape
x = np.arange(12)
x.reshape(3, 4)

# %% mxnet mx-print
print(x.sum())

# %% mxnet mx-autograd
from mxnet import autograd
x = np.arange(4.0)
x.attach_grad()
with autograd.record():
    y = 2 * np.dot(x, x)
y.backward()
x.grad

# %% mxnet mx-progress
for i in range(3):
    print(f"\repoch {i + 1}, loss {1 / (i + 1):.3f}", end="", flush=True)
print()

# %% mxnet mx-flood
import sys
for i in range(10_000):
    print(f"out {i}")
    print(f"err {i}", file=sys.stderr)
