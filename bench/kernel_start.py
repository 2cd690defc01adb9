"""How long a session waits for a ready kernel with its framework imported: fresh vs forked.

Run: ``.venv/bin/python bench/kernel_start.py [--runs N] [--framework pytorch]``. Both are
measured in the same run, through :class:`livecells.execute.kernels.session.KernelSession` (start() returns once
the kernel answered and the preload is imported). The fork server's template is started and
warmed before the clock runs, as a build does once per framework.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "ext"))

import benchlib  # noqa: E402

from livecells.config import LivecellsConfig
from livecells.execute.forkserver.server import ForkServer  # noqa: E402
from livecells.execute.kernels.session import KernelSession  # noqa: E402
from livecells.model.frameworks import FrameworkSpec  # noqa: E402


async def ready_time(
    framework: FrameworkSpec, cwd: str, factory: Callable[..., Any] | None
) -> float:
    """Seconds from asking for a session to a kernel that can run the page's first cell."""
    started = time.perf_counter()
    async with KernelSession(framework, cwd=cwd, manager_factory=factory) as session:
        elapsed = time.perf_counter() - started
        result = await session.run_cell("1 + 1", 30)
        assert result.status == "ok", result
    return elapsed


async def main(framework: FrameworkSpec, runs: int, json_path: str | None) -> None:
    with tempfile.TemporaryDirectory() as cwd, ForkServer() as server:
        server.prepare(framework)
        await ready_time(framework, cwd, server.manager)  # template import + first fork: once
        fresh, forked = [], []
        for _ in range(runs):  # interleaved, so that a busy moment hurts both alike
            fresh.append(await ready_time(framework, cwd, None))
            forked.append(await ready_time(framework, cwd, server.manager))
        if server.fallbacks:
            print(f"fork server fell back: {server.fallbacks}")
    a, b = statistics.median(fresh), statistics.median(forked)
    print(f"framework {framework.name} (preload {list(framework.preload)}), {runs} runs each")
    for label, median, times in (("fresh kernel + import", a, fresh), ("forked kernel", b, forked)):
        print(f"{label:22} median {median:.3f} s  (all: {' '.join(f'{t:.3f}' for t in times)})")
    print(f"ratio fresh/forked: {a / b:.1f}x")
    benchlib.write_json(json_path, {
        "machine": benchlib.machine(), "framework": framework.name, "runs": runs,
        "fresh": fresh, "forked": forked, "ratio": a / b,
    })


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--framework", default="pytorch", help="pytorch or mxnet")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args()
    asyncio.run(main(LivecellsConfig().frameworks[args.framework], args.runs, args.json))
