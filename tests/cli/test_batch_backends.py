"""The batch backends' seams: Ray stays out of a base install, and misuse is refused with a clear error."""

from __future__ import annotations

import subprocess
import sys

import pytest

from codeward.batch.runner import BatchOptions, run_batch
from tests.cli.conftest import command_env


def test_a_base_import_of_the_batch_never_imports_ray() -> None:
    probe = "import sys, codeward.batch.runner, codeward.batch.display, codeward.cli; print('ray' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=command_env(), timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "False"


def test_env_without_ray_is_refused(codeward, tmp_path) -> None:
    (tmp_path / "jobs.jsonl").write_text('{"id": "a", "task": "t", "model": "script:m.yaml"}\n')
    (tmp_path / "m.yaml").write_text("- '<code>\\nfinal_answer(1)\\n</code>'\n")
    done = codeward("batch", "jobs.jsonl", "--env", "OPENAI_API_KEY")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "use it with --ray" in done.stdout + done.stderr
    assert not (tmp_path / "results.jsonl").exists()


def test_an_unknown_backend_is_named_in_the_error(tmp_path) -> None:
    with pytest.raises(ValueError, match=r"unknown batch backend 'spark'.*'ray'"):
        run_batch([], BatchOptions(tmp_path / "results.jsonl", None, 1), backend="spark")
