"""The executor contract: what every sandbox must do, checked against each registered executor.

Checks that cannot apply to an in-process sandbox are skipped with the reason.
"""

from __future__ import annotations

import json
import math
import re
import signal
import time
import uuid
from datetime import date, datetime, timedelta, timezone
from datetime import time as clock
from decimal import Decimal
from fractions import Fraction
from pathlib import PurePosixPath
from typing import Any

import numpy as np
import pandas as pd
import pytest
from PIL import Image

from codeward.executors.base import CodeOutput, ExecutionError, ExecutionTimeout, Executor, SandboxError
from codeward.executors.codec import register_class
from codeward.platform.tools import FinalAnswerTool, tool
from tests.executors.inline_tool_module import quote

from .conftest import PROFILES, TIMEOUT, Profile, process_gone

#: Seconds past the time limit within which a runaway block must be stopped.
SLACK = 5.0


@tool
def double(x: int) -> int:
    """Doubles a number.

    Args:
        x: the number to double
    """
    return 2 * x


TOOLS = {"double": double, "final_answer": FinalAnswerTool()}


@tool
def look_up(key: str) -> int:
    """Looks a key up in a table of one.

    Args:
        key: the key
    """
    return {"a": 1}[key]


@tool
def parse(text: str) -> Any:
    """Reads JSON text.

    Args:
        text: the JSON text
    """
    return json.loads(text)


def samples() -> dict[str, Any]:
    """One variable per type the codec carries."""
    image = Image.new("RGB", (3, 2), (10, 20, 30))
    image.putpixel((1, 1), (200, 100, 0))
    return {
        "v_none": None,
        "v_bool": True,
        "v_int": 2**100 + 1,
        "v_neg_zero": -0.0,
        "v_nan": float("nan"),
        "v_inf": float("-inf"),
        "v_str": "héllo\n\x00 wörld",
        "v_bytes": bytes(range(256)),
        "v_list": [1, "two", None, [3.5]],
        "v_tuple": (1, (2, 3), "x"),
        "v_dict": {1: "int key", (2, 3): "tuple key", "s": {"nested": [1]}, None: 0},
        "v_set": {1, 2, "three"},
        "v_frozenset": frozenset({(1, 2), "a"}),
        "v_complex": complex(1.5, -2),
        "v_datetime": datetime(2024, 2, 29, 23, 59, 58, 123456, tzinfo=timezone(timedelta(hours=5, minutes=30))),
        "v_naive": datetime(1999, 12, 31, 1, 2, 3),
        "v_date": date(2000, 1, 1),
        "v_time": clock(12, 30, 15, 7),
        "v_timedelta": timedelta(days=-2, seconds=5, microseconds=9),
        "v_decimal": Decimal("3.14159265358979323846264338327950288"),
        "v_fraction": Fraction(22, 7),
        "v_path": PurePosixPath("/data/in.csv"),
        "v_uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "v_enum": signal.Signals.SIGTERM,
        "v_flag": re.IGNORECASE | re.MULTILINE,
        "v_array": np.arange(24, dtype=np.int16).reshape(2, 3, 4),
        "v_float_array": np.array([[1.5, np.nan], [np.inf, -0.0]], dtype=np.float32),
        "v_frame": pd.DataFrame(
            {"city": ["Oslo", "Rome"], "temp": [3.5, 18.0], "rank": np.array([2, 1], dtype=np.int8)},
            index=pd.Index(["a", "b"], name="key"),
        ),
        "v_series": pd.Series([1, 2, 3], index=[10, 20, 30], name="counts", dtype="int32"),
        "v_image": image,
    }


