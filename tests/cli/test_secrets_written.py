"""A value read from a file only its owner may read is a secret: no run file, result or audit line
codeward writes holds it, and a replay asks for it again instead of finding it saved.

Controls: the same file readable by all (then it is a plain value) is written where it goes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codeward.redaction import REDACTED, url_without_secrets
from tests.cli.conftest import write_script

SECRET = "pw-5e2d9c0b7a61"


def _secret_file(folder: Path, mode: int) -> Path:
    path = folder / "token.json"
    path.write_text(json.dumps(SECRET))
    path.chmod(mode)
    return path


@pytest.mark.parametrize("mode, kept", [(0o600, False), (0o644, True)], ids=["private", "control-world-readable"])
def test_a_private_value_stays_out_of_the_run_file(codeward, tmp_path: Path, mode: int, kept: bool) -> None:
    _secret_file(tmp_path, mode)
    model = write_script(tmp_path / "model.yaml", "print('using', token)\nfinal_answer(len(token))")
    done = codeward("run", "Use the token.", "--model", model, "--var", "token=@token.json", "--save", "run.json")
    assert done.returncode == 0, done.stdout + done.stderr
    saved = (tmp_path / "run.json").read_text()
    assert (SECRET in saved) is kept
    if not kept:
        assert REDACTED in saved  # what the code printed, with the secret replaced
        (tmp_path / "token.json").unlink()
        replayed = codeward("replay", "run.json")
        assert replayed.returncode == 2 and "--var token=@" in replayed.stderr, replayed.stderr


@pytest.mark.parametrize("mode, kept", [(0o600, False), (0o644, True)], ids=["private", "control-world-readable"])
def test_a_private_value_stays_out_of_batch_results_audit_and_runs(
    codeward, tmp_path: Path, mode: int, kept: bool
) -> None:
    _secret_file(tmp_path, mode)
    # the code holds it too, as a model's would once it had seen the value: the audit keeps code
    model = write_script(tmp_path / "model.yaml", f"assert token == {SECRET!r}\nfinal_answer(token)")
    job = {"id": "a", "task": "Hand back the token.", "model": model, "additional_args": {"token": "@token.json"}}
    (tmp_path / "jobs.jsonl").write_text(json.dumps(job) + "\n")
    done = codeward("batch", "jobs.jsonl", "--runs", "out")
    assert done.returncode == 0, done.stdout + done.stderr
    for name in ("results.jsonl", "audit.jsonl", "a.json"):
        assert (SECRET in (tmp_path / "out" / name).read_text()) is kept, name


def test_a_urls_credentials_are_marked_and_never_shown() -> None:
    url = "https://user:s3cr3t-pass@mcp.example/mcp?api_key=k-0123456789&region=eu"
    shown = url_without_secrets(url)
    assert "s3cr3t-pass" not in shown and "k-0123456789" not in shown and "region=eu" in shown
    from codeward.redaction import redacted

    assert redacted("connecting with s3cr3t-pass and k-0123456789") == f"connecting with {REDACTED} and {REDACTED}"
