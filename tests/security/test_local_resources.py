"""Resource attacks: CPU, memory, recursion, huge numbers and strings. Each is stopped
with an error the model can act on, quickly, and the executor stays usable."""

from __future__ import annotations

import pytest

from codeward.executors.base import ExecutionTimeout

# A limit that failed would leave the code running: the per-test timeout turns that
# into a failure, so no test measures time itself.
pytestmark = pytest.mark.timeout(60)


@pytest.mark.parametrize(
    "code",
    [
        "10**10**10",
        "2**(10**9)",
        "x = 10\nx **= 10**9",
        "pow(10, 10**10)",
        "1 << 10**12",
        "(10**200000) * (10**200000)",
        "'a' * 10**12",
        "[0] * 10**12",
        "x = [0]\nx *= 10**12",
        "s = 'x' * 1_000_000\nwhile True:\n    s = s + s",
        "s = b'x' * 1_000_000\nwhile True:\n    s += s",
        "x = [0] * 1_000_000\nwhile True:\n    x += x",
        "t = (0,) * 1_000_000\nwhile True:\n    t = t + t",
        "b'ab' * 10**11",
        "'a'.ljust(10**11)",
        "'%10000000000d' % 1",
        "'{:>10000000000}'.format(1)",
        "format(1, '>10000000000')",
        "w = 10**10\nf'{1:>{w}}'",
        "'abc'.replace('', 'x' * 1000) * 1 if False else ('ab' * 4_000_000).replace('', 'xyz')",
        "bytes(10**12)",
        "bytearray(10**11)",
        "import math\nmath.factorial(10**8)",
        "import math\nmath.comb(10**9, 10**8)",
    ],
    ids=lambda c: c[:40],
)
def test_huge_values_are_refused_in_one_step(code, attack):
    error = attack(code)
    assert "the sandbox allows" in error.message or "not supported" in error.message


@pytest.mark.parametrize(
    "code",
    [
        "list(range(10**12))",
        "sum(range(10**12))",
        "set(range(10**11))",
        "import itertools\nlist(itertools.count())",
        "import itertools\n''.join(itertools.repeat('a'))",
        "import itertools\nlist(itertools.product(range(100), repeat=10))",
        "import itertools\nfor x in itertools.cycle([1]):\n    pass",
        "while True:\n    pass",
        "x = 0\nwhile True:\n    try:\n        x += 1\n    except BaseException:\n        pass",
        "def f():\n    while True:\n        yield 1\nlist(f())",
        "list(map(lambda v: v, iter(int, 1)))",
    ],
    ids=lambda c: c[:40],
)
def test_endless_or_huge_iteration_is_stopped(code, attack):
    error = attack(code, max_operations=200_000)
    assert "operations" in error.message


def test_cpu_loop_is_stopped_by_the_timeout_while_running(attack):
    error = attack("while True:\n    pass", max_operations=10**15, timeout_seconds=0.5)
    assert isinstance(error, ExecutionTimeout)


def test_loop_in_finally_is_stopped(attack):
    error = attack("try:\n    1/0\nfinally:\n    while True:\n        pass", max_operations=100_000)
    assert "operations" in error.message


def test_memory_growth_is_stopped_by_the_allowance(attack):
    error = attack(
        "chunks = []\nwhile True:\n    chunks.append('x' * 10_000_000)",
        max_memory_bytes=300 * 1024 * 1024,
        max_value_size=10**12,
    )
    assert "grew memory by more than" in error.message


def test_deep_recursion_is_a_recursion_error(attack):
    error = attack("def f(n):\n    return f(n + 1) + 1\nf(0)")
    assert error.error_type == "RecursionError"


def test_regex_work_is_bounded_by_the_timeout_for_python_level_loops(attack):
    error = attack(
        "import re\nout = []\nwhile True:\n    out.append(re.findall('a', 'a' * 100))",
        timeout_seconds=0.5,
        max_operations=10**15,
        max_memory_bytes=None,
    )
    assert isinstance(error, ExecutionTimeout)


