"""Which blocks run as a function with global names (`block_function`) and which stay module code.

That the two run alike is the differential corpus's work (`MODULE_SCOPE`); here, that the faster
form is taken for ordinary blocks and left for the blocks whose meaning it would change.
"""

from __future__ import annotations

import inspect

import pytest

from codeward.executors.local.block_compiler import compile_block


def is_function_body(source: str) -> bool:
    return bool(compile_block(source, "<block>").co_flags & inspect.CO_OPTIMIZED)


def test_an_ordinary_block_runs_as_a_function_named_as_module_code() -> None:
    code = compile_block("total = 0\nfor i in range(3):\n    total += i\ntotal", "<block>")
    assert code.co_flags & inspect.CO_OPTIMIZED
    assert code.co_name == "<module>"
    assert set(code.co_names) >= {"total", "i"}
    assert not code.co_varnames  # every name is global: nothing is left in the function's locals


MODULE_CODE = {
    "docstring": '"""A block."""\nx = 1',
    "global-statement": "global x\nx = 1",
    "annotated-name": "x: int = 1",
    "bare-annotation": "x: int",
    "dir": "x = 1\nnames = dir()",
    "locals": "x = 1\nnames = locals()",
    "vars": "x = 1\nnames = vars()",
}


@pytest.mark.parametrize("source", MODULE_CODE.values(), ids=MODULE_CODE.keys())
def test_a_block_whose_meaning_would_change_stays_module_code(source: str) -> None:
    assert not is_function_body(source)


def test_an_annotation_inside_a_function_or_class_does_not_keep_module_code() -> None:
    assert is_function_body("def f(x: int) -> int:\n    y: int = x\n    return y\nclass C:\n    z: int = 0")
