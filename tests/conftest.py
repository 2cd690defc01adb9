"""Test set-up: Sphinx's testing fixtures over the small sites in tests/roots/."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest
from sphinx.util.docutils import additional_nodes

from paths import ROOTS

pytest_plugins = ["sphinx.testing.fixtures"]

# The suite runs two tests at a time on two cores (``make test``: pytest-xdist, ``-n auto``), and
# the kernels they start import torch, mxnet and numpy, whose thread pools would each take every
# core and spin while the other test's kernels wait: one thread each (unless the caller set
# another number). Set before any kernel or template starts, so every kernel, forked or fresh,
# and every oracle kernel sees the same. CPU time of the suite: 223 s against 265 s without.
for _variable in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(_variable, "1")


@pytest.fixture(scope="session")
def rootdir() -> Path:
    return ROOTS


def kernel_processes() -> list[psutil.Process]:
    """Kernels started by this test process (or its children) that are still alive."""
    found = []
    for proc in psutil.Process(os.getpid()).children(recursive=True):
        try:
            if any("ipykernel" in part for part in proc.cmdline()):
                found.append(proc)
        except psutil.Error:
            continue
    return found


@pytest.fixture(scope="session", autouse=True)
def livecells_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The preload probes' answers of this run's templates (``pipeline/processes.probe_folder``) in
    a folder of the run's own, not in the user's cache: every build and program the tests start
    inherits it."""
    folder = tmp_path_factory.mktemp("livecells-cache")
    os.environ["LIVECELLS_CACHE_DIR"] = str(folder)
    return folder


@pytest.fixture(autouse=True)
def docutils_left_clean():
    """Fails the test after which a Sphinx application's docutils registrations are still in place.

    A build in this process that is not cleaned up (``SphinxTestApp.cleanup``, or
    ``docutils_namespace`` around a plain ``Sphinx``) leaves its nodes registered, and the next
    build on the same pytest-xdist worker warns about each of them.
    """
    yield
    left = sorted(node.__name__ for node in additional_nodes)
    additional_nodes.clear()
    assert not left, f"docutils nodes left registered by an in-process build: {left[:5]}"


@pytest.fixture
def no_kernel_left():
    """Fails the test if a kernel started during it outlives it."""
    yield
    left = kernel_processes()
    assert not left, f"kernels left running: {[p.pid for p in left]}"


#: Modules whose shared builds take longest (real torch, mxnet, timeouts): collected first. ``make
#: test`` runs pytest-xdist with ``--dist loadfile`` (a module's tests, and so its module-scoped
#: builds, on one worker) and ``--no-loadscope-reorder`` (modules handed out in this order), so
#: that they start first and the short modules fill in around them.
LONGEST_FIRST = (
    "test_forkserver.py", "test_d2l_book.py", "test_processes.py", "test_oracle.py",
    "test_dask.py", "test_markdown.py", "test_d2l_helpers.py", "test_browser.py",
    "test_kernel_sessions.py", "test_store.py", "test_store_files.py", "test_core.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: n for n, name in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))
