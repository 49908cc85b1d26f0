"""Jobs per second for `codeward batch`: 100 short jobs at concurrency 1, 2 and 4.

Each job is a scripted two-step run (a little arithmetic, then the answer) in a
sandbox of its own. Measured in the same run, for comparison:

- baseline: the same jobs run in this process one after another (`run_job` in
  a loop): no worker processes, no pipes, the floor of what a job costs;
- threads: the same in-process jobs on a thread pool, the lighter design
  `codeward batch` did not choose (shown to measure what the choice costs);
- batch: the real command, end to end (interpreter start, validation, workers,
  results and audit fsync'd per line).

Run: ``python bench/batch.py [--jobs 100] [--repeats 3] [--executor local] [--work 20000]``;
a larger ``--work`` makes the jobs CPU-bound, where threads stop scaling (the GIL)
and worker processes use every core.
With ``--executor docker``, each job runs in a container of its own; the rows
compare `codeward batch` with each worker's warm pool (the next job's container
starts while a job runs) and without (``--no-warm-pool``).

With ``--ray``, the same jobs also run through `run_batch` in this process on the
process-pool backend and on the Ray backend (a one-node local cluster of that many
CPUs, started once before the timing), interleaved; printed: each one's jobs/s,
Ray's throughput as a ratio of the pool's, and Ray's scheduling overhead per job:
the extra wall time per job it costs, times the jobs running at once
((t_ray - t_pool) * concurrency / jobs), beside the round trip of an empty Ray task.
With ``--ray --executor docker``, the pool's workers each keep a warm sandbox and the
Ray node's actor keeps its pool (`codeward.batch.ray_nodes`): the two warm paths compared.
With ``--ray --nodes N``, a local cluster of N one-CPU nodes (and a head that runs no job) against
the pool at N at once: jobs/s, and the median of each job's sandbox start as the results record it
(`time.start_seconds`), apart for the first job on each node or worker (its pool still filling).
``--think SECONDS`` makes each job wait that long in its first block, as real jobs wait for their
model: a job shorter than a container's start measures how fast the pool refills, not a warm take.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from codeward.batch.jobs import JobDefaults, load_jobs
from codeward.batch.jsonl import JsonlAppender
from codeward.batch.worker import run_job

STEP = "Thought: work.\n<code>\nx = sum(i * i for i in range({work}))\nprint(x)\n</code>"
#: A first step that also waits, as a job waits for its model's answer: what real agent jobs mostly do.
THINKING_STEP = (
    "Thought: work.\n<code>\nimport time\ntime.sleep({think})\nx = sum(i * i for i in range({work}))\nprint(x)\n</code>"
)
ANSWER = "Thought: answer.\n<code>\nfinal_answer(x % 97)\n</code>"
CONCURRENCY = (1, 2, 4)


def write_jobs(folder: Path, count: int, work: int, think: float = 0.0) -> Path:
    """Jobs that name no sandbox: the command line gives it (a job may not pick a weaker one)."""
    first = THINKING_STEP.format(work=work, think=think) if think else STEP.format(work=work)
    (folder / "model.json").write_text(json.dumps([first, ANSWER]))
    path = folder / "jobs.jsonl"
    with open(path, "w") as handle:
        for index in range(count):
            job = {"id": f"job-{index}", "task": "Compute.", "model": "script:model.json"}
            handle.write(json.dumps(job) + "\n")
    return path


def in_process(jobs_path: Path, folder: Path, executor: str, threads: int | None) -> float:
    """Seconds to run every job in this process: in a loop, or on `threads` threads."""
    jobs = [job.to_dict() for job in load_jobs(jobs_path, JobDefaults(executor=executor))]
    with JsonlAppender(folder / f"audit-inproc-{threads}-{time.monotonic_ns()}.jsonl", shared=True) as audit:
        started = time.perf_counter()
        if threads is None:
            results = [run_job(job, audit) for job in jobs]
        else:
            with ThreadPoolExecutor(threads) as pool:
                results = list(pool.map(lambda job: run_job(job, audit), jobs))
        elapsed = time.perf_counter() - started
    assert all(r["status"] == "success" for r in results), [r for r in results if r["status"] != "success"][:1]
    return elapsed


def command(jobs_path: Path, folder: Path, executor: str, concurrency: int, *options: str) -> float:
    """Seconds for the whole `codeward batch` command, from start to exit."""
    stamp = time.monotonic_ns()
    out, audit = folder / f"results-{stamp}.jsonl", folder / f"audit-{stamp}.jsonl"
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "codeward.cli",
            "batch",
            str(jobs_path),
            "--executor",
            executor,
            "--concurrency",
            str(concurrency),
            "--out",
            str(out),
            "--audit",
            str(audit),
            *options,
        ],
        capture_output=True,
        text=True,
        env=env,
        cwd=folder,
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"codeward batch failed:\n{done.stdout}\n{done.stderr}")
    return elapsed


def median_rate(measure, count: int, repeats: int) -> float:
    return count / statistics.median(measure() for _ in range(repeats))


def executors_to_measure(requested: list[str]) -> list[str]:
    from codeward.executors.base import available_executors

    chosen = [name for name in requested if name in available_executors()]
    for name in set(requested) - set(chosen):
        print(f"({name}: not registered on this branch; skipped)")
    return chosen


def bench_executor(executor: str, count: int, repeats: int, work: int) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        jobs_path = write_jobs(folder, count, work)
        run_job(
            load_jobs(jobs_path, JobDefaults(executor=executor))[0].to_dict(), None
        )  # warm up: imports, prompt templates
        baseline = median_rate(lambda: in_process(jobs_path, folder, executor, None), count, repeats)
        print(f"\n[{executor}] baseline, in-process one after another: {baseline:8.1f} jobs/s  (1.00x)")
        for concurrency in CONCURRENCY:
            if executor == "docker":  # a container per job: the warm pool is what matters, not threads
                cold = median_rate(
                    lambda c=concurrency: command(jobs_path, folder, executor, c, "--no-warm-pool"), count, repeats
                )
                warm = median_rate(lambda c=concurrency: command(jobs_path, folder, executor, c), count, repeats)
                print(
                    f"[docker] concurrency {concurrency}: codeward batch with warm pools {warm:6.1f} jobs/s "
                    f"({warm / baseline:.2f}x) · without {cold:6.1f} jobs/s ({cold / baseline:.2f}x)"
                )
                continue
            threads = median_rate(lambda c=concurrency: in_process(jobs_path, folder, executor, c), count, repeats)
            batch = median_rate(lambda c=concurrency: command(jobs_path, folder, executor, c), count, repeats)
            print(
                f"[{executor}] concurrency {concurrency}: codeward batch (processes) {batch:6.1f} jobs/s "
                f"({batch / baseline:.2f}x) · threads in-process {threads:6.1f} jobs/s ({threads / baseline:.2f}x)"
            )


def bench_ray(executor: str, count: int, repeats: int, work: int, concurrency: int) -> None:
    """The pool and Ray backends on the same jobs, in this process, on a local cluster started beforehand."""
    import ray

    from codeward.batch.process_pool import ProcessPool
    from codeward.batch.ray_backend import RayBackend
    from codeward.batch.runner import BatchOptions, run_batch

    def timed(folder: Path, jobs: list, backend: object) -> float:
        stamp = time.monotonic_ns()
        at_once = 0 if isinstance(backend, RayBackend) else concurrency  # Ray: as many as the cluster's CPUs
        options = BatchOptions(folder / f"r-{stamp}.jsonl", folder / f"a-{stamp}.jsonl", at_once)
        started = time.perf_counter()
        outcome = run_batch(jobs, options, backend=backend)
        elapsed = time.perf_counter() - started
        assert outcome.counts == {"success": count}, outcome.counts
        return elapsed

    from codeward.batch.ray_nodes import DOCKER_RESOURCE

    docker = {DOCKER_RESOURCE: concurrency} if executor == "docker" else {}
    ray.init(
        num_cpus=concurrency, resources=docker, include_dashboard=False, log_to_driver=False, logging_level="ERROR"
    )
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            jobs = load_jobs(write_jobs(folder, count, work), JobDefaults(executor=executor))
            timed(folder, jobs, RayBackend())  # warm up: the cluster's workers start and import codeward
            pool_times, ray_times = [], []
            for _ in range(repeats):
                pool_times.append(timed(folder, jobs, ProcessPool()))
                ray_times.append(timed(folder, jobs, RayBackend()))
        empty = ray.remote(lambda: None)
        ray.get(empty.remote())
        trips = []
        for _ in range(200):
            started = time.perf_counter()
            ray.get(empty.remote())
            trips.append(time.perf_counter() - started)
    finally:
        ray.shutdown()
    pool, ray_time = statistics.median(pool_times), statistics.median(ray_times)
    overhead_ms = (ray_time - pool) * concurrency / count * 1000
    print(
        f"[{executor}] concurrency {concurrency}: process pool {count / pool:6.1f} jobs/s · "
        f"Ray, one-node local cluster {count / ray_time:6.1f} jobs/s · pool/Ray throughput {ray_time / pool:.2f}x · "
        f"Ray's overhead {overhead_ms:.0f} ms per job · empty Ray task round trip "
        f"{statistics.median(trips) * 1000:.2f} ms (median of 200)"
    )


def _starts(results: Path) -> tuple[list[float], list[float]]:
    """Each job's sandbox start (`time.start_seconds`): the first on each node (or worker), and the rest."""
    first, rest, seen = [], [], set()
    records = [json.loads(line) for line in results.read_text().splitlines()]
    for record in sorted(records, key=lambda r: r["started_at"]):
        where = record.get("node") or record["sandbox"]["worker_pid"]
        (rest if where in seen else first).append(record["time"]["start_seconds"])
        seen.add(where)
    return first, rest


