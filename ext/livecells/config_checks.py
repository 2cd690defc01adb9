"""What each ``livecells_*`` value may be: the validators of :class:`livecells.config.LivecellsConfig`'s fields.

Each takes what conf.py (or ``-D``) gave and returns the field's value, or raises
:class:`ConfigError` with a message that names what is wrong; a value holding entries raises
:class:`EntriesDroppedError` with the good ones kept, so that one bad entry costs only itself.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping
from typing import Any, Literal

from docutils.parsers.rst import directives

from livecells.errors import ConfigError, EntriesDroppedError
from livecells.model.frameworks import FrameworkSpec
from livecells.model.hosted import HostedService, hosted_service
from livecells.model.launch import LaunchTarget, launch_target
from livecells.model.library import LibrarySettings, library_settings
from livecells.model.mime import PriorityOverride, priority_override
from livecells.model.slides import SETTINGS, SlidesSettings, slides_settings
from livecells.model.vocabulary import Vocabulary


def frameworks(value: Any) -> dict[str, FrameworkSpec]:
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
        raise EntriesDroppedError(specs, problems)
    return specs


def choice(vocabulary: type[Vocabulary]) -> Callable[[Any], Vocabulary]:
    def check(value: Any) -> Vocabulary:
        if not isinstance(value, str) or value not in vocabulary.words():
            raise ConfigError(f"must be one of {', '.join(map(repr, vocabulary.words()))}")
        return vocabulary(value)

    return check


def positive_number(value: Any) -> float:
    if (
        isinstance(value, bool)
        or not isinstance(value, (int, float))
        or not math.isfinite(value)
        or value <= 0
    ):
        raise ConfigError("must be a positive, finite number of seconds")
    return float(value)


def idle_seconds(value: Any) -> float:
    if value == 0 and not isinstance(value, bool):
        return 0.0
    return positive_number(value)


def keep_warm(value: Any) -> float | Literal["auto"]:
    """``'auto'`` (kept warm under an edit loop, sphinx-autobuild, else not) or idle seconds."""
    if value == "auto":
        return "auto"
    try:
        # A string comes from -D livecells_keep_warm=600.
        return idle_seconds(float(value) if isinstance(value, str) else value)
    except (ValueError, ConfigError):
        raise ConfigError("must be 'auto', 0 or a positive, finite number of seconds") from None


def jobs(value: Any) -> int | Literal["auto"]:
    if value == "auto":
        return "auto"
    if isinstance(value, str) and value.isdigit():  # from -D livecells_jobs=2
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be 'auto' or a positive integer")
    return value


def string(value: Any) -> str:
    if not isinstance(value, str) or not value:
        raise ConfigError("must be a non-empty string")
    return value


def executor(value: Any) -> Any:
    """``"local"``, an address (its scheme names the executor), an executor object, or a function
    that returns a cluster's client; which executor it names is the build's to find out."""
    if (isinstance(value, str) and value) or callable(value) or callable(getattr(value, "scheduler", None)):
        return value
    raise ConfigError(
        "must be 'local', an executor's address ('tcp://host:8786'), an executor object, or a "
        "function returning a client"
    )


def optional_string(value: Any) -> str:
    if not isinstance(value, str):
        raise ConfigError("must be a string")
    return value


def strings(what: str) -> Callable[[Any], tuple[str, ...]]:
    """A validator of a list of non-empty strings (or one comma string): ``what`` they are. An
    entry that is not one is dropped (and reported), the others kept."""

    def check(value: Any) -> tuple[str, ...]:  # with none left, the default
        if isinstance(value, str):
            value = [p.strip() for p in value.split(",") if p.strip()]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"must be a list of {what}")
        kept = tuple(p.strip() for p in value if isinstance(p, str) and p.strip())
        problems = [
            f"entry {number} {shown(p)}: not a non-empty string"
            for number, p in enumerate(value, 1)
            if not (isinstance(p, str) and p.strip())
        ]
        if problems and not kept:
            raise ConfigError(f"must be a list of {what}")
        if problems:
            raise EntriesDroppedError(kept, problems)
        return kept

    return check


#: Glob patterns relative to the source dir.
patterns = strings("glob patterns (strings), relative to the source dir")
#: Shell-style patterns of environment variable names.
env_names = strings("patterns of environment variable names (strings)")


def mime_priority(value: Any) -> tuple[PriorityOverride, ...]:
    """(builder, mime type, priority) entries, checked one by one (see :mod:`livecells.model.mime`)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise ConfigError("must be a list of (builder, mime type, priority) tuples")
    kept: list[PriorityOverride] = []
    problems: list[str] = []
    for number, entry in enumerate(value, 1):
        try:
            kept.append(priority_override(entry))
        except ValueError as err:
            problems.append(f"entry {number} {shown(entry)}: {err}")
    if problems:
        raise EntriesDroppedError(tuple(kept), problems)
    return tuple(kept)


def launch(value: Any) -> tuple[LaunchTarget, ...]:
    """Service -> URL template (or framework -> template), checked entry by entry (see
    :mod:`livecells.model.launch`)."""
    return _services(value, launch_target, "URL template (or framework -> URL template)")


def hosted(value: Any) -> tuple[HostedService, ...]:
    """Service -> settings of its notebooks, checked entry by entry (see
    :mod:`livecells.model.hosted`)."""
    return _services(value, hosted_service, "settings")


