"""PyTorch helpers of the sample book: ``from d2l import torch as d2l``.

The names follow d2l's ``d2l/torch.py``: device helpers, the framework aliases d2l defines in its
``config.ini`` (``d2l.tensor``, ``d2l.reshape``, ``d2l.reduce_sum``, ...), and the small linear
regression / evaluation helpers of its early chapters. ``d2l.np`` (NumPy), ``d2l.plt`` and
``d2l.display`` are imported on first use.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812 (d2l's name)
from torch.utils import data

from . import (Accumulator, Animator, Benchmark, Timer, lazy_module, plot, set_axes, set_figsize,
               use_svg_display)

__all__ = [
    "Accumulator", "Animator", "Benchmark", "F", "Timer", "abs", "accuracy", "arange", "argmax",
    "astype", "batch_matmul", "concat", "corr2d", "cos", "cosh", "cpu", "evaluate_accuracy",
    "evaluate_accuracy_gpu", "evaluate_loss", "exp", "expand_dims", "eye", "float32", "gpu",
    "int32", "int64", "linreg", "linspace", "load_array", "log", "matmul", "meshgrid", "nn",
    "nn_Module", "normal", "num_gpus", "numpy", "ones", "ones_like", "plot", "rand", "randn",
    "reduce_mean", "reduce_sum", "repeat", "reshape", "set_axes", "set_figsize", "sgd",
    "sigmoid", "sin", "sinh", "size", "split_batch", "squared_loss", "stack", "swapaxes",
    "synchronize", "synthetic_data", "tanh", "tensor", "to", "transpose", "try_all_gpus",
    "try_gpu", "use_svg_display", "zeros", "zeros_like",
]


def __getattr__(name: str) -> ModuleType:
    return lazy_module(name, __name__, {"np": "numpy"})


# -- devices ----------------------------------------------------------------------------------

def cpu() -> torch.device:
    """Get the CPU device."""
    return torch.device('cpu')


def gpu(i: int = 0) -> torch.device:
    """Get a GPU device."""
    return torch.device(f'cuda:{i}')


def num_gpus() -> int:
    """Get the number of available GPUs."""
    return torch.cuda.device_count()


def try_gpu(i: int = 0) -> torch.device:
    """Return gpu(i) if exists, otherwise return cpu()."""
    if num_gpus() >= i + 1:
        return gpu(i)
    return cpu()


def try_all_gpus() -> list[torch.device]:
    """Return all available GPUs (an empty list if there is none)."""
    return [gpu(i) for i in range(num_gpus())]


def synchronize(device) -> None:
    """Wait for the work queued on `device`; a no-op unless it is a CUDA device."""
    device = torch.device(device)
    if device.type == 'cuda':
        torch.cuda.synchronize(device)


# -- framework aliases (d2l's config.ini, [library-pytorch]) ------------------------------------

nn_Module = nn.Module
ones_like, ones, zeros_like, zeros = torch.ones_like, torch.ones, torch.zeros_like, torch.zeros
tensor, arange, linspace, eye = torch.tensor, torch.arange, torch.linspace, torch.eye
meshgrid = torch.meshgrid
sin, sinh, cos, cosh, tanh = torch.sin, torch.sinh, torch.cos, torch.cosh, torch.tanh
exp, log, abs, sigmoid = torch.exp, torch.log, torch.abs, torch.sigmoid  # noqa: A001 (d2l's name)
normal, rand, randn = torch.normal, torch.rand, torch.randn
matmul, batch_matmul = torch.matmul, torch.bmm
concat, stack = torch.cat, torch.stack
int32, int64, float32 = torch.int32, torch.int64, torch.float32


def numpy(x: torch.Tensor, *args: Any, **kwargs: Any) -> Any:
    """``x`` as a NumPy array (detached from autograd; `x` must be on the CPU)."""
    return x.detach().numpy(*args, **kwargs)


def size(x: torch.Tensor, *args: Any, **kwargs: Any) -> int:
    """Number of elements of `x`."""
    return x.numel(*args, **kwargs)


def reshape(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.reshape(...)``."""
    return x.reshape(*args, **kwargs)


