"""The local executor honours the executor contract: state, tools, final answers, errors, limits."""

from __future__ import annotations

import threading
import time

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import (
    ExecutionError,
    ExecutionTimeout,
    ExecutorError,
    create_executor,
)
from codeward.platform.tools import FinalAnswerTool, ToolCallError, tool

# A limit that failed would leave the code running: the per-test timeout turns that
# into a failure, so no test measures time itself.
pytestmark = pytest.mark.timeout(60)


@tool
def add(a: int, b: int) -> int:
    """Adds two numbers.

    Args:
        a: first number
        b: second number
    """
    return a + b


@tool
def explode(reason: str) -> str:
    """Fails on purpose.

    Args:
        reason: the message of the error
    """
    raise RuntimeError(reason)


@pytest.fixture
def executor():
    with LocalExecutor(timeout_seconds=5) as ex:
        ex.send_tools({"add": add, "explode": explode, "final_answer": FinalAnswerTool()})
        yield ex


def test_registry_builds_the_local_executor():
    with create_executor("local") as ex:
        assert isinstance(ex, LocalExecutor) and ex.name == "local"
        assert ex.run("1 + 1").output == 2


def test_state_persists_between_runs(executor):
    executor.run("import math\ncount = 2\ndef double(v):\n    return v * 2\nclass Box:\n    size = 3")
    assert executor.run("double(count) + Box.size + math.floor(1.5)").output == 8


def test_send_variables_become_names(executor):
    executor.send_variables({"cities": ["Oslo", "Rome"], "limit": 3})
    assert executor.run("[c.upper() for c in cities][:limit]").output == ["OSLO", "ROME"]


@pytest.mark.parametrize("name", ["_hidden", "not an identifier", "add", "class"])
def test_send_variables_refuses_bad_names(executor, name):
    with pytest.raises(ValueError):
        executor.send_variables({name: 1})


def test_tools_are_called_with_checked_arguments(executor):
    assert executor.run("add(2, b=3)").output == 5
    with pytest.raises(ExecutionError) as info:
        executor.run("add('x', 3)")
    assert info.value.error_type == ToolCallError.__name__ and "argument 'a' must be integer" in info.value.message


@tool
def scaled(value: int, factor: int = 10) -> int:
    """Scales a number.

    Args:
        value: the number
        factor: what it is multiplied by
    """
    return value * factor


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_tool_called_with_one_argument_binds_it_as_any_call_does(isolation):
    """One positional argument is the usual call, bound by a quicker path where the other inputs have
    defaults; a tool with a second required input still says which is missing."""
    with LocalExecutor(isolation=isolation) as ex:
        ex.send_tools({"add": add, "scaled": scaled, "final_answer": FinalAnswerTool()})
        assert ex.run("scaled(4)").output == 40
        assert ex.run("scaled(4, 3) + scaled(value=2) + scaled(1, factor=2)").output == 34
        with pytest.raises(ExecutionError, match=r"missing (a|the) required argument:? 'b'"):
            ex.run("add(1)")
        with pytest.raises(ExecutionError, match="ToolCallError"):
            ex.run("scaled('x')")
        final = ex.run("final_answer([1, 2])")
        assert final.is_final_answer and final.output == [1, 2]


def test_a_sandboxs_tool_binds_one_argument_as_any_call_does():
    """The sandbox's own tool functions, made from the specs a sandbox gets (here, to run inline): one
    positional argument takes a quicker path than `bind` only where the other inputs have defaults."""
    from codeward.executors import codec
    from codeward.executors.kernel.bridge import ToolBridge
    from codeward.executors.kernel.prelude import ToolCallError as SandboxToolCallError
    from codeward.executors.kernel.prelude import make_tool

    bridge = ToolBridge({"add": add, "scaled": scaled}, mode="inline")
    made = {spec["name"]: make_tool(spec) for spec in codec.loads(bridge.specs_text)}
    assert made["scaled"](4) == 40 and made["scaled"](4, 3) == 12 and made["scaled"](value=2) == 20
    assert made["add"](1, 2) == 3
    with pytest.raises(SandboxToolCallError, match="missing a required argument: 'b'"):
        made["add"](1)


def test_tool_errors_are_catchable_by_the_code(executor):
    out = executor.run("try:\n    explode('boom')\nexcept RuntimeError as e:\n    caught = str(e)\ncaught")
    assert out.output == "boom"


