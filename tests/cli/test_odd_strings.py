"""Any Python str a sandbox hands back is stored and read back exactly, and never stops a batch."""

from __future__ import annotations

import io
import json

from codeward.batch.jsonl import JsonlAppender, repair_and_read
from codeward.batch.recording import BatchOptions, Recorder
from codeward.batch.worker import _send_result
from codeward.platform.memory import AgentMemory
from tests.cli.conftest import write_script

ODD = "ok" + chr(0xD800)  # a lone surrogate: a str Python holds, that strict UTF-8 cannot encode


def test_a_lone_surrogate_is_appended_and_read_back_exactly(tmp_path):
    path = tmp_path / "results.jsonl"
    with JsonlAppender(path) as out:
        out.append({"id": ODD, "output": {ODD: [ODD, "é"]}})
    records, dropped = repair_and_read(path)
    assert records == [{"id": ODD, "output": {ODD: [ODD, "é"]}}] and dropped == 0


def test_a_result_json_cannot_hold_is_recorded_as_that_jobs_error(tmp_path):
    recorder = Recorder(BatchOptions(tmp_path / "results.jsonl", None, 1), progress=None)
    try:
        written = recorder._write_result({"id": "a", "status": "success", "output": {(1, 2): "tuple key"}})
    finally:
        recorder.close()
    assert written["status"] == "error" and "could not be recorded" in written["error"]
    assert repair_and_read(tmp_path / "results.jsonl")[0] == [written]


def test_a_worker_sends_a_result_json_cannot_hold_as_that_jobs_error():
    channel = io.StringIO()
    _send_result(channel, "a", {"id": "a", "status": "success", "output": {(1, 2): "tuple key"}, "model": "m"})
    event = json.loads(channel.getvalue())
    assert event["result"]["status"] == "error" and event["result"]["id"] == "a"


def test_a_batch_where_one_job_answers_a_lone_surrogate_succeeds_and_keeps_it_exact(codeward, tmp_path):
    odd = write_script(tmp_path / "odd.yaml", "print('seen ' + chr(0xD800))\nfinal_answer('ok' + chr(0xD800))")
    plain = write_script(tmp_path / "plain.yaml", "final_answer('ok')")
    jobs = [{"id": "odd" + chr(0xDC00), "task": "Answer oddly.", "model": odd}, {"id": "plain", "task": "Answer."}]
    (tmp_path / "jobs.jsonl").write_text("".join(json.dumps(job) + "\n" for job in jobs))
    done = codeward("batch", "jobs.jsonl", "--model", plain, "--runs", "runs")
    assert done.returncode == 0, done.stdout + done.stderr
    results = {r["id"]: r for r in repair_and_read(tmp_path / "runs" / "results.jsonl")[0]}
    assert results["odd" + chr(0xDC00)]["output"] == ODD and results["plain"]["output"] == "ok"
    audit = repair_and_read(tmp_path / "runs" / "audit.jsonl")[0]
    assert any("chr(0xD800)" in block["code"] for block in audit)
    again = codeward("batch", "jobs.jsonl", "--model", plain, "--runs", "runs")
    assert again.returncode == 0 and "2 jobs already in the results file" in again.stderr


def test_run_save_keeps_a_lone_surrogate_and_the_run_replays(codeward, tmp_path):
    model = write_script(tmp_path / "odd.yaml", "x = 'ok' + chr(0xD800)\nprint(x)", "final_answer(x)")
    done = codeward("run", "Answer oddly.", "--model", model, "--save", "run.json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok\\ud800" in done.stdout  # shown, written out
    saved = json.loads((tmp_path / "run.json").read_text(encoding="utf-8"))
    assert saved["steps"][-1]["action_output"] == ODD
    assert AgentMemory.load(tmp_path / "run.json").steps[-1].action_output == ODD  # type: ignore[attr-defined]
    replayed = codeward("replay", "run.json")
    assert replayed.returncode == 0, replayed.stdout + replayed.stderr
