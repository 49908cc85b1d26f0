"""A jobs file is checked whole before anything runs; each fault names the job and the field."""

from __future__ import annotations

import json

import pytest

from codeward.batch.jobs import JobDefaults, JobFileError, load_jobs
from codeward.usage import UsageError
from tests.cli.conftest import SAMPLE_TOOLS, write_script


@pytest.fixture
def model(tmp_path):
    return write_script(tmp_path / "model.yaml", "final_answer(1)")


def test_a_yaml_file_resolves_defaults_and_file_references(tmp_path, model):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "vars.json").write_text(json.dumps({"a": 1}))
    (tmp_path / "data" / "t.csv").write_text("x\n1\n")
    (tmp_path / "jobs.yaml").write_text(
        "- id: 1\n  task: First.\n  additional_args: '@data/vars.json'\n"
        "- id: two\n  task: Second.\n  model: script:model.yaml\n  executor: local\n  max_steps: 3\n"
        "  timeout_seconds: 2.5\n  authorized_imports: [math]\n  additional_args: {table: '@data/t.csv', at: '@@home'}\n"
    )
    first, second = load_jobs(tmp_path / "jobs.yaml", JobDefaults(model=model, tools=[SAMPLE_TOOLS]))
    assert first.id == "1" and first.model == f"script:{tmp_path / 'model.yaml'}" and first.max_steps == 20
    assert first.additional_args == f"@{tmp_path / 'data' / 'vars.json'}" and first.tools == [SAMPLE_TOOLS]
    assert second.max_steps == 3 and second.timeout_seconds == 2.5 and second.authorized_imports == ["math"]
    assert second.additional_args == {"table": f"@{tmp_path / 'data' / 't.csv'}", "at": "@@home"}


def test_every_fault_is_reported_with_its_job_and_field(tmp_path, model):
    lines = [
        {"id": "ok", "task": "Fine."},
        {"id": "ok", "task": "Same id."},
        {"task": "No id."},
        {"id": "a", "task": "", "max_steps": 0},
        {"id": "b", "task": "T", "timeout": 5},
        {"id": "c", "task": "T", "executor": "nope", "model": "script:missing.yaml"},
        {"id": "d", "task": "T", "additional_args": {"x": "@missing.csv", "_y": 1}},
        {"id": "e", "task": "T", "tools": ["no_such_module:x"], "timeout_seconds": -1},
    ]
    path = tmp_path / "jobs.jsonl"
    path.write_text("\n".join(json.dumps(line) for line in lines) + "\n")
    with pytest.raises(JobFileError) as caught:
        load_jobs(path, JobDefaults(model=model))
    message = str(caught.value)
    assert "nothing was run" in message
    expected = [
        "line 2, field 'id': 'ok' is also the id of line 1",
        "line 3, field 'id': is missing",
        "line 4 (id 'a'), field 'task': must be a non-empty string",
        "line 4 (id 'a'), field 'max_steps': must be a positive integer, got 0",
        "line 5 (id 'b'), field 'timeout': is not a job field",
        "line 6 (id 'c'), field 'executor': unknown executor 'nope'",
        "line 6 (id 'c'), field 'model': script:",
        "line 7 (id 'd'), field 'additional_args.x':",
        "line 7 (id 'd'), field 'additional_args': the name '_y' starts with '_'",
        "line 8 (id 'e'), field 'tools': 'no_such_module:x' is not a tool name",
        "line 8 (id 'e'), field 'timeout_seconds': must be a positive number, got -1",
    ]
    for fragment in expected:
        assert fragment in message, fragment


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        ("jobs.yaml", "id: x\ntask: y\n", "holds a list of jobs"),
        ("jobs.yaml", "- [unclosed\n", "not valid YAML"),
        ("jobs.jsonl", '{"id": "a", "task": "t"}\n{oops\n', "line 2 is not valid JSON"),
        ("jobs.txt", "", "jobs files are .yaml, .yml or .jsonl"),
        ("jobs.jsonl", "\n", "holds no jobs"),
        ("jobs.yaml", "- just a string\n", "a job is a map"),
        ("jobs.yaml", b"- {id: a, task: caf\xe9}\n", "not UTF-8 text"),
    ],
)
def test_a_malformed_file_is_refused(tmp_path, model, name, text, message):
    (tmp_path / name).write_bytes(text if isinstance(text, bytes) else text.encode())
    with pytest.raises(JobFileError, match=message):
        load_jobs(tmp_path / name, JobDefaults(model=model))