def bench_ray_nodes(executor: str, count: int, work: int, nodes: int, think: float) -> None:
    """A local cluster of a head and `nodes` nodes of one CPU each, the jobs spread over them, against the
    process pool at the same concurrency: jobs/s and each job's sandbox start, every job recorded once."""
    import ray
    from ray.cluster_utils import Cluster

    from codeward.batch.process_pool import ProcessPool
    from codeward.batch.ray_backend import RayBackend
    from codeward.batch.ray_nodes import DOCKER_RESOURCE
    from codeward.batch.runner import BatchOptions, run_batch

    store = 100 * 2**20
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0, "object_store_memory": store})
    for _ in range(nodes):
        resources = {DOCKER_RESOURCE: 1} if executor == "docker" else {}
        cluster.add_node(num_cpus=1, resources=resources, object_store_memory=store)
    cluster.wait_for_nodes()
    figures = {}
    try:
        with tempfile.TemporaryDirectory() as scratch:
            folder = Path(scratch)
            jobs = load_jobs(write_jobs(folder, count, work, think), JobDefaults(executor=executor))
            for name, backend, at_once in (
                ("process pool", ProcessPool(), nodes),
                ("Ray", RayBackend(cluster.address), 0),
            ):
                results = folder / f"{name}.jsonl"
                started = time.perf_counter()
                outcome = run_batch(jobs, BatchOptions(results, None, at_once), backend=backend)
                elapsed = time.perf_counter() - started
                recorded = [json.loads(line)["id"] for line in results.read_text().splitlines()]
                assert outcome.counts == {"success": count} and sorted(recorded) == sorted(j.id for j in jobs)
                figures[name] = (count / elapsed, *_starts(results))
    finally:
        if ray.is_initialized():
            ray.shutdown()
        cluster.shutdown()
    for name, (rate, first, rest) in figures.items():
        print(
            f"[{executor}] {nodes} at once, {name}: {rate:5.1f} jobs/s · sandbox start, median: "
            f"{statistics.median(rest) * 1000:6.1f} ms after the first on each node or worker "
            f"({len(rest)} jobs), {statistics.median(first) * 1000:6.1f} ms for the first ({len(first)})"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--executor", action="append", default=None)
    parser.add_argument("--work", type=int, default=20_000, help="loop iterations in each job's first block")
    parser.add_argument("--ray", action="store_true", help="the Ray backend beside the process pool (codeward[ray])")
    parser.add_argument("--nodes", type=int, help="with --ray: a local cluster of this many one-CPU nodes")
    parser.add_argument(
        "--think",
        type=float,
        default=0.0,
        help="with --nodes: seconds each job waits in its first block, as it would for its model's answer",
    )
    args = parser.parse_args()
    print(
        f"{args.jobs} jobs of {args.work:,} iterations, median of {args.repeats} runs, {os.cpu_count()} cores; "
        "jobs/s (ratio to the baseline)"
    )
    for executor in executors_to_measure(args.executor or ["local"]):
        if args.ray and args.nodes:
            bench_ray_nodes(executor, args.jobs, args.work, args.nodes, args.think)
            continue
        if args.ray:
            for concurrency in (1, 2):
                bench_ray(executor, args.jobs, args.repeats, args.work, concurrency)
            continue
        bench_executor(executor, args.jobs, args.repeats, args.work)


if __name__ == "__main__":
    main()
