"""`codeward batch` end to end: the real command, real worker processes, the real local executor."""

from __future__ import annotations

import base64
import hashlib
import json
import signal
import time
from collections import Counter
from pathlib import Path

import yaml

from tests.cli.conftest import SAMPLE_TOOLS, alive, children, files_appear, write_script

# What each kind of job does, how it ends, and how many code blocks it runs.
KINDS = {
    "success": ("success", 2),
    "recovers": ("success", 2),
    "out_of_steps": ("max_steps_error", 2),
    "model_fails": ("error", 1),
    "timeout": ("timeout", 1),
    "crash": ("error", 1),
}


def _scripts(folder: Path) -> dict[str, str]:
    return {
        "success": write_script(folder / "success.yaml", "n = double(21)\nprint(n)", "final_answer(n)"),
        "recovers": write_script(folder / "recovers.yaml", "print(1 / 0)", "final_answer('recovered')"),
        "out_of_steps": write_script(folder / "out_of_steps.yaml", "a = 1", "b = 2", "final_answer('late')"),
        "model_fails": write_script(folder / "model_fails.yaml", "c = 3"),
        "timeout": write_script(folder / "timeout.yaml", "import time\ntime.sleep(60)"),
        "crash": write_script(folder / "crash.yaml", "crash_worker(3)"),
    }


# Long enough that a timed-out job's block has begun on a busy machine: the timeout counts
# from the job's start, sandbox and first model step included, and the audit counts its block.
TIMEOUT_SECONDS = 3


def _kind(index: int) -> str:
    if index in (8, 28):
        return "timeout"
    if index == 19:
        return "crash"
    return ["success", "success", "recovers", "out_of_steps", "model_fails"][index % 5]


def write_jobs(folder: Path, count: int = 50, slow: bool = False) -> dict[str, str]:
    """A JSONL jobs file with a mix of outcomes; returns id -> kind."""
    scripts = _scripts(folder)
    if slow:  # every job takes a moment, so a signal can land mid-batch
        scripts["success"] = write_script(folder / "slow.yaml", "import time\ntime.sleep(0.15)", "final_answer(42)")
    kinds = {}
    with open(folder / "jobs.jsonl", "w") as handle:
        for index in range(count):
            kind = "success" if slow else _kind(index)
            job = {"id": f"job-{index:02d}", "task": f"Task number {index}.", "model": scripts[kind]}
            if kind == "out_of_steps":
                job["max_steps"] = 2
            if kind == "timeout":
                job["timeout_seconds"] = TIMEOUT_SECONDS
            handle.write(json.dumps(job) + "\n")
            kinds[job["id"]] = kind
    return kinds


def read_lines(path: Path) -> list[dict]:
    text = path.read_text()
    assert text == "" or text.endswith("\n"), "a torn last line"
    return [json.loads(line) for line in text.splitlines()]


