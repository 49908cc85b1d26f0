"""The E2B executor against the local server that speaks E2B's protocol, with the SDK unmodified.

What the contract suite does not cover: E2B's own failure modes (a sandbox that
expires, a run that outlives even the SDK's deadline, the SDK's doubled
timeout), the construction errors, inline tools, and an agent run end to end.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pandas as pd
import pytest
from PIL import Image

from codeward import CodeAgent, ScriptedModel, tool
from codeward.executors.base import ExecutionError, ExecutionTimeout, SandboxError
from codeward.executors.e2b import E2BExecutor
from codeward.platform.tools import FinalAnswerTool, Tool, ToolDefinitionError
from tests.e2b_server import E2BServer
from tests.executors import inline_tool_module
from tests.timing import busy_allowance

LIMIT = 2.0
#: What `make` builds with; a module that imports the fixture sets its own.
E2B_SETTINGS: dict[str, Any] = {"timeout_seconds": LIMIT}


@tool
def shout(text: str) -> str:
    """Returns the text in capitals, with the sandbox's greeting.

    Args:
        text: what to shout
    """
    import os

    return f"{os.environ.get('GREETING', '')}{text.upper()}"


class Counter(Tool):
    name = "counter"
    description = "Counts calls; its state lives in this object."
    inputs: dict[str, dict[str, Any]] = {}
    output_type = "integer"

    def __init__(self) -> None:
        self.calls = 0

    def forward(self) -> int:
        self.calls += 1
        return self.calls


@pytest.fixture(scope="module")
def server() -> Iterator[E2BServer]:
    with E2BServer() as running:
        yield running


@pytest.fixture
def make(server: E2BServer, request: pytest.FixtureRequest) -> Iterator[Callable[..., E2BExecutor]]:
    made: list[E2BExecutor] = []
    settings = getattr(request.module, "E2B_SETTINGS", E2B_SETTINGS)

    def build(**kwargs: Any) -> E2BExecutor:
        made.append(E2BExecutor(connection=server.connection, **{**settings, **kwargs}))
        return made[-1]

    yield build
    for executor in made:
        executor.close()
    if server.sandbox is None:
        server.replace()


# -- construction ------------------------------------------------------------------


def test_a_missing_api_key_fails_at_construction_saying_how_to_set_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.delenv("E2B_DEBUG", raising=False)
    with pytest.raises(ValueError, match="E2B_API_KEY") as caught:
        E2BExecutor()
    assert "api_key=" in str(caught.value) and "E2B_DEBUG=true" in str(caught.value)


def test_debug_mode_from_the_environment_needs_no_key(server: E2BServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("E2B_API_KEY", raising=False)
    monkeypatch.setenv("E2B_DEBUG", "true")
    monkeypatch.setenv("E2B_SANDBOX_URL", server.url)
    with E2BExecutor(timeout_seconds=LIMIT) as executor:
        assert executor.run("6 * 7").output == 42


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools_mode": "remote"}, "tools_mode must be one of 'auto', 'host', 'inline'"),
        ({"timeout_seconds": 0}, "timeout_seconds must be a positive number"),
        ({"timeout_seconds": 60, "sandbox_timeout": 30}, "sandbox_timeout must be"),
        ({"envs": {"KEY": 1}}, "envs must be a dict of str to str"),
        ({"connection": {"debug": True, "colour": "blue"}}, "option the E2B SDK does not know"),
    ],
)
def test_bad_arguments_are_refused_with_what_to_do(kwargs: dict[str, Any], message: str) -> None:
    kwargs.setdefault("connection", {"debug": True, "sandbox_url": "http://127.0.0.1:9"})
    with pytest.raises(ValueError, match=message):
        E2BExecutor(**kwargs)


# -- time limits ---------------------------------------------------------------------


def test_a_run_stops_at_its_limit_not_at_twice_it(make: Callable[..., E2BExecutor]) -> None:
    """The SDK's own deadline fires at twice the timeout (E2B#1881); the in-sandbox limit does not."""
    executor = make()
    executor.send_variables({"kept": 6})
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout, match="was stopped") as caught:
        executor.run("print('napping')\nimport time\ntime.sleep(60)")
    elapsed = time.monotonic() - started
    # the SDK's deadline would end it no sooner than 2 * LIMIT; the room past the limit is for the
    # request to reach the sandbox and the interrupt's answer to come back, on a busy machine
    assert busy_allowance(LIMIT, 0.6) < 2 * LIMIT
    assert LIMIT <= elapsed < busy_allowance(LIMIT, 0.6), f"stopped after {elapsed:.2f} s for a {LIMIT} s limit"
    assert "napping" in caught.value.logs and caught.value.error_type == "TimeoutError"
    assert executor.run("kept * 7").output == 42  # interrupted, not restarted: state is kept


def test_except_exception_cannot_swallow_the_time_limit(make: Callable[..., E2BExecutor]) -> None:
    executor = make()
    with pytest.raises(ExecutionTimeout):
        executor.run("import time\ntry:\n    time.sleep(60)\nexcept Exception:\n    print('swallowed')")


