"""The plain classes of `receivers`: which of the code's classes are plain, that their methods take
the unguarded form only for an instance of one, and that a plain class stays plain.

What the methods compute is compared with CPython in the differential corpus (`METHODS_ON_SELF`);
the attacks on the fast path are in tests/security/test_local_receivers.py.
"""

from __future__ import annotations

import textwrap
from types import CodeType
from typing import Any

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError
from codeward.executors.local.block_compiler import compile_block
from codeward.executors.local.receivers import PLAIN_RECEIVER


def in_process(code: str, **options: Any) -> tuple[LocalExecutor, Any]:
    executor = LocalExecutor(isolation="in_process", authorized_imports=["functools", "dataclasses"], **options)
    return executor, executor.run(textwrap.dedent(code)).output


def code_objects(code: CodeType) -> list[CodeType]:
    nested = [item for item in code.co_consts if isinstance(item, CodeType)]
    return nested + [inner for item in nested for inner in code_objects(item)]


def plain_names(executor: LocalExecutor) -> set[str]:
    guards = executor._interpreter._guards  # type: ignore[union-attr]
    return {cls.__name__ for cls in guards.plain_classes}


def test_the_code_s_classes_with_plain_bases_and_namespaces_are_plain() -> None:
    executor, _ = in_process(
        """
        import functools, dataclasses
        class Base:
            limit = 3
            def method(self): return 1
            @property
            def prop(self): return 2
            @staticmethod
            def helper(): return 3
            @classmethod
            def make(cls): return cls()
            @functools.cached_property
            def heavy(self): return 4
        class Child(Base):
            pass
        @dataclasses.dataclass
        class Record:
            x: int = 0
        class WithHostBase(dict):
            pass
        class BelowHostBase(WithHostBase):
            pass
        class Mixed(Base, Exception):
            pass
        class SubProperty(property):
            pass
        class HoldsForeignDescriptor:
            value = SubProperty(lambda self: 1)
        """
    )
    with executor:
        assert plain_names(executor) == {"Base", "Child", "Record"}


def test_a_method_takes_the_plain_form_only_where_its_receiver_is_never_rebound() -> None:
    source = textwrap.dedent(
        """
        class Node:
            def plain(self):
                return self.value
            def rebinds(self):
                self = self.next
                return self.value
            def shadows_in_a_lambda(self):
                return (lambda self: self.value)(self)
            def no_attribute(self):
                return 1
        """
    )
    methods = {code.co_name: code for code in code_objects(compile_block(source, "<block>"))}
    assert "_own_self_" in methods["plain"].co_varnames
    for name in ("rebinds", "shadows_in_a_lambda", "no_attribute"):
        assert "_own_self_" not in methods[name].co_varnames, name


def test_call_statements_on_a_plain_instance_hand_it_on_and_the_block_lets_it_go() -> None:
    """A call statement with plain arguments (``x.m(a)``, ``y = x.m(a)``, ``return x.m(a)``), in a
    function or a method, puts its receiver where the method's check finds it; after the block
    the code's object is not held, as in CPython."""
    source = textwrap.dedent(
        """
        class Counter:
            def bump(self, by):
                self.n += by
                return self.n
            def twice(self, by):
                self.bump(by)
                return self.bump(by)
        counter = Counter()
        counter.n = 0
        for step in range(3):
            last = counter.twice(step)
        """
    )
    block = compile_block(source, "<block>")
    codes = {code.co_name: code for code in [block, *code_objects(block)]}
    for name in (block.co_name, "twice"):
        assert PLAIN_RECEIVER in codes[name].co_names, name
    executor = LocalExecutor(isolation="in_process", authorized_imports=["weakref"])
    with executor:
        executor.run(source + "import weakref\nwatch = weakref.ref(counter)\nmoved = counter.n\ndel counter")
        assert executor.run("moved, last, watch() is None").output == (6, 6, True)


def test_a_plain_method_called_on_a_foreign_receiver_keeps_the_guard() -> None:
    """The flag is computed from the receiver's class at each call, not from the class that defined the method."""
    executor, output = in_process(
        """
        class Reader:
            def read(self):
                return self.format
        class Text(Reader, str):
            pass
        Reader.read(Text('{}'))('ok')
        """
    )
    with executor:
        assert output == "ok"  # str.format reached through the guard's safe formatter
    with pytest.raises(ExecutionError) as info, LocalExecutor(isolation="in_process") as other:
        other.run("class Reader:\n    def read(self):\n        return self.format\nReader.read('{0.__class__}')(1)")
    assert info.value.error_type == "SandboxViolation"