def to(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.to(...)``: move to a device and/or convert the dtype."""
    return x.to(*args, **kwargs)


def reduce_sum(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.sum(...)``."""
    return x.sum(*args, **kwargs)


def reduce_mean(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.mean(...)``."""
    return x.mean(*args, **kwargs)


def argmax(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.argmax(...)``."""
    return x.argmax(*args, **kwargs)


def astype(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.type(dtype)``: `x` converted to another dtype."""
    return x.type(*args, **kwargs)


def transpose(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.t()``: the transpose of a matrix."""
    return x.t(*args, **kwargs)


def expand_dims(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.unsqueeze(dim)``."""
    return x.unsqueeze(*args, **kwargs)


def swapaxes(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.swapaxes(a, b)``."""
    return x.swapaxes(*args, **kwargs)


def repeat(x: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    """``x.repeat(...)``."""
    return x.repeat(*args, **kwargs)


# -- linear regression from scratch ---------------------------------------------------------

def synthetic_data(w: torch.Tensor, b: float, num_examples: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Generate y = Xw + b + noise: features ``(num_examples, len(w))``, labels ``(num_examples, 1)``."""
    X = normal(0, 1, (num_examples, len(w)))
    y = matmul(X, w) + b
    y += normal(0, 0.01, y.shape)
    return X, reshape(y, (-1, 1))


def linreg(X: torch.Tensor, w: torch.Tensor, b: Any) -> torch.Tensor:
    """The linear regression model."""
    return matmul(X, w) + b


def squared_loss(y_hat: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Squared loss, elementwise: ``(y_hat - y) ** 2 / 2``."""
    return (y_hat - reshape(y, y_hat.shape)) ** 2 / 2


def sgd(params: Iterable[torch.Tensor], lr: float, batch_size: int) -> None:
    """Minibatch stochastic gradient descent: update each parameter in place, then zero its gradient."""
    with torch.no_grad():
        for param in params:
            param -= lr * param.grad / batch_size
            param.grad.zero_()


def load_array(data_arrays: Sequence[torch.Tensor], batch_size: int,
               is_train: bool = True) -> data.DataLoader:
    """Construct a PyTorch data iterator (shuffled when `is_train`)."""
    dataset = data.TensorDataset(*data_arrays)
    return data.DataLoader(dataset, batch_size, shuffle=is_train)


# -- evaluation ---------------------------------------------------------------------------------

def accuracy(y_hat: torch.Tensor, y: torch.Tensor) -> float:
    """Compute the number of correct predictions (`y_hat`: scores per class, or labels)."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = argmax(y_hat, axis=1)
    correct = astype(y_hat, y.dtype) == y
    return float(reduce_sum(astype(correct, y.dtype)))


def evaluate_accuracy(net: Callable, data_iter: Iterable) -> float:
    """Compute the accuracy for a model on a dataset (an iterable of ``(X, y)`` batches)."""
    if isinstance(net, nn.Module):
        net.eval()
    metric = Accumulator(2)  # correct predictions, predictions
    with torch.no_grad():
        for X, y in data_iter:
            metric.add(accuracy(net(X), y), size(y))
    return metric[0] / metric[1]


def evaluate_accuracy_gpu(net: Callable, data_iter: Iterable, device=None) -> float:
    """Compute the accuracy for a model on a dataset, on `device` (default: the model's)."""
    if isinstance(net, nn.Module):
        net.eval()
        if not device:
            device = next(iter(net.parameters())).device
    metric = Accumulator(2)
    with torch.no_grad():
        for X, y in data_iter:
            X = [x.to(device) for x in X] if isinstance(X, list) else X.to(device)
            y = y.to(device)
            metric.add(accuracy(net(X), y), size(y))
    return metric[0] / metric[1]


def evaluate_loss(net: Callable, data_iter: Iterable, loss: Callable) -> float:
    """Evaluate the mean loss of a model on the given dataset."""
    metric = Accumulator(2)  # sum of losses, number of losses
    with torch.no_grad():
        for X, y in data_iter:
            out = net(X)
            losses = loss(out, reshape(y, out.shape))
            metric.add(reduce_sum(losses), size(losses))
    return metric[0] / metric[1]


# -- convolutions and multiple GPUs -------------------------------------------------------------

def corr2d(X: torch.Tensor, K: torch.Tensor) -> torch.Tensor:
    """Compute 2D cross-correlation of `X` with the kernel `K`."""
    h, w = K.shape
    Y = zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
    for i in range(Y.shape[0]):
        for j in range(Y.shape[1]):
            Y[i, j] = reduce_sum(X[i:i + h, j:j + w] * K)
    return Y


def split_batch(X: torch.Tensor, y: torch.Tensor, devices: Sequence[torch.device]) -> tuple:
    """Split `X` and `y` into one slice per device, each copied to its device."""
    assert X.shape[0] == y.shape[0]
    return _scatter(X, devices), _scatter(y, devices)


def _scatter(t: torch.Tensor, devices: Sequence[torch.device]) -> list[torch.Tensor]:
    """Like ``nn.parallel.scatter`` (same slices along dim 0) but CPU devices are allowed too."""
    return [part.to(device) for part, device in zip(t.chunk(len(devices)), devices)]
