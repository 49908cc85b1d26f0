"""The pieces of `program_grammar`: its vocabulary, the expression strategies and the helpers
its statements are written with.

Expressions are built once, as strategies of text that name what they read by placeholders
(``$i3$``: an int in scope); `fill` turns those into the names the program has bound so far, kept
in an `Env`. Every name a program binds at module level starts with `MARK`: `with_prefix`
replaces it, so that many programs share one sandbox without sharing names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

__all__ = [
    "CAUGHT",
    "FLOATS",
    "FORMATS",
    "FSTRINGS",
    "HUGE_RANGES",
    "INTS",
    "IN_PLACE",
    "MARK",
    "PERCENT_FORMATS",
    "STRS",
    "UNCAUGHT",
    "Env",
    "Program",
    "an_int",
    "bind",
    "clamp",
    "fill",
    "guarded",
    "indent",
    "pick",
    "with_prefix",
]  # fmt: skip

MARK = "ZZ"

#: Ints near the bounds the fast paths and guards reason about, bools and plain small ints.
EDGE_INTS = ["2 ** 31 - 1", "2 ** 31", "2 ** 63 - 1", "2 ** 63", "-2 ** 63", "2 ** 64", "10 ** 18", "True", "False"]
WORDS = ["alpha", "Beta", "  gamma ", "x-y-z", "a,b,,c", "42", "3.5", "", "über", "tab end", "aaa"]
INT_SPECS = ["", "d", ">8", "<6", "^9", "+", ",", "_", "x", "#x", "o", "b", "08d", "e", ".2f", "%", "*^7"]
FLOAT_SPECS = ["", ".2f", ".3e", "g", ",.1f", "+.0f", ">10.3f", "%", ".1%", "08.2f"]
STR_SPECS = ["", "<10", ">7", "^12", ".3", "*<6"]
CAUGHT = (
    "(ValueError, ZeroDivisionError, KeyError, IndexError, TypeError, AttributeError, OverflowError, StopIteration)"
)
#: Ranges of a few items at the bounds of the machine's ints (beyond ``sys.maxsize`` they have no len).
HUGE_RANGES = ["range(2 ** 63 - 2, 2 ** 63 + 1)", "range(10 ** 20, 10 ** 20 + 7, 3)", "range(-2 ** 64, -2 ** 64 + 2)"]
#: Statements that end a block with an uncaught error (or, sometimes, none).
UNCAUGHT = [
    "raise ValueError",
    "raise KeyError()",
    "raise ZeroDivisionError($s0$)",
    "raise IndexError($i1$, 'x')",
    "assert $i2$ > 0",
    "assert $i3$ < 0, $s4$",
    "int($s5$)",
    "next(iter([]))",
    "{}[$s6$]",
    "$l7$[$i0$]",
    "$i1$ // ($i2$ - $i3$)",
    "float($s4$)",
    "$o5$ + $s6$",
    "len($i7$)",
    "[1, 2].index($i0$)",
    "{'a': 1}.pop($s1$)",
    "$s2$.index('q')",
]
FORMATS = ["{}-{:>6}", "{1}{0}{1}", "{0!r:^9}|{1:+,}", "{:.2}{:x}", "{}{}{}", "{0[0]}{1}", "{a}{0}"]
PERCENT_FORMATS = ["%s|%r", "%d-%s", "%x:%5s", "%08.3f/%-6s", "%+d %%s %s", "%(a)s"]
IN_PLACE = ["+", "-", "*", "//", "%", "&", "|", "^"]


@dataclass
class Program:
    """The blocks of one program, in the order they run (a block sent twice appears twice)."""

    blocks: list[str]

    def __str__(self) -> str:
        return "\n# ---- next block ----\n".join(self.blocks)


def with_prefix(program: Program, prefix: str) -> list[str]:
    return [block.replace(MARK, prefix) for block in program.blocks]


@dataclass
class Env:
    """What the program has bound so far, by kind: the names each statement may use."""

    ints: list[str] = field(default_factory=list)
    floats: list[str] = field(default_factory=list)
    strs: list[str] = field(default_factory=list)
    lists: list[str] = field(default_factory=list)
    dicts: list[str] = field(default_factory=list)
    sets: list[str] = field(default_factory=list)
    objects: list[str] = field(default_factory=list)
    points: list[str] = field(default_factory=list)
    definitions: set[str] = field(default_factory=set)
    counter: int = 0

    def fresh(self, kind: str) -> str:
        self.counter += 1
        return f"{MARK}{kind}{self.counter}"


def indent(lines: list[str], depth: int = 1) -> list[str]:
    return ["    " * depth + line for line in lines]


# ---- expressions -------------------------------------------------------------------------------
# Built once: an expression names what it reads by placeholders (``$i3$``: an int in scope), which
# `fill` turns into the names the program has bound (or a literal where it has none yet).


def _slot(kind: str) -> st.SearchStrategy[str]:
    return st.integers(0, 7).map(lambda index: f"${kind}{index}$")


def _int_tree(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.tuples(inner, st.sampled_from(IN_PLACE), inner).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
        st.tuples(inner, st.integers(0, 3)).map(lambda t: f"({t[0]} ** {t[1]})"),
        st.tuples(inner, st.sampled_from(["<<", ">>"]), st.sampled_from([0, 1, 3, 31, 32, 63, 64, 65])).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(st.sampled_from(["-", "~", "+", "not "]), inner).map(lambda t: f"({t[0]}{t[1]})"),
        st.tuples(
            st.sampled_from(["abs({})", "int({})", "bool({})", "len(str({}))", "max(0, {})", "hash({})"]), inner
        ).map(lambda t: t[0].format(t[1])),
        st.tuples(inner, inner).map(lambda t: f"max({t[0]}, {t[1]})"),
        st.tuples(inner, inner).map(lambda t: f"sum([{t[0]}, {t[1]}, True])"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]} if {t[0]} > {t[1]} else {t[1]})"),
        st.tuples(inner, st.integers(1, 7)).map(lambda t: f"divmod({t[0]}, {t[1]})[{t[1] % 2}]"),
    )


#: Int expressions: a tree of operators over literals (edge values among them) and the ints in scope.
INTS: st.SearchStrategy[str] = st.recursive(
    st.one_of(
        st.integers(-20, 20).map(str),
        st.sampled_from(EDGE_INTS).map(lambda text: f"({text})"),
        _slot("i"),
        _slot("i"),
        _slot("l").map(lambda slot: f"len({slot})"),
        _slot("o"),
        _slot("k"),
    ),
    _int_tree,
    max_leaves=5,
)

FLOATS: st.SearchStrategy[str] = st.recursive(
    st.one_of(
        st.sampled_from(["0.1", "2.5", "-3.75", "1e16", "1e-3", "0.0", "7.0", "float('inf')"]),
        _slot("f"),
        st.tuples(INTS, st.integers(1, 9)).map(lambda t: f"({t[0]} / {t[1]})"),
    ),
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from(["+", "-", "*", "/", "//", "%"]), inner).map(
            lambda t: f"({t[0]} {t[1]} {t[2]})"
        ),
        st.tuples(inner, st.integers(0, 4)).map(lambda t: f"round({t[0]}, {t[1]})"),
        inner.map(lambda e: f"abs({e})"),
    ),
    max_leaves=4,
)

STR_METHODS = [
    "upper()", "lower()", "strip()", "title()", "strip(' a')", "replace('a', 'A', 1)", "zfill(6)",
    "center(9, '*')", "swapcase()", "casefold()", "removeprefix('al')", "lstrip('-')", "ljust(5, '.')",
]  # fmt: skip

STRS: st.SearchStrategy[str] = st.recursive(
    st.one_of(
        st.sampled_from(WORDS).map(repr),
        _slot("s"),
        _slot("s"),
        INTS.map(lambda e: f"str({e})"),
        _slot("l").map(lambda slot: f"'-'.join(str(v) for v in {slot})"),
    ),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda t: f"({t[0]} + {t[1]})"),
        st.tuples(inner, st.integers(0, 3)).map(lambda t: f"({t[0]} * {t[1]})"),
        st.tuples(inner, st.sampled_from(STR_METHODS)).map(lambda t: f"{t[0]}.{t[1]}"),
        st.tuples(inner, st.integers(-3, 3), st.integers(-3, 4)).map(lambda t: f"{t[0]}[{t[1]}:{t[2]}]"),
        st.tuples(inner, INTS).map(lambda t: f"'%s=%d' % ({t[0]}, {t[1]})"),
        st.tuples(inner, st.sampled_from(STR_SPECS)).map(lambda t: f"format({t[0]}, {t[1]!r})"),
        st.tuples(st.sampled_from(FORMATS), inner, INTS).map(lambda t: f"{t[0]!r}.format({t[1]}, {t[2]})"),
    ),
    max_leaves=3,
)


def _field(parts: tuple[str, str, str]) -> str:
    expression, conversion, spec = parts
    return "{" + expression.replace('"', "'") + conversion + (":" + spec if spec else "") + "}"


#: f-strings of one to three fields, each an int, float or str with a format spec or a conversion.
FSTRINGS: st.SearchStrategy[str] = st.lists(
    st.one_of(
        st.tuples(INTS, st.just(""), st.sampled_from(INT_SPECS)).map(_field),
        st.tuples(FLOATS, st.just(""), st.sampled_from(FLOAT_SPECS)).map(_field),
        st.tuples(STRS, st.sampled_from(["", "", "!r"]), st.sampled_from(STR_SPECS)).map(_field),
    ),
    min_size=1,
    max_size=3,
).map(lambda fields: 'f"' + " | ".join(fields) + '"')

_SLOT = re.compile(r"\$([a-z])(\d)\$")
_FALLBACK = {"i": "7", "l": "[1, 2]", "o": "3", "k": "5", "f": "1.5", "s": "'w'"}


def fill(text: str, env: Env) -> str:
    """The expression with its placeholders replaced by names in scope, or literals where there are none."""

    def name(match: re.Match[str]) -> str:
        kind, index = match.group(1), int(match.group(2))
        if kind == "k":
            return f"{MARK}Int({index})" if "Int" in env.definitions else str(index)
        names = {"i": env.ints, "l": env.lists, "o": env.objects, "f": env.floats, "s": env.strs}[kind]
        if not names:
            return _FALLBACK[kind]
        chosen = names[index % len(names)]
        return f"{chosen}.total" if kind == "o" else chosen

    return _SLOT.sub(name, text)


def guarded(lines: list[str], counter: str | None = None) -> list[str]:
    """The statements in a ``try`` that prints what it caught, and counts in ``finally``."""
    guarded = ["try:", *indent(lines), f"except {CAUGHT} as e:", "    print('caught', type(e).__name__, e)"]
    if counter is not None:
        guarded += ["finally:", f"    {counter} += 1"]
    return guarded


def an_int(draw: Any, env: Env) -> str:
    return fill(draw(INTS), env)


def pick(draw: Any, names: list[str]) -> str:
    return names[draw(st.integers(0, len(names) - 1))]


def bind(name: str, default: str, expression: str) -> list[str]:
    """Bind `name` whatever happens: to `default`, then to `expression` unless it raises (and is caught)."""
    return [f"{name} = {default}", *guarded([f"{name} = {expression}"])]


def clamp(name: str) -> str:
    """Keep an int within a few hundred bits, so that repeated products and powers stay quick."""
    return f"{name} = {name} if -2 ** 130 < {name} < 2 ** 130 else {name} % 2 ** 70"
