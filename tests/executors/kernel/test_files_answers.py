"""`ex.files` on a kernel whose code is a stranger's: the code may replace codeward's side of a
files call (the prelude's `files`), so every answer is bounded before it is decoded, must be what
the call expects, and is waited for no longer than the executor's time limit; and a stop asked
for a block never costs the kernel's state, wherever in the kernel it lands.

Each attack has its control: the same call, answered honestly, works.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import pytest

from codeward.executors import codec
from codeward.executors.base import ExecutionError, create_executor
from codeward.executors.files import FileBudget, FileBudgetExceeded, FilesError
from codeward.executors.kernel.executor import KernelExecutor
from codeward.executors.kernel.files import MAX_LISTING_NAMES
from tests.executors.contract.conftest import _docker_unavailable, _gvisor_unavailable

pytestmark = pytest.mark.timeout(180)

TIMEOUT = 3.0
#: How long past the time limit a refused call may return on a busy machine.
SLACK = 3.0

_KEEP = "import sys\n_cw = sys.modules['_codeward']\n_real_files = _cw.files\nkept = 21"


SANDBOXES = {
    "jupyter": ({}, lambda: None),
    "docker": ({}, _docker_unavailable),
    "docker-runsc": ({"runtime": "runsc"}, _gvisor_unavailable),
}


@pytest.fixture(scope="module", params=sorted(SANDBOXES))
def executor(request: pytest.FixtureRequest) -> Iterator[KernelExecutor]:
    settings, unavailable = SANDBOXES[request.param]
    if missing := unavailable():
        pytest.skip(missing)
    with create_executor(request.param.split("-")[0], timeout_seconds=TIMEOUT, **settings) as made:
        assert isinstance(made, KernelExecutor)
        made.run(_KEEP)
        yield made


@pytest.fixture(autouse=True)
def honest_again(executor: KernelExecutor) -> Iterator[None]:
    """Each test starts, and leaves the kernel, with codeward's own `files` and a full budget."""
    executor.files.budget = FileBudget()
    yield
    executor.run("_cw.files = _real_files")
    assert executor.run("kept").output == 21, "the kernel lost its state"


def answer_with(executor: KernelExecutor, value: str) -> None:
    """The code replaces codeward's side of every files call with one that answers `value`."""
    executor.run(
        f"def _stranger(operation, *arguments):\n    _cw._write_payload(value=_cw._Sandbox.codec.dumps({value}))\n"
        "_cw.files = _stranger"
    )


# -- a listing --------------------------------------------------------------------------------


def test_a_listing_of_too_many_names_is_refused_with_the_bound_named(executor: KernelExecutor) -> None:
    answer_with(executor, f"['ab'] * {MAX_LISTING_NAMES + 1}")  # 600 kB: well within the budget's bytes
    with pytest.raises(FilesError, match=f"more than {MAX_LISTING_NAMES:,} names") as raised:
        executor.files.list()
    assert raised.value.error_type == "TooManyNames"
    assert executor.files.budget.used == 0


def test_a_listing_is_bounded_and_charged_by_its_text_before_it_is_decoded(executor: KernelExecutor) -> None:
    executor.files.budget = FileBudget(per_call=1000)
    answer_with(executor, "['ab'] * 300")  # 300 names of 3 bytes each, but 1,801 characters of text
    with pytest.raises(FileBudgetExceeded, match="1,000 bytes a call"):
        executor.files.list()
    assert executor.files.budget.used == 0


def test_a_listing_that_would_take_far_more_memory_than_its_text_is_never_decoded(executor: KernelExecutor) -> None:
    answer_with(executor, "[1] * 2_000_000")  # 4 MB of text, 56 bytes an int once decoded
    started = time.monotonic()
    with pytest.raises(FilesError, match="once decoded"):
        executor.files.list()
    assert time.monotonic() - started < TIMEOUT + SLACK


