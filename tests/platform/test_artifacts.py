"""`CodeAgent(collect_outputs=True)` on the local executor: what is collected, what is left off and why.

The files are put in the sandbox's folder from outside (the local code may not import os), as
another process of the sandbox's could; each budget has a test that fails when that budget
alone is gone (set to a size that no longer binds), and each attack a control.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward import CodeAgent
from codeward.platform import artifacts
from codeward.platform.artifacts import Artifact, OutputsBudget, human_size, media_type, safe_name
from codeward.platform.models import ScriptedModel

SECRET = "the host's own secret, never the sandbox's"
UNBOUND = 10**12

STEP = "<code>\nprint('step')\n</code>"
DONE = "<code>\nfinal_answer('done')\n</code>"


def agent_with(steps: int = 1, budget: OutputsBudget | None = None) -> CodeAgent:
    return CodeAgent(
        [],
        ScriptedModel([STEP] * steps + [DONE]),
        executor="local",
        collect_outputs=True,
        outputs_budget=budget,
        verbosity_level=0,
    )


@pytest.fixture
def agent() -> Iterator[CodeAgent]:
    with agent_with() as made:
        yield made


def outputs(agent: CodeAgent) -> Path:
    """The sandbox's outputs/ folder, made as a run makes it."""
    assert agent.outputs is not None
    folder = Path(agent.executor.working_folder) / "outputs"  # type: ignore[attr-defined]
    if not folder.exists():
        agent.outputs.start_run(agent.executor.files)
    return folder


def collect(agent: CodeAgent) -> tuple[list[Artifact], list[str]]:
    assert agent.outputs is not None
    found = agent.outputs.collect(agent.executor.files)
    return found.artifacts, found.all_notes()


# -- what is collected -------------------------------------------------------------------------------


def test_the_code_writes_outputs_and_the_run_and_the_model_see_them() -> None:
    code = "<code>\nwith open('outputs/chart.png', 'wb') as f:\n    f.write(b'\\x89PNG\\r\\n\\x1a\\n' + bytes(12000))\n</code>"
    model = ScriptedModel([code, DONE])
    with CodeAgent([], model, executor="local", collect_outputs=True, verbosity_level=0) as agent:
        result = agent.run("draw", return_full_result=True)
    assert [(a.name, a.size, a.media_type) for a in result.artifacts] == [("chart.png", 12008, "image/png")]
    assert "Files in outputs/: chart.png (12 KB)" in str(model.calls[1][-1].content)


def test_collection_is_off_by_default_and_nothing_is_made() -> None:
    with CodeAgent([], ScriptedModel([STEP, DONE]), executor="local", verbosity_level=0) as agent:
        result = agent.run("x", return_full_result=True)
        assert not agent.executor.files.exists("outputs")
    assert result.artifacts == []


def test_folders_inside_outputs_are_walked(agent: CodeAgent) -> None:
    (outputs(agent) / "plots" / "a").mkdir(parents=True)
    (outputs(agent) / "plots" / "a" / "one.csv").write_text("x,y\n")
    found, notes = collect(agent)
    assert [a.name for a in found] == ["plots/a/one.csv"] and found[0].media_type == "text/csv"
    assert notes == []


def test_a_failed_step_still_collects_what_it_wrote() -> None:
    code = "<code>\nwith open('outputs/partial.txt', 'w') as f:\n    f.write('half')\n1 / 0\n</code>"
    with CodeAgent([], ScriptedModel([code, DONE]), executor="local", collect_outputs=True, verbosity_level=0) as agent:
        result = agent.run("x", return_full_result=True)
        step = agent.memory.action_steps()[0]
    assert step.error is not None and [a.data for a in step.artifacts] == [b"half"]
    assert [a.name for a in result.artifacts] == ["partial.txt"]


# -- links and other things that are not plain files ---------------------------------------------------


