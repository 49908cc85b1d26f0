"""A run's page shows what each step's code cost, and the run's total; a usage record that is not one is
left out, whatever it holds."""

from __future__ import annotations

import json
from pathlib import Path

from codeward.executors.base import BlockUsage
from codeward.view import render_run

USAGE = BlockUsage(1.5, 1.25, 212_000_000, 5_200, 2, None, "block", {"egress_bytes": "no network"})


def _run_file(path: Path, *usages: object) -> Path:
    steps = [{"type": "task", "task": "t"}]
    steps += [{"type": "action", "step_number": n, "code_action": "1", "usage": u} for n, u in enumerate(usages, 1)]
    path.write_text(json.dumps({"steps": steps}), encoding="utf-8")
    return path


def test_each_step_shows_its_blocks_cost_and_the_run_its_total(tmp_path: Path) -> None:
    page = render_run(_run_file(tmp_path / "run.json", USAGE.to_dict(), USAGE.to_dict()))
    assert page.count("sandbox 1.25 s CPU · 212 MB peak memory · 5.2 kB output · 2 tool calls") == 2
    assert "2.50 s CPU · 212 MB peak memory · 10.4 kB output · 4 tool calls" in page


def test_a_usage_record_that_is_not_one_is_left_out(tmp_path: Path) -> None:
    scoped = {**USAGE.to_dict(), "peak_memory_scope": "<script>x</script>"}
    typed = {**USAGE.to_dict(), "cpu_seconds": "<b>lots</b>"}
    page = render_run(_run_file(tmp_path / "run.json", scoped, typed, "<img src=x>"))
    assert "peak memory" not in page and "lots" not in page and "<script>x" not in page and "src=x" not in page
