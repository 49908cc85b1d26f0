"""What `agent.memory.save` records of a run's set-up, for `codeward replay` to read as hints."""

from __future__ import annotations

import json

from codeward import CodeAgent, ScriptedModel, tool
from codeward.demo import forecast


def _saved_record(tmp_path, **agent_options):
    @tool
    def local_helper(x: int) -> int:
        """Defined inside a function, so no module holds it.

        Args:
            x: A number.
        """
        return x

    model = ScriptedModel(["Thought: count them.\n<code>\nfinal_answer(len(cities))\n</code>"])
    with CodeAgent(tools=[forecast, local_helper], model=model, verbosity_level=-1, **agent_options) as agent:
        agent.run("How many?", additional_args={"cities": ["Oslo", "Rome"]})
    text = agent.memory.save(tmp_path / "run.json").read_text()
    return text, json.loads(text)["codeward_run"]


def test_a_saved_run_records_the_executor_tools_and_variable_names(tmp_path):
    text, record = _saved_record(
        tmp_path,
        additional_authorized_imports=["statistics", "numpy"],
        executor_kwargs={"timeout_seconds": 12, "env": {"TOKEN": "sekrit-token"}, "allowed_paths": [str(tmp_path)]},
    )
    assert record["executor"] == "local"
    assert record["executor_settings"]["timeout_seconds"] == 12.0
    assert record["executor_settings"]["isolation"] == "process"
    assert record["authorized_imports"] == ["numpy"]  # statistics is allowed anyway
    assert record["tool_sources"] == [{"name": "forecast", "spec": "codeward.demo:forecast"}, {"name": "local_helper"}]
    assert record["variable_sources"] == [{"name": "cities", "from": "python"}]
    assert "variables" not in record  # values passed from Python stay out of the file
    assert "sekrit-token" not in text and str(tmp_path) not in text  # no environment, no machine paths


def test_every_setting_recorded_is_a_plain_value(tmp_path):
    _, record = _saved_record(tmp_path, executor="local", executor_kwargs={"isolation": "in_process"})
    assert record["executor_settings"]["isolation"] == "in_process"
    assert all(isinstance(value, (bool, int, float, str)) for value in record["executor_settings"].values())
