"""GPU detection: NVML through pynvml, and pynvml left unimported where no driver can be loaded."""

from __future__ import annotations

import ctypes
import subprocess
import sys
import types
from typing import Any

import pytest

from livecells.execute import devices


def _fake_pynvml(names: list[str]) -> types.ModuleType:
    fake = types.ModuleType("pynvml")
    calls: list[str] = []

    def record(name: str, value: Any = None) -> Any:
        def call(*args: Any) -> Any:
            calls.append(name)
            return value(*args) if callable(value) else value

        return call

    fake.nvmlInit = record("init")  # type: ignore[attr-defined]
    fake.nvmlShutdown = record("shutdown")  # type: ignore[attr-defined]
    fake.nvmlDeviceGetCount = record("count", len(names))  # type: ignore[attr-defined]
    fake.nvmlDeviceGetHandleByIndex = record("handle", lambda i: i)  # type: ignore[attr-defined]
    fake.nvmlDeviceGetName = record("name", lambda i: names[i].encode())  # type: ignore[attr-defined]
    fake.nvmlDeviceGetUUID = record("uuid", lambda i: f"GPU-{i}")  # type: ignore[attr-defined]
    fake.calls = calls  # type: ignore[attr-defined]
    return fake


def test_without_the_nvml_library_pynvml_is_not_imported(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_library(name: str, *args: Any, **kwargs: Any) -> Any:
        assert name == devices.NVML_LIBRARY
        raise OSError(f"{name}: cannot open shared object file")

    fake = _fake_pynvml(["NVIDIA H100"])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(ctypes, "CDLL", no_library)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert devices.detect_gpus() == []
    assert fake.calls == []  # type: ignore[attr-defined]


def test_with_the_nvml_library_pynvml_lists_the_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[str] = []
    fake = _fake_pynvml(["NVIDIA H100", "NVIDIA H200"])
    monkeypatch.setitem(sys.modules, "pynvml", fake)
    monkeypatch.setattr(ctypes, "CDLL", lambda name, *a, **k: loaded.append(name))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "1")
    assert devices.detect_gpus() == [devices.GPU(1, "NVIDIA H200", "GPU-1")]
    assert loaded == [devices.NVML_LIBRARY]
    assert fake.calls[0] == "init" and fake.calls[-1] == "shutdown"  # type: ignore[attr-defined]


def test_the_library_is_the_one_pynvml_loads() -> None:
    """Checked against the installed pynvml: the name it gives ctypes on Linux is ours."""
    pynvml = pytest.importorskip("pynvml")
    source = open(pynvml.__file__, encoding="utf-8").read()
    assert f'CDLL("{devices.NVML_LIBRARY}")' in source


def test_a_machine_without_a_driver_never_imports_pynvml() -> None:
    """In a fresh Python, on whatever machine this runs: pynvml is imported exactly where the
    NVML library loads (a GPU machine), and nowhere else."""
    code = (
        "import ctypes, sys\n"
        "from livecells.execute.devices import NVML_LIBRARY, detect_gpus\n"
        "try:\n    ctypes.CDLL(NVML_LIBRARY); loads = True\n"
        "except OSError:\n    loads = False\n"
        "sys.modules.pop('pynvml', None)\n"
        "detect_gpus()\n"
        "print(loads, 'pynvml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == out[1], out