def test_control_an_honest_listing_is_charged_by_its_text(executor: KernelExecutor) -> None:
    executor.run("import os\nos.makedirs('listed', exist_ok=True)\nfor n in 'abc': open(f'listed/{n}', 'w').close()")
    assert executor.files.list("listed") == ["a", "b", "c"]
    assert executor.files.budget.used == len(codec.dumps(["a", "b", "c"]))


# -- answers that carry no data ---------------------------------------------------------------


@pytest.mark.parametrize("answer", ["['ab'] * 100_000", "1", "'true'"])
@pytest.mark.parametrize("operation", ["exists", "remove", "write"])
def test_an_answer_that_should_carry_nothing_is_refused_as_out_of_turn(
    executor: KernelExecutor, operation: str, answer: str
) -> None:
    answer_with(executor, answer)
    call = {
        "exists": lambda: executor.files.exists("anything"),
        "remove": lambda: executor.files.remove("anything"),
        "write": lambda: executor.files.write("anything", b"x"),
    }[operation]
    with pytest.raises(FilesError, match="answered out of turn") as raised:
        call()
    assert raised.value.error_type == "OutOfTurn"


def test_control_exists_remove_and_write_answer_as_they_should(executor: KernelExecutor) -> None:
    executor.files.write("plain.txt", b"x")
    assert executor.files.exists("plain.txt") is True
    executor.files.remove("plain.txt")
    assert executor.files.exists("plain.txt") is False


def test_a_read_answered_with_something_else_is_refused_before_it_is_decoded(executor: KernelExecutor) -> None:
    executor.files.budget = FileBudget(per_call=1000)
    answer_with(executor, "[1j] * 1000")
    with pytest.raises(FileBudgetExceeded):
        executor.files.read("anything")
    assert executor.files.budget.used == 0


# -- time -------------------------------------------------------------------------------------


def test_a_files_call_the_code_holds_is_interrupted_at_the_time_limit(executor: KernelExecutor) -> None:
    executor.run("import time\n_cw.files = lambda *a: time.sleep(10_000)")
    started = time.monotonic()
    with pytest.raises(FilesError, match=f"time limit of {TIMEOUT:g} s") as raised:
        executor.files.exists("anything")
    assert time.monotonic() - started < TIMEOUT + SLACK
    assert raised.value.error_type == "TimeoutError"


def test_control_a_files_call_slower_than_usual_but_within_the_limit_answers(executor: KernelExecutor) -> None:
    executor.run("import time\n_cw.files = lambda *a: (time.sleep(1), _real_files(*a))[1]")
    executor.files.write("slow.txt", b"x")
    assert executor.files.exists("slow.txt") is True


# -- a stop that lands in the kernel's own handling of a block --------------------------------

_SLOW_START = (
    "import time\n_kernel = get_ipython().kernel\n_real_execute = _kernel.do_execute\n"
    "def _slow_execute(*a, **k):\n    time.sleep(1)\n    return _real_execute(*a, **k)\n"
    "_kernel.do_execute = _slow_execute"
)


@pytest.fixture
def slow_start(executor: KernelExecutor) -> Iterator[None]:
    """Every block spends its first second in the kernel's own handling, before the code runs:
    an interrupt that lands there stops the handling, and the kernel then sends no reply."""
    executor.run(_SLOW_START)
    yield
    executor.run("_kernel.do_execute = _real_execute")


def test_a_stop_that_lands_before_the_code_runs_ends_the_block_and_keeps_the_state(
    executor: KernelExecutor, slow_start: None
) -> None:
    assert executor._session is not None
    generation = executor._session.generation
    threading.Timer(0.3, executor.interrupt).start()
    started = time.monotonic()
    with pytest.raises(ExecutionError) as raised:
        executor.run("kept * 2")
    assert raised.value.error_type == "KeyboardInterrupt"
    assert time.monotonic() - started < TIMEOUT
    assert executor._session.generation == generation


def test_control_the_slow_start_alone_runs_the_block(executor: KernelExecutor, slow_start: None) -> None:
    assert executor.run("kept * 2").output == 42
