"""What measuring a block's cost adds to its round trip: a trivial block (`x = 1`) with the host's
meter, against the same executor with a meter that reads nothing, measured in this run.

The meter reads /proc (local worker, jupyter kernel) or the container's cgroup (docker) once before
and once after each block; the target is an added cost under 5% of a trivial block's round trip on
the local executor. Blocks alternate between the two, one by one, so that load from other processes
falls on both alike. Prints medians (microseconds) and the ratio.

    python bench/block_usage.py [--blocks 400] [--jupyter] [--docker]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward.executors import LocalExecutor
from codeward.executors.base import Executor
from codeward.executors.local import process
from codeward.executors.metering import Measured, Meter

BLOCK = "x = 1"
TARGET = 1.05


class _Unmetered(Meter):
    """The baseline: a meter that reads nothing."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__("not measured (the benchmark's baseline)")


@contextmanager
def unmetered(executor: Executor) -> Iterator[None]:
    """Run blocks without reading anything for them, for the executor's kind."""
    if isinstance(executor, LocalExecutor):
        tally = process._Tally
        saved = tally.begin, tally.end

        def begin(self: Any, cpu: float | None = None) -> None:
            self.started = time.monotonic()

        def end(self: Any, cpu: float | None = None) -> None:
            self.ended, self.measured = time.monotonic(), Measured()

        tally.begin, tally.end = begin, end  # type: ignore[method-assign]
        try:
            yield
        finally:
            tally.begin, tally.end = saved  # type: ignore[method-assign]
        return
    kind = type(executor)
    saved_meter = kind._meter  # type: ignore[attr-defined]
    kind._meter = lambda self, session: _Unmetered()  # type: ignore[attr-defined]
    try:
        yield
    finally:
        kind._meter = saved_meter  # type: ignore[attr-defined]


def timed(executor: Executor) -> float:
    started = time.perf_counter()
    executor.run(BLOCK)
    return time.perf_counter() - started


def compare(name: str, executor: Executor, blocks: int) -> float:
    """Median round trip with and without the meter, alternating block by block (the order swapped
    each pair) so that drift in the machine's load falls on both; print and return the ratio."""
    for _ in range(20):  # warm up both paths
        executor.run(BLOCK)
        with unmetered(executor):
            executor.run(BLOCK)
    metered: list[float] = []
    baseline: list[float] = []
    for pair in range(blocks):
        if pair % 2:
            metered.append(timed(executor))
        with unmetered(executor):
            baseline.append(timed(executor))
        if not pair % 2:
            metered.append(timed(executor))
    with_meter, without = statistics.median(metered), statistics.median(baseline)
    ratio = with_meter / without
    print(
        f"{name:8} trivial block: {without * 1e6:8.0f} us without the meter, {with_meter * 1e6:8.0f} us with it: "
        f"{ratio:.3f}x (+{(with_meter - without) * 1e6:.0f} us)"
    )
    return ratio


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--blocks", type=int, default=400, help="blocks timed each way (default 400)")
    parser.add_argument("--jupyter", action="store_true", help="also a jupyter kernel")
    parser.add_argument("--docker", action="store_true", help="also a docker sandbox (runc)")
    args = parser.parse_args()
    with LocalExecutor() as local:
        ratio = compare("local", local, args.blocks)
    print(f"local target: within {TARGET:.2f}x: {'met' if ratio <= TARGET else 'missed'}")
    if args.jupyter:
        from codeward.executors.jupyter import JupyterExecutor

        with JupyterExecutor() as jupyter:
            compare("jupyter", jupyter, args.blocks)
    if args.docker:
        from codeward.executors.docker.executor import DockerExecutor

        with DockerExecutor() as docker:
            compare("docker", docker, args.blocks)


if __name__ == "__main__":
    main()
