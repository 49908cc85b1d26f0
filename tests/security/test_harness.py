"""The attack suite checks itself: with the sandbox switched off, every attack in it must fail.

An attack test that passes with no sandbox tests nothing (its payload fails on its
own, or its assertions accept any error). Each attack's control shows the payload
works unsandboxed; this test shows the other half, for the whole suite at once, so
it stays true as attacks are added.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

from codeward.executors.base import ExecutionError
from tests.security.conftest import refused_by_sandbox
from tests.security.unsandboxed import HostHarmed, Unsandboxed

SUITE = Path(__file__).parent


@pytest.mark.timeout(900)
def test_the_suite_notices_a_missing_sandbox(tmp_path: Path) -> None:
    report = tmp_path / "report.xml"
    env = {**os.environ, "CODEWARD_SECURITY_SANDBOX": "off"}
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            str(SUITE),
            f"--ignore={__file__}",
            "-q",
            "-p",
            "no:cacheprovider",
            "-o",
            "addopts=",
            f"--junitxml={report}",
        ],
        env=env,
        cwd=SUITE.parent.parent,
        capture_output=True,
        text=True,
        timeout=880,
    )
    cases = ElementTree.parse(report).getroot().iter("testcase")
    outcomes = {f"{case.get('classname')}::{case.get('name')}": _outcome(case) for case in cases}
    assert len(outcomes) > 200, f"the attack suite shrank to {len(outcomes)} tests"
    survivors = sorted(name for name, outcome in outcomes.items() if outcome != "failed")
    assert not survivors, f"attack tests that do not notice a missing sandbox: {survivors}"


def _outcome(case: ElementTree.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return "failed"
    return "skipped" if case.find("skipped") is not None else "passed"


def test_the_unsandboxed_control_does_harm_and_reports_what_stopped_it(tmp_path: Path) -> None:
    canary = tmp_path / "pwned"
    with Unsandboxed() as plain:
        assert plain.run(f"import os\nos.system('touch {canary}')\n1 + 1").output == 2
        with pytest.raises(HostHarmed, match="SystemExit stopped the process"):
            plain.run("raise SystemExit(0)")
        with pytest.raises(HostHarmed, match="still running"):
            plain.run("while True:\n    pass")
        with pytest.raises(ExecutionError) as info:
            plain.run("'a' * 10**12")
    assert canary.exists()
    assert info.value.error_type == "MemoryError" and not refused_by_sandbox(info.value)
