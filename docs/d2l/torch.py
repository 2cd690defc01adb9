"""PyTorch helpers of the sample book: ``from d2l import torch as d2l``."""
from __future__ import annotations

import torch

from . import Benchmark, Timer

__all__ = ["Benchmark", "Timer", "cpu", "gpu", "num_gpus", "synchronize", "try_all_gpus",
           "try_gpu"]


def cpu():
    """Get the CPU device."""
    return torch.device('cpu')


def gpu(i=0):
    """Get a GPU device."""
    return torch.device(f'cuda:{i}')


def num_gpus():
    """Get the number of available GPUs."""
    return torch.cuda.device_count()


def try_gpu(i=0):
    """Return gpu(i) if exists, otherwise return cpu()."""
    if num_gpus() >= i + 1:
        return gpu(i)
    return cpu()


def try_all_gpus():
    """Return all available GPUs (an empty list if there is none)."""
    return [gpu(i) for i in range(num_gpus())]


def synchronize(device):
    """Wait for the work queued on `device`; a no-op unless it is a CUDA device."""
    device = torch.device(device)
    if device.type == 'cuda':
        torch.cuda.synchronize(device)
