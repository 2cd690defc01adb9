#!/usr/bin/env bash
# Run HERE (not on the device): download the wheels that the device machine lacks (its python3
# is 3.12 with CUDA torch, numpy, matplotlib, pytest, but no Sphinx or Jupyter) into .whl/,
# which git ignores and `run` carries (carry: [".whl"]). bench/gpu/device_check.sh installs them.
set -euo pipefail
cd "$(dirname "$0")/../.."
grep -qx '/.whl/' .git/info/exclude 2>/dev/null || echo '/.whl/' >> .git/info/exclude
rm -rf .whl && mkdir -p .whl
platforms=()
for n in 2_28 2_27 2_24 2_17 2014 1; do
  case $n in 2014|1) platforms+=(--platform "manylinux${n}_x86_64");; *) platforms+=(--platform "manylinux_${n}_x86_64");; esac
done
python3 -m pip download --quiet --only-binary=:all: --python-version 3.12 --implementation cp \
  "${platforms[@]}" -d .whl \
  "sphinx>=7.2" "sphinx-design>=0.6" "jupyter_client>=8" "ipykernel>=6.20" "nbformat>=5.9" \
  beautifulsoup4 psutil pytest-timeout
# What the device already has in a version that works: keep its own (one version of each).
rm -f .whl/numpy-* .whl/pytest-[0-9]* .whl/pluggy-* .whl/packaging-* .whl/pygments-* \
      .whl/Jinja2-* .whl/jinja2-* .whl/MarkupSafe-* .whl/markupsafe-* .whl/requests-* \
      .whl/urllib3-* .whl/idna-* .whl/certifi-* .whl/charset_normalizer-*
du -sh .whl && ls .whl | wc -l
