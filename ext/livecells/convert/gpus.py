"""What ``convert`` infers about a chapter's devices: the ``live-settings :gpus:`` it writes.

livecells never guesses a page's GPU needs while building. ``convert`` is a one-time migration
whose output the author reads, so it may: where a chapter's code names a second device
(``gpu(1)``, ``try_gpu(1)``, ``'cuda:1'``, ``.cuda(1)``, ``npx.gpu(1)``, ``num_gpus=2``,
``try_all_gpus()``), it writes an explicit ``.. live-settings::`` with ``:gpus: N`` and a comment
saying so. The evidence is the device indices the code names. Index 0 is implied by any GPU use;
``N`` is the length of the run 0, 1, 2, ... of named indices, so an index far past the others,
such as d2l's ``try_gpu(10)`` (which shows the fall-back to the CPU), does not count, and the
report says so. A chapter that names one device at most gets no settings: by default a session
gets one GPU where there is one, and the CPU where there is none.
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass, field

#: (pattern, meaning): an ``index`` names one device, a ``count`` asks for that many.
_PATTERNS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"\b(?:try_)?gpu\(\s*(\d+)\s*\)"), "index"),  # gpu(1), try_gpu(1), npx.gpu(1)
    (re.compile(r"\.cuda\(\s*(?:device\s*=\s*)?(\d+)\s*\)"), "index"),  # X.cuda(1)
    (re.compile(r"\bcuda:(\d+)"), "index"),  # torch.device('cuda:1')
    (re.compile(r"""device\(\s*['"]cuda['"]\s*,\s*(\d+)\s*\)"""), "index"),
    (re.compile(r"/GPU:(\d+)"), "index"),  # tf.device('/GPU:1')
    (re.compile(r"\bnum_gpus\s*=\s*(\d+)"), "count"),  # train(num_gpus=2, ...)
    (re.compile(r"(?<!def )\btry_all_gpus\s*\(\s*\)"), "all"),
]
#: How many devices ``try_all_gpus()`` is taken to ask for: more than one.
ALL_GPUS = 2


@dataclass
class GpuInference:
    """The GPU count a chapter's code asks for, and why."""

    gpus: int = 0
    evidence: list[tuple[str, int]] = field(default_factory=list)  # ("gpu(1)", line)
    ignored: list[tuple[str, int]] = field(default_factory=list)  # indices past the run from 0

    @property
    def settings(self) -> bool:
        """Whether the chapter gets a ``live-settings`` block (it asks for two GPUs or more)."""
        return self.gpus >= 2


def infer_gpus(code: list[tuple[int, list[str]]]) -> GpuInference:
    """Infer from cells, given as (source line of the first code line, code lines)."""
    found: dict[int, list[tuple[str, int]]] = {}  # device index -> where it is named
    for first, lines in code:
        for offset, line in enumerate(lines):
            for pattern, meaning in _PATTERNS:
                for match in pattern.finditer(line):
                    where = (match[0].strip(), first + offset)
                    if meaning == "index":
                        indices = [int(match[1])]
                    elif meaning == "count":
                        indices = list(range(int(match[1])))
                    else:
                        indices = list(range(ALL_GPUS))
                    for index in indices:
                        found.setdefault(index, []).append(where)
    result = GpuInference()
    if not found:
        return result
    used = set(found) | {0}
    while result.gpus in used:
        result.gpus += 1
    seen: set[tuple[str, int]] = set()
    for index in sorted(found):
        target = result.evidence if index < result.gpus else result.ignored
        for where in found[index]:
            if index > 0 and where not in seen:
                seen.add(where)
                target.append(where)
    return result


def where(found: list[tuple[str, int]]) -> str:
    """``gpu(1) (lines 198, 232), .cuda(1) (line 694)``: each expression once, with its lines."""
    lines: dict[str, list[int]] = {}
    for expression, line in found:
        lines.setdefault(expression, []).append(line)
    return ", ".join(
        f"{e} (line{'s' if len(n) > 1 else ''} {', '.join(map(str, n))})" for e, n in lines.items()
    )


def settings_lines(inference: GpuInference, indent: str) -> list[str]:
    """The comment and the ``live-settings`` block that ``convert`` writes for ``inference``."""
    comment = (
        f"livecells convert inferred the live-settings below: the code asks for "
        f"{inference.gpus} devices in {where(inference.evidence)}. Check it: on a machine with "
        f"fewer GPUs the page is not run and shows its recorded outputs; without these settings "
        f"it runs on one GPU or the CPU."
    )
    wrapped = textwrap.wrap(comment, 96, break_long_words=False, break_on_hyphens=False)
    return [
        f".. {wrapped[0]}",
        *(indent + line for line in wrapped[1:]),
        "",
        ".. live-settings::",
        f"{indent}:gpus: {inference.gpus}",
    ]
