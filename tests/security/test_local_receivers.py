"""Attacks on the guard-free reads of instances of the code's plain classes (`receivers`).

A method reads and writes its receiver's attributes without the guards when, at that call, the
receiver is an instance of a plain class; elsewhere, a read of a name some class of the code
defines does so when the object read is one. These attacks give either a receiver that is not
one, or use the unguarded form to build what the size caps stop.
"""

from __future__ import annotations

import shutil

import pytest

from tests.security.conftest import in_process_only
from tests.security.test_local_attribute_routes import Holder

pytestmark = pytest.mark.timeout(60)

#: A host object holding a function of the machine, as a careless host might send one.
HOST = {"h": Holder(shutil.copy)}
PAYLOAD = f"raw({__file__!r}, 'CANARY')"
READER = "class Reader:\n    def leak(self):\n        return self.tool\n"

FOREIGN_RECEIVERS = {
    "called-on-the-class": READER + "raw = Reader.leak(h)\n",
    "bound-by-hand": READER + "import functools\nraw = functools.partial(Reader.leak)(h)\n",
    "through-a-plain-subclass-method": READER + "class Sub(Reader):\n    pass\nraw = Sub.leak(h)\n",
    "as-a-property": "class Reader:\n    @property\n    def leak(self):\n        return self.tool\n"
    "raw = Reader.leak.fget(h)\n",
}


@pytest.mark.parametrize("code", FOREIGN_RECEIVERS.values(), ids=FOREIGN_RECEIVERS.keys())
@in_process_only
def test_a_plain_method_given_a_host_object_reads_it_through_the_guard(code, attack):
    """`h.tool` is shutil.copy, which the read guard refuses wherever it is found."""
    error = attack(code + PAYLOAD, variables=HOST, authorized_imports=["functools"])
    assert "belongs to the module 'shutil'" in error.message, error.message


class Tools:
    """A host class with a machine function as a class attribute."""

    copy = staticmethod(shutil.copy)


#: A class of the code that defines `tool`, the name of the host object's machine function.
OWNER = "class Owner:\n    def tool(self):\n        return 1\n"
OWN_NAME_ON_A_FOREIGN_RECEIVER = {
    "in-the-block": OWNER + "raw = h.tool\n",
    "in-a-loop-after-an-own-instance": OWNER + "for each in [Owner(), h]:\n    raw = each.tool\n",
    "in-a-function": OWNER + "def grab(each):\n    return each.tool\nraw = grab(h)\n",
    "in-a-lambda": OWNER + "raw = (lambda each: each.tool)(h)\n",
    "class-in-an-earlier-block": "raw = h.tool\n",
}


@pytest.mark.parametrize("code", OWN_NAME_ON_A_FOREIGN_RECEIVER.values(), ids=OWN_NAME_ON_A_FOREIGN_RECEIVER.keys())
@in_process_only
def test_a_name_of_the_code_s_class_read_on_a_host_object_goes_through_the_guard(code, attack):
    """Reads of the names the code's classes define check the receiver's class at each read."""
    before = OWNER if not code.startswith(OWNER) else None
    error = attack(code + PAYLOAD, variables=HOST, before=before)
    assert "belongs to the module 'shutil'" in error.message, error.message


HOST_BASES = {
    "host-base": "class Mine(Tools):\n    def leak(self):\n        return self.copy\nraw = Mine().leak()\n",
    "host-base-below-a-plain-one": "class Plain:\n    def leak(self):\n        return self.copy\n"
    "class Mine(Plain, Tools):\n    pass\nraw = Mine().leak()\n",
}


@pytest.mark.parametrize("code", HOST_BASES.values(), ids=HOST_BASES.keys())
@in_process_only
def test_a_class_with_a_host_base_is_not_plain(code, attack):
    """What a host base holds is read through the guard, whichever class's method reads it."""
    error = attack(code + PAYLOAD, variables={"Tools": Tools})
    assert "belongs to the module 'shutil'" in error.message, error.message


