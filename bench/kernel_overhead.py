"""What codeward adds on top of a Jupyter kernel: round trip of a trivial cell, and start time.

Measures, in one run and on the same kind of kernel (the host's python3 spec,
same transport): plain jupyter_client (execute, drain iopub to idle, read the
reply) against `JupyterExecutor.run`, which also ships the value back through
the codec; and the time to a usable kernel, plain (`start_kernel` +
`wait_for_ready`) against `JupyterExecutor()` (which also installs codeward's
sandbox side). Prints medians and ratios; the target is a round-trip ratio
within 1.2.

    python bench/kernel_overhead.py [--cells 200] [--starts 5] [--transport ipc]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "src"))

from jupyter_client import BlockingKernelClient, KernelManager

from codeward.executors.jupyter import JupyterExecutor, clean_environment

CELL = "1 + 1"


def plain_start(transport: str) -> tuple[KernelManager, BlockingKernelClient]:
    folder = tempfile.mkdtemp(prefix="bench-kernel-")
    ip = os.path.join(folder, "kernel") if transport == "ipc" else "127.0.0.1"
    manager = KernelManager(kernel_name="python3", transport=transport, ip=ip)
    manager.start_kernel(
        env=clean_environment(),
        extra_arguments=["--HistoryManager.enabled=False"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    client = manager.client()
    client.start_channels(hb=False)
    client.wait_for_ready(timeout=60)
    return manager, client


def plain_round_trip(client: BlockingKernelClient) -> None:
    msg_id = client.execute(CELL)
    while True:
        msg = client.get_iopub_msg(timeout=10)
        if (
            msg["parent_header"].get("msg_id") == msg_id
            and msg["msg_type"] == "status"
            and msg["content"]["execution_state"] == "idle"
        ):
            break
    while client.get_shell_msg(timeout=10)["parent_header"].get("msg_id") != msg_id:
        pass


def timed(action: Callable[[], object], times: int) -> list[float]:
    samples = []
    for _ in range(times):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cells", type=int, default=200, help="round trips per side (default 200)")
    parser.add_argument("--starts", type=int, default=5, help="kernel starts per side (default 5)")
    parser.add_argument("--transport", choices=("ipc", "tcp"), default="ipc")
    args = parser.parse_args()

    manager, client = plain_start(args.transport)
    executor = JupyterExecutor(transport=args.transport)
    try:
        for _ in range(20):  # warm both kernels up
            plain_round_trip(client)
            executor.run(CELL)
        plain, ours = [], []
        for _ in range(args.cells):  # interleaved, so both see the same machine load
            plain += timed(lambda: plain_round_trip(client), 1)
            ours += timed(lambda: executor.run(CELL), 1)
    finally:
        executor.close()
        client.stop_channels()
        manager.shutdown_kernel(now=True)

    plain_starts, our_starts = [], []
    for _ in range(args.starts):
        started = time.perf_counter()
        manager, client = plain_start(args.transport)
        plain_starts.append(time.perf_counter() - started)
        client.stop_channels()
        manager.shutdown_kernel(now=True)
        started = time.perf_counter()
        JupyterExecutor(transport=args.transport).close()
        our_starts.append(time.perf_counter() - started)

    trip_plain, trip_ours = statistics.median(plain), statistics.median(ours)
    start_plain, start_ours = statistics.median(plain_starts), statistics.median(our_starts)
    print(f"transport: {args.transport}; cell: {CELL!r}; {args.cells} round trips, {args.starts} starts per side")
    print(f"{'':34}{'median':>12}{'ratio':>10}")
    print(f"{'round trip, plain jupyter_client':34}{trip_plain * 1e3:>10.2f}ms{1.0:>10.2f}")
    print(f"{'round trip, JupyterExecutor.run':34}{trip_ours * 1e3:>10.2f}ms{trip_ours / trip_plain:>10.2f}")
    print(f"{'start, plain jupyter_client':34}{start_plain:>11.3f}s{1.0:>10.2f}")
    print(f"{'start, JupyterExecutor()':34}{start_ours:>11.3f}s{start_ours / start_plain:>10.2f}")
    print(f"target: round-trip ratio <= 1.20 -> {'met' if trip_ours / trip_plain <= 1.2 else 'NOT met'}")


if __name__ == "__main__":
    main()
