"""What crosses between the host and the code when both share one process.

From a worker, values cross as the codec's data: the host receives nothing of the code's, and the
code receives nothing of the host's but data. In process (``isolation="in_process"``) the same
objects are on both sides, so two walks keep each side's objects on its own side:

- `vetted_from_host`: what the host gives (variables, a tool's result) is vetted inside the
  containers that carry it, as reading it out of them (``fs[0]``) would vet it. Iteration,
  unpacking, ``match`` and the containers' own methods (``d.get``, ``max(key=...)``) then find
  nothing an item read refuses, at no cost per item while the code runs.
- `code_object_in`: what the code gives back (a block's value, its final answer, a host tool's
  arguments) is looked through for the code's own objects (an instance of its class, its
  function, generator or class). Where there is one, the value leaves as it leaves a worker:
  through the codec, or as its shown text. The host never calls the code's methods later,
  outside a block's watch (printing a final answer runs its ``__repr__``).
- `CodeSettings`: the process-wide settings the code changes (numpy's error handling and print
  options, pandas' options) are the code's own from block to block, and the host's outside
  blocks. A formatter or an error callback the code set there would otherwise run on the host's
  data, later (and give it to the code).

Both walks look through the containers the standard library and numpy and pandas build. What
an object of the host's own class holds is the host's: a host object the code was given, and
wrote to, is the caller's to use with care (README, local).
"""

from __future__ import annotations

import collections
import contextvars
import datetime
import functools
import gc
import sys
import warnings
from collections.abc import Callable, Iterator
from types import BuiltinFunctionType, CodeType, FrameType, FunctionType, GeneratorType, MethodType, ModuleType
from typing import Any

from codeward.executors.codec import CodecError
from codeward.executors.local.imports import SandboxViolation
from codeward.executors.local.limits import SandboxSignal

__all__ = ["SCALARS", "SHOWN_LIMIT", "CodeSettings", "code_object_in", "final_answer_refused", "vetted_from_host"]

#: The most characters of a value's text given in place of a value the codec cannot carry.
SHOWN_LIMIT = 10_000

_CONTAINERS = (list, tuple, dict, set, frozenset, collections.deque)


def vetted_from_host(value: Any, vet: Callable[[Any], Any], where: str) -> Any:
    """`value`, once nothing in it is what an item read would refuse (a function of a refused
    module, an interpreter internal); a `SandboxViolation` names the place. A module is given as it
    is, alone or inside a container: every read of its attributes is guarded, as any module's."""
    for item, place in _contents(value, where, with_top=True):
        if type(item) is ModuleType:
            continue
        try:
            vet(item)
        except SandboxViolation as refusal:
            raise SandboxViolation(f"{place} cannot be given to the code: {refusal}") from None
    return value


def code_object_in(value: Any, sandbox_module: str, code_globals: dict[str, Any]) -> str | None:
    """Where `value` holds an object of the code's own (``value[0]``...), or None. Looking never
    calls the code's methods, but a large value takes time: the caller runs it under a watch."""
    for item, place in _contents(value, "value", with_top=True, deep=True):
        if _is_codes(item, sandbox_module, code_globals):
            return place
    return None


def final_answer_refused(answer: Any, error: BaseException | None) -> str:
    """Why a final answer cannot leave, as a worker and the host's own process both say it: the
    codec's own words, never the text of the code's exception (its ``__str__`` is the code's)."""
    kind = type(answer)
    if isinstance(error, CodecError):
        reason = str(error)
    elif isinstance(error, SandboxSignal):
        reason = "looking through it ran past the sandbox's limits"
    else:
        reason = f"encoding it raised {type(error).__name__}"
    return f"the final answer, of type {kind.__module__}.{kind.__qualname__}, cannot leave the sandbox: {reason}"


def _is_codes(item: Any, sandbox_module: str, code_globals: dict[str, Any]) -> bool:
    if type(item).__module__ == sandbox_module:  # an instance of the code's class
        return True
    if isinstance(item, FunctionType):
        return item.__globals__ is code_globals
    if isinstance(item, GeneratorType):
        return item.gi_frame is not None and item.gi_frame.f_globals is code_globals
    if isinstance(item, MethodType):
        return any(_is_codes(part, sandbox_module, code_globals) for part in (item.__func__, item.__self__))
    if isinstance(item, functools.partial):
        return any(_is_codes(part, sandbox_module, code_globals) for part in _partial_parts(item))
    return isinstance(item, type) and item.__module__ == sandbox_module


def _contents(value: Any, where: str, *, with_top: bool = False, deep: bool = False) -> Iterator[tuple[Any, str]]:
    """Every object inside `value`'s containers, with its place; `value` first when `with_top`.
    `deep`: inside any object too (what the garbage collector sees it hold: an instance's
    attributes, an iterator's source, a datetime's tzinfo), but never inside a class, a module, a
    function or a frame, which lead to the whole program.

    A flat container of plain items is judged at C speed: the types it holds are gathered first,
    and only a container holding something other than a plain scalar is walked item by item.
    """
    if with_top:
        yield value, where
    seen: set[int] = set()
    stack: list[tuple[Any, str]] = [(value, where)]
    while stack:
        container, place = stack.pop()
        if id(container) in seen:
            continue
        seen.add(id(container))
        for item, item_place in _items(container, place, deep):
            yield item, item_place
            if _opens(item, deep):
                stack.append((item, item_place))


#: Values that hold nothing but themselves: no walk looks inside them.
SCALARS = frozenset({int, float, complex, str, bytes, bool, type(None)})


