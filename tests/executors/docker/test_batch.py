"""`codeward batch` on the docker executor: a container per job, from each worker's warm pool."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import docker
import pytest
import yaml

import codeward
from codeward.executors.docker.owners import list_sandboxes
from tests.executors.docker.containers import MadeHere

SRC = str(Path(codeward.__file__).parents[1])


@pytest.mark.parametrize("warm_pool", [True, False], ids=["warm-pool", "no-warm-pool"])
def test_each_job_gets_a_container_of_its_own_and_none_is_left(
    docker_client: docker.DockerClient, sandbox_image: str, tmp_path: Path, warm_pool: bool
) -> None:
    (tmp_path / "model.yaml").write_text(
        yaml.safe_dump(
            [
                (
                    "<code>\nimport glob, socket\nhost = socket.gethostname()\n"
                    "limit = open((glob.glob('/sys/fs/cgroup/pids.max') + glob.glob('/sys/fs/cgroup/pids/pids.max'))[0]).read()\n"
                    "final_answer([n * 2, host, int(limit)])\n</code>"
                )
            ]
        )
    )
    # Jobs with other sandbox settings get sandboxes of their own kind (a warm pool each).
    jobs = [
        {
            "id": f"job-{n}",
            "task": "Double n.",
            "additional_args": {"n": n},
            "model": "script:model.yaml",
            "executor": "docker",
            "executor_kwargs": {"pids_limit": 64 if n % 2 else 128},
        }
        for n in range(4)
    ]
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    with MadeHere(docker_client) as made:
        command = [sys.executable, "-m", "codeward.cli", "batch", "jobs.jsonl", "--concurrency", "2"]
        done = subprocess.run(
            command + ([] if warm_pool else ["--no-warm-pool"]),
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": SRC, **made.env},
        )
        assert done.returncode == 0, done.stdout + done.stderr
        results = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
        assert sorted(r["id"] for r in results) == [f"job-{n}" for n in range(4)]
        assert all(r["status"] == "success" for r in results)
        assert sorted(r["output"][0] for r in results) == [0, 2, 4, 6]
        assert len({r["output"][1] for r in results}) == 4  # four containers, one per job
        assert {r["output"][0]: r["output"][2] for r in results} == {0: 128, 2: 64, 4: 128, 6: 64}
        # Only this run's sandboxes: another suite on the same engine may have its own, coming and going.
        assert len(made.created()) >= 4, "the run's sandboxes were not found by their folder"
        assert made.left() == set()


def test_warm_pools_keep_only_the_last_settings_used(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    """A job file of many sandbox settings cannot fill the machine with idle sandboxes, one pool each."""
    from codeward.batch.worker import MAX_WARM_SETTINGS, WarmPools

    pools = WarmPools(enabled=True)
    try:
        made = [pools.pool({"pids_limit": 200 + n}) for n in range(MAX_WARM_SETTINGS + 2)]
        for pool in made:
            pool.wait_until_full(timeout=60)
        assert pools.pool({"pids_limit": 200 + MAX_WARM_SETTINGS + 1}) is made[-1]  # the same settings, the same pool
        assert [pool.idle for pool in made[:2]] == [(), ()]  # the least recently used two were closed
        assert all(len(pool.idle) == 1 for pool in made[2:])
        waiting = {
            c.id for c in list_sandboxes(docker_client) for pool in made[2:] if pool.idle[0].container.id == c.id
        }
        assert len(waiting) == MAX_WARM_SETTINGS
        with pytest.raises(Exception, match="closed"):
            made[0].take()
    finally:
        pools.close()
    assert all(pool.idle == () for pool in made)
