"""``python -m livecells report --compare OTHER_STORE``: each cell's time against another store's.

For every stored session, on every device both stores hold timings for (each keeps the latest
run on each device), each cell that ran the same code (same position, same code hash) in both:
the ratio of this store's time to the other's. A ratio past ``factor`` either way, by more than
``floor`` seconds, is drift: the command then exits with status 1, so that CI can gate on it
(for example against the store of the last release, checked out from git).
"""

from __future__ import annotations

import argparse
import math
import sys

from livecells.cli.book import Book
from livecells.errors import StoreError
from livecells.model.records import SessionRecord
from livecells.model.timings import Drift, drifts
from livecells.store import OutputStore

#: The defaults of livecells_drift_factor and livecells_drift_floor (config.py's).
FACTOR, FLOOR = 2.0, 0.05


def compare_command(args: argparse.Namespace, store: OutputStore) -> int:
    """``report --compare``: ``--factor`` and ``--floor``, else the book's conf.py values, else
    the defaults; a value that is no number (past 1 for the factor, 0 or more for the floor)
    is said on stderr and the default used."""
    book = Book.at(args.source_dir, args.conf_dir, tuple(args.define or ()))
    factor = args.factor if args.factor is not None else book.setting("livecells_drift_factor", FACTOR)
    floor = args.floor if args.floor is not None else book.setting("livecells_drift_floor", FLOOR)
    if isinstance(factor, bool) or not isinstance(factor, (int, float)) or not 1 < factor < math.inf:
        print(f"warning: drift factor {factor!r} is no number greater than 1; using {FACTOR:g}", file=sys.stderr)
        factor = FACTOR
    if isinstance(floor, bool) or not isinstance(floor, (int, float)) or not 0 <= floor < math.inf:
        print(f"warning: drift floor {floor!r} is no number of seconds; using {FLOOR:g}", file=sys.stderr)
        floor = FLOOR
    return compare(store, OutputStore(args.compare), float(factor), float(floor))


def _sessions(store: OutputStore, problems: list[str]) -> dict[tuple[str, str], SessionRecord]:
    found = {}
    for page in store.pages():
        try:
            records = store.records(page, problems)
        except StoreError as problem:
            problems.append(str(problem))
            continue
        found.update({(page, framework): record for framework, record in records.items()})
    return found


def compare(store: OutputStore, other: OutputStore, factor: float, floor: float) -> int:
    """Print each common cell's ratio (this store's time / the other's); 1 if any is past
    ``factor`` (or ``other`` is no folder), else 0."""
    if not other.root.is_dir():  # a gate that compares nothing must not pass
        print(f"--compare {other.root}: no such store folder", file=sys.stderr)
        return 1
    problems: list[str] = []
    mine, theirs = _sessions(store, problems), _sessions(other, problems)
    past = compared = 0
    for (page, framework), record in sorted(mine.items()):
        before = theirs.get((page, framework))
        if before is None:
            continue
        old = before.all_devices()
        for device, now in sorted(record.all_devices().items()):
            if device not in old:
                continue
            for drift in drifts(old[device], now):
                compared += 1
                beyond = drift.beyond(factor, floor)
                past += beyond
                print(_line(page, framework, now.label, drift, beyond, factor))
    for problem in problems:
        print(f"unusable: {problem}")
    print(
        f"{compared} cell time(s) compared with {other.root}: {past} past the factor {factor:g} "
        f"(differences under {floor:g} s are noise)"
    )
    return 1 if past else 0


def _line(page: str, framework: str, device: str, drift: Drift, beyond: bool, factor: float) -> str:
    ratio = drift.ratio
    mark = f"  PAST the factor {factor:g}" if beyond else ""
    return (
        f"{page} [{framework}] cell {drift.index + 1} on {device}: {drift.before:.4g} s -> "
        f"{drift.now:.4g} s: {ratio:.2f}x{mark}"
    )
