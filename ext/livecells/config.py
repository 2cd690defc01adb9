"""Configuration: one dataclass is the single source of truth for every ``livecells_*`` value.

Each field carries its default, its help text, the type conf.py gives it (for the docs' table)
and a validator. The values are registered with Sphinx as flat prefixed config values, validated
once per build at ``config-inited`` and read through :func:`get_config`: an invalid value gives a
``livecells.config`` warning at its conf.py line and falls back to the default, a bad entry of a
collection is dropped alone; never a traceback.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from docutils.parsers.rst import directives
from sphinx.application import Sphinx
from sphinx.util import logging

from livecells.model.environ import DEFAULT_ENV_DROP
from livecells.model.folders import store_problem
from livecells.model.frameworks import DEFAULT_FRAMEWORKS, KNOWN_FRAMEWORKS, FrameworkSpec
from livecells.model.launch import PLACEHOLDERS, LaunchTarget, launch_target
from livecells.model.mime import PriorityOverride, priority_override
from livecells.model.vocabulary import DeviceMode, ExecuteMode, Granularity, StderrMode, Vocabulary, WarningSubtype
from livecells.sphinx_util import from_command_line, origin

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


def _frameworks(value: Any) -> dict[str, FrameworkSpec]:
    """The map of framework name -> settings, checked entry by entry: a bad entry is dropped
    (and reported), the others kept; with none left the default is used."""
    if not isinstance(value, Mapping) or not value:
        raise ConfigError("must be a non-empty mapping of framework name -> settings")
    specs: dict[str, FrameworkSpec] = {}
    problems: list[str] = []
    for name, settings in value.items():
        try:
            specs[name] = FrameworkSpec.from_settings(name, settings)
        except ValueError as err:
            problems.append(str(err))
    if not specs:
        raise ConfigError("; ".join(problems))
    if problems:
        raise EntriesDropped(specs, problems)
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


def _jobs(value: Any) -> int | Literal["auto"]:
    if value == "auto":
        return "auto"
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
    """A validator of a list of non-empty strings (or one comma string): ``what`` they are. An
    entry that is not one is dropped (and reported), the others kept."""

    def check(value: Any) -> tuple[str, ...]:  # with none left, the default
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"must be a list of {what}")
        kept = tuple(p.strip() for p in value if isinstance(p, str) and p.strip())
        problems = [
            f"entry {number} {_shown(p)}: not a non-empty string"
            for number, p in enumerate(value, 1)
            if not (isinstance(p, str) and p.strip())
        ]
        if problems and not kept:
            raise ConfigError(f"must be a list of {what}")
        if problems:
            raise EntriesDropped(kept, problems)
        return kept

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
            problems.append(f"entry {number} {_shown(entry)}: {err}")
    if problems:
        raise EntriesDropped(tuple(kept), problems)
    return tuple(kept)


def _launch(value: Any) -> tuple[LaunchTarget, ...]:
    """Service -> URL template (or framework -> template), checked entry by entry (see
    :mod:`livecells.model.launch`)."""
    if not isinstance(value, Mapping):
        raise ConfigError("must be a mapping of service -> URL template (or framework -> URL template)")
    kept: list[LaunchTarget] = []
    problems: list[str] = []
    for name, entry in value.items():
        try:
            kept.append(launch_target(name, entry))
        except ValueError as err:
            problems.append(f"entry {_shown(name)}: {err}")
    if problems:
        raise EntriesDropped(tuple(kept), problems)
    return tuple(kept)


def _shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


#: Options of an output image, as the image directive checks them: livecells_image_options'
#: keys, and (named image-*) live-cell options.
IMAGE_CHECKS: dict[str, Callable[[str], Any]] = {
    "width": directives.length_or_percentage_or_unitless,
    "height": directives.length_or_unitless,
    "alt": directives.unchanged_required,
    "classes": directives.class_option,
}


def _image_options(value: Any) -> dict[str, Any]:
    """Default options of every output image (``IMAGE_CHECKS``'s keys), checked one by one."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be a dict with any of {', '.join(IMAGE_CHECKS)}")
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for key, item in value.items():
        if key not in IMAGE_CHECKS:
            problems.append(f"{_shown(key)}: not one of {', '.join(IMAGE_CHECKS)}")
            continue
        text = " ".join(map(str, item)) if isinstance(item, (list, tuple)) else str(item)
        try:
            kept[key] = IMAGE_CHECKS[key](text)
        except ValueError as err:
            problems.append(f"{key}: {' '.join(str(err).split()).rstrip('.')}")
    if problems:
        raise EntriesDropped(kept, problems)
    return kept


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("must be True or False")
    return value


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be a positive integer")
    return value


def _meta(
    help: str, validate: Callable[[Any], Any], shown_type: str, rebuild: str = "env"
) -> dict[str, Any]:
    """A field's metadata: its help (the docs' table and Sphinx's description), the validator,
    the type as conf.py gives it (for the docs), and what a change to it rebuilds."""
    return {"help": help, "validate": validate, "type": shown_type, "rebuild": rebuild}


@dataclass(frozen=True)
class LivecellsConfig:
    """Every ``livecells_<field>`` value, validated."""

    frameworks: dict[str, FrameworkSpec] = field(
        default_factory=lambda: _frameworks(DEFAULT_FRAMEWORKS),
        metadata=_meta(
            "The frameworks the book is written for, in tab order: name -> {label, kernel, "
            f"preload, sync, gpu_used, version_of, env}}. Known frameworks ({', '.join(KNOWN_FRAMEWORKS)}) "
            "keep their defaults for what is left out; a bad entry is dropped.",
            _frameworks,
            "dict",
        ),
    )
    execute: ExecuteMode = field(
        default=ExecuteMode.AUTO,
        metadata=_meta(
            "Which sessions run: auto (what changed), force (all), cache (none: stored results), off "
            "(none: recorded outputs).",
            _choice(ExecuteMode),
            " | ".join(map(repr, EXECUTE_MODES)),
            rebuild="",
        ),
    )
    execute_exclude: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "Glob patterns of pages (docnames or source paths, relative to the source dir, as "
            "exclude_patterns) that never run: they show stored results, else recorded outputs.",
            _patterns,
            "list of str",
        ),
    )
    device: DeviceMode = field(
        default=DeviceMode.AUTO,
        metadata=_meta(
            "Which devices sessions may use: auto (the GPUs, if any), gpu (require one), cpu.",
            _choice(DeviceMode),
            " | ".join(map(repr, DEVICE_MODES)),
            rebuild="",
        ),
    )
    timeout: float = field(
        default=600,
        metadata=_meta("The time limit of each cell, in seconds.", _positive_number, "int | float", rebuild=""),
    )
    jobs: int | Literal["auto"] = field(
        default="auto",
        metadata=_meta("Sessions run at once (auto: one per GPU, else one).", _jobs, "'auto' | int", rebuild=""),
    )
    store: str = field(
        default="_livecells",
        metadata=_meta("Folder of stored results, relative to the source dir.", _string, "str"),
    )
    raise_on_error: bool = field(
        default=False,
        metadata=_meta(
            "The build fails at its end if a page shows an unexpected error, a cell not run or a "
            "stale result.",
            _bool,
            "bool",
            rebuild="",
        ),
    )
    allow_errors: bool = field(
        default=False,
        metadata=_meta(
            "Every cell may raise: its error is shown, expected as with a bare :raises:, and no "
            "failure.",
            _bool,
            "bool",
        ),
    )
    stderr: StderrMode = field(
        default=StderrMode.SHOW,
        metadata=_meta(
            "What a cell's stderr does where its :stderr: says nothing: show, remove (or hide), "
            "remove-warn, warn, error or severe (both fail the cell).",
            _choice(StderrMode),
            " | ".join(map(repr, STDERR_MODES)),
        ),
    )
    show_tb: bool = field(
        default=False,
        metadata=_meta(
            "A failing cell's warning is followed by its traceback, as plain text.",
            _bool,
            "bool",
            rebuild="",
        ),
    )
    latex_framework: str = field(
        default="",
        metadata=_meta(
            "The framework whose cells LaTeX prints: a name, all, or empty (the first).",
            _optional_string,
            "str",
            rebuild="",
        ),
    )
    allow_html: bool = field(
        default=True,
        metadata=_meta("Render text/html outputs as HTML.", _bool, "bool", rebuild="html"),
    )
    executor: Any = field(
        default="local",
        metadata=_meta(
            "Where sessions run: local, an executor's address (tcp://host:8786), an executor "
            "object, or a function returning a client.",
            _executor,
            "str | object | function",
            rebuild="",
        ),
    )
    fork_kernels: bool = field(
        default=True,
        metadata=_meta(
            "Start kernels by forking a process that has imported the framework (Linux).",
            _bool,
            "bool",
            rebuild="",
        ),
    )
    output_limit: int = field(
        default=100_000,
        metadata=_meta("Characters kept of a cell's stdout (and, apart, of its stderr).", _positive_int, "int"),
    )
    mime_priority: tuple[PriorityOverride, ...] = field(
        default=(),
        metadata=_meta(
            "(builder, mime type, priority) entries that change which output representation a "
            "builder shows (lower first; None: never); a bad entry is dropped.",
            _mime_priority,
            "list of (str, str, int | None)",
        ),
    )
    image_options: dict[str, Any] = field(
        default_factory=dict,
        metadata=_meta(
            "Options of every output image (width, height, alt, classes), as MyST-NB's "
            "nb_render_image_options; a cell's :image-*: options win; a bad entry is dropped.",
            _image_options,
            "dict",
            rebuild="html",
        ),
    )
    depends: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "Glob patterns (relative to the source dir) of files whose change re-runs every page (a "
            "Python module: the sessions that use what changed).",
            _patterns,
            "list of str",
        ),
    )
    depends_granularity: Granularity = field(
        default=Granularity.DEFINITIONS,
        metadata=_meta(
            "What of a Python module matched by livecells_depends or :depends: a session depends "
            "on: definitions (what its cells reach) or files (the whole file).",
            _choice(Granularity),
            " | ".join(map(repr, Granularity.words())),
        ),
    )
    env_drop: tuple[str, ...] = field(
        default=DEFAULT_ENV_DROP,
        metadata=_meta(
            "Shell-style patterns of environment variable names left out of the kernels' environment "
            "(secrets).",
            _names,
            "list of str",
            rebuild="",
        ),
    )
    summary_dir: str = field(
        default="",
        metadata=_meta(
            "Folder of summary.json, junit.xml and report.txt, relative to the source dir; empty: "
            "livecells-summary in the doctree folder, outside the published site.",
            _optional_string,
            "str",
            rebuild="",
        ),
    )
    show_host: bool = field(
        default=False,
        metadata=_meta(
            "A stored result's line names the machine it ran on.",
            _bool,
            "bool",
        ),
    )

    launch: tuple[LaunchTarget, ...] = field(
        default=(),
        metadata=_meta(
            "Links that open a page's notebook of each framework in a notebook service: service "
            "(colab, binder, studiolab, or a label) -> URL template, or -> {framework: template}; "
            f"placeholders {', '.join('{' + p + '}' for p in PLACEHOLDERS)}; a bad entry is dropped.",
            _launch,
            "dict",
            rebuild="html",
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


def raw_default(name: str) -> Any:
    """The default of ``livecells_<name>`` as conf.py would give it."""
    if name == "frameworks":
        return DEFAULT_FRAMEWORKS
    if name in {"depends", "mime_priority", "execute_exclude"}:
        return []
    if name == "launch":
        return {}
    if name == "env_drop":
        return list(DEFAULT_ENV_DROP)
    if name == "image_options":
        return {}
    f = CONFIG_FIELDS[name]
    return str(f.default) if isinstance(f.default, Vocabulary) else f.default


def _raw_used(name: str, used: LivecellsConfig) -> Any:
    """The raw value of a refused ``name``: its default, or the entries kept of a collection."""
    if name == "frameworks":
        return {n: spec.settings() for n, spec in used.frameworks.items()}
    if name == "mime_priority":
        return [(o.builder, o.mime, o.priority) for o in used.mime_priority]
    if name in {"depends", "env_drop", "execute_exclude"}:
        return list(getattr(used, name))
    if name == "launch":
        return {target.name: target.raw() for target in used.launch}
    if name == "image_options":
        return dict(used.image_options)
    return raw_default(name)


def _default_of_config(name: str, config: Any) -> Any:
    return raw_default(name)


def setup_config(app: Sphinx) -> None:
    """Register every field as a ``livecells_<name>`` config value."""
    for name, f in CONFIG_FIELDS.items():
        # Any: the validators check every value, and say where in conf.py it was set (Sphinx's
        # own type check would warn a second time, without a location). The default is given as
        # a function of the config so that Sphinx leaves a ``-D`` string as it is (it converts by
        # the default's type, and refuses "1.5" for an int, any word but 0/1 for a bool, a dict):
        # :func:`livecells.sphinx_util.from_command_line` reads it.
        app.add_config_value(
            f"livecells_{name}",
            functools.partial(_default_of_config, name),
            f.metadata["rebuild"],
            types=Any,
            description=f.metadata["help"],
        )
    app.connect("config-inited", _validate_on_init, priority=400)


def read_config(
    values: Mapping[str, Any], report: Callable[[str, str], None], given: Collection[str] = ()
) -> LivecellsConfig:
    """Validate raw values (without the prefix). ``report(message, name)`` is told of each value
    that cannot be used (replaced by its default) and of each entry dropped from a collection;
    ``given``: the names set with ``-D``, which their messages say."""

    def named(name: str) -> str:
        return f"livecells_{name}" + (" (given with -D)" if name in given else "")

    kwargs: dict[str, Any] = {}
    for name, f in CONFIG_FIELDS.items():
        if name not in values:
            continue
        try:
            kwargs[name] = f.metadata["validate"](values[name])
        except EntriesDropped as err:
            kwargs[name] = err.kept
            for problem in err.problems:
                report(f"{named(name)}: {problem}; that entry is ignored", name)
        except ConfigError as err:
            report(f"{named(name)} = {_shown(values[name])}: {err}; using the default", name)
        except Exception as err:  # a value whose own methods fail (a bad mapping)
            report(f"{named(name)}: cannot be read ({type(err).__name__}: {err}); using the default", name)
    config = LivecellsConfig(**kwargs)
    if config.latex_framework and config.latex_framework != "all" and (
        config.latex_framework not in config.frameworks
    ):
        report(
            f"{named('latex_framework')} = {config.latex_framework!r}: not a framework in "
            f"livecells_frameworks ({', '.join(config.frameworks)}); using the first",
            "latex_framework",
        )
        config = dataclasses.replace(config, latex_framework="")
    return config


def _validate_on_init(app: Sphinx, config: Any) -> None:
    overrides = getattr(config, "overrides", {})
    given = {
        name: from_command_line(overrides[f"livecells_{name}"], CONFIG_FIELDS[name].default)
        for name in CONFIG_FIELDS
        if isinstance(overrides.get(f"livecells_{name}"), str)
    }
    # Read before Sphinx converts them: its conversion of a -D value raises, or warns unlocated.
    values = {name: given[name] if name in given else getattr(config, f"livecells_{name}") for name in CONFIG_FIELDS}
    refused: set[str] = set()

    def report(message: str, name: str) -> None:
        refused.add(name)
        location, _ = origin(app, name)
        logger.warning(message, type=WARNING_TYPE, subtype=WarningSubtype.CONFIG, location=location)

    validated = read_config(values, report, given)
    problem = store_problem(app.srcdir, validated.store)
    if problem:
        note = " (given with -D)" if "store" in given else ""
        report(f"livecells_store{note} = {validated.store!r}: {problem}; using the default", "store")
        validated = dataclasses.replace(validated, store=raw_default("store"))
    # Under a private name, which Sphinx leaves out when it pickles the config: the values may
    # hold an executor function.
    config._livecells_validated = validated
    # What Sphinx keeps (pickles, and compares at the next build) is what is used.
    for name in set(given) | refused:
        used = _raw_used(name, validated) if name in refused else given[name]
        setattr(config, f"livecells_{name}", used)


def get_config(env: Any) -> LivecellsConfig:
    """The validated configuration of this build, from its environment (``env.config`` is the
    build's Sphinx config, validated when it was read)."""
    return env.config._livecells_validated  # type: ignore[no-any-return]
