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
