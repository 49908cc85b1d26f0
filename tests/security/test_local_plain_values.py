"""Attacks on the guard-free reads of plain values (`type_inference`).

The compiler drops the attribute guard on ``x.copy`` when `x` certainly holds a
str, bytes, list, dict, set, frozenset or tuple. Each attack here makes `x` hold
the raw ``shutil`` module instead, by a route the inference must see, and calls
``x.copy(SOURCE, CANARY)``: unguarded, that would create the canary. The guard
must stop it with its own refusal. A worker cannot be sent a module, so these run in process.
"""

from __future__ import annotations

import shutil

import pytest

from codeward.executors.local.policy import PLAIN_METHODS
from tests.security.conftest import in_process_only

pytestmark = pytest.mark.timeout(60)

PAYLOAD = f"x.copy({__file__!r}, 'CANARY')"
HOST = {"m": shutil}  # a raw machine module, as a careless host might send it
assert "copy" in PLAIN_METHODS, "the payload must use a name the inference can unguard"


def _refused(error) -> None:
    assert "not available" in error.message, error.message


REBINDINGS = {
    "global-in-block": "x = []\ndef f():\n    global x\n    x = m\nf()\n" + PAYLOAD,
    "nonlocal": "def outer():\n    x = []\n    def g():\n        nonlocal x\n        x = m\n    g()\n    "
    + PAYLOAD
    + "\nouter()",
    "nonlocal-defined-first": "def outer():\n    def g():\n        nonlocal x\n        x = m\n    x = []\n    g()\n    "
    + PAYLOAD
    + "\nouter()",
    "comprehension-walrus": "x = []\n[(x := m) for i in range(1)]\n" + PAYLOAD,
    "default-walrus": "x = []\ndef f(a=(x := m)):\n    pass\n" + PAYLOAD,
    "for-target": "x = []\nfor x in [m]:\n    pass\n" + PAYLOAD,
    "with-target": "class C:\n    def __enter__(self):\n        return m\n    def __exit__(self, *exc):\n"
    "        return False\nx = []\nwith C() as x:\n    pass\n" + PAYLOAD,
    "match-capture": "x = []\nmatch m:\n    case x:\n        pass\n" + PAYLOAD,
    "augmented-non-plain": "class C:\n    def __radd__(self, other):\n        return m\nx = ()\nx += C()\n" + PAYLOAD,
    "tuple-target": "x = []\nx, y = m, 1\n" + PAYLOAD,
    "function-global": "def g():\n    global x\n    x = m\ndef f():\n    global x\n    x = []\n    g()\n    "
    + PAYLOAD
    + "\nf()",
    "comprehension-variable": f"x = []\n[{PAYLOAD} for x in [m]]",
    "class-body": "x = []\nclass A:\n    x = m\n    " + PAYLOAD,
}


@pytest.mark.parametrize("code", REBINDINGS.values(), ids=REBINDINGS.keys())
@in_process_only
def test_a_rebound_name_keeps_its_guard(code, attack):
    _refused(attack(code, variables=HOST))


@in_process_only
def test_a_global_declared_in_an_earlier_block_keeps_the_guard(attack):
    _refused(attack("x = []\nf()\n" + PAYLOAD, variables=HOST, before="def f():\n    global x\n    x = m"))


LATER_REBINDERS = {
    "generator-walrus": "gen = ((x := m) for i in range(1))",
    "nested-generator-walrus": "gens = [((x := m) for i in range(1))]\ngen = gens[0]",
    "generator-walrus-in-a-list-comprehension": "gen = ([(x := m) for j in range(1)] for i in range(1))",
}


@pytest.mark.parametrize("before", LATER_REBINDERS.values(), ids=LATER_REBINDERS.keys())
@in_process_only
def test_a_generator_from_an_earlier_block_that_rebinds_by_walrus_keeps_the_guard(before, attack):
    """A walrus in a module-level generator binds the module's name whenever the generator runs:
    in a later block, between that block's own plain binding and its use, with no ``global``."""
    _refused(attack("x = []\nnext(gen)\n" + PAYLOAD, variables=HOST, before=before))


@in_process_only
def test_a_block_run_again_after_a_generator_that_rebinds_its_name_is_compiled_again(attack):
    """The compiled code of a block seen before is kept (`block_cache`): run first when no walrus
    could rebind `x`, its `x.copy` was compiled without the guard. A generator made later rebinds
    `x` between the block's binding and its use, so the same text must not run that code again."""
    block = "x = []\nif next(gen):\n    " + PAYLOAD
    earlier = ["gen = iter([0])", block, "gen = ((x := m) for i in range(1))"]
    _refused(attack(block, variables=HOST, before=earlier))


CONDITIONAL = {
    "if": "if len('') > 0:\n    x = []\n" + PAYLOAD,
    "loop-body": "for i in range(0):\n    x = []\n" + PAYLOAD,
    "try-body": "try:\n    x = [1 / 0]\nexcept ZeroDivisionError:\n    pass\n" + PAYLOAD,
    "use-before-binding": PAYLOAD + "\nx = []",
    "same-statement": f"x = [{PAYLOAD}]",
}


@pytest.mark.parametrize("code", CONDITIONAL.values(), ids=CONDITIONAL.keys())
@in_process_only
def test_a_name_not_yet_certainly_bound_keeps_its_guard(code, attack):
    """`x` still holds what the host sent (the raw module) where the binding may not have run."""
    _refused(attack(code, variables={"x": shutil}))


@in_process_only
def test_a_value_from_an_earlier_block_keeps_its_guard(attack):
    _refused(attack(PAYLOAD + "\nx = []", variables=HOST, before="x = m"))


DEFERRED = {
    "generator": "x = []\ngen = (" + PAYLOAD + " for i in range(1))",
    "lambda": "x = []\nf = lambda: " + PAYLOAD,
    "function": "x = []\ndef f():\n    return " + PAYLOAD,
}


@pytest.mark.parametrize("before", DEFERRED.values(), ids=DEFERRED.keys())
@in_process_only
def test_code_that_runs_after_a_later_rebinding_keeps_its_guard(before, attack):
    """A generator, lambda or function runs when called, maybe after another block rebound `x`."""
    run_it = "list(gen)" if before.startswith("x = []\ngen") else "f()"
    _refused(attack("x = m\n" + run_it, variables=HOST, before=before))


@pytest.mark.parametrize(
    "code",
    [
        "x = '{0.__class__}'\nx.format(1)",
        "x = '{0.__class__}'\ny = x.format\ny(1)",
        "f'{{0.__class__}}'.format(1)",
        "x = '{a.__class__}'\nx.format_map({'a': 1})",
    ],
    ids=["format", "format-held", "fstring-format", "format-map"],
)
def test_str_format_on_a_plain_string_stays_guarded(code, attack):
    error = attack(code)
    assert "__class__" in error.message


@pytest.mark.parametrize(
    "code",
    [
        "s = 'a'\ns.ljust(10**11)",
        "'a'.center(10**11)",
        "s = b'a'\ns.zfill(10**11)",
        "f'{1}'.rjust(10**11)",
        "s = '\\t'\ns.expandtabs(2_000_000_000)",
        "s = 'a'\ns.replace('a', 'b' * 9_000_000).replace('b', 'c' * 9_000_000)",
    ],
    ids=["ljust", "center", "zfill", "fstring-rjust", "expandtabs", "replace"],
)
def test_sizing_str_methods_on_plain_values_stay_guarded(code, attack):
    error = attack(code, control="exhausts")
    assert "the sandbox allows" in error.message
