"""On a machine with an NVIDIA GPU: sessions lease it, cells run on it, and timings wait for it.

Skipped where no GPU is found (CI); run on a GPU machine with ``pytest -m gpu tests/kernel/test_gpu.py``
(bench/gpu/device_check.sh does, on the device machine).
"""

from __future__ import annotations

import json
import re
import shutil

import pytest

from livecells.execute.devices import detect_gpus

from conftest import kernel_processes
from helpers import build_site, cell_with, meta, outputs, soup

GPUS = detect_gpus()
pytestmark = [
    pytest.mark.gpu,
    pytest.mark.kernel,
    pytest.mark.skipif(not GPUS, reason="no NVIDIA GPU on this machine"),
]

PAGE = """\
GPU
===

.. live-cell:: pytorch

   import os, time, torch
   print("visible:", os.environ["CUDA_VISIBLE_DEVICES"])
   a = torch.randn(8192, 8192, device="cuda")
   torch.cuda.synchronize()
   start = time.perf_counter()
   for _ in range(40):
       b = a @ a
   launch = time.perf_counter() - start
   print(f"launch: {launch:.6f}")

.. live-cell:: pytorch

   torch.ones((1, 2), device="cuda") * 3
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    src = tmp_path_factory.mktemp("gpu")
    (src / "conf.py").write_text('extensions = ["livecells"]\n')
    (src / "index.rst").write_text(PAGE)
    app, warnings = build_site(src)
    yield {"src": src, "page": soup(app.outdir / "index.html"), "warnings": warnings}
    shutil.rmtree(src, ignore_errors=True)


def test_a_session_leases_a_gpu_and_runs_on_it(built):
    assert "livecells" not in built["warnings"], built["warnings"]
    first = outputs(cell_with(built["page"], "launch ="))
    assert re.search(r"visible: \d+$", first, re.MULTILINE)
    assert "device='cuda:0'" in outputs(cell_with(built["page"], "torch.ones"))
    stored = json.loads((built["src"] / "_livecells" / "index.json").read_text())
    provenance = stored["sessions"]["pytorch"]["provenance"]
    assert provenance["device_kind"] == "gpu" and provenance["devices_leased"] == 1
    assert provenance["device"] in {gpu.name for gpu in GPUS}


def test_the_timing_line_names_the_gpu_and_waits_for_its_queue(built):
    cell = cell_with(built["page"], "launch =")
    line = meta(cell)[0]
    assert GPUS[0].name in line
    reported = float(re.search(r"([\d.]+) s", line).group(1))
    launch = float(re.search(r"launch: ([\d.]+)", outputs(cell)).group(1))
    # 40 matmuls of 8192² take far longer to run than to queue: the clock waited for the GPU.
    assert reported > 5 * launch, (reported, launch)


def test_no_kernel_is_left(built):
    assert kernel_processes() == []
