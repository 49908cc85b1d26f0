"""Rules for allowed libraries that would otherwise break the sandbox's own rules.

An allowed module is not trusted to keep the policy: some of its functions turn
data into code, change the whole host process, or end it. Each such function is
checked here at the boundary, before the library acts:

- `dataclasses.dataclass` writes Python source from the names of a class's fields
  and runs it with the real builtins. Field names normally come from ``x: int``
  lines, but a class can be given any annotations (``typing.TypedDict('T',
  {'a,open(...)': int})`` copied over by ``functools.update_wrapper``), so every
  name is checked to be a plain, public identifier before the class is processed.
- Decorators that write onto what they are given (``dataclass``, ``total_ordering``,
  ``typing.final``, ``abstractmethod``...) would rewrite a host class: they take the code's own objects only.
- ``ABC.register`` changes ``isinstance`` for every caller in the process, and is
  reachable through forwarding objects (``typing.Sequence.register``), so the
  method is judged by what it is bound to, not by the object it was read from.
- numpy's and pandas' test runners (``numpy.test``, each submodule's ``.test``,
  ``pandas.test``) run pytest in the sandbox's process with the code's arguments
  (its plugins, its output files): they are refused wherever they are reached.
  ``numpy.info(toplevel=name)`` imports any installed module: only ``numpy.info(obj)`` is given.
- A `SystemExit` a library raises (``pandas.test()`` calls ``sys.exit``) would end the
  host with ``isolation="in_process"``; it ends the block instead, as an error.
"""

from __future__ import annotations

import abc
import collections.abc
import copy
import dataclasses
import functools
import keyword
import typing
from collections.abc import Callable
from types import FunctionType, MethodType
from typing import Any

from codeward.executors.local.imports import Refused, SandboxViolation

__all__ = [
    "NUMPY_RANDOM_MODULES",
    "exit_refused",
    "library_rules",
    "private_numpy_random",
    "refuse_foreign_register",
    "vet_library_function",
]

#: The modules whose functions draw from numpy's one global random state.
NUMPY_RANDOM_MODULES = frozenset({"numpy.random", "numpy.random.mtrand"})

#: Where the libraries' test runners live (numpy rewrites their ``__module__`` to ``"numpy"``).
_TEST_RUNNER_MODULES = frozenset({"numpy._pytesttester", "pandas.util._tester"})
#: Why a module's command-line entry point is refused.
_COMMAND_LINE = "it is the module's command line, reading the host's argv and stdin, and it may end the process"
#: numpy.info: (the module its code lives in, its name).
_NUMPY_INFO = ("numpy.lib._utils_impl", "info")


def library_rules(write: Callable[[Any], Any], getitem: Callable[[Any, Any], Any]) -> dict[str, dict[str, Any]]:
    """Per-module replacements. The decorators that write onto the object they are given first ask
    `write` (the guard of ``obj.name = value``), so they apply to the code's own classes and functions
    only, never to a host class (``dataclass(json.JSONEncoder)`` would rewrite the host's encoder).
    typing's overload registry is the host's: the code's overloads are not recorded in it. The
    functions that read by name or key read as the guards do: `getitem` (``obj[key]``, vetted),
    and no dataclass field whose name starts with ``_``."""
    own = functools.partial(_on_own_objects, write)
    transform = typing.dataclass_transform
    return {
        "base64": {"main": Refused(_COMMAND_LINE)},
        "json.tool": {"main": Refused(_COMMAND_LINE)},
        "dataclasses": {"dataclass": checked_dataclass(write), "asdict": _public_asdict, "astuple": _public_astuple},
        "functools": {"total_ordering": own(functools.total_ordering)},
        "operator": {"itemgetter": functools.partial(_itemgetter, getitem), "getitem": getitem},
        "numbers": {"abstractmethod": own(abc.abstractmethod)},
        "collections.abc": _when_present(collections.abc, "abstractmethod", own),  # re-exported from 3.13
        "copy": _when_present(copy, "replace", lambda _: Refused(_REPLACE)),
        "typing": {
            "abstractmethod": own(abc.abstractmethod),
            "final": own(typing.final),
            **_when_present(typing, "override", own),  # 3.12+: it sets __override__ on what it is given
            "no_type_check": own(typing.no_type_check),
            "runtime_checkable": own(typing.runtime_checkable),
            "dataclass_transform": lambda **options: own(transform(**options)),
            "no_type_check_decorator": Refused("it marks whatever its decorator returns, host objects included"),
            "NamedTupleMeta": Refused("a metaclass builds classes from a namespace of any names; use class"),
            "overload": _unrecorded_overload,
            "clear_overloads": Refused("it empties the host's registry of overloads"),
        },
        # Process-wide settings kept in a library's module, beyond those the code keeps as its own
        # (numpy's error and print options, pandas' options: see crossing.CodeSettings).
        "numpy.ma": {"masked_print_option": Refused(_SHARED_SETTING)},
        "numpy.ma.core": {"masked_print_option": Refused(_SHARED_SETTING)},
        "numpy.polynomial": {"set_default_printstyle": Refused(_SHARED_SETTING)},
        "pandas.plotting": {"plot_params": Refused(_SHARED_SETTING + "; pass the option to the plot call")},
    }


