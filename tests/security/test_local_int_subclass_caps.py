"""Size caps on ints that are not exactly `int`: bools, instances of the code's subclasses of
int, and the functions that apply the sized operators (``operator.lshift``, ``math.prod``).

int's own ``<<``, ``**`` and ``*`` compute from the int value of a bool or of an instance of a
subclass as from any int, so ``True << 10**11`` builds as large an int as ``1 << 10**11``.
A subclass may also answer the comparisons, ``abs`` and the arithmetic the guards use to size
an operation (``B(10**12) > limit`` can say False) while C code reads its plain int value: the
caps read that value through int's own methods. A subclass's own operator methods run as the
code's (guarded) code; when one declines (returns NotImplemented), int's own method runs in
its place, and is sized there.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(60)

SUBCLASS = "class B(int):\n    pass\n"
#: Comparisons and abs that would wave any size through, were the guards to ask the object.
LIAR = (
    "class B(int):\n"
    "    def __gt__(self, other):\n        return False\n"
    "    def __ge__(self, other):\n        return False\n"
    "    def __lt__(self, other):\n        return True\n"
    "    def __abs__(self):\n        return 0\n"
)
#: A count that says it is at least 0 and below any other, and whose products are small.
SMALL_COUNT = (
    "class B(int):\n"
    "    def __ge__(self, other):\n        return True\n"
    "    def __lt__(self, other):\n        return True\n"
    "    def __mul__(self, other):\n        return 0\n"
)

INT_OPERATORS = {
    "bool-shift": "True << 10**11",
    "subclass-shifted": SUBCLASS + "B(1) << 10**11",
    "shift-by-a-subclass": SUBCLASS + "1 << B(10**11)",
    "subclass-power": SUBCLASS + "B(3) ** 10**10",
    "power-of-a-subclass-exponent": SUBCLASS + "10 ** B(10**10)",
    "pow-builtin-of-a-subclass": SUBCLASS + "pow(B(10), 10**10)",
    "subclass-products-in-a-loop": SUBCLASS + "x = B(10**250000)\nwhile True:\n    x = B(x * x)",
    "inplace-bool-shift": "x = True\nx <<= 10**11",
    "inplace-subclass-power": SUBCLASS + "x = B(10)\nx **= 10**10",
    "inplace-subclass-products-in-a-loop": SUBCLASS + "x = B(10**250000)\nwhile True:\n    x *= B(x)",
    "inplace-bool-shift-on-an-item": "d = {'n': True}\nd['n'] <<= 10**11",
    "inplace-subclass-shift-on-an-attribute": SUBCLASS + "class Box:\n    pass\nb = Box()\nb.n = B(1)\nb.n <<= 10**11",
    "own-shift-declines-then-ints-shift": (
        "class D(int):\n    def __lshift__(self, n):\n        return NotImplemented\nD(1) << 10**11"
    ),
    "own-power-declines-then-ints-power": (
        "class D(int):\n    def __pow__(self, n):\n        return NotImplemented\nD(10) ** 10**10"
    ),
    "own-reflected-shift-declines-then-ints-shift": (
        "class R(int):\n    def __rlshift__(self, n):\n        return NotImplemented\n1 << R(10**11)"
    ),
    "own-inplace-shift-declines-then-ints-shift": (
        "class D(int):\n    def __ilshift__(self, n):\n        return NotImplemented\nx = D(1)\nx <<= 10**11"
    ),
}


@pytest.mark.parametrize("code", INT_OPERATORS.values(), ids=INT_OPERATORS.keys())
def test_int_operators_on_bools_and_subclasses_keep_the_size_caps(code, attack):
    error = attack(code, control="exhausts")
    assert error.error_type == "SizeLimitError", error.message


LYING_COUNTS = {
    "repetition": LIAR + "'a' * B(10**12)",
    "repetition-by-a-left-count": LIAR + "B(10**12) * [0]",
    "bytes": LIAR + "bytes(B(10**12))",
    "str-padding": LIAR + "'a'.ljust(B(10**12))",
    "replace-count": SMALL_COUNT + "('ab' * 4_000_000).replace('', 'x' * 300, B(10**9))",
    "factorial": LIAR + "import math\nmath.factorial(B(10**8))",
    "round-digits": LIAR + "round(10, B(-10**9))",
    "index-answering-with-a-subclass": (
        LIAR + "class C:\n    def __index__(self):\n        return B(10**12)\n"
        "    def __rmul__(self, other):\n        return NotImplemented\n'a' * C()"
    ),
    "len-answering-with-a-subclass": (
        LIAR + "class C:\n    def __len__(self):\n        return B(10**12)\n"
        "    def __iter__(self):\n        return iter([])\nlist(C())"
    ),
}


@pytest.mark.parametrize("code", LYING_COUNTS.values(), ids=LYING_COUNTS.keys())
def test_a_subclass_cannot_answer_for_the_size_its_int_value_builds(code, attack):
    error = attack(code, control="exhausts")
    assert error.error_type == "SizeLimitError", error.message


OPERATOR_FUNCTIONS = {
    "lshift": "import operator\noperator.lshift(1, 10**11)",
    "lshift-imported-by-name": "from operator import lshift\nlshift(1, 10**11)",
    "pow": "import operator\noperator.pow(10, 10**10)",
    "mul-of-ints": "import operator\nx = 10**250000\nwhile True:\n    x = operator.mul(x, x)",
    "mul-repeating": "import operator\noperator.mul('a', 10**12)",
    "ilshift": "import operator\noperator.ilshift(1, 10**11)",
    "ipow": "import operator\noperator.ipow(10, 10**10)",
    "imul": "import operator\noperator.imul([0], 10**12)",
    "add": "import operator\ns = 'x' * 1_000_000\nwhile True:\n    s = operator.add(s, s)",
    "iadd": "import operator\ns = [0] * 1_000_000\nwhile True:\n    s = operator.iadd(s, s)",
    "concat": "import operator\ns = b'x' * 1_000_000\nwhile True:\n    s = operator.concat(s, s)",
    "iconcat": "import operator\ns = [0] * 1_000_000\nwhile True:\n    s = operator.iconcat(s, s)",
    "mod": "import operator\noperator.mod('%2000000000d', 1)",
    "imod": "import operator\noperator.imod(bytearray(b'%2000000000d'), 1)",
    "reduce-with-lshift": "import functools, operator\nfunctools.reduce(operator.lshift, [1, 10**11])",
    "math-prod": "import math\nmath.prod([10**250000] * 10_000)",
    "math-prod-repeating": "import math\nmath.prod([10**12], start='a')",
}


@pytest.mark.parametrize("code", OPERATOR_FUNCTIONS.values(), ids=OPERATOR_FUNCTIONS.keys())
def test_functions_that_apply_sized_operators_keep_the_size_caps(code, attack):
    error = attack(code, control="exhausts")
    assert error.error_type == "SizeLimitError", error.message


def test_math_lcm_is_sized_at_each_step(attack):
    """One C call of ``math.lcm`` over a million ints runs for minutes, where no timer reaches it."""
    error = attack("import math\nmath.lcm(*range(1, 10**6))", control="exhausts", max_int_bits=10_000)
    assert error.error_type == "SizeLimitError", error.message
