"""Configuration: one dataclass is the single source of truth for every ``livecells_*`` value.

Each field carries its default, its help text and a validator. The values are registered with
Sphinx as flat prefixed config values and read back through :func:`get_config`, which validates
them once per build: an invalid value gives a ``livecells.config`` warning naming the value and
falls back to the default, never a traceback.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from livecells.model.frameworks import DEFAULT_FRAMEWORKS, FrameworkSpec

logger = logging.getLogger(__name__)

WARNING_TYPE = "livecells"

EXECUTE_MODES = ("auto", "force", "cache", "off")
DEVICE_MODES = ("auto", "gpu", "cpu")
STDERR_MODES = ("show", "hide", "warn")


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the value."""


def _text(name: str, key: str, value: Any, *, required: bool = False) -> str:
    if not isinstance(value, str) or (required and not value.strip()):
        raise ConfigError(
            f"framework {name!r}: {key!r} must be a {'non-empty ' if required else ''}string, "
            f"not {value!r}"
        )
    return value


def _code(name: str, key: str, value: Any, mode: str) -> str:
    """A ``sync`` (statements) or ``gpu_used`` (an expression) snippet that compiles."""
    value = _text(name, key, value)
    try:
        compile(value or "pass", f"<livecells_frameworks[{name!r}][{key!r}]>", mode)
    except SyntaxError as err:
        raise ConfigError(f"framework {name!r}: {key!r} does not compile: {err.msg} (line {err.lineno})") from None
    return value


MODULE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _preload(name: str, value: Any) -> tuple[str, ...]:
    """Modules to import before the first cell: a list, a comma string, or None (none)."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [p.strip() for p in value.split(",") if p.strip()]
    if not isinstance(value, (list, tuple)):
        raise ConfigError(f"framework {name!r}: 'preload' must be a list of module names, not {value!r}")
    for module in value:
        if not isinstance(module, str) or not MODULE_NAME.match(module):
            raise ConfigError(f"framework {name!r}: 'preload' holds {module!r}, not a module name")
    return tuple(value)


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
        specs[name] = FrameworkSpec(
            name=name,
            label=_text(name, "label", settings.get("label", name), required=True),
            kernel=_text(name, "kernel", settings.get("kernel", "python3"), required=True),
            preload=_preload(name, settings.get("preload")),
            sync=_code(name, "sync", settings.get("sync", ""), "exec"),
            gpu_used=_code(name, "gpu_used", settings.get("gpu_used", "False"), "eval"),
            version_of=_text(name, "version_of", settings.get("version_of", "")),
        )
    return specs


def _choice(*choices: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if value not in choices:
            raise ConfigError(f"must be one of {', '.join(map(repr, choices))}")
        return value

    return check


def _positive_number(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError("must be a positive, finite number of seconds")
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


def _optional_string(value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError("must be a string")
    return value


def _patterns(value: Any) -> tuple[str, ...]:
    """Glob patterns relative to the source dir: a list of strings (or one comma string)."""
    if isinstance(value, str):
        value = [p.strip() for p in value.split(",") if p.strip()]
    if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) and p.strip() for p in value):
        raise ConfigError("must be a list of glob patterns (strings), relative to the source dir")
    return tuple(p.strip() for p in value)


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
        metadata=_meta(
            "framework printed in LaTeX ('' = the first; 'all')", _optional_string, rebuild=""
        ),
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
    depends: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "glob patterns (relative to the source dir) of files whose change re-runs every page",
            _patterns,
        ),
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
    if name == "depends":
        return []
    f = CONFIG_FIELDS[name]
    return f.default


def setup_config(app: Sphinx) -> None:
    """Register every field as a ``livecells_<name>`` config value."""
    for name, f in CONFIG_FIELDS.items():
        # Any: the validators check every value, and say where in conf.py it was set (Sphinx's
        # own type check would warn a second time, without a location). ``-D`` values are still
        # converted by the type of the default.
        app.add_config_value(
            f"livecells_{name}",
            _raw_default(name),
            f.metadata["rebuild"],
            types=Any,
            description=f.metadata["help"],
        )
    app.connect("config-inited", _validate_on_init, priority=400)


def read_config(
    values: Mapping[str, Any],
    warn: Callable[[str], None],
    where: Callable[[str, str], None] | None = None,
) -> LivecellsConfig:
    """Validate raw values (without the prefix); a bad one is reported and replaced by its default.

    ``where(message, name)``, when given, reports instead of ``warn``, knowing the value's name
    (so that the warning can point at its line in conf.py).
    """

    def say(message: str, name: str) -> None:
        if where is not None:
            where(message, name)
        else:
            warn(message)

    kwargs: dict[str, Any] = {}
    for name, f in CONFIG_FIELDS.items():
        if name not in values:
            continue
        try:
            kwargs[name] = f.metadata["validate"](values[name])
        except ConfigError as err:
            shown = repr(values[name])
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            say(f"livecells_{name} = {shown}: {err}; using the default", name)
        except Exception as err:  # noqa: BLE001 - a value whose own methods fail (a bad mapping)
            say(f"livecells_{name}: cannot be read ({type(err).__name__}: {err}); using the default", name)
    config = LivecellsConfig(**kwargs)
    if config.latex_framework and config.latex_framework != "all" and (
        config.latex_framework not in config.frameworks
    ):
        say(
            f"livecells_latex_framework = {config.latex_framework!r}: not a framework in "
            f"livecells_frameworks ({', '.join(config.frameworks)}); using the first",
            "latex_framework",
        )
    return config


def conf_location(confdir: str | Path | None, name: str) -> str | None:
    """``conf.py:LINE`` of the line that sets config value ``name`` (``conf.py`` alone when no
    line does, e.g. a ``-D`` override; None without a conf.py)."""
    if not confdir:
        return None
    path = Path(confdir) / "conf.py"
    setting = re.compile(rf"^\s*{re.escape(name)}\s*(=|\[|:|\+=|\.)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    found = [number for number, line in enumerate(lines, 1) if setting.match(line)]
    return f"{path}:{found[-1]}" if found else str(path)  # the last assignment wins


def _validate_on_init(app: Sphinx, config: Any) -> None:
    values = {name: getattr(config, f"livecells_{name}") for name in CONFIG_FIELDS}

    def warn(message: str) -> None:
        logger.warning(message, type=WARNING_TYPE, subtype="config")

    def where(message: str, name: str) -> None:
        location = conf_location(app.confdir, f"livecells_{name}")
        logger.warning(message, type=WARNING_TYPE, subtype="config", location=location)

    app.livecells_config = read_config(values, warn, where)  # type: ignore[attr-defined]


def app_of(env: Any) -> Sphinx:
    """The application behind a build environment (``env.app`` is deprecated in Sphinx 9)."""
    app = getattr(env, "_app", None)
    return app if app is not None else env.app


def get_config(app: Sphinx) -> LivecellsConfig:
    """The validated configuration of this build."""
    return app.livecells_config  # type: ignore[attr-defined,no-any-return]
