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

Its vocabulary, expressions and helpers are in `program_parts`.
"""

from __future__ import annotations

from typing import Any

from hypothesis import strategies as st

from tests.executors.local.program_parts import (
    FLOATS,
    FSTRINGS,
    HUGE_RANGES,
    IN_PLACE,
    INTS,
    MARK,
    PERCENT_FORMATS,
    STRS,
    UNCAUGHT,
    Env,
    Program,
    an_int,
    bind,
    clamp,
    fill,
    guarded,
    indent,
    pick,
    with_prefix,
)

__all__ = ["MARK", "Program", "programs", "with_prefix"]


# ---- the definitions block ----------------------------------------------------------------------

IADD_BODIES = {
    "self": ["self.total += other", "return self"],
    "new": [f"return {MARK}Acc(self.total + other, step=self.step)"],
    "declines": ["return NotImplemented"],
}


def _function(draw: Any, env: Env, name: str, method: bool) -> list[str]:
    """A def with a drawn body: int arithmetic, in-place operators and ``try`` on its parameters and
    locals in a bounded loop (where the fast paths infer ints and settle sums and products inline),
    returning an int; a method works on ``self.total`` and ``self.items`` too."""
    local = Env(ints=["a", "b", "c", "acc", "i"], lists=["xs"], definitions=env.definitions)
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
            statements += guarded([f"{target} //= {fill(draw(INTS), local)}"])
        elif form == 3:
            statements.append(f"c = {fill(draw(INTS), local)} * {fill(draw(INTS), local)}")
            statements.append(clamp("c"))
        else:
            operator = draw(st.sampled_from(("+", "+", "-", "*", "%", "^", "<<")))
            operand = str(draw(st.integers(0, 9))) if operator == "<<" else fill(draw(INTS), local)
            statements += [*guarded([f"{target} {operator}= {operand}"]), clamp(target)]
    head = "self, " if method else ""
    lines = [
        f"def {name}({head}a, b=2, *rest, c=1):",
        "    acc = a + len(rest)",
        "    xs = [b, c, *rest][:6]",
        f"    for i in range({draw(st.integers(0, 5))}):",
        *indent(statements, 2),
        "    return acc + sum(xs)" + (" + self.total" if method else ""),
    ]
    return indent(lines) if method else lines


def _accumulator(draw: Any, env: Env) -> list[str]:
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
        *indent(IADD_BODIES[iadd], 2),
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


def _definitions(draw: Any, env: Env) -> list[str]:
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


def _statement(draw: Any, env: Env, depth: int = 0) -> list[str]:
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
            name = pick(draw, env.ints)
            return guarded([f"{name} = {an_int(draw, env)}", clamp(name)])
        name = env.fresh("n")
        env.ints.append(name)
        return [*bind(name, "0", an_int(draw, env)), clamp(name)]
    if kind == "aug-int" and env.ints:
        name = pick(draw, env.ints)
        operator = draw(st.sampled_from((*IN_PLACE, "<<", ">>", "**")))
        operand = str(draw(st.integers(0, 3))) if operator in ("<<", ">>", "**") else an_int(draw, env)
        return guarded([f"{name} {operator}= {operand}", clamp(name)])
    if kind == "aug-float" and env.floats:
        name = pick(draw, env.floats)
        operator = draw(st.sampled_from(("+", "-", "*", "/", "//", "%", "**")))
        operand = str(draw(st.integers(0, 2))) if operator == "**" else fill(draw(FLOATS), env)
        return guarded([f"{name} {operator}= {operand}", f"{name} = {name} if abs({name}) < 1e100 else 1e100"])
    if kind in ("float", "aug-float"):
        name = env.fresh("f")
        env.floats.append(name)
        return bind(name, "0.5", fill(draw(FLOATS), env))
    if kind == "aug-str" and env.strs:
        name = pick(draw, env.strs)
        operand = fill(draw(st.one_of(STRS, st.integers(0, 2).map(str))), env)
        operator = "*" if operand.isdigit() else "+"
        if draw(st.integers(0, 3)) == 0:
            return [
                f"{name} = {draw(st.sampled_from(PERCENT_FORMATS))!r}",
                *guarded([f"{name} %= ({an_int(draw, env)}, {operand})"]),
            ]
        return guarded([f"{name} {operator}= {operand}", f"{name} = {name}[:40]"])
    if kind in ("str", "aug-str"):
        name = env.fresh("s")
        env.strs.append(name)
        return bind(name, "''", fill(draw(st.one_of(STRS, FSTRINGS)), env))
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
        return guarded([f"if {an_int(draw, env)} >= 0:", *indent(body)])
    if kind == "comprehension":
        return _comprehension(draw, env)
    if kind == "new-object":
        name = env.fresh("o")
        cls = pick(draw, sorted({"Acc", "Sub"} & env.definitions))
        env.objects.append(name)
        return [f"{name} = {MARK}{cls}({draw(st.integers(-5, 5))}, step={draw(st.integers(1, 3))})"]
    if kind == "object":
        return _object_statement(draw, env)
    if kind == "point":
        return _point_statement(draw, env)
    if kind == "call":
        return _call_statement(draw, env)
    return _loop(draw, env)


def _list_statement(draw: Any, env: Env) -> list[str]:
    if not env.lists:
        name = env.fresh("xs")
        env.lists.append(name)
        items = [an_int(draw, env) for _ in range(draw(st.integers(0, 4)))]
        return bind(name, "[]", f"[{', '.join(items)}]")
    name = pick(draw, env.lists)
    forms = [
        f"{name}.append({an_int(draw, env)})",
        f"{name}.extend([{an_int(draw, env)}, {an_int(draw, env)}])",
        f"{name} += [{an_int(draw, env)}]",
        f"{name} *= {draw(st.integers(0, 2))}",
        f"{name}.insert({draw(st.integers(-2, 2))}, {an_int(draw, env)})",
        f"{name}.pop()",
        f"{name}[{draw(st.integers(-2, 2))}] += {an_int(draw, env)}",
        f"{name}.sort(key=lambda v: (v % 3, -v))",
        f"{name}.sort(reverse=True)",
        f"{name}.remove({an_int(draw, env)})",
        f"{name} = sorted({name}, key=abs)[:{draw(st.integers(0, 6))}]",
    ]
    return guarded([draw(st.sampled_from(forms)), f"del {name}[12:]"])


def _dict_statement(draw: Any, env: Env) -> list[str]:
    key = repr(draw(st.sampled_from(["a", "b", "c", "n"])))
    if not env.dicts:
        name = env.fresh("d")
        env.dicts.append(name)
        return bind(name, "{}", f"{{{key}: {an_int(draw, env)}, 'b': 2}}")
    name = pick(draw, env.dicts)
    forms = [
        f"{name}[{key}] = {an_int(draw, env)}",
        f"{name}[{key}] += {an_int(draw, env)}",
        f"{name}[{key}] = {name}.get({key}, 0) - 1",
        f"{name}.setdefault({key}, {an_int(draw, env)})",
        f"{name}.update({{{key}: {an_int(draw, env)}}}, z=1)",
        f"{name}.pop({key})",
        f"del {name}[{key}]",
        f"{name} |= {{k: v * 2 for k, v in {name}.items() if v}}",
        f"print(sorted({name}.items()), list({name}), {key} in {name})",
    ]
    return guarded([draw(st.sampled_from(forms))])


def _set_statement(draw: Any, env: Env) -> list[str]:
    if not env.sets:
        name = env.fresh("ss")
        env.sets.append(name)
        return [f"{name} = {{{draw(st.integers(-3, 9))}, {draw(st.integers(-3, 9))}}}"]
    name = pick(draw, env.sets)
    small = f"{{{draw(st.integers(-3, 9))}, {draw(st.integers(-3, 9))}}}"
    forms = [
        f"{name}.add({an_int(draw, env)} % 17)",
        f"{name} |= {small}",
        f"{name} &= {small} | {{0, 1, 2}}",
        f"{name} -= {small}",
        f"{name} ^= {small}",
        f"{name}.discard({draw(st.integers(-3, 9))})",
        f"{name}.remove({draw(st.integers(-3, 9))})",
        f"print(sorted({name}), len({name}), {draw(st.integers(0, 3))} in {name})",
    ]
    return guarded([draw(st.sampled_from(forms))])


def _print_statement(draw: Any, env: Env) -> list[str]:
    form = draw(st.sampled_from(["fstring", "percent", "methods", "values"]))
    if form == "fstring":
        return guarded([f"print({fill(draw(FSTRINGS), env)})"])
    if form == "percent":
        return guarded([f"print('%d / %s / %5.2f' % ({an_int(draw, env)}, {fill(draw(STRS), env)}, 1.5))"])
    if form == "methods" and env.strs:
        s = pick(draw, env.strs)
        return guarded(
            [
                f"print({s}.split('-'), {s}.split(), {s}.count('a'), {s}.find('b'), {s}.startswith(('a', 'x')))",
                f"print({s}.partition(','), {s}.isdigit(), {s}.rsplit(',', 1), {s}.encode()[:4], int({s} or '0'))",
            ]
        )
    names = [*env.ints, *env.strs, *env.lists, *env.floats, *env.objects, *env.points]
    if not names:
        return ["print('nothing yet')"]
    chosen = [pick(draw, names) for _ in range(draw(st.integers(1, 3)))]
    return [f"print({', '.join(chosen)}, sep={draw(st.sampled_from(['', ' ', ', ']))!r})"]


def _comprehension(draw: Any, env: Env) -> list[str]:
    source = pick(draw, [*env.lists, f"range({draw(st.integers(0, 6))})", pick(draw, HUGE_RANGES)])
    modulus = draw(st.integers(1, 4))
    form = draw(st.sampled_from(["list", "dict", "set", "sum", "nested", "genexp"]))
    name = env.fresh("c")
    if form == "list":
        env.lists.append(name)
        return bind(name, "[]", f"[v * {modulus} + i for i, v in enumerate({source}) if v % {modulus}]")
    if form == "set":
        env.sets.append(name)
        return bind(name, "set()", f"{{v % 7 for v in {source}}}")
    if form == "nested":
        env.lists.append(name)
        return bind(name, "[]", f"[a * b for a in {source} for b in range({modulus}) if a != b]")
    env.ints.append(name)
    if form == "dict":
        return bind(name, "0", f"len({{str(v): v for v in {source}}})")
    if form == "genexp":
        return bind(name, "0", f"max((v * v for v in {source}), default=-1)")
    return bind(name, "0", f"sum(v ** 2 for v in {source})")


def _object_statement(draw: Any, env: Env) -> list[str]:
    name = pick(draw, env.objects)
    args = [an_int(draw, env) for _ in range(draw(st.integers(0, 3)))]
    forms = [
        f"{name}.add({', '.join(args)})",
        f"{name}.add({', '.join(args)}{', ' if args else ''}scale={draw(st.integers(-2, 3))})",
        f"{name}.add(*[{', '.join(args)}])",
        f"{name}.bump({draw(st.integers(0, 6))})",
        f"{name} += {an_int(draw, env)}",
        f"{name} %= {draw(st.integers(-3, 7))}",
        f"{name} <<= {draw(st.integers(0, 5))}",
        f"{name}.total += {an_int(draw, env)}",
        f"{name}.total //= {an_int(draw, env)}",
        f"{name}.label += '!'",
        f"{name}.items += [{an_int(draw, env)}] if {name}.items else ()",
        f"{name}.items *= 2; del {name}.items[8:]",
        f"{MARK}Acc.label += '?'; {MARK}Acc.label = {MARK}Acc.label[:12]",
        f"{name}.double = {an_int(draw, env)}",
        f"print({name}.double, {name}.label, {name}.items[-2:], {name})",
        f"print({name} + {an_int(draw, env)})",
        f"print({an_int(draw, env)} + {name}, {name} * 2, 3 * {name}, {name} == {name})",
        f"print({name}.add({pick(draw, env.objects)}.add({an_int(draw, env)}), scale={name}.bump(1).total))",
        f"print([v.total for v in [{', '.join(env.objects)}]], sum(v.add(1) for v in [{name}]))",
    ]
    if env.lists:
        forms.append(f"{name}.add(*{pick(draw, env.lists)}, scale=2)")
    if "mix" in env.definitions:
        keyword = f", c={an_int(draw, env)}" if draw(st.booleans()) else ""
        forms += [
            f"print({name}.mix({', '.join(args) or '0'}{keyword}))",
            f"{name}.mix({an_int(draw, env)}, *[{', '.join(args)}])",
        ]
    return guarded([draw(st.sampled_from(forms))])


def _point_statement(draw: Any, env: Env) -> list[str]:
    if not env.points or draw(st.booleans()):
        name = env.fresh("p")
        env.points.append(name)
        return [f"{name} = {MARK}Pt({draw(st.integers(-5, 5))}, y={draw(st.integers(-5, 5))})"]
    a, b = pick(draw, env.points), pick(draw, env.points)
    forms = [
        f"{a}.x += {an_int(draw, env)}",
        f"{a}.tags.append({an_int(draw, env)})",
        f"print({a} < {b}, {a} == {b}, {a}.norm(), {a})",
        f"print(sorted([{a}, {b}]))",
        f"{a}.y = {a}.norm() % 5",
    ]
    return guarded([draw(st.sampled_from(forms))])


def _call_statement(draw: Any, env: Env) -> list[str]:
    chosen = pick(draw, sorted({"make", "gen", "combine", "safe", "fn"} & env.definitions))
    name = env.fresh("r")
    if chosen == "fn":
        env.ints.append(name)
        arguments = [an_int(draw, env) for _ in range(draw(st.integers(1, 3)))]
        if env.lists and draw(st.booleans()):
            arguments.append(f"*{pick(draw, env.lists)}")
        if draw(st.booleans()):
            arguments.append(f"c={an_int(draw, env)}")
        return [*bind(name, "0", f"{MARK}fn({', '.join(arguments)})"), clamp(name)]
    if chosen == "make":
        env.ints.append(name)
        step = env.fresh("step")
        return [
            f"{step} = {MARK}make({draw(st.integers(-3, 3))})",
            *bind(name, "0", f"{step}({an_int(draw, env)}) + {step}(1)"),
            clamp(name),
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
        return [f"{generator} = {MARK}gen({n}, {k})", *bind(name, "0", f"next({generator})")]
    if chosen == "combine":
        env.strs.append(name)
        args = [fill(draw(st.one_of(INTS, STRS)), env) for _ in range(draw(st.integers(1, 3)))]
        extra = draw(st.sampled_from(["", ", sep='+'", ", z=1, a=2", ", **{'k': 3}"]))
        star = f", *{pick(draw, env.lists)}" if env.lists and draw(st.booleans()) else ""
        return bind(name, "''", f"{MARK}combine({', '.join(args)}{star}{extra})")
    env.lists.append(name)
    if not env.lists[:-1] or not env.dicts:
        return bind(name, "[]", f"{MARK}safe([{an_int(draw, env)}, 4, 9], {{}})")
    return bind(name, "[]", f"{MARK}safe({pick(draw, env.lists[:-1])}, {pick(draw, env.dicts)})")


def _uncaught(draw: Any, env: Env) -> str:
    return fill(draw(st.sampled_from(UNCAUGHT)), env)


def _loop(draw: Any, env: Env) -> list[str]:
    """A bounded loop whose body uses its variable; its try counts in ``finally``."""
    counter = env.fresh("count")
    env.ints.append(counter)
    variable = env.fresh("i")
    env.ints.append(variable)  # bound after the loop unless the range is empty: set it first
    inner = Env(**{k: (list(v) if isinstance(v, list) else v) for k, v in vars(env).items()})
    body = [_statement(draw, inner, 1) for _ in range(draw(st.integers(1, 3)))]
    env.counter = inner.counter
    lines = [line for statement in body for line in statement]
    return [
        f"{counter} = 0",
        f"{variable} = -1",
        f"for {variable} in {pick(draw, ['range(3)', 'range(0)', 'range(4)', *HUGE_RANGES])}:",
        *indent(guarded([*lines, f"{counter} += {variable} % 3"], counter)),
    ]


# ---- programs ---------------------------------------------------------------------------------


@st.composite
def programs(draw: Any) -> Program:
    """A program: its definitions, a few blocks of statements (one perhaps sent twice), a final print and value."""
    env = Env()
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
