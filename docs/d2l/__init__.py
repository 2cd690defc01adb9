"""A small stand-in for the `d2l <https://d2l.ai>`_ helper package, used by the sample book.

Import the module of your framework, as the book's chapters do::

    from d2l import torch as d2l
    from d2l import mxnet as d2l

This file holds only the framework-free helpers (:class:`Timer`, :class:`Benchmark`); each
framework module re-exports them beside its own device helpers and imports only its own
framework.
"""
from __future__ import annotations

import itertools
import time

__all__ = ["Benchmark", "Timer"]


class Timer:
    """Record multiple running times (wall clock, ``time.time``)."""

    def __init__(self):
        self.times = []
        self.start()

    def start(self):
        """Start the timer."""
        self.tik = time.time()

    def stop(self):
        """Stop the timer and record the time in a list."""
        self.times.append(time.time() - self.tik)
        return self.times[-1]

    def avg(self):
        """Return the average time."""
        return sum(self.times) / len(self.times)

    def sum(self):
        """Return the sum of time."""
        return sum(self.times)

    def cumsum(self):
        """Return the accumulated time."""
        return list(itertools.accumulate(self.times))


class Benchmark:
    """For measuring running time: ``with Benchmark('numpy'): ...`` prints ``numpy: 0.1234 sec``.

    It does not wait for the device: synchronize inside the block to time queued work.
    """

    def __init__(self, description='Done'):
        self.description = description

    def __enter__(self):
        self.timer = Timer()
        return self

    def __exit__(self, *args):
        print(f'{self.description}: {self.timer.stop():.4f} sec')
