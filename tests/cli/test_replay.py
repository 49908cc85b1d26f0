"""`codeward replay` and `assert_replays`: a saved run re-run offline, compared step by step.

A run file is a stranger's data: the replay acts only on its flags, and where the run's
record says it needs more (an executor, tools, variables, imports), it names the flags
and exits 2 before running anything.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import shutil
import sys

import pytest

from codeward import CodeAgent, ScriptedModel, tool
from codeward.demo import DEMO_VARIABLES, forecast, recording_path
from codeward.platform import replay as replay_module
from codeward.platform.replay import ReplayNeedsFlags, replay_run
from codeward.platform.tool_specs import ToolSpecError, load_tool_specs
from codeward.testing import assert_replays
from tests.cli.conftest import code, write_script
from tests.executors.contract.conftest import PROFILES, _module_missing

RATES = '''
from codeward import tool


@tool
def rate(currency: str) -> float:
    """The exchange rate of a currency to euros.

    Args:
        currency: An ISO code, e.g. "USD".
    """
    return {"USD": 0.9, "GBP": 1.2}[currency]
'''


@pytest.fixture
def recorded(codeward, tmp_path):
    """A run recorded with `codeward run --save`, using a tool from a file and a variable from a file."""
    (tmp_path / "rates.py").write_text(RATES)
    (tmp_path / "amounts.json").write_text(json.dumps({"USD": 100, "GBP": 10}))
    model = write_script(
        tmp_path / "model.yaml",
        "euros = {c: amounts[c] * rate(c) for c in amounts}\nprint(euros)",
        "rate('JPY')",
        "final_answer(round(sum(euros.values()), 2))",
    )
    done = codeward(
        "run",
        "Total in euros?",
        "--model",
        model,
        "--tools",
        "rates.py",
        "--var",
        "amounts=@amounts.json",
        "--save",
        "run.json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return tmp_path / "run.json"


def test_a_cli_run_names_its_tools_flag_then_replays_with_its_saved_variables(codeward, recorded):
    refused = codeward("replay", "run.json")
    assert refused.returncode == 2, refused.stderr
    assert "nothing was run" in refused.stderr and "--tools rates.py: for the tool(s) rate" in refused.stderr
    assert "--var" not in refused.stderr  # the values were saved with the run

    done = codeward("replay", "run.json", "--tools", "rates.py")
    assert done.returncode == 0, done.stdout
    assert "replay passed" in done.stdout and "3 steps and the final answer match" in done.stdout


def test_a_cli_run_records_the_file_of_each_variable_and_names_it_when_its_value_is_lost(codeward, recorded):
    data = json.loads(recorded.read_text())
    assert data["codeward_run"]["variable_sources"] == [{"name": "amounts", "from": "file", "file": "amounts.json"}]
    del data["codeward_run"]["variables"]  # as when a value cannot be saved
    recorded.write_text(json.dumps(data))
    refused = codeward("replay", "run.json", "--tools", "rates.py")
    assert refused.returncode == 2 and "--var amounts=@amounts.json: the run read amounts" in refused.stderr
    done = codeward("replay", "run.json", "--tools", "rates.py", "--var", "amounts=@amounts.json")
    assert done.returncode == 0, done.stdout


def test_replay_fails_with_a_diff_when_a_tool_changed(codeward, recorded, tmp_path):
    (tmp_path / "rates.py").write_text(RATES.replace('"USD": 0.9', '"USD": 0.95'))
    done = codeward("replay", "run.json", "--tools", "rates.py")
    assert done.returncode == 1
    out = done.stdout
    assert "replay failed" in out and "step 1 observation" in out and "final answer" in out
    assert "-{'USD': 90.0, 'GBP': 12.0}" in out and "+{'USD': 95.0, 'GBP': 12.0}" in out
    assert "-102.0" in out and "+107.0" in out
    assert "step 2 error" not in out  # the recorded KeyError is still raised the same way


def test_replay_uses_tools_named_on_the_command_line(codeward, recorded, tmp_path):
    (tmp_path / "other.py").write_text(RATES.replace('"GBP": 1.2', '"GBP": 1.0'))
    done = codeward("replay", "run.json", "--tools", "other.py:rate")
    assert done.returncode == 1 and "+{'USD': 90.0, 'GBP': 10.0}" in done.stdout


def test_the_pytest_helper_passes_and_fails_like_the_command(recorded):
    with pytest.raises(ReplayNeedsFlags, match=r"--tools .*rates\.py"):
        assert_replays(recorded)  # the recorded tools file is named, never loaded
    report = assert_replays(recorded, tools=load_tool_specs([str(recorded.parent / "rates.py")]))
    assert report.ok and report.steps_checked == 3

    @tool
    def rate(currency: str) -> float:
        """The exchange rate of a currency to euros, now different.

        Args:
            currency: An ISO code.
        """
        return 1.0

    with pytest.raises(AssertionError, match=r"step 1 observation"):
        assert_replays(recorded, tools=[rate])


def test_a_plain_saved_memory_replays_with_tools_and_variables_given(codeward, tmp_path):
    model = ScriptedModel([code('print(forecast("Oslo"))\nforecast("Paris")'), code("final_answer(len(cities))")])
    with CodeAgent(tools=[forecast], model=model, executor="local", verbosity_level=-1) as agent:
        agent.run("How many cities?", additional_args=dict(DEMO_VARIABLES))
    agent.memory.save(tmp_path / "plain.json")  # records the tool's origin and the variable's name, not its value
    (tmp_path / "cities.json").write_text(json.dumps(DEMO_VARIABLES["cities"]))
    done = codeward("replay", "plain.json", "--tools", "codeward.demo:forecast", "--var", "cities=@cities.json")
    assert done.returncode == 0, done.stdout
    with pytest.raises(AssertionError, match="final answer"):
        assert_replays(tmp_path / "plain.json", tools=[forecast], variables={"cities": ["Oslo", "Rome"]})


def test_replay_of_a_file_that_is_not_a_run_says_so(codeward, tmp_path):
    (tmp_path / "nope.json").write_text("[1, 2]")
    done = codeward("replay", "nope.json")
    assert done.returncode == 2 and "is not a saved run" in done.stderr


def test_a_saved_run_is_also_a_model_id(codeward, recorded):
    done = codeward(
        "run",
        "Total in euros?",
        "--model",
        "replay:run.json",
        "--tools",
        "rates.py",
        "--var",
        "amounts=@amounts.json",
        "--json",
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["output"] == 102.0


# -- runs saved from Python, and run files from strangers ------------------------------------------

SHOP_TOOLS = RATES.replace("def rate", "def shop_rate")
MARKER = "imported.txt"
# A tools file that leaves a mark when it is imported: a replay must never import what a run file names.
HOSTILE_TOOLS = f"""
from pathlib import Path
Path(__file__).with_name({MARKER!r}).write_text("imported")
{RATES}
"""


def _has_jupyter() -> bool:
    return all(importlib.util.find_spec(name) for name in ("jupyter_client", "ipykernel"))


@pytest.fixture
def shop_tools(tmp_path):
    """A tools module importable by name, as a project's own tools are."""
    (tmp_path / "shop_tools.py").write_text(SHOP_TOOLS)
    sys.path.insert(0, str(tmp_path))
    try:
        yield importlib.import_module("shop_tools")
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shop_tools", None)


