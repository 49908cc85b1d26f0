"""`CodeOutput.usage` on the local, jupyter and E2B executors: real workers, a real kernel, the E2B
test server. The figures are the host's measure, so a worker that lies cannot lower them."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import BlockUsage, ExecutionError, SandboxError
from codeward.executors.local import process, worker_process
from codeward.executors.metering import ProcessMeter
from tests.executors.usage_checks import CALLS, check_cpu, check_memory, check_output_and_calls, double, usage_of

LOCAL = {"max_memory_bytes": 1 << 30, "max_value_size": 400_000_000, "max_operations": 10**9}


@pytest.fixture
def local() -> Iterator[LocalExecutor]:
    with LocalExecutor(**LOCAL) as executor:
        yield executor


def test_local_peak_memory_is_the_blocks_own(local: LocalExecutor) -> None:
    check_memory(local)


def test_local_cpu_time_is_what_the_block_spent(local: LocalExecutor) -> None:
    check_cpu(local)


def test_local_output_and_tool_calls_are_counted(local: LocalExecutor) -> None:
    check_output_and_calls(local)


def test_a_local_block_that_took_no_page_fault_gets_the_peak_the_status_file_gives(local: LocalExecutor) -> None:
    """A block that grew nothing is measured from the worker's stat line alone (its page faults and size,
    read with its CPU time): the figure is the high-water mark /proc/<pid>/status gives after it."""
    pid = int(str(local.sandbox_id).split("-")[1])
    for _ in range(20):
        usage = usage_of(local, "x = 1")
        status = Path(f"/proc/{pid}/status").read_text()
        high = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) * 1024
        assert usage.peak_memory_bytes is not None and abs(usage.peak_memory_bytes - high) <= 2 * 2**20, (usage, high)


def test_local_usage_comes_with_a_failed_block_and_names_what_it_does_not_measure(local: LocalExecutor) -> None:
    with pytest.raises(ExecutionError) as caught:
        local.run("print('before')\n1 / 0")
    usage = caught.value.usage
    assert isinstance(usage, BlockUsage) and usage.output_bytes >= len("before") and usage.cpu_seconds is not None
    assert usage.egress_bytes is None and "network" in usage.unmeasured["egress_bytes"]


def test_in_process_cpu_and_calls_are_measured_and_memory_says_why_not() -> None:
    with LocalExecutor(isolation="in_process", max_operations=10**9) as executor:
        executor.send_tools({"double": double})
        spun = usage_of(
            executor, "import time\nstarted = time.process_time()\nwhile time.process_time() - started < 1:\n    pass"
        )
        assert spun.cpu_seconds is not None and spun.cpu_seconds >= 0.7, spun
        slept = usage_of(executor, "import time\ntime.sleep(1)")
        assert slept.cpu_seconds is not None and slept.cpu_seconds < 0.3, slept
        called = usage_of(executor, CALLS)
        assert called.tool_calls == 2 and called.output_bytes >= 5000
        assert called.peak_memory_bytes is None and "host's own" in called.unmeasured["peak_memory_bytes"]


# -- a worker that lies ----------------------------------------------------------------------

#: A worker whose blocks spin a second of CPU, then answer as a worker would, with `EXTRA` added to
#: the answer: fields a lying worker would like the host to take for the block's cost.
_LYING_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[2])\n"
    "import time\n"
    "from codeward.executors import codec\n"
    "from codeward.executors.local import worker\n"
    "def run(interpreter, interrupts, code, live):\n"
    "    started = time.process_time()\n"
    "    while time.process_time() - started < 1:\n"
    "        pass\n"
    "    return {'op': 'done', 'final': False, 'logs': '', **EXTRA}, codec.dumps(None), ()\n"
    "worker._run = run\n"
    "worker.main(int(sys.argv[1]))\n"
)


def _lying_worker(monkeypatch: pytest.MonkeyPatch, extra: dict[str, object]) -> LocalExecutor:
    boot = _LYING_BOOT.replace("EXTRA", json.dumps(extra))
    monkeypatch.setattr(worker_process, "_BOOT", boot)
    return LocalExecutor(confinement="none")


def test_a_worker_that_says_it_spent_nothing_is_stopped_and_its_word_is_never_the_usage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lie = {"wall_seconds": 0, "cpu_seconds": 0, "peak_memory_bytes": 0}
    with (
        _lying_worker(monkeypatch, lie) as executor,
        pytest.raises(SandboxError, match="fields codeward does not know"),
    ):
        executor.run("x = 1")


def test_the_cpu_a_worker_spent_is_the_hosts_measure_whatever_its_answer_says(monkeypatch: pytest.MonkeyPatch) -> None:
    """The control: the same worker answering without the lie is taken, and the usage is the second of
    CPU the host read from /proc, though nothing in the answer speaks of it."""
    with _lying_worker(monkeypatch, {}) as executor:
        usage = usage_of(executor, "x = 1")
    assert usage.cpu_seconds is not None and usage.cpu_seconds >= 0.7, usage


#: A worker whose every block leaves a thread that spends 0.3 CPU seconds just after the answer: under
#: the idle allowance, so the worker is not stopped for it.
_AFTER_THE_ANSWER_BOOT = (
    "import sys, json; sys.path[:] = json.loads(sys.argv[2])\n"
    "import threading, time\n"
    "from codeward.executors import codec\n"
    "from codeward.executors.local import worker\n"
    "def spin():\n"
    "    time.sleep(0.05)\n"
    "    started = time.thread_time()\n"
    "    while time.thread_time() - started < 0.3:\n"
    "        pass\n"
    "def run(interpreter, interrupts, code, live):\n"
    "    threading.Thread(target=spin).start()\n"
    "    return {'op': 'done', 'final': False, 'logs': ''}, codec.dumps(None), ()\n"
    "worker._run = run\n"
    "worker.main(int(sys.argv[1]))\n"
)


def _cpu_after_answers(monkeypatch: pytest.MonkeyPatch) -> float:
    monkeypatch.setattr(worker_process, "_BOOT", _AFTER_THE_ANSWER_BOOT)
    with LocalExecutor(confinement="none") as executor:
        spent = 0.0
        for _ in range(4):
            spent += usage_of(executor, "x = 1").cpu_seconds or 0.0
            time.sleep(0.6)  # the thread's 0.3 s, done before the next block
        return spent


def test_the_cpu_a_worker_spends_between_blocks_counts_in_the_next_block(monkeypatch: pytest.MonkeyPatch) -> None:
    """The worker's CPU time is counted from one answer to the next: what it spends after an answer
    is not lost between two blocks. The control measures each block from its request."""
    measured_from_the_request = process._Tally.begin
    with monkeypatch.context() as control:
        control.setattr(process._Tally, "begin", lambda self, cpu=None: measured_from_the_request(self, None))
        hidden = _cpu_after_answers(control)
    assert hidden < 0.3, f"control: {hidden} CPU seconds counted"
    counted = _cpu_after_answers(monkeypatch)
    assert counted >= 0.7, f"{counted} CPU seconds counted of the 1.2 spent"


def test_a_process_meter_resets_the_peak_of_a_process_it_reads() -> None:
    """The host's reading of /proc, on a process it did not make a block in: a child that held 100 MB
    and let it go shows it in its peak until the meter's reset, and not after (the control)."""
    script = "import sys\nheld = b'x' * (100 * 2**20)\ndel held\nprint('ready', flush=True)\nsys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    meter = ProcessMeter(child.pid, children=False)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        before = meter.end()  # never begun: the peak since the process started
        meter.begin()
        after = meter.end()
    finally:
        meter.close()
        child.communicate(b"")
    assert before.peak_memory_bytes is not None and before.peak_memory_bytes >= 100 * 2**20, before
    assert after.peak_memory_bytes is not None and after.peak_memory_bytes < 50 * 2**20, after
    assert after.peak_memory_scope == "block" and after.cpu_seconds is not None


