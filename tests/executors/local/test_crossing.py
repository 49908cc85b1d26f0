"""What the code gives back leaves the host's own process as it leaves a worker, wherever it holds
the code's own objects: carried by the codec, shown as text, or refused, the same in both modes.
So the host never calls the code's methods later, outside a block's watch (printing a final
answer runs its ``__repr__``; a dict of its keys runs its ``__hash__``).

Not attacks with an unsandboxed control (without a sandbox there is no watch to leave), so they
live beside the executor's other tests.
"""

from __future__ import annotations

import re
import time
import warnings
from typing import Any

import pytest

from codeward.executors.base import ExecutionError
from codeward.executors.codec import CodecWarning
from codeward.executors.local import LocalExecutor, interpreter
from codeward.executors.local.interpreter import Interpreter
from codeward.executors.local.limits import BudgetSpentOutsideRun, make_tick
from codeward.platform.tools import FinalAnswerTool
from codeward.tools import FunctionTool

pytestmark = pytest.mark.timeout(120)

BOTH = ("in_process", "process")
OWN_CLASS = "class Own:\n    def __repr__(self):\n        return 'own text'\n"


def _run(isolation: str, code: str, **options: Any) -> Any:
    with LocalExecutor(isolation=isolation, **options) as ex:
        ex.send_tools({"final_answer": FinalAnswerTool()})
        return ex.run(code)


@pytest.mark.parametrize(
    "value",
    ["Own()", "[Own(), 1]", "{'k': Own()}", "lambda: 1", "(i for i in range(3))", "Own", "Own().__repr__"],
    ids=["instance", "in-a-list", "in-a-dict", "function", "generator", "class", "bound-method"],
)
def test_a_value_holding_the_codes_objects_is_shown_as_text_in_both_modes(value):
    outputs = [_run(isolation, OWN_CLASS + value, authorized_imports=[]).output for isolation in BOTH]
    assert all(isinstance(output, str) for output in outputs), outputs
    assert re.sub(" at 0x[0-9a-f]+", "", outputs[0]) == re.sub(" at 0x[0-9a-f]+", "", outputs[1])


@pytest.mark.parametrize(
    "answer",
    ["Own()", "[1, {'k': (Own(),)}]", "{Own(): 1}", "lambda: 1", "Own"],
    ids=["instance", "nested", "as-a-key", "function", "class"],
)
def test_a_final_answer_holding_the_codes_objects_is_refused_with_the_workers_words(answer):
    messages = []
    for isolation in BOTH:
        with pytest.raises(ExecutionError) as refused:
            _run(isolation, OWN_CLASS + f"final_answer({answer})")
        assert refused.value.error_type == "CodecError"
        messages.append(refused.value.message)
    assert messages[0] == messages[1]
    assert "cannot leave the sandbox" in messages[0]


def test_a_dataclass_of_the_codes_leaves_as_the_dict_a_worker_gives():
    code = "import dataclasses\n@dataclasses.dataclass\nclass Point:\n    x: int\n    y: int\nfinal_answer(Point(1, 2))"
    for isolation in BOTH:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            output = _run(isolation, code)
        assert output.output == {"x": 1, "y": 2}, isolation
        assert isolation == "process" or any(issubclass(w.category, CodecWarning) for w in caught)


def test_plain_and_host_values_still_leave_as_themselves_in_process():
    """Only the code's own objects take the codec's way: a host object given to the code comes
    back as itself, and data is not copied."""
    host = object()
    with LocalExecutor(isolation="in_process") as ex:
        ex.send_variables({"host": host})
        assert ex.run("host").output is host
        assert ex.run("[host, {'k': host}]").output == [host, {"k": host}]
        data = ex.run("data = list(range(100_000))\ndata").output
        assert data is ex.run("data").output


def remember(item: Any) -> str:
    """Keeps what it is given.

    Args:
        item: anything
    """
    kept.append(item)
    return "kept"


kept: list[Any] = []


