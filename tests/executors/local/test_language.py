"""The Python that agents write runs unchanged on the local executor."""

from __future__ import annotations

import sys
import textwrap

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError


@pytest.fixture
def executor():
    with LocalExecutor(timeout_seconds=10) as ex:
        yield ex


def run(executor: LocalExecutor, code: str):
    return executor.run(textwrap.dedent(code)).output


def test_assignments_of_every_form(executor):
    assert run(
        executor,
        """
        a, *rest = [1, 2, 3, 4]
        (b, c), d = (5, 6), 7
        x = y = 2
        x += 3; y *= 4; z = 2; z **= 10
        if (n := len(rest)) > 2:
            pass
        d2 = {}; d2["k"] = 1; d2["k"] += 1
        a, rest, b, c, d, x, y, z, n, d2
    """,
    ) == (1, [2, 3, 4], 5, 6, 7, 5, 8, 1024, 3, {"k": 2})


def test_comprehensions_and_generators(executor):
    assert run(
        executor,
        """
        pairs = {k: v for k, v in zip("ab", (1, 2))}
        squares = [i * i for i in range(5) if i % 2 == 0]
        nested = [(i, j) for i in range(2) for j in range(2)]
        total = sum(x for x in range(10))
        unique = {c for c in "hello"}
        pairs, squares, nested, total, sorted(unique)
    """,
    ) == ({"a": 1, "b": 2}, [0, 4, 16], [(0, 0), (0, 1), (1, 0), (1, 1)], 45, ["e", "h", "l", "o"])


def test_fstrings_with_conversions_and_specs(executor):
    assert (
        run(
            executor,
            """
        name, value, width = "pi", 3.14159, 8
        f"{name!r}: {value:.2f} |{value:>{width}.1f}| {name!s:^6} {255:#x} {1234567:,}"
    """,
        )
        == "'pi': 3.14 |     3.1|   pi   0xff 1,234,567"
    )


def test_functions_with_every_parameter_kind_and_lambdas(executor):
    assert run(
        executor,
        """
        def f(a, /, b, c=3, *args, d, e=5, **kwargs):
            return (a, b, c, args, d, e, kwargs)
        square = lambda v: v * v
        f(1, 2, 4, 6, 7, d=8, z=9), square(7), sorted([3, 1, 2], key=lambda v: -v)
    """,
    ) == ((1, 2, 4, (6, 7), 8, 5, {"z": 9}), 49, [3, 2, 1])


def test_decorators_property_dataclass_and_functools(executor):
    assert run(
        executor,
        """
        import functools
        from dataclasses import dataclass, field

        def twice(fn):
            @functools.wraps(fn)
            def wrapper(*a):
                return fn(*a) * 2
            return wrapper

        @twice
        def three():
            return 3

        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        @dataclass(order=True)
        class Point:
            x: int
            y: int = 0
            tags: list = field(default_factory=list)

            @property
            def norm2(self):
                return self.x * self.x + self.y * self.y

        p = Point(3, 4)
        three(), fib(30), p.norm2, p == Point(3, 4), repr(p), Point(1) < Point(2)
    """,
    ) == (6, 832040, 25, True, "Point(x=3, y=4, tags=[])", True)


def test_classes_inheritance_super_and_dunders(executor):
    assert run(
        executor,
        """
        class Animal:
            def __init__(self, name):
                self.name = name
            def speak(self):
                return "..."
            def __repr__(self):
                return f"<{self.name}>"
            def __eq__(self, other):
                return isinstance(other, Animal) and other.name == self.name
            def __hash__(self):
                return hash(self.name)
            def __len__(self):
                return len(self.name)

        class Dog(Animal):
            def __init__(self, name, breed):
                super().__init__(name)
                self.breed = breed
            def speak(self):
                return super().speak() + "woof"

        d = Dog("rex", "lab")
        d.age = 3
        d.age += 1
        d.speak(), repr(d), d == Dog("rex", "x"), len(d), len({d, Dog("rex", "y")}), d.age, isinstance(d, Animal)
    """,
    ) == ("...woof", "<rex>", True, 3, 1, 4, True)


def test_loops_with_else_and_control_flow(executor):
    assert run(
        executor,
        """
        found = []
        for i in range(5):
            if i == 10:
                break
        else:
            found.append("for-else")
        n = 0
        while n < 3:
            n += 1
        else:
            found.append("while-else")
        for i in range(3):
            if i == 1:
                continue
            found.append(i)
        found
    """,
    ) == ["for-else", "while-else", 0, 2]


def test_exceptions_try_else_finally_raise_from(executor):
    assert run(
        executor,
        """
        log = []
        try:
            x = 1
        except ValueError:
            log.append("no")
        else:
            log.append("else")
        finally:
            log.append("finally")
        try:
            try:
                {}["missing"]
            except KeyError as error:
                raise ValueError("wrapped") from error
        except ValueError as error:
            log.append(str(error))
            log.append("cause")
        class MyError(Exception):
            pass
        try:
            raise MyError("mine")
        except (TypeError, MyError) as e:
            log.append(e.args[0])
        log
    """,
    ) == ["else", "finally", "wrapped", "cause", "mine"]


