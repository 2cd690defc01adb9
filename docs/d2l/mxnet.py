"""MXNet helpers of the sample book: ``from d2l import mxnet as d2l``.

The names follow d2l's ``d2l/mxnet.py``: device helpers, the framework aliases d2l defines in its
``config.ini`` (``d2l.tensor``, ``d2l.reshape``, ``d2l.reduce_sum``, ...) over ``mxnet.np``, and
the small linear regression / evaluation helpers of its early chapters. As in d2l, chapters call
``npx.set_np()`` themselves. ``d2l.plt`` and ``d2l.display`` are imported on first use.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable, Iterable, Sequence

from mxnet import autograd, gluon, init, np, npx  # noqa: F401 (d2l.autograd, d2l.init)
from mxnet.gluon import nn

from . import (Accumulator, Animator, Benchmark, Timer, lazy_module, plot, set_axes, set_figsize,
               use_svg_display)

__all__ = [
    "Accumulator", "Animator", "Benchmark", "Timer", "abs", "accuracy", "arange", "argmax",
    "astype", "autograd", "batch_matmul", "concat", "corr2d", "cos", "cosh", "cpu",
    "evaluate_accuracy", "evaluate_accuracy_gpu", "evaluate_loss", "exp", "expand_dims", "eye",
    "float32", "gluon", "gpu", "init", "int32", "int64", "linreg", "linspace", "load_array", "log",
    "matmul", "meshgrid", "nn", "nn_Module", "normal", "np", "npx", "num_gpus", "numpy", "ones",
    "ones_like", "plot", "rand", "randn", "reduce_mean", "reduce_sum", "repeat", "reshape",
    "set_axes", "set_figsize", "sgd", "sigmoid", "sin", "sinh", "size", "split_batch",
    "squared_loss", "stack", "swapaxes", "synchronize", "synthetic_data", "tanh", "tensor", "to",
    "transpose", "try_all_gpus", "try_gpu", "use_svg_display", "zeros", "zeros_like",
]

USE_MXNET, USE_PYTORCH, USE_TENSORFLOW = True, False, False


def __getattr__(name: str) -> ModuleType:
    return lazy_module(name, __name__)


# -- devices ----------------------------------------------------------------------------------

def cpu():
    """Get the CPU device."""
    return npx.cpu()


def gpu(i: int = 0):
    """Get a GPU device."""
    return npx.gpu(i)


def num_gpus() -> int:
    """Get the number of available GPUs."""
    return npx.num_gpus()


def try_gpu(i: int = 0):
    """Return gpu(i) if exists, otherwise return cpu()."""
    if num_gpus() >= i + 1:
        return gpu(i)
    return cpu()


def try_all_gpus() -> list:
    """Return all available GPUs (an empty list if there is none)."""
    return [gpu(i) for i in range(num_gpus())]


def synchronize(device=None) -> None:
    """Wait for all queued work to finish (MXNet's engine has one queue: ``npx.waitall()``)."""
    npx.waitall()


# -- framework aliases (d2l's config.ini, [library-mxnet]) --------------------------------------

nn_Module = nn.Block
ones_like, ones, zeros_like, zeros = np.ones_like, np.ones, np.zeros_like, np.zeros
tensor, arange, meshgrid, linspace, eye = np.array, np.arange, np.meshgrid, np.linspace, np.eye
sin, sinh, cos, cosh, tanh = np.sin, np.sinh, np.cos, np.cosh, np.tanh
exp, log, abs, sigmoid = np.exp, np.log, np.abs, npx.sigmoid  # noqa: A001 (d2l's name)
normal, rand, randn = np.random.normal, np.random.rand, np.random.randn
matmul, batch_matmul = np.dot, npx.batch_dot
concat, stack, expand_dims = np.concatenate, np.stack, np.expand_dims
int32, int64, float32 = np.int32, np.int64, np.float32


def numpy(x: np.ndarray, *args: Any, **kwargs: Any) -> Any:
    """``x.asnumpy()``: a copy of `x` as a NumPy array."""
    return x.asnumpy(*args, **kwargs)


def size(a: np.ndarray) -> int:
    """Number of elements of `a`."""
    return a.size


def transpose(a: np.ndarray) -> np.ndarray:
    """``a.T``."""
    return a.T


def reshape(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.reshape(...)``."""
    return x.reshape(*args, **kwargs)


def to(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """`x` on another device (d2l's ``as_in_context``, under its current name ``as_in_ctx``)."""
    return x.as_in_ctx(*args, **kwargs)


def reduce_sum(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.sum(...)``."""
    return x.sum(*args, **kwargs)


def reduce_mean(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.mean(...)``."""
    return x.mean(*args, **kwargs)


def argmax(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.argmax(...)``."""
    return x.argmax(*args, **kwargs)


def astype(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.astype(dtype)``."""
    return x.astype(*args, **kwargs)


def swapaxes(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.swapaxes(a, b)``."""
    return x.swapaxes(*args, **kwargs)


def repeat(x: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
    """``x.repeat(...)``."""
    return x.repeat(*args, **kwargs)


# -- linear regression from scratch ---------------------------------------------------------

def synthetic_data(w: np.ndarray, b: float, num_examples: int) -> tuple[np.ndarray, np.ndarray]:
    """Generate y = Xw + b + noise: features ``(num_examples, len(w))``, labels ``(num_examples, 1)``."""
    X = normal(0, 1, (num_examples, len(w)))
    y = matmul(X, w) + b
    y += normal(0, 0.01, y.shape)
    return X, reshape(y, (-1, 1))


def linreg(X: np.ndarray, w: np.ndarray, b: Any) -> np.ndarray:
    """The linear regression model."""
    return matmul(X, w) + b


def squared_loss(y_hat: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Squared loss, elementwise: ``(y_hat - y) ** 2 / 2``."""
    return (y_hat - reshape(y, y_hat.shape)) ** 2 / 2


def sgd(params: Iterable[np.ndarray], lr: float, batch_size: int) -> None:
    """Minibatch stochastic gradient descent: update each parameter (``attach_grad``) in place."""
    for param in params:
        param[:] = param - lr * param.grad / batch_size


def load_array(data_arrays: Sequence[np.ndarray], batch_size: int,
               is_train: bool = True) -> gluon.data.DataLoader:
    """Construct a Gluon data iterator (shuffled when `is_train`)."""
    dataset = gluon.data.ArrayDataset(*data_arrays)
    return gluon.data.DataLoader(dataset, batch_size, shuffle=is_train)


# -- evaluation ---------------------------------------------------------------------------------

def accuracy(y_hat: np.ndarray, y: np.ndarray) -> float:
    """Compute the number of correct predictions (`y_hat`: scores per class, or labels)."""
    if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
        y_hat = argmax(y_hat, axis=1)
    correct = astype(y_hat, y.dtype) == y
    return float(reduce_sum(astype(correct, y.dtype)))


def evaluate_accuracy(net: Callable, data_iter: Iterable) -> float:
    """Compute the accuracy for a model on a dataset (an iterable of ``(X, y)`` batches)."""
    metric = Accumulator(2)  # correct predictions, predictions
    for X, y in data_iter:
        metric.add(accuracy(net(X), y), size(y))
    return metric[0] / metric[1]


def evaluate_accuracy_gpu(net: nn.Block, data_iter: Iterable, device=None) -> float:
    """Compute the accuracy for a model on a dataset, on `device` (default: the model's)."""
    if not device:  # where the first parameter lives
        device = list(net.collect_params().values())[0].list_ctx()[0]
    metric = Accumulator(2)
    for X, y in data_iter:
        X, y = X.as_in_ctx(device), y.as_in_ctx(device)
        metric.add(accuracy(net(X), y), size(y))
    return metric[0] / metric[1]


def evaluate_loss(net: Callable, data_iter: Iterable, loss: Callable) -> float:
    """Evaluate the mean loss of a model on the given dataset."""
    metric = Accumulator(2)  # sum of losses, number of losses
    for X, y in data_iter:
        losses = loss(net(X), y)
        metric.add(reduce_sum(losses), size(losses))
    return metric[0] / metric[1]


# -- convolutions and multiple GPUs -------------------------------------------------------------

def corr2d(X: np.ndarray, K: np.ndarray) -> np.ndarray:
    """Compute 2D cross-correlation of `X` with the kernel `K`."""
    h, w = K.shape
    Y = zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
    for i in range(Y.shape[0]):
        for j in range(Y.shape[1]):
            Y[i, j] = reduce_sum(X[i:i + h, j:j + w] * K)
    return Y


def split_batch(X: np.ndarray, y: np.ndarray, devices: Sequence) -> tuple:
    """Split `X` and `y` into one slice per device, each copied to its device."""
    assert X.shape[0] == y.shape[0]
    return _split_and_load(X, devices), _split_and_load(y, devices)


def _split_and_load(a: np.ndarray, devices: Sequence) -> list[np.ndarray]:
    """``gluon.utils.split_and_load`` (even slices along axis 0) without its deprecation warning."""
    return [part.as_in_ctx(device)
            for part, device in zip(gluon.utils.split_data(a, len(devices)), devices)]
