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
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from sphinx.application import Sphinx
from sphinx.util import logging

from livecells import config_checks as checks
from livecells.errors import ConfigError, EntriesDroppedError
from livecells.model.environ import DEFAULT_ENV_DROP
from livecells.model.folders import store_problem
from livecells.model.frameworks import DEFAULT_FRAMEWORKS, KNOWN_FRAMEWORKS, FrameworkSpec
from livecells.model.hosted import HostedService
from livecells.model.launch import PLACEHOLDERS, LaunchTarget
from livecells.model.library import LibrarySettings
from livecells.model.mime import PriorityOverride
from livecells.model.slides import SlidesSettings
from livecells.model.vocabulary import DeviceMode, ExecuteMode, Granularity, StderrMode, Vocabulary, WarningSubtype
from livecells.sphinx_util import from_command_line, origin

logger = logging.getLogger(__name__)

WARNING_TYPE = "livecells"

EXECUTE_MODES = ExecuteMode.words()
DEVICE_MODES = DeviceMode.words()
STDERR_MODES = StderrMode.words()


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
        default_factory=lambda: checks.frameworks(DEFAULT_FRAMEWORKS),
        metadata=_meta(
            "The frameworks the book is written for, in tab order: name -> {label, kernel, "
            f"preload, sync, gpu_used, version_of, env}}. Known frameworks ({', '.join(KNOWN_FRAMEWORKS)}) "
            "keep their defaults for what is left out; a bad entry is dropped.",
            checks.frameworks,
            "dict",
        ),
    )
    execute: ExecuteMode = field(
        default=ExecuteMode.AUTO,
        metadata=_meta(
            "Which sessions run: auto (what changed), force (all), cache (none: stored results), off "
            "(none: recorded outputs).",
            checks.choice(ExecuteMode),
            " | ".join(map(repr, EXECUTE_MODES)),
            rebuild="",
        ),
    )
    execute_exclude: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "Glob patterns of pages (docnames or source paths, relative to the source dir, as "
            "exclude_patterns) that never run: they show stored results, else recorded outputs.",
            checks.patterns,
            "list of str",
        ),
    )
    device: DeviceMode = field(
        default=DeviceMode.AUTO,
        metadata=_meta(
            "Which devices sessions may use: auto (the GPUs, if any), gpu (require one), cpu.",
            checks.choice(DeviceMode),
            " | ".join(map(repr, DEVICE_MODES)),
            rebuild="",
        ),
    )
    timeout: float = field(
        default=600,
        metadata=_meta("The time limit of each cell, in seconds.", checks.positive_number, "int | float", rebuild=""),
    )
    jobs: int | Literal["auto"] = field(
        default="auto",
        metadata=_meta("Sessions run at once (auto: one per GPU, else one).", checks.jobs, "'auto' | int", rebuild=""),
    )
    store: str = field(
        default="_livecells",
        metadata=_meta("Folder of stored results, relative to the source dir.", checks.string, "str"),
    )
    raise_on_error: bool = field(
        default=False,
        metadata=_meta(
            "The build fails at its end if a page shows an unexpected error, a cell not run or a "
            "stale result.",
            checks.boolean,
            "bool",
            rebuild="",
        ),
    )
    allow_errors: bool = field(
        default=False,
        metadata=_meta(
            "Every cell may raise: its error is shown, expected as with a bare :raises:, and no "
            "failure.",
            checks.boolean,
            "bool",
        ),
    )
    stderr: StderrMode = field(
        default=StderrMode.SHOW,
        metadata=_meta(
            "What a cell's stderr does where its :stderr: says nothing: show, remove (or hide), "
            "remove-warn, warn, error or severe (both fail the cell).",
            checks.choice(StderrMode),
            " | ".join(map(repr, STDERR_MODES)),
        ),
    )
    show_tb: bool = field(
        default=False,
        metadata=_meta(
            "A failing cell's warning is followed by its traceback, as plain text.",
            checks.boolean,
            "bool",
            rebuild="",
        ),
    )
    latex_framework: str = field(
        default="",
        metadata=_meta(
            "The framework whose cells LaTeX prints: a name, all, or empty (the first).",
            checks.optional_string,
            "str",
            rebuild="",
        ),
    )
    allow_html: bool = field(
        default=True,
        metadata=_meta("Render text/html outputs as HTML.", checks.boolean, "bool", rebuild="html"),
    )
    executor: Any = field(
        default="local",
        metadata=_meta(
            "Where sessions run: local, an executor's address (tcp://host:8786), an executor "
            "object, or a function returning a client.",
            checks.executor,
            "str | object | function",
            rebuild="",
        ),
    )
    fork_kernels: bool = field(
        default=True,
        metadata=_meta(
            "Start kernels by forking a process that has imported the framework (Linux).",
            checks.boolean,
            "bool",
            rebuild="",
        ),
    )
    keep_warm: float | Literal["auto"] = field(
        default="auto",
        metadata=_meta(
            "For edit loops: seconds a framework's fork-server template may idle after a build, "
            "for the next build to adopt; 0: off. It lives at most as long as the session (the "
            "terminal's shell) that started the build. auto: 600 under sphinx-autobuild, living "
            "at most as long as it; else off.",
            checks.keep_warm,
            "'auto' | float",
            rebuild="",
        ),
    )
    output_limit: int = field(
        default=100_000,
        metadata=_meta("Characters kept of a cell's stdout (and, apart, of its stderr).", checks.positive_int, "int"),
    )
    mime_priority: tuple[PriorityOverride, ...] = field(
        default=(),
        metadata=_meta(
            "(builder, mime type, priority) entries that change which output representation a "
            "builder shows (lower first; None: never); a bad entry is dropped.",
            checks.mime_priority,
            "list of (str, str, int | None)",
        ),
    )
    image_options: dict[str, Any] = field(
        default_factory=dict,
        metadata=_meta(
            "Options of every output image (width, height, alt, classes), as MyST-NB's "
            "nb_render_image_options; a cell's :image-*: options win; a bad entry is dropped.",
            checks.image_options,
            "dict",
            rebuild="html",
        ),
    )
    depends: tuple[str, ...] = field(
        default=(),
        metadata=_meta(
            "Glob patterns (relative to the source dir) of files whose change re-runs every page (a "
            "Python module: the sessions that use what changed).",
            checks.patterns,
            "list of str",
        ),
    )
    depends_granularity: Granularity = field(
        default=Granularity.DEFINITIONS,
        metadata=_meta(
            "What of a Python module matched by livecells_depends or :depends: a session depends "
            "on: definitions (what its cells reach) or files (the whole file).",
            checks.choice(Granularity),
            " | ".join(map(repr, Granularity.words())),
        ),
    )
    env_drop: tuple[str, ...] = field(
        default=DEFAULT_ENV_DROP,
        metadata=_meta(
            "Shell-style patterns of environment variable names left out of the kernels' environment "
            "(secrets).",
            checks.env_names,
            "list of str",
            rebuild="",
        ),
    )
    summary_dir: str = field(
        default="",
        metadata=_meta(
            "Folder of summary.json, junit.xml and report.txt, relative to the source dir; empty: "
            "livecells-summary in the doctree folder, outside the published site.",
            checks.optional_string,
            "str",
            rebuild="",
        ),
    )
    show_host: bool = field(
        default=False,
        metadata=_meta(
            "A stored result's line names the machine it ran on.",
            checks.boolean,
            "bool",
        ),
    )

    repeat: int = field(
        default=1,
        metadata=_meta(
            "Timed runs of every cell that gives no :repeat: (1: run once). Only for books whose "
            "cells are all safe to run again; see docs/timing.rst.",
            checks.positive_int,
            "int",
        ),
    )
    warmup: int = field(
        default=1,
        metadata=_meta(
            "Runs before a repeated cell's timed ones, for cells that give no :warmup:.",
            checks.count,
            "int",
        ),
    )
    drift_factor: float = field(
        default=2.0,
        metadata=_meta(
            "A cell whose time changed by more than this factor since the time stored for the "
            "same code on the same device is warned of (livecells.timing) and reported.",
            checks.factor,
            "int | float",
            rebuild="",
        ),
    )
    drift_floor: float = field(
        default=0.05,
        metadata=_meta(
            "Seconds under which a difference in a cell's time is noise, never drift.",
            checks.non_negative,
            "int | float",
            rebuild="",
        ),
    )
    launch: tuple[LaunchTarget, ...] = field(
        default=(),
        metadata=_meta(
            "Links that open a page's notebook of each framework in a notebook service: service "
            "(colab, binder, studiolab, or a label) -> URL template, or -> {framework: template}; "
            f"placeholders {', '.join('{' + p + '}' for p in PLACEHOLDERS)}; a bad entry is dropped.",
            checks.launch,
            "dict",
            rebuild="html",
        ),
    )

    hosted: tuple[HostedService, ...] = field(
        default=(),
        metadata=_meta(
            "Notebooks for hosted services, written by HTML builds into a folder per service and "
            "framework: service (colab, sagemaker, or another) -> {folder, libs, requires, header, kernel, "
            "gpu_pattern, images, release}; a service named in livecells_launch links to them. A bad "
            "entry is dropped.",
            checks.hosted,
            "dict",
            rebuild="html",
        ),
    )
    slides: SlidesSettings | None = field(
        default=None,
        metadata=_meta(
            "Slides of each page with slide marks, per framework, as d2lbook's slides makes them "
            "(RISE notebooks in _slides/<framework>/ of an HTML build; docs/migrating-d2l.rst): "
            "{top_left, top_right (HTML of each slide's corners), github_repo (framework -> "
            "owner/name, for each framework's README)}; None: no slides; a bad entry is dropped.",
            checks.slides,
            "dict | None",
            rebuild="",
        ),
    )
    library: LibrarySettings | None = field(default=None, metadata=_meta(
        "The book's library files of its #@save cells, as d2lbook's build lib writes them, before any "
        "session starts: framework -> {lib_file, lib_name, simple_alias, fluent_alias, args_alias, alias, "
        "header}, and version_file (gets release); None: no library; a bad entry is dropped.",
        checks.library, "dict | None", rebuild=""))

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
    if name in {"launch", "hosted"}:
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
    if name == "hosted":
        return {service.name: service.raw() for service in used.hosted}
    if name == "image_options":
        return dict(used.image_options)
    if name == "slides":
        return used.slides.raw() if used.slides is not None else None
    if name == "library":
        return used.library.raw() if used.library is not None else None
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
        except EntriesDroppedError as err:
            kwargs[name] = err.kept
            for problem in err.problems:
                report(f"{named(name)}: {problem}; that entry is ignored", name)
        except ConfigError as err:
            report(f"{named(name)} = {checks.shown(values[name])}: {err}; using the default", name)
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
    if config.hosted:
        services, problems = checks.hosted_for(config.hosted, config.framework_names())
        for problem in problems:
            report(f"{named('hosted')}: {problem}", "hosted")
        config = dataclasses.replace(config, hosted=services)
    if config.slides is not None and any(f not in config.frameworks for f, _ in config.slides.github_repo):
        repos = []
        for framework, repo in config.slides.github_repo:
            if framework in config.frameworks:
                repos.append((framework, repo))
            else:
                report(f"{named('slides')}: github_repo {framework!r}: not a framework in livecells_frameworks "
                       f"({', '.join(config.frameworks)}); that entry is ignored", "slides")
        config = dataclasses.replace(config, slides=dataclasses.replace(config.slides, github_repo=tuple(repos)))
    if config.library is not None:
        kept, problems = config.library.for_frameworks(config.framework_names())
        for problem in problems:
            report(f"{named('library')}: {problem}", "library")
        config = dataclasses.replace(config, library=kept)
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
