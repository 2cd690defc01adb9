"""Configuration: one dataclass is the single source of truth for every ``livecells_*`` value.

Each field carries its default, its help text and a validator. The values are registered with
Sphinx as flat prefixed config values and read back through :func:`get_config`, which validates
them once per build: an invalid value gives a ``livecells.config`` warning naming the value and
falls back to the default, never a traceback.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

WARNING_TYPE = "livecells"

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

EXECUTE_MODES = ("auto", "force", "cache", "off")
DEVICE_MODES = ("auto", "gpu", "cpu")
STDERR_MODES = ("show", "hide", "warn")


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the value."""


def _frameworks(value: Any) -> dict[str, FrameworkSpec]:
    if not isinstance(value, Mapping) or not value:
        raise ConfigError("must be a non-empty mapping of framework name -> settings")
    specs: dict[str, FrameworkSpec] = {}
    known = {f.name for f in dataclasses.fields(FrameworkSpec)} - {"name"}
    for name, settings in value.items():
        if not isinstance(name, str) or not name.isidentifier() or name == "all":
            raise ConfigError(f"framework name {name!r} must be an identifier other than 'all'")
        if not isinstance(settings, Mapping):
            raise ConfigError(f"settings of framework {name!r} must be a mapping")
        # A framework livecells knows keeps its defaults (sync, gpu_used, ...) for what is unset.
        settings = {**DEFAULT_FRAMEWORKS.get(name, {}), **settings}
        unknown = set(settings) - known
        if unknown:
            raise ConfigError(f"framework {name!r} has unknown keys {sorted(unknown)}")
        preload = settings.get("preload", ())
        if isinstance(preload, str):
            preload = [p.strip() for p in preload.split(",") if p.strip()]
        specs[name] = FrameworkSpec(
            name=name,
            label=str(settings.get("label", name)),
            kernel=str(settings.get("kernel", "python3")),
            preload=tuple(str(p) for p in preload),
            sync=str(settings.get("sync", "")),
            gpu_used=str(settings.get("gpu_used", "False")),
            version_of=str(settings.get("version_of", "")),
        )
    return specs


def _choice(*choices: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"must be one of {', '.join(map(repr, choices))}")
        return value

    return check


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError("must be a positive number of seconds")
    return float(value)


def _jobs(value: Any) -> int | str:
    if value == "auto":
        return value
    if isinstance(value, str) and value.isdigit():  # from -D livecells_jobs=2
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be 'auto' or a positive integer")
    return value


def _string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a non-empty string")
    return value


def _executor(value: Any) -> str | Callable[[], Any]:
    """``"local"``, a Dask scheduler address, or a function that returns a ``distributed.Client``."""
    if callable(value):
        return value
    if not isinstance(value, str) or not value:
        raise ConfigError(
            "must be 'local', a Dask scheduler address ('tcp://host:8786') or a function "
            "returning a distributed.Client"
        )
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("must be True or False")
    return value


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be a positive integer")
    return value


def _meta(help: str, validate: Callable[[Any], Any], rebuild: str = "env") -> dict[str, Any]:
    return {"help": help, "validate": validate, "rebuild": rebuild}


