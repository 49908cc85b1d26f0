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
from codeward.executors.local.policy import compile_block


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
