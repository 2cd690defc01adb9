"""Kernels started ahead of their sessions: in batches, never beside a timed cell, all shut down.

A fake session (no kernel) records when it starts, runs a cell and shuts down, so the policy of
:class:`livecells.execute.scheduler.LocalScheduler` is checked exactly and fast; real kernels started
ahead are covered by the builds of test_core and the fork-server tests.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from livecells.execute.devices import GPU
from livecells.execute.scheduler import LocalScheduler, SessionJob, cell_listener, run_order
from livecells.model.frameworks import FrameworkSpec
from livecells.model.plans import CellPlan, PageSettings, SessionPlan
from livecells.model.records import CellRecord, Probe

FRAMEWORK = FrameworkSpec(name="alpha", label="Alpha")


class Recorder:
    def __init__(self) -> None:
        self.events: list[tuple[str, str]] = []
        self.starting = 0
        self.running = 0
        self.most_starting = 0
        self.overlaps: list[str] = []
        self.alive: set[str] = set()
        self.fail: set[str] = set()


def fake_session_class(rec: Recorder, start_s: float = 0.02, cell_s: float = 0.01) -> Any:
    class FakeSession:
        def __init__(self, framework: FrameworkSpec, *, cwd: str, devices: list[int], **_: Any) -> None:
            self.name = cwd
            self.devices = devices
            self.broken: str | None = None
            self.kernelspec = {"name": "fake"}

        async def start(self) -> None:
            rec.events.append(("start", self.name))
            rec.starting += 1
            rec.most_starting = max(rec.most_starting, rec.starting)
            if rec.running:
                rec.overlaps.append(f"{self.name} started while a cell ran")
            try:
                await asyncio.sleep(start_s)
                if self.name in rec.fail:
                    raise RuntimeError("no kernel today")
                rec.alive.add(self.name)
            finally:
                rec.starting -= 1

        async def run_cell(self, code: str, timeout: float, *, last: bool = False) -> CellRecord:
            rec.events.append(("cell", self.name))
            if rec.starting:
                rec.overlaps.append(f"a cell of {self.name} ran while a kernel started")
            rec.running += 1
            try:
                await asyncio.sleep(cell_s)
            finally:
                rec.running -= 1
            return CellRecord(status="ok", time=cell_s, execution_count=1)

        async def probe(self) -> Probe:
            return Probe()

        async def shutdown(self) -> None:
            rec.events.append(("shutdown", self.name))
            rec.alive.discard(self.name)

    return FakeSession


def job(name: str, cells: int = 2, gpus: int = 0, estimate: float | None = None) -> SessionJob:
    plan = SessionPlan(
        docname=name,
        framework="alpha",
        source=f"/{name}/index.rst",  # cwd: /name, the fake session's name
        cells=tuple(
            CellPlan(index=i, frameworks=("alpha",), code="pass", line=i + 1, code_line=i + 2)
            for i in range(cells)
        ),
        settings=PageSettings(),
    )
    return SessionJob(plan, FRAMEWORK, name, "env", gpus, 30.0, 10_000, estimate=estimate)


def run_jobs(scheduler: LocalScheduler, jobs: list[SessionJob]) -> dict[str, dict[str, Any]]:
    records: dict[str, dict[str, Any]] = {}

    def done(job: SessionJob, record: dict[str, Any]) -> None:
        records[job.plan.docname] = record

    asyncio.run(scheduler.run(jobs, done))
    return records


def test_kernels_start_in_batches_between_sessions_never_beside_a_cell() -> None:
    rec = Recorder()
    scheduler = LocalScheduler([], 1, prestart=3, session_class=fake_session_class(rec))
    jobs = [job(f"p{i}", cells=3 - i % 2) for i in range(7)]
    records = run_jobs(scheduler, jobs)
    assert sorted(records) == sorted(j.plan.docname for j in jobs)
    assert all(r.status == "ok" for r in records.values()), records
    assert rec.overlaps == []
    assert rec.most_starting == 3  # three kernels at once
    assert sum(kind == "start" for kind, _ in rec.events) == 7  # one kernel per session
    assert rec.alive == set()
    # Each session's cells run in one stretch, and its kernel is shut down before the next one's.
    order = [name for kind, name in rec.events if kind == "cell"]
    assert order == sorted(order, key=order.index)
    for kind, name in rec.events:
        if kind == "shutdown":
            assert all(n != name for k, n in rec.events[rec.events.index((kind, name)) :] if k == "cell")


def test_one_at_a_time_when_prestart_is_off_or_sessions_run_in_parallel() -> None:
    for jobs_at_once, prestart in ((1, 1), (2, 4)):
        rec = Recorder()
        scheduler = LocalScheduler([], jobs_at_once, prestart=prestart, session_class=fake_session_class(rec))
        run_jobs(scheduler, [job(f"p{i}") for i in range(4)])
        assert rec.most_starting == (1 if jobs_at_once == 1 else 2)
        assert rec.alive == set()


def test_gpu_sessions_are_not_started_ahead() -> None:
    rec = Recorder()
    scheduler = LocalScheduler(
        [GPU(index=0, name="G")], 1, prestart=4, session_class=fake_session_class(rec)
    )
    records = run_jobs(scheduler, [job("g0", gpus=1), job("c0"), job("g1", gpus=1), job("c1")])
    assert all(r.status == "ok" for r in records.values()), records
    assert rec.overlaps == []
    assert rec.alive == set()
    gpu_starts = [i for i, (kind, name) in enumerate(rec.events) if kind == "start" and name.startswith("/g")]
    assert len(gpu_starts) == 2
    for i in gpu_starts:  # started by its own session, just before its first cell
        assert rec.events[i + 1] == ("cell", rec.events[i][1])


def test_a_kernel_that_fails_to_start_ahead_fails_its_session_only() -> None:
    rec = Recorder()
    rec.fail = {"/p1"}
    scheduler = LocalScheduler([], 1, prestart=3, session_class=fake_session_class(rec))
    records = run_jobs(scheduler, [job(f"p{i}") for i in range(3)])
    assert records["p1"].status == "failed"
    assert "no kernel today" in records["p1"].message
    assert records["p0"].status == records["p2"].status == "ok"
    assert rec.alive == set()


def test_cancelled_build_shuts_down_kernels_started_ahead() -> None:
    rec = Recorder()
    scheduler = LocalScheduler([], 1, prestart=3, session_class=fake_session_class(rec, cell_s=0.05))

    async def main() -> None:
        task = asyncio.ensure_future(scheduler.run([job(f"p{i}") for i in range(6)], lambda j, r: None))
        while not any(kind == "cell" for kind, _ in rec.events):
            await asyncio.sleep(0.005)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert sum(kind == "start" for kind, _ in rec.events) == 3
    assert rec.alive == set()


def test_sessions_start_longest_first_by_stored_duration_and_those_without_history_first() -> None:
    """LPT over the stored durations; a session without one may be the longest: it goes first
    (more cells first, as for equal durations); full ties keep document order."""
    rec = Recorder()
    scheduler = LocalScheduler([], 2, session_class=fake_session_class(rec))
    jobs = [
        job("short", estimate=1.0),
        job("new", cells=2),
        job("long", cells=1, estimate=30.0),
        job("newer", cells=3),
        job("middle", estimate=5.0),
        job("middle2", cells=4, estimate=5.0),
        job("short2", estimate=1.0),
    ]
    order = ["newer", "new", "long", "middle2", "middle", "short", "short2"]
    assert [j.plan.docname for j in run_order(jobs)] == order
    records = run_jobs(scheduler, jobs)
    assert all(r.status == "ok" for r in records.values()), records
    assert [name for kind, name in rec.events if kind == "start"] == [f"/{name}" for name in order]


def test_the_build_hears_of_each_cell_a_session_sends() -> None:
    """The progress line's "cell n of m": told in the build's process, before each cell runs."""
    rec = Recorder()
    heard: list[tuple[str, int, int, int]] = []

    def listener(job: SessionJob, n: int, m: int) -> None:
        heard.append((job.plan.docname, n, m, sum(kind == "cell" for kind, name in rec.events)))

    scheduler = LocalScheduler([], 1, prestart=1, session_class=fake_session_class(rec))
    token = cell_listener.set(listener)
    try:
        run_jobs(scheduler, [job("a", cells=3), job("b", cells=1)])
    finally:
        cell_listener.reset(token)
    assert heard == [("a", 1, 3, 0), ("a", 2, 3, 1), ("a", 3, 3, 2), ("b", 1, 1, 3)]


# -- the lost-worker policy every executor shares (execute/attempts.py) ---------------------------


def test_a_session_is_started_twice_at_most_and_its_lost_starts_are_said():
    from livecells.execute.attempts import MAX_ATTEMPTS, RETRIES, Attempts, Start, crash_record, note_lost
    from livecells.model.vocabulary import CellStatus

    assert (MAX_ATTEMPTS, RETRIES) == (2, 1)
    attempts = Attempts()
    assert not attempts.started("t", "w1", "h1")  # the first start
    assert attempts.lost("t") == []
    assert not attempts.started("t", "w2", "h2")  # w1 died: once more elsewhere
    assert attempts.lost("t") == [Start("w1", "h1")]
    assert attempts.started("t", "w3", "h3")  # w2 died too: this start is one too many
    assert attempts.allowed("t") == [Start("w1", "h1"), Start("w2", "h2")]
    record = crash_record(job("page"), attempts.allowed("t"), 1.5, "Ray")
    first = record.cells[0]
    assert first.status == CellStatus.DIED and "the Ray worker running this session died, 2 time(s)" in first.error["evalue"]
    assert "w1 (h1) and w2 (h2)" in first.error["evalue"] and record.provenance.host == "h2"
    assert record.provenance.extra == {"worker": "w2", "attempts": 2, "lost_workers": ["w1", "w2"]}
    assert all(c.status == CellStatus.NOT_RUN for c in record.cells[1:])
    finished = crash_record(job("other"), [], 0.0, "Ray")  # a finished record stands in here
    finished.provenance.extra.clear()
    assert note_lost(finished, []).provenance.extra == {}
    assert note_lost(finished, [Start("w1", "h1")]).provenance.extra == {"attempts": 2, "lost_workers": ["w1"]}
