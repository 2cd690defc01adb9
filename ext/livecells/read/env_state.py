"""What livecells keeps in Sphinx's build environment between builds: one object, pickled with
the environment, instead of an attribute per cache.

Each stage reads its part through its own accessor (``plans(env)``, ``page_names(env)``...);
a collector's ``merge_other`` merges the parts its stage fills while Sphinx reads in parallel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

#: The environment's attribute.
ATTRIBUTE = "livecells"


@dataclass
class EnvState:
    """livecells' part of a build environment."""

    #: Per page: its cells as a plan (read/collect.py).
    plans: dict[str, Any] = field(default_factory=dict)
    #: Per page: its named cells, for values in prose (read/values.py).
    names: dict[str, Any] = field(default_factory=dict)
    #: Per page with slide marks: its slide prose (read/slides.py).
    slides: dict[str, Any] = field(default_factory=dict)
    #: Per page: the session keys and store digest its written output was made from
    #: (pipeline/events.py).
    seen: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: Dependency files' digests, by path, reused while unchanged (plan/keys.py's FileHashes).
    file_hashes: dict[str, Any] = field(default_factory=dict)
    #: The store files' checks' verdicts by content digest, those of the last build's files
    #: (store/files.py's OutputStore.verdicts).
    store_verdicts: dict[str, Any] = field(default_factory=dict)
    #: What each session reaches of the helper modules, and the helper modules read
    #: (plan/helpers.py's UsageCache and ModuleCache).
    helper_usages: dict[Any, Any] = field(default_factory=dict)
    helper_modules: dict[Any, Any] = field(default_factory=dict)
    #: The pages that hold a ``live-report``, and per builder the digest of what it last showed
    #: (render/report.py).
    reports: set[str] = field(default_factory=set)
    report_digests: dict[str, str] = field(default_factory=dict)


def env_state(env: Any) -> EnvState:
    """livecells' state in ``env``, made on first use."""
    state = getattr(env, ATTRIBUTE, None)
    if not isinstance(state, EnvState):
        state = EnvState()
        setattr(env, ATTRIBUTE, state)
    return state
