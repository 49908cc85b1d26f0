"""Reads of a plain value's methods compile without the attribute guard, and only those.

The attacks on the inference are in tests/security/test_local_plain_values.py;
these tests show where the guard is dropped and that dropping it is sound.
"""

from __future__ import annotations

from types import CodeType, ModuleType

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.local.block_compiler import compile_block
from codeward.executors.local.imports import machine_objects
from codeward.executors.local.policy import FORMAT_METHODS, PLAIN_METHODS, SIZING_METHODS
from codeward.executors.local.type_inference import PLAIN_TYPES


def _guarded(source: str, declared_global: set[str] | None = None) -> bool:
    """Whether any code object compiled from `source` calls the attribute guard."""
    pending = [compile_block(source, "<test>", declared_global=declared_global)]
    while pending:
        code = pending.pop()
        if "_getattr_" in code.co_names:
            return True
        pending.extend(const for const in code.co_consts if isinstance(const, CodeType))
    return False


UNGUARDED = {
    "list-display": "[].append(1)",
    "str-constant": "','.join(['a'])",
    "bytes-constant": "b'a'.hex()",
    "fstring": "f'{1}'.upper()",
    "dict-display": "{}.get(1)",
    "set-display": "{1}.add(2)",
    "tuple-display": "(1, 2).count(1)",
    "comprehension": "[i for i in range(3)].copy()",
    "name": "x = []\nx.append(1)",
    "chained-targets": "x = y = []\ny.append(1)",
    "annotated": "x: list = []\nx.append(1)",
    "augmented-plain": "x = ''\nx += 'a'\nx.upper()",
    "loop-after-binding": "x = []\nfor i in range(3):\n    x.append(i)",
    "rebound-plainly": "x = []\nif len(x) == 0:\n    x = {}\nx.copy()",
    "in-list-comprehension": "x = [1]\n[x.count(i) for i in range(3)]",
    "function-local": "def f():\n    x = {}\n    for i in range(3):\n        x.get(i)\nf()",
    "method-local": "class A:\n    def m(self):\n        x = []\n        x.append(1)",
}


@pytest.mark.parametrize("source", UNGUARDED.values(), ids=UNGUARDED.keys())
def test_methods_of_plain_values_skip_the_guard(source):
    assert not _guarded(source)


GUARDED = {
    "format": "x = 'a'\nx.format()",
    "sizing": "'a'.ljust(3)",
    "dunder-name": "[].__len__",
    "not-a-plain-method": "x = []\nx.system",
    "parameter": "def f(x):\n    x.append(1)",
    "before-binding": "x.append(1)\nx = []",
    "same-statement": "x = [x.append]",
    "conditional": "if len('') == 0:\n    x = []\nx.append(1)",
    "generator": "x = []\ng = (x.append(i) for i in range(3))",
    "lambda": "x = []\nf = lambda: x.append(1)",
    "nested-function": "x = []\ndef f():\n    x.append(1)",
    "class-body": "x = []\nclass A:\n    x.append(1)",
    "comprehension-variable": "x = []\n[x.append(1) for x in [[]]]",
    "for-target": "x = []\nfor x in [[]]:\n    x.append(1)",
    "with-target": "x = []\nwith open() as x:\n    pass\nx.append(1)",
    "except-target": "x = []\ntry:\n    pass\nexcept ValueError as x:\n    pass\nx.append(1)",
    "import": "x = []\nimport json as x\nx.append(1)",
    "match-capture": "x = []\nmatch 1:\n    case x:\n        pass\nx.append(1)",
    "walrus": "x = []\n(x := [])\nx.append(1)",
    "del": "x = []\ndel x\nx.append(1)",
    "call-result": "x = []\nx = list()\nx.append(1)",
    "augmented-call": "x = []\nx += list()\nx.append(1)",
    "global-in-block": "x = []\ndef f():\n    global x\nx.append(1)",
    "nonlocal": "def f():\n    x = []\n    def g():\n        nonlocal x\n    x.append(1)",
    "global-in-function": "def f():\n    global x\n    x = []\n    x.append(1)",
}


@pytest.mark.parametrize("source", GUARDED.values(), ids=GUARDED.keys())
def test_other_reads_keep_the_guard(source):
    assert _guarded(source)


def test_a_global_declared_in_an_earlier_block_keeps_the_guard():
    assert not _guarded("x = []\nx.append(1)", declared_global=set())
    assert _guarded("x = []\nx.append(1)", declared_global={"x"})


def test_the_executor_threads_declared_globals_into_the_inference():
    with LocalExecutor(isolation="in_process") as executor:
        executor.run("def f():\n    global x\n    x = 1")
        assert _guarded("x = []\nx.append(1)", declared_global=executor._interpreter._declared_global)


def test_a_walrus_in_an_earlier_block_keeps_the_guard_on_its_name():
    """A generator kept from that block may bind the name again whenever it is resumed."""
    with LocalExecutor(isolation="in_process") as executor:
        assert not _guarded("x = []\nx.append(1)", declared_global=executor._interpreter._declared_global)
        executor.run("gen = ((x := i) for i in range(1))")
        assert _guarded("x = []\nx.append(1)", declared_global=executor._interpreter._declared_global)
        assert not _guarded("y = []\ny.append(1)", declared_global=executor._interpreter._declared_global)


def test_plain_methods_are_what_the_guard_would_pass():
    """Every unguarded name, read from a value of each plain type, is neither a module nor an
    object of the machine, nor a name the guard treats specially."""
    machine = machine_objects()
    samples = ["a", b"a", [1], {1: 2}, {1}, frozenset({1}), (1,)]
    assert {type(sample) for sample in samples} == set(PLAIN_TYPES)
    assert not PLAIN_METHODS & (FORMAT_METHODS | SIZING_METHODS | {"register"})
    for sample in samples:
        for name in PLAIN_METHODS:
            value = getattr(sample, name, None)
            assert type(value) is not ModuleType and id(value) not in machine, (type(sample), name)


def test_unguarded_methods_behave_as_in_python():
    with LocalExecutor() as executor:
        code = "words = []\nfor i in range(3):\n    words.append(f'w{i}'.upper())\n','.join(words), {}.get(1, 2)"
        assert executor.run(code).output == ("W0,W1,W2", 2)
