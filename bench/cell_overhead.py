"""Per-cell overhead: livecells' KernelSession.run_cell vs a raw jupyter_client round trip.

    .venv/bin/python bench/cell_overhead.py [--cells 200 --repeat 5 --transport tcp]

Each round starts a fresh python3 kernel for each side and runs ``--cells`` trivial cells on it
(after a few warm-up cells that do not count): livecells through ``KernelSession.run_cell`` (its
timing hooks, output collection, the time read back with the reply); the raw baseline as
``execute`` on a blocking client, then waiting for the kernel's idle status and the reply; and,
for reference, the same raw round trip on an asyncio client (what KernelSession is built on).
Prints ms per cell, kernel start-up times and the ratios; the median over ``--repeat`` rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from typing import Any

import benchlib
from benchlib import median
from jupyter_client.manager import AsyncKernelManager, KernelManager

from livecells.execute.kernels.session import KernelSession
from livecells.model.frameworks import FrameworkSpec

CODE = "x = 1"
WARMUP = 5


def raw_round(cells: int, transport: str) -> tuple[float, float]:
    """(start-up s, s per cell) of a raw kernel on a blocking client."""
    km = KernelManager(kernel_name="python3")
    km.transport = transport
    started = time.perf_counter()
    km.start_kernel(env=benchlib.child_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    kc = km.blocking_client()
    try:
        kc.start_channels()
        kc.wait_for_ready(timeout=120)
        startup = time.perf_counter() - started

        def one() -> None:
            msg_id = kc.execute(CODE)
            while True:
                msg = kc.get_iopub_msg(timeout=60)
                if (
                    msg["parent_header"].get("msg_id") == msg_id
                    and msg["msg_type"] == "status"
                    and msg["content"]["execution_state"] == "idle"
                ):
                    break
            while kc.get_shell_msg(timeout=60)["parent_header"].get("msg_id") != msg_id:
                pass

        for _ in range(WARMUP):
            one()
        t0 = time.perf_counter()
        for _ in range(cells):
            one()
        return startup, (time.perf_counter() - t0) / cells
    finally:
        kc.stop_channels()
        km.shutdown_kernel(now=True)


async def raw_async_round(cells: int, transport: str) -> tuple[float, float]:
    """The same round trip on an asyncio client, the kind KernelSession is built on."""
    km = AsyncKernelManager(kernel_name="python3")
    km.transport = transport
    started = time.perf_counter()
    await km.start_kernel(
        env=benchlib.child_environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    kc = km.client()
    try:
        kc.start_channels()
        await kc.wait_for_ready(timeout=120)
        startup = time.perf_counter() - started

        async def one() -> None:
            await benchlib.raw_execute(kc, CODE)

        for _ in range(WARMUP):
            await one()
        t0 = time.perf_counter()
        for _ in range(cells):
            await one()
        return startup, (time.perf_counter() - t0) / cells
    finally:
        kc.stop_channels()
        await km.shutdown_kernel(now=True)


async def livecells_round(cells: int) -> tuple[float, float]:
    """(start-up s, s per cell) of a KernelSession, hooks installed, nothing preloaded."""
    spec = FrameworkSpec(name="python", label="Python", kernel="python3")
    session = KernelSession(spec, cwd=".")
    started = time.perf_counter()
    try:
        await session.start()
        startup = time.perf_counter() - started
        for _ in range(WARMUP):
            await session.run_cell(CODE, 60)
        t0 = time.perf_counter()
        for _ in range(cells):
            result = await session.run_cell(CODE, 60)
            if result.status != "ok" or result.time is None:
                raise SystemExit(f"a trivial cell did not run cleanly: {result}")
        return startup, (time.perf_counter() - t0) / cells
    finally:
        await session.shutdown()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200, help="timed cells per kernel")
    parser.add_argument("--repeat", type=int, default=5, help="rounds (a fresh kernel each, per side)")
    parser.add_argument("--transport", choices=("tcp", "ipc"), default="tcp",
                        help="the raw client's transport (jupyter_client's default: tcp; livecells uses ipc)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures as JSON")
    args = parser.parse_args(argv)
    info = benchlib.machine()

    sides = ("raw", "raw-async", "livecells")
    figures: dict[str, dict[str, list[float]]] = {s: {"startup": [], "per_cell": []} for s in sides}
    for rep in range(args.repeat):
        for side in sides if rep % 2 == 0 else sides[::-1]:
            if side == "raw":
                startup, per_cell = raw_round(args.cells, args.transport)
            elif side == "raw-async":
                startup, per_cell = asyncio.run(raw_async_round(args.cells, args.transport))
            else:
                startup, per_cell = asyncio.run(livecells_round(args.cells))
            figures[side]["startup"].append(startup)
            figures[side]["per_cell"].append(per_cell)
            print(f"  round {rep + 1}, {side}: start {startup:.3f} s, "
                  f"{per_cell * 1000:.2f} ms/cell", flush=True)

    raw, live = figures["raw"], figures["livecells"]
    ratio = median(live["per_cell"]) / median(raw["per_cell"])
    extra = (median(live["per_cell"]) - median(raw["per_cell"])) * 1000
    ratio_async = median(live["per_cell"]) / median(figures["raw-async"]["per_cell"])
    labels = {
        "raw": f"raw jupyter_client, blocking ({args.transport})",
        "raw-async": f"raw jupyter_client, asyncio ({args.transport})",
        "livecells": "livecells KernelSession (ipc)",
    }
    rows: list[list[Any]] = [
        [
            labels[s],
            median(figures[s]["per_cell"]) * 1000,
            min(figures[s]["per_cell"]) * 1000,
            median(figures[s]["startup"]),
        ]
        for s in sides
    ]
    print()
    print(f"machine: {benchlib.describe(info)}")
    print(f"{args.cells} cells of {CODE!r} per kernel after {WARMUP} warm-up cells; "
          f"median of {args.repeat} rounds")
    print()
    print(benchlib.table(rows, ["client", "ms/cell", "best ms/cell", "kernel start s"]))
    print()
    print(f"livecells / raw (blocking) per cell: {ratio:.2f} ({extra:+.2f} ms/cell)")
    print(f"livecells / raw (asyncio) per cell: {ratio_async:.2f}")
    best = min(live["per_cell"]) / min(raw["per_cell"])
    print(f"best rounds, livecells / raw (blocking): {best:.2f}")
    benchlib.write_json(args.json, {"machine": info, "cells": args.cells, "transport": args.transport,
                                    "figures": figures, "ratio": ratio, "ratio_async": ratio_async})
    return 0


if __name__ == "__main__":
    sys.exit(main())
