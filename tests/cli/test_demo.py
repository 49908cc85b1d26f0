"""`codeward demo`, run as a user runs it: the real command in a subprocess."""

from __future__ import annotations

import pytest


def test_demo_runs_the_recorded_task_in_the_local_sandbox(codeward):
    done = codeward("demo")
    assert done.returncode == 0, done.stderr + done.stdout
    assert "The model in this demo is a recording" in done.stdout
    assert "KeyError" in done.stdout  # the recorded mistake, really raised by the sandbox
    assert "Cairo will be warmest at 24.5 °C, 21.0 °C warmer than Oslo." in done.stdout


def test_demo_with_an_unknown_executor_says_which_exist(codeward):
    done = codeward("demo", "--executor", "nope")
    assert done.returncode == 2
    assert "unknown executor 'nope'; choose one of docker, e2b, jupyter, local" in done.stderr
    assert "did you mean" not in done.stderr  # nothing is close to 'nope'
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize("command", ["demo", "run", "batch", "replay", "mcp serve"])
def test_a_mistyped_executor_stops_before_anything_is_shown_with_the_name_meant(codeward, command):
    more = {"run": ["task"], "batch": ["jobs.jsonl"], "replay": ["run.json"]}.get(command, [])
    done = codeward(*command.split(), *more, "--executor", "dokcer")
    assert done.returncode == 2, done.stderr
    assert "unknown executor 'dokcer'; did you mean 'docker'?" in done.stderr
    assert done.stdout == ""  # no banner, no step before the refusal


@pytest.mark.parametrize("command", ["demo", "run", "batch", "replay", "mcp serve"])
def test_the_executor_help_names_the_choices(codeward, command):
    done = codeward(*command.split(), "--help")
    assert "one of docker, e2b, jupyter, local" in " ".join(done.stdout.split())


def test_the_demo_recording_still_replays_on_the_local_executor(codeward):
    from codeward.demo import recording_path

    done = codeward("replay", str(recording_path()), "--tools", "codeward.demo:forecast")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "replay passed" in done.stdout
