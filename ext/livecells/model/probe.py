"""What a kernel says of its session at its end: :class:`Probe`, read from the kernel's JSON
(a cell can replace anything in its kernel, so each part is checked). The session's
:class:`~livecells.model.records.Provenance` is made of it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Probe:
    """What a kernel says of its session at the end (:func:`livecells.kernel_side.hook.probe`), and
    the kernelspec it was started from: what the session's :class:`Provenance` is made of."""

    python: str = ""
    framework_version: str = ""
    #: The framework's ``gpu_used`` expression was true in the kernel; None: the framework
    #: cannot say (its expression gave None).
    gpu_used: bool | None = False
    host: str = ""
    #: ``(execution count, error)`` of the cells after which the framework's sync code failed.
    sync_errors: tuple[tuple[int, str], ...] = ()
    #: What the kernel did without a private detail it found not as expected.
    fallbacks: tuple[str, ...] = ()
    kernelspec: dict[str, str] = field(default_factory=dict)

    @classmethod
    def from_json(cls, data: Any) -> Probe:
        """The probe of the kernel's JSON; what is missing or of the wrong type is left out (a
        cell can replace anything in its kernel)."""
        if not isinstance(data, dict):
            return cls()

        def text(key: str) -> str:
            value = data.get(key)
            return value if isinstance(value, str) else ""

        sync_errors = tuple(
            (entry[0], str(entry[1]))
            for entry in data.get("sync_errors") or []
            if isinstance(entry, (list, tuple)) and len(entry) == 2 and isinstance(entry[0], int)
        )
        return cls(
            python=text("python"),
            framework_version=text("framework_version"),
            gpu_used=None if "gpu_used" in data and data["gpu_used"] is None else data.get("gpu_used") is True,
            host=text("host"),
            sync_errors=sync_errors,
            fallbacks=_fallbacks(data.get("fallbacks")),
        )


#: Fallbacks kept of a probe, and characters of each: the kernel caps them too, but a cell can
#: replace anything in its kernel.
MAX_FALLBACKS = 20
MAX_FALLBACK_CHARS = 300


def _fallbacks(found: Any) -> tuple[str, ...]:
    entries = found if isinstance(found, list) else []
    return tuple(entry[:MAX_FALLBACK_CHARS] for entry in entries if isinstance(entry, str))[:MAX_FALLBACKS]
