"""A grammar of agent-style Python programs, as hypothesis strategies, for the differential test.

`programs()` draws a program: a few blocks of source text, run one after another in one
namespace, as an agent sends them. The first block defines what the program works with (a plain
class with in-place operators and methods taking keyword and ``*args`` arguments, a subclass, a
dataclass, an int subclass, a closure, a generator, helpers with loops and ``try``), the middle
blocks work on it (int arithmetic near the fast paths' bounds, floats, strings and their methods,
f-strings and format specs, in-place operators, list, dict and set operations, comprehensions,
bounded loops, ``try``/``except``/``finally`` with built-in exceptions raised and caught), a block
may be sent twice (the compile cache), and the last prints the results and ends with their value.

Every program is valid Python and ends quickly: loops run over small ranges, exponents and
shifts are small literals, and lists are cut back after they grow. Values whose printed form
differs between processes are never printed: no default object repr (it holds an address) and
no set of strings (its order is hash order); sets hold ints and are printed sorted.

Each name the program binds at module level starts with `MARK`: `with_prefix` replaces it, so
that many programs share one sandbox without sharing names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from hypothesis import strategies as st

__all__ = ["MARK", "Program", "programs", "with_prefix"]

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
class _Env:
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


def _indent(lines: list[str], depth: int = 1) -> list[str]:
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


def fill(text: str, env: _Env) -> str:
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


# ---- the definitions block ----------------------------------------------------------------------

IADD_BODIES = {
    "self": ["self.total += other", "return self"],
    "new": [f"return {MARK}Acc(self.total + other, step=self.step)"],
    "declines": ["return NotImplemented"],
}


def _function(draw: Any, env: _Env, name: str, method: bool) -> list[str]:
    """A def with a drawn body: int arithmetic, in-place operators and ``try`` on its parameters and
    locals in a bounded loop (where the fast paths infer ints and settle sums and products inline),
    returning an int; a method works on ``self.total`` and ``self.items`` too."""
    local = _Env(ints=["a", "b", "c", "acc", "i"], lists=["xs"], definitions=env.definitions)
    if method:
        local.objects.append("self")
    statements = []
    for _ in range(draw(st.integers(1, 4))):
        target = "self.total" if method and draw(st.booleans()) else "acc"
        form = draw(st.integers(0, 6))
        if form == 0:
            statements.append(f"xs.append({fill(draw(INTS), local)})")
        elif form == 1:
            statements += [f"if {fill(draw(INTS), local)} > {fill(draw(INTS), local)}:", "    continue"]
        elif form == 2:
            statements += _guarded([f"{target} //= {fill(draw(INTS), local)}"])
        elif form == 3:
            statements.append(f"c = {fill(draw(INTS), local)} * {fill(draw(INTS), local)}")
            statements.append(_clamp("c"))
        else:
            operator = draw(st.sampled_from(("+", "+", "-", "*", "%", "^", "<<")))
            operand = str(draw(st.integers(0, 9))) if operator == "<<" else fill(draw(INTS), local)
            statements += [*_guarded([f"{target} {operator}= {operand}"]), _clamp(target)]
    head = "self, " if method else ""
    lines = [
        f"def {name}({head}a, b=2, *rest, c=1):",
        "    acc = a + len(rest)",
        "    xs = [b, c, *rest][:6]",
        f"    for i in range({draw(st.integers(0, 5))}):",
        *_indent(statements, 2),
        "    return acc + sum(xs)" + (" + self.total" if method else ""),
    ]
    return _indent(lines) if method else lines


def _accumulator(draw: Any, env: _Env) -> list[str]:
    """A plain class: class attribute, keyword-only and ``*args`` parameters, in-place operators, a property."""
    modulus = draw(st.integers(1, 7))
    iadd = draw(st.sampled_from(sorted(IADD_BODIES)))
    lines = [
        f"class {MARK}Acc:",
        "    label = 'acc'",
        "    def __init__(self, start=0, *, step=1):",
        "        self.total = start",
        "        self.step = step",
        "        self.items = []",
        "    def add(self, *values, scale=1):",
        "        for v in values:",
        f"            self.total {draw(st.sampled_from(['+=', '-=', '^=', '|=']))} v * scale",
        "        self.items.append(len(values))",
        "        return self.total",
        "    def bump(self, n):",
        "        for i in range(n):",
        f"            self.total += i % {modulus} * self.step + i * i",
        "        return self",
        "    def __iadd__(self, other):",
        *_indent(IADD_BODIES[iadd], 2),
        "    def __imod__(self, other):",
        "        self.total %= other",
        "        return self",
        "    def __ilshift__(self, other):",
        "        self.total <<= other",
        "        return self",
        "    @property",
        "    def double(self):",
        "        return self.total * 2",
        "    def __repr__(self):",
        "        return f'{type(self).__name__}({self.total!r}, {self.items})'",
    ]
    if draw(st.booleans()):
        lines += ["    def __add__(self, other):", f"        return {MARK}Acc(self.total + int(other))"]
    if draw(st.booleans()):
        lines += _function(draw, env, "mix", method=True)
        env.definitions.add("mix")
    if draw(st.booleans()):
        lines += [
            f"class {MARK}Sub({MARK}Acc):",
            "    def __init__(self, start=0, **options):",
            "        super().__init__(start, **options)",
            "        self.label = 'sub'",
            "    def add(self, *values, scale=2):",
            "        return super().add(*values, scale=scale) + len(self.items)",
        ]
        env.definitions.add("Sub")
    env.definitions.add("Acc")
    return lines


def _definitions(draw: Any, env: _Env) -> list[str]:
    lines = ["from dataclasses import dataclass, field"]
    if draw(st.booleans()):
        lines += _accumulator(draw, env)
    if draw(st.booleans()):
        lines += _function(draw, env, f"{MARK}fn", method=False)
        env.definitions.add("fn")
    if draw(st.booleans()):
        options = draw(st.sampled_from(["", "order=True", "frozen=True", "order=True, frozen=True"]))
        lines += [
            f"@dataclass({options})",
            f"class {MARK}Pt:",
            "    x: int",
            "    y: int = 0",
            "    tags: list = field(default_factory=list)",
            "    def norm(self):",
            "        return abs(self.x) + abs(self.y)",
        ]
        env.definitions.add("Pt")
    if draw(st.booleans()):
        body = draw(
            st.sampled_from(["pass", "def __add__(self, other):\n        return type(self)(int(self) + other)"])
        )
        lines += [f"class {MARK}Int(int):", f"    {body}"]
        env.definitions.add("Int")
    if draw(st.booleans()):
        k = draw(st.integers(-3, 5))
        lines += [
            f"def {MARK}make(k={k}):",
            "    count = 0",
            "    def step(x):",
            "        nonlocal count",
            "        count += 1",
            "        return x * k + count",
            "    return step",
        ]
        env.definitions.add("make")
    if draw(st.booleans()):
        lines += [
            f"def {MARK}gen(n, k=2):",
            "    for i in range(n):",
            "        if i % k == 0:",
            "            yield i * i",
            "        else:",
            f"            yield -i {draw(st.sampled_from(['*', '+', '<<']))} {draw(st.integers(0, 3))}",
        ]
        env.definitions.add("gen")
    if draw(st.booleans()):
        lines += [
            f"def {MARK}combine(a, *rest, sep='-', **extra):",
            "    parts = [str(a)] + [str(r) for r in rest]",
            "    return sep.join(parts) + ''.join(f'{k}={v}' for k, v in sorted(extra.items()))",
        ]
        env.definitions.add("combine")
    if draw(st.booleans()):
        c = draw(st.integers(0, 3))
        lines += [
            f"def {MARK}safe(xs, d):",
            "    out = []",
            "    for i in range(len(xs) + 1):",
            "        try:",
            f"            out.append(xs[i] // (i - {c}))",
            "        except ZeroDivisionError as e:",
            "            out.append(str(e))",
            "        except IndexError:",
            "            out.append('end')",
            "            break",
            "        finally:",
            "            d['n'] = d.get('n', 0) + 1",
            "    return out",
        ]
        env.definitions.add("safe")
    return lines


# ---- statements -------------------------------------------------------------------------------


def _guarded(lines: list[str], counter: str | None = None) -> list[str]:
    """The statements in a ``try`` that prints what it caught, and counts in ``finally``."""
    guarded = ["try:", *_indent(lines), f"except {CAUGHT} as e:", "    print('caught', type(e).__name__, e)"]
    if counter is not None:
        guarded += ["finally:", f"    {counter} += 1"]
    return guarded


def _int(draw: Any, env: _Env) -> str:
    return fill(draw(INTS), env)


def _pick(draw: Any, names: list[str]) -> str:
    return names[draw(st.integers(0, len(names) - 1))]


def _bind(name: str, default: str, expression: str) -> list[str]:
    """Bind `name` whatever happens: to `default`, then to `expression` unless it raises (and is caught)."""
    return [f"{name} = {default}", *_guarded([f"{name} = {expression}"])]


def _clamp(name: str) -> str:
    """Keep an int within a few hundred bits, so that repeated products and powers stay quick."""
    return f"{name} = {name} if -2 ** 130 < {name} < 2 ** 130 else {name} % 2 ** 70"


def _statement(draw: Any, env: _Env, depth: int = 0) -> list[str]:
    """One statement (or a few lines that belong together), which may bind a new name in `env`."""
    kinds = ["int", "aug-int", "float", "aug-float", "str", "aug-str", "list", "dict", "set", "print", "raise"]
    kinds.append("comprehension")
    if env.objects:
        kinds += ["object", "object"]
    elif "Acc" in env.definitions:
        kinds.append("new-object")
    if "Pt" in env.definitions:
        kinds.append("point")
    if {"make", "gen", "combine", "safe", "fn"} & env.definitions:
        kinds.append("call")
    if depth == 0:
        kinds += ["loop", "loop"]
    kind = draw(st.sampled_from(kinds))
    if kind == "int":
        if env.ints and draw(st.booleans()):
            name = _pick(draw, env.ints)
            return _guarded([f"{name} = {_int(draw, env)}", _clamp(name)])
        name = env.fresh("n")
        env.ints.append(name)
        return [*_bind(name, "0", _int(draw, env)), _clamp(name)]
    if kind == "aug-int" and env.ints:
        name = _pick(draw, env.ints)
        operator = draw(st.sampled_from((*IN_PLACE, "<<", ">>", "**")))
        operand = str(draw(st.integers(0, 3))) if operator in ("<<", ">>", "**") else _int(draw, env)
        return _guarded([f"{name} {operator}= {operand}", _clamp(name)])
    if kind == "aug-float" and env.floats:
        name = _pick(draw, env.floats)
        operator = draw(st.sampled_from(("+", "-", "*", "/", "//", "%", "**")))
        operand = str(draw(st.integers(0, 2))) if operator == "**" else fill(draw(FLOATS), env)
        return _guarded([f"{name} {operator}= {operand}", f"{name} = {name} if abs({name}) < 1e100 else 1e100"])
    if kind in ("float", "aug-float"):
        name = env.fresh("f")
        env.floats.append(name)
        return _bind(name, "0.5", fill(draw(FLOATS), env))
    if kind == "aug-str" and env.strs:
        name = _pick(draw, env.strs)
        operand = fill(draw(st.one_of(STRS, st.integers(0, 2).map(str))), env)
        operator = "*" if operand.isdigit() else "+"
        if draw(st.integers(0, 3)) == 0:
            return [
                f"{name} = {draw(st.sampled_from(PERCENT_FORMATS))!r}",
                *_guarded([f"{name} %= ({_int(draw, env)}, {operand})"]),
            ]
        return _guarded([f"{name} {operator}= {operand}", f"{name} = {name}[:40]"])
    if kind in ("str", "aug-str"):
        name = env.fresh("s")
        env.strs.append(name)
        return _bind(name, "''", fill(draw(st.one_of(STRS, FSTRINGS)), env))
    if kind == "list":
        return _list_statement(draw, env)
    if kind == "dict":
        return _dict_statement(draw, env)
    if kind == "set":
        return _set_statement(draw, env)
    if kind == "print":
        return _print_statement(draw, env)
    if kind == "raise":
        error = draw(st.sampled_from(["ValueError", "KeyError", "ZeroDivisionError", "IndexError", "TypeError"]))
        message = fill(draw(st.one_of(st.just(""), STRS, FSTRINGS)), env)
        body = draw(st.sampled_from([[f"raise {error}({message})"], ["int('x' + str(len('ab')))"], ["[][1]"]]))
        return _guarded([f"if {_int(draw, env)} >= 0:", *_indent(body)])
    if kind == "comprehension":
        return _comprehension(draw, env)
    if kind == "new-object":
        name = env.fresh("o")
        cls = _pick(draw, sorted({"Acc", "Sub"} & env.definitions))
        env.objects.append(name)
        return [f"{name} = {MARK}{cls}({draw(st.integers(-5, 5))}, step={draw(st.integers(1, 3))})"]
    if kind == "object":
        return _object_statement(draw, env)
    if kind == "point":
        return _point_statement(draw, env)
    if kind == "call":
        return _call_statement(draw, env)
    return _loop(draw, env)


def _list_statement(draw: Any, env: _Env) -> list[str]:
    if not env.lists:
        name = env.fresh("xs")
        env.lists.append(name)
        items = [_int(draw, env) for _ in range(draw(st.integers(0, 4)))]
        return _bind(name, "[]", f"[{', '.join(items)}]")
    name = _pick(draw, env.lists)
    forms = [
        f"{name}.append({_int(draw, env)})",
        f"{name}.extend([{_int(draw, env)}, {_int(draw, env)}])",
        f"{name} += [{_int(draw, env)}]",
        f"{name} *= {draw(st.integers(0, 2))}",
        f"{name}.insert({draw(st.integers(-2, 2))}, {_int(draw, env)})",
        f"{name}.pop()",
        f"{name}[{draw(st.integers(-2, 2))}] += {_int(draw, env)}",
        f"{name}.sort(key=lambda v: (v % 3, -v))",
        f"{name}.sort(reverse=True)",
        f"{name}.remove({_int(draw, env)})",
        f"{name} = sorted({name}, key=abs)[:{draw(st.integers(0, 6))}]",
    ]
    return _guarded([draw(st.sampled_from(forms)), f"del {name}[12:]"])


def _dict_statement(draw: Any, env: _Env) -> list[str]:
    key = repr(draw(st.sampled_from(["a", "b", "c", "n"])))
    if not env.dicts:
        name = env.fresh("d")
        env.dicts.append(name)
        return _bind(name, "{}", f"{{{key}: {_int(draw, env)}, 'b': 2}}")
    name = _pick(draw, env.dicts)
    forms = [
        f"{name}[{key}] = {_int(draw, env)}",
        f"{name}[{key}] += {_int(draw, env)}",
        f"{name}[{key}] = {name}.get({key}, 0) - 1",
        f"{name}.setdefault({key}, {_int(draw, env)})",
        f"{name}.update({{{key}: {_int(draw, env)}}}, z=1)",
        f"{name}.pop({key})",
        f"del {name}[{key}]",
        f"{name} |= {{k: v * 2 for k, v in {name}.items() if v}}",
        f"print(sorted({name}.items()), list({name}), {key} in {name})",
    ]
    return _guarded([draw(st.sampled_from(forms))])


def _set_statement(draw: Any, env: _Env) -> list[str]:
    if not env.sets:
        name = env.fresh("ss")
        env.sets.append(name)
        return [f"{name} = {{{draw(st.integers(-3, 9))}, {draw(st.integers(-3, 9))}}}"]
    name = _pick(draw, env.sets)
    small = f"{{{draw(st.integers(-3, 9))}, {draw(st.integers(-3, 9))}}}"
    forms = [
        f"{name}.add({_int(draw, env)} % 17)",
        f"{name} |= {small}",
        f"{name} &= {small} | {{0, 1, 2}}",
        f"{name} -= {small}",
        f"{name} ^= {small}",
        f"{name}.discard({draw(st.integers(-3, 9))})",
        f"{name}.remove({draw(st.integers(-3, 9))})",
        f"print(sorted({name}), len({name}), {draw(st.integers(0, 3))} in {name})",
    ]
    return _guarded([draw(st.sampled_from(forms))])


def _print_statement(draw: Any, env: _Env) -> list[str]:
    form = draw(st.sampled_from(["fstring", "percent", "methods", "values"]))
    if form == "fstring":
        return _guarded([f"print({fill(draw(FSTRINGS), env)})"])
    if form == "percent":
        return _guarded([f"print('%d / %s / %5.2f' % ({_int(draw, env)}, {fill(draw(STRS), env)}, 1.5))"])
    if form == "methods" and env.strs:
        s = _pick(draw, env.strs)
        return _guarded(
            [
                f"print({s}.split('-'), {s}.split(), {s}.count('a'), {s}.find('b'), {s}.startswith(('a', 'x')))",
                f"print({s}.partition(','), {s}.isdigit(), {s}.rsplit(',', 1), {s}.encode()[:4], int({s} or '0'))",
            ]
        )
    names = [*env.ints, *env.strs, *env.lists, *env.floats, *env.objects, *env.points]
    if not names:
        return ["print('nothing yet')"]
    chosen = [_pick(draw, names) for _ in range(draw(st.integers(1, 3)))]
    return [f"print({', '.join(chosen)}, sep={draw(st.sampled_from(['', ' ', ', ']))!r})"]


def _comprehension(draw: Any, env: _Env) -> list[str]:
    source = _pick(draw, [*env.lists, f"range({draw(st.integers(0, 6))})", _pick(draw, HUGE_RANGES)])
    modulus = draw(st.integers(1, 4))
    form = draw(st.sampled_from(["list", "dict", "set", "sum", "nested", "genexp"]))
    name = env.fresh("c")
    if form == "list":
        env.lists.append(name)
        return _bind(name, "[]", f"[v * {modulus} + i for i, v in enumerate({source}) if v % {modulus}]")
    if form == "set":
        env.sets.append(name)
        return _bind(name, "set()", f"{{v % 7 for v in {source}}}")
    if form == "nested":
        env.lists.append(name)
        return _bind(name, "[]", f"[a * b for a in {source} for b in range({modulus}) if a != b]")
    env.ints.append(name)
    if form == "dict":
        return _bind(name, "0", f"len({{str(v): v for v in {source}}})")
    if form == "genexp":
        return _bind(name, "0", f"max((v * v for v in {source}), default=-1)")
    return _bind(name, "0", f"sum(v ** 2 for v in {source})")


def _object_statement(draw: Any, env: _Env) -> list[str]:
    name = _pick(draw, env.objects)
    args = [_int(draw, env) for _ in range(draw(st.integers(0, 3)))]
    forms = [
        f"{name}.add({', '.join(args)})",
        f"{name}.add({', '.join(args)}{', ' if args else ''}scale={draw(st.integers(-2, 3))})",
        f"{name}.add(*[{', '.join(args)}])",
        f"{name}.bump({draw(st.integers(0, 6))})",
        f"{name} += {_int(draw, env)}",
        f"{name} %= {draw(st.integers(-3, 7))}",
        f"{name} <<= {draw(st.integers(0, 5))}",
        f"{name}.total += {_int(draw, env)}",
        f"{name}.total //= {_int(draw, env)}",
        f"{name}.label += '!'",
        f"print({name}.double, {name}.label, {name}.items[-2:], {name})",
        f"print({name} + {_int(draw, env)})",
        f"print({_int(draw, env)} + {name}, {name} * 2, 3 * {name}, {name} == {name})",
        f"print({name}.add({_pick(draw, env.objects)}.add({_int(draw, env)}), scale={name}.bump(1).total))",
        f"print([v.total for v in [{', '.join(env.objects)}]], sum(v.add(1) for v in [{name}]))",
    ]
    if env.lists:
        forms.append(f"{name}.add(*{_pick(draw, env.lists)}, scale=2)")
    if "mix" in env.definitions:
        keyword = f", c={_int(draw, env)}" if draw(st.booleans()) else ""
        forms += [
            f"print({name}.mix({', '.join(args) or '0'}{keyword}))",
            f"{name}.mix({_int(draw, env)}, *[{', '.join(args)}])",
        ]
    return _guarded([draw(st.sampled_from(forms))])


def _point_statement(draw: Any, env: _Env) -> list[str]:
    if not env.points or draw(st.booleans()):
        name = env.fresh("p")
        env.points.append(name)
        return [f"{name} = {MARK}Pt({draw(st.integers(-5, 5))}, y={draw(st.integers(-5, 5))})"]
    a, b = _pick(draw, env.points), _pick(draw, env.points)
    forms = [
        f"{a}.x += {_int(draw, env)}",
        f"{a}.tags.append({_int(draw, env)})",
        f"print({a} < {b}, {a} == {b}, {a}.norm(), {a})",
        f"print(sorted([{a}, {b}]))",
        f"{a}.y = {a}.norm() % 5",
    ]
    return _guarded([draw(st.sampled_from(forms))])


def _call_statement(draw: Any, env: _Env) -> list[str]:
    chosen = _pick(draw, sorted({"make", "gen", "combine", "safe", "fn"} & env.definitions))
    name = env.fresh("r")
    if chosen == "fn":
        env.ints.append(name)
        arguments = [_int(draw, env) for _ in range(draw(st.integers(1, 3)))]
        if env.lists and draw(st.booleans()):
            arguments.append(f"*{_pick(draw, env.lists)}")
        if draw(st.booleans()):
            arguments.append(f"c={_int(draw, env)}")
        return [*_bind(name, "0", f"{MARK}fn({', '.join(arguments)})"), _clamp(name)]
    if chosen == "make":
        env.ints.append(name)
        step = env.fresh("step")
        return [
            f"{step} = {MARK}make({draw(st.integers(-3, 3))})",
            *_bind(name, "0", f"{step}({_int(draw, env)}) + {step}(1)"),
            _clamp(name),
        ]
    if chosen == "gen":
        n, k = draw(st.integers(0, 6)), draw(st.integers(1, 3))
        form = draw(st.sampled_from(["sum", "list", "next"]))
        if form == "list":
            env.lists.append(name)
            return [f"{name} = list({MARK}gen({n}, k={k}))"]
        env.ints.append(name)
        if form == "sum":
            return [f"{name} = sum({MARK}gen({n}))"]
        generator = env.fresh("g")
        return [f"{generator} = {MARK}gen({n}, {k})", *_bind(name, "0", f"next({generator})")]
    if chosen == "combine":
        env.strs.append(name)
        args = [fill(draw(st.one_of(INTS, STRS)), env) for _ in range(draw(st.integers(1, 3)))]
        extra = draw(st.sampled_from(["", ", sep='+'", ", z=1, a=2", ", **{'k': 3}"]))
        star = f", *{_pick(draw, env.lists)}" if env.lists and draw(st.booleans()) else ""
        return _bind(name, "''", f"{MARK}combine({', '.join(args)}{star}{extra})")
    env.lists.append(name)
    if not env.lists[:-1] or not env.dicts:
        return _bind(name, "[]", f"{MARK}safe([{_int(draw, env)}, 4, 9], {{}})")
    return _bind(name, "[]", f"{MARK}safe({_pick(draw, env.lists[:-1])}, {_pick(draw, env.dicts)})")


def _uncaught(draw: Any, env: _Env) -> str:
    return fill(draw(st.sampled_from(UNCAUGHT)), env)


def _loop(draw: Any, env: _Env) -> list[str]:
    """A bounded loop whose body uses its variable; its try counts in ``finally``."""
    counter = env.fresh("count")
    env.ints.append(counter)
    variable = env.fresh("i")
    env.ints.append(variable)  # bound after the loop unless the range is empty: set it first
    inner = _Env(**{k: (list(v) if isinstance(v, list) else v) for k, v in vars(env).items()})
    body = [_statement(draw, inner, 1) for _ in range(draw(st.integers(1, 3)))]
    env.counter = inner.counter
    lines = [line for statement in body for line in statement]
    return [
        f"{counter} = 0",
        f"{variable} = -1",
        f"for {variable} in {_pick(draw, ['range(3)', 'range(0)', 'range(4)', *HUGE_RANGES])}:",
        *_indent(_guarded([*lines, f"{counter} += {variable} % 3"], counter)),
    ]


# ---- programs ---------------------------------------------------------------------------------


@st.composite
def programs(draw: Any) -> Program:
    """A program: its definitions, a few blocks of statements (one perhaps sent twice), a final print and value."""
    env = _Env()
    blocks = ["\n".join(_definitions(draw, env)) + "\n"]
    for _ in range(draw(st.integers(1, 3))):
        statements = [_statement(draw, env) for _ in range(draw(st.integers(1, 5)))]
        if draw(st.integers(0, 5)) == 0:
            statements.append([_uncaught(draw, env)])  # the block ends with an error: its type and message
        blocks.append("\n".join(line for statement in statements for line in statement) + "\n")
        if draw(st.integers(0, 4)) == 0:
            blocks.append(blocks[-1])  # the same block again: the second comes from the compile cache
    shown = [*env.ints, *env.strs, *env.floats, *env.lists, *env.dicts, *env.objects, *env.points]
    values = [*env.ints, *env.strs, *env.floats, *env.lists, *env.dicts, *(f"sorted({s})" for s in env.sets)]
    final = [f"print({name!r}, repr({name}))" for name in shown]
    final += [f"print({name!r}, sorted({name}))" for name in env.sets]
    final.append(f"({', '.join(values)},)" if values else "None")
    blocks.append("\n".join(final) + "\n")
    return Program(blocks)