def _services(value: Any, parse: Callable[[Any, Any], Any], what: str) -> tuple[Any, ...]:
    """A mapping of service -> entry, each entry ``parse``d: a bad one is dropped (and reported)."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be a mapping of service -> {what}")
    kept = []
    problems: list[str] = []
    for name, entry in value.items():
        try:
            kept.append(parse(name, entry))
        except ValueError as err:
            problems.append(f"entry {shown(name)}: {err}")
    if problems:
        raise EntriesDroppedError(tuple(kept), problems)
    return tuple(kept)


def hosted_for(
    services: tuple[HostedService, ...], frameworks: list[str]
) -> tuple[tuple[HostedService, ...], list[str]]:
    """``services`` against the book's frameworks: a framework's libs or kernel for a framework
    the book does not have are dropped; a service whose folder would hold two frameworks' notebooks
    (no ``{framework}`` in a book of several) or another service's is dropped. Returns the
    services kept and a message per problem."""
    kept: list[HostedService] = []
    problems: list[str] = []
    folders: dict[str, str] = {}
    for service in services:
        strays = sorted({fw for fw, _ in service.libs if fw not in frameworks} | {
            fw for fw, _ in service.kernels if fw is not None and fw not in frameworks
        })
        if strays:
            problems.append(
                f"entry {service.name!r}: libs or kernel for {', '.join(strays)}, not in livecells_frameworks "
                f"({', '.join(frameworks)}); those are ignored"
            )
            service = dataclasses.replace(
                service,
                libs=tuple((fw, p) for fw, p in service.libs if fw in frameworks),
                kernels=tuple((fw, k) for fw, k in service.kernels if fw is None or fw in frameworks),
            )
        mine = {service.folder_of(fw) for fw in frameworks}
        if len(mine) < len(frameworks):
            problems.append(f"entry {service.name!r}: folder {service.folder!r} has no {{framework}}: "
                            "the notebooks of several frameworks would overwrite each other; that entry is ignored")
            continue
        clash = next((folders[f] for f in sorted(mine) if f in folders), None)
        if clash is not None:
            problems.append(f"entry {service.name!r}: its folder is {clash!r}'s too; that entry is ignored")
            continue
        folders.update(dict.fromkeys(mine, service.name))
        kept.append(service)
    return tuple(kept), problems


def slides(value: Any) -> SlidesSettings | None:
    """None (no slides), or the settings of d2lbook's ``[slides]``, checked key by key (see
    :mod:`livecells.model.slides`)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be None or a dict with any of {', '.join(SETTINGS)}")
    settings, problems = slides_settings(value)
    if problems:
        raise EntriesDroppedError(settings, problems)
    return settings


def library(value: Any) -> LibrarySettings | None:
    """None (no library), or the book's library files, checked entry by entry (see
    :mod:`livecells.model.library`)."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ConfigError("must be None or a dict: framework -> {lib_file, lib_name, ...}, and version_file")
    settings, problems = library_settings(value)
    if problems:
        raise EntriesDroppedError(settings, problems)
    return settings


def shown(value: Any) -> str:
    shown = repr(value)
    return shown if len(shown) <= 80 else shown[:77] + "..."


#: Options of an output image, as the image directive checks them: livecells_image_options'
#: keys, and (named image-*) live-cell options.
def _measure(check: Callable[[str], Any], what: str) -> Callable[[str], Any]:
    """``check`` (docutils'), with a message of our own: docutils' words change between releases."""

    def checked(text: str) -> Any:
        try:
            return check(text)
        except ValueError:
            raise ValueError(f"{text!r} is not {what}") from None

    return checked


IMAGE_CHECKS: dict[str, Callable[[str], Any]] = {
    "width": _measure(directives.length_or_percentage_or_unitless, "a length or percentage (300px, 80%, 300)"),
    "height": _measure(directives.length_or_unitless, "a length (200px, 10em, 200)"),
    "alt": directives.unchanged_required,
    "classes": directives.class_option,
}


def image_options(value: Any) -> dict[str, Any]:
    """Default options of every output image (``IMAGE_CHECKS``'s keys), checked one by one."""
    if not isinstance(value, Mapping):
        raise ConfigError(f"must be a dict with any of {', '.join(IMAGE_CHECKS)}")
    kept: dict[str, Any] = {}
    problems: list[str] = []
    for key, item in value.items():
        if key not in IMAGE_CHECKS:
            problems.append(f"{shown(key)}: not one of {', '.join(IMAGE_CHECKS)}")
            continue
        text = " ".join(map(str, item)) if isinstance(item, (list, tuple)) else str(item)
        try:
            kept[key] = IMAGE_CHECKS[key](text)
        except ValueError as err:
            problems.append(f"{key}: {' '.join(str(err).split()).rstrip('.')}")
    if problems:
        raise EntriesDroppedError(kept, problems)
    return kept


def boolean(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError("must be True or False")
    return value


def positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError("must be a positive integer")
    return value


def count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError("must be an integer of at least 0")
    return value


def factor(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 1:
        raise ConfigError("must be a finite number greater than 1")
    return float(value)


def non_negative(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise ConfigError("must be a finite number of seconds, 0 or more")
    return float(value)
