"""What codeward adds on top of the E2B SDK, and when a run that overruns really stops.

Measures, in one run, against the local server that speaks E2B's protocol (so
the network is loopback and the numbers show the SDK's and codeward's own costs):

- round trip of a trivial cell: the SDK's `run_code` (baseline) against
  `E2BExecutor.run`, which also brings the value back through the codec;
- time to a usable context: the SDK's `create_code_context` (baseline) against
  `E2BExecutor()`, which also installs codeward's sandbox side (both closed again);
- time until a cell that sleeps past a limit of `--limit` seconds is given up:
  the SDK's own `timeout` (baseline; E2B#1881: it fires at twice the limit)
  against `E2BExecutor`, whose limit is enforced inside the sandbox.

Prints medians and ratios against the baselines.

    python bench/e2b_overhead.py [--cells 200] [--starts 5] [--overruns 3] [--limit 1.0]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from e2b import TimeoutException
from e2b_code_interpreter import Sandbox

from codeward.executors.base import ExecutionTimeout
from codeward.executors.e2b import E2BExecutor
from tests.e2b_server import E2BServer

CELL = "1 + 1"
SLEEPER = "import time\ntime.sleep(60)"


def timed(action: Callable[[], object]) -> float:
    started = time.perf_counter()
    action()
    return time.perf_counter() - started


def expect(error: type[BaseException], action: Callable[[], object]) -> Callable[[], None]:
    def run() -> None:
        try:
            action()
        except error:
            return
        raise AssertionError(f"expected {error.__name__}")

    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200, help="round trips per side (default 200)")
    parser.add_argument("--starts", type=int, default=5, help="context starts per side (default 5)")
    parser.add_argument("--overruns", type=int, default=3, help="overrunning cells per side (default 3)")
    parser.add_argument("--limit", type=float, default=1.0, help="the time limit in seconds (default 1.0)")
    args = parser.parse_args()

    with E2BServer() as server:
        sandbox = Sandbox.create(**server.connection)
        context = sandbox.create_code_context()
        executor = E2BExecutor(timeout_seconds=args.limit, connection=server.connection)
        try:
            for _ in range(20):  # warm both sides up
                sandbox.run_code(CELL, context=context)
                executor.run(CELL)
            plain, ours = [], []
            for _ in range(args.cells):  # interleaved, so both see the same machine load
                plain.append(timed(lambda: sandbox.run_code(CELL, context=context)))
                ours.append(timed(lambda: executor.run(CELL)))
            sdk_stop, our_stop = [], []
            for _ in range(args.overruns):
                sdk = expect(TimeoutException, lambda: sandbox.run_code(SLEEPER, context=context, timeout=args.limit))
                sdk_stop.append(timed(sdk))
                our_stop.append(timed(expect(ExecutionTimeout, lambda: executor.run(SLEEPER))))
        finally:
            executor.close()
        plain_starts, our_starts = [], []
        for _ in range(args.starts):
            plain_starts.append(timed(lambda: sandbox.remove_code_context(sandbox.create_code_context())))
            our_starts.append(timed(lambda: E2BExecutor(connection=server.connection).close()))

    trip_plain, trip_ours = statistics.median(plain), statistics.median(ours)
    stop_sdk, stop_ours = statistics.median(sdk_stop), statistics.median(our_stop)
    print(
        f"local E2B protocol server; cell {CELL!r}: {args.cells} round trips per side; "
        f"limit {args.limit:g} s: {args.overruns} overruns per side"
    )
    print(f"{'':38}{'median':>12}{'ratio':>10}")
    print(f"{'round trip, SDK run_code':38}{trip_plain * 1e3:>10.2f}ms{1.0:>10.2f}")
    print(f"{'round trip, E2BExecutor.run':38}{trip_ours * 1e3:>10.2f}ms{trip_ours / trip_plain:>10.2f}")
    start_plain, start_ours = statistics.median(plain_starts), statistics.median(our_starts)
    print(f"{'context start+stop, SDK':38}{start_plain:>11.3f}s{1.0:>10.2f}")
    print(f"{'E2BExecutor() + close()':38}{start_ours:>11.3f}s{start_ours / start_plain:>10.2f}")
    print(f"{'overrun given up, SDK timeout':38}{stop_sdk:>11.3f}s{stop_sdk / args.limit:>10.2f}  (x limit)")
    print(f"{'overrun given up, E2BExecutor':38}{stop_ours:>11.3f}s{stop_ours / args.limit:>10.2f}  (x limit)")


if __name__ == "__main__":
    main()
