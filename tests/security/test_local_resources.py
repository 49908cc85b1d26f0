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
        "x = 10**250000\nwhile True:\n    x = x * x",
        "'a' * 10**12",
        "[0] * 10**12",
        "x = [0]\nx *= 10**12",
        "s = 'x' * 1_000_000\nwhile True:\n    s = s + s",
        "s = b'x' * 1_000_000\nwhile True:\n    s += s",
        "x = [0] * 1_000_000\nwhile True:\n    x += x",
        "t = (0,) * 1_000_000\nwhile True:\n    t = t + t",
        "def grow(s):\n    while True:\n        s = s + s\ngrow('x' * 1_000_000)",
        "def same(v):\n    return v\ndef grow(x):\n    while True:\n        x = x + same(x)\ngrow([0] * 1_000_000)",
        # running totals in a def's body are settled inline for numbers only (number_sum)
        "def grow(x):\n    while True:\n        x += x\ngrow([0] * 1_000_000)",
        "def same(v):\n    return v\ndef grow(s):\n    while True:\n        s += same(s)\ngrow('x' * 1_000_000)",
        # products in a def's body are settled inline for floats and small ints only (number_product)
        "def times(a, b):\n    return a * b\ntimes('a', 10**12)",
        "def times(a, b):\n    return a * b\ntimes(10**12, [0])",
        "def times(a, b):\n    return a * b\ntimes(b'x' * 10**6, 10**6)",
        "def square(x):\n    while True:\n        x = x * x\nsquare(10**250000)",
        "def square(x):\n    while True:\n        x = x * (x + 0)\nsquare(2**31 - 1)",
        "class B(int):\n    pass\ndef square(x):\n    while True:\n        x = B(x * x)\nsquare(B(2**30))",
        "b'ab' * 10**11",
        "'a'.ljust(10**11)",
        "'%2000000000d' % 1",
        "bytearray(b'%2000000000d') % 1",
        "'{:>2000000000}'.format(1)",
        "format(1, '>2000000000')",
        "w = 10**10\nf'{1:>{w}}'",
        "('ab' * 4_000_000).replace('', 'x' * 300)",
        "bytes(10**12)",
        "bytearray(10**11)",
        "import math\nmath.factorial(10**8)",
        "import math\nmath.comb(10**9, 10**8)",
    ],
    ids=lambda c: c[:40],
)
def test_huge_values_are_refused_in_one_step(code, attack):
    error = attack(code, control="exhausts")
    assert "the sandbox allows" in error.message or "not supported" in error.message


@pytest.mark.parametrize(
    "code",
    [
        "list(range(10**12))",
        "sum(range(10**12))",
        "sum(range(10**20))",  # longer than sys.maxsize: no len(), iterated all the same
        "max(range(2**63, 2**64))",
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
    error = attack(code, control="exhausts", max_operations=200_000)
    assert "operations" in error.message


def test_cpu_loop_is_stopped_by_the_timeout_while_running(attack):
    error = attack("while True:\n    pass", control="exhausts", max_operations=10**15, timeout_seconds=0.5)
    assert isinstance(error, ExecutionTimeout)


def test_loop_in_finally_is_stopped(attack):
    error = attack("try:\n    1/0\nfinally:\n    while True:\n        pass", control="exhausts", max_operations=100_000)
    assert "operations" in error.message


def test_memory_growth_is_stopped_by_the_allowance(attack):
    error = attack(
        "chunks = []\nwhile True:\n    chunks.append('x' * 10_000_000)",
        control="exhausts",
        max_memory_bytes=300 * 1024 * 1024,
        max_value_size=10**12,
    )
    assert "grew memory by more than" in error.message


def test_regex_work_is_bounded_by_the_timeout_for_python_level_loops(attack):
    error = attack(
        "import re\nout = []\nwhile True:\n    out.append(re.findall('a', 'a' * 100))",
        control="exhausts",
        timeout_seconds=0.5,
        max_operations=10**15,
        max_memory_bytes=None,
    )
    assert isinstance(error, ExecutionTimeout)


@pytest.mark.parametrize(
    "code",
    [
        # a loop variable rebound elsewhere in the function is no longer a certain int
        "def f():\n    for i in range(1):\n        pass\n    i = '%2000000000d'\n    return i % 1\nf()",
        # at module level a function called in the loop can rebind the name
        "def g():\n    global i\n    i = '%2000000000d'\nfor i in range(1):\n    g()\n    i % 1",
        # a nested function can rebind it with nonlocal
        "def f():\n    def g():\n        nonlocal i\n        i = 'ab'\n    for i in range(1):\n        g()\n        i * 10**12\nf()",
        # a comprehension clause rebinding the variable
        "[i * 10**12 for i in range(1) for i in ['ab']]",
        # a walrus in a default value or a decorator binds in the enclosing function
        "def f():\n    for i in range(1):\n        def g(a=(i := '%2000000000d')):\n            pass\n        return i % 1\nf()",
        "def f():\n    for i in range(1):\n        g = lambda a=(i := '%2000000000d'): 0\n        return i % 1\nf()",
        "def f():\n    for i in range(1):\n        @[lambda g: g, (i := '%2000000000d')][0]\n        def g():\n            pass\n        return i % 1\nf()",
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
    error = attack(code, control="exhausts")
    assert "the sandbox allows" in error.message or "not supported" in error.message


def test_range_cannot_be_redefined(attack):
    error = attack("range = lambda n: ['%2000000000d']")
    assert "'range' cannot be redefined" in error.message


def test_catastrophic_regex_is_stopped_by_the_timeout(attack):
    """A backtracking regex is one long C call; the watchdog interrupts it (main thread)."""
    error = attack("import re\nre.match(r'(a+)+$', 'a' * 40 + 'b')", control="exhausts", timeout_seconds=0.5)
    assert isinstance(error, ExecutionTimeout)


@pytest.mark.parametrize(
    ("before", "code"),
    [
        ("def g():\n    global i\n    i = '%2000000000d'", "for i in range(1):\n    g()\n    i % 1"),
        ("i = '%2000000000d'", "for n in range(0):\n    pass\ni % 1"),
    ],
    ids=["function-from-earlier-block", "value-from-earlier-block"],
)
def test_unguarded_int_operators_cannot_be_tricked_across_blocks(before, code, attack):
    """A name bound by an earlier block is no certain int in a later block's loop."""
    error = attack(code, before=before, control="exhausts")
    assert "the sandbox allows" in error.message