def same(a: Any, b: Any) -> bool:
    """Equal in value *and* type, with nan equal to itself and -0.0 apart from 0.0."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (math.isnan(a) and math.isnan(b)) or (a == b and math.copysign(1, a) == math.copysign(1, b))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, (pd.DataFrame, pd.Series)):
        return a.equals(b) and list(a.index.names) == list(b.index.names) and _dtypes(a) == _dtypes(b)
    if isinstance(a, Image.Image):
        return (a.mode, a.size, a.tobytes()) == (b.mode, b.size, b.tobytes())
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=False))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def _dtypes(value: pd.DataFrame | pd.Series) -> Any:
    return value.dtypes.to_dict() if isinstance(value, pd.DataFrame) else value.dtype


def test_variables_of_every_codec_type_arrive_intact(executor: Executor) -> None:
    """Inside the sandbox every value is its own type; back on the host, the enum classes are
    restored because the host registered them (without, they arrive as their plain values)."""
    register_class(signal.Signals)
    register_class(re.RegexFlag)
    values = samples()
    executor.send_variables(values)
    types_inside = executor.run(f"{{name: type(value).__name__ for name, value in dict({_pairs(values)}).items()}}")
    assert types_inside.output == {name: type(value).__name__ for name, value in values.items()}
    for name, value in values.items():
        back = executor.run(name).output
        assert same(back, value), f"{name}: sent {value!r}, came back {back!r}"


def _pairs(values: dict[str, Any]) -> str:
    return ", ".join(f"{name}={name}" for name in values)


def test_state_persists_between_runs(executor: Executor) -> None:
    executor.run("import math\nbase = 20\ndef grow(x):\n    return base + math.floor(x)")
    executor.run("base += 1")
    assert executor.run("grow(1.9)").output == 22


def test_stdout_and_stderr_land_in_logs(executor: Executor) -> None:
    result = executor.run("import sys\nprint('to stdout')\nprint('to stderr', file=sys.stderr)\nprint('again')")
    assert "to stdout" in result.logs and "to stderr" in result.logs
    assert result.logs.index("to stdout") < result.logs.index("again")
    assert result.is_final_answer is False


def test_the_last_expression_is_the_output(executor: Executor) -> None:
    assert executor.run("x = [1, 2]\nx + [3]").output == [1, 2, 3]
    assert executor.run("y = 5").output is None


def test_a_tool_finds_the_constants_and_imports_of_its_module_alike(executor: Executor) -> None:
    """Run on the host, or shipped into the sandbox with what it uses (E2B), a tool works as written."""
    executor.send_tools({"quote": quote})
    assert executor.run("quote('apple', 12)").output == "5.25 in 2 boxes"


def test_final_answer_cannot_be_swallowed_by_except_exception(executor: Executor) -> None:
    executor.send_tools(TOOLS)
    result = executor.run(
        "try:\n    final_answer({'answer': double(21)})\nexcept Exception:\n    print('swallowed')\nprint('after')"
    )
    assert result == CodeOutput({"answer": 42}, result.logs, True, result.displays, result.usage)
    assert "swallowed" not in result.logs and "after" not in result.logs


def test_a_block_says_what_it_cost_and_why_a_figure_is_missing(executor: Executor) -> None:
    printed = executor.run("print('x' * 300)").usage
    assert printed is not None and printed.wall_seconds > 0 and printed.output_bytes >= 300, printed
    for name in ("cpu_seconds", "peak_memory_bytes", "egress_bytes"):
        assert (getattr(printed, name) is None) == (name in printed.unmeasured), (name, printed)
    with pytest.raises(ExecutionError) as caught:
        executor.run("print('before')\n1 / 0")
    assert caught.value.usage is not None and caught.value.usage.wall_seconds > 0


@pytest.mark.parametrize("catch", ["except:", "except BaseException:"])
def test_final_answer_stays_the_answer_when_the_code_catches_everything(executor: Executor, catch: str) -> None:
    """The sandbox records the answer when it is given; what the code catches afterwards does not undo it."""
    executor.send_tools(TOOLS)
    result = executor.run(f"try:\n    final_answer(42)\n{catch}\n    pass\nx = 1")
    assert result.is_final_answer and result.output == 42
    assert executor.run("y = 2\ny").output == 2  # the next block is not answered by the old answer


def test_a_tools_exception_is_caught_by_the_same_except_clauses_alike(executor: Executor) -> None:
    """A built-in type arrives as itself, with its arguments; another type, under its own name,
    is still caught by its built-in base (JSONDecodeError by ``except ValueError``)."""
    executor.send_tools({"look_up": look_up, "parse": parse})
    seen = executor.run(
        "seen = []\n"
        "try:\n    look_up('Z')\nexcept KeyError as error:\n    seen.append([type(error).__name__, str(error)])\n"
        "try:\n    parse('{bad')\nexcept ValueError as error:\n    seen.append([type(error).__name__])\n"
        "seen"
    ).output
    assert seen == [["KeyError", "'Z'"], ["JSONDecodeError"]]


def test_a_traceback_through_a_comprehension_shows_the_failing_line_alike(executor: Executor) -> None:
    with pytest.raises(ExecutionError) as caught:
        executor.run("values = [4, 2, 0]\ninverses = [1 / value for value in values]")
    assert caught.value.error_type == "ZeroDivisionError"
    assert "inverses = [1 / value for value in values]" in caught.value.traceback


def test_a_code_error_carries_the_sandbox_traceback_and_earlier_logs(executor: Executor) -> None:
    with pytest.raises(ExecutionError) as caught:
        executor.run("print('before the fault')\ndef divide(a):\n    return a / 0\n\ndivide(7)")
    error = caught.value
    assert "before the fault" in error.logs
    assert error.error_type == "ZeroDivisionError"
    assert "ZeroDivisionError" in error.traceback and "divide" in error.traceback
    assert executor.run("1 + 1").output == 2


def test_an_infinite_loop_is_stopped_by_the_timeout_and_the_next_run_works(executor: Executor) -> None:
    executor.send_variables({"kept": 7})
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout) as caught:
        executor.run("print('looping')\nn = 0\nwhile True:\n    n += 1")
    elapsed = time.monotonic() - started
    assert elapsed + 0.1 >= TIMEOUT and elapsed < TIMEOUT + SLACK
    assert "looping" in caught.value.logs
    assert executor.run("kept * 6").output == 42


@pytest.mark.parametrize(
    "death",
    ["import os\nos.abort()", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"],
    ids=["os.abort", "killed-like-oom"],
)
def test_a_sandbox_that_dies_raises_and_the_next_run_gets_variables_and_tools_again(
    executor: Executor, profile: Profile, death: str
) -> None:
    if profile.in_process:
        pytest.skip("in-process sandbox: its death would be the test process's own")
    executor.send_variables({"given": 5})
    executor.send_tools(TOOLS)
    executor.run("defined_by_code = 1")
    with pytest.raises(SandboxError) as caught:
        executor.run(f"print('last words')\n{death}")
    assert caught.value.state_lost is True
    assert "lost" in caught.value.message
    assert executor.run("double(given)").output == 10
    with pytest.raises(ExecutionError, match="defined_by_code"):
        executor.run("defined_by_code")


def test_close_leaves_no_process_behind(profile: Profile) -> None:
    if profile.in_process:
        pytest.skip("in-process sandbox: it starts no process of its own")
    executor = profile.make()
    if profile.remains is not None:  # its processes are not the host's: ask the sandbox itself
        executor.run(
            "import subprocess, sys\nchild = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])"
        )
        remains = profile.remains(executor)
        assert remains(), "the probe must see the running sandbox"
        executor.close()
        executor.close()  # idempotent
        assert not remains(), f"still there after close(): {remains()}"
        return
    spawn = "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
    pids = executor.run(
        "import os, subprocess, sys\n" + (spawn + "(os.getpid(), child.pid)" if profile.spawns else "(os.getpid(),)")
    ).output
    assert not any(process_gone(pid) for pid in pids)
    executor.close()
    executor.close()  # idempotent
    deadline = time.monotonic() + 5
    while not all(process_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert all(process_gone(pid) for pid in pids), f"still running after close(): {pids}"


# Settings are judged by one rule on every sandbox ------------------------------------
@pytest.mark.parametrize("bad", [True, None, 0, -1.5, float("inf"), "30"], ids=repr)
def test_a_bad_time_limit_is_refused_alike(executor_name: str, bad: object) -> None:
    with pytest.raises(ValueError, match="timeout_seconds must be a positive number of seconds"):
        PROFILES[executor_name].make(timeout_seconds=bad)


@pytest.mark.parametrize(
    "name", ["not an identifier", "class", "_private", "get_ipython", "range", "double", "print", "len"]
)
def test_a_bad_variable_name_is_refused_alike_and_nothing_is_sent(executor: Executor, name: str) -> None:
    executor.send_tools({"double": double})
    with pytest.raises(ValueError, match="variable"):
        executor.send_variables({"fine": 1, name: 2})
    with pytest.raises(ExecutionError):
        executor.run("fine")


@pytest.mark.parametrize("name", ["print", "str", "range", "get_ipython", "display", "_hidden"])
def test_a_tool_that_would_hide_a_builtin_or_the_sandboxs_own_name_is_refused_alike(
    executor: Executor, name: str
) -> None:
    executor.send_tools({"double": double})
    with pytest.raises(ValueError, match=f"tool name '{name}'"):
        executor.send_tools({"double": double, name: double})
    ran = executor.run("print('still mine'); double(2)")
    assert (ran.logs.strip(), ran.output) == ("still mine", 4)


def test_a_package_list_given_as_one_string_is_refused_alike(executor: Executor) -> None:
    with pytest.raises(TypeError, match="packages must be a list of requirement strings"):
        executor.install_packages("requests")  # type: ignore[arg-type]


def test_printed_output_is_kept_to_the_length_asked_for_alike(executor_name: str) -> None:
    """Its head and its tail, with a note of what was cut between them."""
    with PROFILES[executor_name].make(max_print_outputs_length=1000) as executor:
        logs = executor.run("for i in range(500):\n    print(f'line {i:04d}')").logs
    assert "line 0000" in logs and "line 0499" in logs and "characters of output cut" in logs
    assert len(logs) < 1000 + 100