def test_a_link_to_a_host_file_is_not_collected_and_a_plain_file_is(agent: CodeAgent, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    folder = outputs(agent)
    os.symlink(secret, folder / "stolen.txt")
    os.symlink(tmp_path, folder / "stolen-folder")
    (folder / "plain.txt").write_text("mine")  # the control
    found, notes = collect(agent)
    assert [(a.name, a.data) for a in found] == [("plain.txt", b"mine")]
    assert all(SECRET.encode() not in a.data for a in found)
    assert any(note.startswith("stolen.txt:") and "link" in note for note in notes)
    assert any(note.startswith("stolen-folder:") and "link" in note for note in notes)


def test_control_reading_the_link_plainly_reaches_the_host_file(agent: CodeAgent, tmp_path: Path) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text(SECRET)
    os.symlink(secret, outputs(agent) / "stolen.txt")
    assert (outputs(agent) / "stolen.txt").read_text() == SECRET


def test_outputs_itself_as_a_link_is_refused(agent: CodeAgent, tmp_path: Path) -> None:
    folder = outputs(agent)
    folder.rmdir()
    (tmp_path / "host.txt").write_text(SECRET)
    os.symlink(tmp_path, folder)
    found, notes = collect(agent)
    assert found == [] and notes and "link" in notes[0]


def test_a_fifo_is_skipped_without_blocking(agent: CodeAgent) -> None:
    os.mkfifo(outputs(agent) / "pipe")
    (outputs(agent) / "plain.txt").write_text("mine")
    found, notes = collect(agent)
    assert [a.name for a in found] == ["plain.txt"]
    assert any(note.startswith("pipe:") and "plain file" in note for note in notes)


# -- the budgets: each with a test that fails without it ---------------------------------------------


def test_a_file_over_the_per_file_budget_is_left_off_with_the_budget_named(agent: CodeAgent) -> None:
    (outputs(agent) / "big.bin").write_bytes(bytes(artifacts.MOST_FILE_BYTES + 1))
    (outputs(agent) / "small.txt").write_text("ok")  # the control
    found, notes = collect(agent)
    assert [a.name for a in found] == ["small.txt"]
    assert notes == [f"big.bin: over the budget of {artifacts.MOST_FILE_BYTES:,} bytes a file"]


def test_control_without_the_per_file_budget_the_big_file_is_collected() -> None:
    with agent_with(budget=OutputsBudget(most_file_bytes=UNBOUND)) as agent:
        (outputs(agent) / "big.bin").write_bytes(bytes(artifacts.MOST_FILE_BYTES + 1))
        found, _ = collect(agent)
    assert [a.size for a in found] == [artifacts.MOST_FILE_BYTES + 1]


def _six_files_of_nine_mib(agent: CodeAgent) -> None:
    for index in range(6):
        (outputs(agent) / f"part{index}.bin").write_bytes(bytes([index]) * (9 * 2**20))


def test_a_run_stops_at_its_byte_budget(agent: CodeAgent) -> None:
    _six_files_of_nine_mib(agent)
    found, notes = collect(agent)
    assert [a.name for a in found] == [f"part{i}.bin" for i in range(5)]
    assert sum(a.size for a in found) <= artifacts.MOST_RUN_BYTES
    assert len(notes) == 1 and notes[0].startswith("part5.bin: past what is left")
    assert f"{artifacts.MOST_RUN_BYTES:,} bytes" in notes[0]


def test_control_without_the_run_byte_budget_all_six_are_collected() -> None:
    with agent_with(budget=OutputsBudget(most_run_bytes=UNBOUND)) as agent:
        _six_files_of_nine_mib(agent)
        found, _ = collect(agent)
    assert len(found) == 6


def _many_small_files(agent: CodeAgent, count: int) -> None:
    folder = outputs(agent)
    for index in range(count):
        (folder / f"f{index:05}.txt").write_text(str(index))


def test_ten_thousand_small_files_stop_at_the_count(agent: CodeAgent) -> None:
    _many_small_files(agent, 10_000)
    found, notes = collect(agent)
    assert len(found) == artifacts.MOST_FILES
    assert notes[0] == f"f{artifacts.MOST_FILES:05}.txt: past the run's budget of {artifacts.MOST_FILES} files"
    assert agent.executor.files.budget.used < 120_000  # type: ignore[attr-defined]  # the listing; the rest unread
    assert len(notes) <= 21 and notes[-1].endswith("more file(s) left off")


def test_control_without_the_count_more_files_are_collected() -> None:
    with agent_with(budget=OutputsBudget(most_files=UNBOUND)) as agent:
        _many_small_files(agent, 200)
        found, _ = collect(agent)
    assert len(found) == 200


def test_a_step_looks_at_a_bounded_number_of_names() -> None:
    with agent_with(budget=OutputsBudget(most_files=UNBOUND, most_entries=100)) as agent:
        _many_small_files(agent, 300)
        found, notes = collect(agent)
    assert len(found) == 100
    assert notes == ["200 more name(s) not looked at: a step looks at 100 names at most"]


def test_control_without_the_name_budget_every_name_is_looked_at() -> None:
    with agent_with(budget=OutputsBudget(most_files=UNBOUND, most_entries=UNBOUND)) as agent:
        _many_small_files(agent, 300)
        found, notes = collect(agent)
    assert len(found) == 300 and notes == []


def test_the_notes_a_step_keeps_are_bounded(agent: CodeAgent) -> None:
    _many_small_files(agent, 1000)
    _, notes = collect(agent)
    assert len(notes) == 21 and notes[-1] == f"{1000 - artifacts.MOST_FILES - 20:,} more file(s) left off"


def _deep(agent: CodeAgent, depth: int) -> None:
    folder = outputs(agent).joinpath(*[f"d{i}" for i in range(depth)])
    folder.mkdir(parents=True)
    (folder / "deep.txt").write_text("deep")


def test_folders_deeper_than_the_budget_are_not_walked(agent: CodeAgent) -> None:
    _deep(agent, artifacts.MOST_DEPTH + 2)
    found, notes = collect(agent)
    assert found == [] and "deeper than the" in notes[0]


def test_control_without_the_depth_budget_the_deep_file_is_collected() -> None:
    with agent_with(budget=OutputsBudget(most_depth=UNBOUND)) as agent:
        _deep(agent, artifacts.MOST_DEPTH + 2)
        found, _ = collect(agent)
    assert [a.data for a in found] == [b"deep"]


def test_the_budgets_start_again_with_each_run() -> None:
    budget = OutputsBudget(most_files=1)
    code = "<code>\nwith open('outputs/n.txt', 'w') as f:\n    f.write('x' * {n})\n</code>"
    with CodeAgent(
        [],
        ScriptedModel([code.format(n=1), DONE, code.format(n=2), DONE]),
        executor="local",
        collect_outputs=True,
        outputs_budget=budget,
        verbosity_level=0,
    ) as agent:
        first = agent.run("x", return_full_result=True)
        second = agent.run("y", return_full_result=True)
    assert [a.data for a in first.artifacts] == [b"x"]
    assert [a.data for a in second.artifacts] == [b"xx"]


# -- the pieces ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["../x", "../../x", "/etc/passwd", "a/../b", "a//b", "./a", "a\\b", "a\0b", "", "x" * 2000]
)
def test_names_that_could_lead_out_are_not_safe(name: str) -> None:
    assert not safe_name(name)