def test_with_match_global_nonlocal_yield(executor):
    assert run(
        executor,
        """
        class Ctx:
            def __init__(self):
                self.events = []
            def __enter__(self):
                self.events.append("enter")
                return self
            def __exit__(self, kind, error, tb):
                self.events.append("exit")
                return False

        with Ctx() as ctx:
            pass

        def describe(value):
            match value:
                case {"kind": "point", "x": x, "y": y}:
                    return f"point {x},{y}"
                case [first, *others]:
                    return f"list {first} +{len(others)}"
                case int() | float() as number if number > 0:
                    return "positive"
                case _:
                    return "other"

        counter = 0
        def bump():
            global counter
            counter += 1

        def make():
            total = 0
            def add(v):
                nonlocal total
                total += v
                return total
            return add

        def gen(n):
            for i in range(n):
                yield i
            yield from [10, 11]

        bump(); bump()
        add = make(); add(2)
        (ctx.events, describe({"kind": "point", "x": 1, "y": 2}), describe([1, 2, 3]), describe(5),
         describe("s"), counter, add(3), list(gen(2)))
    """,
    ) == (["enter", "exit"], "point 1,2", "list 1 +2", "positive", "other", 2, 5, [0, 1, 10, 11])


def test_print_with_sep_and_end_goes_to_logs(executor):
    result = executor.run('print("a", "b", sep="-", end="!")\nprint(1, 2)\nprint()')
    assert result.logs == "a-b!1 2\n\n"
    assert result.output is None


def test_print_is_truncated_with_a_note():
    with LocalExecutor(max_print_outputs_length=100) as ex:
        logs = ex.run("for i in range(100):\n    print('line', i)").logs
    assert len(logs) < 200
    assert "characters of output cut" in logs and "line 0" in logs and "line 99" in logs


def test_allowed_imports_work(executor):
    assert run(
        executor,
        """
        import json, re, math, statistics, collections, itertools, datetime, random, string
        from collections import Counter, defaultdict
        random.seed(1)
        counts = Counter("abracadabra").most_common(1)
        dd = defaultdict(list); dd["a"].append(1)
        (json.dumps({"a": [1, 2]}), re.findall(r"\\d+", "a1b22"), math.floor(2.5), statistics.mean([1, 2, 3]),
         counts, dict(dd), list(itertools.islice(itertools.count(), 3)), datetime.date(2024, 1, 2).isoformat(),
         string.ascii_lowercase[:3], 0 <= random.random() < 1)
    """,
    ) == ('{"a": [1, 2]}', ["1", "22"], 2, 2, [("a", 5)], {"a": [1]}, [0, 1, 2], "2024-01-02", "abc", True)


def test_sandbox_random_does_not_touch_the_host_random_state(executor):
    import random

    random.seed(123)
    expected = random.random()
    random.seed(123)
    executor.run("import random\nrandom.seed(5)\nrandom.random()")
    assert random.random() == expected


def test_last_expression_is_the_output_and_none_otherwise(executor):
    assert executor.run("x = 2\nx * 21").output == 42
    assert executor.run("y = 3").output is None


def test_refused_construct_says_so_plainly(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("x = 1\nclass A(metaclass=type):\n    pass")
    assert "Line 2" in info.value.message and "metaclasses are not allowed" in info.value.message
    assert "^" in info.value.message


def test_syntax_error_names_the_line_and_caret(executor):
    with pytest.raises(ExecutionError) as info:
        executor.run("x = 1\ny = (2 +\n")
    assert info.value.error_type == "SyntaxError"
    assert "line 2" in info.value.message and "^" in info.value.message


def test_unknown_names_are_name_errors_not_guesses(executor):
    executor.run("result_value = 1")
    with pytest.raises(ExecutionError) as info:
        executor.run("result_valeu")
    assert info.value.error_type == "NameError"


def test_generator_exit_and_own_base_exceptions_are_handled_as_in_cpython(executor):
    assert run(
        executor,
        """
        log = []
        def gen():
            try:
                yield 1
            except GeneratorExit:
                log.append("cleanup")
                raise
        g = gen(); next(g); g.close()
        class Stop(BaseException):
            pass
        try:
            raise Stop()
        except BaseException as e:
            log.append(type(e).__name__)
        log
    """,
    ) == ["cleanup", "Stop"]


def test_concatenation_keeps_cpython_semantics_under_its_size_guard(executor):
    code = """
    x = [1]
    alias = x
    x += [2]
    counts = {'a': 1}
    counts['a'] += 2
    text = 'ab'
    text += 'cd'
    total = 0
    for i in range(4):
        total += i * i
    (alias, counts, text + '!', (1,) + (2,), total, b'a' + b'b', 1.5 + 2)
    """
    assert run(executor, code) == ([1, 2], {"a": 3}, "abcd!", (1, 2), 14, b"ab", 3.5)


@pytest.mark.skipif(sys.version_info < (3, 12), reason="syntax new in Python 3.12")
@pytest.mark.parametrize(
    ("code", "feature"),
    [
        ("type Pair = tuple[int, int]", "`type X = ...` statement (new in Python 3.12)"),
        ("def first[T](items: list[T]) -> T:\n    return items[0]", "type parameters such as `def f[T]`"),
        ("class Box[T]:\n    pass", "type parameters such as `def f[T]`"),
    ],
    ids=["type-statement", "generic-function", "generic-class"],
)
def test_syntax_newer_than_the_policy_is_refused_by_its_name(code, feature):
    with LocalExecutor() as executor, pytest.raises(ExecutionError) as info:
        executor.run(code)
    assert feature in info.value.message
    assert info.value.message.count("not supported") == 1, info.value.message