def _save_from_python(shop_tools, executor, path):
    model = ScriptedModel(
        [
            code("euros = {c: amounts[c] * shop_rate(c) for c in amounts}\nprint(euros)"),
            code("final_answer(round(sum(euros.values()), 2))"),
        ]
    )
    with CodeAgent(tools=[shop_tools.shop_rate], model=model, executor=executor, verbosity_level=-1) as agent:
        assert agent.run("Total in euros?", additional_args={"amounts": {"USD": 100, "GBP": 10}}) == 102.0
    agent.memory.save(path)


@pytest.mark.parametrize(
    "executor",
    ["local", pytest.param("jupyter", marks=pytest.mark.skipif(not _has_jupyter(), reason="no jupyter"))],
)
def test_a_run_saved_from_python_names_its_flags_then_replays_with_no_difference(
    codeward, shop_tools, tmp_path, executor
):
    _save_from_python(shop_tools, executor, tmp_path / "run.json")

    refused = codeward("replay", "run.json")
    assert refused.returncode == 2, refused.stderr
    out = refused.stderr
    assert "nothing was run" in out and "--tools shop_tools:shop_rate: for the tool(s) shop_rate" in out
    assert "--var amounts=@FILE: amounts came from Python" in out
    assert ("--executor jupyter: the run was recorded on that executor (timeout_seconds=" in out) == (
        executor == "jupyter"
    )

    (tmp_path / "amounts.json").write_text(json.dumps({"USD": 100, "GBP": 10}))
    flags = ["--tools", "shop_tools:shop_rate", "--var", "amounts=@amounts.json"]
    done = codeward("replay", "run.json", "--executor", executor, *flags)
    assert done.returncode == 0, done.stdout
    assert f"2 steps and the final answer match on the {executor} executor" in done.stdout
    assert "recorded on" not in done.stdout

    if executor == "jupyter":  # the user may choose another sandbox, and is told which one it ran on
        elsewhere = codeward("replay", "run.json", "--executor", "local", *flags)
        assert "on the local executor (recorded on jupyter)" in elsewhere.stdout, elsewhere.stdout


