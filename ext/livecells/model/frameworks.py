"""The frameworks a book is written for, as plain data (a Dask worker unpickles these).

What livecells knows of PyTorch, MXNet, TensorFlow and JAX lives here (:data:`KNOWN_FRAMEWORKS`:
any book that names one gets these settings for what it leaves unset); the default value of
``livecells_frameworks`` is PyTorch and MXNet only. :meth:`FrameworkSpec.from_settings` turns
one entry of the book's settings into a :class:`FrameworkSpec`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
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
# TensorFlow's eager GPU ops are asynchronous; sync_devices (TF >= 2.12) waits for every device.
# Only once the cells have initialised TensorFlow's runtime: initialising it here would forbid a
# later cell's tf.config.set_visible_devices or set_memory_growth.
_TF_RUNTIME = (
    "tf = sys.modules.get('tensorflow')\n"
    "ctx = sys.modules.get('tensorflow.python.eager.context')\n"
    "ctx = ctx.context_safe() if tf is not None and ctx is not None else None\n"
    "started = ctx is not None and getattr(ctx, '_initialized', False)\n"
)
TENSORFLOW_SYNC = _TF_RUNTIME + (
    "sync = getattr(getattr(getattr(tf, 'test', None), 'experimental', None), 'sync_devices', None)\n"
    "if started and sync is not None and tf.config.list_logical_devices('GPU'):\n"
    "    sync()\n"
)
TENSORFLOW_GPU_USED = (
    "'tensorflow' in sys.modules and getattr(getattr(sys.modules.get("
    "'tensorflow.python.eager.context'), 'context_safe', lambda: None)(), '_initialized', False)"
    " and bool(sys.modules['tensorflow'].config.list_logical_devices('GPU'))"
)
# JAX dispatches asynchronously: wait for effects and for every live array, not just the last
# result. Only once a backend exists (making one here would fix the platform and XLA flags
# before a later cell sets them).
JAX_SYNC = (
    "jax = sys.modules.get('jax')\n"
    "bridge = sys.modules.get('jax._src.xla_bridge')\n"
    "if jax is not None and bridge is not None and getattr(bridge, '_backends', None):\n"
    "    jax.effects_barrier()\n"
    "    jax.block_until_ready(jax.live_arrays())\n"
)
JAX_GPU_USED = (
    "bool(getattr(sys.modules.get('jax._src.xla_bridge'), '_backends', None))"
    " and sys.modules['jax'].default_backend() != 'cpu'"
)


@dataclass(frozen=True)
class FrameworkSpec:
    """One framework a book is written for: how its cells are labelled, run and timed."""

    name: str
    label: str
    kernel: str = "python3"
    preload: tuple[str, ...] = ()
    sync: str = ""
    #: An expression: did the session use its leased GPU? "" when unknown (the timing line then
    #: names no device on a machine with GPUs, rather than the wrong one).
    gpu_used: str = ""
    #: The distribution whose version is shown in the timing line (default: the first preload).
    version_of: str = ""
    #: Variables set in the kernel's environment where the build's own environment leaves them
    #: unset (what keeps a framework from taking every GPU's memory).
    env: tuple[tuple[str, str], ...] = ()

    def kernel_env(self, environ: Mapping[str, str]) -> dict[str, str]:
        """The variables of :attr:`env` that ``environ`` does not set already."""
        return {k: v for k, v in self.env if k not in environ}

    @property
    def version_module(self) -> str:
        return self.version_of or (self.preload[0] if self.preload else "")

    def settings(self) -> dict[str, Any]:
        """The entry of ``livecells_frameworks`` that gives this spec (the inverse of
        :meth:`from_settings`)."""
        return {
            "label": self.label,
            "kernel": self.kernel,
            "preload": list(self.preload),
            "sync": self.sync,
            "gpu_used": self.gpu_used,
            "version_of": self.version_of,
            "env": dict(self.env),
        }

    @classmethod
    def from_settings(cls, name: Any, settings: Any) -> FrameworkSpec:
        """One entry of ``livecells_frameworks``, checked: a framework livecells knows keeps its
        defaults (:data:`KNOWN_FRAMEWORKS`) for what ``settings`` leave unset. Raises
        ``ValueError`` naming the framework and the setting that cannot be used."""
        if not isinstance(name, str) or not name.isidentifier() or name == "all":
            raise ValueError(f"framework name {name!r} must be an identifier other than 'all'")
        if not isinstance(settings, Mapping):
            raise ValueError(f"settings of framework {name!r} must be a mapping, not {settings!r}")
        settings = {**KNOWN_FRAMEWORKS.get(name, {}), **settings}
        unknown = set(settings) - ({f.name for f in fields(cls)} - {"name"})
        if unknown:
            raise ValueError(f"framework {name!r} has unknown keys {sorted(map(str, unknown))}")
        return cls(
            name=name,
            label=_text(name, "label", settings.get("label", name), required=True),
            kernel=_text(name, "kernel", settings.get("kernel", "python3"), required=True),
            preload=_preload(name, settings.get("preload")),
            sync=_code(name, "sync", settings.get("sync", ""), "exec"),
            gpu_used=_code(name, "gpu_used", settings.get("gpu_used", ""), "eval"),
            version_of=_module(name, "version_of", settings.get("version_of", "")),
            env=_env(name, settings.get("env")),
        )


def _text(name: str, key: str, value: Any, *, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise ValueError(
            f"framework {name!r}: {key!r} must be a {'non-empty ' if required else ''}string, "
            f"not {value!r}"
        )
    return value


def _code(name: str, key: str, value: Any, mode: str) -> str:
    """A ``sync`` (statements) or ``gpu_used`` (an expression) snippet that compiles."""
    value = _text(name, key, value)
    try:
        compile(value or ("pass" if mode == "exec" else "None"), f"<livecells_frameworks[{name!r}][{key!r}]>", mode)
    except SyntaxError as err:
        raise ValueError(f"framework {name!r}: {key!r} does not compile: {err.msg} (line {err.lineno})") from None
    return value


MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _preload(name: str, value: Any) -> tuple[str, ...]:
    """Modules to import before the first cell: a list, a comma string, or None (none)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [p.strip() for p in value.split(",") if p.strip()]
    if not isinstance(value, (list, tuple)):
        raise ValueError(f"framework {name!r}: 'preload' must be a list of module names, not {value!r}")
    for module in value:
        if not isinstance(module, str) or not MODULE_NAME.match(module):
            raise ValueError(f"framework {name!r}: 'preload' holds {module!r}, not a module name")
    return tuple(value)


