"""A number of more digits than Python reads as an int, in a file a user was handed or in a model's
answer: the command says which file and what is wrong (exit 2), or shows the line as bad, and never
fails as a crash. ``json.loads`` and YAML raise a plain ValueError for such a number, past readers
that catch only the JSON error (the controls show it)."""

from __future__ import annotations

import json
import sys

import pytest
import yaml

from codeward.json_values import read_json
from codeward.platform.models import ReplayModel
from codeward.platform.parsing import extract_tool_call
from tests.cli.conftest import SAMPLE_TOOLS, write_script

LONG = "7" * (sys.get_int_max_str_digits() + 1)


def test_the_controls_a_plain_reader_crashes_on():
    for parse in (json.loads, yaml.safe_load):
        with pytest.raises(ValueError) as raised:
            parse(f"[{LONG}]")
        assert not isinstance(raised.value, json.JSONDecodeError)  # what `except JSONDecodeError` lets through


def test_read_json_says_where_the_number_is():
    with pytest.raises(json.JSONDecodeError) as raised:
        read_json(f'{{"steps": [{LONG}]}}')
    assert raised.value.msg.startswith("a number of more than") and raised.value.pos == len('{"steps": [')
    assert read_json(b'{"n": 12}') == {"n": 12}


def test_a_saved_run_holding_one(codeward, tmp_path):
    (tmp_path / "run.json").write_text(f'{{"steps": [{{"step_number": {LONG}}}]}}')
    done = codeward("view", "run.json", "-o", "run.html")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "run.json is not JSON (a number of more than" in " ".join(done.stderr.split())
    assert "codeward failed" not in done.stderr and not (tmp_path / "run.html").exists()
    with pytest.raises(ValueError, match="is not a saved run: invalid JSON"):
        ReplayModel(tmp_path / "run.json")


def test_a_batch_folder_whose_lines_hold_one(codeward, tmp_path):
    runs = tmp_path / "runs"
    runs.mkdir()
    (runs / "results.jsonl").write_text(
        json.dumps({"id": "fine", "status": "success", "output": 1}) + "\n"
        f'{{"id": "long", "status": "success", "output": {LONG}}}\n'
    )
    (runs / "audit.jsonl").write_text(f'{{"job_id": "fine", "step": {LONG}}}\n')
    done = codeward("view", "--runs", "runs", "-o", "page")
    assert done.returncode == 0, done.stdout + done.stderr
    page = (tmp_path / "page").read_text() if (tmp_path / "page").is_file() else (tmp_path / "page.html").read_text()
    assert "a number of more than" in page and "fine" in page  # the bad line shown as one, the rest kept


@pytest.mark.parametrize("kind", ["jsonl", "yaml"])
def test_a_jobs_file_holding_one(codeward, tmp_path, kind):
    if kind == "jsonl":
        (tmp_path / "jobs.jsonl").write_text(f'{{"id": "a", "task": "T", "max_steps": {LONG}}}\n')
    else:
        (tmp_path / "jobs.yaml").write_text(f"jobs:\n  - id: a\n    task: T\n    max_steps: {LONG}\n")
    done = codeward("batch", f"jobs.{kind}", "--tools", SAMPLE_TOOLS, "--runs", "runs")
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"jobs.{kind}" in done.stderr and "not valid" in done.stderr and "codeward failed" not in done.stderr
    assert not (tmp_path / "runs" / "results.jsonl").exists()  # nothing ran


def test_a_resumed_batch_whose_results_hold_one(codeward, tmp_path):
    (tmp_path / "jobs.jsonl").write_text(json.dumps({"id": "a", "task": "T", "model": "script:m.yaml"}) + "\n")
    write_script(tmp_path / "m.yaml", "final_answer(1)")
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "results.jsonl").write_text(f'{{"id": "a", "status": "success", "output": {LONG}}}\n')
    done = codeward("batch", "jobs.jsonl", "--runs", "runs")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "results.jsonl: line 1 is not a JSON record (a number of more than" in " ".join(done.stderr.split())


def test_a_variable_file_and_a_script_holding_one(codeward, tmp_path):
    (tmp_path / "n.json").write_text(f'{{"n": {LONG}}}')
    write_script(tmp_path / "m.yaml", "final_answer(n)")
    done = codeward("run", "T", "--model", "script:m.yaml", "--var", "n=@n.json")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "n.json is not valid JSON: a number of more than" in " ".join(done.stderr.split())
    (tmp_path / "s.json").write_text(f'["{LONG[:5]}", {LONG}]')
    done = codeward("run", "T", "--model", "script:s.json")
    assert done.returncode == 2 and "script:s.json is not valid JSON" in " ".join(done.stderr.split()), done.stderr


def test_a_models_tool_call_holding_one_is_passed_over():
    text = f'{{"name": "long", "arguments": {{"n": {LONG}}}}} then {{"name": "add", "arguments": "{{\\"n\\": 1}}"}}'
    assert extract_tool_call(text) == ("add", {"n": 1})