# -- jupyter ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def jupyter() -> Iterator[object]:
    pytest.importorskip("jupyter_client")
    from codeward.executors.jupyter import JupyterExecutor

    with JupyterExecutor(timeout_seconds=60) as executor:
        yield executor


def test_jupyter_peak_memory_is_the_blocks_own(jupyter: LocalExecutor) -> None:
    check_memory(jupyter)


def test_jupyter_cpu_time_is_what_the_block_spent(jupyter: LocalExecutor) -> None:
    check_cpu(jupyter)


def test_jupyter_output_and_tool_calls_are_counted(jupyter: LocalExecutor) -> None:
    check_output_and_calls(jupyter)


def test_jupyter_counts_the_cpu_of_the_processes_a_block_starts(jupyter: LocalExecutor) -> None:
    code = (
        "import subprocess, sys\n"
        "subprocess.run([sys.executable, '-c', 'import time\\nt = time.process_time()\\n"
        "while time.process_time() - t < 1: pass'], check=True)"
    )
    usage = usage_of(jupyter, code)
    assert usage.cpu_seconds is not None and usage.cpu_seconds >= 0.7, usage


# -- e2b -------------------------------------------------------------------------------------


def test_e2b_counts_time_output_and_calls_and_says_why_cpu_and_memory_are_not_there() -> None:
    pytest.importorskip("e2b_code_interpreter")
    from codeward.executors.e2b import E2BExecutor
    from tests.e2b_server import E2BServer

    with (
        E2BServer() as server,
        E2BExecutor(connection=server.connection, timeout_seconds=30, tools_mode="host") as executor,
    ):
        executor.send_tools({"double": double})
        usage = usage_of(executor, CALLS)
        slept = usage_of(executor, "import time\ntime.sleep(1)")
    assert usage.tool_calls == 2 and usage.output_bytes >= 5000, usage
    assert usage.cpu_seconds is None and "E2B" in usage.unmeasured["cpu_seconds"]
    assert usage.peak_memory_bytes is None and "E2B" in usage.unmeasured["peak_memory_bytes"]
    assert slept.wall_seconds >= 0.95 and slept.tool_calls == 0
