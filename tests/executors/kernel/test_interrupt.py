"""Ctrl-C in the host while a kernel runs a cell: the cell is interrupted and what it printed is kept."""

from __future__ import annotations

import signal
import threading
import time

import pytest

from codeward.executors.base import ExecutionError
from codeward.executors.jupyter import JupyterExecutor

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
