"""What a batch's jobs share is settled before the first job runs: a mistake there exits 2 with nothing run.

Each test runs the real command; "nothing run" is seen three ways: no results file, no audit file,
and no file that a job's code would have touched (a host tool, `touch`, writes it).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeward.platform.models import setup_problem
from tests.cli.conftest import SAMPLE_TOOLS, write_script
from tests.platform.openai_server import ChatServer


def _jobs(folder: Path, *jobs: dict[str, str]) -> None:
    """A JSONL jobs file; each job without a model of its own touches a file named after its id."""
    (folder / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))


def _nothing_ran(folder: Path) -> bool:
    return (
        not (folder / "results.jsonl").exists()
        and not (folder / "audit.jsonl").exists()
        and not list(folder.glob("ran-*"))
    )


def _one_line(done) -> str:
    return " ".join((done.stdout + done.stderr).split())


def test_a_model_without_its_key_stops_the_batch_before_any_job_naming_the_variable(codeward, tmp_path) -> None:
    near = write_script(tmp_path / "near.yaml", "final_answer(touch('ran-near'))")
    _jobs(
        tmp_path,
        {"id": "far", "task": "Far."},
        {"id": "other", "task": "Far too."},
        {"id": "near", "task": "Near.", "model": near},
    )
    args = ("batch", "jobs.jsonl", "--model", "openai/gpt-4o-mini", "--tools", SAMPLE_TOOLS)
    done = codeward(*args)
    shown = _one_line(done)
    assert done.returncode == 2, shown
    assert shown.count("no API key for 'openai/gpt-4o-mini': set OPENAI_API_KEY") == 1, shown  # once per model
    assert "--model (used by 2 jobs naming no model)" in shown and "nothing was run" in shown
    assert _nothing_ran(tmp_path)

    # control: with the key set the same batch runs every job (the model is a loopback server, no network)
    answer = "Thought: go\n<code>\nfinal_answer(touch('ran-far'))\n</code>"
    with ChatServer([answer, answer]) as server:
        ran = codeward(*args, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=server.url)
    assert ran.returncode == 0, _one_line(ran)
    assert {path.name for path in tmp_path.glob("ran-*")} == {"ran-far", "ran-near"}
    assert "3 jobs in " in ran.stdout


def test_a_jobs_model_no_provider_knows_is_named_by_its_line(codeward, tmp_path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(touch('ran-a'))")
    _jobs(
        tmp_path,
        {"id": "a", "task": "Fine."},
        {"id": "b", "task": "Odd.", "model": "nosuchprovider/x"},
        {"id": "c", "task": "Odd too.", "model": "nosuchprovider/x"},
    )
    done = codeward("batch", "jobs.jsonl", "--model", model, "--tools", SAMPLE_TOOLS)
    shown = _one_line(done)
    assert done.returncode == 2, shown
    assert (
        "line 2 (id 'b'), line 3 (id 'c'), field 'model': litellm knows no provider for the model id 'nosuchprovider/x'"
        in shown
    )
    assert "Provider List" not in shown and "Traceback" not in shown
    assert _nothing_ran(tmp_path)


def test_the_command_lines_model_with_no_provider_is_refused_before_any_job(codeward, tmp_path) -> None:
    _jobs(tmp_path, {"id": "a", "task": "One."})
    done = codeward("batch", "jobs.jsonl", "--model", "nosuchprovider/x")
    shown = _one_line(done)
    assert done.returncode == 2, shown
    assert "--model (used by 1 job naming no model): litellm knows no provider" in shown
    assert _nothing_ran(tmp_path)


def test_codeward_model_is_named_when_it_gave_the_model(codeward, tmp_path) -> None:
    _jobs(tmp_path, {"id": "a", "task": "One."})
    done = codeward("batch", "jobs.jsonl", CODEWARD_MODEL="anthropic/claude-3-5-haiku-latest")
    shown = _one_line(done)
    assert done.returncode == 2, shown
    assert "CODEWARD_MODEL (used by 1 job naming no model): no API key for" in shown and "ANTHROPIC_API_KEY" in shown
    assert _nothing_ran(tmp_path)


def test_runtime_without_the_docker_executor_is_refused_not_ignored(codeward, tmp_path) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(touch('ran-a'))")
    _jobs(tmp_path, {"id": "a", "task": "One."})
    args = ("batch", "jobs.jsonl", "--model", model, "--tools", SAMPLE_TOOLS)
    done = codeward(*args, "--runtime", "runsc")
    shown = _one_line(done)
    assert done.returncode == 2, shown
    assert "--runtime applies only to docker sandboxes, and jobs here run in the 'local' sandbox" in shown
    assert "pass --executor docker" in shown and "runtime: runsc in the jobs file" in shown
    assert _nothing_ran(tmp_path)
    other = codeward(*args, "--runtime", "kata")
    assert other.returncode == 2 and "jobs file" not in _one_line(other)  # only gVisor may a job ask for itself
    # control: the same batch without --runtime runs its job
    ran = codeward(*args)
    assert ran.returncode == 0, _one_line(ran)
    assert (tmp_path / "ran-a").exists() and "1 job in " in ran.stdout


@pytest.mark.parametrize("word", ["bogus", "success", ""])
def test_retry_takes_only_its_words(codeward, tmp_path, word) -> None:
    model = write_script(tmp_path / "model.yaml", "final_answer(touch('ran-a'))")
    _jobs(tmp_path, {"id": "a", "task": "One."})
    done = codeward("batch", "jobs.jsonl", "--model", model, "--tools", SAMPLE_TOOLS, "--retry", word)
    assert done.returncode == 2 and "argument --retry: invalid choice" in done.stderr, done.stderr
    assert _nothing_ran(tmp_path)


def test_keys_are_checked_only_where_the_jobs_get_this_environment(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert "set OPENAI_API_KEY" in str(setup_problem("openai/gpt-4o-mini"))
    assert setup_problem("openai/gpt-4o-mini", keys=False) is None  # a Ray cluster joined by address has its own
    assert "knows no provider" in str(setup_problem("nosuchprovider/x", keys=False))  # wherever the jobs run
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert setup_problem("openai/gpt-4o-mini") is None


@pytest.mark.parametrize("model", ["bedrock/anthropic.claude-v2", "vertex_ai/gemini-pro", "ollama/llama3"])
def test_credentials_kept_outside_the_environment_are_left_to_the_call(monkeypatch, model) -> None:
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "VERTEXAI_PROJECT", "OLLAMA_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    assert setup_problem(model) is None  # an AWS profile, gcloud's login, a local server: not API keys