def test_setting_a_foreign_descriptor_on_a_plain_class_is_refused_with_the_way_out() -> None:
    executor, _ = in_process(
        """
        class SubProperty(property):
            pass
        class Plain:
            pass
        Plain.ok = property(lambda self: 1)
        Plain.count = 0
        Plain.count += 2
        """
    )
    with executor:
        assert executor.run("(Plain().ok, Plain.count)").output == (1, 2)
        for statement in ("Plain.bad = SubProperty(lambda self: 1)", "setattr(Plain, 'bad', SubProperty(len))"):
            with pytest.raises(ExecutionError) as info:
                executor.run(statement)
            assert info.value.error_type == "SandboxViolation"
            assert "define it in the class body instead" in info.value.message
        assert executor.run("hasattr(Plain, 'bad')").output is False
        assert "Plain" in plain_names(executor)
        executor.run("class Holder:\n    bad = SubProperty(lambda self: 7)\nvalue = Holder().bad")
        assert executor.run("value").output == 7  # in a class body it is allowed: the class is not plain


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_the_size_caps_hold_on_the_plain_form(isolation: str) -> None:
    code = """
        class Box:
            def __init__(self):
                self.text = 'x' * 1000
            def repeat(self):
                self.text *= 10**8
            def double(self):
                for _ in range(40):
                    self.text += self.text
        """
    with LocalExecutor(isolation=isolation) as executor:
        executor.run(textwrap.dedent(code))
        for call in ("Box().repeat()", "Box().double()"):
            with pytest.raises(ExecutionError) as info:
                executor.run(call)
            assert info.value.error_type == "SizeLimitError", call


def test_reads_of_the_code_s_class_attributes_outside_methods_take_the_checked_form() -> None:
    """``x.name``, where a class of the code defines `name`, binds `x` to a local and checks its
    class (`fast_own_reads`): in the block, in functions and in lambdas; in a comprehension, whose
    own variables nothing else rebinds, it checks the variable without binding it; not for names
    no class defines."""
    source = textwrap.dedent(
        """
        class Account:
            def deposit(self, amount):
                return amount
        def pay(account):
            return account.deposit(1)
        def other(text):
            return text.upper()
        def in_a_comprehension(accounts):
            return [account.deposit(1) for account in accounts]
        double = lambda account: account.deposit(2)
        account = Account()
        account.deposit(3)
        """
    )
    block = compile_block(source, "<block>")
    functions = {code.co_name: code for code in code_objects(block)}
    for taking in (block, functions["pay"], functions["<lambda>"]):
        assert "_receiver_" in taking.co_varnames, taking.co_name
    # On 3.12 and later the comprehension is inlined in its function (PEP 709): no <listcomp> of its own.
    comprehension = functions.get("<listcomp>", functions["in_a_comprehension"])
    assert "_own_ids_" in comprehension.co_names
    for keeping in ("other", "in_a_comprehension", "deposit", *({"<listcomp>"} & functions.keys())):
        assert "_receiver_" not in functions[keeping].co_varnames, keeping
    assert "_own_ids_" not in functions["other"].co_names


def test_a_comprehension_checks_only_the_variables_its_targets_bind() -> None:
    """A name an attribute or item target reads (``for box.item in ...``) is not the comprehension's:
    another thread could rebind it between the check and the read, so its reads keep the guard."""
    source = textwrap.dedent(
        """
        class Box:
            def __init__(self):
                self.item = 0
        def by_attribute(box, values):
            return [box.item for box.item in values]
        def by_item(box, slots, values):
            return [box.item for slots[box] in values]
        def bound(boxes):
            return [box.item for box in boxes]
        """
    )
    codes = code_objects(compile_block(source, "<block>"))
    functions = {code.co_name: code for code in codes}
    comprehensions = sorted(
        (code for code in codes if code.co_name == "<listcomp>"), key=lambda code: code.co_firstlineno
    )
    if comprehensions:  # 3.11: each comprehension is a code object of its own, in the order written
        by_attribute, by_item, bound = comprehensions
    else:  # 3.12 and later: inlined in its function (PEP 709)
        by_attribute, by_item, bound = (functions[name] for name in ("by_attribute", "by_item", "bound"))
    assert "_own_ids_" not in by_attribute.co_names
    assert "_own_ids_" not in by_item.co_names
    assert "_own_ids_" in bound.co_names


def test_the_names_of_earlier_blocks_classes_count_and_module_code_keeps_the_guard() -> None:
    names: set[str] = set()
    compile_block("class Account:\n    def deposit(self):\n        return 1\n", "<1>", class_attributes=names)
    assert names == {"deposit"}
    later = compile_block("def pay(account):\n    return account.deposit()\n", "<2>", class_attributes=names)
    assert "_receiver_" in next(code for code in code_objects(later) if code.co_name == "pay").co_varnames
    # A block that stays module code (a module docstring) would bind the receiver as a global.
    module = compile_block('"""doc"""\naccount.deposit()\n', "<3>", class_attributes=names)
    assert "_receiver_" not in module.co_names


def test_an_own_read_outside_a_method_gives_what_the_guard_gives() -> None:
    """The same object, the same error for a missing attribute, and the guard's answer for a
    receiver that is not an instance of a plain class (a str method, a class attribute)."""
    executor, output = in_process(
        """
        class Box:
            size = 1
            def upper(self):
                return 'own'
            def __init__(self):
                self.items = []
        class Wide(Box, dict):
            pass
        box, results = Box(), []
        for receiver in [box, 'text', Wide()]:
            results.append(receiver.upper())
        try:
            box.missing = box.absent
        except AttributeError as error:
            results.append((error.name, error.obj is box))
        results, box.items is box.items, Box.size
        """
    )
    with executor:
        assert output == (["own", "TEXT", "own", ("absent", True)], True, 1)