@pytest.mark.parametrize("name", ["chart.png", "plots/a/one.csv", "..hidden", "名前.txt"])
def test_plain_names_are_safe(name: str) -> None:
    assert safe_name(name)


def test_media_types_and_sizes() -> None:
    assert media_type("a.png") == "image/png" and media_type("x.svg") == "image/svg+xml"
    assert media_type("noext") == "application/octet-stream"
    assert [human_size(n) for n in (40, 12_008, 3_100_000, 52_428_800)] == ["40 B", "12 KB", "3.1 MB", "52 MB"]


def test_a_saved_artifact_past_the_byte_budget_is_refused_before_decoding() -> None:
    record = {"name": "big.bin", "base64": "A" * 140}
    assert "holds 105 bytes, past the 100 bytes allowed" in str(Artifact.from_dict(record, most_bytes=100))
    assert isinstance(Artifact.from_dict({"name": "ok.bin", "base64": "AAAA"}, most_bytes=100), Artifact)


@pytest.mark.parametrize("name", ["../../x", "/etc/passwd", 7, None])
def test_a_saved_artifact_whose_name_leads_out_is_refused(name: object) -> None:
    assert isinstance(Artifact.from_dict({"name": name, "base64": "AAAA"}), str)


def _three_files(agent: CodeAgent) -> None:
    for index in range(3):
        (outputs(agent) / f"f{index}.txt").write_bytes(b"0123456789")


def test_a_step_reads_a_bounded_number_of_bytes() -> None:
    with agent_with(budget=OutputsBudget(most_step_read_bytes=25)) as agent:
        _three_files(agent)
        found, notes = collect(agent)
    assert [a.name for a in found] == ["f0.txt", "f1.txt"]
    assert notes == ["f2.txt: past the 25 bytes a step reads"]


def test_control_without_the_step_read_budget_all_three_are_read() -> None:
    with agent_with(budget=OutputsBudget(most_step_read_bytes=UNBOUND)) as agent:
        _three_files(agent)
        found, _ = collect(agent)
    assert len(found) == 3


def test_unchanged_files_read_again_do_not_spend_the_sandboxs_file_budget(agent: CodeAgent) -> None:
    (outputs(agent) / "same.bin").write_bytes(bytes(1000))
    collect(agent)
    used = agent.executor.files.budget.used  # type: ignore[attr-defined]
    for _ in range(5):
        assert collect(agent) == ([], [])
    assert agent.executor.files.budget.used - used < 1000  # type: ignore[attr-defined]


def test_a_known_file_that_changes_past_the_count_is_noted() -> None:
    with agent_with(budget=OutputsBudget(most_files=1)) as agent:
        (outputs(agent) / "a.txt").write_text("one")
        assert [a.name for a in collect(agent)[0]] == ["a.txt"]
        (outputs(agent) / "a.txt").write_text("two")
        found, notes = collect(agent)
    assert found == [] and notes == ["a.txt: changed, but past the run's budget of 1 file"]


def test_an_outputs_folder_that_cannot_be_made_does_not_fail_the_run() -> None:
    with agent_with() as agent:
        (Path(agent.executor.working_folder) / "outputs").write_text("a file, not a folder")  # type: ignore[attr-defined]
        result = agent.run("x", return_full_result=True)
        step = agent.memory.action_steps()[0]
    assert result.output == "done" and result.artifacts == []
    assert step.artifact_notes and step.artifact_notes[0].startswith("outputs/")
