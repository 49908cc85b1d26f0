"""Budgets and size caps: the limits the model's code meets while it runs.

Two kinds of limit live here. *Signals* (operation budget, time, memory) stop
the block: they derive from `BaseException`, and the instrumented code re-raises
them from every ``except`` block, so the model cannot catch them. *Size caps*
refuse one operation that would build a huge value in a single C-level step
(`10**10**10`, ``'a' * 10**12``, a width of a billion in a format spec), which
no timer could interrupt; they raise `SizeLimitError`, an ordinary exception.
"""

from __future__ import annotations

import collections
import itertools
import math
import operator
import re
from collections.abc import Callable, Iterator
from types import FunctionType
from typing import Any

__all__ = [
    "BlockInterrupted",
    "BudgetSpentOutsideRun",
    "Limits",
    "MemoryLimitReached",
    "OperationLimitReached",
    "SandboxSignal",
    "SizeLimitError",
    "TimeLimitReached",
    "make_tick",
]


class SandboxSignal(BaseException):
    """Stops the model's code; instrumented ``except`` blocks re-raise it."""


class OperationLimitReached(SandboxSignal):
    """The block used up its operation budget (loop iterations and calls)."""


class TimeLimitReached(SandboxSignal):
    """The block ran past its time limit (raised into the running thread)."""


class MemoryLimitReached(SandboxSignal):
    """The process grew past the memory allowance while the block ran."""


class BlockInterrupted(SandboxSignal):
    """The caller stopped the block (`interrupt()`, or an `on_output` callback that failed)."""


class BudgetSpentOutsideRun(RuntimeError):
    """Code defined in the sandbox was called between blocks (a callback, a cache's comparison,
    a method of an object it left with the host), where it has no budget: it runs only in blocks."""


class SizeLimitError(MemoryError):
    """One operation would build a value larger than the sandbox allows."""


class _Exhausted:
    """The iterator after the budget: every further tick raises."""

    def __init__(self, error: type[BaseException]) -> None:
        self.error = error

    def __iter__(self) -> _Exhausted:
        return self

    def __next__(self) -> bool:
        raise self.error(
            "code defined in the sandbox runs only inside its blocks; it was called between blocks"
            if self.error is BudgetSpentOutsideRun
            else ""
        )


def make_tick(operations: int, error: type[BaseException] = OperationLimitReached) -> Callable[[], bool]:
    """A tick for `operations` steps: a C-level ``next`` on a counter, so cheap.

    It returns True, so that it can sit inside lambdas and comprehension
    conditions, and raises `OperationLimitReached` once the budget is spent.
    """
    return itertools.chain(itertools.repeat(True, operations), _Exhausted(error)).__next__


_PERCENT_FIELD = re.compile(rb"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")
_SPEC_NUMBER = re.compile(r"\d+")
#: Values whose `+` and `*` build a copy as long as the operands together.
_SEQUENCES = (str, bytes, bytearray, list, tuple)
#: Sequences the C code of `*` repeats: the builtins, and the standard containers like them.
_REPEATABLE = (*_SEQUENCES, collections.deque, collections.UserList, collections.UserString)
_LENGTHS: tuple[Any, ...] = (*_SEQUENCES, collections.deque)
#: What ``%`` formats with a template, whose widths build the result: bytearray's too.
_FORMATTED = (str, bytes, bytearray)
_mul: Callable[[Any, Any], Any] = operator.mul
_iadd: Callable[[Any, Any], Any] = operator.iadd
_imul: Callable[[Any, Any], Any] = operator.imul
_ipow: Callable[[Any, Any], Any] = operator.ipow
_ilshift: Callable[[Any, Any], Any] = operator.ilshift
_imod: Callable[[Any, Any], Any] = operator.imod
_iconcat: Callable[[Any, Any], Any] = operator.iconcat
#: The augmented operators that cannot grow a value past its operands' size.
_INPLACE: dict[str, Callable[[Any, Any], Any]] = {
    "-=": operator.isub,
    "@=": operator.imatmul,
    "/=": operator.itruediv,
    "//=": operator.ifloordiv,
    ">>=": operator.irshift,
    "&=": operator.iand,
    "|=": operator.ior,
    "^=": operator.ixor,
}