def _module(name: str, key: str, value: Any) -> str:
    """A module name, or "" (none)."""
    value = _text(name, key, value)
    if value and not MODULE_NAME.match(value):
        raise ValueError(f"framework {name!r}: {key!r} is {value!r}, not a module name")
    return value


def _env(name: str, value: Any) -> tuple[tuple[str, str], ...]:
    """Variables for the kernel's environment: a mapping of names to strings."""
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in value.items()
    ):
        raise ValueError(f"framework {name!r}: 'env' must map variable names to strings, not {value!r}")
    return tuple(sorted(value.items()))


KNOWN_FRAMEWORKS: dict[str, dict[str, Any]] = {
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
    "tensorflow": {
        "label": "TensorFlow",
        "kernel": "python3",
        "preload": ["tensorflow"],
        "sync": TENSORFLOW_SYNC,
        "gpu_used": TENSORFLOW_GPU_USED,
        # Else TensorFlow maps nearly all of each visible GPU's memory when it starts.
        "env": {"TF_FORCE_GPU_ALLOW_GROWTH": "true"},
    },
    "jax": {
        "label": "JAX",
        "kernel": "python3",
        "preload": ["jax"],
        "sync": JAX_SYNC,
        "gpu_used": JAX_GPU_USED,
        # Else XLA takes 75 % of the GPU's memory at its first computation.
        "env": {"XLA_PYTHON_CLIENT_PREALLOCATE": "false"},
    },
}

#: The default value of ``livecells_frameworks``: the frameworks a book gets without naming any.
DEFAULT_FRAMEWORKS: dict[str, dict[str, Any]] = {
    name: KNOWN_FRAMEWORKS[name] for name in ("pytorch", "mxnet")
}
