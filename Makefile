# livecells: `make docs` sets everything up and builds the docs with executed cells;
# `make test` lints (ruff) and runs the suite but the TensorFlow/JAX environment tests (`make
# test-frameworks`); `make test-fast` (the loop while editing, under 30 s on 2 cores) runs the
# tests that start no kernel, browser, cluster, framework or program and are not `slow` (markers
# in pyproject.toml: pure and in-process FakeKernels tests); `make test-nokernels` adds the slow
# ones of that kind (CI runs it as an ordinary user); `make lint` lints only. They create .venv
# on first use. `make test-matrix`
# checks the wheel on every supported Python at both ends of the dependency ranges
# (tests/matrix/run.py).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SPHINXOPTS ?=
# Where the environment forbids writing bytecode (PYTHONDONTWRITEBYTECODE, set on these machines),
# pytest rewrites every test module's asserts and Python compiles every module on each run: 7 s
# of the 2-core machine's fast tests before the first one runs. The targets let both be cached.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: docs test test-fast test-nokernels test-frameworks test-matrix lint install clean pdf bench

install: $(STAMP)

# constraints/dev.txt pins this machine's versions: torch 2.13.0 is the CPU wheel it keeps on
# disk (PIP_FIND_LINKS), mxnet 1.9.1 needs numpy<1.24. See the README for CUDA builds on a GPU machine.
$(STAMP): pyproject.toml constraints/dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -c constraints/dev.txt -e '.[frameworks,docs,test]' uv twine
	touch $(STAMP)

docs: $(STAMP)
	$(BIN)/sphinx-build -b html -c . $(SPHINXOPTS) docs _build/html

lint: $(STAMP)
	$(BIN)/ruff check ext tests bench

test: lint
	$(BIN)/python -m pytest -q -ra -n auto --dist loadfile --no-loadscope-reorder -m "not frameworks_extra" $(PYTEST_ARGS)

NOKERNELS := not kernel and not frameworks and not browser and not cluster and not frameworks_extra and not process
FAST := $(NOKERNELS) and not slow
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -ra -n 2 --dist loadfile -m "$(FAST)" $(PYTEST_ARGS)

test-nokernels: $(STAMP)
	$(BIN)/python -m pytest -q -ra -n 2 --dist loadfile -m "$(NOKERNELS)" $(PYTEST_ARGS)

# TensorFlow and JAX tabs in environments pinned as d2l-en's (tests/envs/make.sh makes them under
# $(LIVECELLS_ENVS), ~2 GB each, minutes the first time).
LIVECELLS_ENVS ?= $(HOME)/.cache/livecells-envs
test-frameworks: $(STAMP)
	LIVECELLS_ENVS=$(LIVECELLS_ENVS) $(BIN)/python -m pytest -q -ra -n 0 -m frameworks_extra tests/kernel/test_frameworks_envs.py $(PYTEST_ARGS)

# CI passes MATRIX_ARGS=--require-all: each supported Python must be on the machine.
test-matrix: $(STAMP)
	$(BIN)/python tests/matrix/run.py --uv $(BIN)/uv --twine $(BIN)/twine $(MATRIX_ARGS)

pdf: $(STAMP)
	$(BIN)/sphinx-build -M latexpdf docs _build -c . $(SPHINXOPTS)

bench: $(STAMP)
	$(BIN)/pip install --quiet -e '.[bench]'
	$(BIN)/python bench/build_speed.py

clean:
	rm -rf _build
