"""Routes by which allowed code reads or writes attributes without the attribute guard.

The guard (``_getattr_``, `Guards.getattr`) runs for every ``a.b`` the policy
compiles. These attacks reach attributes another way: in C (a ``match`` class
pattern), through the errors a guard raises, or through an allowed function that
takes attribute names as strings (``functools.update_wrapper``). Each test shows
the route closed, then the ordinary use of the same feature still working.
"""

from __future__ import annotations

import functools
import json
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.local import guards
from tests.security.conftest import SANDBOX_OFF

SHELL = "getattr(__import__('os'), 'system')('touch CANARY')"
#: typing.get_type_hints evaluates a string annotation with no policy: the real one runs a shell.
TYPE_HINTS_SHELL = (
    f'def f(x: "{SHELL}"):\n    pass\ntry:\n    raw.get_type_hints(f)\nexcept TypeError:\n    pass  # 0 is no type\n'
)


@dataclass
class Holder:
    """A host object holding a raw module, as a careless host might send one: the guard
    would give the code typing's proxy, whose get_type_hints is refused."""

    tool: Any
    label: str = "kept"


HOST = {"h": Holder(typing), "Holder": Holder}
#: Host objects such as these reach the code only in the host's own process (a worker
#: process receives values it can carry), so the attacks that use them run there.
IN_PROCESS = {"isolation": "in_process"}


def run(code: str, **options: Any) -> Any:
    with LocalExecutor(**{**IN_PROCESS, **options}) as executor:
        executor.send_variables(HOST)
        return executor.run(code).output


# match class patterns, and the objects guard errors carry ---------------------
RAISE_IN_A_PROXY = {
    "attribute": "typing.no_such_name",
    "getattr": "getattr(typing, 'no_such_name')",
    "getattr-default": "getattr(typing, 'no_such_name', 1)\ntyping.no_such_name",
    "from-import-then-attribute": "from typing import get_args\ntyping.no_such_name",
}


@pytest.mark.parametrize("trigger", RAISE_IN_A_PROXY.values(), ids=RAISE_IN_A_PROXY.keys())
def test_match_cannot_take_the_real_module_from_a_proxy_error(trigger, attack):
    """``case AttributeError(obj=raw)`` read the real typing out of the proxy's error."""
    code = (
        "import typing\ntry:\n    "
        + trigger.replace("\n", "\n    ")
        + "\nexcept AttributeError as error:\n    match error:\n        case AttributeError(obj=raw):\n"
        "            pass\n" + TYPE_HINTS_SHELL
    )
    attack(code)
    code = "import typing\ntry:\n    typing.no_such_name\nexcept AttributeError as error:\n    found = error"
    with LocalExecutor(isolation="in_process") as executor:  # the error object itself, not its text
        error = executor.run(code + "\nfound").output
    assert error.obj is not __import__("typing"), "the error carries the proxy, never the module"
    assert error.__context__ is None and error.__cause__ is None
    assert "no_such_name" in str(error) and error.name == "no_such_name"


def test_a_proxy_error_read_by_attribute_gives_the_proxy(attack):
    """Already held: ``error.obj`` goes through the guard, which gives the proxy."""
    attack(
        "import typing\ntry:\n    typing.no_such_name\nexcept AttributeError as error:\n    raw = error.obj\n"
        + TYPE_HINTS_SHELL
    )


@pytest.mark.parametrize(
    "pattern",
    ["Holder(tool=raw)", "Holder(raw)", "Holder(tool=raw, label='kept')", "[Holder(tool=raw)] | Holder(tool=raw)"],
    ids=["keyword", "positional", "both", "or-pattern"],
)
def test_match_class_patterns_read_attributes_through_the_guard(pattern, attack):
    """A class pattern reads the subject's attributes in C: here a raw module a host object holds."""
    error = attack(f"match h:\n    case {pattern}:\n        pass\n{TYPE_HINTS_SHELL}", variables=HOST, **IN_PROCESS)
    assert "match pattern" in error.message
    code = (
        "from dataclasses import dataclass\n@dataclass\nclass Point:\n    x: int\n    y: int\n"
        "def where(p):\n    match p:\n        case Point(x=0, y=0):\n            return 'origin'\n"
        "        case Point(0, y):\n            return f'on y at {y}'\n"
        "        case Point(x=x) if x > 0:\n            return 'right'\n"
        "        case Holder(label=label):\n            return label\n"
        "        case [Point(x=a), *rest]:\n            return ('first', a, len(rest))\n"
        "        case int(n) | float(n):\n            return n * 2\n"
        "        case str(s):\n            return s.upper()\n"
        "        case complex(real=r):\n            return r\n"
        "        case _:\n            return 'other'\n"
        "[where(v) for v in (Point(0, 0), Point(0, 3), Point(2, 1), Point(-1, 1), h, [Point(5, 0), 1], 4, 1.5, 'a', 2j)]"
    )
    assert run(code) == ["origin", "on y at 3", "right", "other", "kept", ("first", 5, 1), 8, 3.0, "A", 0.0]


@pytest.mark.parametrize(
    ("subject", "pattern"),
    [("'{0:>2000000000}'", "str(format=fmt)"), ("'a'", "str(ljust=fmt)")],
    ids=["format", "ljust"],
)
def test_match_cannot_take_methods_the_guard_replaces(subject, pattern, attack):
    """The guard gives str.format and str.ljust as size-checked versions; a pattern got the raw ones."""
    error = attack(f"match {subject}:\n    case {pattern}:\n        fmt(2_000_000_000)", control="exhausts")
    assert "match pattern" in error.message
    assert run("match 'ab':\n    case str(upper=up, count=count):\n        pass\n(up(), count('a'))") == ("AB", 1)


