"""Classes: enum members, dataclass instances and namedtuples, restored only as classes that are allowed.

A payload names its class as ``module:qualname`` text, and a sandbox writes whatever text it likes,
so the decoder never imports a module or looks up a class a payload names: it restores the classes
the user registered (`register_class`) and, inside a sandbox only, the classes loaded there
(`restore_loaded_classes`). Any other class-named value decodes to its plain form with a `CodecWarning`.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
import types
import warnings
from collections.abc import Callable
from typing import Any, TypeVar

from .errors import CodecError, CodecWarning
from .wire import Decoder, Encoder, dec_list, tag

_Class = TypeVar("_Class", bound=type)

# The classes `loads` restores by name (see `register_class`), keyed by their ``module:qualname``.
_REGISTERED: dict[str, type] = {}
# Whether `loads` also restores classes loaded where it runs: only inside a sandbox (see below).
_LOADED_CLASSES_TOO = False


def register_class(cls: _Class) -> _Class:
    """Let `loads` restore instances of `cls`, an enum, dataclass or namedtuple class; returns `cls`.

    A payload names its class as text, and a sandbox writes whatever text it likes: a class it
    names could run code on the host when its instance is printed, iterated or compared (a
    namedtuple from the standard library ran ``uname -p`` when iterated). So only the classes the
    user registers are restored; every other class-named value decodes to its plain form (members'
    values, a dict of fields, a tuple) with a `CodecWarning`. Usable as a class decorator.
    """
    if _restorable_kind(cls) is None:
        raise TypeError(
            f"register_class takes an enum class, a dataclass built by object.__new__ or a namedtuple class, "
            f"not {cls!r}"
        )
    _REGISTERED[_class_ref(cls)] = cls
    return cls


def restore_loaded_classes() -> None:
    """Inside a sandbox, let `loads` restore any enum, dataclass or namedtuple class loaded there.

    What a sandbox decodes comes from the host, and its classes are the sandbox's own to run, so
    an enum the host sends arrives as that enum. The host itself never calls this: it restores
    only the classes its user registers.
    """
    global _LOADED_CLASSES_TOO
    _LOADED_CLASSES_TOO = True


def _class_ref(cls: type) -> str:
    return f"{cls.__module__}:{cls.__qualname__}"


def _restorable_kind(cls: Any) -> str | None:
    """The tag under which instances of `cls` travel by class ("enum", "dc", "nt"), or None.

    A dataclass must be made by ``object.__new__``: the decoder makes its instances that way,
    without calling ``__init__``, as pickle does.
    """
    if not isinstance(cls, type):
        return None
    if issubclass(cls, enum.Enum):
        return "enum"
    if dataclasses.is_dataclass(cls) and cls.__new__ is object.__new__:
        return "dc"
    if issubclass(cls, tuple) and isinstance(getattr(cls, "_fields", None), tuple):
        return "nt"
    return None


# ----------------------------------------------------------------------- encoding


def enc_instance(e: Encoder, v: Any) -> Any:
    """An enum member, dataclass instance or namedtuple, by its class's name; None for any other value."""
    if isinstance(v, enum.Enum):
        return tag("enum", cls=_class_ref(type(v)), name=v.name, v=e.enc(v.value))
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        fields = {f.name: getattr(v, f.name) for f in dataclasses.fields(v)}
        return tag("dc", cls=_class_ref(type(v)), f=e.items(fields, ".{}"))
    if isinstance(v, tuple) and "_fields" in vars(type(v)):  # a namedtuple
        return tag("nt", cls=_class_ref(type(v)), v=e.each(v))
    return None


# ----------------------------------------------------------------------- decoding


def _registered(ref: Any, kind: str) -> type | None:
    """The registered class a payload names, when it is of the tag's kind (see `register_class`);
    inside a sandbox, also a class loaded there (see `restore_loaded_classes`)."""
    cls = _REGISTERED.get(ref) if isinstance(ref, str) else None
    if cls is None and _LOADED_CLASSES_TOO:
        cls = _loaded_class(ref)
    return cls if cls is not None and _restorable_kind(cls) == kind else None


