#!/usr/bin/env bash
# Run ON THE DEVICE MACHINE (one NVIDIA GPU, python3 3.12 with CUDA torch, no network), from the
# repo root, after bench/gpu/fetch_wheels.sh here; the device tool's call is:
#   run(command="bash bench/gpu/device_check.sh", carry=[".whl"], timeout_s=540)
# It builds the sample chapter with GPU execution, runs the GPU tests, and puts the page, the
# store file, the build log and the test log in $OUT. MXNet is not on that machine: its tabs
# keep their recorded outputs, marked so, with a livecells.config warning.
set -uo pipefail
export PYTHONUNBUFFERED=1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
export PYTHONPATH=/tmp/site:$PWD/ext
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv | tee "$OUT/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__, torch.cuda.is_available())" | tee -a "$OUT/gpu.txt"
start=$(date +%s.%N)
python3 -m sphinx -b html -c . docs /tmp/html -D livecells_execute=force 2>&1 | tee "$OUT/build.log"
end=$(date +%s.%N)
echo "build seconds: $(python3 -c "print(round($end - $start, 1))")" | tee -a "$OUT/build.log"
cp /tmp/html/async-computation.html "$OUT/" 2>/dev/null
cp docs/_livecells/async-computation.json "$OUT/async-computation.store.json" 2>/dev/null
# The chapter's live torch timings and its device line, as the page shows them.
python3 - <<'PY' | tee "$OUT/timings.txt"
import re, html
page = open("/tmp/html/async-computation.html", encoding="utf-8").read()
for m in re.findall(r"(?:numpy|torch|Done|mxnet\.np): [\d.]+ sec", page):
    print(m)
for m in re.findall(r'<p class="livecells-meta[^"]*">([^<]*)</p>', page):
    print("meta:", html.unescape(m))
PY
python3 -m pytest -q -m gpu tests/kernel/test_gpu.py -p no:cacheprovider 2>&1 | tee "$OUT/tests.log"
