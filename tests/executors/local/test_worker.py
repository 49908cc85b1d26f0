"""The local executor's worker process, as a user meets it: settings, what crosses, what it reports."""

from __future__ import annotations

import logging
import os
import signal
import sqlite3
import sys
import time
from pathlib import Path

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, ExecutorError
from codeward.executors.codec import CodecError
from codeward.executors.local import confinement
from codeward.executors.local.worker_process import worker_import_path
from codeward.platform.tools import FinalAnswerTool, tool

pytestmark = pytest.mark.timeout(60)


class Unlucky(Exception):
    pass


@tool
def lookup(city: str, unit: str = "C") -> str:
    """Looks up a city.

    Args:
        city: the city
        unit: the unit
    """
    if city == "Atlantis":
        raise LookupError(f"no station in {city}")
    if city == "Nowhere":
        raise Unlucky("a custom failure")
    return f"{city}:{unit}:{os.getpid()}"


def test_the_code_runs_in_another_process_and_tools_run_on_the_host():
    with LocalExecutor(authorized_imports=["os"]) as executor:
        executor.send_tools({"lookup": lookup, "final_answer": FinalAnswerTool()})
        assert executor.run("import os\nos.getpid()").output != os.getpid()
        assert executor.run("lookup('Paris', unit='F')").output == f"Paris:F:{os.getpid()}"


def test_tool_errors_keep_built_in_types_and_name_others():
    with LocalExecutor() as executor:
        executor.send_tools({"lookup": lookup})
        caught = executor.run("try:\n    lookup('Atlantis')\nexcept LookupError as e:\n    r = str(e)\nr").output
        assert caught == "no station in Atlantis"
        with pytest.raises(ExecutionError) as info:
            executor.run("lookup('Nowhere')")
        assert info.value.error_type == "Unlucky" and "Unlucky: a custom failure" in info.value.message
        caught = executor.run("try:\n    lookup('Nowhere')\nexcept Exception as e:\n    r = type(e).__name__\nr").output
        assert caught == "Unlucky"
        with pytest.raises(ExecutionError) as info:
            executor.run("lookup()")
        assert info.value.error_type == "ToolCallError"


def test_the_worker_gets_none_of_the_hosts_environment_unless_given(monkeypatch):
    monkeypatch.setenv("CODEWARD_TEST_TOKEN", "secret")
    code = "import os\nos.environ.get('CODEWARD_TEST_TOKEN')"
    with LocalExecutor(authorized_imports=["os"]) as executor:
        assert executor.run(code).output is None
    with LocalExecutor(authorized_imports=["os"], env={"CODEWARD_TEST_TOKEN": "given"}) as executor:
        assert executor.run(code).output == "given"


def test_a_value_that_cannot_leave_says_so():
    with LocalExecutor() as executor:
        executor.send_tools({"final_answer": FinalAnswerTool()})
        shown = executor.run("class Box:\n    def __repr__(self):\n        return 'a box'\nBox()").output
        assert shown == "a box"  # its text, made in the worker under the block's limits
        with pytest.raises(ExecutionError) as info:
            executor.run("final_answer(Box())")
        assert info.value.error_type == "CodecError" and "cannot leave the sandbox" in info.value.message


def test_a_live_object_as_a_variable_points_to_in_process():
    connection = sqlite3.connect(":memory:")
    with LocalExecutor() as executor, pytest.raises(CodecError, match="isolation='in_process'"):
        executor.send_variables({"db": connection})
    with LocalExecutor(isolation="in_process") as executor:
        executor.send_variables({"db": connection})
        assert executor.run("db").output is connection
    connection.close()


def test_settings_that_make_no_sense_are_refused():
    with pytest.raises(ValueError, match="isolation must be one of"):
        LocalExecutor(isolation="container")
    with pytest.raises(ValueError, match="confinement must be one of"):
        LocalExecutor(confinement="maximum")
    with pytest.raises(ValueError, match="no worker"):
        LocalExecutor(isolation="in_process", env={"A": "1"})


def test_strict_confinement_names_the_missing_layer(monkeypatch):
    monkeypatch.setattr(confinement, "missing_layers", lambda: {"landlock": "the kernel has no Landlock"})
    with pytest.raises(ExecutorError, match="landlock: the kernel has no Landlock"):
        LocalExecutor(confinement="strict")


def test_strict_confinement_runs_where_every_layer_is_here():
    if confinement.missing_layers():
        pytest.skip(f"this machine lacks {confinement.missing_layers()}")
    with LocalExecutor(confinement="strict") as executor:
        assert executor.run("1 + 1").output == 2 and executor.missing_layers == []


def test_missing_layers_are_logged_once(caplog):
    with LocalExecutor() as executor:
        executor.run("1")
        executor._worker.missing_layers = ["landlock"]  # as a worker on an older kernel reports
        with caplog.at_level(logging.WARNING, logger="codeward.executors.local.executor"):
            executor.run("1")
            executor.run("2")
    warnings = [r for r in caplog.records if "landlock" in r.getMessage()]
    assert len(warnings) == 1 and "codeward doctor" in warnings[0].getMessage()


