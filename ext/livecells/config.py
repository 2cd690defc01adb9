"""Configuration: one dataclass is the single source of truth for every ``livecells_*`` value.

Each field carries its default, its help text and a validator. The values are registered with
Sphinx as flat prefixed config values and read back through :func:`get_config`, which validates
them once per build: an invalid value gives a ``livecells.config`` warning naming the value and
falls back to the default, never a traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from livecells.model.environ import DEFAULT_ENV_DROP
from livecells.model.folders import store_problem
from livecells.model.frameworks import DEFAULT_FRAMEWORKS, KNOWN_FRAMEWORKS, FrameworkSpec
from livecells.model.mime import PriorityOverride, priority_override
from livecells.model.vocabulary import DeviceMode, ExecuteMode, StderrMode, Vocabulary, WarningSubtype

logger = logging.getLogger(__name__)

WARNING_TYPE = "livecells"

EXECUTE_MODES = ExecuteMode.words()
DEVICE_MODES = DeviceMode.words()
STDERR_MODES = StderrMode.words()


class ConfigError(ValueError):
    """A config value that cannot be used; the message names the value."""


class EntriesDropped(ConfigError):
    """Some entries of a list value cannot be used: each is reported and dropped, the rest kept."""

    def __init__(self, kept: Any, problems: list[str]) -> None:
        super().__init__("; ".join(problems))
        self.kept = kept
        self.problems = problems


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
        compile(value or ("pass" if mode == "exec" else "None"), f"<livecells_frameworks[{name!r}][{key!r}]>", mode)
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


def _module(name: str, key: str, value: Any) -> str:
    """A module name, or "" (none)."""
    value = _text(name, key, value)
    if value and not MODULE_NAME.match(value):
        raise ConfigError(f"framework {name!r}: {key!r} is {value!r}, not a module name")
    return value


def _env(name: str, value: Any) -> tuple[tuple[str, str], ...]:
    """Variables for the kernel's environment: a mapping of names to strings."""
    if value is None:
        return ()
    if not isinstance(value, Mapping) or not all(
        isinstance(k, str) and k and "=" not in k and isinstance(v, str) for k, v in value.items()
    ):
        raise ConfigError(f"framework {name!r}: 'env' must map variable names to strings, not {value!r}")
    return tuple(sorted(value.items()))


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
        settings = {**KNOWN_FRAMEWORKS.get(name, {}), **settings}
        unknown = set(settings) - known
        if unknown:
            raise ConfigError(f"framework {name!r} has unknown keys {sorted(unknown)}")
        specs[name] = FrameworkSpec(
            name=name,
            label=_text(name, "label", settings.get("label", name), required=True),
            kernel=_text(name, "kernel", settings.get("kernel", "python3"), required=True),
            preload=_preload(name, settings.get("preload")),
            sync=_code(name, "sync", settings.get("sync", ""), "exec"),
            gpu_used=_code(name, "gpu_used", settings.get("gpu_used", ""), "eval"),
            version_of=_module(name, "version_of", settings.get("version_of", "")),
            env=_env(name, settings.get("env")),
        )
    return specs


def _choice(vocabulary: type[Vocabulary]) -> Callable[[Any], Vocabulary]:
    def check(value: Any) -> Vocabulary:
        if not isinstance(value, str) or value not in vocabulary.words():
            raise ConfigError(f"must be one of {', '.join(map(repr, vocabulary.words()))}")
        return vocabulary(value)

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


def _executor(value: Any) -> Any:
    """``"local"``, an address (its scheme names the executor), an executor object, or a function
    that returns a cluster's client; which executor it names is the build's to find out."""
    if (isinstance(value, str) and value) or callable(value) or callable(getattr(value, "scheduler", None)):
        return value
    raise ConfigError(
        "must be 'local', an executor's address ('tcp://host:8786'), an executor object, or a "
        "function returning a client"
    )


