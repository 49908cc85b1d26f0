"""Host tools: they run on the host, keep their secrets and state there, and nothing else is callable.

The attacks speak the bridge's own wire protocol from inside the sandbox (the
prelude's request prefix on the kernel's stdin channel), as hostile model code could.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeward.executors import codec
from codeward.executors.base import ExecutionError, ExecutionTimeout
from codeward.executors.jupyter import JupyterExecutor
from codeward.executors.kernel.bridge import ToolBridge
from codeward.executors.kernel.prelude import REQUEST
from codeward.platform.tools import FinalAnswerTool, Tool, ToolDefinitionError, tool

SECRET_NAME = "CODEWARD_TEST_WEATHER_KEY"
SECRET = "wk-7f3a9c-do-not-leak"


@tool
def weather(city: str, unit: str = "C") -> str:
    """Reports the weather, with the host's API key.

    Args:
        city: the city to look up
        unit: C or F
    """
    key = os.environ[SECRET_NAME]
    if city == "Atlantis":
        raise LookupError(f"no weather station in {city}")
    return f"{city}: 21{unit} (authorised with a key ending {key[-4:]})"


class Counter(Tool):
    """A tool whose state lives in the host's object."""

    name = "counter"
    description = "Counts its calls."
    inputs = {"step": {"type": "integer", "description": "how much to add"}}
    output_type = "integer"

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def forward(self, step: int) -> int:
        self.total += step
        return self.total


@tool
def opaque() -> Any:
    """Returns something the codec cannot carry.

    Args:
    """
    return object()


@tool
def sandbox_pid() -> int:
    """The process id of wherever this tool runs.

    Args:
    """
    import os

    return os.getpid()


@pytest.fixture(scope="module")
def host_tools(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[JupyterExecutor, Counter]]:
    counter = Counter()
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(SECRET_NAME, SECRET)
        with JupyterExecutor(timeout_seconds=10) as executor:
            executor.send_tools(
                {"weather": weather, "counter": counter, "opaque": opaque, "final_answer": FinalAnswerTool()}
            )
            yield executor, counter


def test_a_tool_uses_a_host_secret_that_the_sandbox_cannot_read(host_tools: tuple[JupyterExecutor, Counter]) -> None:
    executor, _ = host_tools
    assert executor.run("weather('Oslo')").output == "Oslo: 21C (authorised with a key ending leak)"
    # The secret is spelled backwards in the code, so only a real leak can put it in the sandbox's memory.
    looked = executor.run(
        "def leaked():\n"
        "    import gc, os, sys\n"
        f"    secret = {SECRET[::-1]!r}[::-1]\n"
        f"    places = [os.environ.get({SECRET_NAME!r}, ''), open('/proc/self/environ').read()]\n"
        "    places += [repr(getattr(weather, a, None)) for a in ('__closure__', '__defaults__', '__kwdefaults__')]\n"
        "    places += [repr(vars(sys.modules['_codeward']))]\n"
        "    places += [repr(o) for o in gc.get_objects() if isinstance(o, (dict, tuple))]\n"
        "    return any(secret in place for place in places)\n"
        "leaked()"
    ).output
    assert looked is False


def test_a_stub_has_the_tools_name_signature_and_docstring(host_tools: tuple[JupyterExecutor, Counter]) -> None:
    executor, _ = host_tools
    name, signature, doc = executor.run(
        "import inspect\n(weather.__name__, str(inspect.signature(weather)), weather.__doc__)"
    ).output
    assert (name, signature) == ("weather", "(city: 'str', unit: 'str' = 'C') -> 'str'")
    assert doc.startswith("Reports the weather") and "city: the city to look up" in doc


def test_a_tool_keeps_its_instance_state_on_the_host(host_tools: tuple[JupyterExecutor, Counter]) -> None:
    executor, counter = host_tools
    before = counter.total
    assert executor.run("counter(2)\ncounter(step=3)").output == before + 5
    assert executor.run("counter(10)").output == before + 15
    assert counter.total == before + 15


