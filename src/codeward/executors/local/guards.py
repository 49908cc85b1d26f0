"""The runtime side of the local sandbox: the names the compiled code calls.

`policy` rewrites ``a.b`` into ``_getattr_(a, "b")``, ``a[k]`` into
``_getitem_(a, k)``, ``a.b = v`` into ``_write_(a).b = v``, and `instrumenter`
adds ``_tick_()`` calls and ``_each_`` around loop iterables; this module
supplies those functions, the safe builtins, and the per-module replacements
(a private `random.Random`, a capped `time.sleep`, `str.format` that cannot walk
attributes...).
"""

from __future__ import annotations

import _string  # type: ignore[import-not-found]
import builtins
import dataclasses
import functools
import itertools
import operator
import string
import sys
import time
from collections.abc import Callable
from types import BuiltinFunctionType, FunctionType, MethodType, ModuleType
from typing import Any

from codeward.executors.base import FinalAnswerSignal
from codeward.executors.local.builtin_types import (
    BuiltinType,
    get_type_hints,
    real_type,
    refuse_metaclass_bases,
    type_of,
)
from codeward.executors.local.data_policy import DataPolicy
from codeward.executors.local.forbidden import FORBIDDEN_ATTRIBUTES
from codeward.executors.local.imports import REFUSED, ImportGate, SandboxViolation
from codeward.executors.local.library_trust import (
    NUMPY_RANDOM_MODULES,
    library_rules,
    private_numpy_random,
    refuse_foreign_register,
)
from codeward.executors.local.limits import (
    BudgetSpentOutsideRun,
    Limits,
    SandboxSignal,
    TimeLimitReached,
    ticking_itertools,
)
from codeward.executors.local.policy import (
    AUGMENTED,
    FORMAT_METHODS,
    MATCH_CLASS,
    MATCH_VALUE,
    READABLE_DUNDERS,
    REGISTER,
    SIZE_ANSWER,
    SIZING_METHODS,
)
from codeward.executors.local.receivers import CLASS_IDS, PLAIN_RECEIVER, ClassWriter, plain_class
from codeward.wording import a

__all__ = ["SANDBOX_MODULE", "Guards"]

#: `__name__` of the sandbox's globals, hence `__module__` of the model's classes.
#: An empty module of that name sits in `sys.modules` because `dataclasses`
#: looks a class's module up there; it holds nothing.
SANDBOX_MODULE = "__codeward_sandbox__"
sys.modules.setdefault(
    SANDBOX_MODULE, ModuleType(SANDBOX_MODULE, "Placeholder for classes defined in codeward's local sandbox.")
)

_UNCATCHABLE = (SandboxSignal, FinalAnswerSignal, KeyboardInterrupt, SystemExit)

_SAFE_BUILTIN_NAMES = [
    "abs",
    "all",
    "any",
    "ascii",
    "bin",
    "bool",
    "callable",
    "chr",
    "classmethod",
    "complex",
    "dict",
    "divmod",
    "enumerate",
    "filter",
    "float",
    "frozenset",
    "hash",
    "hex",
    "id",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "list",
    "map",
    "max",
    "min",
    "next",
    "object",
    "oct",
    "ord",
    "property",
    "repr",
    "reversed",
    "round",
    "set",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "zip",
    "NotImplemented",
    "Ellipsis",
]


def _exception_names() -> list[str]:
    return [
        name
        for name, value in vars(builtins).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and not name.startswith("_")
        and value not in (SystemExit, KeyboardInterrupt)  # raised by the code, they would stop the host
    ]


class _SafeFormatter(string.Formatter):
    """`str.format` fields may index and read public attributes, never private ones."""

    def __init__(self, guards: Guards) -> None:
        self._guards = guards  # private: the code may hold this object

    def get_field(self, field_name: str, args: Any, kwargs: Any) -> Any:
        first, rest = _formatter_field_name_split(field_name)
        obj = self.get_value(first, args, kwargs)
        for is_attribute, key in rest:
            obj = self._guards.getattr(obj, key) if is_attribute else self._guards.getitem(obj, key)
        return obj, first

    def get_value(self, key: Any, args: Any, kwargs: Any) -> Any:
        if isinstance(key, int) and key >= len(args):  # CPython's words, not the tuple's
            raise IndexError(f"Replacement index {key} out of range for positional args tuple")
        return super().get_value(key, args, kwargs)

    def format_field(self, value: Any, format_spec: str) -> Any:
        self._guards.limits.check_spec(format_spec)
        return super().format_field(value, format_spec)


