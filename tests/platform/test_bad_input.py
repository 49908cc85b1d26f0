"""Bad input gets a clear error that says what was wrong and what to do."""

from __future__ import annotations

import re

import pytest

from codeward import CodeAgent, ScriptedModel, Tool, ToolCallingAgent, ToolDefinitionError, tool
from codeward.executors import base, create_executor
from codeward.executors.base import install_line
from codeward.platform.prompts import load_prompt_templates
from tests.platform.doubles import ExecDouble


@tool
def lookup(key: str) -> str:
    """Looks a key up.

    Args:
        key: The key.
    """
    return key.upper()


def test_unknown_executor_names_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown executor 'dockr'.*'local'"):
        CodeAgent(tools=[], model=ScriptedModel([]), executor="dockr")


def test_executor_whose_extra_is_missing_names_the_pip_line(tmp_path, monkeypatch):
    (tmp_path / "fancy_sandbox.py").write_text("import fancy_cloud_sdk_not_installed\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(base._REGISTRY, "fancy", ("fancy_sandbox", "FancyExecutor", "fancy"))
    with pytest.raises(
        ImportError, match=r"needs the package 'fancy_cloud_sdk_not_installed'.*" + re.escape(install_line("fancy"))
    ):
        create_executor("fancy")


def test_duplicate_tool_names_are_refused():
    with pytest.raises(ValueError, match="two tools are named 'lookup'"):
        CodeAgent(tools=[lookup, lookup], model=ScriptedModel([]), executor=ExecDouble())


def test_a_tool_and_a_managed_agent_cannot_share_a_name():
    helper = CodeAgent(tools=[], model=ScriptedModel([]), executor=ExecDouble(), name="lookup", description="d")
    with pytest.raises(ValueError, match="both a tool and a managed agent"):
        CodeAgent(tools=[lookup], model=ScriptedModel([]), executor=ExecDouble(), managed_agents=[helper])


def test_a_tool_without_a_docstring_says_what_is_missing():
    def no_doc(x: int) -> int:
        return x

    with pytest.raises(ToolDefinitionError, match="'no_doc' has no docstring"):
        tool(no_doc)


def test_a_docstring_missing_an_argument_names_the_argument():
    def half(x: int, y: int) -> int:
        """Adds.

        Args:
            x: first.
        """
        return x + y

    with pytest.raises(ToolDefinitionError, match="does not describe argument 'y'"):
        tool(half)


def test_a_tool_subclass_with_a_bad_type_is_refused():
    class Bad(Tool):
        name = "bad"
        description = "bad"
        inputs = {"x": {"type": "str", "description": "x"}}

    with pytest.raises(ToolDefinitionError, match="unknown type 'str'"):
        Bad()


@pytest.mark.parametrize("task", ["", "   ", None])
def test_an_empty_task_is_refused(task):
    agent = CodeAgent(tools=[], model=ScriptedModel([]), executor=ExecDouble(), verbosity_level=-1)
    with pytest.raises(ValueError, match="task must be a non-empty string"):
        agent.run(task)


def test_additional_args_must_be_variable_names():
    agent = CodeAgent(tools=[lookup], model=ScriptedModel([]), executor=ExecDouble(), verbosity_level=-1)
    with pytest.raises(ValueError, match="'my-var' is not a Python identifier"):
        agent.run("t", additional_args={"my-var": 1})
    with pytest.raises(ValueError, match="'len' would hide Python's builtin len"):
        agent.run("t", additional_args={"len": 1})
    with pytest.raises(ValueError, match="would hide the tool"):
        agent.run("t", additional_args={"lookup": 1})


def test_a_prompt_template_missing_a_key_fails_at_construction():
    templates = load_prompt_templates("code_agent")
    del templates["planning"]["update_plan_post_messages"]
    with pytest.raises(ValueError, match=r"'planning\.update_plan_post_messages'"):
        CodeAgent(tools=[], model=ScriptedModel([]), executor=ExecDouble(), prompt_templates=templates)


def test_a_prompt_template_with_an_undefined_variable_names_it():
    templates = load_prompt_templates("code_agent")
    templates["system_prompt"] = "Hello {{ toolz }}"
    with pytest.raises(ValueError, match="'toolz' is undefined"):
        CodeAgent(tools=[], model=ScriptedModel([]), executor=ExecDouble(), prompt_templates=templates)


def test_executor_kwargs_with_an_instance_is_refused():
    with pytest.raises(ValueError, match="executor_kwargs apply only when executor is a name"):
        CodeAgent(tools=[], model=ScriptedModel([]), executor=ExecDouble(), executor_kwargs={"timeout_seconds": 1})


def test_the_model_must_be_a_model():
    with pytest.raises(TypeError, match="model must be a codeward Model"):
        ToolCallingAgent(tools=[], model="gpt-4o")


def test_max_steps_must_be_positive():
    with pytest.raises(ValueError, match="max_steps must be a positive integer"):
        ToolCallingAgent(tools=[], model=ScriptedModel([]), max_steps=0)


def test_a_failed_construction_closes_the_executor():
    executor = ExecDouble()
    with pytest.raises(ValueError):
        CodeAgent(tools=[lookup, lookup], model=ScriptedModel([]), executor=executor)
    assert executor.closed


@pytest.mark.parametrize("executor", ["local", ExecDouble])
def test_a_lone_string_of_imports_is_refused_not_read_letter_by_letter(executor):
    chosen = executor if isinstance(executor, str) else executor()
    with pytest.raises(TypeError, match=r"additional_authorized_imports must be a list.*\['numpy'\]"):
        CodeAgent(tools=[], model=ScriptedModel([]), executor=chosen, additional_authorized_imports="numpy")


def test_a_list_of_imports_is_taken():
    with CodeAgent(
        tools=[], model=ScriptedModel([]), executor="local", additional_authorized_imports=("numpy",)
    ) as agent:
        assert "numpy" in agent.executor.authorized_imports
        assert "n" not in agent.executor.authorized_imports


@pytest.mark.parametrize(
    ("argument", "value", "message"),
    [
        ("tools", "lookup", r"tools must be a list of tools, e\.g\. tools=\[my_tool\], not the string 'lookup'"),
        ("managed_agents", "helper", r"managed_agents must be a list of agents, e\.g\. managed_agents=\[helper\]"),
    ],
)
def test_a_lone_string_for_a_list_of_tools_or_agents_is_refused(argument, value, message):
    given = {"tools": [], argument: value}
    with pytest.raises(TypeError, match=message):
        ToolCallingAgent(model=ScriptedModel([]), **given)
