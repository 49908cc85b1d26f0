"""Attacks through the special methods the code may define on its own classes.

A special method runs as the code's own (compiled by the policy: ticked, guarded),
but C code calls it where no guard stands, and reads its answer: ``__index__`` as
a count (``'a' * n``, ``bytes(n)``, ``str.ljust``), ``__len__`` and
``__length_hint__`` as the size to allocate (``tuple(x)``), a builtin sequence
subclass's ``__len__`` instead of its real length, and ``super()`` hands the code
the builtin's own ``__pow__``, ``__format__``, ``__round__``. Each attack here does
its harm with no sandbox, and must meet a size cap, the operation budget or the
policy inside it.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(60)

HUGE_COUNT = "class Count:\n    def __index__(self):\n        return 10**10\n"
ANSWERS = {
    "index-repeats-a-str": HUGE_COUNT + "'a' * Count()",
    "index-repeats-a-list-from-the-left": HUGE_COUNT + "Count() * [0]",
    "index-repeats-in-place": HUGE_COUNT + "x = ['a']\nx *= Count()",
    "index-repeats-an-item-in-place": HUGE_COUNT + "d = {'s': 'a'}\nd['s'] *= Count()",
    "index-after-own-rmul-declines": (
        "class Count:\n"
        "    def __rmul__(self, other):\n"
        "        return NotImplemented\n"
        "    def __index__(self):\n"
        "        return 10**10\n"
        "'ab' * Count()"
    ),
    "index-sizes-bytes": HUGE_COUNT + "bytes(Count())",
    "index-sizes-bytearray": HUGE_COUNT + "bytearray(Count())",
    "index-pads-a-str": HUGE_COUNT + "'x'.ljust(Count())",
    "index-centers-bytes": HUGE_COUNT + "b'x'.center(Count())",
    "index-in-math-factorial": "import math\nclass Count:\n    def __index__(self):\n        return 10**8\nmath.factorial(Count())",
    "index-as-round-digits": "class Digits:\n    def __index__(self):\n        return -10**9\nround(7, Digits())",
    "len-hint-sizes-a-tuple": (
        "class Lying:\n"
        "    def __len__(self):\n"
        "        return 10**9\n"
        "    def __iter__(self):\n"
        "        return iter([])\n"
        "tuple(Lying())"
    ),
    "length-hint-sizes-a-tuple": (
        "class Lying:\n"
        "    def __length_hint__(self):\n"
        "        return 10**9\n"
        "    def __iter__(self):\n"
        "        return iter([])\n"
        "tuple(Lying())"
    ),
    "len-a-decorator-replaced-sizes-a-tuple": (
        "def lying(method):\n"
        "    return lambda self: 10**9\n"
        "class Lying:\n"
        "    @lying\n"
        "    def __len__(self):\n"
        "        return 0\n"
        "    def __iter__(self):\n"
        "        return iter([])\n"
        "tuple(Lying())"
    ),
    "len-read-by-init-subclass-before-the-class-is-done": (
        "class Base:\n"
        "    def __init_subclass__(cls):\n"
        "        cls.made = tuple(cls())\n"
        "class Lying(Base):\n"
        "    def __len__(self):\n"
        "        return 10**9\n"
        "    def __iter__(self):\n"
        "        return iter([])\n"
    ),
    "len-of-a-list-subclass-hides-a-repetition": (
        "class Short(list):\n    def __len__(self):\n        return 0\nShort([0] * 1000) * 2_000_000"
    ),
    "len-of-a-str-subclass-hides-a-concatenation": (
        "class Short(str):\n"
        "    def __len__(self):\n"
        "        return 0\n"
        "s = Short('x' * 5_000_000)\n"
        "while True:\n"
        "    s = Short(s + s)"
    ),
    "count-of-a-str-subclass-hides-a-replace": (
        "class Few(str):\n    def count(self, *args):\n        return 0\nFew('ab' * 4_000_000).replace('a', 'x' * 300)"
    ),
    "len-of-a-userlist-subclass-hides-a-repetition": (
        "import collections\n"
        "class Short(collections.UserList):\n"
        "    def __len__(self):\n"
        "        return 0\n"
        "Short([0] * 1000) * 10**7"
    ),
    "len-of-a-deque-subclass-hides-a-repetition": (
        "import collections\n"
        "class Short(collections.deque):\n"
        "    def __len__(self):\n"
        "        return 0\n"
        "Short([0] * 1000) * 10**7"
    ),
    "round-digits-of-an-int": "round(7, -10**9)",
}


@pytest.mark.parametrize("code", ANSWERS.values(), ids=ANSWERS.keys())
def test_answers_c_code_reads_as_sizes_are_capped(code, attack):
    error = attack(code, control="exhausts")
    assert "the sandbox allows" in error.message, error.message


BUILTIN_METHODS = {
    "pow-of-an-int-subclass": "class Big(int):\n    def grow(self):\n        return super().__pow__(10**9)\nBig(10).grow()",
    "shift-of-an-int-subclass": "class Big(int):\n    def grow(self):\n        return super().__lshift__(10**11)\nBig(1).grow()",
    "format-of-a-str-subclass": (
        "class Text(str):\n    def pad(self):\n        return super().__format__('>' + str(10**10))\nText('a').pad()"
    ),
    "round-of-an-int-subclass": "class Big(int):\n    def r(self):\n        return super().__round__(-10**9)\nBig(7).r()",
    "mul-of-a-list-subclass": "class Many(list):\n    def grow(self):\n        return super().__mul__(10**10)\nMany([0]).grow()",
}


@pytest.mark.parametrize("code", BUILTIN_METHODS.values(), ids=BUILTIN_METHODS.keys())
def test_builtin_special_methods_that_size_their_result_cannot_be_read(code, attack):
    error = attack(code, control="exhausts")
    assert error.error_type == "CodeRefused", error.message


ENDLESS = {
    "next-in-list": (
        "class Ones:\n    def __iter__(self):\n        return self\n    def __next__(self):\n        return 1\nlist(Ones())"
    ),
    "missing-of-a-dict-subclass": (
        "class Table(dict):\n    def __missing__(self, key):\n        while True:\n            pass\nTable()[0]"
    ),
    "hash-in-a-set": "class Key:\n    def __hash__(self):\n        while True:\n            pass\n{Key()}",
    "eq-in-a-dict": (
        "class Key:\n"
        "    def __hash__(self):\n"
        "        return 1\n"
        "    def __eq__(self, other):\n"
        "        while True:\n"
        "            pass\n"
        "{Key(): 1, Key(): 2}"
    ),
    "format-in-an-f-string": "class Shown:\n    def __format__(self, spec):\n        while True:\n            pass\nf'{Shown()}'",
    "index-in-a-slice": (
        "class At:\n    def __index__(self):\n        while True:\n            pass\n[1, 2, 3][At():]"
    ),
    "lt-in-sorted": (
        "class Slow:\n    def __lt__(self, other):\n        while True:\n            pass\nsorted([Slow(), Slow()])"
    ),
    "exit-of-a-with": (
        "class Ctx:\n"
        "    def __enter__(self):\n"
        "        return self\n"
        "    def __exit__(self, *info):\n"
        "        while True:\n"
        "            pass\n"
        "with Ctx():\n"
        "    pass"
    ),
}


ENDLESS["except-star-around-a-loop"] = "try:\n    while True:\n        pass\nexcept* BaseException:\n    pass"


@pytest.mark.parametrize("code", ENDLESS.values(), ids=ENDLESS.keys())
def test_special_methods_c_code_calls_spend_the_budget(code, attack):
    error = attack(code, control="exhausts", max_operations=200_000)
    assert "operations" in error.message, error.message


def test_get_type_hints_does_not_evaluate_a_string_annotation(attack):
    code = (
        "import typing\n"
        "def f(x: \"__import__('pathlib').Path('CANARY').touch()\"):\n"
        "    pass\n"
        "class C:\n"
        "    y: \"__import__('pathlib').Path('CANARY').touch()\"\n"
        "typing.get_type_hints(f)"
    )
    error = attack(code)
    assert error.error_type == "SandboxViolation" and "evaluate" in error.message, error.message
