"""A shared sandbox whose kernel a test cost a restart is prepared again for the next test."""

from __future__ import annotations

import pytest

from codeward.executors.base import ExecutionTimeout
from codeward.executors.jupyter import JupyterExecutor
from tests.shared_sandbox import SharedSandbox

#: Code that ignores the interrupt, so that the time limit can end it only by restarting the kernel.
DEAF = "import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True:\n    time.sleep(0.05)"


def test_state_lost_to_a_restart_is_prepared_again() -> None:
    pytest.importorskip("jupyter_client")
    prepared: list[int] = []

    def prepare(executor: JupyterExecutor) -> None:
        prepared.append(1)
        executor.run("STATE = 'set'")

    with JupyterExecutor(timeout_seconds=1) as executor:
        shared = SharedSandbox(executor, prepare)
        assert shared.ready().run("STATE").output == "set"
        assert (len(prepared), shared.reestablished) == (1, 0)  # nothing lost: not prepared again
        with pytest.raises(ExecutionTimeout, match="kernel was restarted"):
            executor.run(DEAF)
        assert not shared.prepared()  # control: the restart took the state with it
        assert shared.ready().run("STATE").output == "set"
        assert (len(prepared), shared.reestablished) == (2, 1)