def _hostile_run(shop_tools, tmp_path, record):
    """A run saved from Python whose record a stranger rewrote."""
    _save_from_python(shop_tools, "local", tmp_path / "run.json")
    data = json.loads((tmp_path / "run.json").read_text())
    data["codeward_run"].update(record)
    (tmp_path / "run.json").write_text(json.dumps(data))
    (tmp_path / "evil.py").write_text(HOSTILE_TOOLS)
    (tmp_path / "evil_module.py").write_text(HOSTILE_TOOLS)  # importable by name from the working folder


def test_a_hostile_run_file_imports_nothing_and_grants_nothing(codeward, shop_tools, tmp_path):
    _hostile_run(
        shop_tools,
        tmp_path,
        {
            "executor": "jupyter",
            "authorized_imports": ["*"],
            "tools": ["evil.py", "evil_module:rate"],
            "tool_sources": [{"name": "rate", "spec": "evil.py:rate"}, {"name": "other", "spec": "evil_module"}],
            "variable_sources": [{"name": "amounts", "from": "file", "file": "/etc/passwd"}],
        },
    )
    refused = codeward("replay", "run.json")
    assert refused.returncode == 2
    out = refused.stderr
    assert "--executor jupyter" in out and "--import '*'" in out
    assert "--tools evil.py:rate: for the tool(s) rate" in out and "--tools evil_module: for the tool(s) other" in out
    assert "--var amounts=@/etc/passwd" in out and "check each before you pass it" in out

    given = codeward("replay", "run.json", "--executor", "local", "--tools", "shop_tools:shop_rate")
    assert given.returncode == 2 and "--executor" not in given.stderr and "--tools evil.py:rate" in given.stderr
    assert not (tmp_path / MARKER).exists()


def test_an_old_style_record_naming_tools_to_load_loads_none(codeward, shop_tools, tmp_path):
    _hostile_run(shop_tools, tmp_path, {"tools": ["evil.py", "evil_module:rate"]})
    data = json.loads((tmp_path / "run.json").read_text())
    for key in ("tool_sources", "variable_sources", "executor_settings"):
        del data["codeward_run"][key]
    (tmp_path / "run.json").write_text(json.dumps(data))

    refused = codeward("replay", "run.json")
    assert refused.returncode == 2
    assert "--tools evil.py: the run was recorded with it" in refused.stderr
    assert "--tools evil_module:rate" in refused.stderr
    assert not (tmp_path / MARKER).exists()