def _formatter_field_name_split(field_name: str) -> tuple[Any, Any]:
    return _string.formatter_field_name_split(field_name)  # type: ignore[no-any-return]


class Guards:
    """The guard functions of one executor, sharing its gate, limits and globals."""

    def __init__(
        self,
        limits: Limits,
        sandbox_globals: dict[str, Any],
        data_policy: DataPolicy,
        tool_types: tuple[type, ...],
    ) -> None:
        self.limits = limits
        self.globals = sandbox_globals
        self.data_policy = data_policy
        data_policy.attribute_guard = self.attribute_slow_path  # for the names pandas looks up itself
        self.write_checks = data_policy.write_checks
        self.tool_types = tool_types
        self.formatter = _SafeFormatter(self)
        self.own_types: set[type] = set()
        self.plain_classes: list[type] = []
        self.plain_class_ids: set[int] = set()
        self.match_classes: dict[tuple[int, tuple[str, ...], int], type] = {}
        self.gate: ImportGate  # set by connect(): the gate needs this object's module overrides

    def connect(self, gate: ImportGate) -> None:
        self.gate = gate

    # Attribute and item access ---------------------------------------------
    def make_getattr(self) -> Callable[[Any, str], Any]:
        """``_getattr_`` for names checked at compile time; the fast path is two lookups."""
        modules = ModuleType
        machine = self.gate.machine
        special = self.special_attribute_names()
        slow = self.attribute_slow_path

        def guarded_getattr(obj: Any, name: str) -> Any:
            try:
                value = getattr(obj, name)
            except AttributeError as error:
                if error.obj is obj and error.__context__ is None and error.__cause__ is None:
                    raise
                message = str(error)
            else:
                if type(value) is modules or id(value) in machine or name in special:
                    return slow(obj, name, value)
                return value
            raise AttributeError(message, name=name, obj=obj)  # raised here, it has no context

        return guarded_getattr

    def special_attribute_names(self) -> frozenset[str]:
        """Names whose value `attribute_slow_path` sees whatever it is."""
        return SIZING_METHODS | FORMAT_METHODS | {REGISTER} | self.data_policy.attribute_names

    def attribute_slow_path(self, obj: Any, name: str, value: Any) -> Any:
        value = self.gate.vet(value)
        if name in FORMAT_METHODS and (isinstance(obj, str) or (isinstance(obj, type) and issubclass(obj, str))):
            return self.safe_format(obj, name)
        if name == REGISTER:
            refuse_foreign_register(value, SANDBOX_MODULE)
        if name in SIZING_METHODS and isinstance(obj, (str, bytes)):
            return self.limits.str_method(obj, name, value)
        return self.data_policy.vet_attribute(obj, name, value)

    def safe_format(self, owner: Any, name: str) -> Callable[..., str]:
        formatter = self.formatter
        if isinstance(owner, type):  # str.format(template, ...)
            if name == "format":
                return lambda template, *args, **kwargs: formatter.vformat(template, args, kwargs)
            return lambda template, mapping: formatter.vformat(template, (), mapping)
        if name == "format":
            return lambda *args, **kwargs: formatter.vformat(owner, args, kwargs)
        return lambda mapping: formatter.vformat(owner, (), mapping)

    def getattr(self, obj: Any, name: str, *default: Any) -> Any:
        """The `getattr` builtin: names are checked at run time, since they are data."""
        if not isinstance(name, str):
            raise TypeError(f"attribute name must be a string, not {type(name).__name__}")
        if (name.startswith("_") and name not in READABLE_DUNDERS) or name in FORBIDDEN_ATTRIBUTES:
            raise SandboxViolation(f"the attribute {name!r} is not available in the sandbox", what=f"attribute {name}")
        try:
            value = getattr(obj, name)
        except AttributeError as error:
            message = str(error)  # the error may carry host objects (.obj, its context)
        else:
            return self.attribute_slow_path(obj, name, value)
        if default:
            return default[0]
        raise AttributeError(message, name=name, obj=obj)  # out here, it has no context

    def hasattr(self, obj: Any, name: str) -> bool:
        try:
            self.getattr(obj, name)
        except (AttributeError, SandboxViolation):
            return False
        return True

    # match statements ------------------------------------------------------
    def match_class(self, cls: Any, keywords: tuple[str, ...], positional: int) -> Any:
        """``_match_class_``: what stands in a class pattern with sub-patterns for `cls`.

        The pattern reads the subject's attributes in C, where no guard runs. So it
        gets a stand-in class whose ``isinstance`` check (run by the match before it
        reads anything) vets each attribute the pattern will read as `getattr` would,
        and refuses the match if the guard would refuse the name or give something
        other than what C will read. ``case int(x)`` on a builtin that matches itself
        reads no attribute and keeps the class. Ordinary patterns (``case Point(x=0)``
        on the code's dataclasses, ``case str(s)``, host namedtuples) work unchanged."""
        cls = real_type(cls)
        if not isinstance(cls, type):
            return cls  # the match raises its own TypeError when it gets there
        if not keywords and positional == 1 and _matches_itself(cls):
            return cls
        key = (id(cls), keywords, positional)  # the stand-in keeps the class alive, so its id
        stand_in = self.match_classes.get(key)
        if stand_in is None:
            namespace = {"real": cls, "keywords": keywords, "positional": positional, "guards": self}
            stand_in = self.match_classes[key] = _MatchGuardType(cls.__name__, (), namespace)
        return stand_in

    def match_attributes(self, subject: Any, real: type, keywords: tuple[str, ...], positional: int) -> bool:
        """The stand-in's ``isinstance``: the real check, then the vetting of every attribute read."""
        if not isinstance(subject, real):
            return False
        names: list[Any] = list(keywords)
        if positional:
            match_args = _read(real, "__match_args__")
            if match_args is _MISSING:
                if _matches_itself(real) and keywords:
                    raise SandboxViolation(
                        f"case {real.__name__}(x, name=...) is not supported here; "
                        f"write case {real.__name__}(name=...) as x"
                    )
            elif type(match_args) is tuple:
                names.extend(match_args[:positional])
        for name in names:
            if not isinstance(name, str):
                continue  # the match raises its own TypeError
            if (name.startswith("_") and name not in READABLE_DUNDERS) or name in FORBIDDEN_ATTRIBUTES:
                raise SandboxViolation(f"a match pattern cannot read the attribute {name!r} in the sandbox")
            value = _read(subject, name)
            if value is _MISSING:
                continue  # the pattern fails, as in Python
            if self.attribute_slow_path(subject, name, value) is not value:
                raise SandboxViolation(
                    f"a match pattern cannot read {name!r} of {a(repr(type(subject).__name__))} object in the sandbox; "
                    f"match {real.__name__}() and read .{name} in the case body"
                )
        return True

    def match_value(self, value: Any) -> _Held:
        """``_match_value_``: a dotted value pattern's value, read through the guards before the match."""
        return _Held(value)

    def make_getitem(self) -> Callable[[Any, Any], Any]:
        modules = ModuleType
        machine = self.gate.machine
        vet = self.gate.vet

        def guarded_getitem(obj: Any, key: Any) -> Any:
            value = obj[key]
            if type(value) is modules or id(value) in machine:
                return vet(value)
            return value

        return guarded_getitem

    def getitem(self, obj: Any, key: Any) -> Any:
        return self.gate.vet(obj[key])

    # Augmented assignment to items and attributes ----------------------------
    def augmented(self) -> dict[str, Callable[..., Any]]:
        """The guards `policy.visit_AugAssign` calls: ``a[k] op= v`` reads ``a[k]`` as
        ``_getitem_`` does, applies ``op`` as ``_inplacevar_`` does (in place, sized),
        and stores the result; ``a.name op= v`` reads through ``_getattr_`` from an object
        ``_write_`` accepts. Each whole, or read then stored, when `v` is evaluated between."""
        getitem, getattr_, write = self.make_getitem(), self.make_getattr(), self.make_write()
        inplace = self.limits.inplace
        own_types, modules, machine, slow = self.own_types, ModuleType, self.gate.machine, self.attribute_slow_path
        special = self.special_attribute_names()
        numeric = _NUMERIC_INPLACE  # between ints and floats, these cannot grow a value: no sizing call

        def item(operator: str, obj: Any, key: Any, value: Any) -> None:
            current = obj[key]
            if type(current) is modules or id(current) in machine:
                current = getitem(obj, key)
            kind, other = type(current), type(value)
            if (kind is int or kind is float) and (other is int or other is float):
                if operator == "+=":  # the common case, without a call
                    obj[key] = current + value
                    return
                if operator in numeric:
                    obj[key] = numeric[operator](current, value)
                    return
            obj[key] = inplace(operator, current, value)

        def read_item(obj: Any, key: Any) -> tuple[Any, Any, Any]:
            return obj, key, getitem(obj, key)

        def store_item(operator: str, obj: Any, key: Any, current: Any, value: Any) -> None:
            obj[key] = inplace(operator, current, value)

        def attribute(operator: str, obj: Any, name: str, value: Any) -> None:
            target = obj if type(obj) in own_types else write(obj)
            try:
                current = getattr(obj, name)
            except AttributeError:
                current = getattr_(obj, name)  # raises it as the guard does, without the host's context
            else:
                if type(current) is modules or id(current) in machine or name in special:
                    current = slow(obj, name, current)
            kind, other = type(current), type(value)
            if (kind is int or kind is float) and (other is int or other is float):
                if operator == "+=":  # the common case, without a call
                    setattr(target, name, current + value)
                    return
                if operator in numeric:
                    setattr(target, name, numeric[operator](current, value))
                    return
            setattr(target, name, inplace(operator, current, value))

        def read_attribute(obj: Any, name: str) -> tuple[Any, str, Any]:
            return write(obj), name, getattr_(obj, name)

        def store_attribute(operator: str, obj: Any, name: str, current: Any, value: Any) -> None:
            setattr(obj, name, inplace(operator, current, value))

        functions: dict[str, tuple[Callable[..., Any], ...]] = {
            "item": (item, read_item, store_item),
            "attribute": (attribute, read_attribute, store_attribute),
        }
        return {
            name: function
            for kind, names in AUGMENTED.items()
            for name, function in zip(names, functions[kind], strict=True)
        }

    # Writes --------------------------------------------------------------
    def make_write(self) -> Callable[[Any], Any]:
        """``_write_``; instances of the code's own classes pass on a set lookup."""
        own_types = self.own_types
        check = self.write

        def guarded_write(obj: Any) -> Any:
            if type(obj) in own_types:
                return obj
            return check(obj)

        return guarded_write

    def write(self, obj: Any) -> Any:
        """Attributes may be set on the code's own objects and on data objects, not on
        modules, classes and functions that came from outside (that would change the host)."""
        kind = type(obj)
        if kind is ModuleType or kind in (BuiltinFunctionType, MethodType) or kind in self.tool_types:
            raise SandboxViolation(f"cannot set attributes on {_describe(obj)}: it belongs to the host")
        if isinstance(obj, type) and obj.__module__ != SANDBOX_MODULE:
            raise SandboxViolation(f"cannot set attributes on the class {obj.__name__!r}: it belongs to the host")
        if id(obj) in self.plain_class_ids:
            return ClassWriter(obj)
        if kind is FunctionType and obj.__globals__ is not self.globals:
            raise SandboxViolation(f"cannot set attributes on {_describe(obj)}: it belongs to the host")
        if id(obj) in self.gate.machine:
            raise SandboxViolation(f"cannot set attributes on {_describe(obj)}: it belongs to the host")
        if kind is dataclasses.Field:
            raise SandboxViolation("cannot set attributes on a dataclass field: dataclasses read the names it holds")
        check = self.write_checks.get(kind)
        if check is not None:
            check(obj)
        if kind.__module__ == SANDBOX_MODULE:
            self.own_types.add(kind)
        return obj

    def setattr(self, obj: Any, name: str, value: Any) -> None:
        self._check_name(name)
        setattr(self.write(obj), name, value)

    def delattr(self, obj: Any, name: str) -> None:
        self._check_name(name)
        delattr(self.write(obj), name)

    @staticmethod
    def _check_name(name: Any) -> None:
        if not isinstance(name, str) or name.startswith("_") or name in FORBIDDEN_ATTRIBUTES:
            raise SandboxViolation(
                f"the attribute {name!r} is not available in the sandbox", what=f"attribute {name!s}"
            )

    # functools.update_wrapper ------------------------------------------------
    def wrapper_names(self, assigned: Any, updated: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The names update_wrapper may copy: its defaults, and public names."""
        checked = []
        for names, defaults in ((assigned, functools.WRAPPER_ASSIGNMENTS), (updated, functools.WRAPPER_UPDATES)):
            names = tuple(names)
            for name in names:
                if name not in defaults:
                    self._check_name(name)
            checked.append(names)
        return checked[0], checked[1]

    def wrapper_read(self, obj: Any, name: str) -> Any:
        """An attribute update_wrapper copies, vetted as the guards would; `_MISSING` if absent."""
        if not name.startswith("_"):
            return self.getattr(obj, name, _MISSING)
        value = _read(obj, name)
        return value if value is _MISSING else self.gate.vet(value)

    # Exceptions ----------------------------------------------------------
    @staticmethod
    def handled() -> None:
        """First statement of every ``except`` block and ``__exit__``: the sandbox's
        signals (limits, final_answer) and host interrupts pass through unhandled.
        Other exceptions, GeneratorExit included, are handled as in CPython."""
        error = sys.exc_info()[1]
        if isinstance(error, _UNCATCHABLE):
            raise error
        if isinstance(error, BaseExceptionGroup):  # except* wraps what it catches in a group
            signal = _signal_in(error)
            if signal is not None:
                raise signal

    # Builtins ------------------------------------------------------------
    def builtins(self, print_function: Callable[..., None]) -> dict[str, Any]:
        names = {name: getattr(builtins, name) for name in _SAFE_BUILTIN_NAMES + _exception_names()}
        limits = self.limits
        names.update(
            __build_class__=self.build_class,
            __import__=self.gate.import_module,
            print=print_function,
            getattr=self.getattr,
            hasattr=self.hasattr,
            setattr=self.setattr,
            delattr=self.delattr,
            format=limits.format,
            pow=limits.pow,
            round=limits.round,
            dir=dir,
        )
        stand_ins: dict[Any, BuiltinType] = {
            range: BuiltinType(range, limits.range),
            bytes: BuiltinType(bytes, limits.sized(bytes)),
            bytearray: BuiltinType(bytearray, limits.sized(bytearray)),
        }

        def type_call(*args: Any) -> Any:
            kind = type_of(*args)
            return stand_ins.get(kind, kind)  # so that `type(data) is bytes` holds, and its call is guarded

        stand_ins[type] = BuiltinType(type, type_call)
        names.update((real.__name__, stand_in) for real, stand_in in stand_ins.items())
        return names

    def guard_names(self) -> dict[str, Any]:
        """The names the instrumented code calls (all start with ``_``, so the code cannot rebind them)."""
        limits = self.limits
        return {
            "_getattr_": self.make_getattr(),
            "_getitem_": self.make_getitem(),
            "_write_": self.make_write(),
            "_slice_": slice,
            "_each_": itertools.compress,
            "_handled_": self.handled,
            "_add_": limits.add,
            "_mul_": limits.mul,
            "_pow_": limits.pow,
            "_lshift_": limits.lshift,
            "_mod_": limits.mod,
            "_inplacevar_": limits.inplace,
            "_iadd_": limits.iadd,
            "_type_": type,
            "_id_": id,
            "_int_": int,
            "_float_": float,
            "_factor_low_": -limits.small_factor,  # two ints within these multiply without a guard
            "_factor_high_": limits.small_factor,
            CLASS_IDS: self.plain_class_ids,
            PLAIN_RECEIVER: [None, None],
            "_format_": limits.formatted_value,
            MATCH_CLASS: self.match_class,
            MATCH_VALUE: self.match_value,
            **self.augmented(),
            SIZE_ANSWER: lambda name: functools.partial(limits.checked_special, name),
            "__name__": SANDBOX_MODULE,
        }

    def build_class(self, function: Any, name: str, *bases: Any, **keywords: Any) -> type:
        """The class statement, refusing metaclasses made by subclassing `type`; a plain class is
        registered (see `receivers`), and kept, so that its id stays its own."""
        refuse_metaclass_bases(name, bases)
        cls: type = builtins.__build_class__(function, name, *bases, **keywords)
        if plain_class(cls, self.plain_class_ids):
            self.plain_classes.append(cls)
            self.plain_class_ids.add(id(cls))
        return cls

    # Per-module replacements -------------------------------------------------
    def module_overrides(
        self, deadline: Callable[[], float | None], pause: Callable[[float], object] = time.sleep
    ) -> Callable[[str], dict[str, Any]]:
        """What replaces some attributes of some modules inside the sandbox; `pause` sleeps, and
        may wake early for a block that is being stopped."""
        import random

        private_random = random.Random()
        limits = self.limits

        def sleep(seconds: float) -> None:
            """time.sleep that ends at the block's deadline; between blocks there is no time to spend."""
            until = deadline()
            if until is None:
                raise BudgetSpentOutsideRun("code defined in the sandbox cannot sleep outside a run")
            if time.monotonic() + seconds > until:
                pause(max(0.0, until - time.monotonic()))
                raise TimeLimitReached
            pause(seconds)

        def attrgetter(*names: str) -> Callable[[Any], Any]:
            """operator.attrgetter, reading each attribute through the sandbox's getattr."""

            def get_one(obj: Any, dotted: str) -> Any:
                for part in dotted.split("."):
                    obj = self.getattr(obj, part)
                return obj

            for name in names:
                for part in str(name).split("."):
                    self._check_name(part)
            if len(names) == 1:
                return lambda obj: get_one(obj, names[0])
            return lambda obj: tuple(get_one(obj, name) for name in names)

        def methodcaller(name: str, *args: Any, **kwargs: Any) -> Callable[[Any], Any]:
            """operator.methodcaller, finding the method through the sandbox's getattr."""
            self._check_name(name)
            return lambda obj: self.getattr(obj, name)(*args, **kwargs)

        def update_wrapper(
            wrapper: Any,
            wrapped: Any,
            assigned: Any = functools.WRAPPER_ASSIGNMENTS,
            updated: Any = functools.WRAPPER_UPDATES,
        ) -> Any:
            """functools.update_wrapper, reading and writing through the sandbox's guards: its
            own special names (``__name__``, ``__doc__``, ``__dict__``...) as Python does,
            any other name as `getattr` and `setattr` would (so ``__globals__`` is refused)."""
            assigned, updated = self.wrapper_names(assigned, updated)
            self.write(wrapper)
            for name in assigned:
                value = self.wrapper_read(wrapped, name)
                if value is not _MISSING:
                    (setattr if name.startswith("_") else self.setattr)(wrapper, name, value)
            for name in updated:
                target = self.wrapper_read(wrapper, name)
                source = self.wrapper_read(wrapped, name)
                if target is _MISSING:
                    raise AttributeError(f"{type(wrapper).__name__!r} object has no attribute {name!r}")
                target.update({} if source is _MISSING else source)
            wrapper.__wrapped__ = wrapped
            return wrapper

        def wraps(
            wrapped: Any, assigned: Any = functools.WRAPPER_ASSIGNMENTS, updated: Any = functools.WRAPPER_UPDATES
        ) -> Callable[[Any], Any]:
            """functools.wraps, applying the sandbox's update_wrapper."""
            assigned, updated = self.wrapper_names(assigned, updated)
            return functools.partial(update_wrapper, wrapped=wrapped, assigned=assigned, updated=updated)

        guards = self

        class Formatter(_SafeFormatter):
            """string.Formatter for the code: fields and specs guarded like str.format."""

            def __init__(self) -> None:
                super().__init__(guards)

        table: dict[str, dict[str, Any]] = {
            "random": {
                name: getattr(private_random, name)
                for name in dir(random.Random)
                if not name.startswith("_") and callable(getattr(private_random, name))
            },
            "time": {
                "sleep": sleep,
                "clock_settime": REFUSED,  # sets the machine's clock when run as root
                "clock_settime_ns": REFUSED,
                "tzset": REFUSED,  # changes the host process's time zone
            },
            "operator": {"attrgetter": attrgetter, "methodcaller": methodcaller, **limits.operator_functions()},
            "string": {"Formatter": Formatter},
            "itertools": ticking_itertools(lambda: self.globals["_tick_"]),
            "math": {
                **{
                    name: limits.math_function(name, getattr(__import__("math"), name))
                    for name in ("factorial", "comb", "perm")
                },
                "prod": limits.prod,
                "lcm": limits.lcm,
            },
            "typing": {"get_type_hints": get_type_hints},  # typing's evaluates strings as code
            "functools": {
                "singledispatch": REFUSED,  # same
                "singledispatchmethod": REFUSED,
                "update_wrapper": update_wrapper,  # reads and writes the attributes it is told
                "wraps": wraps,
            },
            "dataclasses": {"make_dataclass": REFUSED},  # takes a namespace of any names
        }
        for module, rules in library_rules(self.write, self.getitem).items():
            table.setdefault(module, {}).update(rules)
        table["random"]["Random"] = random.Random
        table["random"]["SystemRandom"] = REFUSED

        def overrides(name: str) -> dict[str, Any]:
            if name in NUMPY_RANDOM_MODULES and name not in table:  # made when numpy is first imported
                table[name] = private_numpy_random()
            return table.get(name, {})

        return overrides


def _signal_in(group: BaseExceptionGroup[Any]) -> BaseException | None:
    """The first of the sandbox's signals (and host interrupts) inside an exception group."""
    for error in group.exceptions:
        found = _signal_in(error) if isinstance(error, BaseExceptionGroup) else error
        if isinstance(found, _UNCATCHABLE):
            return found
    return None


def _describe(obj: Any) -> str:
    name = getattr(obj, "__name__", None)
    return f"{type(obj).__name__} {name!r}" if isinstance(name, str) else f"{a(type(obj).__name__)} object"


_MISSING = object()
#: Augmented operators that, between ints and floats, cannot build a value larger than their operands:
#: the in-place forms, which name the statement's operator in their errors (``1.5 &= 2``), as CPython's do.
_NUMERIC_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "+=": operator.iadd,
    "-=": operator.isub,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    "%=": operator.imod,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
    ">>=": operator.irshift,
}
#: CPython's flag for the builtins that a one-argument class pattern matches itself (int(x)).
_MATCH_SELF = 1 << 22


def _read(obj: Any, name: str) -> Any:
    """``getattr(obj, name)``, or `_MISSING`; the AttributeError, which may carry host
    objects in ``obj`` or its context, goes no further."""
    try:
        return getattr(obj, name)
    except AttributeError:
        return _MISSING


def _matches_itself(cls: type) -> bool:
    return bool(cls.__flags__ & _MATCH_SELF) and _read(cls, "__match_args__") is _MISSING


class _MatchGuardType(type):
    """The type of the stand-ins of `Guards.match_class`."""

    real: type
    keywords: tuple[str, ...]
    positional: int
    guards: Guards

    def __instancecheck__(cls, subject: Any) -> bool:
        return cls.guards.match_attributes(subject, cls.real, cls.keywords, cls.positional)

    @property
    def __match_args__(cls) -> Any:  # read by the match from the stand-in, after the check
        return getattr(cls.real, "__match_args__")  # noqa: B009  # AttributeError when it has none


class _Held:
    """A dotted value pattern's value, read by the pattern as ``held.value``."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value
