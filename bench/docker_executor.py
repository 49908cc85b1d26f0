"""How fast the docker executor starts and answers, against the floor Docker itself sets.

Prints, in one run (medians):
- raw `docker run --rm IMAGE python3 -c pass`: the floor for any container;
- a hardened sandbox from `docker run` to its kernel answering (the sandbox layer alone);
- `DockerExecutor` construction to the first result (cold);
- `DockerExecutor(pool=...)` construction to the first result, with the pool full (warm), and
  the same with the agent's tools sent first (the pool readied codeward's side in advance);
- the round trip of a trivial cell in `DockerExecutor`, against the same cell in the local
  `JupyterExecutor` (same session code, kernel on the host);
- smolagents' DockerExecutor (when installed) with its kernel-gateway image built on ours, offline;
- the same cold start, warm-pool start and round trip under gVisor (`runtime="runsc"`, where the
  engine has it), beside runc's.

Run: python bench/docker_executor.py [--starts 7] [--cells 300]   (needs the engine and the image)
"""

from __future__ import annotations

import argparse
import logging
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward.executors import DockerExecutor, SandboxPool
from codeward.executors.docker.gvisor import GVISOR, runtime_problem
from codeward.executors.docker.images import build_image, content_label, engine_client, find_image, require_image
from codeward.executors.docker.sandbox import start_kernel_container
from codeward.executors.jupyter import JupyterExecutor
from codeward.platform.tools import FinalAnswerTool


def seconds(action: Callable[[], object]) -> float:
    began = time.perf_counter()
    action()
    return time.perf_counter() - began


def raw_docker_run(image: str) -> float:
    return seconds(lambda: subprocess.run(["docker", "run", "--rm", image, "python3", "-c", "pass"], check=True))


def sandbox_ready(client, image: str) -> float:  # type: ignore[no-untyped-def]
    began = time.perf_counter()
    sandbox = start_kernel_container(client, image)
    ready = time.perf_counter() - began
    sandbox.remove()
    return ready


def first_result(make: Callable[[], DockerExecutor]) -> float:
    began = time.perf_counter()
    executor = make()
    assert executor.run("6 * 7").output == 42
    elapsed = time.perf_counter() - began
    executor.close()
    return elapsed


def warm_first_result(pool: SandboxPool) -> float:
    pool.wait_until_full()
    return first_result(lambda: DockerExecutor(pool=pool))


def with_tools(executor: DockerExecutor) -> DockerExecutor:
    """An agent's executor as it starts: the tools are sent before the first cell."""
    executor.send_tools({"final_answer": FinalAnswerTool()})
    return executor


def warm_first_result_with_tools(pool: SandboxPool) -> float:
    pool.wait_until_full()
    return first_result(lambda: with_tools(DockerExecutor(pool=pool)))


def round_trips(executor: JupyterExecutor, cells: int) -> list[float]:
    for _ in range(20):  # warm-up
        executor.run("1")
    return [seconds(lambda: executor.run("1")) for _ in range(cells)]


# smolagents' own Dockerfile starts FROM a registry image; this one installs the same kernel
# gateway on our sandbox image, from wheels downloaded on the host, so it builds offline.
SMOLAGENTS_DOCKERFILE = """\
ARG BASE_IMAGE
FROM ${BASE_IMAGE}
USER root
COPY . /build/
RUN /opt/sandbox/bin/python "$(ls /build/wheels/pip-*.whl)/pip" install --no-index --find-links /build/wheels \\
        -r /build/requirements.txt && rm -rf /build
EXPOSE 8888
CMD ["jupyter", "kernelgateway", "--KernelGatewayApp.ip=0.0.0.0", "--KernelGatewayApp.port=8888"]
"""


def smolagents_image(client, sandbox_image: str) -> str:  # type: ignore[no-untyped-def]
    """smolagents' kernel-gateway image on our base; built once, then found by its content label."""
    with tempfile.TemporaryDirectory() as folder:
        tree = Path(folder)
        (tree / "Dockerfile").write_text(SMOLAGENTS_DOCKERFILE)
        (tree / "requirements.txt").write_text("pip==26.3\njupyter_kernel_gateway\n")
        image = find_image(client, content_label(tree)) or build_image(
            client, base=sandbox_image, folder=tree, repository="codeward-bench-smolagents"
        )
    return str(image.id)


def smolagents_executor(image: str):  # type: ignore[no-untyped-def]
    from smolagents.monitoring import AgentLogger, LogLevel
    from smolagents.remote_executors import DockerExecutor as SmolagentsDockerExecutor

    return SmolagentsDockerExecutor(
        additional_imports=[], logger=AgentLogger(level=LogLevel.OFF), image_name=image, build_new_image=False
    )


def smolagents_first_result(image: str) -> float:
    began = time.perf_counter()
    executor = smolagents_executor(image)
    try:
        assert executor("6 * 7").output in (42, "42")  # smolagents returns the text of the value
        return time.perf_counter() - began
    finally:
        executor.delete()


def smolagents_round_trips(image: str, cells: int) -> list[float]:
    executor = smolagents_executor(image)
    try:
        for _ in range(20):
            executor("1")
        return [seconds(lambda: executor("1")) for _ in range(cells)]
    finally:
        executor.delete()