def test_fifty_jobs_with_mixed_outcomes_all_recorded_and_audited(codeward, tmp_path):
    kinds = write_jobs(tmp_path)
    done = codeward("batch", "jobs.jsonl", "--tools", SAMPLE_TOOLS, "--concurrency", "4", "--runs", "runs")
    assert done.returncode == 1, done.stdout + done.stderr  # some jobs failed: CI sees it
    results = read_lines(tmp_path / "runs" / "results.jsonl")
    assert sorted(r["id"] for r in results) == sorted(kinds)
    for result in results:
        assert result["status"] == KINDS[kinds[result["id"]]][0], result
    by_id = {r["id"]: r for r in results}
    assert by_id["job-00"]["output"] == 42 and by_id["job-02"]["output"] == "recovered"
    assert "worker process exited with code 3" in by_id["job-19"]["error"]
    assert f"timeout of {TIMEOUT_SECONDS} s" in by_id["job-08"]["error"]
    assert by_id["job-00"]["sandbox"]["executor"] == "local" and by_id["job-00"]["steps"] == 2
    assert len({r["sandbox"]["id"] for r in results if r["sandbox"]["id"]}) == 49  # a sandbox per job

    audit = read_lines(tmp_path / "runs" / "audit.jsonl")
    blocks = Counter(line["job_id"] for line in audit)
    assert blocks == {job_id: KINDS[kind][1] for job_id, kind in kinds.items()}
    for line in audit:
        assert line["sha256"] == hashlib.sha256(line["code"].encode()).hexdigest()
        assert line["executor"] == "local" and line["start"] and line["duration_seconds"] >= 0
    first = sorted((entry for entry in audit if entry["job_id"] == "job-00"), key=lambda entry: entry["step"])
    assert [entry["outcome"] for entry in first] == ["ok", "final_answer"]
    assert first[0]["tool_calls"][0]["tool"] == "double" and first[0]["tool_calls"][0]["result"] == "42"
    assert [entry["outcome"] for entry in audit if entry["job_id"] == "job-02"] == ["error", "final_answer"]
    assert [entry["outcome"] for entry in audit if entry["job_id"] == "job-08"] == ["cancelled"]
    assert [entry["outcome"] for entry in audit if entry["job_id"] == "job-19"] == ["worker_lost"]

    out = done.stdout
    assert "success" in out and "max_steps_error" in out and "timeout" in out and "jobs/s" in out
    assert "job-19" in out  # the summary lists the failures

    assert len(list((tmp_path / "runs").glob("*.json"))) == 49  # every run but the one whose worker crashed
    replayed = codeward("replay", "runs/job-00.json", "--tools", SAMPLE_TOOLS)  # the job's variables were kept
    assert replayed.returncode == 0, replayed.stdout

    again = codeward("batch", "jobs.jsonl", "--tools", SAMPLE_TOOLS, "--runs", "runs")
    assert again.returncode == 1 and "50 jobs already in the results file" in again.stderr
    assert len(read_lines(tmp_path / "runs" / "results.jsonl")) == 50


def test_sigkill_halfway_then_rerun_ends_with_exactly_fifty_results(spawn, codeward, tmp_path):
    write_jobs(tmp_path, slow=True)
    results = tmp_path / "results.jsonl"
    batch = spawn("batch", "jobs.jsonl", "--concurrency", "2")
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not results.exists() or results.read_text().count("\n") < 20):
        time.sleep(0.02)
    workers = children(batch.pid)
    assert workers, "the batch runs its jobs in worker processes"
    batch.send_signal(signal.SIGKILL)
    batch.wait()
    first = read_lines(results)
    assert 20 <= len(first) < 50
    # the workers notice their parent is gone and exit
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and any(alive(pid) for pid in workers):
        time.sleep(0.05)
    assert not [pid for pid in workers if alive(pid)]

    with open(results, "a") as handle:  # a torn line, as a kill in the middle of a write leaves
        handle.write('{"id": "job-49", "status": "succ')
    done = codeward("batch", "jobs.jsonl")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "torn last line" in done.stderr
    final = read_lines(results)
    ids = [r["id"] for r in final]
    assert len(ids) == 50 and len(set(ids)) == 50
    assert all(r["status"] == "success" and r["output"] == 42 for r in final)
    assert final[: len(first)] == first  # nothing finished was lost or rewritten


def test_ctrl_c_cancels_running_jobs_and_leaves_no_process(spawn, tmp_path):
    jobs = []
    for n in range(6):
        sleeps = f"touch('asleep-{n}')\nimport time\ntime.sleep(60)"
        model = write_script(tmp_path / f"sleepy-{n}.yaml", f"touch('started-{n}')", sleeps)
        jobs.append({"id": f"sleepy-{n}", "task": "Sleep.", "model": model})
    (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(jobs))
    batch = spawn("batch", "jobs.yaml", "--concurrency", "3", "--tools", SAMPLE_TOOLS)
    assert files_appear(tmp_path, "started-*", 3)
    workers = children(batch.pid)
    assert len(workers) == 9  # three job workers, each with its local sandbox's worker process and its reaper
    assert files_appear(tmp_path, "asleep-*", 3)  # each job is in its sleeping block, its second step
    batch.send_signal(signal.SIGINT)
    out, err = batch.communicate(timeout=30)
    assert batch.returncode == 130, out + err
    assert "interrupted" in err and "cancelled" in out and "not started" in out
    assert not [pid for pid in workers if alive(pid)]
    assert (tmp_path / "results.jsonl").read_text() == ""  # cancelled jobs are not finished: a rerun does them
    audit = read_lines(tmp_path / "audit.jsonl")
    assert [line["outcome"] for line in audit].count("cancelled") == 3  # each sandbox saw its block stopped
    assert len(list(tmp_path.glob("started-*"))) == 3  # no job was started after Ctrl-C


