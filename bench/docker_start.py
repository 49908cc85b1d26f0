"""How fast a hardened kernel sandbox starts and answers, against the floor Docker itself sets.

Prints, in one run:
- raw `docker run --rm IMAGE python3 -c pass` (the CLI: the floor for any container);
- a hardened sandbox from `docker run` to kernel ready, and to the first result of a cell;
- the median round trip of a trivial cell over the ipc sockets, against the same cell in a
  local ipykernel on this host (jupyter_client's default TCP on loopback).

Run: python bench/docker_start.py [--starts 7] [--cells 300]   (needs the engine and the image)
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from jupyter_client.blocking.client import BlockingKernelClient
from jupyter_client.manager import start_new_kernel

from codeward.executors.docker_images import engine_client, require_image
from codeward.executors.docker_sandbox import start_kernel_container


def median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def raw_docker_run(image: str) -> float:
    began = time.perf_counter()
    subprocess.run(["docker", "run", "--rm", image, "python3", "-c", "pass"], check=True, capture_output=True)
    return time.perf_counter() - began


def first_result(client: BlockingKernelClient) -> None:
    reply = client.execute_interactive("6 * 7", output_hook=lambda message: None, timeout=30)
    assert reply["content"]["status"] == "ok", reply


def sandbox_start(docker_client, image: str) -> tuple[float, float]:  # type: ignore[no-untyped-def]
    """Seconds from start to kernel ready, and to the first result of a cell."""
    began = time.perf_counter()
    sandbox = start_kernel_container(docker_client, image)
    ready = time.perf_counter() - began
    try:
        first_result(sandbox.client())
        return ready, time.perf_counter() - began
    finally:
        sandbox.remove()


def round_trips(client: BlockingKernelClient, cells: int) -> list[float]:
    for _ in range(20):  # warm-up
        first_result(client)
    samples = []
    for _ in range(cells):
        began = time.perf_counter()
        first_result(client)
        samples.append(time.perf_counter() - began)
    return samples


def timed(label: str, action: Callable[[], list[float]]) -> float:
    value = median_ms(action())
    print(f"  {label:<58} {value:9.1f} ms", flush=True)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=7)
    parser.add_argument("--cells", type=int, default=300)
    args = parser.parse_args()
    docker_client = engine_client()
    image = require_image(docker_client).id
    raw_docker_run(image)  # warm the image's layers into the page cache

    print(f"medians over {args.starts} starts and {args.cells} cells")
    raw = timed(
        "raw docker run --rm IMAGE python3 -c pass", lambda: [raw_docker_run(image) for _ in range(args.starts)]
    )
    starts = [sandbox_start(docker_client, image) for _ in range(args.starts)]
    ready = timed("hardened sandbox: start to kernel ready", lambda: [r for r, _ in starts])
    first = timed("hardened sandbox: start to first result", lambda: [f for _, f in starts])

    sandbox = start_kernel_container(docker_client, image)
    try:
        in_container = timed(
            "trivial cell round trip, container over ipc", lambda: round_trips(sandbox.client(), args.cells)
        )
    finally:
        sandbox.remove()
    manager, local_client = start_new_kernel()
    try:
        local = timed(
            "trivial cell round trip, local ipykernel over tcp", lambda: round_trips(local_client, args.cells)
        )
    finally:
        local_client.stop_channels()
        manager.shutdown_kernel(now=True)

    print("ratios")
    print(f"  start to kernel ready / raw docker run    {ready / raw:6.2f}x")
    print(f"  start to first result / raw docker run    {first / raw:6.2f}x")
    print(f"  container round trip / local round trip   {in_container / local:6.2f}x")


if __name__ == "__main__":
    main()
