"""Sandbox code that the host itself runs after a block: a final answer's repr, a function or
generator the code returned, a finalizer. It runs on the host's allowance for sandbox code and
stops with the sandbox's own errors; and the sandbox's signals never leak into host code.

They concern `isolation="in_process"`, where the host holds the code's objects; a worker
sends only data back (`test_worker.py`).

These are not attacks with an unsandboxed control (without a sandbox there is no block whose
end matters), so they live beside the executor's other tests rather than in tests/security.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from codeward.executors.base import ExecutionError, ExecutionTimeout

pytestmark = pytest.mark.timeout(60)


def test_a_final_answer_of_the_codes_own_class_is_refused_as_a_worker_refuses_it():
    """The host never receives the code's objects as a block's output, so it never calls their
    methods later, without a watch: in process as from a worker, with the same message."""
    from codeward.executors.local.executor import LocalExecutor
    from codeward.platform.tools import FinalAnswerTool

    code = "class Sticky:\n    def __repr__(self):\n        while True:\n            pass\nfinal_answer(Sticky())"
    messages = []
    for isolation in ("in_process", "process"):
        with LocalExecutor(isolation=isolation, max_operations=100_000) as ex:
            ex.send_tools({"final_answer": FinalAnswerTool()})
            with pytest.raises(ExecutionError) as refused:
                ex.run(code)
            assert refused.value.error_type == "CodecError"
            messages.append(refused.value.message)
            assert ex.run("2 + 2").output == 4
    assert messages[0] == messages[1]
    assert "the final answer, of type __codeward_sandbox__.Sticky, cannot leave the sandbox" in messages[0]


def test_model_code_run_by_the_host_after_the_block_stays_bounded():
    """What the code leaves on a host object it was given is the host's to use: its methods run
    on the host's allowance for sandbox code, and stop with an ordinary error."""
    from codeward.executors.local.executor import LocalExecutor
    from codeward.executors.local.limits import BudgetSpentOutsideRun

    holder = SimpleNamespace()
    with LocalExecutor(isolation="in_process", max_operations=100_000) as ex:
        ex.send_variables({"holder": holder})
        ex.run("class Sticky:\n    def __repr__(self):\n        while True:\n            pass\nholder.left = Sticky()")
        with pytest.raises(BudgetSpentOutsideRun):
            repr(holder.left)
        assert ex.run("2 + 2").output == 4


def test_sandbox_code_cannot_sleep_when_the_host_calls_it_between_blocks():
    from codeward.executors.local.executor import LocalExecutor
    from codeward.executors.local.limits import BudgetSpentOutsideRun

    holder = SimpleNamespace()
    with LocalExecutor(isolation="in_process") as ex:
        ex.send_variables({"holder": holder})
        ex.run("import time\ndef nap():\n    time.sleep(3600)\nholder.nap = nap")
        with pytest.raises(BudgetSpentOutsideRun):
            holder.nap()


def test_a_time_signal_landing_in_a_host_finalizer_is_not_reported(monkeypatch):
    """The time signal can land in host code that the interpreter runs on its own: here a
    garbage-collector callback that outlasts the deadline. The block still stops with a
    timeout, and the stray signal is not reported through ``sys.unraisablehook``."""
    import gc
    import sys
    import time

    from codeward.executors.local.executor import LocalExecutor
    from codeward.executors.local.limits import SandboxSignal

    reported: list[BaseException | None] = []
    landed: list[BaseException] = []
    slow = False

    def slow_callback(phase, info):
        try:
            until = time.perf_counter() + (0.4 if slow else 0)
            while time.perf_counter() < until:
                pass
        except BaseException as signal:
            landed.append(signal)
            raise

    with LocalExecutor(isolation="in_process", timeout_seconds=0.2, max_operations=10**15, max_memory_bytes=None) as ex:
        monkeypatch.setattr(sys, "unraisablehook", lambda unraisable: reported.append(unraisable.exc_value))
        gc.callbacks.append(slow_callback)
        slow = True
        try:
            with pytest.raises(ExecutionTimeout):
                ex.run("out = []\nwhile True:\n    out.append([])")
        finally:
            slow = False
            gc.callbacks.remove(slow_callback)
        assert ex.run("1 + 1").output == 2
    assert landed, "the signal should have landed in the callback"
    assert not [error for error in reported if isinstance(error, SandboxSignal)]