def gvisor_beside_runc(client, image: str, starts: int, cells: int, runc: dict[str, float]) -> None:  # type: ignore[no-untyped-def]
    """gVisor's cold start, warm-pool start and round trip, and each against runc's (`runc`, by the same names)."""
    print(f"gVisor (runtime={GVISOR!r})")
    problem = runtime_problem(client.info().get("Runtimes") or {}, GVISOR)
    if problem:
        print(f"  not measured: {problem.detail}")
        return
    gvisor = {
        "cold first result": report(
            "DockerExecutor: construction to first result (cold)",
            [first_result(lambda: DockerExecutor(image=image, runtime=GVISOR)) for _ in range(starts)],
        )
    }
    with SandboxPool(size=2, image=image, runtime=GVISOR) as pool:
        gvisor["warm-pool first result"] = report(
            "DockerExecutor(pool=...): construction to first result", [warm_first_result(pool) for _ in range(starts)]
        )
    with DockerExecutor(image=image, runtime=GVISOR) as executor:
        gvisor["round trip"] = report("DockerExecutor: trivial cell round trip", round_trips(executor, cells))
    for name, value in gvisor.items():
        print(f"  gVisor / runc, {name:<32} {value / runc[name]:6.2f}x")


def report(label: str, samples: list[float]) -> float:
    value = statistics.median(samples) * 1000
    print(f"  {label:<62} {value:9.1f} ms", flush=True)
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--starts", type=int, default=7)
    parser.add_argument("--cells", type=int, default=300)
    args = parser.parse_args()
    logging.disable(logging.WARNING)
    client = engine_client()
    image = str(require_image(client).id)
    subprocess.run(["docker", "run", "--rm", image, "true"], check=True)  # page the image in

    print(f"medians over {args.starts} starts and {args.cells} cells")
    raw = report("raw docker run --rm IMAGE python3 -c pass", [raw_docker_run(image) for _ in range(args.starts)])
    ready = report("sandbox: docker run to kernel ready", [sandbox_ready(client, image) for _ in range(args.starts)])
    cold_samples = [first_result(lambda: DockerExecutor(image=image)) for _ in range(args.starts)]
    cold = report("DockerExecutor: construction to first result (cold)", cold_samples)
    with SandboxPool(size=2, image=image) as pool:
        warm = report(
            "DockerExecutor(pool=...): construction to first result",
            [warm_first_result(pool) for _ in range(args.starts)],
        )
        warm_tools = report(
            "DockerExecutor(pool=...) + send_tools: construction to first result",
            [warm_first_result_with_tools(pool) for _ in range(args.starts)],
        )
    with DockerExecutor(image=image) as executor:
        docker_trip = report("DockerExecutor: trivial cell round trip", round_trips(executor, args.cells))
    with JupyterExecutor() as executor:
        local_trip = report(
            "JupyterExecutor (kernel on the host): trivial cell round trip", round_trips(executor, args.cells)
        )

    try:
        import smolagents  # noqa: F401
        import websocket  # noqa: F401 (websocket-client: smolagents' DockerExecutor needs it, its extra installs it)
    except ImportError as missing:
        smolagents_cold = smolagents_trip = None
        print(f"  smolagents' DockerExecutor was not measured: {missing}")
    else:
        peer = smolagents_image(client, image)
        smolagents_cold = report(
            "smolagents DockerExecutor: construction to first result",
            [smolagents_first_result(peer) for _ in range(args.starts)],
        )
        smolagents_trip = report(
            "smolagents DockerExecutor: trivial cell round trip", smolagents_round_trips(peer, args.cells)
        )

    print("ratios")
    print(f"  sandbox ready / raw docker run                 {ready / raw:6.2f}x")
    print(f"  DockerExecutor cold first result / raw run     {cold / raw:6.2f}x   (target: within 3x)")
    print(f"  warm-pool first result / raw run               {warm / raw:6.2f}x")
    print(f"  docker round trip / local jupyter round trip   {docker_trip / local_trip:6.2f}x")
    if smolagents_cold is not None and smolagents_trip is not None:
        print(f"  smolagents cold first result / ours            {smolagents_cold / cold:6.2f}x   (target: above 1x)")
        print(
            f"  smolagents round trip / ours                   {smolagents_trip / docker_trip:6.2f}x   (target: above 1x)"
        )
    print("absolute targets")
    print(f"  warm-pool first result {warm:7.1f} ms   (target: under 50 ms: {'met' if warm < 50 else 'missed'})")
    print(
        f"  warm-pool first result with tools {warm_tools:7.1f} ms   "
        f"(target: under 50 ms: {'met' if warm_tools < 50 else 'missed'})"
    )
    print(
        f"  trivial cell round trip {docker_trip:6.1f} ms   (target: under 5 ms: {'met' if docker_trip < 5 else 'missed'})"
    )
    runc = {"cold first result": cold, "warm-pool first result": warm, "round trip": docker_trip}
    gvisor_beside_runc(client, image, args.starts, args.cells, runc)


if __name__ == "__main__":
    main()