def test_tool_error_traceback_shows_only_the_models_lines(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("x = 1\nexplode('bad input')")
    tb = info.value.traceback
    assert "<code block" in tb and "line 2" in tb and "RuntimeError: bad input" in tb
    assert "tools.py" not in tb and "local.py" not in tb


@pytest.mark.parametrize(
    "code",
    [
        "add = 1",
        "def add(a, b):\n    return 0",
        "for add in range(2):\n    pass",
        "import math as add",
        "class final_answer:\n    pass",
        "def f():\n    global add\n    add = 2",
    ],
)
def test_tools_cannot_be_rebound(executor, code):
    with pytest.raises(ExecutionError) as info:
        executor.run(code)
    assert "is a tool and cannot be redefined" in info.value.message
    assert executor.run("add(1, 1)").output == 2


def test_tool_internals_are_out_of_reach(executor):
    assert executor.run("add.name").output == "add"
    for code in ("add._tool", "getattr(add, '_tool')", "add.forward"):
        with pytest.raises(ExecutionError):
            executor.run(code)
    with pytest.raises(ExecutionError) as info:
        executor.run("add.name = 'x'")
    assert "belongs to the host" in info.value.message


def test_final_answer_ends_the_block(executor):
    out = executor.run("print('before')\nfinal_answer({'a': 1})\nprint('after')")
    assert out.is_final_answer and out.output == {"a": 1} and out.logs == "before\n"


@pytest.mark.parametrize(
    "handler", ["except Exception:", "except:", "except BaseException:", "except BaseException as e:"]
)
def test_final_answer_cannot_be_swallowed(executor, handler):
    out = executor.run(f"try:\n    final_answer(7)\n{handler}\n    pass\n'not reached'")
    assert out.is_final_answer and out.output == 7


def test_final_answer_inside_functions_and_with_blocks(executor):
    code = (
        "class Quiet:\n    def __enter__(self):\n        return self\n"
        "    def __exit__(self, kind, error, tb):\n        return True\n"
        "def f():\n    with Quiet():\n        final_answer('from with')\n    return 'swallowed'\nf()"
    )
    out = executor.run(code)
    assert out.is_final_answer and out.output == "from with"


def test_return_in_finally_is_refused(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("def f():\n    try:\n        final_answer(1)\n    finally:\n        return 2\nf()")
    assert "inside 'finally' would swallow" in info.value.message


def test_error_carries_logs_and_traceback_of_the_models_code(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("print('step 1')\ndef f(v):\n    return 10 / v\nf(0)")
    error = info.value
    assert error.logs == "step 1\n" and error.error_type == "ZeroDivisionError"
    assert "line 3, in f" in error.traceback and "return 10 / v" in error.traceback


def test_traceback_names_lines_of_earlier_blocks(executor):
    executor.run("def g():\n    return missing_name")
    with pytest.raises(ExecutionError) as info:
        executor.run("g()")
    assert "<code block 1>" in info.value.traceback and "<code block 2>" in info.value.traceback


def test_timeout_stops_a_running_loop_and_the_executor_stays_usable():
    with LocalExecutor(timeout_seconds=0.5, max_operations=10**12) as ex:
        with pytest.raises(ExecutionTimeout) as info:
            ex.run("print('started')\nwhile True:\n    x = 1")
        assert info.value.logs == "started\n" and "0.5-second limit" in info.value.message
        assert ex.run("1 + 1").output == 2


def test_timeout_interrupts_sleep():
    with LocalExecutor(timeout_seconds=0.3) as ex, pytest.raises(ExecutionTimeout):
        ex.run("import time\ntime.sleep(30)")


def test_timeout_cannot_be_caught_by_the_code():
    with LocalExecutor(timeout_seconds=0.3, max_operations=10**12) as ex:
        code = "while True:\n    try:\n        while True:\n            pass\n    except BaseException:\n        pass"
        with pytest.raises(ExecutionTimeout):
            ex.run(code)


def test_timeout_stops_a_loop_in_finally():
    with LocalExecutor(timeout_seconds=0.3, max_operations=10**12) as ex, pytest.raises(ExecutionTimeout):
        ex.run("try:\n    while True:\n        pass\nfinally:\n    while True:\n        pass")


def test_no_stray_signal_reaches_the_host_after_a_run():
    with LocalExecutor(timeout_seconds=0.2) as ex:
        for _ in range(5):
            ex.run("sum(range(1000))")
        time.sleep(0.4)  # past the deadline of every block; nothing may be raised here


def test_operation_budget_stops_endless_loops():
    with LocalExecutor(max_operations=10_000) as ex:
        with pytest.raises(ExecutionError) as info:
            ex.run("n = 0\nwhile True:\n    n += 1")
        assert "10,000 operations" in info.value.message
        assert ex.run("n").output == 10_000


@pytest.mark.parametrize(
    "loop",
    [
        "for i in range({n}):\n    pass",
        "for i in [0] * {n}:\n    pass",
        "[i for i in range({n})]",
        "{{i: i for i in range({n})}}",
        "sum(i for i in range({n}))",
        "for i in range({n}):\n    pass\nelse:\n    pass",
    ],
)
def test_operation_budget_counts_every_iteration_once(loop):
    """A block of exactly the budget runs; one more iteration is refused."""
    with LocalExecutor(max_operations=1_000) as ex:
        ex.run(loop.format(n=1_000))
        with pytest.raises(ExecutionError, match="1,000 operations"):
            ex.run(loop.format(n=1_001))


def test_operation_budget_stops_a_loop_over_a_list_it_grows():
    with LocalExecutor(max_operations=10_000, timeout_seconds=60) as ex:
        with pytest.raises(ExecutionError, match="operations"):
            ex.run("items = [0]\nfor item in items:\n    items.append(item)")
        assert ex.run("len(items)").output == 10_001


def test_operation_budget_counts_calls():
    with LocalExecutor(max_operations=1_000) as ex, pytest.raises(ExecutionError):
        ex.run("f = lambda v: v\nlist(map(f, range(5000)))")


def test_recursion_is_an_error_the_code_sees(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("def f(n):\n    return f(n + 1)\nf(0)")
    assert info.value.error_type == "RecursionError"


def test_runs_from_another_thread():
    results = []
    with LocalExecutor(timeout_seconds=0.3, max_operations=10**12) as ex:

        def worker():
            try:
                ex.run("while True:\n    pass")
            except ExecutionTimeout:
                results.append("timeout")

        thread = threading.Thread(target=worker)
        thread.start()
        thread.join(5)
    assert results == ["timeout"]


def test_closed_executor_refuses_work():
    ex = LocalExecutor()
    ex.close()
    ex.close()
    with pytest.raises(ExecutorError):
        ex.run("1")


def test_bad_configuration_is_refused():
    with pytest.raises(TypeError):
        LocalExecutor(authorized_imports="numpy")
    with pytest.raises(ValueError):
        LocalExecutor(authorized_imports=["num py"])
    with pytest.raises(ValueError):
        LocalExecutor(timeout_seconds=0)


def test_missing_machine_builtins_say_why(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("input('name? ')")
    assert "input() is not available in this sandbox" in info.value.message


def test_package_grants_its_attribute_submodules_and_star_grants_imports_by_name():
    pytest.importorskip("numpy")
    with LocalExecutor(authorized_imports=["numpy"]) as ex:
        assert ex.run("import numpy as np\nfloat(np.linalg.norm([3, 4]))").output == 5.0
        with pytest.raises(ExecutionError) as info:
            ex.run("from numpy.linalg import norm")
        assert "'numpy.linalg' is not allowed" in info.value.message
    with LocalExecutor(authorized_imports=["numpy.*"]) as ex:
        assert ex.run("from numpy.linalg import norm\nfloat(norm([6, 8]))").output == 10.0


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_lone_surrogate_in_the_code_is_a_syntax_error_and_the_sandbox_stays(isolation):
    code = 'y = 2\nx = "\ud800"'
    with pytest.raises(UnicodeEncodeError):  # control: CPython's own parser fails without naming a line
        compile(code, "<block>", "exec")
    with LocalExecutor(isolation=isolation) as sandbox:
        sandbox.run("kept = 1")
        with pytest.raises(ExecutionError) as refused:
            sandbox.run(code)
        assert refused.value.error_type == "SyntaxError", refused.value
        assert "line 2" in refused.value.message and "U+D800" in refused.value.message, refused.value.message
        assert sandbox.run("kept + 1").output == 2


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_the_sources_kept_for_tracebacks_are_bounded_and_old_frames_keep_their_place(isolation):
    from codeward.executors.local.interpreter import KEPT_SOURCE_CHARACTERS

    filler = "# " + "x" * 998 + "\n"  # 1,000 characters a line
    big_block = filler * (KEPT_SOURCE_CHARACTERS // 4_000) + "y = 1"  # a quarter of what is kept
    with LocalExecutor(isolation=isolation) as sandbox:
        sandbox.run("def fail():\n    return 1 / 0")
        sandbox.run("def fail_too():\n    return 1 / 0")
        for _ in range(3):
            sandbox.run(big_block)
        with pytest.raises(ExecutionError) as still_kept:
            sandbox.run("fail_too()")
        assert '"<code block 2>", line 2, in fail_too\n    return 1 / 0' in still_kept.value.message
        sandbox.run(big_block)  # past the bound: the oldest blocks' lines go
        with pytest.raises(ExecutionError) as gone:
            sandbox.run("fail()")
        message = gone.value.message
        assert '"<code block 1>", line 2, in fail\nZeroDivisionError' in message, message
        assert 'File "<code block 8>", line 1, in <module>\n    fail()' in message, message
