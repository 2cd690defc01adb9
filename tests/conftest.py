"""Test set-up: Sphinx's testing fixtures over the small sites in tests/roots/."""

from __future__ import annotations

import os
from pathlib import Path

import psutil
import pytest

pytest_plugins = ["sphinx.testing.fixtures"]

ROOTS = Path(__file__).parent / "roots"


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


@pytest.fixture
def no_kernel_left():
    """Fails the test if a kernel started during it outlives it."""
    yield
    left = kernel_processes()
    assert not left, f"kernels left running: {[p.pid for p in left]}"
