"""The block compiler's one walk: the policy and the instrumenting in a single pass over the tree."""

from __future__ import annotations

import ast
import sys
from collections import Counter

import pytest

from codeward.executors.local import syntax_nodes
from codeward.executors.local.block_compiler import CodeRefused, compile_block

#: A block with a little of everything the two used to walk separately: a class, a def with a
#: range loop, a comprehension, a lambda, try/except, an f-string with a spec, operators.
BLOCK = """
class Account:
    def __init__(self, owner):
        self.owner = owner
        self.total = 0
    def add(self, amount):
        self.total += amount
        return self.total

def squares(n):
    out = []
    for i in range(n):
        out.append(i * i + 1)
    return out

account = Account("ada")
for step in range(5):
    account.add(step % 3)
pairs = {k: v for k, v in zip("abc", squares(3))}
pick = lambda items: items[0]
try:
    value = pick([account.total, 2 ** 8])
except (IndexError, KeyError) as error:
    value = -1
text = f"{value:>8} {pairs['a']!r}"
text
"""


def test_the_policy_and_the_instrumenting_enter_each_node_once(monkeypatch):
    entered: Counter[int] = Counter()
    kept: list[ast.AST] = []  # ids stay unique while the nodes live
    real = syntax_nodes.transform_children

    def counting(transformer, node, leaves):
        entered[id(node)] += 1
        kept.append(node)
        return real(transformer, node, leaves)

    for name, module in list(sys.modules.items()):  # every walker that imported it, however named
        if name.startswith("codeward.") and getattr(module, "transform_children", None) is real:
            monkeypatch.setattr(module, "transform_children", counting)
    compile_block(BLOCK, "<block>")
    assert len(entered) > 50, "the walk went through the patched function"
    twice = [type(node).__name__ for node in kept if entered[id(node)] > 1]
    assert not twice, f"nodes walked more than once: {sorted(set(twice))}"


LOOPS_THE_INT_INFERENCE_TAKES = {
    "private-name": ("for _hidden in range(3):\n    y = 2 * 3\n", 'names starting with "_"'),
    "a-tool": ("for search in range(3):\n    y = 2 * 3\n", "'search' is a tool"),
    "range-itself": ("for range in range(3):\n    y = 2 * 3\n", "'range' cannot be redefined"),
}


def test_a_module_loop_whose_ints_are_inferred_skips_the_product_guard():
    """The control for the attacks below: such a loop takes the walk's own path for loops."""
    code = compile_block("for step in range(3):\n    y = step * 3\n", "<block>", frozenset({"search"}))
    assert "_mul_" not in code.co_names
    guarded = compile_block("for step in [0, 1]:\n    y = step * 3\n", "<block>", frozenset({"search"}))
    assert "_mul_" in guarded.co_names


@pytest.mark.parametrize("code, reason", LOOPS_THE_INT_INFERENCE_TAKES.values(), ids=LOOPS_THE_INT_INFERENCE_TAKES)
def test_the_target_of_a_loop_the_int_inference_takes_is_still_checked(code, reason):
    with pytest.raises(CodeRefused) as refused:
        compile_block(code, "<block>", frozenset({"search"}))
    assert reason in str(refused.value) and "Line 1" in str(refused.value)


def test_a_refused_block_adds_nothing_to_what_later_blocks_are_compiled_against():
    declared: set[str] = set()
    attributes: set[str] = set()
    block = "def bump():\n    global counter\n    counter = 1\nclass Box:\n    def put(self):\n        self.item = 1\n_x = 1"
    with pytest.raises(CodeRefused):
        compile_block(block, "<block>", frozenset(), declared, attributes)
    assert declared == set()
    compile_block(block.replace("_x", "x"), "<block>", frozenset(), declared, attributes)
    assert declared == {"counter"}


MATCH_IN_AN_INFERRED_LOOP = """
class Point:
    def __init__(self, x):
        self.x = x
seen = []
for i in range(3):
    y = i * 2
    match Point(y):
        case Point(x=0):
            seen.append("zero")
        case _:
            seen.append(y)
else:
    match Point(5):
        case Point(x=5):
            seen.append("five")
seen
"""


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_match_whose_patterns_are_hoisted_runs_in_a_loop_the_int_inference_takes(isolation):
    """The loop's body is walked statement by statement there; the policy gives a ``match`` back as
    the statements that read its patterns' classes first, and the match: all of them stand in its place."""
    from codeward.executors import LocalExecutor

    plain: dict[str, object] = {}
    exec(MATCH_IN_AN_INFERRED_LOOP, plain)
    assert plain["seen"] == ["zero", 2, 4, "five"]
    code = compile_block(MATCH_IN_AN_INFERRED_LOOP, "<block>")
    assert "_mul_" not in code.co_names and "_match_class_" in code.co_names  # the path, and the hoisting
    with LocalExecutor(isolation=isolation) as sandbox:
        assert sandbox.run(MATCH_IN_AN_INFERRED_LOOP).output == plain["seen"]