def test_a_job_deaf_to_cancellation_is_killed_after_the_grace_period(codeward, tmp_path):
    stuck = write_script(tmp_path / "stuck.yaml", "stubborn_wait(60)")
    fine = write_script(tmp_path / "fine.yaml", "final_answer(double(2))")
    (tmp_path / "jobs.yaml").write_text(
        f"- {{id: stuck, task: Wait., model: '{stuck}', timeout_seconds: {TIMEOUT_SECONDS}}}\n"
        f"- {{id: fine, task: Double., model: '{fine}'}}\n"
    )
    started = time.monotonic()
    done = codeward("batch", "jobs.yaml", "--tools", SAMPLE_TOOLS, "--concurrency", "1", "--cancel-grace", "0.5")
    assert time.monotonic() - started < 30  # not the 60 s the tool wanted
    assert done.returncode == 1, done.stdout + done.stderr
    results = {r["id"]: r for r in read_lines(tmp_path / "results.jsonl")}
    assert results["stuck"]["status"] == "timeout" and "did not stop when asked" in results["stuck"]["error"]
    assert results["fine"]["status"] == "success" and results["fine"]["output"] == 4  # on a fresh worker
    assert results["fine"]["sandbox"]["worker_pid"] != results["stuck"]["sandbox"]["worker_pid"]
    audit = {line["job_id"]: line for line in read_lines(tmp_path / "audit.jsonl")}
    assert audit["stuck"]["outcome"] == "worker_lost" and audit["stuck"]["code"] == "stubborn_wait(60)"


def test_with_runs_the_results_and_audit_files_land_in_that_folder(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "final_answer(double(2))")
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: Double.}\n- {id: b, task: Double.}\n")
    args = ("batch", "jobs.yaml", "--model", model, "--tools", SAMPLE_TOOLS, "--runs", "out")
    done = codeward(*args)
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(path.name for path in (tmp_path / "out").iterdir()) == [
        "a.json",
        "audit.jsonl",
        "b.json",
        "results.jsonl",
    ]
    assert not (tmp_path / "results.jsonl").exists() and not (tmp_path / "audit.jsonl").exists()
    assert "results: out/results.jsonl · audit: out/audit.jsonl" in done.stdout
    again = codeward(*args)  # the same command finds its results again, and resumes
    assert "2 jobs already in the results file" in again.stderr, again.stderr
    elsewhere = codeward(*args, "--out", "mine.jsonl", "--no-audit")  # a file named on the command line wins
    assert len(read_lines(tmp_path / "mine.jsonl")) == 2 and len(read_lines(tmp_path / "out" / "results.jsonl")) == 2
    assert elsewhere.returncode == 0


def test_collect_outputs_keeps_each_jobs_files_in_its_run_and_names_them_in_the_results(codeward, tmp_path):
    model = write_script(
        tmp_path / "model.yaml", "open('outputs/report.txt', 'w').write(task_id)", "final_answer('written')"
    )
    (tmp_path / "jobs.yaml").write_text(
        "- {id: a, task: Report., additional_args: {task_id: first}}\n"
        "- {id: b, task: Report., additional_args: {task_id: second}}\n"
    )
    args = ("batch", "jobs.yaml", "--model", model, "--runs", "out")
    done = codeward(*args, "--collect-outputs")
    assert done.returncode == 0, done.stdout + done.stderr
    results = {line["id"]: line for line in read_lines(tmp_path / "out" / "results.jsonl")}
    for job_id, text in [("a", "first"), ("b", "second")]:
        assert results[job_id]["artifacts"] == [
            {"name": "report.txt", "size": len(text), "media_type": "text/plain", "step": 1}
        ]
        saved = json.loads((tmp_path / "out" / f"{job_id}.json").read_text())
        kept = [a for step in saved["steps"] for a in step.get("artifacts") or []]
        assert [base64.b64decode(a["base64"]).decode() for a in kept] == [text]
    # control: without the flag nothing is collected, and the code's file stays in its sandbox
    plain = codeward(*args[:-1], "plain", "--out", "plain.jsonl")
    assert plain.returncode == 0, plain.stdout + plain.stderr
    assert all("artifacts" not in line for line in read_lines(tmp_path / "plain.jsonl"))
