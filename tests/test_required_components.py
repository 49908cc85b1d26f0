"""CI's promise: where CODEWARD_REQUIRE_ALL=1 (or its old name, CODEWARD_REQUIRE_DOCKER=1), a test of an
optional part cannot pass by skipping, whatever is missing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from codeward.executors.base import install_line

ROOT = Path(__file__).resolve().parents[1]
DOCKER_TESTS = "tests/executors/docker/test_pool.py"


FLAGS = ("CODEWARD_REQUIRE_ALL", "CODEWARD_REQUIRE_DOCKER")


def _pytest(
    tmp_path: Path, require: bool, *, flag: str = FLAGS[0], tests: str = DOCKER_TESTS, **env: str
) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if k not in FLAGS}
    environment.update(env)
    if require:
        environment[flag] = "1"
    return subprocess.run(
        [sys.executable, "-m", "pytest", tests, "-q", "-p", "no:cacheprovider", "-o", "addopts=", "-rs"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture
def sdk_hidden(tmp_path: Path) -> str:
    folder = tmp_path / "hidden"
    folder.mkdir()
    (folder / "docker.py").write_text("raise ImportError('the docker SDK is hidden for this test')\n")
    return os.pathsep.join([str(folder), str(ROOT / "src")])


@pytest.mark.parametrize("flag", FLAGS)
def test_without_the_sdk_docker_tests_skip_and_under_the_flag_fail(tmp_path: Path, sdk_hidden: str, flag: str) -> None:
    relaxed = _pytest(tmp_path, require=False, PYTHONPATH=sdk_hidden)  # exit 5: its one module was skipped whole
    assert relaxed.returncode in (0, 5) and "skipped" in relaxed.stdout and install_line("docker") in relaxed.stdout
    required = _pytest(tmp_path, require=True, flag=flag, PYTHONPATH=sdk_hidden)
    assert required.returncode != 0 and "CODEWARD_REQUIRE_ALL=1" in required.stdout, required.stdout[-2000:]


def test_without_an_engine_docker_tests_fail_under_the_flag(tmp_path: Path) -> None:
    required = _pytest(tmp_path, require=True, DOCKER_HOST=f"unix://{tmp_path / 'no-engine.sock'}")
    assert required.returncode != 0 and "CODEWARD_REQUIRE_ALL=1" in required.stdout, required.stdout[-2000:]
    assert " passed" not in required.stdout.splitlines()[-1]


OTHER_PYTHON_TEST = "tests/executors/test_codec_safety.py::test_data_values_cross_to_another_interpreter_and_back"


def test_without_a_second_python_the_cross_interpreter_test_skips_and_under_the_flag_fails(tmp_path: Path) -> None:
    relaxed = _pytest(tmp_path, require=False, tests=OTHER_PYTHON_TEST, CODEWARD_TEST_PYTHONS="")
    assert relaxed.returncode == 0 and "1 skipped" in relaxed.stdout and "CODEWARD_TEST_PYTHONS" in relaxed.stdout
    required = _pytest(tmp_path, require=True, tests=OTHER_PYTHON_TEST, CODEWARD_TEST_PYTHONS="")
    assert required.returncode != 0 and "1 failed" in required.stdout, required.stdout[-2000:]
    assert "CODEWARD_REQUIRE_ALL=1" in required.stdout and ".ci/other-pythons.sh" in required.stdout


def test_a_test_run_for_any_docker_profile_counts_as_a_docker_test() -> None:
    from tests.conftest import _needs_docker

    assert _needs_docker("tests/executors/contract/test_contract.py::test_x[docker-runsc]", {"name": "docker-runsc"})
    assert _needs_docker("tests/cli/test_x.py::test_y[docker]", {"executor": "docker"})
    assert not _needs_docker("tests/cli/test_x.py::test_y[local]", {"executor": "local", "file": "dockerfile"})