@pytest.mark.parametrize(
    "code",
    [
        # a loop variable rebound elsewhere in the function is no longer a certain int
        "def f():\n    for i in range(1):\n        pass\n    i = '%10000000000d'\n    return i % 1\nf()",
        # at module level a function called in the loop can rebind the name
        "def g():\n    global i\n    i = '%10000000000d'\nfor i in range(1):\n    g()\n    i % 1",
        # a nested function can rebind it with nonlocal
        "def f():\n    def g():\n        nonlocal i\n        i = 'ab'\n    for i in range(1):\n        g()\n        i * 10**12\nf()",
        # a comprehension clause rebinding the variable
        "[i * 10**12 for i in range(1) for i in ['ab']]",
        # a walrus in a default value or a decorator binds in the enclosing function
        "def f():\n    for i in range(1):\n        def g(a=(i := '%10000000000d')):\n            pass\n        return i % 1\nf()",
        "def f():\n    for i in range(1):\n        g = lambda a=(i := '%10000000000d'): 0\n        return i % 1\nf()",
        "def f():\n    for i in range(1):\n        @[lambda g: g, (i := '%10000000000d')][0]\n        def g():\n            pass\n        return i % 1\nf()",
    ],
    ids=[
        "rebound-local",
        "global-rebind",
        "nonlocal-rebind",
        "comprehension-rebind",
        "default-walrus",
        "lambda-default-walrus",
        "decorator-walrus",
    ],
)
def test_unguarded_int_operators_cannot_be_tricked(code, attack):
    error = attack(code)
    assert "the sandbox allows" in error.message or "not supported" in error.message


def test_range_cannot_be_redefined(attack):
    error = attack("range = lambda n: ['%10000000000d']")
    assert "'range' cannot be redefined" in error.message


def test_model_code_run_by_the_host_after_the_block_stays_bounded():
    """A final answer whose __repr__ never ends: the host's repr() stops with an ordinary error."""
    from codeward.executors.local.executor import LocalExecutor
    from codeward.executors.local.limits import BudgetSpentOutsideRun
    from codeward.platform.tools import FinalAnswerTool

    with LocalExecutor(max_operations=100_000) as ex:
        ex.send_tools({"final_answer": FinalAnswerTool()})
        out = ex.run(
            "class Sticky:\n    def __repr__(self):\n        while True:\n            pass\nfinal_answer(Sticky())"
        )
        assert out.is_final_answer
        with pytest.raises(BudgetSpentOutsideRun):
            repr(out.output)
        assert ex.run("2 + 2").output == 4


def test_catastrophic_regex_is_stopped_by_the_timeout(attack):
    """A backtracking regex is one long C call; the watchdog interrupts it (main thread)."""
    error = attack("import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')", timeout_seconds=0.5)
    assert isinstance(error, ExecutionTimeout)


def test_unguarded_int_operators_cannot_be_tricked_across_blocks():
    """A function from an earlier block rebinds the loop variable of a later block's loop."""
    from codeward.executors.base import ExecutionError
    from codeward.executors.local.executor import LocalExecutor

    with LocalExecutor(timeout_seconds=5) as ex:
        ex.run("def g():\n    global i\n    i = '%10000000000d'")
        with pytest.raises(ExecutionError) as info:
            ex.run("for i in range(1):\n    g()\n    i % 1")
        assert "the sandbox allows" in info.value.message
        with pytest.raises(ExecutionError) as info:
            ex.run("i = '%10000000000d'\nfor n in range(0):\n    pass\ni % 1")
        assert "the sandbox allows" in info.value.message


def test_sandbox_code_cannot_sleep_when_the_host_calls_it_between_blocks():
    from codeward.executors.local.executor import LocalExecutor
    from codeward.executors.local.limits import BudgetSpentOutsideRun

    with LocalExecutor() as ex:
        napper = ex.run("import time\ndef nap():\n    time.sleep(3600)\nnap").output
        with pytest.raises(BudgetSpentOutsideRun):
            napper()


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

    with LocalExecutor(timeout_seconds=0.2, max_operations=10**15, max_memory_bytes=None) as ex:
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

    with LocalExecutor(max_operations=1_000) as ex:
        source = ex.run(code + "\nnext(source), next(other)\nsource").output
        with pytest.raises(BudgetSpentOutsideRun):
            for _ in range(5_000):
                next(source)
        with pytest.raises(ExecutionError, match="1,000 operations"):
            ex.run("for item in other:\n    pass")


def test_a_generator_started_in_one_block_finishes_in_the_next():
    from codeward.executors.local.executor import LocalExecutor

    with LocalExecutor(max_operations=10_000) as ex:
        ex.run("def numbers(n):\n    for i in range(n):\n        yield i\nmany = numbers(9_000)\nnext(many)")
        ex.run("few = (i for i in range(9_000))\nnext(few)")
        for _ in range(3):  # each block has a budget of its own
            ex.run("again = numbers(9_000)\nsum(again)")
        assert ex.run("sum(many)").output == sum(range(1, 9_000))
        assert ex.run("sum(few)").output == sum(range(1, 9_000))
