"""A small stand-in for the `d2l <https://d2l.ai>`_ helper package, used by the sample book.

Import the module of your framework, as the book's chapters do::

    from d2l import torch as d2l
    from d2l import mxnet as d2l

This file holds the framework-free helpers (timing, :class:`Accumulator`, plotting); each
framework module re-exports them beside its own tensor, device and training helpers, and imports
only its own framework. matplotlib and IPython are imported on first use (``d2l.plt``,
``d2l.plot``), so importing a framework module stays as fast as importing the framework.
"""
from __future__ import annotations

import importlib
import itertools
import sys
import time
from types import ModuleType
from typing import Any, Sequence

__all__ = ["Accumulator", "Animator", "Benchmark", "Timer", "plot", "set_axes", "set_figsize",
           "use_svg_display"]

#: Modules that d2l imports eagerly and this package imports on first attribute access.
LAZY_MODULES = {"plt": "matplotlib.pyplot", "display": "IPython.display"}


def lazy_module(name: str, module: str, extra: dict[str, str] | None = None) -> ModuleType:
    """The module behind the lazy attribute `name` of `module` (``plt``, ``display``, ...)."""
    target = {**LAZY_MODULES, **(extra or {})}.get(name)
    if target is None:
        raise AttributeError(f"module {module!r} has no attribute {name!r}")
    return importlib.import_module(target)


def __getattr__(name: str) -> ModuleType:
    return lazy_module(name, __name__)


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


class Accumulator:
    """For accumulating sums over `n` variables."""

    def __init__(self, n: int):
        self.data = [0.0] * n

    def add(self, *args: Any) -> None:
        """Add one value to each running sum (tensors of one element are converted by ``float``)."""
        self.data = [total + float(value) for total, value in zip(self.data, args)]

    def reset(self) -> None:
        """Set every sum back to zero."""
        self.data = [0.0] * len(self.data)

    def __getitem__(self, idx: int) -> float:
        return self.data[idx]


# -- plotting (matplotlib; in a Jupyter kernel figures are shown inline) -------------------------

def _pyplot() -> ModuleType:
    return importlib.import_module("matplotlib.pyplot")


def use_svg_display() -> None:
    """Use the svg format to display a plot in Jupyter (a no-op outside an IPython kernel)."""
    ipython = sys.modules.get("IPython")
    if ipython is None or ipython.get_ipython() is None:
        return
    from matplotlib_inline import backend_inline
    backend_inline.set_matplotlib_formats('svg')


def set_figsize(figsize: tuple[float, float] = (3.5, 2.5)) -> None:
    """Set the figure size for matplotlib."""
    use_svg_display()
    _pyplot().rcParams['figure.figsize'] = figsize


def set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend) -> None:
    """Set the axes for matplotlib."""
    axes.set_xlabel(xlabel)
    axes.set_ylabel(ylabel)
    axes.set_xscale(xscale)
    axes.set_yscale(yscale)
    axes.set_xlim(xlim)
    axes.set_ylim(ylim)
    if legend:
        axes.legend(legend)
    axes.grid()


def _has_one_axis(values: Any) -> bool:
    """True for a 1-d tensor/array or a flat list of numbers."""
    if hasattr(values, "ndim"):
        return values.ndim == 1
    return isinstance(values, list) and bool(values) and not hasattr(values[0], "__len__")


def _host(values: Any) -> Any:
    """An array matplotlib reads directly: MXNet and PyTorch tensors are copied to NumPy."""
    if hasattr(values, "asnumpy"):
        return values.asnumpy()
    if hasattr(values, "detach") and hasattr(values, "cpu"):
        return values.detach().cpu().numpy()
    return values


def plot(X, Y=None, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
         xscale='linear', yscale='linear', fmts: Sequence[str] = ('-', 'm--', 'g-.', 'r:'),
         figsize=(3.5, 2.5), axes=None) -> None:
    """Plot data points: one curve per series of `Y` (or of `X` when `Y` is None) on `axes`.

    `X` and `Y` are a 1-d tensor/list or lists of them; a single `X` is shared by every `Y`.
    """
    if _has_one_axis(X):
        X = [X]
    if Y is None:
        X, Y = [[]] * len(X), X
    elif _has_one_axis(Y):
        Y = [Y]
    if len(X) != len(Y):
        X = X * len(Y)
    set_figsize(figsize)
    if axes is None:
        axes = _pyplot().gca()
    axes.cla()
    for x, y, fmt in zip(X, Y, fmts):
        if len(x):
            axes.plot(_host(x), _host(y), fmt)
        else:
            axes.plot(_host(y), fmt)
    set_axes(axes, xlabel, ylabel, xlim, ylim, xscale, yscale, legend or [])


class Animator:
    """For plotting data in animation: each :meth:`add` redraws the figure in place."""

    def __init__(self, xlabel=None, ylabel=None, legend=None, xlim=None, ylim=None,
                 xscale='linear', yscale='linear', fmts=('-', 'm--', 'g-.', 'r:'), nrows=1,
                 ncols=1, figsize=(3.5, 2.5)):
        use_svg_display()
        self.fig, axes = _pyplot().subplots(nrows, ncols, figsize=figsize)
        self.axes = [axes] if nrows * ncols == 1 else axes
        self._axes_args = (xlabel, ylabel, xlim, ylim, xscale, yscale, legend or [])
        self.X, self.Y, self.fmts = None, None, fmts

    def config_axes(self) -> None:
        """Apply the labels, limits, scales and legend given to the constructor."""
        set_axes(self.axes[0], *self._axes_args)

    def add(self, x, y) -> None:
        """Append a point to each curve (``None`` skips a curve) and show the figure again."""
        if not hasattr(y, "__len__"):
            y = [y]
        n = len(y)
        if not hasattr(x, "__len__"):
            x = [x] * n
        if not self.X:
            self.X = [[] for _ in range(n)]
        if not self.Y:
            self.Y = [[] for _ in range(n)]
        for i, (a, b) in enumerate(zip(x, y)):
            if a is not None and b is not None:
                self.X[i].append(a)
                self.Y[i].append(b)
        self.axes[0].cla()
        for xs, ys, fmt in zip(self.X, self.Y, self.fmts):
            self.axes[0].plot(xs, ys, fmt)
        self.config_axes()
        display = importlib.import_module("IPython.display")
        display.display(self.fig)
        display.clear_output(wait=True)
