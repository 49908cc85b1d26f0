"""Budgets and size caps: the limits the model's code meets while it runs.

Two kinds of limit live here. *Signals* (operation budget, time, memory) stop
the block: they derive from `BaseException`, and the instrumented code re-raises
them from every ``except`` block, so the model cannot catch them. *Size caps*
refuse one operation that would build a huge value in a single C-level step
(`10**10**10`, ``'a' * 10**12``, a width of a billion in a format spec), which
no timer could interrupt; they raise `SizeLimitError`, an ordinary exception.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Iterator
from typing import Any

__all__ = [
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


class BudgetSpentOutsideRun(RuntimeError):
    """Code defined in the sandbox, called by the host between blocks (a `repr` of an
    answer, a callback), ran past the operation budget it has there."""


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
            "code defined in the sandbox ran past its operation budget" if self.error is BudgetSpentOutsideRun else ""
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


class Limits:
    """Size caps, bound to one executor's settings.

    `max_size` bounds the items (or characters) one operation may build;
    `max_int_bits` bounds the integers arithmetic may build.
    """

    def __init__(self, max_size: int, max_int_bits: int, tick: Callable[[], Callable[[], bool]]) -> None:
        self.max_size = max_size
        self.max_int_bits = max_int_bits
        self.current_tick = tick

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
        if isinstance(a, _SEQUENCES) and isinstance(b, _SEQUENCES):
            size = len(a) + len(b)
            if size > self.max_size:
                raise self.too_big("this concatenation", size)
        return a + b

    def mul(self, a: Any, b: Any) -> Any:
        ta, tb = type(a), type(b)
        if ta is float or tb is float:
            return a * b
        if ta is int and tb is int:
            bits = a.bit_length() + b.bit_length()
            if bits > self.max_int_bits:
                raise self.too_many_bits("this multiplication", bits)
            return a * b
        if isinstance(a, int) and hasattr(b, "__len__"):
            self.check_repeat(b, a)
        elif isinstance(b, int) and hasattr(a, "__len__"):
            self.check_repeat(a, b)
        return a * b

    def check_repeat(self, sequence: Any, times: int) -> None:
        if isinstance(sequence, _SEQUENCES) and times > 0:
            size = len(sequence) * times
            if size > self.max_size:
                raise self.too_big("this repetition", size)

    def pow(self, a: Any, b: Any, modulo: Any = None) -> Any:
        if modulo is not None:
            return pow(a, b, modulo)
        if type(a) is int and type(b) is int and b > 0 and abs(a) > 1:
            bits = a.bit_length() * b
            if bits > self.max_int_bits:
                raise self.too_many_bits(f"{a} ** {b}", bits)
        return a**b

    def lshift(self, a: Any, b: Any) -> Any:
        if type(a) is int and type(b) is int and a and a.bit_length() + b > self.max_int_bits:
            raise self.too_many_bits("this shift", a.bit_length() + b)
        return a << b

    def mod(self, a: Any, b: Any) -> Any:
        if isinstance(a, (str, bytes)):
            self.check_percent_format(a, b)
        return a % b

    def inplace(self, operator: str, a: Any, b: Any) -> Any:
        """``x op= y`` for the operators that can grow a value."""
        if operator == "+=":
            if type(a) is list:  # in place, as CPython does: other names for the list see it grow
                if hasattr(b, "__len__") and len(a) + len(b) > self.max_size:
                    raise self.too_big("this concatenation", len(a) + len(b))
                a += b
                return a
            return self.add(a, b)
        if operator == "*=":
            if type(a) is list and isinstance(b, int):
                self.check_repeat(a, b)
                a *= b
                return a
            return self.mul(a, b)
        if operator == "**=":
            return self.pow(a, b)
        if operator == "<<=":
            return self.lshift(a, b)
        return self.mod(a, b)

    # Formatting -----------------------------------------------------------
    def check_percent_format(self, template: str | bytes, args: Any) -> None:
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
    def sized(self, kind: type) -> Callable[..., Any]:
        """`bytes`/`bytearray` that refuse ``bytes(10**12)``."""

        def build(*args: Any, **kwargs: Any) -> Any:
            if args and isinstance(args[0], int) and args[0] > self.max_size:
                raise self.too_big(f"{kind.__name__}({args[0]})", args[0])
            return kind(*args, **kwargs)

        build.__name__ = kind.__name__
        return build

    def range(self, *args: int) -> Any:
        """`range`, but one too long to materialise is iterated step by step, ticking."""
        span = range(*args)
        if len(span) <= self.max_size:
            return span
        return TickingIterable(span, self.current_tick)

    def str_method(self, owner: Any, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        """Padding and replacing methods of str/bytes, whose result size is checked first."""

        def padded(*args: Any, **kwargs: Any) -> Any:
            width = args[0] if args else kwargs.get("width", kwargs.get("tabsize", 0))
            if name == "expandtabs":
                width = (width if args or kwargs else 8) * owner.count("\t" if isinstance(owner, str) else b"\t")
            if isinstance(width, int) and width > self.max_size:
                raise self.too_big(f"{name}({width})", width)
            return method(*args, **kwargs)

        def replaced(old: Any, new: Any, count: int = -1) -> Any:
            hits = len(owner) + 1 if not old else owner.count(old)
            if count >= 0:
                hits = min(hits, count)
            size = len(owner) + hits * max(0, len(new) - len(old))
            if size > self.max_size:
                raise self.too_big("this replace", size)
            return method(old, new, count)

        return replaced if name == "replace" else padded

    def math_function(self, name: str, function: Callable[..., Any]) -> Callable[..., Any]:
        """`math.factorial`, `comb` and `perm`, whose results grow faster than their inputs."""

        def capped(*args: Any) -> Any:
            n = args[0] if args else 0
            if isinstance(n, int) and n > 0:
                bits = n * math.log2(max(n, 2))
                if bits > self.max_int_bits * 4:
                    raise self.too_many_bits(f"math.{name}({n})", bits)
            return function(*args)

        capped.__name__ = name
        return capped


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
