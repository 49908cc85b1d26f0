"""Host tools on E2B (``tools_mode="host"``), through the unmodified SDK and the local protocol server.

The sandbox asks by printing a request carrying the cell's nonce; the host runs the
tool and writes the answer with envd's file API. What is checked here: tools run on
the host (their state and secrets stay there), the host checks what the sandbox asks
for, printed text cannot pass for a request, tool errors arrive as on docker, and
requests are bounded by the output budget and the time limit.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from codeward import tool
from codeward.executors.base import ExecutionError, ExecutionTimeout, Executor
from codeward.executors.e2b import E2BExecutor
from codeward.platform.tools import FinalAnswerTool
from tests.cli.sample_tools import double
from tests.executors import test_e2b
from tests.executors.contract.conftest import PROFILES
from tests.executors.test_e2b import Counter

LIMIT = 3.0
E2B_SETTINGS: dict[str, Any] = {"timeout_seconds": LIMIT, "tools_mode": "host"}
# The E2B tests' fixtures: one protocol server for the module, and executors built with E2B_SETTINGS.
server = test_e2b.server
make = test_e2b.make
SECRET_VARIABLE = "CODEWARD_E2B_TEST_SECRET"
SECRET = "s3cret-value-that-stays-on-the-host"


@tool
def measure(text: str) -> int:
    """Measures a text.

    Args:
        text: the text
    """
    return len(text)


@tool
def secret_length() -> int:
    """The length of the host's secret, which the tool reads from the host's environment."""
    return len(os.environ[SECRET_VARIABLE])


@tool
def nap(seconds: float) -> str:
    """Sleeps on the host.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return "rested"


class QuotaExceeded(RuntimeError):
    """An exception type the sandbox does not have."""


@tool
def spend(amount: int) -> int:
    """Fails the way a tool with a quota does.

    Args:
        amount: what to spend
    """
    if amount > 10:
        raise QuotaExceeded(f"{amount} is over the quota of 10")
    return 10 - amount


@pytest.fixture(scope="module")
def docker() -> Iterator[Executor]:
    """The docker executor, whose host tools go through the kernel's stdin channel, to compare with."""
    reason = PROFILES["docker"].unavailable()
    if reason:
        pytest.fail(f"the comparison with docker needs it: {reason}")
    with PROFILES["docker"].make(timeout_seconds=30.0) as made:
        yield made


def test_a_host_tool_called_from_e2b_code_returns_its_value(make: Callable[..., E2BExecutor]) -> None:
    executor = make()
    executor.send_tools({"double": double, "final_answer": FinalAnswerTool()})
    result = executor.run("print('before')\nvalues = [double(n) for n in range(5)]\nprint('after')\nvalues")
    assert result.output == [0, 2, 4, 6, 8]
    assert result.logs == "before\nafter\n"  # the nonce and the requests are not part of what was printed
    assert executor.run("final_answer(double(x=21))").output == 42


def test_a_stateful_tool_keeps_its_state_on_the_host(make: Callable[..., E2BExecutor]) -> None:
    counter = Counter()
    executor = make()
    executor.send_tools({"counter": counter})
    assert executor.run("counter(), counter()").output == (1, 2)
    assert executor.run("counter()").output == 3
    assert counter.calls == 3