def test_match_cannot_read_private_names_through_match_args(attack):
    """A host class may list private names in __match_args__; the pattern reads them in C."""

    class Secretive:
        __match_args__ = ("_tool",)

        def __init__(self) -> None:
            self._tool = typing

    error = attack(
        f"match s:\n    case Secretive(raw):\n        pass\n{TYPE_HINTS_SHELL}",
        variables={"s": Secretive(), "Secretive": Secretive},
        **IN_PROCESS,
    )
    assert "'_tool'" in error.message


def test_match_cannot_reach_frames_of_an_error(attack):
    """Already held: private names in a pattern are refused when the code is compiled."""
    attack(
        "def f():\n    try:\n        1 / 0\n    except ZeroDivisionError as e:\n        return e\n"
        "match f():\n    case ZeroDivisionError(__traceback__=tb):\n"
        "        tb.tb_frame.f_builtins['open']('CANARY', 'w').close()"
    )


def test_dotted_names_in_patterns_are_read_through_the_guard(attack):
    """``case module.Class()`` and ``case module.VALUE`` read attributes too: guarded before the match."""
    holder = {"h": Holder(functools)}  # functools' proxy refuses singledispatch
    error = attack("match 1:\n    case h.tool.singledispatch:\n        pass", variables=holder, **IN_PROCESS)
    assert "functools" in error.message
    code = (
        "import math, collections\ndef kind(v):\n    match v:\n        case math.pi:\n            return 'pi'\n"
        "        case collections.OrderedDict():\n            return 'ordered'\n"
        "        case collections.Counter(total=t):\n            return t\n"
        "        case _:\n            return 'other'\n"
        "[kind(v) for v in (math.pi, collections.OrderedDict(), 1)]"
    )
    assert run(code) == ["pi", "ordered", "other"]


# functools.update_wrapper and wraps -------------------------------------------
@pytest.mark.parametrize(
    "call",
    [
        "functools.update_wrapper(f, json.dumps, assigned=(), updated=('__globals__',))",
        "functools.wraps(json.dumps, assigned=(), updated=('__globals__',))(f)",
        "functools.partial(functools.update_wrapper, assigned=(), updated=('__globals__',))(f, json.dumps)",
    ],
    ids=["update_wrapper", "wraps", "partial"],
)
def test_update_wrapper_cannot_merge_host_globals(call, attack):
    """Merging json's globals into the sandbox's gives later functions the real builtins."""
    attack(
        f"import functools, json\ndef f():\n    pass\n{call}\ndef g():\n    import os\n    getattr(os, 'system')('touch CANARY')\ng()"
    )


@pytest.fixture
def json_dumps() -> Iterator[None]:
    """json.dumps as it was: an attack that gets through must not change it for the other tests."""
    saved = dict(json.dumps.__dict__), dict(json.dumps.__kwdefaults__ or {}), json.dumps.__name__
    yield
    json.dumps.__dict__.clear()
    json.dumps.__dict__.update(saved[0])
    json.dumps.__kwdefaults__ = saved[1]
    json.dumps.__name__ = saved[2]


WRITES = {
    "host-wrapper": "functools.update_wrapper(json.dumps, f)",
    "share-host-dict": "functools.update_wrapper(f, json.dumps, assigned=('__dict__',), updated=())\nf.marker = 1",
    "update-host-defaults": "functools.update_wrapper(f, json.dumps, assigned=('__kwdefaults__',), updated=())\n"
    "functools.update_wrapper(f, g, assigned=(), updated=('__kwdefaults__',))",
}


@pytest.mark.parametrize("writes", WRITES.values(), ids=WRITES.keys())
def test_update_wrapper_cannot_write_host_objects(writes, attack, json_dumps):
    """Renaming json.dumps, writing its __dict__ through a shared one, or changing its defaults
    all change the host (in a worker, the worker's json)."""
    attack(f"import functools, json\ndef f():\n    pass\ndef g(*, sort_keys=True):\n    pass\n{writes}", **IN_PROCESS)
    assert json.dumps.__name__ == "dumps" and not hasattr(json.dumps, "marker")
    assert json.dumps.__kwdefaults__["sort_keys"] is False
    code = (
        "import functools\ndef deco(fn):\n    @functools.wraps(fn)\n    def inner(*a, **k):\n"
        "        return fn(*a, **k)\n    return inner\n@deco\ndef add(a, b):\n    'Adds.'\n    return a + b\n"
        "import json\ng = functools.update_wrapper(lambda x: x, json.dumps)\n"
        "h2 = functools.wraps(add, assigned=('label',), updated=())\ndef plain():\n    pass\nadd.label = 'L'\n"
        "(add(1, 2), add.__name__, add.__doc__, g.__name__, h2(plain).label)"
    )
    assert run(code) == (3, "add", "Adds.", "dumps", "L")


@pytest.mark.parametrize("isolation", ["off"] if SANDBOX_OFF else ["in_process"])
def test_getattr_refuses_a_forbidden_name_no_value_check_covers(attack, monkeypatch, isolation):
    """``type.mro`` is neither a frame nor code, so the list of forbidden names alone refuses it."""
    code = "order = getattr(int, 'mro')()\nopen('CANARY', 'w').close() if len(order) == 2 else None"
    error = attack(code, isolation=isolation)
    assert "'mro'" in error.message
    if SANDBOX_OFF:
        return
    monkeypatch.setattr(guards, "FORBIDDEN_ATTRIBUTES", frozenset())  # control: the list alone taken away
    with LocalExecutor(isolation="in_process") as executor:
        assert executor.run("str(getattr(int, 'mro')())").output == "[<class 'int'>, <class 'object'>]"