def _loaded_class(ref: Any) -> type | None:
    """Find a class by ``module:qualname`` among loaded modules only; never import."""
    if not isinstance(ref, str) or ":" not in ref:
        return None
    module_name, qualname = ref.split(":", 1)
    obj: Any = sys.modules.get(module_name)
    for part in qualname.split("."):
        # The namespace is read past any __getattribute__/__getattr__ hook: a module may import on
        # attribute access (module __getattr__, importlib's LazyLoader), and no descriptor runs.
        try:
            namespace = object.__getattribute__(obj, "__dict__")
        except AttributeError:
            return None
        obj = namespace.get(part) if isinstance(namespace, (dict, types.MappingProxyType)) else None
    return obj if isinstance(obj, type) else None


def _decoded_plainer(ref: Any, cls: type | None, kind: str, as_what: str) -> None:
    """Warn that a class-named value arrived plain, and say how to have it restored."""
    if cls is None:
        why = "is not registered for restoring: a payload names its class, so only registered classes are made"
        how = "Call codeward.executors.codec.register_class(<that class>) before decoding to have it restored"
    else:
        why = "differs from the registered class: other fields, or a value that is none of its members"
        how = "Check that the sender and the receiver define the class alike"
    warnings.warn(f"{kind} {ref!r:.200} {why}; decoded it as {as_what}. {how}.", CodecWarning, stacklevel=4)


_FLAG_MISSING = enum.Flag._missing_.__func__  # type: ignore[attr-defined]


def _dec_enum(d: Decoder, obj: dict[str, Any]) -> Any:
    cls, value = _registered(obj["cls"], "enum"), obj["v"]
    member = _enum_member(cls, value, obj.get("name")) if cls is not None else None
    if member is not None:
        return member
    _decoded_plainer(obj["cls"], cls, "enum class", "the member's plain value")
    return value


def _enum_member(cls: Any, value: Any, name: Any) -> Any:
    """The member of a registered enum a payload stands for, or None.

    A flag is found by its value alone: one of its members, or a combination of their bits (made
    only by the standard library's own ``_missing_``); a value with any other bit is none of them.
    """
    try:
        member = cls._value2member_map_.get(value)
    except TypeError:  # an unhashable value
        member = None
    if member is not None:
        return member
    if issubclass(cls, enum.Flag):
        standard = getattr(cls._missing_, "__func__", None) is _FLAG_MISSING
        return cls(value) if standard and _only_member_bits(cls, value) else None
    return cls.__members__.get(name) if isinstance(name, str) else None


def _only_member_bits(cls: Any, value: Any) -> bool:
    """Whether `value` is a non-negative int whose bits all belong to the flag class's members."""
    if type(value) is not int or value < 0:
        return False
    known = 0
    for member in cls.__members__.values():
        if type(member._value_) is int:
            known |= member._value_
    return value & ~known == 0


def _dec_dataclass(d: Decoder, obj: dict[str, Any]) -> Any:
    fields = obj["f"]
    if not isinstance(fields, dict):
        raise CodecError("dataclass fields are not a mapping")
    cls = _registered(obj["cls"], "dc")
    if cls is not None and {f.name for f in dataclasses.fields(cls)} == set(fields):
        # Restored the way pickle restores objects: no __init__/__post_init__ code runs.
        instance: Any = object.__new__(cls)
        for name, value in fields.items():
            object.__setattr__(instance, name, value)
        return instance
    _decoded_plainer(obj["cls"], cls, "dataclass", "a dict of its fields")
    return fields


def _dec_namedtuple(d: Decoder, obj: dict[str, Any]) -> Any:
    items = dec_list(obj["v"])
    cls = _registered(obj["cls"], "nt")
    if cls is not None and len(cls._fields) == len(items):  # type: ignore[attr-defined]
        return tuple.__new__(cls, items)  # bypasses the class's own __new__, like pickle's copyreg path
    _decoded_plainer(obj["cls"], cls, "namedtuple", "a plain tuple")
    return tuple(items)


DECODERS: dict[str, Callable[[Decoder, dict[str, Any]], Any]] = {
    "enum": _dec_enum,
    "dc": _dec_dataclass,
    "nt": _dec_namedtuple,
}