#: A class of the code and an instance of it. A call statement on the instance
#: (``mine.touch()``) hands it on to the method it calls (`receivers`).
TOUCHED = (
    "class Reader:\n    def leak(self):\n        return self.tool\n    def touch(self):\n        self.tool = 1\n"
    "    def relay(self, other):\n        self.touch()\n        touched = self.touch()\n        return Reader.leak(other)\n"
    "    def each(self):\n        yield self.tool\nmine = Reader()\n"
)
#: A class of the code with a method named as the host object's machine function.
OWNS_TOOL = (
    f"class Owner:\n    def tool(self, source, target):\n        pass\nsource, target = {__file__!r}, 'CANARY'\n"
)
HANDED_ON = {
    "after-a-handed-on-call": TOUCHED + "mine.touch()\nraw = Reader.leak(h)\n" + PAYLOAD,
    "alternating-in-a-loop": TOUCHED
    + "for each in [mine, h]:\n    mine.touch()\n    raw = Reader.leak(each)\n"
    + PAYLOAD,
    "relayed-by-a-method": TOUCHED + "raw = mine.relay(h)\n" + PAYLOAD,
    "generator-started-on-a-host-object": TOUCHED
    + "leaks = Reader.each(h)\nmine.touch()\nraw = next(leaks)\n"
    + PAYLOAD,
    "in-a-later-block": "raw = Reader.leak(h)\n" + PAYLOAD,
    "host-object-whose-method-has-the-name": OWNS_TOOL + "for each in [Owner(), h]:\n    each.tool(source, target)\n",
    "host-object-whose-method-has-the-name-assigned": OWNS_TOOL
    + "for each in [Owner(), h]:\n    got = each.tool(source, target)\n",
    "host-object-whose-method-has-the-name-returned": OWNS_TOOL
    + "def call(each):\n    return each.tool(source, target)\ncall(Owner())\ncall(h)\n",
}


@pytest.mark.parametrize("code", HANDED_ON.values(), ids=HANDED_ON.keys())
@in_process_only
def test_a_method_trusts_only_the_receiver_a_call_statement_checked(code, attack):
    """A call statement on an instance of a plain class hands it on to the method; whatever
    receiver came last, a host object given to a method still goes through the guard."""
    before = TOUCHED + "mine.touch()\n" if code.startswith("raw = Reader") else None
    error = attack(code, variables=HOST, before=before)
    assert "belongs to the module 'shutil'" in error.message, error.message


#: Call statements whose arguments are not plain names (expressions, ``*args``, keywords,
#: ``**kwargs``): the hand-on form writes the arguments in both branches, and they run after the
#: check, so they try to change what was checked before the method runs.
#: `OWNS_TOOL` with shutil.copy's own parameter names, for the keyword arguments.
OWNS_TOOL_BY_KEYWORD = OWNS_TOOL.replace("source, target):", "src, dst):")
SWAPPED_BY_ARGUMENTS = "def swap():\n    global mine\n    mine = h\n    return source\n"
ANY_ARGUMENTS = {
    "expression": OWNS_TOOL + "for each in [Owner(), h]:\n    each.tool(source + '', target)\n",
    "call-in-an-argument": OWNS_TOOL_BY_KEYWORD + "for each in [Owner(), h]:\n    each.tool(str(source), dst=target)\n",
    "starred": OWNS_TOOL + "for each in [Owner(), h]:\n    got = each.tool(*[source, target])\n",
    "double-starred": OWNS_TOOL_BY_KEYWORD
    + "def call(each):\n    return each.tool(**{'src': source, 'dst': target})\ncall(Owner())\ncall(h)\n",
    "receiver-rebound-by-an-argument": OWNS_TOOL
    + SWAPPED_BY_ARGUMENTS
    + "mine = Owner()\nmine.tool(swap(), target)\nmine.tool(source, target)\n",
    "receiver-rebound-by-a-walrus-argument": OWNS_TOOL
    + "def call(each):\n    each.tool(source, (each := h) and target)\n    each.tool(source, target)\ncall(Owner())\n",
    "receiver-rebound-by-a-generator-of-an-earlier-block": OWNS_TOOL
    + "def swapping():\n    global mine\n    mine = h\n    yield source\nswapper = swapping()\n"
    + "mine = Owner()\nmine.tool(next(swapper), target)\nmine.tool(source, target)\n",
    "host-object-relayed-through-an-expression-argument": TOUCHED + "raw = mine.relay([h][0])\n" + PAYLOAD,
    "host-object-relayed-through-a-keyword": TOUCHED + "raw = mine.relay(other=h or None)\n" + PAYLOAD,
    "method-handed-a-host-object-after-another-call-in-its-arguments": TOUCHED
    + "raw = mine.relay(*[(mine.touch(), h)[1]], **{})\n"
    + PAYLOAD,
}


