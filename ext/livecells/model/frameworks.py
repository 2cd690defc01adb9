"""The frameworks a book is written for, as plain data (a Dask worker unpickles these).

The defaults for PyTorch and MXNet live here; ``livecells_frameworks`` (see :mod:`livecells.config`)
turns the book's settings into :class:`FrameworkSpec` s.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Code run in the kernel after every cell, before the clock stops, so that work a framework has
# queued on a device counts in the cell's time. It runs in livecells' own namespace, never the
# user's, and only touches a framework the cells have already imported.
TORCH_SYNC = (
    "torch = sys.modules.get('torch')\n"
    "if torch is not None and torch.cuda.is_initialized():\n"
    "    torch.cuda.synchronize()\n"
)
MXNET_SYNC = (
    "mx = sys.modules.get('mxnet')\n"
    "if mx is not None:\n"
    "    mx.nd.waitall()\n"
)
# Code that tells whether the session used a GPU (for the device named in the timing line).
TORCH_GPU_USED = "'torch' in sys.modules and sys.modules['torch'].cuda.is_initialized()"
MXNET_GPU_USED = "'mxnet' in sys.modules and sys.modules['mxnet'].context.num_gpus() > 0"


@dataclass(frozen=True)
class FrameworkSpec:
    """One framework a book is written for: how its cells are labelled, run and timed."""

    name: str
    label: str
    kernel: str = "python3"
    preload: tuple[str, ...] = ()
    sync: str = ""
    gpu_used: str = "False"
    #: The distribution whose version is shown in the timing line (default: the first preload).
    version_of: str = ""

    @property
    def version_module(self) -> str:
        return self.version_of or (self.preload[0] if self.preload else "")


DEFAULT_FRAMEWORKS: dict[str, dict[str, Any]] = {
    "pytorch": {
        "label": "PyTorch",
        "kernel": "python3",
        "preload": ["torch"],
        "sync": TORCH_SYNC,
        "gpu_used": TORCH_GPU_USED,
    },
    "mxnet": {
        "label": "MXNet",
        "kernel": "python3",
        "preload": ["mxnet"],
        "sync": MXNET_SYNC,
        "gpu_used": MXNET_GPU_USED,
    },
}
