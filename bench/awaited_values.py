"""Large values awaited on an event loop: how long the loop is held while one is decoded, and what
decoding it in pieces costs.

A block on the local executor returns a large value, awaited with `arun` while a heartbeat task on
the same loop sleeps 10 ms at a time; the loop's longest hold is how late the heartbeat ever woke.
Measured in the same run, for each value:

- pieces: what `arun` does (the value decoded in pieces on a thread of the offload pool);
- on the loop: the baseline, the whole text to the C parser on the loop's own thread (what `arun`
  did before);
- whole, threaded: the whole text to the C parser on a pool thread: the C parser holds the
  interpreter's lock for the whole text, so this holds the loop about as long;
- blocking: `run`, the sync API, which decodes in place at the C parser's full speed: the block's
  wall time with pieces against it is the price of keeping the loop.

    python bench/awaited_values.py [--repeats 3]

Prints medians of `--repeats` rounds (the machine is shared and its load varies: read the ratios).
The garbage collector's full collections hold every thread whoever allocates; the longest one of
each round is printed beside the hold, as a floor no decoding can go under.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward.executors import LocalExecutor
from codeward.executors.codec import pieces

VALUES = {
    "3M floats": "[i * 0.5 for i in range(3_000_000)]",
    "1M-key int dict": "{i: i for i in range(1_000_000)}",
    "300k records": "[{'id': i, 'name': f'n{i}', 'score': i / 7} for i in range(300_000)]",
}


@contextlib.contextmanager
def _mode(name: str) -> Iterator[None]:
    """Decoding as `name` says, for the rounds within."""
    parse, piece = pieces.parse, pieces.PIECE
    if name == "on the loop":
        pieces.PIECE = 2**62  # every text counts as small: decoded in place
    elif name == "whole, threaded":
        pieces.parse = lambda text, decoder, journal, deadline: decoder.decode(text)
    try:
        yield
    finally:
        pieces.parse, pieces.PIECE = parse, piece


@contextlib.contextmanager
def _longest_collection() -> Iterator[list[float]]:
    longest, started = [0.0], [0.0]

    def timed(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started[0] = time.perf_counter()
        else:
            longest[0] = max(longest[0], time.perf_counter() - started[0])

    gc.callbacks.append(timed)
    try:
        yield longest
    finally:
        gc.callbacks.remove(timed)


async def _awaited(executor: LocalExecutor, code: str) -> tuple[float, float]:
    """The loop's longest hold and the block's wall time."""
    worst = [0.0]
    done = asyncio.Event()

    async def beat() -> None:
        while not done.is_set():
            asked = time.monotonic()
            await asyncio.sleep(0.01)
            worst[0] = max(worst[0], time.monotonic() - asked - 0.01)

    heart = asyncio.create_task(beat())
    started = time.perf_counter()
    await executor.arun(code)
    took = time.perf_counter() - started
    done.set()
    await heart
    return worst[0], took


def _round(mode: str, code: str) -> tuple[float, float, float]:
    with LocalExecutor(timeout_seconds=60, max_value_size=10_000_000) as executor:
        executor.run("0")  # the worker started
        with _mode(mode), _longest_collection() as collection:
            if mode == "blocking":
                started = time.perf_counter()
                executor.run(code)
                return 0.0, time.perf_counter() - started, collection[0]
            held, took = asyncio.run(_awaited(executor, code))
            return held, took, collection[0]


def _medians(rounds: dict[str, list[tuple[float, float, float]]]) -> Callable[[str, int], float]:
    return lambda mode, i: statistics.median(r[i] for r in rounds[mode])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    modes = ("pieces", "on the loop", "whole, threaded", "blocking")
    for label, code in VALUES.items():
        rounds: dict[str, list[tuple[float, float, float]]] = {mode: [] for mode in modes}
        for _ in range(args.repeats):
            for mode in modes:
                rounds[mode].append(_round(mode, code))
        median = _medians(rounds)
        base_hold, base_time = median("on the loop", 0), median("blocking", 1)
        for mode in modes:
            held, took, collection = median(mode, 0), median(mode, 1), median(mode, 2)
            hold = "" if mode == "blocking" else f"loop held {held * 1000:7.1f} ms ({held / base_hold:5.2f}x)  "
            print(
                f"{label:<16} {mode:<16} {hold:<34}block {took:6.2f} s ({took / base_time:5.2f}x blocking)  "
                f"longest collection {collection * 1000:6.1f} ms",
                flush=True,
            )


if __name__ == "__main__":
    main()
