"""Ctrl-C in the host while a kernel runs a cell: the cell is interrupted and what it printed is kept."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from codeward.executors.base import ExecutionError, ExecutionTimeout
from codeward.executors.jupyter import JupyterExecutor
from codeward.tools import FinalAnswerTool

pytestmark = pytest.mark.timeout(120)


def ctrl_c_in(seconds: float) -> None:
    """Press Ctrl-C in this process a moment from now: a real signal to the main thread."""
    main = threading.main_thread().ident
    assert main is not None
    threading.Timer(seconds, signal.pthread_kill, (main, signal.SIGINT)).start()


def test_the_interrupt_carries_what_the_cell_printed_and_the_kernel_keeps_its_state():
    with JupyterExecutor(timeout_seconds=60) as executor:
        executor.run("kept = 21")
        ctrl_c_in(1.0)
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt) as raised:
            executor.run("print('halfway there', flush=True)\nimport time\ntime.sleep(30)")
        assert time.monotonic() - started < 10
        cause = raised.value.__cause__
        assert isinstance(cause, ExecutionError) and cause.error_type == "KeyboardInterrupt"
        assert cause.logs == "halfway there\n"
        assert executor.run("kept * 2").output == 42


def test_interrupt_asked_before_the_cell_begins_still_stops_it_and_keeps_the_state():
    """The kernel ignores an interrupt that comes before its cell begins: the session sends it again
    every grace period while the cell runs, and never restarts the kernel for it."""
    with JupyterExecutor(timeout_seconds=60) as executor:
        executor.run("kept = 21")
        session = executor._session
        assert session is not None
        session.interrupt_grace = 0.5

        def interrupt_at_once() -> None:
            while not session._block_running:
                time.sleep(0.0001)
            executor.interrupt()

        threading.Thread(target=interrupt_at_once).start()
        started = time.monotonic()
        with pytest.raises(ExecutionError) as raised:
            executor.run("import time\ntime.sleep(30)")
        assert raised.value.error_type == "KeyboardInterrupt"
        assert time.monotonic() - started < 5
        assert executor.run("kept * 2").output == 42


#: A value whose encoding the code slows: its class's encoder sleeps before giving what it holds.
SLOW_TO_SEND = """
import sys, time

class SlowToSend:
    pass

def _encode_slowly(encoder, value):
    time.sleep(30)
    return 1

sys.modules["_codeward_codec.wire"].ENCODERS[SlowToSend] = _encode_slowly
"""


@pytest.mark.parametrize("code", ["SlowToSend()", "final_answer(SlowToSend())"], ids=["last-value", "final-answer"])
def test_the_time_limit_that_lands_while_the_value_is_sent_is_a_timeout(code: str) -> None:
    """The kernel sends a block's value from IPython's hooks, which report an exception raised in them
    and carry on: an interrupt that lands there once ended the cell as finished, and the host gave
    back the value's repr in place of the timeout."""
    with JupyterExecutor(timeout_seconds=2) as executor:
        executor.send_tools({"final_answer": FinalAnswerTool()})
        executor.run(SLOW_TO_SEND + "kept = 21")
        started = time.monotonic()
        with pytest.raises(ExecutionTimeout, match="ran past its time limit of 2 s and was interrupted"):
            executor.run(code)
        assert time.monotonic() - started < 10
        assert executor.run("kept * 2").output == 42


def test_an_interrupt_asked_while_the_value_is_sent_ends_the_block_as_interrupted() -> None:
    with JupyterExecutor(timeout_seconds=60) as executor:
        executor.run(SLOW_TO_SEND + "kept = 21")
        threading.Timer(2.0, executor.interrupt).start()  # well after the instant cell, within the encoding
        started = time.monotonic()
        with pytest.raises(ExecutionError, match="interrupted as it sent its value") as raised:
            executor.run("SlowToSend()")
        assert raised.value.error_type == "KeyboardInterrupt"
        assert time.monotonic() - started < 10
        assert executor.run("kept * 2").output == 42
