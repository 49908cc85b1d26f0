"""Many agents on one event loop: agents per second, memory per idle agent, and how long the loop is held.

For each executor asked for (local; docker from a `SandboxPool`) and each count of agents (1, 10,
100), N agents each run one task on one event loop (`await agent.arun(...)`, gathered); each
agent's one block sleeps `--sleep` seconds in its sandbox, and a scripted model writes it (no
provider is reachable here). Measured in the same run:

- agents per second: N / the wall time from the first agent made to the last answer, against two
  baselines: the floor, N coroutines that each `asyncio.sleep` as long (N / sleep: what waiting
  together allows at best), and the same N agents run with the sync API, one thread each
  (`agent.run` in a `ThreadPoolExecutor(N)`: the workaround before `arun`).
- the loop's longest hold: how late a 10 ms heartbeat task on the same loop ever woke.
- memory per idle agent: once every agent has answered and before any is closed, the growth of the
  proportional set size (PSS: a shared page counts its share) of this process and every process it
  started (local workers and their reapers), and for docker the containers' own memory as the
  engine counts it; divided by N. The baseline is one bare interpreter (``python -I -S -c`` that
  sleeps), measured the same way: a local agent's worker is one such interpreter, with codeward's
  policy and confinement loaded.

    python bench/async_agents.py [--executors local,docker] [--counts 1,10,100] [--sleep 1] [--repeats 3]

Prints medians of `--repeats` rounds (the machine is shared and its load varies: read the ratios).
Docker needs the engine and the sandbox image (`codeward images build`); a missing one is skipped
with a line saying why.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from codeward import CodeAgent, ScriptedModel
from codeward.platform.display import AgentLogger, LogLevel


def _script(sleep: float, index: int) -> ScriptedModel:
    return ScriptedModel([f"<code>\nimport time\ntime.sleep({sleep})\nfinal_answer({index})\n</code>"])


def _quiet() -> AgentLogger:
    return AgentLogger(LogLevel.OFF)


def _pss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as rollup:
            for line in rollup:
                if line.startswith("Pss:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _descendants(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = int(stat.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(parent, []).append(int(entry))
    found, pending = [], [root]
    while pending:
        pid = pending.pop()
        found.append(pid)
        pending.extend(children.get(pid, []))
    return found


def _tree_pss() -> int:
    return sum(_pss(pid) for pid in _descendants(os.getpid()))


def _bare_interpreter_pss() -> int:
    process = subprocess.Popen([sys.executable, "-I", "-S", "-c", "import time; time.sleep(30)"])
    try:
        time.sleep(0.5)
        return _pss(process.pid)
    finally:
        process.kill()
        process.wait()


class _Heartbeat:
    def __init__(self) -> None:
        self.latest = 0.0
        self._stop = asyncio.Event()

    async def beat(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            await asyncio.sleep(0.01)
            self.latest = max(self.latest, time.monotonic() - started - 0.01)

    def stop(self) -> None:
        self._stop.set()


class _Containers:
    """The memory the engine counts for the containers of agents still open."""

    def __init__(self) -> None:
        import docker

        self.client = docker.from_env()

    def memory(self, names: list[str]) -> int:
        total = 0
        for name in names:
            stats: Any = self.client.containers.get(name).stats(stream=False)
            total += int(stats.get("memory_stats", {}).get("usage", 0))
        return total


async def _async_round(executor: str, count: int, sleep: float, pool: Any) -> dict[str, float]:
    heart = _Heartbeat()
    beating = asyncio.create_task(heart.beat())
    before = _tree_pss()
    started = time.monotonic()

    async def one(index: int) -> CodeAgent:
        if pool is None:
            agent = CodeAgent(tools=[], model=_script(sleep, index), logger=_quiet())
        else:
            from codeward.executors.docker.executor import DockerExecutor

            sandbox = await DockerExecutor.acreate(pool=pool)
            agent = CodeAgent(tools=[], model=_script(sleep, index), executor=sandbox, logger=_quiet())
        assert await agent.arun("go") == index
        return agent

    agents = await asyncio.gather(*(one(index) for index in range(count)))
    took = time.monotonic() - started
    heart.stop()  # what follows is the bench's own measuring, which blocks
    await beating
    grown = _tree_pss() - before
    if pool is not None:
        names = [str(getattr(agent.executor, "sandbox_id", "")) for agent in agents]
        grown += _Containers().memory([name for name in names if name])
    await asyncio.gather(*(agent.aclose() for agent in agents))
    return {"rate": count / took, "held": heart.latest, "memory": grown / count}


def _threaded_round(executor: str, count: int, sleep: float, pool: Any) -> float:
    def one(index: int) -> None:
        kwargs: dict[str, Any] = {}
        if pool is not None:
            from codeward.executors.docker.executor import DockerExecutor

            kwargs["executor"] = DockerExecutor(pool=pool)
        with CodeAgent(tools=[], model=_script(sleep, index), logger=_quiet(), **kwargs) as agent:
            assert agent.run("go") == index

    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(count) as threads:
        list(threads.map(one, range(count)))
    return count / (time.monotonic() - started)


async def _floor_round(count: int, sleep: float) -> float:
    started = time.monotonic()
    await asyncio.gather(*(asyncio.sleep(sleep) for _ in range(count)))
    return count / (time.monotonic() - started)


def _pool_for(executor: str, count: int) -> Any:
    if executor != "docker":
        return None
    from codeward.executors.docker.pool import SandboxPool

    pool = SandboxPool(size=count)
    pool.wait_until_full(timeout=60 + 3 * count)
    return pool


def _measure(executor: str, count: int, sleep: float, repeats: int) -> None:
    rounds: list[dict[str, float]] = []
    threaded: list[float] = []
    floors: list[float] = []
    for _ in range(repeats):
        pool = _pool_for(executor, count)
        try:
            rounds.append(asyncio.run(_async_round(executor, count, sleep, pool)))
        finally:
            if pool is not None:
                pool.close()
        pool = _pool_for(executor, count)
        try:
            threaded.append(_threaded_round(executor, count, sleep, pool))
        finally:
            if pool is not None:
                pool.close()
        floors.append(asyncio.run(_floor_round(count, sleep)))
    rate = statistics.median(r["rate"] for r in rounds)
    held = statistics.median(r["held"] for r in rounds)
    memory = statistics.median(r["memory"] for r in rounds)
    thread_rate, floor = statistics.median(threaded), statistics.median(floors)
    print(
        f"{executor:<7}{count:>5}  {rate:8.2f}/s  floor {floor:8.2f}/s ({rate / floor:5.2f}x)  "
        f"threads {thread_rate:8.2f}/s ({rate / thread_rate:5.2f}x)  loop held {held * 1000:6.1f} ms  "
        f"{memory / 2**20:7.1f} MiB/idle agent ({memory / BARE:5.2f}x a bare interpreter)",
        flush=True,
    )


BARE = 1.0


def main() -> None:
    global BARE
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--executors", default="local,docker")
    parser.add_argument("--counts", default="1,10,100")
    parser.add_argument("--sleep", type=float, default=1.0)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    BARE = float(_bare_interpreter_pss())
    print(
        f"a bare interpreter (python -I -S): {BARE / 2**20:.1f} MiB PSS; {os.cpu_count()} cores; block sleeps {args.sleep} s"
    )
    for executor in args.executors.split(","):
        if executor == "docker":
            try:
                import docker

                docker.from_env().ping()
            except Exception as error:  # no SDK, no engine: say so and go on
                print(f"docker: skipped ({type(error).__name__}: {error})")
                continue
        for count in (int(n) for n in args.counts.split(",")):
            _measure(executor, count, args.sleep, args.repeats)


if __name__ == "__main__":
    main()