def test_code_that_will_not_stop_gets_its_context_restarted_and_state_resent(make: Callable[..., E2BExecutor]) -> None:
    executor = make(timeout_seconds=1.0)
    executor.send_variables({"given": 5})
    executor.send_tools({"shout": shout})
    executor.run("made_by_code = 1")
    stubborn = "import time\nwhile True:\n    try:\n        time.sleep(0.05)\n    except BaseException:\n        pass"
    with pytest.raises(ExecutionTimeout, match="context was restarted"):
        executor.run(stubborn)
    assert executor.run("shout('x' * given)").output == "XXXXX"
    with pytest.raises(ExecutionError, match="made_by_code"):
        executor.run("made_by_code")


# -- lost sandboxes ------------------------------------------------------------------


def test_an_expired_sandbox_raises_then_a_new_one_gets_variables_and_tools(
    make: Callable[..., E2BExecutor], server: E2BServer
) -> None:
    executor = make()
    executor.send_variables({"frame": pd.DataFrame({"n": [1, 2, 3]})})
    executor.send_tools({"shout": shout})
    executor.run("made_by_code = 1")
    server.expire()
    with pytest.raises(SandboxError, match="gone") as caught:
        executor.run("frame.n.sum()")
    assert caught.value.state_lost is True
    server.replace()  # what E2B gives when the executor creates its next sandbox
    assert executor.run("shout(str(frame.n.sum()))").output == "6"
    with pytest.raises(ExecutionError, match="made_by_code"):
        executor.run("made_by_code")


def test_a_sandbox_killed_mid_run_raises_sandbox_error(make: Callable[..., E2BExecutor], server: E2BServer) -> None:
    executor = make(timeout_seconds=20)
    expiring = threading.Thread(target=server.expire)  # once the block runs, however long a busy machine takes
    with pytest.raises(SandboxError, match="gone"):
        executor.run("print('working')\nimport time\ntime.sleep(15)", on_output=lambda stream, text: expiring.start())
    expiring.join()
    server.replace()
    assert executor.run("'back'").output == "back"


def test_close_removes_its_context_and_leaves_a_connected_sandbox_running(
    make: Callable[..., E2BExecutor], server: E2BServer
) -> None:
    executor = make()
    assert server.sandbox is not None
    before = set(server.sandbox.contexts)
    connected = make(sandbox_id=executor.sandbox_id)
    connected.run("x = 1")
    assert len(server.sandbox.contexts) == len(before) + 1
    connected.close()
    assert set(server.sandbox.contexts) == before
    assert executor.run("'still here'").output == "still here"
    executor.close()
    executor.close()
    with pytest.raises(Exception, match="closed"):
        executor.run("1")


# -- values, tools, environment ---------------------------------------------------------


def test_a_traceback_keeps_its_line_breaks(make: Callable[..., E2BExecutor]) -> None:
    """E2B's server joins IPython's traceback entries with nothing between them; the headers get their lines back."""
    with pytest.raises(ExecutionError) as caught:
        make().run("def divide(a):\n    return a / 0\n\ndivide(1)")
    lines = caught.value.traceback.splitlines()
    assert set(lines[0]) == {"-"} and lines[1].startswith("ZeroDivisionError") and lines[1].endswith("last)")
    assert lines[2].startswith("Cell In[") and "ZeroDivisionError: division by zero" in lines


def test_images_come_back_as_displays_that_decode_to_pil_images(make: Callable[..., E2BExecutor]) -> None:
    executor = make()
    result = executor.run(
        "from PIL import Image\nfrom IPython.display import display\n"
        "shown = Image.new('RGB', (4, 3), (255, 0, 0))\ndisplay(shown)\nImage.new('L', (2, 2), 7)"
    )
    assert isinstance(result.output, Image.Image) and result.output.size == (2, 2)  # the codec carries images
    shown = [d.image() for d in result.displays if d.is_image]
    assert [(d.size, d.convert("RGB").getpixel((0, 0))) for d in shown] == [((4, 3), (255, 0, 0))]


def test_inline_tools_run_in_the_sandbox_with_its_environment(make: Callable[..., E2BExecutor]) -> None:
    executor = make(envs={"GREETING": "hey "}, tools_mode="inline")
    executor.send_tools({"shout": shout, "final_answer": FinalAnswerTool()})
    result = executor.run("import os\nfinal_answer((shout('you'), os.getpid() != __import__('os').getppid()))")
    assert result.is_final_answer and result.output == ("hey YOU", True)
    with pytest.raises(ExecutionError, match="ToolCallError"):
        executor.run("shout()")


def test_a_tool_that_cannot_be_shipped_is_refused_with_why(make: Callable[..., E2BExecutor]) -> None:
    executor = make(tools_mode="inline")
    with pytest.raises(ToolDefinitionError, match="cannot be shipped") as caught:
        executor.send_tools({"counter": Counter()})
    assert "@tool function" in str(caught.value) and "as a variable" in str(caught.value)
    assert "tools_mode='host'" in str(caught.value)  # E2B calls tools on the host too