def test_a_secret_the_tool_reads_never_enters_the_sandbox(
    make: Callable[..., E2BExecutor], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(SECRET_VARIABLE, SECRET)
    executor = make()
    executor.send_tools({"secret_length": secret_length})
    length, view = executor.run(
        "import os, sys\n"
        "files = []\n"
        "for root, _, names in os.walk(os.getcwd()):\n"
        "    for name in names:\n"
        "        with open(os.path.join(root, name), 'rb') as handle:\n"
        "            files.append(handle.read().decode('utf-8', 'replace'))\n"
        "sandbox = sys.modules['_codeward']._Sandbox\n"
        "view = [str(dict(os.environ)), files, repr(vars(sandbox)), repr(vars(sandbox.ask)), repr(globals())]\n"
        "secret_length(), repr(view)"
    ).output
    assert length == len(SECRET)
    assert SECRET not in view and "secret_length" in view  # the code's view was read, and has no secret


def test_arguments_are_checked_on_the_host_as_on_docker(make: Callable[..., E2BExecutor], docker: Executor) -> None:
    """A request made by hand, past the stub's own checks, is refused by the host with the same error."""
    forge = (
        "import sys\n"
        "codeward, codec = sys.modules['_codeward'], sys.modules['_codeward_codec']\n"
        "refusals = []\n"
        "for request in ({'tool': 'double', 'arguments': {'x': 'seven'}},\n"
        "                {'tool': 'double', 'arguments': {'y': 1}},\n"
        "                {'tool': 'os.system', 'arguments': {'command': 'true'}}):\n"
        "    try:\n"
        "        codeward._call_host(request['tool'], request['arguments'])\n"
        "    except Exception as error:\n"
        "        refusals.append([type(error).__name__, str(error)])\n"
        "refusals"
    )
    executor = make()
    seen = {}
    for name, sandbox in (("e2b", executor), ("docker", docker)):
        sandbox.send_tools({"double": double})
        seen[name] = sandbox.run(forge).output
    assert seen["e2b"] == seen["docker"]
    assert [kind for kind, _ in seen["e2b"]] == ["ToolCallError"] * 3
    assert "no host tool named 'os.system'" in seen["e2b"][2][1]
    with pytest.raises(ExecutionError) as caught:
        executor.run("double()")
    assert caught.value.error_type == "ToolCallError"


def test_a_tools_exception_reaches_the_code_as_on_docker(make: Callable[..., E2BExecutor], docker: Executor) -> None:
    code = (
        "try:\n    spend(11)\n    caught = None\n"
        "except RuntimeError as error:\n    caught = [type(error).__name__, str(error)]\n"
        "caught, spend(4)"
    )
    executor = make()
    results = []
    for sandbox in (executor, docker):
        sandbox.send_tools({"spend": spend})
        results.append(sandbox.run(code).output)
    assert results[0] == results[1]
    assert results[0][0][0] == "QuotaExceeded" and "over the quota of 10" in results[0][0][1]
    assert results[0][1] == 6


def test_a_printed_request_without_the_cells_nonce_is_only_text(make: Callable[..., E2BExecutor]) -> None:
    counter = Counter()
    executor = make()
    executor.send_tools({"counter": counter})
    forged = '\\x1bcodeward:\' + \'0\' * 32 + \':tool:1:{"tool": "counter", "arguments": {}}'
    result = executor.run(f"print('{forged}')\nprint('\\x1bcodeward:' + '1' * 32 + ':cell::')\n'done'")
    assert result.output == "done"
    assert counter.calls == 0
    assert '"tool": "counter"' in result.logs and ":cell::" in result.logs  # shown as what it is: text


def test_without_host_tools_no_printed_nonce_is_taken(make: Callable[..., E2BExecutor]) -> None:
    """The plain final_answer runs in the sandbox, so no nonce is announced and the host takes none:
    a cell that starts by printing one, then a request carrying it, only printed text."""
    executor = make()
    executor.send_tools({"final_answer": FinalAnswerTool()})
    nonce = "ab" * 16
    result = executor.run(
        f"print('\\x1bcodeward:{nonce}:cell::')\n"
        f'print(\'\\x1bcodeward:{nonce}:tool:1:\' + \'{{"tool": "final_answer", "arguments": {{"answer": 1}}}}\')\n'
        "'not an answer'"
    )
    assert result.output == "not an answer" and not result.is_final_answer
    assert f"{nonce}:cell::" in result.logs and f"{nonce}:tool:1:" in result.logs


def test_a_request_flood_is_bounded_by_the_output_budget(make: Callable[..., E2BExecutor]) -> None:
    executor = make(max_output_bytes=20_000)
    executor.send_tools({"measure": measure})
    refused = executor.run(
        "measure('x' * 15_000)\ntry:\n    measure('x' * 10_000)\nexcept Exception as error:\n    refused = str(error)\nrefused"
    )
    assert "past what is left of the cell's output budget" in refused.output
    flood = "for _ in range(10_000):\n    try:\n        measure('x' * 5_000)\n    except Exception:\n        pass"
    with pytest.raises(ExecutionError) as caught:
        executor.run(flood)
    assert caught.value.error_type == "OutputLimitExceeded"
    assert executor.run("measure('four')").output == 4


def test_the_time_limit_applies_while_the_code_waits_for_the_host(make: Callable[..., E2BExecutor]) -> None:
    executor = make()
    executor.send_tools({"nap": nap})
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout):  # a request the host never answers: the wait is cut at the limit
        executor.run("import sys\nsys.modules['_codeward']._ask_host('variables')")
    assert LIMIT <= time.monotonic() - started < LIMIT + 2
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout):
        executor.run(f"nap({LIMIT + 1})")
    assert time.monotonic() - started < LIMIT + 3
    assert executor.run("nap(0)").output == "rested"


def test_host_tools_work_again_after_the_context_restarts(make: Callable[..., E2BExecutor]) -> None:
    executor = make(timeout_seconds=1.0)
    executor.send_tools({"double": double})
    stubborn = "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass"
    with pytest.raises(ExecutionTimeout, match="context was restarted"):
        executor.run(stubborn)
    assert executor.run("double(5)").output == 10
