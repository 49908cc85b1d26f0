"""`CodeAgent(collect_outputs=True)` on every executor: the files the code writes under outputs/ reach
the run's result with their bytes; a changed file is collected again, an unchanged one is not; a
link the sandbox planted there is never followed (the control: a plain file beside it is collected).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward import CodeAgent
from codeward.executors.base import Executor
from codeward.platform.artifacts import OutputsBudget
from codeward.platform.models import ScriptedModel
from tests.executors.contract.test_files import SECRET, host_folder, outside, plant_link

__all__ = ["outside"]  # a fixture, imported for the tests here

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 4

WRITE_BOTH = f"""<code>
with open('outputs/chart.png', 'wb') as f:
    f.write({PNG!r})
with open('outputs/report.txt', 'w') as f:
    f.write('first report')
</code>"""
CHANGE_REPORT = """<code>
with open('outputs/report.txt', 'w') as f:
    f.write('second report, longer')
</code>"""
DONE = "<code>\nfinal_answer('done')\n</code>"


@pytest.fixture
def clean(executor: Executor) -> Iterator[Executor]:
    """The executor, its outputs/ emptied (the E2B test server's sandbox is shared within the process)."""
    files = executor.files
    if files.exists("outputs"):
        for name in files.list("outputs"):
            if not name.endswith("/"):
                files.remove(f"outputs/{name}")
    yield executor


def test_outputs_are_collected_and_only_again_when_changed(clean: Executor) -> None:
    agent = CodeAgent(
        [], ScriptedModel([WRITE_BOTH, CHANGE_REPORT, DONE]), executor=clean, collect_outputs=True, verbosity_level=0
    )
    result = agent.run("write a chart and a report", return_full_result=True)
    steps = agent.memory.action_steps()
    assert [(a.name, a.data) for a in steps[0].artifacts] == [("chart.png", PNG), ("report.txt", b"first report")]
    assert [(a.name, a.data) for a in steps[1].artifacts] == [("report.txt", b"second report, longer")]
    assert steps[2].artifacts == []
    assert [a.name for a in result.artifacts] == ["chart.png", "report.txt", "report.txt"]
    assert steps[0].artifacts[0].media_type == "image/png"
    assert "Files in outputs/: chart.png (1.0 KB), report.txt (12 B)" in (steps[0].observations or "")
    assert all(step.artifact_notes == [] for step in steps)


def test_a_planted_link_is_not_collected_and_a_plain_file_is(clean: Executor, outside: Path) -> None:
    target = "/etc/passwd" if host_folder(clean) is None else outside
    agent = CodeAgent([], ScriptedModel([DONE]), executor=clean, collect_outputs=True, verbosity_level=0)
    agent.run("x")  # makes outputs/
    plant_link(clean, "outputs/stolen.txt", target)
    clean.files.write("outputs/plain.txt", "mine")
    assert agent.outputs is not None
    found = agent.outputs.collect(clean.files)
    assert [(a.name, a.data) for a in found.artifacts] == [("plain.txt", b"mine")]
    assert all(SECRET.encode() not in a.data and b"root:" not in a.data for a in found.artifacts)
    assert [note.split(":")[0] for note in found.all_notes()] == ["stolen.txt"]
    clean.files.remove("outputs/stolen.txt")


def test_a_file_over_the_per_file_budget_is_left_off_with_the_budget_named(clean: Executor) -> None:
    write = "<code>\nwith open('outputs/big.bin', 'wb') as f:\n    f.write(b'b' * 2000)\nwith open('outputs/small.txt', 'w') as f:\n    f.write('s' * 1000)\n</code>"
    agent = CodeAgent(
        [],
        ScriptedModel([write, DONE]),
        executor=clean,
        collect_outputs=True,
        outputs_budget=OutputsBudget(most_file_bytes=1000),
        verbosity_level=0,
    )
    used = clean.files.budget.used  # type: ignore[attr-defined]
    result = agent.run("x", return_full_result=True)
    assert [(a.name, a.size) for a in result.artifacts] == [("small.txt", 1000)]
    assert agent.memory.action_steps()[0].artifact_notes == ["big.bin: over the budget of 1,000 bytes a file"]
    assert clean.files.budget.used - used < 1900  # type: ignore[attr-defined]  # the big file never crossed whole
