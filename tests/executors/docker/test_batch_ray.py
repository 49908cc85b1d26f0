"""`codeward batch --ray` on a real Ray cluster of several nodes on this machine (Ray's `Cluster`).

The head node runs local jobs only; two more nodes advertise the `codeward_docker` resource, so
docker jobs land on them alone. Nodes are removed and the driver SIGKILLed midway: every job
must still be in the results exactly once, and nothing (container, Ray process) may be left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest
import ray
import yaml
from ray._private import ray_constants
from ray.cluster_utils import Cluster

import codeward
from codeward.batch.jobs import JobDefaults, load_jobs
from codeward.batch.ray_backend import DOCKER_RESOURCE
from codeward.batch.runner import BatchOptions, run_batch
from codeward.executors.docker.owners import list_sandboxes, owner_alive, reap_orphans
from tests.cli.conftest import children
from tests.executors.docker.containers import Creations

SRC = str(Path(codeward.__file__).parents[1])
_STORE = 100 * 1024 * 1024


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
    except OSError:  # gone already
        return b""


def _running_jobs() -> list[int]:
    """Ray workers of ours running a job now (Ray names a worker's process for its task)."""
    return [pid for pid in children(os.getpid()) if _cmdline(pid).startswith(b"ray::_run_on_node")]


def _ray_processes() -> list[int]:
    """This process's descendants that are Ray's (raylets, GCS, workers)."""
    return [pid for pid in children(os.getpid()) if b"ray" in _cmdline(pid)]


@pytest.fixture(scope="module")
def cluster(docker_client: docker.DockerClient, sandbox_image: str) -> Iterator[Cluster]:
    before = {container.id for container in list_sandboxes(docker_client)}
    started = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": _STORE, "include_dashboard": False},
    )
    for _ in range(2):
        started.add_node(num_cpus=1, resources={DOCKER_RESOURCE: 1}, object_store_memory=_STORE)
    started.wait_for_nodes()
    yield started
    if ray.is_initialized():
        ray.shutdown()
    started.shutdown()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and _ray_processes():
        time.sleep(0.2)
    assert not _ray_processes(), "a Ray node or worker outlived the cluster"
    reap_orphans(docker_client)  # what the workers killed with their node left behind
    # every Ray process of ours is gone, so a container of ours would be one whose owner is dead
    left = [c.name for c in list_sandboxes(docker_client) if c.id not in before and not owner_alive(c.labels)]
    assert not left


ENV_TOOL = '''
import os

from codeward import tool


@tool
def env_value(name: str) -> str | None:
    """The value of an environment variable in the process running the job.

    Args:
        name: The variable.
    """
    return os.environ.get(name)
'''


def _docker_nodes(cluster: Cluster) -> set[str]:
    return {node.node_id for node in cluster.list_all_nodes() if not node.head}


def _raylet(node: Any) -> int:
    return int(node.all_processes[ray_constants.PROCESS_TYPE_RAYLET][0].process.pid)


