"""MXNet helpers of the sample book: ``from d2l import mxnet as d2l``."""
from __future__ import annotations

from mxnet import npx

from . import Benchmark, Timer

__all__ = ["Benchmark", "Timer", "cpu", "gpu", "num_gpus", "synchronize", "try_all_gpus",
           "try_gpu"]


def cpu():
    """Get the CPU device."""
    return npx.cpu()


def gpu(i=0):
    """Get a GPU device."""
    return npx.gpu(i)


def num_gpus():
    """Get the number of available GPUs."""
    return npx.num_gpus()


def try_gpu(i=0):
    """Return gpu(i) if exists, otherwise return cpu()."""
    if num_gpus() >= i + 1:
        return gpu(i)
    return cpu()


def try_all_gpus():
    """Return all available GPUs (an empty list if there is none)."""
    return [gpu(i) for i in range(num_gpus())]


def synchronize(device=None):
    """Wait for all queued work to finish (MXNet's engine has one queue: ``npx.waitall()``)."""
    npx.waitall()
