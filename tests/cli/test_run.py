"""`codeward run`: one task, the model named by id, variables from files, live steps or JSON."""

from __future__ import annotations

import json
import re
import signal
import time

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import SAMPLE_TOOLS, files_appear, write_script


def test_run_shows_the_steps_and_the_answer(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "print(double(21))", "final_answer(double(21) + 1)")
    done = codeward("run", "Double 21, then add one.", "--model", model, "--tools", SAMPLE_TOOLS)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "Step 1" in out and "Step 2" in out and "print(double(21))" in out
    assert "42" in out and "Final answer: 43" in out
    assert "success · 2 steps" in out and "tokens" in out


def test_a_one_step_run_says_one_step(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "final_answer(1)")
    done = codeward("run", "Answer.", "--model", model)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "success · 1 step ·" in done.stdout, done.stdout


def test_run_json_carries_variables_from_every_file_kind(codeward, tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"factor": 3}))
    pd.DataFrame({"city": ["Oslo", "Rome"], "temp": [4.5, 17.0]}).to_csv(tmp_path / "temps.csv", index=False)
    pd.DataFrame({"n": [1, 2, 3]}).to_parquet(tmp_path / "counts.parquet")
    np.save(tmp_path / "grid.npy", np.arange(6).reshape(2, 3))
    model = write_script(
        tmp_path / "model.yaml",
        "final_answer({'factor': config['factor'], 'warmest': temps.sort_values('temp')['city'].iloc[-1],"
        " 'total': int(counts['n'].sum()), 'shape': list(grid.shape), 'grid_sum': int(grid.sum())})",
    )
    done = codeward(
        "run",
        "Summarise the inputs.",
        "--model",
        model,
        "--json",
        "--import",
        "pandas",
        "--import",
        "numpy",
        "--var",
        "config=@config.json",
        "--var",
        "temps=@temps.csv",
        "--var",
        "counts=@counts.parquet",
        "--var",
        "grid=@grid.npy",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    result = json.loads(done.stdout)
    assert result["state"] == "success"
    assert result["output"] == {"factor": 3, "warmest": "Rome", "total": 6, "shape": [2, 3], "grid_sum": 15}
    task = result["steps"][0]["task"]
    assert "temps (DataFrame, shape (2, 2)" in task and "grid (ndarray, shape (2, 3))" in task


def test_run_json_writes_the_output_as_plain_json_a_script_reads(codeward, tmp_path):
    """No codec records (``{"$": "nd", ..., "b64": ...}``): arrays are lists, a DataFrame its rows."""
    body = (
        "import numpy as np\nimport pandas as pd\n"
        "final_answer({'grid': np.arange(6).reshape(2, 3), 'mean': np.float64('nan'),"
        " 'table': pd.DataFrame({'city': ['Oslo', 'Rome'], 'temp': [4.5, 18.0]}),"
        " 'by_city': pd.Series([4.5, 18.0], index=['Oslo', 'Rome']), 'pair': (1, {3, 2})})"
    )
    model = write_script(tmp_path / "model.yaml", body)
    args = ("run", "Answer with data.", "--model", model, "--json", "--import", "numpy", "--import", "pandas")
    done = codeward(*args)
    assert done.returncode == 0, done.stderr
    output = json.loads(done.stdout, parse_constant=lambda name: pytest.fail(f"{name} is not JSON"))["output"]
    assert output == {
        "grid": [[0, 1, 2], [3, 4, 5]],
        "mean": None,
        "table": [{"city": "Oslo", "temp": 4.5}, {"city": "Rome", "temp": 18.0}],
        "by_city": {"Oslo": 4.5, "Rome": 18.0},
        "pair": [1, [2, 3]],
    }


def test_run_out_of_steps_exits_1(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "x = 1", "x = 2", "final_answer('late')")
    done = codeward("run", "Count.", "--model", model, "--max-steps", "2", "--json")
    assert done.returncode == 1
    assert json.loads(done.stdout)["state"] == "max_steps_error"


def test_run_without_a_model_or_key_points_to_the_demo(codeward):
    done = codeward("run", "Anything.")
    assert done.returncode == 2
    assert "no model to call" in done.stderr and "CODEWARD_MODEL" in done.stderr and "codeward demo" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_run_takes_the_model_from_the_environment(codeward, tmp_path):
    model = write_script(tmp_path / "model.yaml", "final_answer('from env')")
    done = codeward("run", "Anything.", "--json", CODEWARD_MODEL=model)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == "from env"


def test_run_refuses_bad_inputs_with_the_fix(codeward, tmp_path):
    (tmp_path / "data.txt").write_text("x")
    cases = [
        (["--model", "script:missing.yaml"], "script:"),
        (["--model", "replay:missing.json"], "no such file"),
        (["--model", "script:model.yaml", "--var", "data"], "NAME=@FILE"),
        (["--model", "script:model.yaml", "--var", "data=@data.txt"], "use one of .json, .csv, .parquet, .npy"),
        (["--model", "script:model.yaml", "--var", "print=@data.json"], "would hide Python's builtin print"),
        (["--model", "script:model.yaml", "--tools", "no_such_module:x"], "cannot import 'no_such_module'"),
        (["--model", "script:model.yaml", "--tools", f"{SAMPLE_TOOLS}:nothing"], "no attribute 'nothing'"),
    ]
    write_script(tmp_path / "model.yaml", "final_answer(1)")
    for args, message in cases:
        done = codeward("run", "Anything.", *args)
        assert done.returncode == 2, (args, done.stderr)
        assert message in done.stderr and not done.stdout, (args, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr


def test_a_long_line_of_code_wraps_in_its_box_and_is_shown_whole(codeward, tmp_path):
    names = [f"part_{n}" for n in range(12)]
    setup = "\n".join(f"{name} = {n}" for n, name in enumerate(names))
    long_line = "total = " + " + ".join(names) + " + tail_of_the_long_line"
    model = write_script(
        tmp_path / "model.yaml", f"{setup}\ntail_of_the_long_line = 0\n{long_line}", "final_answer(total)"
    )
    done = codeward("run", "Add.", "--model", model, COLUMNS="60")
    assert done.returncode == 0, done.stdout + done.stderr
    assert max(len(line) for line in done.stdout.splitlines()) <= 60
    assert "tail_of_the_long_line" in done.stdout.split("tail_of_the_long_line = 0", 1)[1], done.stdout


def test_ctrl_c_shows_what_the_code_printed_before_it(spawn, tmp_path):
    # the code box does not show the text; the file says the block has printed it and goes on
    printed = "print('half' + 'way there')\ntouch('printed')\nimport time\ntime.sleep(30)"
    model = write_script(tmp_path / "model.yaml", printed)
    run = spawn("run", "Work slowly.", "--model", model, "--tools", SAMPLE_TOOLS)
    assert files_appear(tmp_path, "printed"), "the block never got past its print"
    run.send_signal(signal.SIGINT)
    out, err = run.communicate(timeout=30)
    assert run.returncode == 130, out + err
    assert "halfway there" in out, out


def test_run_prints_block_output_as_it_comes(spawn, tmp_path):
    sleepy = "print('half' + 'way there')\nimport time\ntime.sleep(30)"  # the code box does not show the text
    run = spawn("run", "Work slowly.", "--model", write_script(tmp_path / "model.yaml", sleepy))
    assert run.stdout is not None
    started = time.monotonic()
    for line in run.stdout:  # a pipe, not a terminal: still each piece as it comes
        if "halfway there" in line:
            break
    assert time.monotonic() - started < 20 and run.poll() is None, "the line came while the block slept"
    run.send_signal(signal.SIGINT)
    run.communicate(timeout=30)


def test_the_summary_time_counts_the_sandbox_start(codeward, tmp_path):
    """A jupyter kernel takes a while to start; the time the summary gives is what the user waited."""
    model = write_script(tmp_path / "model.yaml", "final_answer(2)")
    done = codeward("run", "Two.", "--model", model, "--executor", "jupyter", "--save", "run.json")
    assert done.returncode == 0, done.stderr
    summary = re.search(r"success · 1 step · ([0-9.]+) s ·", done.stdout)
    assert summary, done.stdout
    saved = json.loads((tmp_path / "run.json").read_text())
    in_steps = sum(_durations(saved))  # control: the steps alone, which leave the kernel's start out
    assert float(summary.group(1)) > in_steps + 0.3, (summary.group(0), in_steps)


def _durations(value):
    if isinstance(value, dict):
        if isinstance(value.get("duration"), (int, float)):
            yield value["duration"]
        else:
            for inner in value.values():
                yield from _durations(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _durations(inner)