def busy_node(cluster: Cluster, seconds: float = 30) -> Any:
    """A node other than the head with a job running on it now (Ray names a worker's process for its task)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        for node in cluster.list_all_nodes():
            if not node.head and any(_cmdline(pid).startswith(b"ray::_run_on_node") for pid in children(_raylet(node))):
                return node
        time.sleep(0.02)
    raise AssertionError("no node ran a job")


def kill_node(cluster: Cluster, node: Any) -> None:
    """The node dies as a machine does: its workers with it, none left to finish a job and report it."""
    for pid in children(_raylet(node)):
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    cluster.remove_node(node, allow_graceful=False)


def write_jobs(folder: Path, local: int, docker_jobs: int = 0, sleep: float = 0.2) -> list[str]:
    (folder / "local.yaml").write_text(
        yaml.safe_dump(
            [
                f"Thought: work.\n<code>\nimport time\ntime.sleep({sleep})\nn = 21 * 2\n</code>",
                "Thought: answer.\n<code>\nfinal_answer(n)\n</code>",
            ]
        )
    )
    (folder / "docker.yaml").write_text(
        yaml.safe_dump(["<code>\nimport socket\nfinal_answer([n * 2, socket.gethostname()])\n</code>"])
    )
    jobs: list[dict[str, Any]] = [
        {"id": f"local-{n:02d}", "task": "Answer.", "model": "script:local.yaml"} for n in range(local)
    ]
    jobs += [
        {
            "id": f"docker-{n:02d}",
            "task": "Double n.",
            "additional_args": {"n": n},
            "model": "script:docker.yaml",
            "executor": "docker",
        }
        for n in range(docker_jobs)
    ]
    (folder / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    return [job["id"] for job in jobs]


def read_lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "a torn last line"
    return [json.loads(line) for line in text.splitlines()]


def batch_command(cluster: Cluster, *extra: str) -> list[str]:
    return [sys.executable, "-m", "codeward.cli", "batch", "jobs.jsonl", "--ray", cluster.address, *extra]


#: The command's environment: this codeward, and a wide terminal so its lines are not wrapped.
COMMAND_ENV = {**os.environ, "PYTHONPATH": SRC, "COLUMNS": "160"}


def start_batch(cluster: Cluster, folder: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        batch_command(cluster, *extra),
        cwd=folder,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=COMMAND_ENV,
    )


def run_batch_command(cluster: Cluster, folder: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        batch_command(cluster, *extra), cwd=folder, capture_output=True, text=True, timeout=240, env=COMMAND_ENV
    )


def wait_for_results(path: Path, count: int, process: subprocess.Popen[str], seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (not path.exists() or path.read_text().count("\n") < count):
        assert process.poll() is None, process.communicate()
        time.sleep(0.05)
    assert path.read_text().count("\n") >= count, "the batch made no progress"


def test_an_unset_env_name_is_refused_before_anything_runs(cluster: Cluster, tmp_path: Path) -> None:
    write_jobs(tmp_path, local=1)
    done = run_batch_command(cluster, tmp_path, "--env", "CODEWARD_NO_SUCH_KEY")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "CODEWARD_NO_SUCH_KEY" in done.stderr and "which this shell does not set" in done.stderr
    assert not (tmp_path / "results.jsonl").exists()


#: Long enough that the hanging job's block has begun on a busy machine before its timeout ends it: the
#: timeout counts from the job's start on its node, sandbox and tools included, and the audit counts its block.
HANG_TIMEOUT = 5


def test_python_api_with_a_timeout_and_a_named_key(
    cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codeward.batch.ray_backend import RayBackend
    from codeward.redaction import REDACTED

    (tmp_path / "env_tools.py").write_text(ENV_TOOL)
    (tmp_path / "key.yaml").write_text(
        yaml.safe_dump(
            ["<code>\nfinal_answer([env_value('CODEWARD_TEST_KEY'), env_value('CODEWARD_NOT_NAMED')])\n</code>"]
        )
    )
    (tmp_path / "hang.yaml").write_text(yaml.safe_dump(["<code>\nimport time\ntime.sleep(60)\n</code>"]))
    (tmp_path / "jobs.yaml").write_text(
        yaml.safe_dump(
            [
                {"id": "hangs", "task": "Hang.", "model": "script:hang.yaml", "timeout_seconds": HANG_TIMEOUT},
                *({"id": f"key-{n}", "task": "Key.", "model": "script:key.yaml"} for n in range(4)),
            ]
        )
    )
    key = f"sk-test-{uuid.uuid4().hex}"
    monkeypatch.setenv("CODEWARD_TEST_KEY", key)
    monkeypatch.setenv("CODEWARD_NOT_NAMED", "secret")
    jobs = load_jobs(tmp_path / "jobs.yaml", JobDefaults(executor="local", tools=[str(tmp_path / "env_tools.py")]))
    runs = tmp_path / "runs"
    options = BatchOptions(tmp_path / "results.jsonl", tmp_path / "audit.jsonl", concurrency=0, runs=runs)
    started = time.monotonic()
    backend = RayBackend(cluster.address, env=["CODEWARD_TEST_KEY"])
    outcome = run_batch(jobs, options, backend=backend)
    assert time.monotonic() - started < 60, "the hanging job held the batch past its timeout"
    assert outcome.counts == {"success": 4, "timeout": 1}
    results = {r["id"]: r for r in read_lines(tmp_path / "results.jsonl")}
    assert f"timeout of {HANG_TIMEOUT} s" in results["hangs"]["error"]
    # the named key only reached the tasks, and a key sent with --env is a secret: the results never hold it
    assert all(results[f"key-{n}"]["output"] == [REDACTED, None] for n in range(4))
    hang_blocks = [line for line in read_lines(tmp_path / "audit.jsonl") if line["job_id"] == "hangs"]
    assert [line["outcome"] for line in hang_blocks] == ["cancelled"] and hang_blocks[0]["attempt"] == 1
    assert not ray.is_initialized()  # the run connected, and it disconnected
    # each job's run was sent back to the driver's folder, its paths relative to it, and the key left out
    assert sorted(path.name for path in runs.iterdir()) == sorted(f"{job.id}.json" for job in jobs)
    saved = json.loads((runs / "key-0.json").read_text())
    assert saved["steps"] and key not in json.dumps(saved)
    assert [tool["spec"] for tool in saved["codeward_run"]["tool_sources"]] == ["../env_tools.py"]
    # the key was held by the driver and fetched by the tasks: the cluster recorded it nowhere (Ray's runtime
    # environment, which the cluster's logs, state and dashboard show, never carried it)
    session = Path(cluster.head_node.get_session_dir_path())
    assert not [path for path in session.rglob("*") if path.is_file() and key.encode() in path.read_bytes()]

    again = run_batch(jobs, options, backend="ray", address=cluster.address)  # resume: nothing to do
    assert sum(again.counts.values()) == 0 and sum(again.earlier.values()) == 5


def creators(creations: Creations) -> dict[str, int]:
    """Each container created since `creations` began (short id) and the pid of the process that started it."""
    return {e["id"][:12]: int(e["Actor"]["Attributes"]["codeward.owner.pid"]) for e in creations.seen()}


def test_local_and_docker_jobs_over_the_nodes_one_removed_midway(
    cluster: Cluster, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    docker_jobs = 10
    ids = write_jobs(tmp_path, local=30, docker_jobs=docker_jobs, sleep=0.5)
    docker_nodes = _docker_nodes(cluster)
    creations = Creations(docker_client)
    batch = start_batch(cluster, tmp_path)
    wait_for_results(tmp_path / "results.jsonl", 10, batch)
    doomed = busy_node(cluster)
    kill_node(cluster, doomed)
    cluster.add_node(num_cpus=1, resources={DOCKER_RESOURCE: 1}, object_store_memory=_STORE)
    out, err = batch.communicate(timeout=240)
    assert batch.returncode == 0, out + err
    assert "Unhandled error" not in err  # calls to the removed node's actor are read, not left for Ray to print

    results = read_lines(tmp_path / "results.jsonl")
    assert Counter(r["id"] for r in results) == dict.fromkeys(ids, 1)  # every job, exactly once
    assert all(r["status"] == "success" for r in results), [r for r in results if r["status"] != "success"]
    assert len({r["node"] for r in results}) >= 3  # spread over the nodes
    assert {r["node"] for r in results if r["id"].startswith("docker")} <= _docker_nodes(cluster) | docker_nodes
    assert sorted(r["output"][0] for r in results if r["id"].startswith("docker")) == [
        2 * n for n in range(docker_jobs)
    ]
    hosts = {r["output"][1] for r in results if r["id"].startswith("docker")}
    assert len(hosts) == docker_jobs  # a container per job
    assert not [c for c in list_sandboxes(docker_client) if c.id[:12] in hosts]  # each removed by its job
    started_by = creators(creations)
    creations.close()
    for result in results:  # each docker job's container came warm from its node's pool, not from its task
        if result["id"].startswith("docker"):
            assert started_by[result["output"][1]] != result["sandbox"]["worker_pid"]
    retried = [r for r in results if r["attempt"] > 1]
    assert retried, "a job running on the removed node was not run again"
    assert all(r["node"] != doomed.node_id for r in retried)

    audit = read_lines(tmp_path / "audit.jsonl")
    lost = [line for line in audit if line["outcome"] == "worker_lost"]
    assert all(line["attempt"] == 1 and line["node"] == doomed.node_id for line in lost)  # if a block was running
    for result in retried:  # each attempt numbered, the last one's blocks complete
        attempts = {line["attempt"] for line in audit if line["job_id"] == result["id"]}
        assert result["attempt"] in attempts


def test_driver_sigkilled_midway_then_resumed_each_job_once(cluster: Cluster, tmp_path: Path) -> None:
    ids = write_jobs(tmp_path, local=60, sleep=0.1)
    results = tmp_path / "results.jsonl"
    batch = start_batch(cluster, tmp_path)
    wait_for_results(results, 20, batch)
    batch.send_signal(signal.SIGKILL)
    batch.communicate()
    first = read_lines(results)
    assert 20 <= len(first) < 60
    deadline = time.monotonic() + 30  # Ray ends a dead driver's tasks
    while time.monotonic() < deadline and _running_jobs():
        time.sleep(0.1)
    assert not _running_jobs(), "a job of the killed driver still runs"

    done = run_batch_command(cluster, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{len(first)} jobs already in the results file" in done.stderr
    final = read_lines(results)
    assert Counter(r["id"] for r in final) == dict.fromkeys(ids, 1)
    assert final[: len(first)] == first  # nothing finished was lost or rewritten
    assert all(r["status"] == "success" and r["output"] == 42 for r in final)


def test_ctrl_c_cancels_the_running_jobs_and_the_rerun_finishes(cluster: Cluster, tmp_path: Path) -> None:
    ids = write_jobs(tmp_path, local=12, sleep=3)
    results = tmp_path / "results.jsonl"
    batch = start_batch(cluster, tmp_path)
    wait_for_results(results, 1, batch)
    batch.send_signal(signal.SIGINT)
    out, err = batch.communicate(timeout=60)
    assert batch.returncode == 130, out + err
    assert "run the same command again" in err
    assert not _running_jobs(), "a cancelled job still runs on its node"
    first = read_lines(results)
    assert all(r["status"] == "success" for r in first) and len(first) < 12  # cancelled jobs are not written
    done = run_batch_command(cluster, tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert Counter(r["id"] for r in read_lines(results)) == dict.fromkeys(ids, 1)


def test_a_docker_node_without_an_engine_is_skipped_with_a_line_and_its_jobs_run_elsewhere(
    cluster: Cluster, tmp_path: Path
) -> None:
    ids = write_jobs(tmp_path, local=4, docker_jobs=8)
    broken = cluster.add_node(
        num_cpus=1,
        resources={DOCKER_RESOURCE: 1},
        object_store_memory=_STORE,
        env_vars={"DOCKER_HOST": "unix:///nonexistent/docker.sock"},  # this node's engine does not answer
    )
    cluster.wait_for_nodes()
    try:
        done = run_batch_command(cluster, tmp_path)
    finally:
        cluster.remove_node(broken)
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stderr.split())  # the terminal's width may have wrapped the line
    assert f"node {broken.node_id[:8]} skipped for docker jobs" in said
    assert "engine at unix:///nonexistent/docker.sock (DOCKER_HOST) does not answer" in said  # and why
    results = read_lines(tmp_path / "results.jsonl")
    assert Counter(r["id"] for r in results) == dict.fromkeys(ids, 1)
    assert all(r["status"] == "success" for r in results), [r for r in results if r["status"] != "success"]
    assert all(r["attempt"] == 1 for r in results)  # a job sent back from the node is not a lost attempt
    assert not [r for r in results if r["id"].startswith("docker") and r["node"] == broken.node_id]


def test_docker_jobs_end_as_errors_when_no_node_can_run_them(cluster: Cluster, tmp_path: Path) -> None:
    """A local cluster whose every node has no engine: docker jobs fail with the reason, local jobs run.

    `--ray` alone starts a cluster of its own, though `cluster` runs on this machine (joining it, as Ray
    does by default, would run the docker jobs there, on nodes whose engine answers).
    """
    write_jobs(tmp_path, local=2, docker_jobs=2)
    command = [sys.executable, "-m", "codeward.cli", "batch", "jobs.jsonl", "--ray", "--concurrency", "2"]
    env = {**COMMAND_ENV, "DOCKER_HOST": "unix:///nonexistent/docker.sock"}
    done = subprocess.run(command, cwd=tmp_path, capture_output=True, text=True, timeout=180, env=env)
    assert done.returncode == 1, done.stdout + done.stderr
    results = {r["id"]: r for r in read_lines(tmp_path / "results.jsonl")}
    assert [results[f"local-{n:02d}"]["status"] for n in range(2)] == ["success", "success"]
    for n in range(2):
        assert results[f"docker-{n:02d}"]["status"] == "error"
        assert "no node of the Ray cluster can run docker jobs" in results[f"docker-{n:02d}"]["error"]
        assert "nonexistent/docker.sock" in results[f"docker-{n:02d}"]["error"]


def test_a_job_asking_more_than_any_node_has_is_refused_before_anything_runs(cluster: Cluster, tmp_path: Path) -> None:
    write_jobs(tmp_path, local=2)
    done = run_batch_command(cluster, tmp_path, "--job-cpus", "4")
    assert done.returncode == 2, done.stdout + done.stderr
    said = " ".join(done.stderr.split())
    assert "each job asks Ray for 4 CPUs, but the largest node of the cluster has 1" in said
    assert read_lines(tmp_path / "results.jsonl") == []


def test_docker_jobs_without_warm_pools_start_their_own_sandboxes(
    cluster: Cluster, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    ids = write_jobs(tmp_path, local=0, docker_jobs=4)
    creations = Creations(docker_client)
    done = run_batch_command(cluster, tmp_path, "--no-warm-pool", "--job-cpus", "0.5", "--job-memory", "200m")
    assert done.returncode == 0, done.stdout + done.stderr
    results = read_lines(tmp_path / "results.jsonl")
    assert Counter(r["id"] for r in results) == dict.fromkeys(ids, 1)
    started_by = creators(creations)
    creations.close()
    assert all(started_by[r["output"][1]] == r["sandbox"]["worker_pid"] for r in results)  # the task's own
