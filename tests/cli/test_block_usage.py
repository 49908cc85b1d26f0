"""`codeward run` and `codeward batch` report what the code blocks cost, run as a user runs them."""

from __future__ import annotations

import json
import re

from tests.cli.conftest import SAMPLE_TOOLS, write_script


def test_run_prints_what_the_blocks_cost_beside_the_steps_and_tokens(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "print(double(21))", "final_answer(double(21) + 1)")
    done = codeward("run", "Double 21, then add one.", "--model", model, "--tools", SAMPLE_TOOLS)
    assert done.returncode == 0, done.stdout + done.stderr
    line = next((line for line in done.stdout.splitlines() if line.startswith("sandbox:")), None)
    assert line is not None, done.stdout
    assert re.search(r"[\d.]+ s running code · [\d.]+ s CPU · [\d.]+ [kMG]?B peak memory · ", line), line
    assert "2 tool calls" in line, line  # double, twice


def test_run_json_carries_the_runs_usage_and_each_steps(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "print(double(1))", "final_answer(2)")
    done = codeward("run", "Go.", "--model", model, "--tools", SAMPLE_TOOLS, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    steps = [step["usage"] for step in result["steps"] if step["type"] == "action"]
    assert result["usage"]["tool_calls"] == sum(step["tool_calls"] for step in steps) == 1
    assert result["usage"]["cpu_seconds"] is not None and result["usage"]["peak_memory_bytes"] > 0
    assert result["usage"]["wall_seconds"] == sum(step["wall_seconds"] for step in steps)


def test_batch_results_carry_each_jobs_totals(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "print(double(2))", "final_answer(double(2))")
    (tmp_path / "jobs.yaml").write_text("- {id: a, task: Double.}\n")
    done = codeward("batch", "jobs.yaml", "--model", model, "--tools", SAMPLE_TOOLS)
    assert done.returncode == 0, done.stdout + done.stderr
    (record,) = [json.loads(line) for line in (tmp_path / "results.jsonl").read_text().splitlines()]
    assert record["usage"]["tool_calls"] == 2 and record["usage"]["cpu_seconds"] is not None, record
    assert record["usage"]["wall_seconds"] > 0 and record["usage"]["output_bytes"] > 0
