"""The floor of a livecells build: what its work costs with nothing of livecells' own around it.

Shared by ``peers_d2l.py`` and ``book_scale.py``. A build's floor is made of parts measured in the
same run as the build itself:

- a Sphinx build of the same pages with execution off (``-D livecells_execute=off``: the same
  pages, directives and recorded outputs, no kernel), cold, as a no-op, or after the same edit;
- each framework's import, once, in a fresh Python (:func:`import_seconds`);
- the cells' own in-kernel time, as livecells' store records it (:func:`stored_sessions`; the
  timing hook's clock, between IPython's pre- and post-run events): all of it one after another on
  one slot, or the makespan bound ``max(longest session, total / N)`` for N slots
  (:func:`makespan_bound`).

The imports are counted once each, one after another: the cost of the work, not a strict bound on
wall time (a build may overlap an import with Sphinx's reading, and then beat its floor).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchlib import run

#: Sphinx's own count of what it reads (not printed with -q).
UPDATING = re.compile(r"updating environment: (?:\[[^\]]*\] )?(\d+) added, (\d+) changed, (\d+) removed")
#: livecells' summary line at the end of a build that planned sessions.
SUMMARY = re.compile(r"livecells: (\d+) session\(s\) run, (\d+) from the store, (\d+) not run, (\d+) failed")

#: One fresh Python: import a module, print the seconds it took (the interpreter's start left out).
IMPORT_TIMER = (
    "import importlib, sys, time\n"
    "started = time.perf_counter()\n"
    "importlib.import_module(sys.argv[1])\n"
    "print(f'import-seconds {time.perf_counter() - started:.6f}')\n"
)


@dataclass(frozen=True)
class StoredSession:
    """One session as a livecells store holds it."""

    run_id: str
    status: str
    cells: int
    ok: int
    #: Each cell's in-kernel seconds (a repeated cell: its warm-up runs and samples together);
    #: None where the store has no time for the cell.
    times: tuple[float | None, ...]

    @property
    def seconds(self) -> float:
        """The session's cells' in-kernel time (raises if a cell has none: no floor then)."""
        if any(t is None for t in self.times):
            raise ValueError("a cell without a recorded time")
        return float(sum(t for t in self.times if t is not None))


def _cell_seconds(cell: dict[str, Any]) -> float | None:
    samples = list(cell.get("samples") or [])
    if samples:
        return float(sum(samples) + sum(cell.get("warmup") or []))
    time = cell.get("time")
    return None if time is None else float(time)


def stored_sessions(src: Path, store: str = "_livecells") -> dict[str, StoredSession]:
    """Every session of the livecells store under ``src``, by ``page/framework``."""
    found: dict[str, StoredSession] = {}
    root = src / store
    for path in sorted(root.rglob("*.json")):
        data = json.loads(path.read_text(encoding="utf-8"))
        for framework, record in (data.get("sessions") or {}).items():
            cells = record.get("cells") or []
            found[f"{path.relative_to(root).with_suffix('')}/{framework}"] = StoredSession(
                run_id=record.get("run_id") or "",
                status=record.get("status") or "",
                cells=len(cells),
                ok=sum(c.get("status") == "ok" for c in cells),
                times=tuple(_cell_seconds(c) for c in cells),
            )
    return found


def ran_between(before: dict[str, StoredSession], after: dict[str, StoredSession]) -> list[str]:
    """The sessions a build between the two readings ran (a new run id)."""
    return sorted(k for k, v in after.items() if k not in before or before[k].run_id != v.run_id)


def makespan_bound(seconds: list[float], slots: int) -> float:
    """The least time ``slots`` workers need for these sessions: ``max(longest, total / slots)``."""
    if not seconds:
        return 0.0
    return max(max(seconds), sum(seconds) / slots)


def import_seconds(python: str, module: str, env: dict[str, str], timeout: float = 300) -> float:
    """Seconds ``import module`` takes in a fresh ``python`` (``env`` added to the environment)."""
    result = run([python, "-c", IMPORT_TIMER, module], env=env, timeout=timeout).check(f"import {module}")
    lines = [line for line in result.stdout.splitlines() if line.startswith("import-seconds ")]
    if not lines:
        raise SystemExit(f"import {module}: no time printed:\n{result.stdout[-2000:]}{result.stderr[-2000:]}")
    return float(lines[-1].split()[1])


def sphinx_read(output: str) -> tuple[int, int, int] | None:
    """(added, changed, removed) as Sphinx printed them when it updated its environment."""
    match = UPDATING.search(output)
    return None if match is None else (int(match.group(1)), int(match.group(2)), int(match.group(3)))


def summary(output: str) -> tuple[int, int, int, int] | None:
    """(run, from the store, not run, failed) of livecells' summary line; None if it printed none."""
    match = SUMMARY.search(output)
    return None if match is None else tuple(int(g) for g in match.groups())  # type: ignore[return-value]


def check_execution_off(kind: str, output: str, stored: dict[str, Any], docs: int) -> str:
    """What is wrong with an execution-off build ('' when nothing), from its output (not ``-q``)
    and the sessions its store holds afterwards (``stored``): it must have run and stored no
    session, and Sphinx must have read every one of the ``docs`` pages cold, none in a no-op,
    and exactly the edited one after an edit."""
    if stored:
        return f"execution off, yet the store holds sessions: {sorted(stored)}"
    counts = summary(output)
    if counts is not None and counts[0]:
        return f"execution off, yet the summary line says {counts[0]} session(s) run"
    read = sphinx_read(output)
    expected = {"cold": (docs, 0, 0), "noop": (0, 0, 0), "edit": (0, 1, 0)}[kind]
    if read != expected:
        return f"Sphinx read {read} (added, changed, removed), expected {expected}"
    return ""
