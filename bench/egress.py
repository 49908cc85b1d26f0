"""What a docker sandbox's egress proxy costs a request, against a sandbox on Docker's bridge network.

Both sandboxes reach an HTTP server on this machine, measured from inside the sandbox (no cell
round trip in the figures), in one run:
- egress: `DockerExecutor(egress=["127.0.0.1:PORT"])`, the server on 127.0.0.1, reached through the
  sandbox's relay, its unix socket and its mitmproxy on the host;
- bridge: `DockerExecutor(network="bridge")`, the server on the bridge's gateway address, reached
  directly (what a sandbox with a network does, with nothing in between).

Prints medians of: a small GET on a fresh connection (urllib, as most code does), a small GET on a
kept-alive connection (http.client, as requests and pip do), and the throughput of one large GET
(MB/s), each side by side with the ratio egress / bridge.

Run: python bench/egress.py [--requests 200] [--large-mb 200] [--repeats 5] [--runtime runsc]
(needs the engine, the image and mitmdump: `codeward egress install`, or CODEWARD_MITMDUMP)

The egress sandbox gets a budget that does not bite (the default allows 50 requests a second,
which a loop of small GETs exceeds): what is measured is the proxy's cost, not its rate limit.
"""

from __future__ import annotations

import argparse
import http.server
import ipaddress
import logging
import statistics
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward.egress.proxy import EgressBudget, mitmdump_path
from codeward.executors import DockerExecutor
from codeward.executors.docker.gvisor import RuntimeUnusable
from codeward.executors.docker.images import engine_client, require_image

_CHUNK = b"x" * (1 << 20)

# Run in the sandbox: timings of `count` small GETs, each on a fresh connection (urllib reads the
# proxy from the environment the egress sandbox has; the bridge sandbox has none).
FRESH = """
import time, urllib.request
_times = []
for _ in range({count}):
    _began = time.perf_counter()
    urllib.request.urlopen({url!r}, timeout=30).read()
    _times.append(time.perf_counter() - _began)
_times
"""

# Small GETs on one kept-alive connection: to the proxy (a request for the absolute URL), or to the server.
KEPT_ALIVE = """
import http.client, time
_connection = http.client.HTTPConnection({host!r}, {port}, timeout=30)
_times = []
for _ in range({count}):
    _began = time.perf_counter()
    _connection.request("GET", {target!r})
    _connection.getresponse().read()
    _times.append(time.perf_counter() - _began)
_connection.close()
_times
"""

LARGE = """
import time, urllib.request
_began = time.perf_counter()
_response = urllib.request.urlopen({url!r}, timeout=300)
_size = 0
while _block := _response.read(1 << 20):
    _size += len(_block)
assert _size == {size}, _size
time.perf_counter() - _began
"""


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keeps connections alive for the kept-alive measure
    disable_nagle_algorithm = True  # headers and body are two writes: no 40 ms wait on a delayed ACK

    def do_GET(self) -> None:
        megabytes = int(self.path.rpartition("/")[2] or 0)
        size = megabytes << 20 if megabytes else 100
        self.send_response(200)
        self.send_header("Content-Length", str(size))
        self.end_headers()
        if not megabytes:
            self.wfile.write(b"x" * 100)
            return
        for _ in range(megabytes):
            self.wfile.write(_CHUNK)

    def log_message(self, *args: object) -> None:
        pass


@contextmanager
def server(address: str) -> Iterator[int]:
    served = http.server.ThreadingHTTPServer((address, 0), Handler)
    thread = threading.Thread(target=served.serve_forever, daemon=True)
    thread.start()
    try:
        yield served.server_address[1]
    finally:
        served.shutdown()
        served.server_close()


def bridge_gateway(client) -> str:  # type: ignore[no-untyped-def]
    config = client.networks.get("bridge").attrs["IPAM"]["Config"][0]
    return str(config.get("Gateway") or next(ipaddress.ip_network(config["Subnet"]).hosts()))


def measure(executor: DockerExecutor, base: str, proxy: tuple[str, int] | None, args: argparse.Namespace) -> dict:
    host, _, port = base.partition("//")[2].partition(":")
    small = f"{base}/0"
    executor.run(FRESH.format(url=small, count=10))  # warm-up: the first connection, imports
    fresh = executor.run(FRESH.format(url=small, count=args.requests)).output
    via = proxy or (host, int(port))
    target = small if proxy else "/0"
    kept = executor.run(KEPT_ALIVE.format(host=via[0], port=via[1], target=target, count=args.requests)).output
    size = args.large_mb << 20
    large = [executor.run(LARGE.format(url=f"{base}/{args.large_mb}", size=size)).output for _ in range(args.repeats)]
    return {
        "fresh": statistics.median(fresh) * 1000,
        "kept": statistics.median(kept) * 1000,
        "throughput": args.large_mb * 1.048576 / statistics.median(large),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="small GETs per measure")
    parser.add_argument("--large-mb", type=int, default=200, help="the size of the large GET, in MiB")
    parser.add_argument("--repeats", type=int, default=5, help="large GETs, of which the median counts")
    parser.add_argument("--runtime", help="the container runtime, such as runsc (default: Docker's)")
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    client = engine_client()
    image = str(require_image(client).id)
    print(f"mitmdump: {mitmdump_path()}")
    gateway = bridge_gateway(client)
    with server("127.0.0.1") as local_port, server(gateway) as bridge_port:
        # A budget that does not bite: the default's 50 requests a second would refuse most of the small GETs.
        budget = EgressBudget(bytes=1 << 40, requests_per_second=1e6)
        listed = [f"127.0.0.1:{local_port}"]
        with DockerExecutor(image=image, runtime=args.runtime, egress=listed, egress_budget=budget) as executor:
            egress = measure(executor, f"http://127.0.0.1:{local_port}", ("127.0.0.1", 3128), args)
        try:
            bridged = DockerExecutor(image=image, runtime=args.runtime, network="bridge")
        except RuntimeUnusable as error:  # a gVisor registered with --network=none has no bridge to compare with
            print(f"bridge not measured: {error}")
            bridge = dict.fromkeys(egress, float("nan"))
        else:
            with bridged as executor:
                bridge = measure(executor, f"http://{gateway}:{bridge_port}", None, args)
    runtime = args.runtime or "runc"
    print(
        f"medians ({runtime}): {args.requests} small GETs (100 bytes) per measure; "
        f"{args.repeats} GETs of {args.large_mb} MiB"
    )
    print(f"  {'':<44} {'egress':>10} {'bridge':>10} {'egress / bridge':>16}")
    rows = [
        ("small GET, fresh connection (ms)", "fresh"),
        ("small GET, kept-alive connection (ms)", "kept"),
        ("large GET throughput (MB/s)", "throughput"),
    ]
    for label, key in rows:
        print(f"  {label:<44} {egress[key]:10.2f} {bridge[key]:10.2f} {egress[key] / bridge[key]:15.2f}x")
    print(
        f"  added per request: {egress['fresh'] - bridge['fresh']:.2f} ms fresh, "
        f"{egress['kept'] - bridge['kept']:.2f} ms kept alive"
    )


if __name__ == "__main__":
    main()
