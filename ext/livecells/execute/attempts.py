"""What an executor does when the worker under a session dies: one policy for every executor.

A session whose worker dies is started once more elsewhere (:data:`MAX_ATTEMPTS` starts in all);
if that worker dies too, it is not started again and is reported as a crash at its first cell,
like a dying kernel (:func:`crash_record`), with the workers it was lost on. A session that
finished after a lost start says so in its provenance (:func:`note_lost`). An executor tells
:class:`Attempts` of each start it sees; Dask's (execute/dask/scheduler.py) is the first user.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from livecells.execute.scheduler import SessionJob, lost_record
from livecells.model.records import SessionRecord

#: Starts of one session: the first, and one more after its worker died.
MAX_ATTEMPTS = 2
#: What an executor's own retry count is set to (Dask's ``retries=``).
RETRIES = MAX_ATTEMPTS - 1


@dataclass(frozen=True)
class Start:
    """One start of a session: the worker (its name or address) and its host."""

    worker: str
    host: str


@dataclass
class Attempts:
    """The starts seen of each session (by its task's token)."""

    starts: dict[str, list[Start]] = field(default_factory=dict)

    def started(self, token: str, worker: str, host: str) -> bool:
        """Note a start; True when it is one too many (every allowed start's worker died): the
        executor then stops the task instead of letting it kill another worker."""
        found = self.starts.setdefault(token, [])
        found.append(Start(worker, host))
        return len(found) > MAX_ATTEMPTS

    def lost(self, token: str) -> list[Start]:
        """The starts whose worker died: all but the last (which is running, or finished)."""
        return self.starts.get(token, [])[:-1]

    def allowed(self, token: str) -> list[Start]:
        """The starts the policy allowed (those beyond are stopped)."""
        return self.starts.get(token, [])[:MAX_ATTEMPTS]


def crash_record(job: SessionJob, lost: Sequence[Start], duration: float, executor: str) -> SessionRecord:
    """A session whose workers died on every allowed start: reported like a dying kernel."""
    where = " and ".join(f"{s.worker} ({s.host})" for s in lost)
    why = f"the {executor} worker running this session died, {len(lost)} time(s) (on {where}); it is not run again"
    last = lost[-1] if lost else Start("", "")
    record = lost_record(job, why, duration, host=last.host)
    record.provenance.extra.update(worker=last.worker, attempts=len(lost), lost_workers=[s.worker for s in lost])
    return record


def note_lost(record: SessionRecord, lost: Sequence[Start]) -> SessionRecord:
    """A finished session's record, saying in its provenance the starts it lost first."""
    if lost:
        record.provenance.extra.update(attempts=len(lost) + 1, lost_workers=[s.worker for s in lost])
    return record