AWAITS = {
    "loop-over-it": "for x in await fetch():\n    pass",
    "in-a-sum": "x = 2 + await fetch()",
    "in-a-product": "x = (await fetch()) * 3",
    "in-an-inferred-loop": "for i in range(3):\n    x = i * 2 + await fetch()",
    "in-a-lambda": "f = lambda: await fetch()",
    "comprehension-over-it": "xs = [i for i in await fetch()]",
    "in-a-format-spec": "w = 3\nx = f'{await fetch():{w}}'",
    "added-in-place": "total = 0\ntotal += await fetch()",
    "in-place-other-operator": "total = 1\ntotal %= await fetch()",
    "as-an-index": "xs = [1]\nx = xs[await fetch()]",
    "deleted-attribute": "del (await fetch()).a",
}


@pytest.mark.parametrize("code", AWAITS.values(), ids=AWAITS)
def test_an_await_anywhere_is_refused_with_the_blocks_other_problems(code):
    """RestrictedPython takes a refused ``await`` out of the tree; the walk's work on its parent then
    found a field gone. The policy keeps it in place, so the block is refused, every problem named."""
    with pytest.raises(CodeRefused) as refused:
        compile_block(code + "\n_hidden = 1", "<block>")
    report = str(refused.value)
    assert "Await statements are not allowed" in report and "'_hidden'" in report, report


@pytest.mark.parametrize(
    "code",
    ["g = (1 async for i in fetch())", "g = ((i async for i in fetch()) for j in range(2))"],
    ids=["generator", "nested-generator"],
)
def test_an_async_generator_expression_is_refused_as_async_code(code):
    """CPython compiles ``async for`` in a generator expression outside an async function (it fails
    only when iterated); the sandbox refuses it when it compiles, as it does any async code."""
    compile(code, "<control>", "exec")  # control: CPython itself accepts it
    with pytest.raises(CodeRefused, match="async code is not supported"):
        compile_block(code, "<block>")


def test_what_the_instrumenting_trips_over_in_a_refused_block_is_the_refusal(monkeypatch):
    from codeward.executors.local.instrumenter import Instrumenter

    def tripping(self, node):
        raise AttributeError("a field the refused code took away")

    # In the walk's table of visitors, which it fills once per class: patching the class would stay there after.
    monkeypatch.setitem(syntax_nodes.visitors_of(Instrumenter), ast.While, tripping)
    with pytest.raises(CodeRefused, match="names starting with"):
        compile_block("_hidden = 1\nwhile True:\n    break", "<block>")
    with pytest.raises(AttributeError):  # control: in a block the policy accepted, it is a fault of ours
        compile_block("hidden = 1\nwhile True:\n    break", "<block>")


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_block_nested_past_the_walks_depth_is_refused_and_the_sandbox_stays(isolation):
    from codeward.executors import LocalExecutor
    from codeward.executors.base import ExecutionError

    with LocalExecutor(isolation=isolation) as sandbox:
        sandbox.run("kept = 41")
        assert sandbox.run("x = " + " + ".join(["1"] * 300) + "\nx").output == 300  # as deep as the two walks took
        with pytest.raises(ExecutionError) as refused:
            sandbox.run("x = " + " + ".join(["1"] * 3000))
        assert "nests too deeply" in refused.value.message, refused.value.message
        with pytest.raises(ExecutionError, match="Await statements are not allowed"):
            sandbox.run("total = 0\ntotal += await fetch()")
        assert sandbox.run("kept + 1").output == 42


def test_a_format_width_of_thousands_of_digits_is_left_to_the_format_guard():
    """``int()`` of more than 4,300 digits raises; the width is guarded where the code runs instead."""
    code = compile_block("y = 1\nx = f'{y:>" + "9" * 5_000 + "}'", "<block>")
    assert "_format_" in code.co_names
    assert "_format_" not in compile_block("y = 1\nx = f'{y:>12}'", "<block>").co_names