_SHARED_SETTING = "it is a setting of the whole process, the host's too"


_REPLACE = (
    "it calls the object's own __replace__, looked up by name; for a dataclass use dataclasses.replace, "
    "for a namedtuple its _replace through a new tuple, or build the new object with its class"
)


def _when_present(module: Any, name: str, wrap: Callable[[Any], Any]) -> dict[str, Any]:
    """``{name: wrap(module.name)}`` where this Python's `module` has `name`, else nothing."""
    found = getattr(module, name, None)
    return {} if found is None else {name: wrap(found)}


def _itemgetter(getitem: Callable[[Any, Any], Any], *items: Any) -> Callable[[Any], Any]:
    """operator.itemgetter, reading each item as ``obj[key]`` does in the sandbox (vetted)."""
    if not items:
        raise TypeError("itemgetter expected 1 argument, got 0")
    if len(items) == 1:
        return lambda obj: getitem(obj, items[0])
    return lambda obj: tuple(getitem(obj, item) for item in items)


def _public_asdict(obj: Any, *, dict_factory: Callable[..., Any] = dict) -> Any:
    """dataclasses.asdict, refusing a dataclass (nested ones too) with a field the code could not read as ``obj._x``."""
    return dataclasses.asdict(obj, dict_factory=lambda pairs: dict_factory(_public_pairs(pairs)))


def _public_astuple(obj: Any, *, tuple_factory: Callable[..., Any] = tuple) -> Any:
    """dataclasses.astuple, refusing as `_public_asdict` does (whose walk checks the names astuple does not see)."""
    dataclasses.asdict(obj, dict_factory=_public_pairs)
    return dataclasses.astuple(obj, tuple_factory=tuple_factory)


