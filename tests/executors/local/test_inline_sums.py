"""Sums in a def's body settle numbers inline (`instrumenter.number_sum`) and call the size
guard for anything else; elsewhere they call it. The attacks on the inline form (sequences
doubled in a function) are in tests/security/test_local_resources.py; what sums compute is
compared with CPython by the differential corpus.
"""

from __future__ import annotations

import time
from types import CodeType

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.local.block_compiler import compile_block


def code_objects(code: CodeType) -> dict[str, CodeType]:
    found, pending = {"<block>": code}, [code]
    while pending:
        for item in pending.pop().co_consts:
            if isinstance(item, CodeType):
                found[item.co_name] = item
                pending.append(item)
    return found


def test_a_sum_in_a_def_is_inline_and_elsewhere_calls_the_guard() -> None:
    source = (
        "def total(a, b):\n    return a + b\n"
        "double = lambda a: a + a\n"
        "def listed(items, w):\n    return [item + w for item in items]\n"
        "x, y = 1, 2\nz = x + y\n"
    )
    codes = code_objects(compile_block(source, "<block>"))
    assert "_augend_" in codes["total"].co_varnames
    comprehension = "<listcomp>" if "<listcomp>" in codes else "listed"  # 3.12 inlines comprehensions (PEP 709)
    for name in ("<lambda>", comprehension, "<block>"):
        assert "_augend_" not in codes[name].co_varnames, name
        assert "_add_" in codes[name].co_names, name


def test_a_running_total_in_a_def_is_inline_and_elsewhere_calls_the_guard() -> None:
    """``total += value`` on a name: the loop's running total, settled as ``total + value`` is."""
    source = (
        "def total(items):\n    s = 0.0\n    for item in items:\n        s += len(item)\n    return s\n"
        "def listed(items):\n    s = 0\n    for item in items:\n        s += [item][0]\n    return s\n"
        "s = 0.0\nfor item in 'ab':\n    s += len(item)\n"
    )
    codes = code_objects(compile_block(source, "<block>"))
    assert "_augend_" in codes["total"].co_varnames
    assert "_augend_" not in codes["listed"].co_varnames and "_iadd_" in codes["listed"].co_names  # not small
    assert "_augend_" not in codes["<block>"].co_varnames and "_iadd_" in codes["<block>"].co_names


def test_a_sum_whose_right_side_holds_more_than_names_and_calls_calls_the_guard() -> None:
    codes = code_objects(compile_block("def f(a, b):\n    return a + [x for x in b]\n", "<block>"))
    assert "_augend_" not in codes["f"].co_varnames and "_add_" in codes["f"].co_names


def test_nested_sums_do_not_double_the_code_at_each_level() -> None:
    """The right side is written twice only when small, never when it holds a sum made inline."""
    nested = "x"
    for _ in range(40):
        nested = f"x + same({nested})"
    started = time.perf_counter()
    compile_block(f"def same(v):\n    return v\ndef f(x):\n    return {nested}\n", "<block>")
    assert time.perf_counter() - started < 2


def test_a_product_in_a_def_is_inline_and_elsewhere_calls_the_guard() -> None:
    """`instrumenter.number_product`: in a def's body only, and only where its right side holds no
    product made inline (which would rebind the locals the outer one reads after it)."""
    source = (
        "def times(a, b):\n    return a * b\n"
        "def nested(a, b, c):\n    return a * (b * c)\n"
        "triple = lambda a: a * 3\n"
        "x, y = 1, 2\nz = x * y\n"
    )
    codes = code_objects(compile_block(source, "<block>"))
    assert "_factor_" in codes["times"].co_varnames and "_mul_" in codes["times"].co_names
    assert "_mul_" in codes["<lambda>"].co_names and "_factor_" not in codes["<lambda>"].co_varnames
    assert "_factor_" not in codes["<block>"].co_varnames and "_mul_" in codes["<block>"].co_names
    with LocalExecutor(isolation="in_process") as executor:  # an outer product inline would read b as a
        assert executor.run(source + "nested(2.5, 3, 4), nested(3, 2.5, 4), (2 * 3) * 4.0").output == (
            30.0,
            30.0,
            24.0,
        )


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_inline_sums_give_what_the_operator_gives(isolation: str) -> None:
    code = (
        "class Right:\n    def __radd__(self, other):\n        return ('radd', other)\n"
        "class Number(int):\n    def __add__(self, other):\n        return 'own add'\n"
        "def add(a, b):\n    return a + b\n"
        "def nested(a, b):\n    return a + (b + (a + b))\n"
        "def grown(a, b):\n    same = a\n    a += b\n    return a, same is a\n"
        "errors = []\n"
        "try:\n    add(1, 'a')\nexcept TypeError as error:\n    errors.append(str(error))\n"
        "try:\n    grown(1.0, None)\nexcept TypeError as error:\n    errors.append(str(error))\n"
        "class Counter:\n    def __init__(self):\n        self.n = 1\n    def bump(self, v):\n        self.n += v\n"
        "try:\n    Counter().bump('a')\nexcept TypeError as error:\n    errors.append(str(error))\n"
        "(add(1, 2), add(1.5, 2), add(True, 1), add(1, Right()), add(Number(1), 2), add('a', 'b'),"
        " add([1], [2]), nested(1, 2), nested('a', 'b'), grown(1, 2.5), grown([1], (2,)), grown('a', Right()),"
        " grown(Number(1), 2), errors)"
    )
    with LocalExecutor(isolation=isolation) as executor:
        output = executor.run(code).output
    assert output == (
        3,
        3.5,
        2,
        ("radd", 1),
        "own add",
        "ab",
        [1, 2],
        6,
        "abab",
        (3.5, False),
        ([1, 2], True),  # in place, as CPython's list += any iterable
        (("radd", "a"), False),
        ("own add", False),
        [  # a running total's error names += as CPython's does, in a def and on an attribute in a method
            "unsupported operand type(s) for +: 'int' and 'str'",
            "unsupported operand type(s) for +=: 'float' and 'NoneType'",
            "unsupported operand type(s) for +=: 'int' and 'str'",
        ],
    )