@pytest.mark.parametrize("isolation", BOTH)
def test_a_host_tools_arguments_leave_as_data(isolation):
    """A tool that keeps its argument would keep the code's object, to run its methods later."""
    kept.clear()
    with LocalExecutor(isolation=isolation) as ex:
        ex.send_tools({"remember": FunctionTool(remember)})
        with pytest.raises(ExecutionError) as refused:
            ex.run(OWN_CLASS + "remember(Own())")
        assert refused.value.error_type == "CodecError"
        assert ex.run("remember([1, 'a'])").output == "kept"
    assert kept == [[1, "a"]]


@pytest.mark.parametrize("library", ["numpy", "pandas"])
def test_the_codes_objects_inside_object_arrays_and_frames_are_found(library):
    pytest.importorskip(library)
    make = {"numpy": "numpy.array([1, Own()], dtype=object)", "pandas": "pandas.DataFrame({'a': [Own()]})"}[library]
    with LocalExecutor(isolation="in_process", authorized_imports=[library]) as ex:
        ex.send_tools({"final_answer": FinalAnswerTool()})
        with pytest.raises(ExecutionError, match="cannot leave the sandbox"):
            ex.run(f"import {library}\n" + OWN_CLASS + f"final_answer({make})")


SLOW_TEXT = (
    "import time\n"
    "def slowly():\n"
    "    until = time.monotonic() + 3\n"
    "    while time.monotonic() < until:\n"
    "        pass\n"
    "    return 'slow'\n"
    "class Slow:\n"
    "    def __repr__(self):\n"
    "        return slowly()\n"
    "    def __str__(self):\n"
    "        return slowly()\n"
    "final_answer(Slow())"
)


def _agent_run() -> tuple[Any, float]:
    from codeward import CodeAgent
    from codeward.platform.models import ScriptedModel

    model = ScriptedModel([f"<code>{SLOW_TEXT}</code>", "<code>final_answer(1)</code>"])
    options = {"isolation": "in_process", "timeout_seconds": 1, "max_operations": 10**12}
    with CodeAgent(tools=[], model=model, executor="local", executor_kwargs=options, verbosity_level=0) as agent:
        started = time.monotonic()
        result = agent.run("answer")
        return result, time.monotonic() - started


def test_an_agent_in_process_never_runs_a_final_answers_text_past_the_limit(monkeypatch):
    with monkeypatch.context() as unchecked:  # control: the answer leaves as it is, its methods run later
        unchecked.setattr(Interpreter, "_leaving", lambda self, output: output)
        unchecked.setattr(interpreter, "_BETWEEN_BLOCKS", make_tick(10**12, BudgetSpentOutsideRun))
        _, took = _agent_run()
        assert took > 3, "control: the host ran the answer's __repr__ for as long as it took"
    result, took = _agent_run()
    assert result == 1  # the model was told the answer cannot leave, and gave another
    assert took < 1 + 2


@pytest.mark.parametrize(
    "answer",
    [
        "collections.ChainMap({'k': Own()})",
        "collections.UserList([Own()])",
        "map(str, [Own()])",
        "itertools.chain([Own()])",
        "datetime.datetime(2020, 1, 1, tzinfo=Zone())",
        "functools.partial(print, Own())",
    ],
    ids=["chainmap", "userlist", "map", "chain", "datetime-tzinfo", "partial"],
)
def test_the_codes_objects_inside_library_objects_are_found(answer):
    """Library objects whose text or use runs what they hold: a ChainMap's repr runs its maps'
    reprs, a datetime's its tzinfo's."""
    code = (
        "import collections, datetime, functools, itertools\n"
        + OWN_CLASS
        + "class Zone(datetime.tzinfo):\n    def utcoffset(self, when):\n        return None\n"
        + f"final_answer({answer})"
    )
    with LocalExecutor(isolation="in_process") as ex:
        ex.send_tools({"final_answer": FinalAnswerTool()})
        with pytest.raises(ExecutionError, match="cannot leave the sandbox"):
            ex.run(code)
