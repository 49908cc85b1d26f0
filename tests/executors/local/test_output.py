"""Output that local sandbox code writes by any route lands in its logs, and only its own."""

from __future__ import annotations

import contextvars
import sys
import threading

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError


def test_writes_to_sys_stdout_and_stderr_land_in_the_logs(capsys):
    with LocalExecutor(authorized_imports=["sys"]) as executor:
        result = executor.run(
            "import sys\nsys.stdout.write('direct\\n')\nsys.stderr.write('problem\\n')\nprint('x', file=sys.stderr)"
        )
    assert result.logs == "direct\nproblem\nx\n"
    captured = capsys.readouterr()
    assert "problem" not in captured.err and "direct" not in captured.out


def test_what_a_library_prints_itself_lands_in_the_logs():
    pd = pytest.importorskip("pandas")
    with LocalExecutor(authorized_imports=["pandas"]) as executor:
        executor.send_variables({"df": pd.DataFrame({"a": [1, 2], "b": [3.0, 4.0]})})
        result = executor.run("df.info()")
    assert "RangeIndex: 2 entries" in result.logs


def test_streams_are_restored_after_a_block_and_after_a_failure():
    before = (sys.stdout, sys.stderr)
    with LocalExecutor() as executor:
        executor.run("print(1)")
        with pytest.raises(ExecutionError):
            executor.run("1 / 0")
    assert (sys.stdout, sys.stderr) == before


def test_another_threads_output_is_not_captured(capsys):
    started = threading.Event()
    release = threading.Event()

    def host_thread() -> None:
        started.wait(10)
        print("host says hi")
        release.set()

    thread = threading.Thread(target=host_thread)
    thread.start()
    with LocalExecutor(timeout_seconds=10) as executor:
        code = "import time\nfor _ in range(200):\n    time.sleep(0.01)\nprint('sandbox')"
        started.set()
        result = executor.run(code)
    thread.join(10)
    assert release.is_set()
    assert result.logs == "sandbox\n"
    assert "host says hi" in capsys.readouterr().out


WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


def test_in_process_the_callback_sees_the_callers_context_not_the_codes():
    seen: list[str] = []
    with LocalExecutor(isolation="in_process") as executor:  # the code's context is a copy made now
        WHO.set("the caller")
        executor.run("print('hi')", on_output=lambda stream, text: seen.append(WHO.get()))
    assert seen == ["the caller"]


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_output_of_a_str_class_whose_length_lies_is_still_bounded(isolation):
    """The logs measure what the code printed by its characters: a str subclass of the code's whose
    `len` says 0 (and whose slicing gives itself back) cannot keep every piece past the limit."""
    lying = (
        "class S(str):\n    def __len__(self): return 0\n    def __getitem__(self, i): return self\n"
        "    def __add__(self, other): return self\n    def join(self, items): return self\n"
        "big = S('x' * 2_000_000)\nfor i in range(30):\n    print('', '', sep=big, end=big)\n"
    )
    with LocalExecutor(isolation=isolation, timeout_seconds=20, max_print_outputs_length=50_000) as executor:
        logs = executor.run(lying).logs
        plain = executor.run("print('x' * 2_000_000)").logs  # control: a plain str is cut the same way
    assert len(plain) < 60_000
    assert len(logs) < 60_000, len(logs)