def _optional_string(value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError("must be a string")
    return value


def _strings(what: str) -> Callable[[Any], tuple[str, ...]]:
    """A validator of a list of non-empty strings (or one comma string): ``what`` they are."""

    def check(value: Any) -> tuple[str, ...]:
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        if not isinstance(value, (list, tuple)) or not all(isinstance(p, str) and p.strip() for p in value):
            raise ConfigError(f"must be a list of {what}")
        return tuple(p.strip() for p in value)

    return check


#: Glob patterns relative to the source dir.
_patterns = _strings("glob patterns (strings), relative to the source dir")
#: Shell-style patterns of environment variable names.
_names = _strings("patterns of environment variable names (strings)")


def _mime_priority(value: Any) -> tuple[PriorityOverride, ...]:
    """(builder, mime type, priority) entries, checked one by one (see :mod:`livecells.model.mime`)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError("must be a list of (builder, mime type, priority) tuples")
    kept: list[PriorityOverride] = []
    problems: list[str] = []
    for number, entry in enumerate(value, 1):
        try:
            kept.append(priority_override(entry))
        except ValueError as err:
            shown = repr(entry)
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            problems.append(f"entry {number} {shown}: {err}")
    if problems:
        raise EntriesDropped(tuple(kept), problems)
    return tuple(kept)


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
        metadata=_meta(
            "ordered map: name -> {label, kernel, preload, sync, gpu_used, version_of, env}",
            _frameworks,
        ),
    )
    execute: ExecuteMode = field(
        default=ExecuteMode.AUTO,
        metadata=_meta("auto | force | cache | off", _choice(ExecuteMode), rebuild=""),
    )
    device: DeviceMode = field(
        default=DeviceMode.AUTO,
        metadata=_meta("auto | gpu | cpu", _choice(DeviceMode), rebuild=""),
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
    executor: Any = field(
        default="local",
        metadata=_meta(
            "'local', an executor's address ('tcp://host:8786'), an executor object, or a function "
            "returning a client",
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
    mime_priority: tuple[PriorityOverride, ...] = field(
        default=(),
        metadata=_meta(
            "(builder, mime type, priority) entries that change which output representation a "
            "builder shows (lower first; None: never)",
            _mime_priority,
        ),
    )
    depends: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "glob patterns (relative to the source dir) of files whose change re-runs every page",
            _patterns,
        ),
    )

    env_drop: tuple[str, ...] = field(
        default=DEFAULT_ENV_DROP,
        metadata=_meta(
            "patterns of environment variable names kept from the kernels (secrets)", _names, rebuild=""
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
    if name in {"depends", "mime_priority"}:
        return []
    if name == "env_drop":
        return list(DEFAULT_ENV_DROP)
    f = CONFIG_FIELDS[name]
    return str(f.default) if isinstance(f.default, Vocabulary) else f.default


def _raw_used(name: str, used: LivecellsConfig) -> Any:
    """The raw value of a refused ``name``: its default, or the entries kept of a list value."""
    if name == "mime_priority":
        return [(o.builder, o.mime, o.priority) for o in used.mime_priority]
    return _raw_default(name)


def _default_of_config(name: str, config: Any) -> Any:
    return _raw_default(name)


def setup_config(app: Sphinx) -> None:
    """Register every field as a ``livecells_<name>`` config value."""
    for name, f in CONFIG_FIELDS.items():
        # Any: the validators check every value, and say where in conf.py it was set (Sphinx's
        # own type check would warn a second time, without a location). The default is given as
        # a function of the config so that Sphinx leaves a ``-D`` string as it is (it converts by
        # the default's type, and refuses "1.5" for an int, any word but 0/1 for a bool, a dict):
        # :func:`from_command_line` reads it.
        app.add_config_value(
            f"livecells_{name}",
            functools.partial(_default_of_config, name),
            f.metadata["rebuild"],
            types=Any,
            description=f.metadata["help"],
        )
    app.connect("config-inited", _validate_on_init, priority=400)


def read_config(
    values: Mapping[str, Any],
    warn: Callable[[str], None],
    where: Callable[[str, str], None] | None = None,
    given: Collection[str] = (),
) -> LivecellsConfig:
    """Validate raw values (without the prefix); a bad one is reported and replaced by its default.

    ``where(message, name)``, when given, reports instead of ``warn``, knowing the value's name
    (so that the warning can point at its line in conf.py). ``given``: the names set with ``-D``,
    which their messages say.
    """

    def named(name: str) -> str:
        return f"livecells_{name}" + (" (given with -D)" if name in given else "")

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
        except EntriesDropped as err:
            kwargs[name] = err.kept
            for problem in err.problems:
                say(f"{named(name)}: {problem}; that entry is ignored", name)
        except ConfigError as err:
            shown = repr(values[name])
            shown = shown if len(shown) <= 80 else shown[:77] + "..."
            say(f"{named(name)} = {shown}: {err}; using the default", name)
        except Exception as err:  # noqa: BLE001 - a value whose own methods fail (a bad mapping)
            say(f"{named(name)}: cannot be read ({type(err).__name__}: {err}); using the default", name)
    config = LivecellsConfig(**kwargs)
    if config.latex_framework and config.latex_framework != "all" and (
        config.latex_framework not in config.frameworks
    ):
        say(
            f"{named('latex_framework')} = {config.latex_framework!r}: not a framework in "
            f"livecells_frameworks ({', '.join(config.frameworks)}); using the first",
            "latex_framework",
        )
        config = dataclasses.replace(config, latex_framework="")
    return config


def conf_location(confdir: str | Path | None, name: str) -> str | None:
    """``conf.py:LINE`` of the line that sets config value ``name``; None when no line does (a
    default, a ``-D`` override, a value set indirectly) or there is no conf.py. Never a bare path:
    Sphinx would take it for a document name (``conf.py.rst``, or a crash before the environment
    exists)."""
    if not confdir:
        return None
    path = Path(confdir) / "conf.py"
    setting = re.compile(rf"^\s*{re.escape(name)}\s*(=|\[|:|\+=|\.)")
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return None
    found = [number for number, line in enumerate(lines, 1) if setting.match(line)]
    return f"{path}:{found[-1]}" if found else None  # the last assignment wins


TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


def from_command_line(name: str, raw: str) -> Any:
    """The value ``-D livecells_<name>=RAW`` stands for: words for booleans, numbers for numbers;
    anything else stays the string, for the validator to accept or refuse (Sphinx's own
    conversion raises on a bad boolean before any extension can catch it)."""
    default = CONFIG_FIELDS[name].default
    if isinstance(default, bool):
        word = raw.strip().lower()
        return True if word in TRUE_WORDS else False if word in FALSE_WORDS else raw
    if isinstance(default, (int, float)):
        for number in (int, float):
            try:
                return number(raw)
            except ValueError:
                pass
    return raw


def origin(app: Sphinx, name: str) -> tuple[str | None, str]:
    """Where config value ``livecells_<name>`` was set, for a warning about it: its conf.py line
    as the location, or no location and " (given with -D)" to add to the message."""
    key = f"livecells_{name}"
    overrides = getattr(app.config, "overrides", {})
    if key in overrides or any(k.startswith(key + ".") for k in overrides):
        return None, " (given with -D)"
    return conf_location(app.confdir, key), ""


def _validate_on_init(app: Sphinx, config: Any) -> None:
    overrides = getattr(config, "overrides", {})
    given = {
        name: from_command_line(name, overrides[f"livecells_{name}"])
        for name in CONFIG_FIELDS
        if isinstance(overrides.get(f"livecells_{name}"), str)
    }
    # Read before Sphinx converts them: its conversion of a -D value raises, or warns unlocated.
    values = {name: given[name] if name in given else getattr(config, f"livecells_{name}") for name in CONFIG_FIELDS}
    refused: set[str] = set()

    def warn(message: str) -> None:
        logger.warning(message, type=WARNING_TYPE, subtype=WarningSubtype.CONFIG)

    def where(message: str, name: str) -> None:
        refused.add(name)
        location, _ = origin(app, name)
        logger.warning(message, type=WARNING_TYPE, subtype=WarningSubtype.CONFIG, location=location)

    checked = read_config(values, warn, where, given)
    problem = store_problem(app.srcdir, checked.store)
    if problem:
        note = " (given with -D)" if "store" in given else ""
        where(f"livecells_store{note} = {checked.store!r}: {problem}; using the default", "store")
        checked = dataclasses.replace(checked, store=_raw_default("store"))
    app.livecells_config = checked  # type: ignore[attr-defined]
    # What Sphinx keeps (pickles, and compares at the next build) is what is used.
    for name in set(given) | refused:
        setattr(config, f"livecells_{name}", _raw_used(name, app.livecells_config) if name in refused else given[name])


def app_of(env: Any) -> Sphinx:
    """The application behind a build environment (``env.app`` is deprecated in Sphinx 9)."""
    app = getattr(env, "_app", None)
    return app if app is not None else env.app


def get_config(app: Sphinx) -> LivecellsConfig:
    """The validated configuration of this build."""
    return app.livecells_config  # type: ignore[attr-defined,no-any-return]
