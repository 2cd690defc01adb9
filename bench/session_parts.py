"""What one light session costs, part by part: a forked kernel's start, its cells, its shutdown.

Run: ``.venv/bin/python bench/session_parts.py [--sessions 12]``. Runs the sessions of
``book.py``'s light book (5 cells per framework, as a build does) one after another through
:class:`livecells.execute.kernels.session.KernelSession`, with kernels forked from the build's templates
(started and warmed before the clock runs), and for comparison the same cells sent as bare
``execute`` requests to a kernel of the same template (a raw jupyter_client round trip: wait for
idle and the reply, nothing else), in sessions of their own, alternating with livecells' (a
kernel's first cells pay for the framework's first operations). Prints, per framework, the
median of: start (asked for a kernel until it can run the first cell), the 5 cells, shutdown
(until the kernel is dead and cleaned up), the kernel's own CPU time up to its last cell, and
the raw round trips of the same 5 cells. A build starts the kernels of the next sessions in
parallel, two at a time on 2 cores, in the gap before a session's first cell: the start counts
about half in a build's time.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from typing import Any

import benchlib
from benchlib import median
from book import FRAMEWORKS, TEMPLATES

from livecells.config import LivecellsConfig
from livecells.execute.forkserver.server import ForkServer
from livecells.execute.kernels.session import KernelSession
from livecells.model.frameworks import FrameworkSpec

CPU = "import resource as _r; _u = _r.getrusage(_r.RUSAGE_SELF); print(_u.ru_utime + _u.ru_stime)"


async def raw_cells(session: KernelSession, codes: list[str]) -> float:
    """Seconds for ``codes`` as bare execute requests on ``session``'s client."""
    started = time.perf_counter()
    for code in codes:
        await benchlib.raw_execute(session.kc, code, timeout=30)
    return time.perf_counter() - started


async def one_session(
    framework: FrameworkSpec, cwd: str, server: ForkServer, page: int, raw: bool = False
) -> dict[str, float]:
    """One session's parts; ``raw``: its cells as bare requests (only their time is kept)."""
    codes = [code.format(k=page) for code in TEMPLATES[framework.name]]
    started = time.perf_counter()
    session = KernelSession(framework, cwd=cwd, manager_factory=server.manager)
    await session.start()
    ready = time.perf_counter()
    if raw:
        found = {"raw_cells": await raw_cells(session, codes)}
    else:
        for number, code in enumerate(codes, 1):
            result = await session.run_cell(code, 60, last=number == len(codes))
            if result.status != "ok":
                raise SystemExit(f"a light cell failed: {result}")
        cells = time.perf_counter() - ready
        cpu = float((await session.run_cell(CPU, 30)).outputs[0]["text"])
        found = {"start": ready - started, "cells": cells, "kernel_cpu": cpu}
    stopping = time.perf_counter()
    await session.shutdown()
    if not raw:
        found["shutdown"] = time.perf_counter() - stopping
    return found


async def main(sessions: int, json_path: str | None) -> None:
    frameworks = [LivecellsConfig().frameworks[name] for name in FRAMEWORKS]
    rows: dict[str, list[dict[str, float]]] = {fw.name: [] for fw in frameworks}
    with tempfile.TemporaryDirectory() as cwd, ForkServer() as server:
        await asyncio.gather(*(server.ready(fw) for fw in frameworks))
        for fw in frameworks:  # the first fork of each template: not counted
            await one_session(fw, cwd, server, 0)
        for page in range(1, sessions + 1):  # interleaved: a busy moment hurts both alike
            for fw in frameworks:
                for raw in (False, True) if page % 2 else (True, False):
                    rows[fw.name].append(await one_session(fw, cwd, server, page, raw))
        if server.fallbacks:
            raise SystemExit(f"the fork server fell back: {server.fallbacks}")
    info = benchlib.machine()
    print(f"machine: {benchlib.describe(info)}")
    print(f"{sessions} light sessions per framework (5 cells each), forked kernels; medians, ms")
    keys = ("start", "cells", "shutdown", "kernel_cpu", "raw_cells")
    table: list[list[Any]] = []
    for name, found in rows.items():
        table.append([name, *(round(1000 * median([r[k] for r in found if k in r]), 1) for k in keys)])
    header = ["framework", "start", "5 cells", "shutdown", "kernel CPU", "5 raw round trips"]
    print(benchlib.table(table, header))
    benchlib.write_json(json_path, {"machine": info, "sessions": sessions, "rows": rows})


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=12, help="sessions per framework")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    asyncio.run(main(args.sessions, args.json))
