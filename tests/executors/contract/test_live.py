"""The executor contract, live: output handed to `on_output` while a block runs, and `interrupt()`.

Run against every executor profile, like the rest of the contract suite.
"""

from __future__ import annotations

import threading
import time

import pytest

from codeward.executors.base import ExecutionError, ExecutionTimeout, Executor
from tests.timing import busy_seconds

from .conftest import PROFILES, TIMEOUT

#: A block that prints, sleeps two seconds (within the suite's time limit) and prints again.
PRINT_SLEEP_PRINT = "import time\nprint('first')\ntime.sleep(2)\nprint('second')"


def test_output_reaches_on_output_while_the_block_runs(executor: Executor) -> None:
    heard: list[tuple[float, str, str]] = []
    result = executor.run(
        PRINT_SLEEP_PRINT, on_output=lambda stream, text: heard.append((time.monotonic(), stream, text))
    )
    ended = time.monotonic()
    first_at = next(at for at, _, text in heard if "first" in text)
    # held until the end, it would come as the block ends; a busy machine may hand it over up to a
    # second late (a kernel flushes its output every so often, and each hop waits for a core)
    assert ended - first_at >= 1.0, f"the first line came {ended - first_at:.2f} s before the block ended"
    assert "".join(text for _, _, text in heard) == "first\nsecond\n"
    assert {stream for _, stream, _ in heard} == {"stdout"}
    assert "first\nsecond\n" in result.logs


def test_stderr_is_delivered_as_such(executor: Executor) -> None:
    heard: list[tuple[str, str]] = []
    executor.run(
        "import sys\nprint('oops', file=sys.stderr)", on_output=lambda stream, text: heard.append((stream, text))
    )
    assert "".join(text for stream, text in heard if stream == "stderr") == "oops\n"


#: How long a stop may take on a busy machine, from the ask to the block's end; shorter than the
#: 2.5 s the stopped blocks below sleep past their print, so a block that went on to its end fails.
STOPPED_WITHIN = busy_seconds(0.6)
assert STOPPED_WITHIN < 2.5 < TIMEOUT


def test_interrupt_from_another_thread_stops_a_sleeping_block_and_keeps_the_state(executor: Executor) -> None:
    executor.interrupt()  # nothing runs: nothing happens
    executor.run("kept = 41")
    executor.interrupt()
    asked: list[float] = []

    def interrupt_once_asleep(stream: str, text: str) -> None:
        if "sleeping" in text and not asked:
            asked.append(time.monotonic())
            threading.Thread(target=executor.interrupt).start()

    with pytest.raises(ExecutionError) as caught:
        executor.run("import time\nprint('sleeping')\ntime.sleep(2.5)\nkept = 0", on_output=interrupt_once_asleep)
    stopped = time.monotonic()
    assert not isinstance(caught.value, ExecutionTimeout)
    assert caught.value.error_type == "KeyboardInterrupt"
    assert stopped - asked[0] < STOPPED_WITHIN, f"the block ended {stopped - asked[0]:.2f} s after interrupt()"
    assert "sleeping" in caught.value.logs
    assert executor.run("kept + 1").output == 42


def test_a_callback_that_raises_stops_the_block_and_the_executor_stays_usable(executor: Executor) -> None:
    class Enough(Exception):
        pass

    raised: list[float] = []

    def enough(stream: str, text: str) -> None:
        raised.append(time.monotonic())  # from here, not from run(): the sandbox's start is not the stop's
        raise Enough(text)

    with pytest.raises(Enough):
        executor.run("import time\nstate = 1\nprint('go')\ntime.sleep(2.5)\nstate = 2", on_output=enough)
    assert time.monotonic() - raised[0] < STOPPED_WITHIN
    assert executor.run("state").output == 1
    assert executor.run("print('again')", on_output=lambda stream, text: None).logs.strip() == "again"


def test_output_past_the_logs_length_is_not_delivered(executor_name: str) -> None:
    heard: list[str] = []
    with PROFILES[executor_name].make(max_print_outputs_length=1000) as executor:
        result = executor.run(
            "for i in range(500):\n    print(f'line {i:04d}')", on_output=lambda s, t: heard.append(t)
        )
    printed = "".join(f"line {i:04d}\n" for i in range(500))
    delivered = "".join(heard)
    assert "characters of output cut" in result.logs  # the block's own logs say the budget was passed
    assert 500 <= len(delivered) <= 1000
    assert printed.startswith(delivered)
