"""`codeward run --json` prints exactly one JSON object on stdout whatever happens, with an `error` when
the run failed and the steps it truly ran; a run out of steps reports no answer, with --json and without."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.conftest import code, write_script


def _the_object(stdout: str) -> dict:
    [line] = stdout.splitlines()
    return json.loads(line)


def test_a_run_out_of_steps_reports_one_step_no_answer_and_why(codeward, tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "x = 1", "x = 2", "final_answer(x)")
    done = codeward("run", "Count.", "--model", model, "--max-steps", "1", "--json")
    assert done.returncode == 1, done.stderr
    result = _the_object(done.stdout)
    assert result["state"] == "max_steps_error" and result["step_count"] == 1
    assert result["output"] is None and "out of steps" in result["error"] and "--max-steps 1" in result["error"]


def test_a_run_out_of_steps_shows_no_code_as_its_answer(codeward, tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "x = 1", "x = 2")
    done = codeward("run", "Count.", "--model", model, "--max-steps", "1")
    assert done.returncode == 1, done.stderr
    assert "Final answer" not in done.stdout and "x = 2" not in done.stdout
    assert "Out of steps: no final answer after 1 step" in done.stdout and "max_steps_error · 1 step ·" in done.stdout
    assert "out of steps: no final answer after 1 step (--max-steps 1)" in done.stderr


def test_a_successful_run_has_a_null_error_and_its_step_count(codeward, tmp_path: Path) -> None:
    model = write_script(tmp_path / "model.yaml", "x = 20", "final_answer(x + 22)")
    done = codeward("run", "Count.", "--model", model, "--json")
    assert done.returncode == 0, done.stderr
    result = _the_object(done.stdout)
    assert result["output"] == 42 and result["error"] is None and result["step_count"] == 2


def test_a_model_that_fails_mid_run_still_gives_one_object_with_the_error(codeward, tmp_path: Path) -> None:
    # A scripted model whose second answer is a reply it cannot give: it raises on the second call.
    (tmp_path / "model.yaml").write_text(yaml.safe_dump([code("x = 1")]))
    done = codeward("run", "Count.", "--model", "script:model.yaml", "--max-steps", "5", "--json")
    assert done.returncode == 1, done.stderr
    result = _the_object(done.stdout)
    assert result["state"] == "error" and result["output"] is None and result["step_count"] == 1
    assert "ScriptedModel has no response left" in result["error"]
    assert "ScriptedModel has no response left" in done.stderr


def test_bad_input_under_json_is_one_object_with_the_error(codeward, tmp_path: Path) -> None:
    done = codeward("run", "Count.", "--model", "script:missing.yaml", "--json")
    assert done.returncode == 2
    result = _the_object(done.stdout)
    assert result["output"] is None and "missing.yaml" in result["error"] and result["exit_code"] == 2
    unparsed = codeward("run", "--json")
    assert unparsed.returncode == 2 and "required: task" in _the_object(unparsed.stdout)["error"]
