"""`codeward replay` and `assert_replays`: a saved run re-run offline, compared step by step."""

from __future__ import annotations

import json

import pytest

from codeward import CodeAgent, ScriptedModel, tool
from codeward.demo import DEMO_VARIABLES, forecast
from codeward.testing import assert_replays
from tests.cli.conftest import code, write_script

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


def test_replay_of_an_unchanged_run_passes(codeward, recorded):
    done = codeward("replay", "run.json")
    assert done.returncode == 0, done.stdout
    assert "replay passed" in done.stdout and "3 steps and the final answer match" in done.stdout


def test_replay_fails_with_a_diff_when_a_tool_changed(codeward, recorded, tmp_path):
    (tmp_path / "rates.py").write_text(RATES.replace('"USD": 0.9', '"USD": 0.95'))
    done = codeward("replay", "run.json")
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
    report = assert_replays(recorded)
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
    agent.memory.save(tmp_path / "plain.json")  # no codeward_run record: tools and variables are given
    (tmp_path / "cities.json").write_text(json.dumps(DEMO_VARIABLES["cities"]))
    done = codeward("replay", "plain.json", "--tools", "codeward.demo:forecast", "--var", "cities=@cities.json")
    assert done.returncode == 0, done.stdout
    with pytest.raises(AssertionError, match="final answer"):
        assert_replays(tmp_path / "plain.json", tools=[forecast], variables={"cities": ["Oslo", "Rome"]})


def test_replay_of_a_file_that_is_not_a_run_says_so(codeward, tmp_path):
    (tmp_path / "nope.json").write_text("[1, 2]")
    done = codeward("replay", "nope.json")
    assert done.returncode == 2 and "is not a saved run" in done.stdout


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
