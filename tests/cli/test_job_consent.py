"""A jobs file describes work; the command line grants power. Checking a file runs nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from codeward.batch import jobs as jobs_module
from codeward.batch.jobs import JobDefaults, JobFileError, load_jobs
from tests.cli.conftest import SAMPLE_TOOLS, command_env, write_script

MARKER_TOOLS = """
from pathlib import Path

from codeward import tool

Path(__file__).with_name("imported.marker").write_text("imported")


@tool
def shout(text: str) -> str:
    \"\"\"The text in capitals.

    Args:
        text: Any text.
    \"\"\"
    return text.upper()
"""


@pytest.fixture
def model(tmp_path: Path) -> str:
    return write_script(tmp_path / "model.yaml", "final_answer(1)")


def _said(done: subprocess.CompletedProcess[str]) -> str:
    """What the command said was wrong: one line on stderr, whatever the width."""
    return done.stderr


def _refusal(tmp_path: Path, job: dict, **defaults) -> str:
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": "a", "task": "T", **job}) + "\n")
    with pytest.raises(JobFileError) as caught:
        load_jobs(tmp_path / "jobs.jsonl", JobDefaults(**defaults))
    return str(caught.value)


def test_a_refused_file_never_imports_the_command_lines_tool_module(codeward, tmp_path, model):
    (tmp_path / "marker_tools.py").write_text(MARKER_TOOLS)
    jobs = [{"id": "a", "task": "Shout.", "tools": ["shout"]}, {"id": "b", "task": "T", "max_steps": "ten"}]
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    done = codeward("batch", "jobs.jsonl", "--model", model, "--tools", "marker_tools.py")
    assert done.returncode == 2 and "field 'max_steps'" in _said(done)
    assert not (tmp_path / "imported.marker").exists()


def test_a_job_cannot_name_a_tool_module(codeward, tmp_path, model):
    (tmp_path / "marker_tools.py").write_text(MARKER_TOOLS)
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: T, tools: ['marker_tools.py:shout']}\n")
    done = codeward("batch", "jobs.yaml", "--model", model)
    assert done.returncode == 2 and "cannot load modules or files" in _said(done)
    assert not (tmp_path / "imported.marker").exists()


def test_a_job_selects_among_the_command_lines_tools_by_name(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "final_answer(double(21))")
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: T, tools: [double]}\n- {id: b, task: T, tools: [triple]}\n")
    done = codeward("batch", "jobs.yaml", "--model", model, "--tools", SAMPLE_TOOLS)
    assert done.returncode == 2 and "no tool named 'triple' among those --tools loads" in _said(done)
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: T, tools: [double]}\n")
    done = codeward("batch", "jobs.yaml", "--model", model, "--tools", SAMPLE_TOOLS)
    assert done.returncode == 0, done.stdout
    assert json.loads((tmp_path / "results.jsonl").read_text())["output"] == 42


def test_imports_beyond_the_defaults_need_the_command_lines_consent(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "import fractions\nfinal_answer(str(fractions.Fraction(1, 3)))")
    (tmp_path / "jobs.yaml").write_text(f"- {{id: a, task: T, model: '{model}', authorized_imports: ['*']}}\n")
    refused = codeward("batch", "jobs.yaml")
    assert refused.returncode == 2 and "--allow-job-imports" in _said(refused)
    assert not (tmp_path / "results.jsonl").exists()
    done = codeward("batch", "jobs.yaml", "--allow-job-imports")
    assert done.returncode == 0, done.stdout
    assert json.loads((tmp_path / "results.jsonl").read_text())["output"] == "1/3"


def test_the_issues_attack_is_refused_before_anything_runs(codeward, tmp_path):
    marker = tmp_path / "host.marker"
    script = write_script(tmp_path / "attack.yaml", f"import os\nos.system('touch {marker}')\nfinal_answer(1)")
    job = {"id": "x", "task": "T", "model": script, "authorized_imports": ["*"]}
    (tmp_path / "jobs.jsonl").write_text(json.dumps(job) + "\n")
    done = codeward("batch", "jobs.jsonl")
    assert done.returncode == 2 and "--allow-job-imports" in _said(done) and not marker.exists()


def test_imports_within_the_defaults_need_no_consent(tmp_path, model):
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: T, authorized_imports: [math, json]}\n")
    (job,) = load_jobs(tmp_path / "jobs.yaml", JobDefaults(model=model))
    assert job.authorized_imports == ["math", "json"]


@pytest.mark.parametrize(
    ("job", "executor"),
    [
        ({"executor": "jupyter"}, "local"),
        ({"executor": "local"}, "docker"),
        ({"executor_kwargs": {"isolation": "in_process"}}, "local"),
        ({"executor_kwargs": {"timeout_seconds": 3600}}, "local"),
        ({"executor_kwargs": {"max_memory_bytes": None}}, "local"),
    ],
    ids=["jupyter under local", "local under docker", "in-process", "a longer time limit", "no memory limit"],
)
def test_a_weaker_sandbox_needs_the_command_lines_consent(tmp_path, model, job, executor):
    message = _refusal(tmp_path, job, model=model, executor=executor)
    assert "--allow-job-executors" in message
    (job_checked,) = load_jobs(
        tmp_path / "jobs.jsonl", JobDefaults(model=model, executor=executor, allow_executors=True)
    )
    assert job_checked.executor == job.get("executor", executor)


def test_a_stronger_sandbox_or_a_tighter_limit_needs_no_consent(tmp_path, model):
    (tmp_path / "jobs.jsonl").write_text(
        json.dumps({"id": "a", "task": "T", "executor": "docker"})
        + "\n"
        + json.dumps({"id": "b", "task": "T", "executor_kwargs": {"timeout_seconds": 5, "max_operations": 1000}})
        + "\n"
    )
    first, second = load_jobs(tmp_path / "jobs.jsonl", JobDefaults(model=model))
    assert first.executor == "docker" and second.executor_kwargs == {"timeout_seconds": 5, "max_operations": 1000}


@pytest.mark.parametrize("where", ["../model.yaml", "/etc/model.yaml", "sub/../../model.yaml"])
def test_a_script_model_outside_the_jobs_folder_is_refused(tmp_path, where):
    folder = tmp_path / "jobs"
    folder.mkdir()
    write_script(tmp_path / "model.yaml", "final_answer(1)")
    message = _refusal(folder, {"model": f"script:{where}"})
    assert "field 'model'" in message and "outside the jobs file's folder" in message


def test_a_variable_file_outside_the_jobs_folder_is_refused(tmp_path, model):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (tmp_path / "secret.json").write_text('{"key": "s3cret"}')
    message = _refusal(folder, {"additional_args": {"key": "@../secret.json"}}, model=model)
    assert "field 'additional_args.key'" in message and "outside the jobs file's folder" in message


def test_a_link_inside_the_jobs_folder_to_a_file_outside_it_is_refused(tmp_path, model):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (tmp_path / "secret.json").write_text('{"key": "s3cret"}')
    (folder / "data.json").symlink_to(tmp_path / "secret.json")
    message = _refusal(folder, {"additional_args": {"key": "@data.json"}}, model=model)
    assert "field 'additional_args.key'" in message and "outside the jobs file's folder" in message


def test_control_without_the_inside_rule_the_link_reaches_the_outside_file(tmp_path, model, monkeypatch):
    monkeypatch.setattr(jobs_module, "inside", lambda folder, name: folder / name)
    folder = tmp_path / "jobs"
    folder.mkdir()
    (tmp_path / "secret.json").write_text('{"key": "s3cret"}')
    (folder / "data.json").symlink_to(tmp_path / "secret.json")
    (folder / "jobs.jsonl").write_text(json.dumps({"id": "a", "task": "T", "additional_args": {"key": "@data.json"}}))
    (job,) = load_jobs(folder / "jobs.jsonl", JobDefaults(model=model))
    assert job.additional_args == {"key": f"@{(tmp_path / 'secret.json').resolve()}"}  # the user's own file


def _readme_example(section: str, until: str) -> str:
    """The first bash block of a README section, as a user would paste it."""
    readme = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")
    text = readme[readme.index(section) : readme.index(until)]
    return re.findall(r"```bash\n(.*?)```", text, re.S)[0]


def test_the_readmes_batch_example_still_works(tmp_path):
    script = "set -e\n" + _readme_example("### codeward run", "### codeward replay")
    script += _readme_example("### codeward batch", "### codeward images")
    script = re.sub(r"(?m)^codeward ", f"{sys.executable} -m codeward.cli ", script)
    done = subprocess.run(
        ["bash", "-c", script], cwd=tmp_path, env=command_env(), capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    results = [json.loads(line) for line in (tmp_path / "runs" / "results.jsonl").read_text().splitlines()]
    assert {r["id"]: r["status"] for r in results} == {"usd": "success", "gbp": "success"}
