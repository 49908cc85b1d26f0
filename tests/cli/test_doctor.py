"""`codeward doctor`: a line per component, and for each missing one, what to do."""

from __future__ import annotations


def test_doctor_reports_each_component_with_a_fix_for_what_is_missing(codeward):
    done = codeward("doctor", E2B_API_KEY="", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "✓ codeward:" in out and "✓ executor local: importable" in out
    assert "✗ docker engine: not reachable" in out and "set DOCKER_HOST" in out
    assert "jupyter kernels" in out
    assert "✗ e2b: E2B_API_KEY is not set" in out
    assert "✗ provider keys: none set" in out and "codeward demo" in out
    assert "Traceback" not in out + done.stderr


def test_doctor_sees_a_model_and_a_key_when_set(codeward):
    done = codeward("doctor", CODEWARD_MODEL="script:m.yaml", OPENAI_API_KEY="sk-test")
    assert "✓ CODEWARD_MODEL: script:m.yaml" in done.stdout and "✓ provider keys: OPENAI_API_KEY" in done.stdout
    assert "sk-test" not in done.stdout  # a key's value is never shown
