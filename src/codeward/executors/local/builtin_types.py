"""The builtins that are types, as the local sandbox's code sees them.

A type is a constructor the guards must watch (``bytes(10**12)``, three-argument
``type``) and a value the code compares, subclasses and matches on; `BuiltinType`
is both. ``type()`` and ``typing.get_type_hints`` are given in forms that build no
class with arbitrary special methods and evaluate no annotation text as code.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Callable
from typing import Any

from codeward.executors.local.imports import SandboxViolation

__all__ = ["BuiltinType", "get_type_hints", "real_type", "refuse_metaclass_bases", "type_of"]


class BuiltinType:
    """A builtin type whose call the sandbox guards (``bytes(10**12)``, three-argument
    ``type``), still usable as the type: ``isinstance`` and ``issubclass``, ``==`` with
    the real type, subclassing (``class Blob(bytes)``), its public class attributes
    (``bytes.fromhex``) and class patterns; the code's ``type(x)`` gives the stand-in back,
    so ``type(data) is bytes`` holds and ``type(data)(n)`` is guarded too."""

    __slots__ = ("_call", "_real")

    def __init__(self, real: type, call: Callable[..., Any]) -> None:
        self._real = real
        self._call = call

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self._call(*args, **kwargs)

    def __instancecheck__(self, instance: Any) -> bool:
        return isinstance(instance, self._real)

    def __subclasscheck__(self, subclass: Any) -> bool:
        return issubclass(subclass, self._real)

    def __mro_entries__(self, bases: tuple[Any, ...]) -> tuple[type, ...]:
        if self._real is type:
            raise SandboxViolation("metaclasses are not available in the sandbox; define classes with class")
        return (self._real,)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") and not name.endswith("__"):  # its own fields; the attribute guard
            raise AttributeError(name)  # has judged any special name (``__name__``) before this read
        return getattr(self._real, name)

    def __eq__(self, other: object) -> bool:
        return other is self._real or other is self

    def __hash__(self) -> int:
        return hash(self._real)

    def __repr__(self) -> str:
        return repr(self._real)


def real_type(value: Any) -> Any:
    """The type a `BuiltinType` stands for; anything else as it is."""
    return value._real if type(value) is BuiltinType else value


def type_of(*args: Any) -> Any:
    """`type(x)`. The three-argument form, and metaclasses reached as the type of a
    class, would build classes with any special method (`__del__`), so they are not given."""
    if len(args) != 1:
        raise SandboxViolation("type() takes one argument here; define classes with a class statement")
    kind = type(args[0])
    if kind is type or kind is BuiltinType:
        return type
    if issubclass(kind, type):
        raise SandboxViolation(f"the metaclass of {args[0].__name__!r} is not available in the sandbox")
    return kind


def get_type_hints(obj: Any, globalns: Any = None, localns: Any = None, include_extras: bool = False) -> dict[str, Any]:
    """typing.get_type_hints for annotations that are objects already (the sandbox's code
    writes no others: its blocks cannot turn on ``from __future__ import annotations``):
    a class's merged over its MRO, as typing does, None read as NoneType, and
    Annotated stripped unless `include_extras`. An annotation that is a string, or
    holds a ForwardRef, would be evaluated as code: it is refused, not evaluated."""
    if isinstance(obj, type):
        hints: dict[str, Any] = {}
        for base in reversed(obj.__mro__):
            annotations = base.__dict__.get("__annotations__", {})  # noqa: RUF063  # as typing reads them
            if not isinstance(annotations, dict):
                annotations = {}  # a descriptor: the class defines none of its own
            for name, value in annotations.items():
                hints[name] = _real_annotation(value, name, obj)
    else:
        annotations = getattr(obj, "__annotations__", None)
        if annotations is None:
            if isinstance(obj, typing._allowed_types):  # type: ignore[attr-defined]
                return {}
            raise TypeError(f"{obj!r} is not a module, class, method, or function.")
        hints = {name: _real_annotation(value, name, obj) for name, value in dict(annotations).items()}
    if include_extras:
        return hints
    return {name: typing._strip_annotations(value) for name, value in hints.items()}  # type: ignore[attr-defined]


def _real_annotation(value: Any, name: str, owner: Any) -> Any:
    if value is None:
        return type(None)
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, (str, typing.ForwardRef)):
            owner_name = getattr(owner, "__qualname__", type(owner).__name__)
            raise SandboxViolation(
                f"typing.get_type_hints: the annotation of {name!r} in {owner_name!r} is the string {str(getattr(item, '__forward_arg__', item))[:60]!r}, "
                "which it would evaluate as code; the sandbox does not. Annotate with the object itself "
                "(x: int, not x: 'int')"
            )
        if isinstance(item, (typing._GenericAlias, types.GenericAlias, types.UnionType)):  # type: ignore[attr-defined]
            args = item.__args__
            if isinstance(item, types.GenericAlias):
                pending.extend(args)  # list['X'] evaluates the string
            else:
                pending.extend(arg for arg in args if not isinstance(arg, str))  # Literal['a'] is data
    return value


def refuse_metaclass_bases(name: str, bases: tuple[Any, ...]) -> None:
    for base in bases:
        if base is type_of or (isinstance(base, type) and issubclass(base, type)):
            raise SandboxViolation(f"class {name} cannot derive from type; metaclasses are not allowed")
