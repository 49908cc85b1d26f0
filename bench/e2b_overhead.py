"""What codeward adds on top of the E2B SDK, and when a run that overruns really stops.

Measures, in one run, against the local server that speaks E2B's protocol (so
the network is loopback and the numbers show the SDK's and codeward's own costs):

- round trip of a trivial cell: the SDK's `run_code` (baseline) against
  `E2BExecutor.run`, which also brings the value back through the codec;
- time to a usable context: the SDK's `create_code_context` (baseline) against
  `E2BExecutor()`, which also installs codeward's sandbox side (both closed again);
- time until a cell that sleeps past a limit of `--limit` seconds is given up:
  the SDK's own `timeout` (baseline; E2B#1881: it fires at twice the limit)
  against `E2BExecutor`, whose limit is enforced inside the sandbox;
- a tool call from the code: with ``tools_mode="inline"`` (baseline: the tool
  runs inside the sandbox) against ``tools_mode="host"`` (the request printed,
  the tool run on the host, the answer written through envd's file API), both
  as one call per cell and as `--calls` calls in one cell (the time per call).

Prints medians and ratios against the baselines.

    python bench/e2b_overhead.py [--cells 200] [--starts 5] [--overruns 3] [--limit 1.0] [--calls 50]
"""

from __future__ import annotations

import argparse
import functools
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
from tests.cli.sample_tools import double
from tests.e2b_server import E2BServer

CELL = "1 + 1"
SLEEPER = "import time\ntime.sleep(60)"
CALL = "double(21)"


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


def tool_calls(server: E2BServer, cells: int, calls: int) -> dict[str, tuple[float, float]]:
    """Per mode: the median round trip of a cell with one tool call, and the median time per call
    in cells of `calls` calls; the modes interleaved, so both see the same machine load."""
    executors = {mode: E2BExecutor(tools_mode=mode, connection=server.connection) for mode in ("inline", "host")}
    loop = f"for _ in range({calls}):\n    double(21)"
    try:
        for executor in executors.values():
            executor.send_tools({"double": double})
            for _ in range(20):
                executor.run(CALL)
        single: dict[str, list[float]] = {mode: [] for mode in executors}
        many: dict[str, list[float]] = {mode: [] for mode in executors}
        for _ in range(cells):
            for mode, executor in executors.items():
                single[mode].append(timed(functools.partial(executor.run, CALL)))
        for _ in range(max(cells // 10, 5)):
            for mode, executor in executors.items():
                many[mode].append(timed(functools.partial(executor.run, loop)) / calls)
    finally:
        for executor in executors.values():
            executor.close()
    return {mode: (statistics.median(single[mode]), statistics.median(many[mode])) for mode in executors}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200, help="round trips per side (default 200)")
    parser.add_argument("--starts", type=int, default=5, help="context starts per side (default 5)")
    parser.add_argument("--overruns", type=int, default=3, help="overrunning cells per side (default 3)")
    parser.add_argument("--limit", type=float, default=1.0, help="the time limit in seconds (default 1.0)")
    parser.add_argument("--calls", type=int, default=50, help="tool calls per cell for the time per call (default 50)")
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
        calls = tool_calls(server, args.cells, args.calls)

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
    (inline_cell, inline_call), (host_cell, host_call) = calls["inline"], calls["host"]
    print(f"{'cell with one tool call, inline':38}{inline_cell * 1e3:>10.2f}ms{1.0:>10.2f}")
    print(f"{'cell with one tool call, host':38}{host_cell * 1e3:>10.2f}ms{host_cell / inline_cell:>10.2f}")
    print(f"{f'per call ({args.calls} in a cell), inline':38}{inline_call * 1e3:>10.3f}ms{1.0:>10.2f}")
    print(f"{f'per call ({args.calls} in a cell), host':38}{host_call * 1e3:>10.3f}ms{host_call / inline_call:>10.2f}")


if __name__ == "__main__":
    main()