def _has_len(value: Any) -> bool:
    return hasattr(type(value), "__len__")


def _is_buffer(value: Any) -> bool:
    try:
        memoryview(value).release()
    except TypeError:
        return False
    return True


def _bound_call(method: Any) -> Callable[[Any], Any]:
    """How CPython calls a special method that is not a plain function: bound
    through its ``__get__`` if it has one, called as it is otherwise."""

    def call(obj: Any) -> Any:
        get = getattr(type(method), "__get__", None)
        return (get(method, obj, type(obj)) if get is not None else method)()

    return call


def _countable(value: Any) -> bool:
    """Not an int, but what C code can read a count from."""
    return not isinstance(value, int) and hasattr(type(value), "__index__")


def _exact(value: int) -> int:
    """The value of an int (a bool, an instance of a subclass) as int's own operators read it:
    through int's own method, never the object's ``__index__``, ``__int__`` or comparisons."""
    return value if type(value) is int else int.__index__(value)


_ABSENT = object()
#: int's own methods that can build a large int, by id: the operation each computes, and
#: whether it takes its operands reflected (``int.__rlshift__(b, a)`` is ``a << b``).
_INT_GROWING: dict[int, tuple[str, bool]] = {
    id(int.__dict__[f"__{reflected}{name}__"]): (name, reflected == "r")
    for name in ("mul", "pow", "lshift")
    for reflected in ("", "r")
}
_SYMBOLS = {"mul": "*", "pow": "** or pow()", "lshift": "<<"}


def _lookup(kind: type, name: str) -> Any:
    """What CPython finds for the special method `name` of `kind`: the first class of its
    MRO that holds it, read from the class dicts (no descriptor, no ``__getattr__`` runs)."""
    for klass in kind.__mro__:
        found = klass.__dict__.get(name, _ABSENT)
        if found is not _ABSENT:
            return found
    return _ABSENT


def _size(value: Any) -> int:
    """The length of a value as the C code of `+` and `*` sees it: a builtin sequence's
    (or deque's) own, and a UserList's or UserString's data's. A subclass's own
    ``__len__`` (the model's code) may say anything."""
    if type(value) in _SEQUENCES:
        return len(value)
    for base in _LENGTHS:
        if isinstance(value, base):
            length: int = base.__len__(value)
            return length
    if isinstance(value, (collections.UserList, collections.UserString)):
        data = value.data
        return _size(data) if _has_len(data) else 0
    return len(value)