def test_a_tools_exception_is_catchable_by_the_models_code(host_tools: tuple[JupyterExecutor, Counter]) -> None:
    executor, _ = host_tools
    caught = executor.run(
        "try:\n    weather('Atlantis')\nexcept Exception as error:\n    caught = (type(error).__name__, str(error))\ncaught"
    ).output
    assert caught == ("LookupError", "no weather station in Atlantis")  # as the tool raised it on the host
    with pytest.raises(ExecutionError) as uncaught:
        executor.run("weather('Atlantis')")
    assert uncaught.value.error_type == "LookupError" and "weather('Atlantis')" in uncaught.value.traceback


def test_arguments_are_checked_against_the_tools_inputs(host_tools: tuple[JupyterExecutor, Counter]) -> None:
    executor, _ = host_tools
    messages = executor.run(
        "messages = []\n"
        "for call in (lambda: weather(3), lambda: weather('Oslo', 'C', 'extra'), lambda: counter(step='x')):\n"
        "    try:\n        call()\n    except TypeError as error:\n        messages.append(str(error))\n"
        "messages"
    ).output
    assert "argument 'city' must be string, got int" in messages[0]
    assert "too many positional arguments" in messages[1]
    assert "argument 'step' must be integer, got str" in messages[2]


def test_a_tool_result_the_codec_cannot_carry_is_an_error_in_the_sandbox(
    host_tools: tuple[JupyterExecutor, Counter],
) -> None:
    executor, _ = host_tools
    with pytest.raises(ExecutionError, match="cannot enter the sandbox"):
        executor.run("opaque()")


def test_every_tool_call_is_logged(
    host_tools: tuple[JupyterExecutor, Counter], caplog: pytest.LogCaptureFixture
) -> None:
    executor, _ = host_tools
    with caplog.at_level(logging.INFO, logger="codeward.executors.kernel.bridge"):
        executor.run("weather('Rome')\ntry:\n    weather('Atlantis')\nexcept Exception:\n    pass")
    assert "tool weather ran" in caplog.text and "tool weather failed" in caplog.text


def _raw_request(executor: JupyterExecutor, body: str) -> Any:
    """Send a hand-made request over the bridge's wire, as hostile code in the sandbox could."""
    return executor.run(
        "import sys\n"
        "codec = sys.modules['_codeward_codec']\n"
        f"codec.loads(get_ipython().kernel.raw_input({REQUEST!r} + {body}))"
    ).output


@pytest.mark.parametrize(
    "name", ["__import__", "os.system", "eval", "send_tools", "forward", "weather.forward", "", "FinalAnswerTool"]
)
def test_nothing_but_registered_tools_can_be_called(host_tools: tuple[JupyterExecutor, Counter], name: str) -> None:
    executor, _ = host_tools
    reply = _raw_request(executor, f"'tool:' + codec.dumps({{'tool': {name!r}, 'arguments': {{}}}})")
    assert reply["error"]["message"].startswith(f"there is no host tool named {name!r}")


@pytest.mark.parametrize("kind", ["variables", "tools", "run", ""])
def test_other_request_kinds_are_refused_during_model_code(
    host_tools: tuple[JupyterExecutor, Counter], kind: str
) -> None:
    executor, _ = host_tools
    reply = _raw_request(executor, f"{kind + ':'!r}")
    assert reply["error"]["message"] == "the sandbox can only call its tools"


def test_a_pickled_request_is_never_unpickled_on_the_host(
    host_tools: tuple[JupyterExecutor, Counter], tmp_path: Path
) -> None:
    executor, _ = host_tools
    marker = tmp_path / "pwned"
    executor.send_variables({"marker_path": str(marker)})
    reply = executor.run(
        "import sys, os\n"
        "codec = sys.modules['_codeward_codec']\n"
        "class Exploit:\n"
        "    def __reduce__(self):\n"
        "        return (os.system, ('touch ' + marker_path,))\n"
        "body = codec.dumps({'tool': 'weather', 'arguments': {'city': Exploit()}}, allow_pickle=True)\n"
        f"codec.loads(get_ipython().kernel.raw_input({REQUEST!r} + 'tool:' + body))"
    ).output
    assert reply["error"]["kind"] == "call" and "malformed tool request" in reply["error"]["message"]
    assert not marker.exists()


