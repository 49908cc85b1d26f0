"""`codeward doctor`: a line per component, and for each missing one, what to do."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys

import pytest

from codeward import cli
from codeward.cli import doctor
from codeward.executors.base import install_line
from tests.cli.conftest import SRC


def test_doctor_reports_each_component_with_a_fix_for_what_is_missing(codeward):
    done = codeward("doctor", E2B_API_KEY="", DOCKER_HOST="unix:///nonexistent/docker.sock")
    assert done.returncode == 1, done.stdout + done.stderr  # the engine DOCKER_HOST names is broken
    out = done.stdout
    assert "✓ codeward:" in out and "✓ executor local: importable" in out
    assert "✗ docker engine: not reachable" in out and "set DOCKER_HOST" in out
    assert "jupyter kernels" in out
    assert "– e2b: E2B_API_KEY is not set" in out  # not set up: not broken
    assert "– provider keys: none set" in out and "codeward demo" in out
    assert "1 of " in out
    assert "Traceback" not in out + done.stderr


def test_doctor_sees_a_model_and_a_key_when_set(codeward):
    done = codeward("doctor", CODEWARD_MODEL="script:m.yaml", OPENAI_API_KEY="sk-test")
    assert "✓ CODEWARD_MODEL: script:m.yaml" in done.stdout and "✓ provider keys: OPENAI_API_KEY" in done.stdout
    assert "sk-test" not in done.stdout  # a key's value is never shown


def test_doctor_prints_pip_lines_that_work_when_pasted(codeward, tmp_path):
    """The extras' names survive the terminal's markup, and a line pasted into a shell installs
    (pip resolves it here with --dry-run): codeward installed from a checkout names that checkout."""
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    for module in ("docker", "e2b_code_interpreter", "jupyter_client"):
        (hidden / f"{module}.py").write_text("raise ModuleNotFoundError('hidden for this test', name=__name__)\n")
    done = codeward("doctor", PYTHONPATH=os.pathsep.join([str(hidden), SRC]))
    for extra in ("docker", "jupyter", "e2b"):
        assert install_line(extra) in done.stdout, done.stdout
    assert "pip install 'codeward'\n" not in done.stdout
    pasted = shlex.split(install_line("docker"))
    tried = subprocess.run(
        [sys.executable, "-m", *pasted[:2], "--dry-run", "--no-deps", "-q", *pasted[2:]],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert tried.returncode == 0, tried.stderr


def test_the_docker_commands_name_the_extra_they_need(codeward, tmp_path):
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "docker.py").write_text("raise ModuleNotFoundError('hidden for this test', name=__name__)\n")
    for args in (("images", "build"), ("sandboxes", "ls")):
        done = codeward(*args, PYTHONPATH=os.pathsep.join([str(hidden), SRC]))
        assert done.returncode == 2 and install_line("docker") in done.stderr, done.stderr


def test_doctor_shows_the_local_workers_confinement_layers(codeward, tmp_path):
    done = codeward("doctor")
    for layer in ("rlimits", "no_new_privs", "seccomp", "landlock"):
        assert f"local {layer}:" in done.stdout, done.stdout
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "pyseccomp.py").write_text("raise ModuleNotFoundError('hidden for this test', name=__name__)\n")
    done = codeward("doctor", PYTHONPATH=os.pathsep.join([str(hidden), SRC]))
    assert "– local seccomp:" in done.stdout and "confinement='strict'" in done.stdout, done.stdout


def _passing() -> list[doctor.Check]:
    return [doctor.Check("sound", True, "works")]


def _crashing() -> list[doctor.Check]:
    raise OSError("the socket vanished")


def _not_set_up() -> list[doctor.Check]:
    return [doctor.Check("extra", False, "not installed", "pip install it", optional=True)]


def test_doctor_exits_0_when_nothing_is_broken(monkeypatch, capsys) -> None:
    monkeypatch.delenv("DOCKER_HOST", raising=False)
    monkeypatch.setattr(doctor, "_SECTIONS", [_passing, _not_set_up])
    assert cli.main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "✗" not in out and "– extra: not installed" in out, out


@pytest.mark.parametrize("broken", [doctor._docker, _crashing], ids=["docker host pointing nowhere", "a check crashed"])
def test_doctor_exits_1_when_a_check_it_prints_is_broken(broken, monkeypatch, capsys) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    monkeypatch.setattr(doctor, "_SECTIONS", [_passing, broken])
    assert cli.main(["doctor"]) == 1
    out = capsys.readouterr().out
    assert "✓ sound: works" in out and "✗" in out, out
