"""Attacks through augmented assignment (``x %= v``, ``d[k] <<= v``, ``self.a **= v``...).

Augmented assignment runs in place, as CPython does: the left operand's in-place special
method first (``__imod__``), then its plain one (``__mod__``), then the right operand's
reflected one (``__rmod__``), each called by C code where no guard stands. Those methods
are the code's own, compiled by the policy like the rest of it, and what they return is
no more trusted than any value: each attack here hides a forbidden step in one of them,
on every kind of target, and the sandbox must refuse it there. The operators that can grow
a value keep their size caps in the in-place form too.
"""

from __future__ import annotations

import shutil

import pytest

from tests.security.conftest import in_process_only
from tests.security.test_local_attribute_routes import Holder

pytestmark = pytest.mark.timeout(60)

#: Reaches the builtins through a function's globals and writes the canary with them.
ESCAPE = (
    "        g = getattr(victim, '__glo' + 'bals__')\n"
    "        b = g['__builtins__']\n"
    "        (b['open'] if isinstance(b, dict) else getattr(b, 'open'))('CANARY', 'w').close()\n"
)
VICTIM = "def victim():\n    pass\n"


def _sneaky(method: str, answer: str = "self") -> str:
    return VICTIM + f"class Sneaky:\n    def {method}(self, other):\n" + ESCAPE + f"        return {answer}\n"


DECLINES = "class Declines:\n    def __imod__(self, other):\n        return NotImplemented\n"

ESCAPES = {
    "imod-on-a-name": _sneaky("__imod__") + "x = Sneaky()\nx %= 3",
    "ilshift-on-a-name": _sneaky("__ilshift__") + "x = Sneaky()\nx <<= 1",
    "ipow-on-a-name-in-a-function": _sneaky("__ipow__") + "def f(x):\n    x **= 2\n    return x\nf(Sneaky())",
    "imod-on-an-item": _sneaky("__imod__") + "d = {'k': Sneaky()}\nd['k'] %= 3",
    "ilshift-on-an-item-read-before-the-value": _sneaky("__ilshift__") + "d = {'k': Sneaky()}\nd['k'] <<= len(d)",
    "imod-on-an-attribute": _sneaky("__imod__") + "class Box:\n    pass\nb = Box()\nb.a = Sneaky()\nb.a %= 3",
    "ilshift-on-self-in-a-method": (
        _sneaky("__ilshift__") + "class Holder:\n    def __init__(self):\n        self.a = Sneaky()\n"
        "    def bump(self):\n        self.a <<= 1\nHolder().bump()"
    ),
    "plain-mod-after-imod-declines": (
        VICTIM + "class Sneaky:\n    def __imod__(self, other):\n        return NotImplemented\n"
        "    def __mod__(self, other):\n" + ESCAPE + "        return self\nx = Sneaky()\nx %= 3"
    ),
    "reflected-rmod-of-the-right-operand": _sneaky("__rmod__") + DECLINES + "x = Declines()\nx %= Sneaky()",
    "reflected-rlshift-of-the-right-operand-on-an-int": _sneaky("__rlshift__") + "x = 1\nx <<= Sneaky()",
}


@pytest.mark.parametrize("code", ESCAPES.values(), ids=ESCAPES.keys())
def test_an_inplace_special_method_is_guarded_like_any_code(code, attack):
    error = attack(code)
    assert "__globals__" in error.message, error.message


#: A host object holding a function of the machine, as a careless host might send one.
HOST = {"h": Holder(shutil.copy)}
PAYLOAD = f"raw({__file__!r}, 'CANARY')"

HOST_OPERANDS = {
    "read-in-own-ilshift": (
        "class Acc:\n    def __ilshift__(self, other):\n        self.raw = other.tool\n        return self\n"
        "a = Acc()\na <<= h\nraw = a.raw\n"
    ),
    "read-in-own-rmod-on-an-item": (
        "class Taker:\n    def __rmod__(self, other):\n        return other.tool\nd = {'k': h}\nd['k'] %= Taker()\n"
        "raw = d['k']\n"
    ),
    "read-in-own-imod-on-self": (
        "class Acc:\n    def __imod__(self, other):\n        return other.tool\n"
        "class Box:\n    def __init__(self):\n        self.a = Acc()\n    def take(self):\n        self.a %= h\n"
        "        return self.a\nraw = Box().take()\n"
    ),
}


@pytest.mark.parametrize("code", HOST_OPERANDS.values(), ids=HOST_OPERANDS.keys())
@in_process_only
def test_a_host_operand_of_an_inplace_method_is_read_through_the_guard(code, attack):
    """`h.tool` is shutil.copy, which the read guard refuses wherever it is found."""
    error = attack(code + PAYLOAD, variables=HOST)
    assert "belongs to the module 'shutil'" in error.message, error.message


GROWTH = {
    "shift-on-a-name": "x = 1\nx <<= 10**12",
    "shift-on-an-item": "d = {'n': 1}\nd['n'] <<= 10**12",
    "power-on-an-attribute": "class Box:\n    pass\nb = Box()\nb.n = 7\nb.n **= 10**10",
    "percent-width-on-a-name": "s = '%1000000000000d'\ns %= 5",
    "percent-width-of-a-str-subclass": "class Text(str):\n    pass\ns = Text('%1000000000000d')\ns %= 5",
    "percent-width-on-bytes-in-an-item": "d = {'b': b'%1000000000000d'}\nd['b'] %= 5",
    "percent-width-of-a-bytearray": "x = bytearray(b'%1000000000000d')\nx %= 5",
    "shift-inside-own-ilshift": (
        "class Big:\n    def __ilshift__(self, n):\n        return 1 << n\nx = Big()\nx <<= 10**12"
    ),
    "shift-inside-own-lshift-after-ilshift-declines": (
        "class Big:\n    def __ilshift__(self, n):\n        return NotImplemented\n"
        "    def __lshift__(self, n):\n        return 1 << n\nx = Big()\nx <<= 10**12"
    ),
}


@pytest.mark.parametrize("code", GROWTH.values(), ids=GROWTH.keys())
def test_inplace_operators_keep_the_size_caps(code, attack):
    error = attack(code, control="exhausts")
    assert error.error_type == "SizeLimitError", error.message