@pytest.mark.parametrize(
    "code",
    [
        "import itertools\ndef endless():\n    for i in itertools.count():\n        yield i\nsource, other = endless(), endless()",
        "import itertools\nsource, other = [(i for i in itertools.count()) for _ in 'ab']",
        "import itertools\nsource, other = [(j for i in [0] for j in itertools.count()) for _ in 'ab']",
    ],
    ids=["generator-function", "generator-expression", "inner-clause"],
)
def test_a_generator_the_host_resumes_after_the_block_stays_bounded(code):
    """A loop suspended in a generator must not keep the budget of the block that started it:
    resumed by the host, it runs on the host's allowance for sandbox code (as much as one block
    may use) and stops; resumed by a later block, it counts against that block."""
    from codeward.executors.base import ExecutionError
    from codeward.executors.local.executor import LocalExecutor
    from codeward.executors.local.limits import BudgetSpentOutsideRun

    holder = SimpleNamespace()  # a block's value would leave as its shown text: the code leaves it here
    with LocalExecutor(isolation="in_process", max_operations=1_000) as ex:
        ex.send_variables({"holder": holder})
        ex.run(code + "\nnext(source), next(other)\nholder.source = source")
        source = holder.source
        with pytest.raises(BudgetSpentOutsideRun):
            for _ in range(5_000):
                next(source)
        with pytest.raises(ExecutionError, match="1,000 operations"):
            ex.run("for item in other:\n    pass")


def test_a_generator_started_in_one_block_finishes_in_the_next():
    from codeward.executors.local.executor import LocalExecutor

    with LocalExecutor(isolation="in_process", max_operations=10_000) as ex:
        ex.run("def numbers(n):\n    for i in range(n):\n        yield i\nmany = numbers(9_000)\nnext(many)")
        ex.run("few = (i for i in range(9_000))\nnext(few)")
        for _ in range(3):  # each block has a budget of its own
            ex.run("again = numbers(9_000)\nsum(again)")
        assert ex.run("sum(many)").output == sum(range(1, 9_000))
        assert ex.run("sum(few)").output == sum(range(1, 9_000))


def test_explicit_star_is_the_users_choice():
    """'*' allows everything, os included: documented, and only when asked for."""
    from codeward.executors.local.executor import LocalExecutor

    with LocalExecutor(isolation="in_process", authorized_imports=["*"]) as ex:
        assert ex.run("import os\nos.sep").output == "/"


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
def test_generator_finally_run_by_the_host_later_stays_bounded():
    """A suspended generator whose finally never ends, collected by the host after the block."""

    from codeward.executors.local.executor import LocalExecutor

    ex = LocalExecutor(isolation="in_process", max_operations=100_000)
    ex.run("def g():\n    try:\n        yield 1\n    finally:\n        while True:\n            pass\nx = g()\nnext(x)")
    ex.close()  # drops the generator: its finally runs on the host, under the budget


#: A key the code plants in typing's process-wide cache, whose hash is int's: the host's own
#: ``Optional[int]``, later, compares ``int == key`` and so runs the code's ``__eq__``.
PLANTED = """
import time, typing
armed = []
class Key:
    def __init__(self, h):
        self.h = h
    def __hash__(self):
        return self.h
    def __call__(self):
        return None
    def __eq__(self, other):
        if armed:
            until = time.monotonic() + 3.2
            while time.monotonic() < until:
                pass
        return self is other
typing.Optional[Key(hash(int))]
armed.append(1)
"""
PROBE = """
import sys, time, typing
from codeward.executors.local import LocalExecutor, interpreter
from codeward.executors.local.limits import BudgetSpentOutsideRun, make_tick
if sys.argv[1] == "control":  # the code's functions keep an operation budget between blocks
    interpreter._BETWEEN_BLOCKS = make_tick(10**12, BudgetSpentOutsideRun)
ex = LocalExecutor(isolation="in_process", timeout_seconds=1, max_operations=10**12)
ex.run(sys.argv[2])
started = time.monotonic()
try:
    typing.Optional[int]
    outcome = "ran"
except BudgetSpentOutsideRun:
    outcome = "refused"
print(outcome, round(time.monotonic() - started, 2))
"""


def test_the_codes_function_in_a_library_cache_never_runs_between_blocks():
    """Nothing the host receives holds the key: it waits in a library's cache. Whatever route
    brings the code's function back to the host, it raises at once outside a block."""
    import subprocess
    import sys

    def probe(mode: str) -> tuple[str, float]:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, mode, PLANTED], capture_output=True, text=True, timeout=60, check=True
        )
        outcome, took = done.stdout.split()
        return outcome, float(took)

    outcome, took = probe("control")
    assert outcome == "ran" and took > 3, f"control: the host's Optional[int] {outcome} in {took} s"
    outcome, took = probe("sandboxed")
    assert outcome == "refused" and took < 1, (outcome, took)