class Limits:
    """Size caps, bound to one executor's settings.

    `max_size` bounds the items (or characters) one operation may build;
    `max_int_bits` bounds the integers arithmetic may build.
    """

    def __init__(self, max_size: int, max_int_bits: int, tick: Callable[[], Callable[[], bool]]) -> None:
        self.max_size = max_size
        self.max_int_bits = max_int_bits
        # Two ints below it multiply within the cap; kept to a machine word, so comparing is cheap.
        self.small_factor = 1 << min(31, max_int_bits // 2)
        self.current_tick = tick
        self.index_room: int | None = None  # see `repeat`

    # Errors the model reads ---------------------------------------------
    def too_big(self, what: str, size: float) -> SizeLimitError:
        return SizeLimitError(
            f"{what} would build a value of about {size:.3g} items; the sandbox allows "
            f"{self.max_size:,}. Work on smaller pieces."
        )

    def too_many_bits(self, what: str, bits: float) -> SizeLimitError:
        return SizeLimitError(
            f"{what} would build an integer of about {bits:.3g} bits; the sandbox allows "
            f"{self.max_int_bits:,} bits (about {int(self.max_int_bits * 0.30103):,} digits)."
        )

    # Operators -------------------------------------------------------------
    def add(self, a: Any, b: Any) -> Any:
        kind = type(a)
        if kind is int or kind is float:  # most additions, settled before the slower isinstance
            return a + b
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
            size = _size(a) + _size(b)
            if size > self.max_size:
                raise self.too_big("this concatenation", size)
        return a + b

    def mul(self, a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is float or tb is float:
            return a * b
        if ta is int and tb is int:
            small = self.small_factor
            if -small < a < small and -small < b < small:  # the product fits the cap: no bit counting
                return a * b
            bits = a.bit_length() + b.bit_length()
            if bits > self.max_int_bits:
                raise self.too_many_bits("this multiplication", bits)
            return a * b
        if isinstance(a, int) and isinstance(b, int):  # a bool, a subclass: int's own product, or the code's
            return self.int_operation(a, b, "mul")
        return self.repeat(a, b, _mul)

    def repeat(self, a: Any, b: Any, multiply: Callable[[Any, Any], Any]) -> Any:
        """``a * b`` where either may be a sequence repeated by the other: the size is
        checked first. A count that is not an int but has ``__index__`` (a numpy integer,
        an object of the code's) is what C code reads the count from: read once here
        and passed on as an int when nothing else can answer the ``*``; otherwise its
        ``__index__`` answers at most the room left while the ``*`` runs (`index_room`,
        which the code's own ``__index__`` methods obey)."""
        if isinstance(a, int) and _has_len(b):
            self.check_repeat(b, a if type(a) is int else int.__index__(a))  # `_exact`, inline
        elif isinstance(b, int) and _has_len(a):
            self.check_repeat(a, b if type(b) is int else int.__index__(b))  # `_exact`, inline
        elif isinstance(a, _REPEATABLE) and _countable(b):
            return self.repeat_by_object(a, b, lambda count: multiply(a, count), lambda: multiply(a, b))
        elif isinstance(b, _REPEATABLE) and _countable(a):
            return self.repeat_by_object(b, a, lambda count: multiply(count, b), lambda: multiply(a, b))
        return multiply(a, b)

    def repeat_by_object(
        self, sequence: Any, count: Any, by_int: Callable[[int], Any], as_written: Callable[[], Any]
    ) -> Any:
        kind = type(count)
        if type(sequence) in _SEQUENCES and not (hasattr(kind, "__mul__") or hasattr(kind, "__rmul__")):
            times = operator.index(count)  # what CPython's repetition reads, read once
            self.check_repeat(sequence, times)
            return by_int(times)
        if getattr(getattr(kind, "__index__", None), "__code__", None) is not _CHECKED_INDEX:
            self.check_repeat(sequence, operator.index(count))  # the host's __index__: the same each time
        room = self.index_room
        self.index_room = self.max_size // max(1, _size(sequence))
        try:
            return as_written()
        finally:
            self.index_room = room

    def checked_special(self, name: str, method: Any) -> Any:
        """The code's own special method `name` (as found in its class), whose answer
        C code uses as a size, made to check it: ``__len__`` and ``__length_hint__``
        (``tuple()`` allocates by them) at most `max_size`, ``__index__`` (a count)
        within `index_room` while a repetition runs."""
        limits = self
        call = method if isinstance(method, FunctionType) else _bound_call(method)
        if name == "__index__":

            def __index__(self: Any) -> Any:
                value = call(self)
                room = limits.index_room
                if room is not None and isinstance(value, int) and _exact(value) > room:
                    raise limits.too_big("this repetition", _exact(value) * (limits.max_size / room))
                return value

            checked: Callable[[Any], Any] = __index__
        else:

            def __len__(self: Any) -> Any:
                length = call(self)
                if isinstance(length, int) and _exact(length) > limits.max_size:
                    raise limits.too_big(
                        f"{name} of {type(self).__name__!r}, which C code allocates by,", _exact(length)
                    )
                return length

            checked = __len__
        checked.__name__ = name
        checked.__qualname__ = getattr(method, "__qualname__", name)
        checked.__doc__ = getattr(method, "__doc__", None)
        return checked

    def check_repeat(self, sequence: Any, times: int) -> None:
        if isinstance(sequence, _REPEATABLE) and times > 0:
            size = _size(sequence) * times
            if size > self.max_size:
                raise self.too_big("this repetition", size)

    def pow(self, a: Any, b: Any, modulo: Any = None) -> Any:
        if modulo is not None:
            return pow(a, b, modulo)
        if type(a) is int and type(b) is int:
            if b > 0 and abs(a) > 1:
                bits = a.bit_length() * b
                if bits > self.max_int_bits:
                    raise self.too_many_bits(f"{a} ** {b}", bits)
            return a**b
        if isinstance(a, int) and isinstance(b, int):
            return self.int_operation(a, b, "pow")
        return a**b

    def lshift(self, a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int:
            if a and a.bit_length() + b > self.max_int_bits:
                raise self.too_many_bits("this shift", a.bit_length() + b)
            return a << b
        if isinstance(a, int) and isinstance(b, int):
            return self.int_operation(a, b, "lshift")
        return a << b

    # Ints that are not exactly int ---------------------------------------
    def check_int(self, operation: str, a: int, b: int) -> None:
        """Refuse what int's own `operation` ("mul", "pow", "lshift") would build from the
        exact ints `a` and `b` past `max_int_bits`."""
        if operation == "mul":
            bits = a.bit_length() + b.bit_length()
            if bits > self.max_int_bits:
                raise self.too_many_bits("this multiplication", bits)
        elif operation == "pow":
            if b > 0 and abs(a) > 1 and a.bit_length() * b > self.max_int_bits:
                raise self.too_many_bits(f"{a} ** {b}", a.bit_length() * b)
        elif a and a.bit_length() + b > self.max_int_bits:
            raise self.too_many_bits("this shift", a.bit_length() + b)

    def call_special(self, method: Any, obj: Any, other: Any) -> Any:
        """``method`` (found in the class of `obj`) called on `obj` and `other` as CPython's
        operators call it; int's own growing methods with their size checked first."""
        known = _INT_GROWING.get(id(method))  # int's methods live as long as int: an id is theirs
        if known is not None:
            operation, reflected = known
            left, right = (other, obj) if reflected else (obj, other)
            if isinstance(left, int) and isinstance(right, int):
                self.check_int(operation, _exact(left), _exact(right))
            return method(obj, other)
        if isinstance(method, FunctionType):
            return method(obj, other)
        get = getattr(type(method), "__get__", None)
        return (get(method, obj, type(obj)) if get is not None else method)(other)

    def int_operation(self, a: int, b: int, operation: str) -> Any:
        """``a * b``, ``a ** b`` or ``a << b`` between two ints of which one is a bool or an
        instance of a subclass: CPython's dispatch (the right operand's reflected method first
        when its class is a subclass of the left's that overrides it, then the left's method,
        then the right's), with every call of int's own method sized first on the two ints'
        exact values. A method of the code's runs as it is, guarded code itself."""
        kind, other = type(a), type(b)
        forward, reflected = f"__{operation}__", f"__r{operation}__"
        mine, theirs = _lookup(kind, forward), _lookup(other, reflected)
        if other is kind:
            theirs = _ABSENT
        elif theirs is not _ABSENT and issubclass(other, kind) and theirs is not _lookup(kind, reflected):
            result = self.call_special(theirs, b, a)
            if result is not NotImplemented:
                return result
            theirs = _ABSENT
        if mine is not _ABSENT:
            result = self.call_special(mine, a, b)
            if result is not NotImplemented:
                return result
        if theirs is not _ABSENT:
            result = self.call_special(theirs, b, a)
            if result is not NotImplemented:
                return result
        raise TypeError(
            f"unsupported operand type(s) for {_SYMBOLS[operation]}: {kind.__name__!r} and {other.__name__!r}"
        )

    def int_inplace(self, a: int, b: int, operation: str) -> Any:
        """``a op= b`` between two ints of which one is not exactly int: the left one's own
        in-place method if its class has one (int has none), then `int_operation`."""
        method = _lookup(type(a), f"__i{operation}__")
        if method is not _ABSENT:
            result = self.call_special(method, a, b)
            if result is not NotImplemented:
                return result
        return self.int_operation(a, b, operation)

    def mod(self, a: Any, b: Any) -> Any:
        kind = type(a)
        if kind is int or kind is float:  # most uses, settled before the isinstance
            return a % b
        if isinstance(a, _FORMATTED):
            self.check_percent_format(a, b)
        return a % b

    def iadd(self, a: Any, b: Any) -> Any:
        """``a += b``: `inplace` with the sums of numbers settled first, without its dispatch; in
        place even then, as the statement is, so that an error names ``+=`` as CPython's does."""
        kind = type(a)
        if kind is int or kind is float:
            return _iadd(a, b)
        return self.inplace("+=", a, b)

    def inplace(self, operator: str, a: Any, b: Any) -> Any:
        """``a op= b``, in place where the value can be changed in place (a list, an
        array, an object with ``__iadd__``...), as CPython does; the operators that can
        grow a value are sized first, as their plain forms are. Each ends in the in-place
        function (``operator.imod``), never the plain one (``a % b``): only it tries the
        code's own ``__imod__`` before ``__mod__`` and ``__rmod__``, and names ``%=`` in
        its error, as CPython's statement does. Between two ints the sized plain form
        stands in: ints have no in-place methods, so the two cannot differ."""
        if operator == "+=":
            self.check_concat_inplace(a, b)
            return _iadd(a, b)
        if operator == "*=":
            ta, tb = type(a), type(b)
            if ta is int and tb is int:
                if a.bit_length() + b.bit_length() > self.max_int_bits:
                    raise self.too_many_bits("this multiplication", a.bit_length() + b.bit_length())
            elif isinstance(a, int) and isinstance(b, int):
                return self.int_inplace(a, b, "mul")
            elif ta is not float and tb is not float:
                return self.repeat(a, b, _imul)
            return _imul(a, b)
        if operator == "**=":
            if type(a) is int and type(b) is int:
                return self.pow(a, b)
            return self.int_inplace(a, b, "pow") if isinstance(a, int) and isinstance(b, int) else _ipow(a, b)
        if operator == "<<=":
            if type(a) is int and type(b) is int:
                return self.lshift(a, b)
            return self.int_inplace(a, b, "lshift") if isinstance(a, int) and isinstance(b, int) else _ilshift(a, b)
        if operator == "%=":
            if isinstance(a, _FORMATTED):
                self.check_percent_format(a, b)
            return _imod(a, b)
        return _INPLACE[operator](a, b)

    def check_concat_inplace(self, a: Any, b: Any) -> None:
        if isinstance(a, _SEQUENCES):
            if isinstance(a, (list, bytearray)):  # extended in place by any iterable
                if _has_len(b) and _size(a) + _size(b) > self.max_size:
                    raise self.too_big("this concatenation", _size(a) + _size(b))
            elif isinstance(b, _SEQUENCES) and _size(a) + _size(b) > self.max_size:
                raise self.too_big("this concatenation", _size(a) + _size(b))

    def operator_functions(self) -> dict[str, Callable[..., Any]]:
        """The functions of the `operator` module that apply an operator the sandbox sizes
        (``operator.lshift``, ``operator.imul``, ``operator.concat``...), sized as it is."""
        limits = self

        def pow(a: Any, b: Any) -> Any:
            return limits.pow(a, b)

        def concat(a: Any, b: Any) -> Any:
            if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES) and _size(a) + _size(b) > limits.max_size:
                raise limits.too_big("this concatenation", _size(a) + _size(b))
            return operator.concat(a, b)

        def iconcat(a: Any, b: Any) -> Any:
            limits.check_concat_inplace(a, b)
            return _iconcat(a, b)

        def inplace(name: str, symbol: str) -> Callable[[Any, Any], Any]:
            def apply(a: Any, b: Any) -> Any:
                return limits.inplace(symbol, a, b)

            apply.__name__ = apply.__qualname__ = name
            return apply

        functions: dict[str, Callable[..., Any]] = {
            "add": self.add,
            "mul": self.mul,
            "pow": pow,
            "lshift": self.lshift,
            "mod": self.mod,
            "concat": concat,
            "iconcat": iconcat,
            "iadd": inplace("iadd", "+="),
            "imul": inplace("imul", "*="),
            "ipow": inplace("ipow", "**="),
            "ilshift": inplace("ilshift", "<<="),
            "imod": inplace("imod", "%="),
        }
        for name, function in functions.items():
            if isinstance(function, FunctionType):
                function.__doc__ = getattr(operator, name).__doc__
        return functions

    def prod(self, iterable: Any, /, *, start: Any = 1) -> Any:
        """`math.prod`, each product sized as ``*`` sizes it."""
        result = start
        for item in iterable:
            result = self.mul(result, item)
        return result

    def lcm(self, *integers: Any) -> int:
        """`math.lcm`, one pair at a time, each within `max_int_bits` (a common multiple
        of two ints is at most their product): one C call of ``math.lcm(*range(1, 10**6))``
        runs for minutes, where no timer can stop it."""
        if len(integers) < 2:
            return math.lcm(*integers)
        result = math.lcm(integers[0])
        for number in integers[1:]:
            number = operator.index(number)  # what C code reads, read once
            bits = result.bit_length() + int.bit_length(number)
            if bits > self.max_int_bits:
                raise self.too_many_bits("math.lcm(...)", bits)
            result = math.lcm(result, number)
        return result

    # Formatting -----------------------------------------------------------
    def check_percent_format(self, template: str | bytes | bytearray, args: Any) -> None:
        raw = template.encode("utf-8", "replace") if isinstance(template, str) else template
        for match in _PERCENT_FIELD.finditer(raw):
            for number in match.groups():
                if number == b"*":
                    raise SizeLimitError("'*' widths in %-formatting are not supported; write the width in")
                if number is not None and int(number) > self.max_size:
                    raise self.too_big("this %-format width", int(number))

    def check_spec(self, spec: str) -> None:
        for number in _SPEC_NUMBER.findall(spec):
            if int(number) > self.max_size:
                raise self.too_big(f"the format spec {spec[:40]!r}", int(number))

    def format(self, value: Any, spec: str = "") -> str:
        """The `format` builtin, with the width and precision capped."""
        self.check_spec(str(spec))
        return format(value, spec)

    def formatted_value(self, value: Any, conversion: int, spec: str) -> str:
        """An f-string field whose spec is computed at run time."""
        if conversion == ord("r"):
            value = repr(value)
        elif conversion == ord("s"):
            value = str(value)
        elif conversion == ord("a"):
            value = ascii(value)
        return self.format(value, spec)

    # Builtins that allocate ----------------------------------------------
    def round(self, number: Any, ndigits: Any = None) -> Any:
        """The `round` builtin: an int (or a Fraction...) rounded to ``ndigits`` digits is
        computed with ``10 ** abs(ndigits)``, which a huge `ndigits` makes huge."""
        if ndigits is None:
            return round(number)
        if _countable(ndigits):
            ndigits = operator.index(ndigits)
        if isinstance(ndigits, int) and not isinstance(number, float):
            bits = abs(_exact(ndigits)) * 3.33
            if bits > self.max_int_bits:
                raise self.too_many_bits(f"round(..., {_exact(ndigits)})", bits)
        return round(number, ndigits)

    def sized(self, kind: type) -> Callable[..., Any]:
        """`bytes`/`bytearray` that refuse ``bytes(10**12)``, and ``bytes(n)`` for an
        object whose ``__index__`` says as much."""

        def build(*args: Any, **kwargs: Any) -> Any:
            if args and _countable(args[0]) and not hasattr(type(args[0]), "__bytes__") and not _is_buffer(args[0]):
                return self.with_count(f"{kind.__name__}()", args[0], 1, lambda n: kind(n, *args[1:], **kwargs))
            if args and isinstance(args[0], int) and _exact(args[0]) > self.max_size:
                raise self.too_big(f"{kind.__name__}({_exact(args[0])})", _exact(args[0]))
            return kind(*args, **kwargs)

        build.__name__ = kind.__name__
        return build

    def with_count(self, what: str, count: Any, scale: int, use: Callable[[Any], Any]) -> Any:
        """``use(count)`` for a `count` that is not an int but has ``__index__``, which
        C code reads as a size: read once here and passed on as an int, within
        `max_size` once multiplied by `scale`."""
        number = operator.index(count)
        if number * scale > self.max_size:
            raise self.too_big(what, number * scale)
        return use(number)

    def range(self, *args: int) -> Any:
        """`range`, but one too long to materialise is iterated step by step, ticking (one longer
        than ``sys.maxsize`` too, which has no ``len``: CPython makes it and indexes it all the same)."""
        span = range(*args)
        try:
            if len(span) <= self.max_size:
                return span
        except OverflowError:
            pass
        return TickingIterable(span, self.current_tick)

    def str_method(self, owner: Any, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """Padding and replacing methods of str/bytes, whose result size is checked first
        (with the lengths and counts of str/bytes itself: a subclass's may say anything)."""
        base: Any = str if isinstance(owner, str) else bytes

        def padded(*args: Any, **kwargs: Any) -> Any:
            if args and _countable(args[0]):
                args = (operator.index(args[0]), *args[1:])
            for key in ("width", "tabsize"):
                if _countable(kwargs.get(key)):
                    kwargs[key] = operator.index(kwargs[key])
            width = args[0] if args else kwargs.get("width", kwargs.get("tabsize", 0))
            if isinstance(width, int):
                width = _exact(width)
            if name == "expandtabs":
                width = (width if args or kwargs else 8) * base.count(owner, "\t" if base is str else b"\t")
            if isinstance(width, int) and width > self.max_size:
                raise self.too_big(f"{name}({width})", width)
            return method(*args, **kwargs)

        def replaced(old: Any, new: Any, count: Any = -1) -> Any:
            if _countable(count):
                count = operator.index(count)
            hits = _size(owner) + 1 if not old else base.count(owner, old)
            if isinstance(count, int) and _exact(count) >= 0:
                hits = min(hits, _exact(count))
            size = _size(owner) + hits * max(0, _size(new) - _size(old))
            if size > self.max_size:
                raise self.too_big("this replace", size)
            return method(old, new, count)

        return replaced if name == "replace" else padded

    def math_function(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`math.factorial`, `comb` and `perm`, whose results grow faster than their inputs."""

        def capped(*args: Any) -> Any:
            if args and _countable(args[0]):
                args = (operator.index(args[0]), *args[1:])
            n = args[0] if args else 0
            if isinstance(n, int) and _exact(n) > 0:
                n = _exact(n)
                bits = n * math.log2(max(n, 2))
                if bits > self.max_int_bits * 4:
                    raise self.too_many_bits(f"math.{name}({n})", bits)
            return function(*args)

        capped.__name__ = name
        return capped


_CHECKED_INDEX = Limits.checked_special(
    Limits(0, 0, lambda: lambda: True), "__index__", lambda self: 0
).__code__  # the code of every checked __index__


class TickingIterable:
    """An iterable that ticks the budget at every item, so C-level consumers
    (`list`, `sum`, `"".join`) of a huge or endless source stay interruptible.
    Its attributes are private: the code holds this object."""

    def __init__(self, source: Any, tick: Callable[[], Callable[[], bool]]) -> None:
        self._source = source
        self._tick = tick

    def __iter__(self) -> Iterator[Any]:
        current_tick = self._tick  # looked up at every item: iterating may pause until a later block
        for item in self._source:
            current_tick()()
            yield item

    def __contains__(self, item: Any) -> bool:
        return item in self._source

    def __getitem__(self, index: Any) -> Any:
        return self._source[index]

    def __repr__(self) -> str:
        return repr(self._source)


def ticking_itertools(tick: Callable[[], Callable[[], bool]]) -> dict[str, Callable[..., Any]]:
    """itertools' endless and combinatorial iterators, made to tick at each item."""

    def wrap(function: Callable[..., Any]) -> Callable[..., Any]:
        def ticking(*args: Any, **kwargs: Any) -> Iterator[Any]:
            return iter(TickingIterable(function(*args, **kwargs), tick))

        ticking.__name__ = function.__name__
        ticking.__doc__ = function.__doc__
        return ticking

    names = ("count", "cycle", "repeat", "product", "permutations", "combinations", "combinations_with_replacement")
    return {name: wrap(getattr(itertools, name)) for name in names}
