"""`codeward run` with a model it cannot reach: a line on stderr per retry, then the cause in one sentence.

The model is a real litellm call to a loopback port nothing listens on; the retries' waits are
made small through the variables a user sets for them.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tests.platform.openai_server import closed_port


def test_an_unreachable_model_is_told_at_each_retry_and_once_when_the_run_gives_up(codeward) -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    done = codeward(
        "run", "a task", "--model", "openai/gpt-4o-mini",
        OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base, CODEWARD_MODEL_RETRIES="2", CODEWARD_MODEL_RETRY_WAIT="0.05",
    )  # fmt: skip
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 1, shown
    retries = re.findall(
        rf"^model call failed: could not reach {re.escape(base)} \(connection refused\); try (\d) of 3 in (\d\.\d\d) s$",
        done.stderr,
        re.MULTILINE,
    )
    assert [number for number, _ in retries] == ["2", "3"], done.stderr
    assert all(float(wait) <= 0.1 for _, wait in retries)
    assert shown.count(f"could not reach the model at {base} after 3 tries: connection refused") == 1
    assert "InternalServerError" not in shown and "litellm" not in shown and "Traceback" not in shown


def test_retry_settings_that_mean_nothing_are_a_usage_error(codeward) -> None:
    done = codeward("run", "a task", "--model", "openai/gpt-4o-mini", CODEWARD_MODEL_RETRY_WAIT="soon")
    shown = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2, shown
    assert "error: CODEWARD_MODEL_RETRY_WAIT='soon': write the seconds the first retry may wait, from 0 to 60" in shown


def test_a_batch_jobs_retries_are_shown_by_the_batch_not_kept_in_its_workers_stderr(codeward, tmp_path: Path) -> None:
    base = f"http://127.0.0.1:{closed_port()}/v1"
    (tmp_path / "jobs.yaml").write_text("- {id: far, task: One.}\n")
    done = codeward(
        "batch", "jobs.yaml", "--model", "openai/gpt-4o-mini",
        OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=base, CODEWARD_MODEL_RETRIES="1", CODEWARD_MODEL_RETRY_WAIT="0.05",
    )  # fmt: skip
    shown = " ".join((done.stdout + done.stderr).split())
    assert f"job far: model call failed: could not reach {base} (connection refused); try 2 of 2 in 0.0" in shown
    [result] = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert result["status"] == "error"
    assert result["error"].endswith(f"could not reach the model at {base} after 2 tries: connection refused")