def test_a_jobs_file_past_the_budget_of_a_read_file_is_refused_by_its_size(tmp_path, model, monkeypatch):
    """A jobs file may come from someone else: it is read whole only within the budget any file
    codeward reads whole is held to, and refused by its size before it is read."""
    jobs = tmp_path / "jobs.jsonl"
    jobs.write_text(json.dumps({"id": "a", "task": "t"}) + "\n" + " " * 4000 + "\n")
    monkeypatch.setenv("CODEWARD_MOST_FILE_BYTES", "4000")
    size = jobs.stat().st_size
    with pytest.raises(
        UsageError, match=f"holds {size:,} bytes, which is over the 4,000 bytes.*CODEWARD_MOST_FILE_BYTES"
    ):
        load_jobs(jobs, JobDefaults(model=model))
    monkeypatch.setenv("CODEWARD_MOST_FILE_BYTES", "5000")  # control: within the budget it is read
    assert [job.id for job in load_jobs(jobs, JobDefaults(model=model))] == ["a"]


def test_a_jobs_file_named_through_a_link_is_read(tmp_path, model):
    """The jobs file is the user's own argument: a link they made to it is followed, as any path they type."""
    (tmp_path / "kept").mkdir()
    (tmp_path / "kept" / "jobs.yaml").write_text("- {id: a, task: t}\n")
    (tmp_path / "jobs.yaml").symlink_to(tmp_path / "kept" / "jobs.yaml")
    assert [job.id for job in load_jobs(tmp_path / "jobs.yaml", JobDefaults(model=model))] == ["a"]


def test_a_job_without_any_model_says_where_to_set_one(tmp_path):
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: t}\n")
    with pytest.raises(JobFileError, match="field 'model': no model: set the job's model, pass --model"):
        load_jobs(tmp_path / "jobs.yaml", JobDefaults())


def test_the_command_refuses_a_bad_file_before_running_anything(codeward, tmp_path, model):
    (tmp_path / "jobs.jsonl").write_text(
        json.dumps({"id": "a", "task": "t", "model": model})
        + "\n"
        + json.dumps({"id": "b", "task": "t", "max_steps": "ten"})
        + "\n"
    )
    done = codeward("batch", "jobs.jsonl", "--model", model)
    assert done.returncode == 2
    assert "line 2 (id 'b'), field 'max_steps'" in done.stderr and "Traceback" not in done.stderr + done.stderr
    assert not (tmp_path / "results.jsonl").exists() and not (tmp_path / "audit.jsonl").exists()


@pytest.mark.parametrize("wrapped", [False, True], ids=["list", "jobs map"])
def test_a_yaml_fault_names_the_line_its_job_starts_on(tmp_path, model, wrapped):
    jobs = "- id: a\n  task: Fine.\n\n# the next job has a typo\n- id: b\n  task: T\n  max_step: 3\n"
    if wrapped:
        jobs = "jobs:\n" + "".join(f"  {line}\n" if line else "\n" for line in jobs.splitlines())
    (tmp_path / "jobs.yaml").write_text(jobs)
    with pytest.raises(JobFileError) as caught:
        load_jobs(tmp_path / "jobs.yaml", JobDefaults(model=model))
    line = 6 if wrapped else 5
    assert f"job 2 at line {line} (id 'b'), field 'max_step': is not a job field" in str(caught.value)


@pytest.mark.parametrize("field", ["authorized_imports", "tools"])
def test_a_lone_string_where_a_job_takes_a_list_says_what_to_write(tmp_path, model, field):
    (tmp_path / "jobs.yaml").write_text(f"- {{id: a, task: t, {field}: fractions}}\n")
    with pytest.raises(JobFileError, match=rf"field '{field}': must be a list of .*\['fractions'\]"):
        load_jobs(tmp_path / "jobs.yaml", JobDefaults(model=model, allow_imports=True))


@pytest.mark.parametrize("allowed", [False, True], ids=["without-consent", "with-consent"])
def test_a_limit_written_as_a_string_is_a_typo_not_a_setting_to_consent_to(tmp_path, model, allowed):
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: t, executor_kwargs: {timeout_seconds: '5'}}\n")
    with pytest.raises(JobFileError) as caught:
        load_jobs(tmp_path / "jobs.yaml", JobDefaults(model=model, allow_executors=allowed))
    message = str(caught.value)
    assert "1 problem, nothing was run" in message
    assert "sets 'timeout_seconds' to '5', a string: a limit is a number, written without quotes" in message
    assert "--allow-job-executors" not in message