def test_values_from_a_run_file_cannot_drive_the_terminal(codeward, shop_tools, tmp_path):
    _hostile_run(
        shop_tools,
        tmp_path,
        {
            "executor": "\x1b[2J[bold red]docker\u202e",
            "tool_sources": [{"name": "rate\x1b]0;pwned\x07", "spec": "x.py; rm -rf ~"}],
        },
    )
    refused = codeward("replay", "run.json")
    assert refused.returncode == 2
    out = refused.stderr
    assert "\x1b" not in out and "\x07" not in out and "\u202e" not in out
    assert "--executor '\\x1b[2J[bold red]docker\\u202e'" in out  # markup shown as text, quoted for the shell
    assert "--tools 'x.py; rm -rf ~': for the tool(s) rate\\x1b]0;pwned\\x07" in out


def test_the_demo_recording_an_old_run_file_replays_with_the_flag_it_names(codeward, tmp_path):
    shutil.copy(recording_path(), tmp_path / "demo.json")  # saved before tool and variable sources
    refused = codeward("replay", "demo.json")
    assert refused.returncode == 2 and "--tools codeward.demo:forecast" in refused.stderr
    done = codeward("replay", "demo.json", "--tools", "codeward.demo:forecast")
    assert done.returncode == 0, done.stdout  # its saved variables still reach the sandbox


def test_a_saved_memory_without_a_record_replays_as_before(codeward, tmp_path):
    shutil.copy(recording_path(), tmp_path / "bare.json")
    data = json.loads((tmp_path / "bare.json").read_text())
    del data["codeward_run"]
    (tmp_path / "bare.json").write_text(json.dumps(data))
    (tmp_path / "cities.json").write_text(json.dumps(DEMO_VARIABLES["cities"]))
    done = codeward("replay", "bare.json", "--tools", "codeward.demo:forecast", "--var", "cities=@cities.json")
    assert done.returncode == 0, done.stdout
    missing = codeward("replay", "bare.json")  # nothing recorded to name: it runs, and the diff tells
    assert missing.returncode == 1 and "replay failed" in missing.stdout


# -- --as-recorded: the user's consent to take what the file records, within limits ---------------


def test_as_recorded_takes_the_recorded_tools_and_variable_files_inside_the_runs_folder(codeward, recorded):
    data = json.loads(recorded.read_text())
    del data["codeward_run"]["variables"]  # only the file the value came from is left
    recorded.write_text(json.dumps(data))
    done = codeward("replay", "run.json", "--as-recorded")
    assert done.returncode == 0, done.stdout
    assert "3 steps and the final answer match" in done.stdout


def test_as_recorded_never_climbs_out_of_the_runs_folder_nor_grants_imports_or_an_unconfined_sandbox(
    codeward, shop_tools, tmp_path
):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "evil.py").write_text(HOSTILE_TOOLS)
    (outside / "amounts.json").write_text(json.dumps({"USD": 1}))
    run_folder = tmp_path / "runs"
    run_folder.mkdir()
    _save_from_python(shop_tools, "local", run_folder / "run.json")
    data = json.loads((run_folder / "run.json").read_text())
    data["codeward_run"].update(
        {
            "executor": "jupyter",
            "authorized_imports": ["os"],
            "tool_sources": [{"name": "shop_rate", "spec": "../elsewhere/evil.py:rate"}],
            "variable_sources": [{"name": "amounts", "from": "file", "file": "../elsewhere/amounts.json"}],
        }
    )
    (run_folder / "run.json").write_text(json.dumps(data))

    refused = codeward("replay", "runs/run.json", "--as-recorded")
    assert refused.returncode == 2, refused.stderr
    out = refused.stderr
    assert "--executor jupyter" in out and "--import os" in out
    assert "evil.py:rate: for the tool(s) shop_rate" in out and "amounts" in out
    assert not (outside / MARKER).exists()


