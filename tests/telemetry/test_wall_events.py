"""What the walls refused, where a user finds it: the agent's step and its saved run, the block's span,
the batch audit and the run page. Each made as a user makes it (a real agent on the local sandbox, the
real `codeward` command in a fresh process); a run file handed over by a stranger is read with bounds."""

from __future__ import annotations

import json
from pathlib import Path

from codeward import CodeAgent, ScriptedModel, tracing
from codeward.executors.base import BlockEvent
from codeward.platform.memory import AgentMemory
from codeward.view import render_run
from codeward.wall_events import MAX_EVENTS
from tests.cli.conftest import write_script
from tests.telemetry.conftest import from_sdk, only

#: A block that tries a refused import and catches the refusal, then answers.
TRIES = "try:\n    import socket\nexcept Exception:\n    pass\nfinal_answer('done')"
TRIED = BlockEvent("policy", "import of socket", 1)


def code(body: str) -> str:
    return f"Thought: I will do it.\n<code>\n{body}\n</code>"


def test_the_step_holds_the_events_and_a_saved_run_keeps_them(tmp_path):
    with CodeAgent(tools=[], model=ScriptedModel([code(TRIES)]), executor="local") as agent:
        assert agent.run("Try.") == "done"
        (step,) = [step for step in agent.memory.steps if getattr(step, "code_action", None)]
        assert step.events == [TRIED]
        assert step.to_dict()["events"] == [TRIED.to_dict()]
        agent.memory.save(tmp_path / "run.json")
    read = AgentMemory.load(tmp_path / "run.json")
    assert [step.events for step in read.steps if getattr(step, "code_action", None)] == [[TRIED]]


def test_a_failed_block_keeps_its_events_on_the_step():
    model = ScriptedModel([code("import os"), code("final_answer(1)")])
    with CodeAgent(tools=[], model=model, executor="local") as agent:
        agent.run("Try.")
        first = next(step for step in agent.memory.steps if getattr(step, "code_action", None))
        assert first.error is not None and first.events == [BlockEvent("policy", "import of os", 1)]


def _handed_run(path: Path, events: object) -> Path:
    steps = [{"type": "task", "task": "t"}, {"type": "action", "step_number": 1, "code_action": "1", "events": events}]
    path.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return path


HOSTILE = [
    {"wall": "policy", "detail": "<script>window.__pwned=1</script>", "count": 2},
    {"wall": "<b>rootkit</b>", "detail": "an unknown wall", "count": 1},
    {"wall": "seccomp", "detail": "colour \x1b[31m", "count": "many"},
    "not a record",
]


def test_a_handed_run_file_is_read_with_known_walls_and_bounded_lists(tmp_path):
    read = AgentMemory.load(_handed_run(tmp_path / "hostile.json", HOSTILE))
    (step,) = [step for step in read.steps if getattr(step, "code_action", None)]
    assert [(event.wall, event.count) for event in step.events] == [("policy", 2), ("seccomp", 1)]
    assert "\x1b" not in step.events[1].detail
    many = [{"wall": "policy", "detail": f"d{i}", "count": 1} for i in range(10_000)]
    read = AgentMemory.load(_handed_run(tmp_path / "many.json", many))
    (step,) = [step for step in read.steps if getattr(step, "code_action", None)]
    assert len(step.events) == MAX_EVENTS + 1


def test_the_block_span_has_an_event_per_refusal(memory_exporter):
    with CodeAgent(tools=[], model=ScriptedModel([code(TRIES)]), executor="local") as agent:
        agent.run("Try.")
    block = only([from_sdk(span) for span in memory_exporter.get_finished_spans()], "execute_code")
    refused = [attributes for name, attributes in block.events if name == tracing.WALL_REFUSED]
    assert refused == [{tracing.WALL_NAME: "policy", tracing.WALL_DETAIL: "import of socket", tracing.WALL_COUNT: 1}]


def test_the_run_page_shows_the_events_beside_the_step_escaped(tmp_path):
    page = render_run(_handed_run(tmp_path / "run.json", HOSTILE))
    assert "Refused by the sandbox" in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt;" in page and "<script>window" not in page
    assert "rootkit" not in page and "×2" in page


def test_a_saved_runs_page_shows_what_its_code_tried(codeward, tmp_path):
    model = write_script(tmp_path / "tries.yaml", TRIES)
    done = codeward("run", "Try.", "--model", model, "--save", "run.json")
    assert done.returncode == 0, done.stdout + done.stderr
    page = render_run(tmp_path / "run.json")
    assert "Refused by the sandbox" in page and "import of socket" in page


def test_the_batch_audit_records_each_blocks_events(codeward, tmp_path):
    tries = write_script(tmp_path / "tries.yaml", TRIES)
    plain = write_script(tmp_path / "plain.yaml", "final_answer(2)")
    jobs = [{"id": "tries", "task": "Try.", "model": tries}, {"id": "plain", "task": "Go.", "model": plain}]
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    done = codeward("batch", "jobs.jsonl", "--runs", "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    audit = {
        line["job_id"]: line for line in map(json.loads, (tmp_path / "runs" / "audit.jsonl").read_text().splitlines())
    }
    assert audit["tries"]["events"] == [TRIED.to_dict()]
    assert audit["plain"]["events"] == []


#: A block whose import the user allowed by name, that tries a system call the worker's seccomp filter
#: refuses, and catches the refusal: the host hears of it from the kernel, not from the worker.
CALLS = "import socket\ntry:\n    socket.socket()\nexcept OSError:\n    pass\nfinal_answer('done')"
CALLED = BlockEvent("seccomp", "socket", 1)


def test_a_refused_system_call_is_in_the_step_the_span_the_page_and_the_audit(codeward, memory_exporter, tmp_path):
    with CodeAgent(
        tools=[], model=ScriptedModel([code(CALLS)]), executor="local", additional_authorized_imports=["socket"]
    ) as agent:
        assert agent.run("Call.") == "done"
    (step,) = [step for step in agent.memory.steps if getattr(step, "code_action", None)]
    assert CALLED in step.events
    block = only([from_sdk(span) for span in memory_exporter.get_finished_spans()], "execute_code")
    refused = [attributes for name, attributes in block.events if name == tracing.WALL_REFUSED]
    assert {tracing.WALL_NAME: "seccomp", tracing.WALL_DETAIL: "socket", tracing.WALL_COUNT: 1} in refused
    model = write_script(tmp_path / "calls.yaml", CALLS)
    done = codeward("run", "Call.", "--model", model, "--import", "socket", "--save", "run.json")
    assert done.returncode == 0, done.stdout + done.stderr
    page = render_run(tmp_path / "run.json")
    assert "Refused by the sandbox" in page and "socket" in page and "seccomp" in page
    job = {"id": "calls", "task": "Call.", "model": model, "authorized_imports": ["socket"]}
    (tmp_path / "jobs.jsonl").write_text(json.dumps(job) + "\n")
    done = codeward("batch", "jobs.jsonl", "--runs", "runs", "--allow-job-imports")
    assert done.returncode == 0, done.stdout + done.stderr
    (line,) = map(json.loads, (tmp_path / "runs" / "audit.jsonl").read_text().splitlines())
    assert CALLED.to_dict() in line["events"]