def test_an_inline_tool_carries_its_module_constants_and_imports(make: Callable[..., E2BExecutor]) -> None:
    executor = make(tools_mode="inline")
    executor.send_tools({"quote": inline_tool_module.quote, "quote_one": inline_tool_module.quote_one})
    assert executor.run("quote('apple', 12), quote_one('pear')").output == ("5.25 in 2 boxes", "0.62 in 1 boxes")


@pytest.mark.parametrize(
    ("name", "message"),
    [("rounded_quote", "'round_to_cents', a function defined beside it"), ("locked_count", "'LOCK', a _thread.lock")],
)
def test_a_tool_using_what_cannot_be_shipped_is_refused_naming_it(
    make: Callable[..., E2BExecutor], name: str, message: str
) -> None:
    executor = make(tools_mode="inline")
    with pytest.raises(ToolDefinitionError, match=f"tool {name!r} uses {message}") as caught:
        executor.send_tools({name: getattr(inline_tool_module, name)})
    assert "define it inside the tool" in str(caught.value) and "tools_mode='host'" in str(caught.value)


def test_install_packages_reports_the_modules(make: Callable[..., E2BExecutor]) -> None:
    executor = make()
    assert "pandas" in executor.install_packages(["pandas"])  # already installed: pip needs no network
    with pytest.raises(ExecutionTimeout):
        executor.run("import time\ntime.sleep(10)")  # the time limit is back after installing


# -- an agent, end to end ---------------------------------------------------------------------


def test_a_code_agent_on_e2b_finishes_a_multi_step_task_over_a_dataframe(server: E2BServer) -> None:
    steps = [
        "Thought: look at the data first.\n<code>\nprint(sales.shape)\nby_city = sales.groupby('city').units.sum()\nprint(by_city.to_dict())\n</code>",
        "Thought: divide by the prices.\n<code>\nrevenue = {c: by_city[c] * price(c) for c in by_city.index}\nprint(revenue)\n</code>",
        "Thought: done.\n<code>\nfinal_answer(max(revenue, key=revenue.get))\n</code>",
    ]
    model = ScriptedModel(steps)
    sales = pd.DataFrame({"city": ["Oslo", "Rome", "Oslo", "Cairo"], "units": [3, 10, 4, 2]})
    agent = CodeAgent(
        tools=[price],
        model=model,
        executor="e2b",
        executor_kwargs={"connection": server.connection, "timeout_seconds": 10},
        verbosity_level=-1,
    )
    with agent:
        answer = agent.run("Which city brought in the most revenue?", additional_args={"sales": sales})
    assert answer == "Rome"
    observations = [message.text() for message in model.calls[2][1:]]
    assert any("{'Cairo': 2, 'Oslo': 7, 'Rome': 10}" in text for text in observations)


@tool
def price(city: str) -> float:
    """Returns the unit price in a city.

    Args:
        city: the city's name
    """
    return {"Oslo": 3.0, "Rome": 2.5, "Cairo": 1.0}[city]


# -- retries -------------------------------------------------------------------------------


class _DroppingAPI(BaseHTTPRequestHandler):
    """E2B's control plane as a failing network shows it: each request is read, then the connection drops."""

    keys: list[str] = []

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        type(self).keys.append(self.headers.get("Idempotency-Key", ""))
        self.close_connection = True
        self.connection.shutdown(socket.SHUT_RDWR)

    def log_message(self, *args: Any) -> None:
        """Quiet."""


def test_sandbox_creation_is_retried_with_one_idempotency_key_then_fails_clearly() -> None:
    """Creating is safe to retry (E2B makes one sandbox per key); the error says what failed."""
    api = HTTPServer(("127.0.0.1", 0), _DroppingAPI)
    threading.Thread(target=api.serve_forever, daemon=True).start()
    try:
        connection = {"debug": False, "api_url": f"http://127.0.0.1:{api.server_address[1]}"}
        with pytest.raises(SandboxError, match="could not reach E2B"):
            E2BExecutor(api_key="e2b_0000", connection=connection)
    finally:
        api.shutdown()
        api.server_close()
    assert len(_DroppingAPI.keys) >= 2 and len(set(_DroppingAPI.keys)) == 1 and _DroppingAPI.keys[0]


# -- what comes out of the sandbox is data, never code ------------------------------------------


def test_a_forged_pickled_answer_from_the_sandbox_is_refused_not_unpickled(
    make: Callable[..., E2BExecutor], tmp_path: Any
) -> None:
    marker = tmp_path / "unpickled"
    executor = make()
    forge = (
        "import os, sys, json\n"
        "from IPython.display import publish_display_data\n"
        "class Evil:\n"
        f"    def __reduce__(self):\n        return (os.system, ('touch {marker}',))\n"
        "text = sys.modules['_codeward_codec'].dumps(Evil(), allow_pickle=True)\n"
        "publish_display_data({'application/vnd.codeward.report+json': json.dumps({'source': 'codeward', 'final': text})})"
    )
    with pytest.raises(ExecutionError, match="refuses"):
        executor.run(forge)
    assert not marker.exists()
    with pytest.raises(ExecutionError, match="cannot read"):
        executor.run(
            "from IPython.display import publish_display_data\n"
            "publish_display_data({'application/vnd.codeward.report+json': '{not json'})"
        )
