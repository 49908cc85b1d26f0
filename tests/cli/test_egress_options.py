"""--egress and --egress-header on the command line: what they become, what they refuse, and jobs files' consent."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeward.batch.jobs import JobDefaults, JobFileError, load_jobs
from codeward.cli.options import egress_headers, egress_settings
from codeward.redaction import redacted
from codeward.usage import UsageError
from tests.cli.conftest import write_script


@pytest.fixture
def mitmdump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A stand-in mitmdump (these tests start no proxy), found where CODEWARD_MITMDUMP says."""
    program = tmp_path / "mitmdump"
    program.write_text("#!/bin/sh\nexit 0\n")
    program.chmod(0o755)
    monkeypatch.setenv("CODEWARD_MITMDUMP", str(program))
    return program


def test_a_header_value_ending_in_env_is_read_from_the_environment_and_kept_secret(monkeypatch) -> None:
    monkeypatch.setenv("CW_TEST_API_KEY", "sk-from-env-41f9")
    headers = egress_headers(["api.example.com:Authorization=Bearer env:CW_TEST_API_KEY", "x.org:8443:X-Plain=a=b"])
    assert headers == {
        "api.example.com": {"Authorization": "Bearer sk-from-env-41f9"},
        "x.org:8443": {"X-Plain": "a=b"},
    }
    assert "sk-from-env-41f9" not in redacted("the key is sk-from-env-41f9")


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (["api.example.com=Bearer x"], "HOST:NAME=VALUE"),
        (["Authorization=x"], "HOST:NAME=VALUE"),
        (["api.example.com:Authorization=env:CW_TEST_UNSET_VARIABLE"], "CW_TEST_UNSET_VARIABLE is not set"),
    ],
)
def test_a_malformed_header_option_is_refused_with_the_form(options: list[str], said: str) -> None:
    with pytest.raises(UsageError, match=said):
        egress_headers(options)


def test_egress_settings_become_the_docker_executors_arguments(mitmdump: Path) -> None:
    settings = egress_settings("docker", ["api.example.com"], ["api.example.com:X-Key=k1"])
    assert settings == {"egress": ["api.example.com"], "egress_headers": {"api.example.com": {"X-Key": "k1"}}}
    assert egress_settings("local", None, []) == {}


def test_egress_with_a_sandbox_that_has_no_proxy_is_a_clear_error(mitmdump: Path) -> None:
    for executor in ("local", "jupyter"):
        with pytest.raises(UsageError, match="use --executor docker"):
            egress_settings(executor, ["pypi.org"], [])


def test_headers_need_a_listed_host(mitmdump: Path) -> None:
    with pytest.raises(UsageError, match="--egress HOST"):
        egress_settings("docker", None, ["pypi.org:X=1"])
    with pytest.raises(UsageError, match="does not allow"):
        egress_settings("docker", ["pypi.org"], ["example.org:X=1"])


def test_a_missing_proxy_is_told_before_anything_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CODEWARD_MITMDUMP", str(tmp_path / "absent"))
    with pytest.raises(UsageError, match="not an executable mitmdump"):
        egress_settings("docker", ["pypi.org"], [])


def test_run_refuses_egress_on_the_local_sandbox(codeward, tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    done = codeward("run", "T", "--model", model, "--egress", "pypi.org")
    assert done.returncode == 2 and "use --executor docker" in " ".join(done.stderr.split())


def test_batch_refuses_egress_unless_jobs_run_in_docker(codeward, tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: T}\n")
    done = codeward("batch", "jobs.yaml", "--model", model, "--egress", "pypi.org")
    assert done.returncode == 2 and "--egress is for docker jobs" in " ".join(done.stderr.split())


# -- jobs files ---------------------------------------------------------------------


def _jobs(tmp_path: Path, *entries: dict, **defaults) -> list:
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps({"task": "T", **entry}) + "\n" for entry in entries))
    return load_jobs(
        tmp_path / "jobs.jsonl", JobDefaults(model=f"script:{tmp_path / 'm.yaml'}", executor="docker", **defaults)
    )


def _refusal(tmp_path: Path, entry: dict, **defaults) -> str:
    with pytest.raises(JobFileError) as caught:
        _jobs(tmp_path, {"id": "a", **entry}, **defaults)
    return " ".join(str(caught.value).split())