@dataclass(frozen=True)
class LivecellsConfig:
    """Every ``livecells_<field>`` value, validated."""

    frameworks: dict[str, FrameworkSpec] = field(
        default_factory=lambda: _frameworks(DEFAULT_FRAMEWORKS),
        metadata=_meta("ordered map: name -> {label, kernel, preload, sync}", _frameworks),
    )
    execute: str = field(
        default="auto",
        metadata=_meta("auto | force | cache | off", _choice(*EXECUTE_MODES), rebuild=""),
    )
    device: str = field(
        default="auto",
        metadata=_meta("auto | gpu | cpu", _choice(*DEVICE_MODES), rebuild=""),
    )
    timeout: float = field(
        default=600, metadata=_meta("seconds per cell", _positive_number, rebuild="")
    )
    jobs: int | str = field(
        default="auto", metadata=_meta("sessions at once ('auto' or N)", _jobs, rebuild="")
    )
    store: str = field(
        default="_livecells",
        metadata=_meta("folder of stored results, relative to the source dir", _string),
    )
    raise_on_error: bool = field(
        default=False,
        metadata=_meta("an unexpected cell error fails the build", _bool, rebuild=""),
    )
    latex_framework: str = field(
        default="",
        metadata=_meta("framework printed in LaTeX ('' = the first; 'all')", str, rebuild=""),
    )
    allow_html: bool = field(
        default=True,
        metadata=_meta("render text/html outputs as HTML", _bool, rebuild="html"),
    )
    executor: str | Callable[[], Any] = field(
        default="local",
        metadata=_meta(
            "'local', a Dask scheduler address, or a function returning a distributed.Client",
            _executor,
            rebuild="",
        ),
    )
    fork_kernels: bool = field(
        default=True,
        metadata=_meta(
            "start kernels by forking a process that has imported the framework (Linux)",
            _bool,
            rebuild="",
        ),
    )
    output_limit: int = field(
        default=100_000,
        metadata=_meta("characters of text kept per cell output stream", _positive_int),
    )

    def framework_names(self) -> list[str]:
        return list(self.frameworks)

    @property
    def latex_frameworks(self) -> list[str]:
        """The frameworks whose cells LaTeX prints, in order."""
        if self.latex_framework == "all":
            return self.framework_names()
        if self.latex_framework in self.frameworks:
            return [self.latex_framework]
        return self.framework_names()[:1]


CONFIG_FIELDS = {f.name: f for f in dataclasses.fields(LivecellsConfig)}


def _raw_default(name: str) -> Any:
    if name == "frameworks":
        return DEFAULT_FRAMEWORKS
    f = CONFIG_FIELDS[name]
    return f.default


def setup_config(app: Sphinx) -> None:
    """Register every field as a ``livecells_<name>`` config value."""
    for name, f in CONFIG_FIELDS.items():
        default = _raw_default(name)
        types = {"timeout": (int, float), "jobs": (str, int), "executor": Any}.get(
            name, (type(default),)
        )
        app.add_config_value(
            f"livecells_{name}",
            default,
            f.metadata["rebuild"],
            types=types,
            description=f.metadata["help"],
        )
    app.connect("config-inited", _validate_on_init, priority=400)


def read_config(values: Mapping[str, Any], warn: Callable[[str], None]) -> LivecellsConfig:
    """Validate raw values (without the prefix); a bad one is reported and replaced by its default."""
    kwargs: dict[str, Any] = {}
    for name, f in CONFIG_FIELDS.items():
        if name not in values:
            continue
        try:
            kwargs[name] = f.metadata["validate"](values[name])
        except ConfigError as err:
            warn(f"livecells_{name} = {values[name]!r}: {err}; using the default")
    config = LivecellsConfig(**kwargs)
    if config.latex_framework and config.latex_framework != "all" and (
        config.latex_framework not in config.frameworks
    ):
        warn(
            f"livecells_latex_framework = {config.latex_framework!r}: not a framework in "
            f"livecells_frameworks ({', '.join(config.frameworks)}); using the first"
        )
    return config


def _validate_on_init(app: Sphinx, config: Any) -> None:
    values = {name: getattr(config, f"livecells_{name}") for name in CONFIG_FIELDS}

    def warn(message: str) -> None:
        logger.warning(message, type=WARNING_TYPE, subtype="config")

    app.livecells_config = read_config(values, warn)  # type: ignore[attr-defined]


def app_of(env: Any) -> Sphinx:
    """The application behind a build environment (``env.app`` is deprecated in Sphinx 9)."""
    app = getattr(env, "_app", None)
    return app if app is not None else env.app


def get_config(app: Sphinx) -> LivecellsConfig:
    """The validated configuration of this build."""
    return app.livecells_config  # type: ignore[attr-defined,no-any-return]