@pytest.mark.parametrize("executor", ["docker"])  # "docker": CI's hook fails this test instead of skipping it
def test_as_recorded_takes_a_confining_executor_from_the_file(codeward, shop_tools, tmp_path, executor):
    if why := _module_missing(executor) or PROFILES[executor].unavailable():
        pytest.skip(why)
    _save_from_python(shop_tools, "local", tmp_path / "run.json")
    (tmp_path / "amounts.json").write_text(json.dumps({"USD": 100, "GBP": 10}))
    data = json.loads((tmp_path / "run.json").read_text())
    data["codeward_run"]["executor"] = executor
    data["codeward_run"]["variable_sources"] = [{"name": "amounts", "from": "file", "file": "amounts.json"}]
    (tmp_path / "run.json").write_text(json.dumps(data))
    done = codeward("replay", "run.json", "--as-recorded")
    assert done.returncode == 0, done.stdout
    assert f"2 steps and the final answer match on the {executor} executor" in done.stdout


def _run_naming_an_installed_module(shop_tools, tmp_path):
    """A run file in its own folder whose record names a module installed elsewhere (on sys.path)."""
    installed = tmp_path / "site"
    installed.mkdir()
    (installed / "evil_installed.py").write_text(HOSTILE_TOOLS)
    run_folder = tmp_path / "runs"
    run_folder.mkdir()
    _save_from_python(shop_tools, "local", run_folder / "run.json")
    data = json.loads((run_folder / "run.json").read_text())
    data["codeward_run"]["tool_sources"] = [{"name": "shop_rate", "spec": "evil_installed:shop_rate"}]
    data["codeward_run"]["variable_sources"] = []
    (run_folder / "run.json").write_text(json.dumps(data))
    return installed, run_folder / "run.json"


def test_as_recorded_never_imports_an_installed_module_the_file_names(shop_tools, tmp_path, monkeypatch):
    installed, run_file = _run_naming_an_installed_module(shop_tools, tmp_path)
    monkeypatch.syspath_prepend(str(installed))
    with pytest.raises(ReplayNeedsFlags, match="--tools evil_installed:shop_rate: for the tool"):
        replay_run(run_file, as_recorded=True, variables={"amounts": {"USD": 1}})
    assert not (installed / MARKER).exists()


def test_as_recorded_takes_a_module_whose_file_lies_in_the_runs_folder(shop_tools, tmp_path):
    _, run_file = _run_naming_an_installed_module(shop_tools, tmp_path)
    (run_file.parent / "evil_installed.py").write_text(SHOP_TOOLS)  # handed with the run: the user's consent covers it
    report = replay_run(run_file, as_recorded=True, variables={"amounts": {"USD": 100, "GBP": 10}})
    assert report.ok, report.render()


def test_control_adopting_module_names_imports_what_the_file_names(shop_tools, tmp_path, monkeypatch):
    """The harm, with the rule off: the module's import-time code runs before anything is checked."""
    installed, run_file = _run_naming_an_installed_module(shop_tools, tmp_path)
    monkeypatch.syspath_prepend(str(installed))
    monkeypatch.setattr(replay_module, "_tool_file_inside", lambda folder, target: target)
    try:
        with pytest.raises(ToolSpecError):  # it has no shop_rate: too late, its code ran
            replay_run(run_file, as_recorded=True, variables={"amounts": {"USD": 100, "GBP": 10}})
    finally:
        sys.modules.pop("evil_installed", None)
    assert (installed / MARKER).exists()


@pytest.mark.parametrize("argument", ["authorized_imports", "tool_specs"])
def test_replay_refuses_a_lone_string_where_it_takes_a_list_of_names(argument, tmp_path):
    with pytest.raises(TypeError, match=rf"{argument} must be a list.*\['tools\.py'\]"):
        replay_run(tmp_path / "run.json", **{argument: "tools.py"})