def test_a_forged_pickled_final_answer_is_refused(host_tools: tuple[JupyterExecutor, Counter], tmp_path: Path) -> None:
    executor, _ = host_tools
    marker = tmp_path / "pwned"
    with pytest.raises(ExecutionError, match="refuses"):
        executor.run(
            "import sys, os\n"
            "class Exploit:\n"
            "    def __reduce__(self):\n"
            f"        return (os.system, ('touch {marker}',))\n"
            "text = sys.modules['_codeward_codec'].dumps(Exploit(), allow_pickle=True)\n"
            "get_ipython().payload_manager.write_payload({'source': 'codeward', 'final': text})"
        )
    assert not marker.exists()


@pytest.mark.parametrize(
    "body",
    ["not json at all", '{"tool": 1, "arguments": {}}', '{"tool": "weather", "arguments": [1]}', "[]", '{"$": "nope"}'],
)
def test_malformed_requests_get_an_error_reply(body: str) -> None:
    reply = codec.loads(ToolBridge({"weather": weather}).answer(f"{REQUEST}tool:{body}"))
    assert reply["error"]["kind"] == "call" and reply["error"]["message"].startswith("malformed tool request")


def test_inline_tools_run_inside_the_sandbox() -> None:
    with JupyterExecutor(tools_mode="inline") as executor:
        executor.send_tools({"sandbox_pid": sandbox_pid, "final_answer": FinalAnswerTool()})
        kernel_pid = executor.run("import os; os.getpid()").output
        assert executor.run("sandbox_pid()").output == kernel_pid != os.getpid()
        result = executor.run("final_answer(sandbox_pid())")
        assert result.is_final_answer and result.output == kernel_pid


def test_auto_mode_on_jupyter_runs_each_tool_where_it_can() -> None:
    """A choice on jupyter (whose default stays "host"): the plain tool inline, the stateful one here."""
    counter = Counter()
    with JupyterExecutor(tools_mode="auto") as executor:
        executor.send_tools({"sandbox_pid": sandbox_pid, "counter": counter})
        assert executor._bridge.placement == {"sandbox_pid": "inline", "counter": "host"}
        ran_at, total, kernel_pid = executor.run("import os\nsandbox_pid(), counter(2), os.getpid()").output
        assert ran_at == kernel_pid != os.getpid()
        assert total == 2 == counter.total


def test_inline_mode_refuses_tools_it_cannot_ship() -> None:
    def make_closure() -> Any:
        factor = 3

        @tool
        def triple(x: int) -> int:
            """Triples.

            Args:
                x: the number
            """
            return factor * x

        return triple

    with pytest.raises(ToolDefinitionError, match=r"Counter object.*tools_mode='host'"):
        ToolBridge({"counter": Counter()}, mode="inline")
    with pytest.raises(ToolDefinitionError, match="enclosing function \\(factor\\)"):
        ToolBridge({"triple": make_closure()}, mode="inline")
    with pytest.raises(ToolDefinitionError, match="register it under its function's name"):
        ToolBridge({"renamed": sandbox_pid}, mode="inline")
    with pytest.raises(ValueError, match="tools_mode must be one of"):
        ToolBridge({}, mode="remote")


def test_a_loop_of_tool_calls_is_stopped_by_the_time_limit() -> None:
    counter = Counter()
    with JupyterExecutor(timeout_seconds=1) as executor:
        executor.send_tools({"counter": counter})
        with pytest.raises(ExecutionTimeout, match="interrupted"):
            executor.run("while True:\n    counter(1)")
        calls = counter.total
        assert calls > 0
        assert executor.run("counter(0)").output == calls  # the next run works, with the tool state kept