def test_docker_jobs_get_the_command_lines_egress_and_headers(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    headers = {"api.example.com": {"X-Key": "k1"}}
    (job,) = _jobs(tmp_path, {"id": "a"}, egress=["api.example.com", "pypi.org"], egress_headers=headers)
    assert job.executor_kwargs == {"egress": ["api.example.com", "pypi.org"], "egress_headers": headers}
    (job,) = _jobs(tmp_path, {"id": "a"})
    assert "egress" not in job.executor_kwargs


def test_a_job_may_narrow_the_list_and_keeps_only_the_headers_of_hosts_it_still_names(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    headers = {"api.example.com": {"X-Key": "k1"}}
    cli = {"egress": ["api.example.com", "*.pythonhosted.org"], "egress_headers": headers}
    (narrow,) = _jobs(tmp_path, {"id": "a", "egress": ["files.pythonhosted.org"]}, **cli)
    assert narrow.executor_kwargs == {"egress": ["files.pythonhosted.org"]}
    (closed,) = _jobs(tmp_path, {"id": "a", "egress": []}, **cli)
    assert closed.executor_kwargs == {"egress": []}


def test_a_job_cannot_widen_the_list_without_consent(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    said = _refusal(tmp_path, {"egress": ["pypi.org", "evil.example"]}, egress=["pypi.org"])
    assert "'evil.example'" in said and "--allow-job-egress" in said
    assert "--allow-job-egress" in _refusal(tmp_path, {"egress": ["pypi.org"]})  # no --egress at all
    assert "--allow-job-egress" in _refusal(tmp_path, {"egress": ["pypi.org:8080"]}, egress=["pypi.org"])
    (job,) = _jobs(tmp_path, {"id": "a", "egress": ["evil.example"]}, egress=["pypi.org"], allow_egress=True)
    assert job.executor_kwargs == {"egress": ["evil.example"]}


def test_a_job_cannot_add_headers_without_consent(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    job = {"egress_headers": {"pypi.org": {"Authorization": "Bearer attacker"}}}
    said = _refusal(tmp_path, job, egress=["pypi.org"], egress_headers={"pypi.org": {"Authorization": "Bearer mine"}})
    assert "cannot add headers" in said and "--allow-job-egress" in said
    (allowed,) = _jobs(tmp_path, {"id": "a", **job}, egress=["pypi.org"], allow_egress=True)
    assert allowed.executor_kwargs["egress_headers"] == {"pypi.org": {"Authorization": "Bearer attacker"}}


def test_a_jobs_file_never_reads_the_environment_even_with_consent(tmp_path: Path, monkeypatch) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    monkeypatch.setenv("CW_TEST_HOST_KEY", "host-secret-77c1")
    job = {"egress": ["collector.example"], "egress_headers": {"collector.example": {"X": "env:CW_TEST_HOST_KEY"}}}
    said = _refusal(tmp_path, job, allow_egress=True)
    assert "never does" in said and "--egress-header" in said
    assert "host-secret-77c1" not in said


def test_a_job_cannot_reach_egress_through_executor_kwargs(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    said = _refusal(tmp_path, {"executor_kwargs": {"egress": ["evil.example"]}}, allow_executors=True)
    assert "'egress'" in said and "'egress' and 'egress_headers' fields" in said


def test_egress_on_a_job_without_docker_is_refused(tmp_path: Path) -> None:
    (tmp_path / "m.yaml").write_text('["final_answer(1)"]')
    said = _refusal(tmp_path, {"executor": "e2b", "egress": []})
    assert "only docker sandboxes have an egress list" in said


def test_mcp_serve_and_replay_refuse_egress_on_the_local_sandbox(codeward, tmp_path: Path) -> None:
    for args in (("mcp", "serve"), ("replay", "run.json")):
        done = codeward(*args, "--egress", "pypi.org")
        assert done.returncode == 2 and "use --executor docker" in " ".join((done.stdout + done.stderr).split())


def test_egress_passes_to_another_executor_only_if_it_takes_an_egress_list(mitmdump: Path, monkeypatch) -> None:
    from codeward.cli import options

    class Takes:
        def __init__(self, egress: list[str] | None = None) -> None: ...

    class Refuses:
        def __init__(self, timeout_seconds: float = 30) -> None: ...

    monkeypatch.setattr("codeward.executors.base.executor_class", lambda name: Takes if name == "e2b" else Refuses)
    assert "e2b" in options.egress_executors() and "jupyter" not in options.egress_executors()
    assert egress_settings("e2b", ["pypi.org"], []) == {"egress": ["pypi.org"]}
    with pytest.raises(UsageError, match="use --executor docker"):
        egress_settings("jupyter", ["pypi.org"], [])


def test_a_ray_job_with_egress_starts_its_own_sandbox_so_its_proxy_is_the_tasks(monkeypatch) -> None:
    ray_nodes = pytest.importorskip("codeward.batch.ray_nodes")
    pools = ray_nodes.NodePools("run", "node", "attempt")
    pools._actor = object()  # a node whose actor keeps warm sandboxes
    assert pools.executor_kwargs("docker", {"egress": ["pypi.org"]}) == {"egress": ["pypi.org"]}
    monkeypatch.setattr(ray_nodes._NodePool, "_take", lambda self: None)
    assert "pool" in pools.executor_kwargs("docker", {"timeout_seconds": 5})  # the control: a job without egress


def test_the_audit_counts_a_blocks_requests_and_shows_those_not_let_through() -> None:
    from codeward.batch.audit import MAX_EGRESS_SHOWN, egress_summary

    requests = [{"method": "GET", "host": "pypi.org", "port": 443, "verdict": "allowed", "path": "", "reason": ""}] * 3
    requests += [
        {"method": "CONNECT", "host": f"h{n}.example", "port": 443, "verdict": "refused", "reason": "no"}
        for n in range(30)
    ]
    summary = egress_summary(requests)
    assert (summary["allowed"], summary["refused"], summary["failed"]) == (3, 30, 0)
    assert summary["hosts"] == ["pypi.org:443"]
    assert len(summary["not_allowed"]) == MAX_EGRESS_SHOWN
    assert summary["not_allowed"][0] == {
        "method": "CONNECT",
        "host": "h0.example",
        "port": 443,
        "verdict": "refused",
        "reason": "no",
    }
