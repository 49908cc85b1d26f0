"""Programs made up by hypothesis attack the compile-time facts the local executor's fast paths rest on.

The fast paths drop the attribute guard where the compiler proves a name holds a plain value (a
list, a str...) or an instance of the code's own plain class. Each program here is one to three
blocks that bind ``x`` by every route Python has (plain values, the raw ``shutil`` module a careless
host sent, ``global`` in a function, a walrus in a comprehension or in a generator kept for a later
block, a loop target, a condition, ``del``, an instance of the code's class), in any order, and
then call ``x.copy(SOURCE, CANARY)``. Run by plain CPython (the control), a program writes the
canary exactly when ``x`` holds the module at that call; in the sandbox, no program may, whatever
the order of its bindings: either the guard refuses the read, or ``x`` held something harmless.
"""

from __future__ import annotations

import builtins
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, target
from hypothesis import strategies as st

from codeward.executors.base import ExecutionError
from tests.security.conftest import sandbox

pytestmark = pytest.mark.timeout(600)

#: The code's own plain class, whose instances' methods the fast paths call without the guard.
OWN_CLASS = "class Own:\n    def copy(self, source, target):\n        return None\n"
USE = "try:\n    x.copy(SOURCE, CANARY)\nexcept TypeError:\n    pass\n"

#: Statements that bind `x` (or set up a later binding), each a whole top-level statement.
STATEMENTS = [
    "x = []",
    "x = 'text'",
    "x = m",
    "x: list = []",
    "x = y = {}",
    "x = [] if flag else m",
    "if flag:\n    x = m",
    "for x in [m]:\n    pass",
    "[(x := m) for i in range(1)]",
    "gen = ((x := m) for i in range(1))",
    "gen = ((x := []) for i in range(1))",
    "gen = ([(x := m) for j in range(1)] for i in range(1))",
    "next(gen, None)",
    "def rebind():\n    global x\n    x = m",
    "rebind()",
    "x = Own()",
    "def keep():\n    return x.copy(SOURCE, CANARY)",
    "try:\n    keep()\nexcept (NameError, TypeError):\n    pass",
    "del x",
    "flag = True",
    "flag = False",
]

#: What the last block binds just before its use: the facts the fast paths would trust.
PLAIN_BINDINGS = ["x = []", "x = 'text'", "x: list = []", "x = y = {}", "x = Own()"]
#: What may run between that binding and the use: code kept from earlier blocks, or the block's own.
BETWEEN = ["next(gen, None)", "rebind()", "try:\n    keep()\nexcept (NameError, TypeError):\n    pass", "flag = False"]

statements = st.lists(st.sampled_from(STATEMENTS), min_size=1, max_size=4)
last_blocks = st.tuples(
    st.lists(st.sampled_from(STATEMENTS), max_size=2),
    st.sampled_from(PLAIN_BINDINGS),
    st.lists(st.sampled_from(BETWEEN + STATEMENTS), max_size=2),
).map(lambda parts: [*parts[0], parts[1], *parts[2]])
blocks = st.tuples(st.lists(statements, max_size=2), last_blocks).map(lambda parts: [*parts[0], parts[1]])


def _blocks(chosen: list[list[str]]) -> list[str]:
    """Each block's statements, the first defining `Own`, the last ending with the use (a NameError on it is fine)."""
    texts = ["\n".join(block) + "\n" for block in chosen]
    texts[0] = OWN_CLASS + texts[0]
    texts[-1] += "try:\n" + "".join(f"    {line}\n" for line in USE.splitlines()) + "except NameError:\n    pass\n"
    return texts


def _plain_cpython(texts: list[str], canary: Path) -> None:
    """The control: the same blocks in one namespace with the real builtins, no sandbox."""
    namespace = {"__builtins__": builtins, "m": shutil, "flag": True, "SOURCE": __file__, "CANARY": str(canary)}
    for text in texts:
        try:
            exec(compile(text, "<control>", "exec"), namespace)
        except Exception:
            pass


def _sandboxed(texts: list[str], canary: Path) -> None:
    with sandbox(isolation="in_process", timeout_seconds=5) as executor:
        executor.send_variables({"m": shutil, "flag": True, "SOURCE": __file__, "CANARY": str(canary)})
        for text in texts:
            try:
                executor.run(text)
            except ExecutionError:
                pass


@settings(
    max_examples=500,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(chosen=blocks)
def test_no_order_of_bindings_lets_a_guard_free_read_reach_the_module(chosen: list[list[str]], tmp_path: Path) -> None:
    texts = _blocks(chosen)
    canary = tmp_path / "canary"
    canary.unlink(missing_ok=True)
    _plain_cpython(texts, canary)
    target(float(canary.exists()), label="the control reached the module")  # steer towards programs that do
    canary.unlink(missing_ok=True)
    _sandboxed(texts, canary)
    assert not canary.exists(), "a fast path handed the raw module to the code:\n" + "\n---\n".join(texts)


def test_the_generated_programs_reach_the_module_in_plain_python(tmp_path: Path) -> None:
    """The routes are real: without the sandbox, each reaches the module from a list just bound."""
    routes = [
        ["x = []\ngen = ((x := m) for i in range(1))", "x = []\nnext(gen, None)"],
        ["def rebind():\n    global x\n    x = m", "x = []\nrebind()"],
        ["x = []\n[(x := m) for i in range(1)]"],
        ["x = []\nfor x in [m]:\n    pass"],
    ]
    for route in routes:
        canary = tmp_path / "canary"
        canary.unlink(missing_ok=True)
        _plain_cpython(_blocks([[text] for text in route]), canary)
        assert canary.exists(), route
        canary.unlink()
        _sandboxed(_blocks([[text] for text in route]), canary)
        assert not canary.exists(), route
