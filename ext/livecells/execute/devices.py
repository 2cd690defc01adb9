"""Devices: find GPUs without initialising CUDA, and lease them to sessions exclusively.

GPUs are listed through NVML (``nvidia-ml-py``, a dependency; ``nvidia-smi`` is NVML's own
client, so where NVML cannot start neither can it); CUDA is never touched in the Sphinx process.
A ``CUDA_VISIBLE_DEVICES`` already set for the build limits what may be used. Each session gets
its devices through ``CUDA_VISIBLE_DEVICES``. Nothing here guesses a page's needs from its code:
a page asks for GPUs with ``live-settings :gpus:``.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import AsyncIterator


@dataclass(frozen=True)
class GPU:
    index: int  # the index CUDA_VISIBLE_DEVICES uses
    name: str
    uuid: str = ""


def _visible_filter(gpus: list[GPU]) -> list[GPU]:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return gpus
    wanted = [v.strip() for v in visible.split(",") if v.strip()]
    chosen = []
    for item in wanted:
        for gpu in gpus:
            if item == str(gpu.index) or (item and gpu.uuid.startswith(item)):
                chosen.append(gpu)
                break
        else:
            break  # CUDA stops at the first entry it cannot match
    return chosen


#: The library pynvml loads on Linux (and, finding no Windows, elsewhere): NVML, which the driver
#: installs. Where it cannot be loaded there is no driver to ask.
NVML_LIBRARY = "libnvidia-ml.so.1"


def _nvml_gpus() -> list[GPU] | None:
    # Tried first with ctypes (what pynvml's nvmlInit does): a machine without a driver, such as
    # a CI runner's, then skips importing pynvml, a module of several thousand lines, on every build.
    import ctypes

    try:
        ctypes.CDLL(NVML_LIBRARY)
    except OSError:
        return None
    try:
        import pynvml
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception:  # no driver: NVMLError_LibraryNotFound, DriverNotLoaded, ...
        return None
    try:
        found = []
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            name = pynvml.nvmlDeviceGetName(handle)
            uuid = pynvml.nvmlDeviceGetUUID(handle)
            found.append(
                GPU(
                    index,
                    name.decode() if isinstance(name, bytes) else str(name),
                    uuid.decode() if isinstance(uuid, bytes) else str(uuid),
                )
            )
        return found
    except Exception:
        return None
    finally:
        try:
            pynvml.nvmlShutdown()
        except Exception:
            pass


def detect_gpus() -> list[GPU]:
    """The GPUs this build may use, in CUDA's order (empty without a driver)."""
    return _visible_filter(_nvml_gpus() or [])


def cpu_name() -> str:
    """A short name of this machine's processor, for provenance lines."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as info:
            for line in info:
                if line.startswith("model name"):
                    return " ".join(line.split(":", 1)[1].split())
    except OSError:
        pass
    return platform.processor() or platform.machine() or "CPU"


@dataclass(frozen=True)
class Lease:
    """Devices held by one session for as long as it runs."""

    gpus: tuple[GPU, ...]

    @property
    def cuda_visible_devices(self) -> list[int]:
        return [gpu.index for gpu in self.gpus]


class DeviceLedger:
    """The one rule for leasing GPUs, kept by the local pool and by each Dask worker: a session
    takes the first free GPUs in the order the ledger was given them (CUDA's order, the worker's
    own GPU first under dask-cuda), exclusively, and they go back to their places. Thread-safe."""

    def __init__(self, gpus: Sequence[GPU]) -> None:
        import threading

        self._rank = {gpu: place for place, gpu in enumerate(gpus)}
        self._free = list(gpus)
        self._lock = threading.Lock()

    @property
    def free(self) -> int:
        return len(self._free)

    def take(self, count: int) -> tuple[GPU, ...] | None:
        """``count`` GPUs, now removed from the free ones; None (and nothing taken) if fewer are free."""
        with self._lock:
            if len(self._free) < count:
                return None
            taken = tuple(self._free[:count])
            del self._free[:count]
        return taken

    def give_back(self, taken: Sequence[GPU]) -> None:
        with self._lock:
            self._free = sorted([*self._free, *taken], key=self._rank.__getitem__)


class DevicePool:
    """Leases GPUs exclusively (by :class:`DeviceLedger`'s rule), and bounds how many sessions
    execute at once; a lease waits until both allow it."""

    def __init__(self, gpus: Sequence[GPU], jobs: int) -> None:
        import asyncio  # here, not at import: a build that runs nothing never needs it

        self.gpus = list(gpus)
        self.jobs = max(1, jobs)
        self._ledger = DeviceLedger(self.gpus)
        self._changed = asyncio.Condition()
        self._running = 0

    @asynccontextmanager
    async def lease(self, count: int) -> AsyncIterator[Lease]:
        async with self._changed:
            await self._changed.wait_for(
                lambda: self._running < self.jobs and self._ledger.free >= count
            )
            taken = self._ledger.take(count) or ()
            self._running += 1
        try:
            yield Lease(taken)
        finally:
            async with self._changed:
                self._ledger.give_back(taken)
                self._running -= 1
                self._changed.notify_all()