def test_the_worker_imports_only_from_the_interpreters_folders_and_allowed_modules(tmp_path, monkeypatch):
    project = tmp_path / "project"
    project.mkdir()
    (project / "mylib.py").write_text("VALUE = 42\n")
    monkeypatch.syspath_prepend(str(project))
    assert str(project) not in worker_import_path(["json"])
    assert str(project) in worker_import_path(["mylib"])
    with LocalExecutor(authorized_imports=["mylib"]) as executor:
        assert executor.run("import mylib\nmylib.VALUE").output == 42


def test_closing_stops_the_worker():
    executor = LocalExecutor(authorized_imports=["os"])
    pid = executor.run("import os\nos.getpid()").output
    executor.close()
    with pytest.raises(ExecutorError, match="closed"):
        executor.run("1")
    from tests.executors.contract.conftest import process_gone

    assert process_gone(pid)


def test_a_worker_killed_while_idle_is_reported_and_replaced():
    import signal

    from codeward.executors.base import SandboxError

    with LocalExecutor(authorized_imports=["os"]) as executor:
        executor.send_variables({"given": 3})
        pid = executor.run("import os\nos.getpid()").output
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SandboxError, match="SIGKILL"):
            executor.run("given")
        assert executor.run("given * 2").output == 6


def test_an_interrupted_block_does_not_leave_its_answer_for_the_next_one():
    import _thread
    import threading

    with LocalExecutor(timeout_seconds=20) as executor:
        executor.run("None")  # the worker has started: the interrupt lands in the slow block, not in the start
        threading.Timer(0.5, _thread.interrupt_main).start()
        with pytest.raises(KeyboardInterrupt):
            executor.run("import time\ntime.sleep(3)\n'the slow block'")
        assert executor.run("'the next block'").output == "the next block"


def test_the_worker_dies_with_its_host(tmp_path):
    """A host killed while its worker is stuck in a C call leaves nothing running."""
    import subprocess
    import sys
    import time

    from tests.executors.contract.conftest import process_gone

    script = (
        "from codeward.executors import LocalExecutor\n"
        "executor = LocalExecutor(authorized_imports=['os'], timeout_seconds=100)\n"
        "print(executor.run('import os\\nos.getpid()').output, flush=True)\n"
        "executor.run('any(iter(int, 1))')\n"
    )
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    worker_pid = int(host.stdout.readline())
    time.sleep(0.5)
    assert not process_gone(worker_pid)
    host.kill()
    host.wait()
    deadline = time.monotonic() + 5
    while not process_gone(worker_pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert process_gone(worker_pid)


def test_a_killed_hosts_working_folder_is_removed_with_what_the_code_wrote():
    """The host's own cleanup never runs when it is killed; the worker's reaper removes the folder."""
    import subprocess

    script = (
        "from codeward.executors import LocalExecutor\n"
        "executor = LocalExecutor(timeout_seconds=100)\n"
        "executor.run(\"open('kept.txt', 'w').write('x' * 1000)\")\n"
        "print(executor.working_folder, flush=True)\n"
        "executor.run('any(iter(int, 1))')\n"
    )
    host = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    folder = Path(host.stdout.readline().strip())
    assert (folder / "kept.txt").stat().st_size == 1000
    host.kill()
    host.wait()
    deadline = time.monotonic() + 10
    while folder.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not folder.exists()


def test_a_replaced_worker_leaves_the_working_folder_to_the_next():
    """The control: a worker the host stops (here, one killed from outside) releases its reaper, and the
    folder, which belongs to the executor, stays with its files for the next worker."""
    from codeward.executors.base import SandboxError

    with LocalExecutor(authorized_imports=["os"]) as executor:
        pid = executor.run("import os\nopen('kept.txt', 'w').write('kept')\nos.getpid()").output
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(SandboxError, match="SIGKILL"):
            executor.run("1")
        time.sleep(1)  # what the old worker's reaper would do, it has done
        assert executor.run("open('kept.txt').read()").output == "kept"
    assert not Path(executor.working_folder).exists()  # closed, the host removes it itself


def test_a_worker_that_cannot_start_says_so_at_its_first_block_and_closes_cleanly(monkeypatch):
    """The start is not waited for when the executor is made; a start that fails (no interpreter
    where the host's was) fails the first block with a SandboxError that says why, and `close()` works."""
    from codeward.executors.base import SandboxError
    from codeward.executors.local.executor import LocalExecutor

    monkeypatch.setattr(sys, "executable", "/nonexistent/python3")
    executor = LocalExecutor()
    with pytest.raises(SandboxError, match=r"could not be started \(FileNotFoundError"):
        executor.run("1")
    executor.close()


def test_a_blocks_small_plain_values_come_back_exact_by_the_quick_path_and_past_it():
    # None, bools and ints of up to 18 digits skip the codec on the host; the others around them do not
    values = [
        "None", "True", "False", "0", "-5", "10**17", "-(10**18 - 1)", "10**18", "-(10**18)", "2**64",
        "'null'", "'12'", "1.0", "-0.0",
    ]  # fmt: skip
    with LocalExecutor() as executor:
        for source in values:
            expected = eval(source)
            got = executor.run(source).output
            assert type(got) is type(expected) and got == expected, (source, got)
            assert str(got) == str(expected), source
        executor.send_tools({"final_answer": FinalAnswerTool()})
        final = executor.run("final_answer(7)")
        assert final.output == 7 and type(final.output) is int and final.is_final_answer
