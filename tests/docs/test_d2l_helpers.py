"""The sample book's ``d2l`` helpers (docs/d2l/): both framework modules, each in its own process.

Each check script runs with ``docs/`` as its working directory and first entry of ``sys.path``,
as a chapter's kernel does, with warnings (after import) turned into errors; it prints one JSON line of
results. The two processes run side by side (torch ~1 s and mxnet ~0.7 s to import).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import timing
from paths import DOCS

# frameworks: the d2l helpers of each framework, run in its kernel.
pytestmark = [pytest.mark.slow, pytest.mark.frameworks]


COMMON = """
import json, sys, warnings
from d2l import {module} as d2l
lazy = not any(m in sys.modules for m in ("matplotlib", "IPython"))
{setup}
warnings.simplefilter("error")  # after the frameworks' own import-time warnings
r = {{"lazy": lazy, "missing": [n for n in d2l.__all__ if not hasattr(d2l, n)]}}
r["device"] = str(d2l.try_gpu()) == str(d2l.gpu(0) if d2l.num_gpus() else d2l.cpu())
X = d2l.reshape(d2l.arange(12, dtype=d2l.float32), (3, 4))
r["aliases"] = [d2l.size(X), float(d2l.reduce_sum(X)), d2l.numpy(X).shape[::-1] == d2l.transpose(X).shape,
                d2l.numpy(d2l.reduce_sum(X, axis=0)).tolist(), float(d2l.matmul(X, d2l.ones(4))[1]),
                str(d2l.astype(X, d2l.int32).dtype).rsplit(".", 1)[-1]]
acc = d2l.Accumulator(2)
acc.add(1, d2l.tensor(2.0)); acc.add(3, 4)
r["accumulator"] = acc.data
with d2l.Benchmark("bench"):
    d2l.synchronize(d2l.cpu())
true_w, true_b = d2l.tensor([2, -3.4]), 4.2
features, labels = d2l.synthetic_data(true_w, true_b, 1000)
r["shapes"] = [list(features.shape), list(labels.shape)]
r["squared_loss"] = d2l.numpy(d2l.squared_loss(d2l.tensor([1.0, 3.0]), d2l.tensor([[0.0], [1.0]]))).tolist()
w, b = params()
data_iter = d2l.load_array((features, labels), 10)
for epoch in range(3):
    for Xb, yb in data_iter:
        step(lambda: d2l.squared_loss(d2l.linreg(Xb, w, b), yb))
        d2l.sgd([w, b], 0.03, 10)
r["w"], r["b"] = d2l.numpy(w).reshape(-1).tolist(), float(d2l.numpy(b).reshape(-1)[0])
r["loss"] = d2l.evaluate_loss(lambda X: d2l.linreg(X, w, b), data_iter, d2l.squared_loss)
y_hat, y = d2l.tensor([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]]), d2l.tensor([0, 2])
r["accuracy"] = d2l.accuracy(y_hat, y)
Xc, yc = features[:20], d2l.astype(features[:20, 1] > 0, labels.dtype)  # net looks at column 0
net = classifier()
test_iter = d2l.load_array((Xc, yc), 5, is_train=False)
r["eval_accuracy"] = [d2l.evaluate_accuracy(net, test_iter), d2l.evaluate_accuracy_gpu(net, test_iter),
                      d2l.accuracy(net(Xc), yc) / 20]
K = d2l.tensor([[0.0, 1], [2, 3]])
r["corr2d"] = d2l.numpy(d2l.corr2d(d2l.reshape(d2l.arange(9.0), (3, 3)), K)).tolist()
x = d2l.arange(0, 3, 0.1)
d2l.plot(x, [3 * x ** 2 - 4 * x, 2 * x - 3], "x", "f(x)", legend=["f(x)", "Tangent line (x=1)"])
fig = d2l.plt.gcf()
fig.savefig(sys.argv[1])
r["plot"] = [len(fig.axes[0].lines), [t.get_text() for t in fig.axes[0].get_legend().get_texts()],
             list(fig.get_size_inches()), [float(v[-1]) for v in fig.axes[0].lines[1].get_data()]]
print(json.dumps(r))
"""

SETUP = {
    "torch": """
import torch
torch.manual_seed(0)
def params():
    return torch.normal(0, 0.01, size=(2, 1), requires_grad=True), torch.zeros(1, requires_grad=True)
def step(loss):
    loss().sum().backward()
def classifier():
    net = torch.nn.Linear(2, 2)
    with torch.no_grad():
        net.weight.copy_(torch.tensor([[-1.0, 0.0], [1.0, 0.0]])); net.bias.zero_()
    return net
""",
    "mxnet": """
from mxnet import autograd, init, np, npx
from mxnet.gluon import nn
npx.set_np()
npx.random.seed(0)
def params():
    w, b = np.random.normal(0, 0.01, (2, 1)), np.zeros(1)
    w.attach_grad(); b.attach_grad()
    return w, b
def step(loss):
    with autograd.record():
        l = loss()
    l.backward()
def classifier():
    net = nn.Dense(2, in_units=2)
    net.initialize(init.Constant(0))
    net.weight.set_data(np.array([[-1.0, 0.0], [1.0, 0.0]]))
    return net
""",
}


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> dict[str, tuple[subprocess.CompletedProcess, Path]]:
    """Run both frameworks' check scripts at once; per framework: (finished process, figure path)."""
    tmp = tmp_path_factory.mktemp("d2l")
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONWARNINGS": ""}
    procs = {}
    for framework, module in (("torch", "torch"), ("mxnet", "mxnet")):
        script = COMMON.format(module=module, setup=SETUP[framework])
        figure = tmp / f"{framework}.png"
        procs[framework] = (subprocess.Popen(
            [sys.executable, "-c", script, str(figure)], cwd=DOCS, env=env, text=True,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE), figure)
    found = {}
    for framework, (proc, figure) in procs.items():
        out, err = proc.communicate(timeout=timing.PROCESS)
        found[framework] = (subprocess.CompletedProcess(proc.args, proc.returncode, out, err), figure)
    return found


@pytest.mark.parametrize("framework", ["torch", "mxnet"])
def test_helpers(results, framework):
    done, figure = results[framework]
    assert done.returncode == 0, done.stderr[-3000:]
    stdout = done.stdout
    r = json.loads(stdout.strip().splitlines()[-1])
    assert r["lazy"], "importing the module must not import matplotlib or IPython"
    assert r["missing"] == []
    assert r["device"]
    assert r["aliases"] == [12, 66.0, True, [12.0, 15.0, 18.0, 21.0], 22.0, "int32"]
    assert r["accumulator"] == [4.0, 6.0]
    assert re.search(r"^bench: \d+\.\d{4} sec$", stdout, re.M)
    assert r["shapes"] == [[1000, 2], [1000, 1]]
    assert r["squared_loss"] == [0.5, 2.0]
    assert r["w"] == pytest.approx([2, -3.4], abs=0.02) and r["b"] == pytest.approx(4.2, abs=0.02)
    assert r["loss"] < 1e-3
    assert r["accuracy"] == 1.0
    first, second, direct = r["eval_accuracy"]
    assert first == second == pytest.approx(direct) and 0 < first < 1
    assert r["corr2d"] == [[19.0, 25.0], [37.0, 43.0]]
    lines, legend, size, tangent_end = r["plot"]
    assert (lines, legend, size) == (2, ["f(x)", "Tangent line (x=1)"], [3.5, 2.5])
    assert tangent_end == pytest.approx([2.9, 2.8], abs=1e-5)  # (x, 2x - 3) at x = 2.9
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and figure.stat().st_size > 5000