def _items(container: Any, place: str, deep: bool) -> list[tuple[Any, str]]:
    """The items of `container` that are not plain scalars, each with its place."""
    if isinstance(container, dict):
        keys = list(container)
        pairs = [(key, f"{place} key {_label(key)}") for key in _unplain(keys)]
        values = _unplain(list(container.values()))  # all of them, or none
        pairs += [(value, f"{place}[{_label(key)}]") for key, value in zip(keys, values, strict=False)]
        if isinstance(container, collections.defaultdict) and container.default_factory is not None:
            pairs.append((container.default_factory, f"{place}.default_factory"))
        return [(item, at) for item, at in pairs if type(item) not in SCALARS]
    if isinstance(container, functools.partial):
        return [(part, f"{place}.func") for part in _partial_parts(container)]
    if deep and not isinstance(container, _CONTAINERS) and not _is_library_data(container):
        return [(item, f"{place}.<{type(item).__name__}>") for item in _held(container) if type(item) not in SCALARS]
    items = _unplain(_flat(container))
    at = "{{...}}" if isinstance(container, (set, frozenset)) else "[{}]"
    return [(item, place + at.format(index)) for index, item in enumerate(items) if type(item) not in SCALARS]


def _label(key: Any) -> str:
    """A key as a place names it; only a plain key's own repr is called."""
    return f"{key!r:.40}" if type(key) in SCALARS else f"<a {type(key).__name__} key>"


def _unplain(items: list[Any]) -> list[Any]:
    """`items`, or none where all are plain scalars: that is judged at C speed, for large flat data."""
    return [] if SCALARS.issuperset(map(type, items)) else items


def _flat(container: Any) -> list[Any]:
    """The items of a container that can hold objects: builtin containers, numpy arrays of
    objects, and pandas objects whose data or labels are objects."""
    if isinstance(container, _CONTAINERS):
        return list(container)
    numpy, pandas = sys.modules.get("numpy"), sys.modules.get("pandas")
    if numpy is not None and isinstance(container, numpy.ndarray):
        return list(container.ravel()) if container.dtype == object else []
    if pandas is not None and isinstance(container, (pandas.Series, pandas.DataFrame, pandas.Index)):
        return _pandas_items(container, pandas)
    return []


def _pandas_items(container: Any, pandas: Any) -> list[Any]:
    labels = [container] if isinstance(container, pandas.Index) else [container.index]
    columns = [container] if isinstance(container, pandas.Series) else []
    if isinstance(container, pandas.DataFrame):
        labels.append(container.columns)
        columns = [column for _, column in container.items()]
    items: list[Any] = []
    for part in (*labels, *columns):
        if part.dtype == object:
            items += list(part.array)
    return items


def _opens(item: Any, deep: bool) -> bool:
    if isinstance(item, (*_CONTAINERS, functools.partial)):
        return True
    if deep:
        return type(item) not in SCALARS and not isinstance(item, _CLOSED)
    return _is_library_data(item)


def _is_library_data(item: Any) -> bool:
    return type(item).__module__.split(".")[0] in ("numpy", "pandas")


#: What a deep look never opens: each leads to the whole program (a function to its module's
#: globals, a frame to its caller's), and the code's own are found without opening them.
_CLOSED = (type, ModuleType, FunctionType, BuiltinFunctionType, CodeType, FrameType, GeneratorType)


def _held(item: Any) -> list[Any]:
    """What `item` holds, as the garbage collector sees it (its class aside), and a datetime's tzinfo,
    which it does not show."""
    held = [part for part in gc.get_referents(item) if not isinstance(part, type)]
    tzinfo = getattr(item, "tzinfo", None) if isinstance(item, (datetime.datetime, datetime.time)) else None
    return [*held, tzinfo] if tzinfo is not None else held


def _partial_parts(item: functools.partial[Any]) -> list[Any]:
    return [item.func, *item.args, *item.keywords.values()]


class CodeSettings:
    """The code's own process-wide settings, in place only while its blocks run.

    numpy keeps its error handling and print options in context variables: blocks run in a
    context of the code's own. pandas keeps its options in one dictionary: the options a block
    changed are set back to the host's when it ends, and the code's set again when the next
    begins (a library first imported by the code is set back to its defaults).
    """

    def __init__(self) -> None:
        self._context = contextvars.copy_context()
        self._pandas: dict[str, Any] = {}

    def run(self, action: Callable[[], Any]) -> Any:
        host = _pandas_options()
        _set_pandas_options(self._pandas, host)
        try:
            return self._context.run(action)
        finally:
            code = _pandas_options()
            if code:
                self._pandas = code
                _set_pandas_options(host or _pandas_defaults(), code)


def _pandas_options() -> dict[str, Any]:
    """pandas' options as ``set_option`` names them; none where pandas is not loaded."""
    config = _pandas_config()
    if config is None:
        return {}
    found: dict[str, Any] = {}
    stack: list[tuple[str, dict[str, Any]]] = [("", config._global_config)]
    while stack:
        prefix, level = stack.pop()
        for key, value in level.items():
            if type(value) is dict:
                stack.append((f"{prefix}{key}.", value))
            else:
                found[prefix + key] = value
    return found


def _pandas_defaults() -> dict[str, Any]:
    config = _pandas_config()
    return {} if config is None else {key: option.defval for key, option in config._registered_options.items()}


def _set_pandas_options(wanted: dict[str, Any], current: dict[str, Any]) -> None:
    changed = [key for key, value in wanted.items() if key in current and current[key] is not value]
    if changed:
        pandas = sys.modules["pandas"]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated options warn when set
            for key in changed:
                pandas.set_option(key, wanted[key])


def _pandas_config() -> Any:
    """pandas' option store, where pandas is loaded."""
    if "pandas" not in sys.modules:
        return None
    config = sys.modules.get("pandas._config.config")
    return config if hasattr(config, "_global_config") and hasattr(config, "_registered_options") else None