@pytest.mark.parametrize("code", ANY_ARGUMENTS.values(), ids=ANY_ARGUMENTS.keys())
@in_process_only
def test_a_call_statement_with_any_arguments_hands_on_only_what_it_checked(code, attack):
    """Whatever the arguments of a call statement are, a host object called under the name of a
    method of the code, or handed to a method, goes through the guard; an argument that rebinds
    the receiver's name (a function, a walrus, a generator made in an earlier block) leaves the
    call on the object that was checked, as CPython reads the method before the arguments."""
    if "earlier-block" in code:
        first, _, rest = code.partition("mine = Owner()\n")
        error = attack("mine = Owner()\n" + rest, variables=HOST, before=first)
    else:
        error = attack(code, variables=HOST)
    assert "belongs to the module 'shutil'" in error.message, error.message


#: An argument that swaps the receiver's class, after the call statement checked it and before the
#: method reads `self`, for one whose host base holds a machine function under the name read.
SWAPPED_CLASS = (
    "class Plain:\n    def leak(self, ignored):\n        return self.copy\n"
    "class Evil(Tools):\n    pass\nbox = Plain()\n"
    "def swap(obj):\n    SWAP\n    return 1\nraw = box.leak(swap(box))\n" + PAYLOAD
)
CLASS_SWAPS = {
    "setattr": "setattr(obj, '__class__', Evil)",
    "attribute": "obj.__class__ = Evil",
    "object-setattr": "object.__setattr__(obj, '__class__', Evil)",
}


@pytest.mark.parametrize("swap", CLASS_SWAPS.values(), ids=CLASS_SWAPS.keys())
@in_process_only
def test_an_argument_cannot_swap_the_class_of_the_receiver_handed_on(swap, attack):
    """The method trusts the receiver handed on because an instance keeps its class: each way to
    change it is refused."""
    attack(SWAPPED_CLASS.replace("SWAP", swap), variables={"Tools": Tools})


#: Reads of the name some class of the code defines, on a comprehension's variable that is a host
#: object in the end: each read checks the object it reads.
IN_COMPREHENSIONS = {
    "generator": "raw = next(each.tool for each in [h])\n",
    "list-after-an-own-instance": "raw = next(iter([each.tool for each in [Owner(), h]][::-1]))\n",
    "condition": "raw = next(found for each in [h] if (found := each.tool))\n",
    "dict": "raw = next(iter({each.tool: 1 for each in [h]}))\n",
    "second-for": "raw = next(inner.tool for outer in [[h]] for inner in outer)\n",
    "nested-iterable": "raw = next(next(x for x in [each.tool]) for each in [h])\n",
    "outer-variable-in-a-nested-one": "raw = next(next(each.tool for x in [1]) for each in [h])\n",
    "lambda-in-a-comprehension": "raw = next((lambda: each.tool)() for each in [h])\n",
}


@pytest.mark.parametrize("code", IN_COMPREHENSIONS.values(), ids=IN_COMPREHENSIONS.keys())
@in_process_only
def test_a_comprehension_reading_a_name_of_the_code_s_class_on_a_host_object_goes_through_the_guard(code, attack):
    error = attack(OWNER + code + PAYLOAD, variables=HOST)
    assert "belongs to the module 'shutil'" in error.message, error.message


NAMES_OF_THE_HAND_ON = {
    "read": "_plain_receiver_[0]",
    "written": "_plain_receiver_[0] = h",
    "as-a-global": "def put():\n    global _plain_receiver_\n    _plain_receiver_ = [h, type(h)]\nput()",
}


@pytest.mark.parametrize("code", NAMES_OF_THE_HAND_ON.values(), ids=NAMES_OF_THE_HAND_ON.keys())
@in_process_only
def test_the_code_cannot_name_the_receiver_handed_on(code, attack):
    error = attack(code + "\n" + PAYLOAD, variables=HOST, control=lambda: True)
    assert "_plain_receiver_" in error.message, error.message


GROWTH = {
    "repeat": "class Box:\n    def grow(self):\n        self.text = 'x' * 1000\n        self.text *= 10**12\nBox().grow()",
    "double": "class Box:\n    def grow(self):\n        self.items = [0] * 1000\n        for _ in range(60):\n"
    "            self.items += self.items\nBox().grow()",
    "double-text": "class Box:\n    def grow(self):\n        self.text = 'x' * 1000\n        for _ in range(60):\n"
    "            self.text += self.text\nBox().grow()",
    "shift": "class Box:\n    def grow(self):\n        self.n = 1\n        self.n <<= 10**12\nBox().grow()",
    "power": "class Box:\n    def grow(self):\n        self.n = 7\n        self.n **= 10**10\nBox().grow()",
}


@pytest.mark.parametrize("code", GROWTH.values(), ids=GROWTH.keys())
def test_augmented_assignments_on_self_keep_the_size_caps(code, attack):
    error = attack(code, control="exhausts")
    assert error.error_type == "SizeLimitError", error.message
