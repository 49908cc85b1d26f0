"""Bad input is one line and exit 2; a fault of codeward's own (or of a sandbox mid-run) is exit 1
with its traceback kept in a file, never passed off as bad input."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest

from codeward import cli
from codeward.cli import run as run_command
from codeward.executors.base import SandboxError
from tests.platform.openai_server import ChatServer


@pytest.mark.parametrize(
    "fault", [RuntimeError("boom inside codeward"), SandboxError("the Docker engine went away mid-run")], ids=repr
)
def test_a_fault_exits_1_and_keeps_its_traceback(fault, monkeypatch, capsys, tmp_path: Path) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))

    def failing_run(args, console):
        raise fault

    monkeypatch.setattr(run_command, "_run", failing_run)
    assert cli.main(["run", "a task", "--model", "script:model.yaml"]) == 1
    said = capsys.readouterr()
    assert said.out == "" and len(said.err.splitlines()) == 1, said  # one line on stderr, at any width
    shown = said.err
    assert "codeward failed" in shown and str(fault) in shown and "error:" not in shown
    [log] = tmp_path.glob("codeward-failure-*.log")
    assert log.name in shown.replace(" ", "")
    assert "Traceback (most recent call last)" in log.read_text() and str(fault) in log.read_text()


def test_bad_input_exits_2_with_one_line_and_no_traceback(capsys, tmp_path: Path) -> None:
    assert cli.main(["run", "a task", "--model", f"script:{tmp_path / 'missing.yaml'}"]) == 2
    shown = capsys.readouterr().err
    assert shown.startswith("error:") and "Traceback" not in shown


def test_a_sandbox_that_cannot_start_is_a_setup_step_exit_2(capsys, tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text("- '<code>final_answer(1)</code>'\n")
    code = cli.main(["run", "a task", "--model", f"script:{tmp_path / 'model.yaml'}", "--executor", "no-such-sandbox"])
    shown = " ".join(capsys.readouterr().err.split())
    assert code == 2 and "unknown executor 'no-such-sandbox'" in shown and "Traceback" not in shown


def test_a_model_without_its_key_is_a_setup_step_told_once(codeward) -> None:
    done = codeward("run", "a task", "--model", "openai/gpt-4o-mini")
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, shown
    assert "error: the model cannot be called: no API key for 'openai/gpt-4o-mini': set OPENAI_API_KEY" in shown
    assert "Give Feedback" not in shown and "Traceback" not in shown


def test_a_refused_key_is_asked_once_not_retried(codeward) -> None:
    with ChatServer([], fail_first=10, fail_status=401) as server:
        done = codeward(
            "run", "a task", "--model", "openai/gpt-4o-mini", OPENAI_API_KEY="wrong-key", OPENAI_BASE_URL=server.url
        )
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, shown
    assert len(server.requests) == 1
    assert "the provider refused the key for 'openai/gpt-4o-mini' (401: Incorrect API key provided" in shown
    assert "check OPENAI_API_KEY" in shown and "Give Feedback" not in shown


def test_a_model_id_with_no_provider_exits_2_with_one_message(codeward) -> None:
    done = codeward("run", "a task", "--model", "foo:bar")
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, shown
    assert shown.count("knows no provider for the model id 'foo:bar'") == 1
    assert "the model failed" not in shown and "Provider List" not in shown


def test_a_model_that_fails_mid_run_exits_1_saying_so_once(codeward, tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text("- '<code>print(1)</code>'\n")
    done = codeward("run", "a task", "--model", "script:model.yaml", "--max-steps", "3")
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, shown
    assert shown.count("the model failed") == 1 and "ScriptedModel has no response left" in shown


@pytest.mark.parametrize("command", ["run", "batch"])
@pytest.mark.parametrize("steps", ["0", "-3"])
def test_max_steps_below_one_is_a_usage_error_that_names_the_flag(command, steps, capsys, tmp_path: Path) -> None:
    (tmp_path / "model.yaml").write_text("- '<code>final_answer(1)</code>'\n")
    (tmp_path / "jobs.jsonl").write_text('{"id": "a", "task": "a task"}\n')
    given = ["a task"] if command == "run" else [str(tmp_path / "jobs.jsonl"), "--out", str(tmp_path / "out.jsonl")]
    code = cli.main([command, *given, "--model", f"script:{tmp_path / 'model.yaml'}", "--max-steps", steps])
    shown = " ".join(capsys.readouterr().err.split())
    assert code == 2, shown
    assert f"--max-steps must be at least 1, got {steps}" in shown and "sandbox" not in shown, shown
    assert not (tmp_path / "out.jsonl").exists()