def _public_pairs(pairs: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    for name, _ in pairs:
        if name.startswith("_"):
            raise SandboxViolation(
                f"dataclasses.asdict/astuple: the field {name!r} is private and not available in the sandbox"
            )
    return pairs


def _unrecorded_overload(function: Any) -> Callable[..., Any]:
    """typing.overload without the host-wide registry: calling the overload raises as in typing."""
    dummy: Callable[..., Any] = typing._overload_dummy  # type: ignore[attr-defined]
    return dummy


def _on_own_objects(write: Callable[[Any], Any], decorator: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(decorator)
    def checked(target: Any, /, *args: Any, **kwargs: Any) -> Any:
        write(target)
        return decorator(target, *args, **kwargs)

    return checked


def checked_dataclass(write: Callable[[Any], Any]) -> Callable[..., Any]:
    """`dataclasses.dataclass`, as decorator or call, on the code's own classes whose field names are identifiers."""

    def dataclass(cls: Any = None, /, **options: Any) -> Any:
        def wrap(target: Any) -> Any:
            write(target)
            check_field_names(target)
            return dataclasses.dataclass(target, **options)

        return wrap if cls is None else wrap(cls)

    functools.update_wrapper(dataclass, dataclasses.dataclass)
    return dataclass


def check_field_names(cls: Any) -> None:
    """Every name `dataclasses` will write into source for `cls`: its own annotations, and
    the fields of its dataclass bases. Anything not a plain str public identifier is refused.
    The class is given a fresh copy of its annotations, so that no one holding the checked dict
    can change a name between the check and the code generation."""
    if not isinstance(cls, type):
        return  # dataclasses raises its own TypeError
    annotations = cls.__dict__.get("__annotations__", {})  # noqa: RUF063  # as dataclasses reads them
    if type(annotations) is not dict:
        raise SandboxViolation(
            f"dataclass {cls.__name__!r}: its annotations are not a plain dict; declare fields as 'name: type' lines"
        )
    fresh = dict(annotations)
    names: list[Any] = list(fresh)
    for base in cls.__mro__[1:]:
        fields = base.__dict__.get(dataclasses._FIELDS)  # type: ignore[attr-defined]
        if isinstance(fields, dict):
            names.extend(getattr(field, "name", None) for field in fields.values())
    for name in names:
        if type(name) is not str or not name.isidentifier() or keyword.iskeyword(name) or name.startswith("_"):
            raise SandboxViolation(
                f"dataclass {cls.__name__!r}: the field name {name!r} is not a public identifier, and dataclasses "
                "would write it into code; use names like 'count' for dataclass fields"
            )
    if "__annotations__" in cls.__dict__:
        type.__setattr__(cls, "__annotations__", fresh)


def refuse_foreign_register(value: Any, sandbox_module: str) -> None:
    """Refuse a `register` method of an ABC whose `__module__` is not `sandbox_module` (so the
    code did not define it), whatever object it was read from, and ``ABCMeta.register`` itself."""
    if value is abc.ABCMeta.register:
        raise SandboxViolation("ABCMeta.register would change isinstance() for the whole host; subclass instead")
    if isinstance(value, MethodType):
        owner = value.__self__
        if isinstance(owner, abc.ABCMeta) and owner.__module__ != sandbox_module:
            raise SandboxViolation(
                f"{owner.__name__}.register would change isinstance() for the whole host; subclass it instead"
            )


def vet_library_function(label: str, value: Any) -> Any:
    """A numpy or pandas module attribute: test runners refused, numpy.info checked, anything else as it is.

    Told by the module the code lives in, not by ``__module__``, which numpy rewrites to ``"numpy"``."""
    function = value.__func__ if isinstance(value, MethodType) else value
    code = function.__globals__ if isinstance(function, FunctionType) else {"__name__": type(value).__module__}
    module = code.get("__name__")
    if module in _TEST_RUNNER_MODULES:
        raise SandboxViolation(
            f"{label} is not available in the sandbox: it runs pytest in this process with the code's arguments"
        )
    if (module, getattr(function, "__name__", None)) == _NUMPY_INFO:
        return _checked_info(value)
    return value


def _checked_info(info: Callable[..., Any]) -> Callable[..., Any]:
    """numpy.info for one object: its ``toplevel`` imports any module by name, its ``output`` writes anywhere."""

    @functools.wraps(info)
    def checked(object: Any = None, maxwidth: int = 76, output: Any = None, toplevel: Any = "numpy") -> Any:
        if output is not None or type(toplevel) is not str or toplevel != "numpy":
            raise SandboxViolation(
                "numpy.info(output=..., toplevel=...) is not available in the sandbox: toplevel imports any "
                "module by name; call numpy.info(obj)"
            )
        return info(object, maxwidth)

    return checked


def exit_refused(error: SystemExit) -> SandboxViolation:
    """What a `SystemExit` becomes when it ends a block: an error that does not end the host."""
    refusal = SandboxViolation(
        f"the code tried to end the process (SystemExit({error.code!r}), raised by a library it called); "
        "the sandbox does not let code stop the host: return or raise an error instead"
    )
    refusal.__traceback__ = error.__traceback__
    return refusal


def private_numpy_random() -> dict[str, Any]:
    """numpy.random's functions drawing from a state of the code's own, as `random`'s do.

    The module's functions are methods of one global `RandomState`, the host's: seeded by the
    code, it would make the host's later draws the code's to choose, and read, to predict."""
    import numpy

    own = numpy.random.RandomState()
    shared = numpy.random.mtrand._rand
    methods = {
        name: getattr(own, name)
        for name in dir(numpy.random)
        if not name.startswith("_") and getattr(getattr(numpy.random, name), "__self__", None) is shared
    }
    refused = Refused("it reaches numpy's global random state, the host's; use numpy.random.default_rng()")
    return {
        **methods,
        "seed": own.seed,
        "ranf": own.random_sample,
        "sample": own.random_sample,
        "get_bit_generator": refused,
        "set_bit_generator": refused,
    }
