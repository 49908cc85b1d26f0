"""`runtime="runsc"`: sandboxes under gVisor start reliably, and a gVisor that cannot run them is refused at once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

import codeward
from codeward.batch.jobs import JobDefaults, JobFileError, load_jobs
from codeward.cli.doctor import _gvisor
from codeward.executors.base import SandboxError
from codeward.executors.docker.executor import DockerExecutor
from codeward.executors.docker.gvisor import GVISOR_LEAST_PIDS, RUNSC_ARGS, RuntimeUnusable, runtime_problem
from codeward.executors.docker.hardening import Hardening
from codeward.executors.docker.pool import SandboxPool
from tests.executors.docker.conftest import gvisor_unavailable, unavailable
from tests.executors.docker.containers import LAUNCH_FORK_BOMB, gone, host_runs_a_process

#: Cold starts in a row that must all succeed: one in three failed before the sockets were awaited whole.
COLD_STARTS = 20


def _runsc(*args: str) -> dict[str, Any]:
    return {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": list(args)}}


@pytest.fixture(scope="module")
def gvisor(docker_client, sandbox_image: str) -> None:  # type: ignore[no-untyped-def]
    reason = gvisor_unavailable(docker_client)
    if reason:
        unavailable(reason)


@pytest.mark.parametrize(
    "args",
    [RUNSC_ARGS, ("--network=none", "--host-uds=all"), ("-network", "none", "--host-uds", "create")],
)
def test_gvisor_that_may_create_host_sockets_runs_the_kernel(args: tuple[str, ...]) -> None:
    assert runtime_problem(_runsc(*args), "runsc") is None


@pytest.mark.parametrize(
    ("args", "lacking"),
    [
        ((), "--host-uds=create (it has --host-uds=none) and --network=none"),
        (("--network=none", "--host-uds=open"), "--host-uds=create (it has --host-uds=open)"),
        (("--host-uds=create",), "--network=none"),
    ],
)
def test_gvisor_without_the_flags_the_kernel_needs_is_refused_with_the_fix(args: tuple[str, ...], lacking: str) -> None:
    problem = runtime_problem(_runsc(*args), "runsc")
    assert problem is not None
    assert f"lacks {lacking}" in problem.detail
    assert '"runtimeArgs": ["--network=none", "--host-uds=all"]' in problem.fix


def test_an_egress_sandbox_needs_a_runsc_that_both_creates_and_opens_host_sockets() -> None:
    problem = runtime_problem(_runsc("--network=none", "--host-uds=create"), "runsc", egress=True)
    assert problem is not None and "--host-uds=all for an egress list" in problem.detail
    opens_only = runtime_problem(_runsc("--network=none", "--host-uds=open"), "runsc", egress=True)
    assert opens_only is not None and "--host-uds=create" in opens_only.detail
    assert runtime_problem(_runsc(*RUNSC_ARGS), "runsc", egress=True) is None


def test_a_sandbox_with_a_network_does_not_need_runsc_without_one() -> None:
    assert runtime_problem(_runsc("--host-uds=create"), "runsc", network="bridge") is None


def test_a_sandbox_with_a_network_is_refused_a_runsc_that_has_none() -> None:
    problem = runtime_problem(_runsc(*RUNSC_ARGS), "runsc", network="bridge")
    assert problem is not None and "would get no network at all" in problem.detail
    assert "without --network=none" in problem.fix


def test_a_networked_sandbox_under_the_ci_runsc_fails_at_once_instead_of_running_offline(gvisor: None) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeUnusable, match="would get no network at all"):
        DockerExecutor(runtime="runsc", network="bridge")
    assert time.monotonic() - started < 5


def test_a_missing_runtime_names_those_the_engine_has() -> None:
    problem = runtime_problem({"runc": {"path": "runc"}}, "runsc")
    assert problem is not None
    assert problem.detail == "the Docker engine has no runtime 'runsc' (it has: runc)"
    assert "apt-get install -y runsc" in problem.fix


def test_doctor_says_whether_gvisor_can_run_the_kernel() -> None:
    assert _gvisor(_runsc(*RUNSC_ARGS)).ok
    missing = _gvisor({"runc": {"path": "runc"}})
    assert not missing.ok and "daemon.json" in missing.fix
    open_only = _gvisor(_runsc("--network=none", "--host-uds=open"))
    assert not open_only.ok and "--host-uds=create" in open_only.detail


def test_a_runtime_the_engine_lacks_fails_at_once(sandbox_image: str) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeUnusable, match="no runtime 'codeward-no-such-runtime'"):
        DockerExecutor(runtime="codeward-no-such-runtime")
    assert time.monotonic() - started < 5


def test_code_runs_under_gvisors_kernel(gvisor: None) -> None:
    with DockerExecutor(runtime="runsc") as executor:
        release = executor.run("import platform\nplatform.release()").output
        assert executor.run("x = 6\nx * 7").output == 42
    assert release != os.uname().release  # gVisor reports its own kernel's release, not the host's


def test_a_pids_limit_gvisor_cannot_start_under_is_refused_at_once(gvisor: None) -> None:
    started = time.monotonic()
    with pytest.raises(RuntimeUnusable, match=f"pids_limit={GVISOR_LEAST_PIDS} or more"):
        DockerExecutor(runtime="runsc", pids_limit=GVISOR_LEAST_PIDS // 2)
    assert time.monotonic() - started < 5


def test_the_least_pids_limit_gvisor_is_given_starts_its_kernel(gvisor: None) -> None:
    """The control: the limit the refusal names is one gVisor's kernel starts under."""
    with DockerExecutor(runtime="runsc", pids_limit=GVISOR_LEAST_PIDS) as executor:
        assert executor.run("2 + 2").output == 4


def test_a_fork_bomb_under_gvisor_ends_its_own_sandbox_and_the_next_block_runs(gvisor: None, docker_client) -> None:  # type: ignore[no-untyped-def]
    """What gVisor guarantees instead of runc's held count: the sandbox's processes live inside gVisor's
    kernel, whose own host threads the pids limit counts. A fork bomb exhausts them and gVisor's kernel
    exits: the sandbox ends, never more than its limit on the host, and the executor starts a fresh one."""
    with DockerExecutor(runtime="runsc", timeout_seconds=20) as executor:
        executor.run("kept = 1")
        sandbox = executor.sandbox
        assert sandbox is not None
        assert executor.run(LAUNCH_FORK_BOMB).logs == "launched\n"
        counts = []
        deadline = time.monotonic() + 60  # the bomb's interpreter, then gVisor's kernel, are slow on a busy machine
        with pytest.raises(SandboxError, match="the sandbox died while running the code"):
            while time.monotonic() < deadline:
                counts.append(sandbox.task_count())
                executor.run("import time\ntime.sleep(0.25)")
        assert all(count is None or count <= Hardening().pids_limit for count in counts), counts
        assert host_runs_a_process()
        assert executor.run("'kept' in globals(), 6 * 7").output == (False, 42)
        assert executor.sandbox is not sandbox
    assert gone(docker_client, sandbox.container.id)


def test_a_pool_keeps_gvisor_sandboxes_ready(gvisor: None) -> None:
    with SandboxPool(size=1, runtime="runsc") as pool:
        assert pool.wait_until_full(timeout=120)
        (waiting,) = [sandbox.container.id for sandbox in pool.idle]
        with DockerExecutor(pool=pool) as executor:
            assert executor.sandbox is not None and executor.sandbox.container.id == waiting
            assert executor.run("import platform\nplatform.release()").output != os.uname().release


def test_a_pool_refuses_a_runtime_the_engine_lacks_at_once(sandbox_image: str) -> None:
    with pytest.raises(RuntimeUnusable):
        SandboxPool(size=1, runtime="codeward-no-such-runtime")


def test_twenty_cold_starts_in_a_row_succeed(gvisor: None) -> None:
    for attempt in range(COLD_STARTS):
        with DockerExecutor(runtime="runsc") as executor:
            assert executor.run(f"{attempt} + 1").output == attempt + 1, attempt


def _jobs_file(folder: Path, *jobs: dict[str, Any]) -> Path:
    path = folder / "jobs.jsonl"
    path.write_text("".join(json.dumps({"task": "t", "model": "openai/gpt-4o-mini", **job}) + "\n" for job in jobs))
    return path


def test_a_job_may_ask_for_gvisor_and_the_command_line_gives_it_to_docker_jobs(tmp_path: Path) -> None:
    path = _jobs_file(
        tmp_path,
        {"id": "asks", "executor": "docker", "runtime": "runsc"},
        {"id": "plain", "executor": "docker"},
        {"id": "local", "executor": "local"},
    )
    asked = {job.id: job.executor_kwargs for job in load_jobs(path, JobDefaults())}
    assert asked == {"asks": {"runtime": "runsc"}, "plain": {}, "local": {}}
    given = {job.id: job.executor_kwargs for job in load_jobs(path, JobDefaults(runtime="runsc"))}
    assert given == {"asks": {"runtime": "runsc"}, "plain": {"runtime": "runsc"}, "local": {}}


@pytest.mark.parametrize(
    ("job", "fault"),
    [
        ({"executor": "docker", "runtime": "runc"}, "may ask only for 'runsc'"),
        ({"executor": "docker", "executor_kwargs": {"runtime": "runc"}}, "sets 'runtime'"),
        ({"executor": "local", "runtime": "runsc"}, "only docker sandboxes have a container runtime"),
    ],
)
def test_a_job_cannot_pick_a_runtime_that_confines_less(tmp_path: Path, job: dict[str, Any], fault: str) -> None:
    with pytest.raises(JobFileError, match=fault):
        load_jobs(_jobs_file(tmp_path, {"id": "j", **job}), JobDefaults(executor="docker", runtime="runsc"))


def test_codeward_batch_runs_docker_jobs_under_gvisor(gvisor: None, tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text(
        yaml.safe_dump(["<code>\nimport platform\nfinal_answer(platform.release())\n</code>"])
    )
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": "j", "task": "Which kernel?", "model": "script:model.yaml"}))
    done = subprocess.run(
        [sys.executable, "-m", "codeward.cli", "batch", "jobs.jsonl", "--executor", "docker", "--runtime", "runsc"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(Path(codeward.__file__).parents[1])},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (result,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "success" and result["output"] != os.uname().release, result
