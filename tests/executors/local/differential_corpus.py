"""Agent-style snippets for the local executor's differential test, and CPython's side of it.

Each snippet is run by `test_differential.py` in the sandbox and under plain CPython `exec`;
its value, printed output and raised exception type must be CPython's, unless it carries a
`Refusal`: a documented place where the sandbox refuses what CPython runs, with the error type
the sandbox raises there.

This file imports the standard library only: run as a script, it is the plain-CPython side.
It reads ``{"mode": "fresh" | "shared", "snippets": [{"name", "code"}, ...]}`` as JSON on stdin
and writes one outcome per snippet as JSON to the file named by its first argument. "fresh"
runs each snippet in a module of its own; "shared" runs them in order in one module, as one
sandbox runs blocks one after another. A snippet runs as a script's ``__main__`` module would
(installed in ``sys.modules`` while it runs, so dataclasses and ``typing`` find it), with stdout
and stderr captured together, and its last top-level expression, if any, evaluated for its value
as the sandbox does.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import io
import json
import sys
import textwrap
import types
from dataclasses import dataclass
from types import CodeType
from typing import Any

__all__ = ["CORPUS", "Refusal", "Snippet", "describe", "run_plain", "sandbox_outcome"]


@dataclass(frozen=True)
class Refusal:
    """The sandbox refuses this snippet on purpose: `error_type` is what it raises, `reason` why."""

    error_type: str
    reason: str


@dataclass(frozen=True)
class Snippet:
    name: str
    code: str
    authorized_imports: tuple[str, ...] = ()
    refusal: Refusal | None = None


def _snippet(name: str, code: str, *imports: str, refusal: Refusal | None = None) -> Snippet:
    return Snippet(name, textwrap.dedent(code).strip() + "\n", tuple(imports), refusal)


ARITHMETIC = [
    _snippet(
        "int-operators",
        """
        a, b = 17, 5
        (a + b, a - b, a * b, a / b, a // b, a % b, -a // b, -a % b, a ** 2,
         a & b, a | b, a ^ b, ~a, a << 3, a >> 1, abs(-a), -a)
        """,
    ),
    _snippet(
        "float-operators",
        """
        inf = 1e308 * 10
        (0.1 + 0.2, inf, -inf, 7.0 // 2, 7.5 % 2, -7.5 % 2, round(2.675, 2), round(2.5), round(3.5),
         round(1234.5678, -2), 1 / 3, 2 ** -1, float('nan') == float('nan'), (0.1).as_integer_ratio(), 1.5.is_integer())
        """,
    ),
    _snippet(
        "complex-numbers",
        """
        z = complex(3, 4)
        (abs(z), z * z.conjugate(), z.real, z.imag, (1 + 2j) ** 2, str(z), 1j * 1j, complex('1+2j') / 2)
        """,
    ),
    _snippet(
        "bool-arithmetic",
        """
        (True + True, True * 10, sum([True, False, True]), bool([]), bool('0'), int(True),
         True == 1, isinstance(True, int), not 0, 5 and 0, '' or 'default', None or [] or 3)
        """,
    ),
    _snippet(
        "big-ints",
        """
        import math
        x = 2 ** 200
        (x, len(str(x)), x % 97, x.bit_length(), 10 ** 50 // 7, -(3 ** 100), math.factorial(40),
         len(str(2 ** 10000)), (10 ** 30 + 1) * (10 ** 30 - 1))
        """,
    ),
    _snippet("int-text-limit", "s = str(10 ** 5000)\nlen(s)"),
    _snippet("divmod", "[divmod(17, 5), divmod(-17, 5), divmod(17, -5), divmod(7.5, 2), divmod(2 ** 70, 10 ** 9)]"),
    _snippet(
        "pow-with-mod",
        "(pow(3, 200, 1000), pow(2, -1, 7), pow(7, 0, 1), pow(2.0, 0.5), pow(-8, 1 / 3), pow(10, 20, 10 ** 9 + 7))",
    ),
    _snippet(
        "int-subclass-operators",
        """
        class Meters(int):
            pass
        class Mask(int):
            def __lshift__(self, n):
                return Mask((int(self) << n) & 0xFF)
            def __rlshift__(self, n):
                return Mask((n << int(self)) & 0xFF)
        class Declines(int):
            def __lshift__(self, n):
                return NotImplemented
            def __pow__(self, n):
                return NotImplemented
            def __mul__(self, n):
                return NotImplemented
        class Reflects(int):
            def __rlshift__(self, n):
                return 'reflected'
            def __rpow__(self, n):
                return 'rpow'
        m = Meters(3)
        (m << 2, m ** 2, 2 ** m, m * m, m * 'ab', pow(m, 2), pow(m, 2, 5), True << 3, True ** 5, False * 7, 3 * True,
         'ab' * True, pow(True, 3), Mask(1) << 20, 3 << Mask(2), 1 << Mask(20), Declines(5) << 2, Declines(2) ** 3,
         Declines(4) * 5, 1 << Reflects(3), 2 ** Reflects(3), Reflects(1) << 3, Meters(1) << Reflects(3),
         Reflects(3) ** Reflects(2), type(m << 2).__name__, type(Mask(1) << 3).__name__, -m ** 2, m ** -1)
        """,
    ),
    _snippet(
        "int-subclass-inplace",
        """
        class Meters(int):
            pass
        class Acc(int):
            def __ilshift__(self, n):
                return 'own-ilshift'
        class Skip(int):
            def __imul__(self, n):
                return NotImplemented
        x = True
        x <<= 3
        y = Meters(2)
        y **= 3
        a = Acc(1)
        a <<= 2
        s = Skip(3)
        s *= 4
        d = {'k': True}
        d['k'] *= Meters(6)
        (x, y, a, s, d, type(y).__name__)
        """,
    ),
    _snippet(
        "int-subclass-declines-both",
        """
        class Declines(int):
            def __lshift__(self, n):
                return NotImplemented
        Declines(1) << Declines(2)
        """,
    ),
    _snippet(
        "operator-functions",
        """
        import functools
        import math
        import operator
        class Meters(int):
            pass
        items = [1]
        (operator.lshift(True, 2), operator.pow(Meters(2), 3), operator.mul('ab', True), operator.imul([1], 2),
         operator.concat('a', 'b'), operator.iconcat(items, (2,)), items, operator.mod('%d', 5), operator.imod(7, 3),
         operator.ipow(2, 5), operator.ilshift(1, 3), operator.iadd([1], [2]), operator.add(1, 2),
         functools.reduce(operator.mul, range(1, 8)), math.prod([1, 2, 3]), math.prod([]), math.prod([2.5, 2]),
         math.prod([2], start='ab'), math.prod(range(1, 10)), math.prod(x for x in (Meters(2), 3)),
         math.lcm(), math.lcm(-6), math.lcm(4, 6, 10), math.lcm(0, 5), math.lcm(True, Meters(3)))
        """,
        "functools",
        "math",
        "operator",
    ),
    _snippet("operator-pow-of-text", "import operator\noperator.pow('a', 2)", "operator"),
    _snippet("operator-concat-of-numbers", "import operator\noperator.concat(1, 2)", "operator"),
    _snippet(
        "int-conversions",
        """
        (int('ff', 16), int('0b101', 0), int(' 42 '), hex(255), oct(8), bin(10), int(3.99), int(-3.99),
         (255).to_bytes(2, 'big'), int.from_bytes(b'\\x01\\x00', 'little'), float('1e3'), int('1_000'))
        """,
    ),
    _snippet(
        "number-formatting",
        "(format(1234567.891, ',.2f'), format(0.25, '.1%'), format(255, '#x'), format(42, '08b'), format(3.14159, '.3e'), format(-5, '+d'))",
    ),
    _snippet("zero-division", "print('start')\n10 // 0"),
    _snippet("float-overflow", "2.0 ** 10000"),
    _snippet("bad-int-literal", "int('12abc')"),
    _snippet(
        "fractions-decimal",
        """
        from fractions import Fraction
        from decimal import Decimal
        (Fraction(1, 3) + Fraction(1, 6), Decimal('0.1') + Decimal('0.2'), Fraction('3/4') * 2, Decimal('1.005').quantize(Decimal('0.01')))
        """,
        "fractions",
        "decimal",
    ),
]

STRINGS = [
    _snippet(
        "f-string-format-specs",
        """
        name, n, x = 'Ada', 42, 3.14159
        [f'{name!r:>8}', f'{n:05d}', f'{x:.2f}', f'{x:10.3f}|', f'{n:,}', f'{n:x}', f'{name:*^11}',
         f'{n=}', f'{x!s:.3}', f'{n:>{n // 7}}', f'{x:{n // 4}.{2}f}', f'{"quoted"}', f'{n * 2 + 1:#o}']
        """,
    ),
    _snippet(
        "percent-formatting",
        """
        ('%s is %d years' % ('Bob', 30), '%5.2f|%-5d|%05d' % (3.14159, 42, 7), '%(a)s-%(b)r' % {'a': 1, 'b': 'x'},
         '%x %o %e %g' % (255, 8, 12345.678, 0.00001), '100%%', '%c%c' % (72, 'i'), '%10s|' % 'right')
        """,
    ),
    _snippet(
        "str-format-method",
        """
        ('{0} {1} {0}'.format('a', 'b'), '{name}:{val:>5}'.format(name='k', val=3), '{:^9}'.format('mid'),
         '{0[1]}'.format([5, 6]), '{0.real}'.format(3 + 4j), '{:,.1f}'.format(9876.54), '{p[x]}'.format_map({'p': {'x': 7}}))
        """,
    ),
    _snippet(
        "str-methods",
        """
        s = '  Hello, World  '
        t = s.strip()
        (t.lower(), t.upper(), t.title(), t.swapcase(), t.split(', '), ' '.join(['a', 'b']), t.replace('l', 'L', 2),
         t.find('o'), t.rfind('o'), t.count('l'), t.startswith('He'), t.endswith(('x', 'd')), s.lstrip(), s.rstrip(),
         t.center(20, '-'), t.ljust(15, '.'), '42'.zfill(5), t.partition(', '), 'a,b,c'.rsplit(',', 1),
         'x\\ny\\r\\nz'.splitlines(), '123'.isdigit(), 'abc'.isalpha(), 'Straße'.casefold(),
         'prefix_name'.removeprefix('prefix_'), 'file.txt'.removesuffix('.txt'), 'a\\tb'.expandtabs(4),
         'hello'.translate(str.maketrans('el', 'ip')), 'hello world'.capitalize(), 'Title Case'.istitle())
        """,
    ),
    _snippet(
        "slicing",
        """
        s = 'hello world'
        lst = list(range(10))
        (s[::-1], s[2:8:2], s[-5:], s[:-6], s[100:], s[::3], lst[1::3], lst[-3:-1], lst[slice(2, 9, 3)], lst[::-2])
        """,
    ),
    _snippet(
        "bytes",
        """
        b = 'héllo'.encode('utf-8')
        (b, len(b), b.decode(), b[1], b[1:3], b.hex(), bytearray(b'abc') + b'd',
         b'a,b'.split(b','), bytes(range(5)), b'abc'.upper(), 'é'.encode('latin-1'), b'x' * 3, list(b'AB'))
        """,
    ),
    _snippet(
        "bytes-classmethods",
        "(bytes.fromhex('41 42'), bytearray.fromhex('ff00'), bytes.maketrans(b'ab', b'xy')[97:99])",
    ),
    _snippet(
        "isinstance-bytes",
        "data = 'x'.encode()\n(isinstance(data, bytes), isinstance(data, (bytes, bytearray)), type(data) is bytes)",
    ),
    _snippet("isinstance-range", "r = range(3)\n(isinstance(r, range), type(r) == range, list(r))"),
    _snippet(
        "isinstance-type",
        "class Model:\n    pass\n(isinstance(Model, type), isinstance(Model(), type), type(Model()) is Model)",
    ),
    _snippet("bytes-decode-error", "b'\\xff\\xfe'.decode('utf-8')"),
    _snippet("str-index-error", "'abc'.index('z')"),
    _snippet("str-plus-int", "'total: ' + 1"),
    _snippet(
        "unicode",
        """
        import unicodedata
        [unicodedata.name('é'), 'straße'.upper(), len('👍🏽'), ord('€'), chr(9731), unicodedata.normalize('NFD', 'é') == 'e\\u0301',
         'İ'.lower(), 'ﬁ'.upper(), 'Ⅻ'.isnumeric(), unicodedata.category('A')]
        """,
    ),
    _snippet(
        "str-operators",
        "('ab' * 3, 'b' in 'abc', 'abc' < 'abd', sorted('banana'), max('hello'), ''.join(reversed('abc')), 'a' 'b', 'x'.join('123'))",
    ),
    _snippet(
        "string-module",
        """
        import string
        (string.ascii_lowercase[:5], string.Template('$who likes $what').substitute(who='tim', what='pie'),
         string.capwords('hello big world'), string.digits, string.punctuation[:5])
        """,
    ),
    _snippet(
        "repr-str-ascii",
        "(repr('a\\nb'), ascii('é'), str(b'x'), repr(1.0), str([1, 'a']), repr(\"it's\"), str(None), repr(1e16), str(0.1 + 0.2))",
    ),
]

CONTAINERS = [
    _snippet(
        "list-methods",
        """
        lst = [3, 1, 4, 1, 5]
        lst.append(9)
        lst.extend([2, 6])
        lst.insert(0, 7)
        popped = lst.pop()
        lst.remove(1)
        where = lst.index(4)
        ones = lst.count(1)
        ordered = sorted(lst, reverse=True)
        lst.sort(key=lambda v: (v % 3, v))
        copy = lst.copy()
        copy.reverse()
        del copy[1:3]
        lst[1:3] = ['a', 'b', 'c']
        (lst, popped, where, ones, ordered, copy)
        """,
    ),
    _snippet(
        "dict-methods",
        """
        d = {'b': 2, 'a': 1}
        d['c'] = 3
        got = (d.get('a'), d.get('z'), d.get('z', 0))
        d.setdefault('d', []).append(4)
        removed = d.pop('b')
        d.update({'e': 5}, f=6)
        last = d.popitem()
        (d, got, removed, last, list(d.keys()), list(d.values()), list(d.items()), dict.fromkeys('xy', 0),
         sorted(d, key=str), 'a' in d, len(d), dict(zip('abc', range(3))), {k: v for k, v in sorted({'z': 1, 'y': 2}.items())})
        """,
    ),
    _snippet(
        "set-operations",
        """
        a, b = {1, 2, 3, 4}, {3, 4, 5}
        a.add(10)
        a.discard(99)
        (a | b, a & b, a - b, a ^ b, a.union([7]), a.issuperset({1, 2}), {1, 2} <= a, frozenset(b),
         a.isdisjoint({100}), sorted({'pear', 'apple', 'fig'}), len(a), {x % 3 for x in range(10)})
        """,
    ),
    _snippet(
        "tuple-methods",
        """
        t = (1, 2, 2, 3)
        single = (5,)
        (t.count(2), t.index(3), t + single, t * 2, (1, 2) < (1, 3), max([(2, 'b'), (2, 'a')]), tuple('ab'),
         len(()), t[1:], hash((1, 2)) == hash((1, 2)))
        """,
    ),
    _snippet(
        "nested-comprehensions",
        """
        table = [[i * j for j in range(1, 4)] for i in range(1, 4)]
        pairs = [(x, y) for x in range(3) for y in range(x)]
        flat = [v for row in table for v in row if v % 2]
        by_mod = {x % 3: x for x in range(10)}
        letters = sorted({c for c in 'mississippi'})
        (table, pairs, flat, by_mod, letters, sum(x * x for x in range(10)), [[c for c in w] for w in ['ab', 'c']])
        """,
    ),
    _snippet(
        "walrus",
        """
        data = [1, 5, 8, 12, 3]
        doubled = [y for x in data if (y := x * 2) > 9]
        stack, popped = [1, 2, 3], []
        while (n := len(stack)) > 1:
            popped.append(stack.pop())
        if (m := max(data)) > 10:
            print('big', m)
        (doubled, y, stack, popped, n, m)
        """,
    ),
    _snippet(
        "unpacking",
        """
        a, *rest = [1, 2, 3, 4]
        *init, last = 'abcd'
        first, (x, y), *others = [0, (1, 2), 3, 4]
        head, *middle, tail = range(5)
        p, q = q, p = 1, 2
        for i, (k, v) in enumerate({'a': 1, 'b': 2}.items()):
            print(i, k, v)
        (a, rest, init, last, first, x, y, others, head, middle, tail, p, q)
        """,
    ),
    _snippet(
        "starred-literals-and-calls",
        """
        def f(a, b, c=0, *args, **kwargs):
            return a, b, c, args, kwargs
        nums = [1, 2, 3, 4]
        opts = {'z': 1}
        print(*nums, sep=',')
        ([*range(3), *'ab'], (*nums, 5), {*nums, 9}, {**opts, 'y': 2}, f(*nums, **opts), f(*[1], **{'b': 2}))
        """,
    ),
    _snippet(
        "dict-merge",
        """
        d1, d2 = {'a': 1, 'b': 2}, {'b': 20, 'c': 30}
        merged = d1 | d2
        d1 |= {'z': 0}
        d1 |= [('w', 9)]
        (merged, d1, d2 | d1, {**d2, **merged})
        """,
    ),
    _snippet(
        "builtins-on-iterables",
        """
        names, scores = ['ann', 'bob', 'cy'], [88, 95, 70]
        (list(zip(names, scores)), dict(zip(names, scores)), list(enumerate(names, start=1)), list(reversed(scores)),
         min(scores), max(names, key=len), min([], default=None), any(s > 90 for s in scores), all(scores),
         list(map(str.upper, names)), list(filter(None, [0, 1, '', 'x'])), sum(scores, 10), sorted(names, key=len, reverse=True),
         list(range(10, 0, -3)), round(sum(scores) / len(scores), 2), list(zip(*[(1, 'a'), (2, 'b')])))
        """,
    ),
    _snippet("zip-strict", "list(zip([1, 2], [1], strict=True))"),
    _snippet("missing-key", "d = {'a': 1}\nd['b']"),
    _snippet("index-out-of-range", "print([1, 2][1])\n[1, 2][5]"),
    _snippet(
        "records-sorting",
        """
        rows = [{'name': 'b', 'score': 3}, {'name': 'a', 'score': 3}, {'name': 'c', 'score': 5}]
        best = sorted(rows, key=lambda r: (-r['score'], r['name']))
        [r['name'] for r in best], max(rows, key=lambda r: r['score'])['name']
        """,
    ),
    _snippet(
        "copying",
        """
        import copy
        a = [[1], [2]]
        b = copy.deepcopy(a)
        c = copy.copy(a)
        d = a[:]
        a[0].append(9)
        (a, b, c, d, c[0] is a[0], b[0] is a[0])
        """,
    ),
    _snippet(
        "comparisons-and-identity",
        """
        x = [1]
        y = x
        (x is y, [1] == [1], [1] is [1], 1 < 2 < 3, 3 > 2 > 2, None is None, x is not None, 1 == 1.0, 'a' != 'b',
         [1, 2] < [1, 2, 0], (1, 'a') == (1, 'a'))
        """,
    ),
    _snippet("unhashable-key", "{[1, 2]: 'x'}"),
]

CONTROL_FLOW = [
    _snippet(
        "for-else",
        """
        def find(items, target):
            for i, item in enumerate(items):
                if item == target:
                    break
            else:
                return -1
            return i
        (find([4, 5, 6], 5), find([4, 5, 6], 9), find([], 1))
        """,
    ),
    _snippet(
        "while-else",
        """
        n, log = 10, []
        while n > 0:
            n -= 3
            if n == 4:
                continue
            log.append(n)
        else:
            log.append('done')
        k = 0
        while True:
            k += 1
            if k >= 5:
                break
        (n, log, k)
        """,
    ),
    _snippet(
        "nested-break-continue",
        """
        found = []
        for i in range(5):
            if i == 1:
                continue
            for j in range(5):
                if j > i:
                    break
                if (i + j) % 2:
                    continue
                found.append((i, j))
        found
        """,
    ),
    _snippet(
        "try-except-else-finally",
        """
        def attempt(x):
            steps = []
            try:
                steps.append('try')
                value = 10 / x
            except ZeroDivisionError as e:
                steps.append(f'except {e}')
                value = None
            except (TypeError, ValueError):
                steps.append('type')
                value = -1
            else:
                steps.append('else')
            finally:
                steps.append('finally')
            return value, steps
        for arg in (2, 0, 'a'):
            print(attempt(arg))
        """,
    ),
    _snippet(
        "raise-from",
        """
        def parse(text):
            try:
                return int(text)
            except ValueError as e:
                raise RuntimeError(f'cannot parse {text!r}') from e
        print(parse('7'))
        parse('x')
        """,
    ),
    _snippet(
        "raise-from-caught",
        """
        try:
            try:
                {}['k']
            except KeyError as e:
                raise LookupError('wrapped') from e
        except LookupError as err:
            caught = (str(err), type(err).__name__)
        try:
            raise ValueError('quiet') from None
        except ValueError as err:
            quiet = str(err)
        caught, quiet
        """,
    ),
    _snippet(
        "exception-cause",
        """
        try:
            try:
                1 / 0
            except ZeroDivisionError as e:
                raise ValueError('bad') from e
        except ValueError as err:
            cause = type(err.__cause__).__name__
        cause
        """,
        refusal=Refusal(
            "CodeRefused", "attributes starting with '_' are refused (README, local: the policy); __cause__ is one"
        ),
    ),
    _snippet(
        "assert",
        """
        assert 1 + 1 == 2
        try:
            assert False, 'custom message'
        except AssertionError as e:
            message = str(e)
        print(message)
        items = []
        assert len(items) > 0, 'items is empty'
        """,
    ),
    _snippet(
        "reraise",
        """
        log = []
        try:
            try:
                [][0]
            except IndexError:
                log.append('handled once')
                raise
        except IndexError as e:
            log.append(str(e))
        log
        """,
    ),
    _snippet(
        "finally-on-return",
        """
        trace = []
        def f():
            try:
                return 'body'
            finally:
                trace.append('cleanup')
        (f(), trace)
        """,
    ),
    _snippet(
        "match-literals-and-or",
        """
        def describe(cmd):
            match cmd:
                case 'quit' | 'exit':
                    return 'bye'
                case 0 | 1 as bit:
                    return f'bit {bit}'
                case None:
                    return 'nothing'
                case True:
                    return 'true'
                case str(s) if s.startswith('go '):
                    return 'going ' + s[3:]
                case float() | int():
                    return 'number'
                case _:
                    return 'unknown'
        [describe(c) for c in ['quit', 0, 1, None, True, 'go north', 2.5, 7, [1]]]
        """,
    ),
    _snippet(
        "match-sequence-patterns",
        """
        def shape(seq):
            match seq:
                case []:
                    return 'empty'
                case [x]:
                    return f'one {x}'
                case [x, y] if x == y:
                    return 'pair of same'
                case [x, y]:
                    return f'pair {x},{y}'
                case [first, *rest] if len(rest) > 2:
                    return f'long from {first}, {len(rest)} more'
                case (a, b, c):
                    return f'triple {a + b + c}'
        [shape(s) for s in ([], [1], [2, 2], (3, 4), [1, 2, 3], [1, 2, 3, 4, 5], 'ab')]
        """,
    ),
    _snippet(
        "match-mapping-patterns",
        """
        def area(obj):
            match obj:
                case {'type': 'circle', 'r': r}:
                    return round(3.14159 * r * r, 2)
                case {'type': 'rect', 'w': w, 'h': h, **extra}:
                    return w * h, extra
                case {'type': kind}:
                    return f'no area for {kind}'
                case _:
                    return None
        [area(o) for o in ({'type': 'circle', 'r': 2}, {'type': 'rect', 'w': 2, 'h': 3, 'color': 'red'}, {'type': 'line'}, 5)]
        """,
    ),
    _snippet(
        "match-class-patterns",
        """
        from dataclasses import dataclass
        from collections import namedtuple

        @dataclass
        class Point:
            x: int
            y: int

        Pair = namedtuple('Pair', 'left right')

        def where(p):
            match p:
                case Point(0, 0):
                    return 'origin'
                case Point(x=0, y=y):
                    return f'on y axis at {y}'
                case Point(x, y) if x == y:
                    return f'diagonal {x}'
                case Point(x, y):
                    return f'point {x},{y}'
                case Pair(left, right=r):
                    return f'pair {left}/{r}'
                case int(n) | float(n):
                    return f'scalar {n}'
        [where(v) for v in (Point(0, 0), Point(0, 5), Point(3, 3), Point(1, 2), Pair('a', 'b'), 4)]
        """,
    ),
    _snippet(
        "match-no-case",
        """
        result = 'unset'
        match 42:
            case 1:
                result = 'one'
        result
        """,
    ),
]

FUNCTIONS = [
    _snippet(
        "defaults",
        """
        def greet(name, greeting='Hello', punct='!'):
            return f'{greeting}, {name}{punct}'
        def collect(x, acc=[]):
            acc.append(x)
            return acc
        collect(1)
        (greet('Ann'), greet('Bo', punct='?'), greet(greeting='Hi', name='Cy'), collect(2))
        """,
    ),
    _snippet(
        "args-kwargs",
        """
        def f(*args, **kwargs):
            return args, sorted(kwargs.items())
        def total(first, *rest, scale=1):
            return (first + sum(rest)) * scale
        (f(), f(1, 2, a=3, b=4), total(1), total(1, 2, 3, scale=10), total(*range(4)))
        """,
    ),
    _snippet(
        "keyword-and-positional-only",
        """
        def f(a, /, b, *, c=3):
            return a, b, c
        print(f(1, 2), f(1, b=2, c=4))
        f(a=1, b=2)
        """,
    ),
    _snippet(
        "closures-and-nonlocal",
        """
        def make_counter(start=0):
            count = start
            def inc(step=1):
                nonlocal count
                count += step
                return count
            return inc
        c1, c2 = make_counter(), make_counter(10)
        c1(); c1(); c2(5)
        late = [lambda: i for i in range(3)]
        bound = [lambda i=i: i for i in range(3)]
        (c1(), c2(), [f() for f in late], [f() for f in bound])
        """,
    ),
    _snippet(
        "global-statement",
        """
        total = 0
        calls = []
        def add(n):
            global total
            total += n
            calls.append(n)
        add(3)
        add(4)
        (total, calls)
        """,
    ),
    _snippet(
        "decorators",
        """
        import functools

        def logged(func):
            @functools.wraps(func)
            def wrapper(*args, **kwargs):
                print('calling with', args, kwargs)
                return func(*args, **kwargs)
            return wrapper

        def repeat(times):
            def decorate(func):
                def wrapper(*args):
                    return [func(*args) for i in range(times)]
                return wrapper
            return decorate

        @logged
        def add(a, b=0):
            '''Adds.'''
            return a + b

        @repeat(3)
        @logged
        def hello(name):
            return 'hi ' + name

        (add(1, b=2), hello('x'), add.__name__, add.__doc__)
        """,
    ),
    _snippet(
        "lambdas",
        """
        square = lambda v: v * v
        pairs = [(1, 'one'), (3, 'three'), (2, 'two')]
        (square(7), (lambda a, b=2: a ** b)(5), sorted(pairs, key=lambda p: p[1]), list(map(lambda v: v + 1, [1, 2])),
         (lambda *a, **k: (a, k))(1, x=2))
        """,
    ),
    _snippet(
        "recursion",
        """
        def fib(n, memo={}):
            if n < 2:
                return n
            if n not in memo:
                memo[n] = fib(n - 1) + fib(n - 2)
            return memo[n]
        def hanoi(n):
            return 0 if n == 0 else 2 * hanoi(n - 1) + 1
        def flatten(x):
            return [y for item in x for y in flatten(item)] if isinstance(x, list) else [x]
        def depth(n):
            return 0 if n == 0 else 1 + depth(n - 1)
        (fib(90), hanoi(20), flatten([1, [2, [3, [4]], 5]]), depth(500))
        """,
    ),
    _snippet("runaway-recursion", "def down(n):\n    return down(n + 1)\ndown(0)"),
    _snippet(
        "generators",
        """
        def countdown(n):
            while n > 0:
                yield n
                n -= 1
            return 'liftoff'
        def echo():
            received = []
            while True:
                value = yield len(received)
                if value is None:
                    return received
                received.append(value)
        g = echo()
        next(g)
        g.send('a')
        g.send('b')
        try:
            g.send(None)
        except StopIteration as stop:
            sent = stop.value
        gen = countdown(3)
        (list(countdown(4)), next(gen), next(gen), next(gen), next(gen, 'empty'), sent)
        """,
    ),
    _snippet(
        "yield-from",
        """
        def inner():
            yield 1
            yield 2
            return 'inner done'
        def outer():
            result = yield from inner()
            yield result
        def walk(tree):
            for node in tree:
                if isinstance(node, list):
                    yield from walk(node)
                else:
                    yield node
        (list(outer()), list(walk([1, [2, [3, 4]], [[5]]])))
        """,
    ),
    _snippet(
        "generator-expressions",
        """
        seen = []
        def noisy(x):
            seen.append(x)
            return x
        lazy = (noisy(v) * 2 for v in range(5))
        before = list(seen)
        first_two = [next(lazy), next(lazy)]
        (before, first_two, seen, sum(x * x for x in range(10)), any(v > 3 for v in range(5)), max((len(w), w) for w in ['a', 'abc', 'ab']))
        """,
    ),
    _snippet(
        "stop-iteration-in-generator",
        """
        def bad():
            yield 1
            next(iter([]))
        list(bad())
        """,
    ),
    _snippet("wrong-arguments", "def f(a, b):\n    return a + b\nf(1)"),
]

CLASSES = [
    _snippet(
        "inheritance-and-super",
        """
        class Animal:
            sound = '...'
            def __init__(self, name):
                self.name = name
            def speak(self):
                return f'{self.name} says {self.sound}'
        class Dog(Animal):
            sound = 'woof'
            def __init__(self, name, tricks=()):
                super().__init__(name)
                self.tricks = list(tricks)
            def speak(self):
                return super().speak() + '!'
        class Puppy(Dog):
            pass
        p = Puppy('Rex', ['sit'])
        (p.speak(), p.tricks, isinstance(p, Animal), issubclass(Puppy, Dog), Animal('Cat').speak(), type(p).__name__)
        """,
    ),
    _snippet(
        "inheritance-no-dunders",
        """
        class Base:
            def __init__(self, x):
                self.x = x
            def describe(self):
                return f'{type(self).__name__}({self.x})'
        class Child(Base):
            def __init__(self, x, y):
                super().__init__(x)
                self.y = y
        c = Child(1, 2)
        (c.describe(), c.x, c.y, isinstance(c, Base), type(c).__name__)
        """,
    ),
    _snippet(
        "properties",
        """
        class Temperature:
            def __init__(self, celsius):
                self.celsius = celsius
            @property
            def celsius(self):
                return self._c
            @celsius.setter
            def celsius(self, value):
                if value < -273.15:
                    raise ValueError('below absolute zero')
                self._c = value
            @property
            def fahrenheit(self):
                return self.celsius * 9 / 5 + 32
        t = Temperature(25)
        t.celsius = 30
        print(t.fahrenheit)
        t.celsius = -300
        """,
        refusal=Refusal(
            "CodeRefused", "names and attributes starting with '_' are refused (README, local: the policy): self._c"
        ),
    ),
    _snippet(
        "properties-public",
        """
        class Temperature:
            def __init__(self, celsius):
                self.celsius = celsius
            @property
            def celsius(self):
                return self.value
            @celsius.setter
            def celsius(self, value):
                if value < -273.15:
                    raise ValueError('below absolute zero')
                self.value = value
            @property
            def fahrenheit(self):
                return self.celsius * 9 / 5 + 32
        t = Temperature(25)
        t.celsius = 30
        print(t.fahrenheit)
        t.celsius = -300
        """,
    ),
    _snippet(
        "classmethod-staticmethod",
        """
        class Date:
            count = 0
            def __init__(self, y, m, d):
                self.y, self.m, self.d = y, m, d
                Date.count += 1
            @classmethod
            def parse(cls, text):
                return cls(*map(int, text.split('-')))
            @staticmethod
            def is_leap(y):
                return y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)
            def __repr__(self):
                return f'Date({self.y}, {self.m}, {self.d})'
        d = Date.parse('2024-02-29')
        (d, Date.is_leap(2024), d.is_leap(1900), Date.count, repr(Date(1, 1, 1)), Date.count)
        """,
    ),
    _snippet(
        "dataclasses",
        """
        from dataclasses import dataclass, field, asdict, replace, fields
        from typing import ClassVar

        @dataclass(order=True)
        class Item:
            priority: int
            name: str = field(compare=False)
            tags: list = field(default_factory=list, compare=False)
            registry: ClassVar[int] = 0
            def __post_init__(self):
                Item.registry += 1

        a = Item(2, 'b')
        b = Item(1, 'a', ['x'])
        c = replace(a, name='c')
        (sorted([a, b, c]), asdict(b), [f.name for f in fields(Item)], Item.registry, a == c, repr(b))
        """,
    ),
    _snippet(
        "dataclass-value",
        """
        from dataclasses import dataclass
        @dataclass
        class Point:
            x: float
            y: float = 0.0
        Point(1.5)
        """,
    ),
    _snippet(
        "namedtuple-value",
        """
        from collections import namedtuple
        Row = namedtuple('Row', ['id', 'label'])
        Row(1, 'first')
        """,
    ),
    _snippet(
        "frozen-dataclass",
        """
        from dataclasses import dataclass
        @dataclass(frozen=True)
        class Key:
            a: int
        k = Key(1)
        print(hash(k) == hash(Key(1)), {k: 'v'}[Key(1)])
        k.a = 2
        """,
    ),
    _snippet(
        "repr-eq-lt",
        """
        import functools

        @functools.total_ordering
        class Version:
            def __init__(self, text):
                self.parts = tuple(int(p) for p in text.split('.'))
            def __repr__(self):
                return 'Version(' + '.'.join(map(str, self.parts)) + ')'
            def __eq__(self, other):
                return isinstance(other, Version) and self.parts == other.parts
            def __lt__(self, other):
                return self.parts < other.parts
            def __hash__(self):
                return hash(self.parts)
        vs = [Version('1.10'), Version('1.2'), Version('1.2.1')]
        (sorted(vs), max(vs), Version('1.0') == Version('1.0'), Version('2.0') >= Version('1.9'), len({Version('1'), Version('1')}), Version('1') == 1)
        """,
    ),
    _snippet(
        "arithmetic-protocol",
        """
        class Vec:
            def __init__(self, *c):
                self.c = c
            def __repr__(self):
                return f'Vec{self.c}'
            def __add__(self, o):
                return Vec(*(a + b for a, b in zip(self.c, o.c)))
            def __sub__(self, o):
                return Vec(*(a - b for a, b in zip(self.c, o.c)))
            def __mul__(self, k):
                return Vec(*(a * k for a in self.c))
            def __rmul__(self, k):
                return self * k
            def __truediv__(self, k):
                return Vec(*(a / k for a in self.c))
            def __neg__(self):
                return Vec(*(-a for a in self.c))
            def __abs__(self):
                return sum(a * a for a in self.c) ** 0.5
            def __bool__(self):
                return any(self.c)
            def __eq__(self, o):
                return self.c == o.c
        v, w = Vec(3, 4), Vec(1, 1)
        (v + w, v - w, v * 2, 3 * w, v / 2, -v, abs(v), bool(Vec(0, 0)), v == Vec(3, 4), sum([w, w], Vec(0, 0)))
        """,
    ),
    _snippet(
        "pow-matmul-protocol",
        """
        class Matrix:
            def __init__(self, rows):
                self.rows = rows
            def __repr__(self):
                return f'Matrix({self.rows})'
            def __matmul__(self, other):
                cols = list(zip(*other.rows))
                return Matrix([[sum(a * b for a, b in zip(r, c)) for c in cols] for r in self.rows])
            def __pow__(self, n):
                result = Matrix([[1, 0], [0, 1]])
                for i in range(n):
                    result = result @ self
                return result
        m = Matrix([[1, 1], [1, 0]])
        (m @ m, m ** 5)
        """,
    ),
    _snippet(
        "container-protocol",
        """
        class Deck:
            def __init__(self, cards):
                self.cards = list(cards)
            def __len__(self):
                return len(self.cards)
            def __getitem__(self, i):
                return self.cards[i]
            def __setitem__(self, i, v):
                self.cards[i] = v
            def __delitem__(self, i):
                del self.cards[i]
            def __contains__(self, card):
                return card in self.cards
            def __iter__(self):
                return iter(self.cards)
        d = Deck('ABCDE')
        d[0] = 'Z'
        del d[1]
        (len(d), d[0], d[1:3], 'C' in d, 'B' in d, list(d), [c.lower() for c in d], bool(Deck([])), sorted(d))
        """,
    ),
    _snippet(
        "getitem-only-iteration",
        """
        class Squares:
            def __getitem__(self, i):
                if i >= 4:
                    raise IndexError(i)
                return i * i
        (list(Squares()), 9 in Squares(), [s for s in Squares() if s % 2])
        """,
    ),
    _snippet(
        "iterator-protocol",
        """
        class Countdown:
            def __init__(self, n):
                self.n = n
            def __iter__(self):
                return self
            def __next__(self):
                if self.n <= 0:
                    raise StopIteration
                self.n -= 1
                return self.n + 1
        (list(Countdown(3)), sum(Countdown(4)), next(Countdown(0), 'empty'))
        """,
    ),
    _snippet(
        "missing-on-dict-subclass",
        """
        class Defaulting(dict):
            def __missing__(self, key):
                value = self[key] = len(key)
                return value
        d = Defaulting(a=1)
        (d['a'], d['hello'], d, d.get('zz'))
        """,
    ),
    _snippet(
        "context-manager",
        """
        class Managed:
            def __init__(self, name, suppress=False):
                self.name, self.suppress = name, suppress
            def __enter__(self):
                print('enter', self.name)
                return self
            def __exit__(self, kind, value, tb):
                print('exit', self.name, kind is not None)
                return self.suppress
        with Managed('a') as m, Managed('b'):
            print('inside', m.name)
        with Managed('c', suppress=True):
            raise KeyError('swallowed')
        with Managed('d'):
            raise KeyError('escapes')
        """,
    ),
    _snippet(
        "format-protocol",
        """
        class Money:
            def __init__(self, cents):
                self.cents = cents
            def __format__(self, spec):
                text = f'{self.cents / 100:,.2f}'
                return f'${text}' if spec == 'usd' else text
            def __str__(self):
                return f'{self:usd}'
        m = Money(123456)
        (f'{m:usd}', f'{m}', format(m, ''), str(m), '{:usd}'.format(m))
        """,
    ),
    _snippet(
        "round-protocol",
        """
        class Measure:
            def __init__(self, v):
                self.v = v
            def __round__(self, ndigits=None):
                return Measure(round(self.v, ndigits))
            def __repr__(self):
                return f'Measure({self.v})'
        (round(Measure(2.71828), 2), round(Measure(2.5)))
        """,
    ),
    _snippet(
        "reversed-protocol",
        """
        class Path:
            def __init__(self, *steps):
                self.steps = steps
            def __reversed__(self):
                return iter(self.steps[::-1])
            def __iter__(self):
                return iter(self.steps)
        (list(reversed(Path('a', 'b', 'c'))), list(Path(1, 2)))
        """,
    ),
    _snippet(
        "call-hash-str",
        """
        class Adder:
            def __init__(self, n):
                self.n = n
            def __call__(self, x):
                return x + self.n
            def __str__(self):
                return f'adds {self.n}'
            def __hash__(self):
                return self.n
            def __eq__(self, other):
                return isinstance(other, Adder) and other.n == self.n
        add5 = Adder(5)
        print(add5)
        (add5(10), list(map(add5, [1, 2])), callable(add5), len({Adder(1), Adder(1), Adder(2)}), str(add5))
        """,
    ),
    _snippet(
        "augmented-assignment-on-items",
        """
        d = {k: 12 for k in ['add', 'sub', 'mul', 'div', 'floordiv', 'mod', 'pow', 'lshift', 'rshift', 'and', 'or', 'xor']}
        d['add'] += 3
        d['sub'] -= 3
        d['mul'] *= 3
        d['div'] /= 5
        d['floordiv'] //= 5
        d['mod'] %= 5
        d['pow'] **= 2
        d['lshift'] <<= 2
        d['rshift'] >>= 2
        d['and'] &= 5
        d['or'] |= 5
        d['xor'] ^= 5
        lst = [[1, 2], 'a', (1,)]
        lst[0] += [3]
        lst[1] *= 3
        lst[2] += (2,)
        lst[-1] += ()
        nested = {'a': {'b': 1}}
        nested['a']['b'] += 10
        counts = {}
        for w in 'a b a c a'.split():
            counts[w] = counts.get(w, 0) + 1
        (d, lst, nested, counts)
        """,
    ),
    _snippet(
        "augmented-assignment-on-attributes",
        """
        class Box:
            pass
        b = Box()
        b.add = b.sub = b.mul = b.div = b.floordiv = b.mod = b.pow = b.lshift = b.rshift = b.band = b.bor = b.xor = 12
        b.add += 3
        b.sub -= 3
        b.mul *= 3
        b.div /= 5
        b.floordiv //= 5
        b.mod %= 5
        b.pow **= 2
        b.lshift <<= 2
        b.rshift >>= 2
        b.band &= 5
        b.bor |= 5
        b.xor ^= 5
        b.items = [1]
        b.items += [2]
        b.items[0] += 100
        b.text = 'x'
        b.text *= 2
        (b.add, b.sub, b.mul, b.div, b.floordiv, b.mod, b.pow, b.lshift, b.rshift, b.band, b.bor, b.xor, b.items, b.text)
        """,
    ),
    _snippet(
        "augmented-matmul",
        """
        class M:
            def __init__(self, v):
                self.v = v
            def __matmul__(self, o):
                return M(self.v * o.v)
            def __repr__(self):
                return f'M({self.v})'
        holder = {'m': M(2)}
        holder['m'] @= M(5)
        class Box:
            pass
        b = Box()
        b.m = M(3)
        b.m @= M(3)
        (holder, b.m)
        """,
    ),
    _snippet(
        "inplace-operators-custom",
        """
        class Bag:
            def __init__(self):
                self.items = []
            def __iadd__(self, item):
                self.items.append(item)
                return self
            def __isub__(self, item):
                self.items.remove(item)
                return self
            def __imul__(self, n):
                self.items = self.items * n
                return self
        bag = Bag()
        bag += 'a'
        bag += 'b'
        bag -= 'a'
        bag *= 2
        box = {'bag': Bag()}
        box['bag'] += 'x'
        (bag.items, box['bag'].items)
        """,
    ),
    _snippet(
        "inplace-dunders-every-operator",
        """
        calls = []
        class Acc:
            def __init__(self):
                self.seen = []
            def note(self, name, other):
                calls.append(name)
                self.seen.append((name, other))
                return self
            def __iadd__(self, o): return self.note('iadd', o)
            def __isub__(self, o): return self.note('isub', o)
            def __imul__(self, o): return self.note('imul', o)
            def __imatmul__(self, o): return self.note('imatmul', o)
            def __itruediv__(self, o): return self.note('itruediv', o)
            def __ifloordiv__(self, o): return self.note('ifloordiv', o)
            def __imod__(self, o): return self.note('imod', o)
            def __ipow__(self, o): return self.note('ipow', o)
            def __ilshift__(self, o): return self.note('ilshift', o)
            def __irshift__(self, o): return self.note('irshift', o)
            def __iand__(self, o): return self.note('iand', o)
            def __ixor__(self, o): return self.note('ixor', o)
            def __ior__(self, o): return self.note('ior', o)
            def __mod__(self, o): return 'plain mod'
            def __lshift__(self, o): return 'plain lshift'
        class Box:
            pass
        def every(a, v):
            a += v; a -= v; a *= v; a @= v; a /= v; a //= v; a %= v
            a **= v; a <<= v; a >>= v; a &= v; a ^= v; a |= v
            return a
        x = Acc()
        x %= 3
        x <<= 1
        kept = x
        b = Box()
        b.a = Acc()
        b.a %= 'k'
        b.a <<= 2
        d = {'k': Acc()}
        d['k'] %= 4
        d['k'] <<= 5
        d['k'] **= len(calls)
        f = every(Acc(), 1)
        (x is kept, x.seen, b.a.seen, d['k'].seen, len(f.seen), calls)
        """,
    ),
    _snippet(
        "inplace-falls-back-to-plain-and-reflected",
        """
        class Plain:
            def __init__(self, v):
                self.v = v
            def __mod__(self, o): return Plain(self.v % o)
            def __lshift__(self, o): return Plain(self.v << o)
            def __pow__(self, o): return Plain(self.v ** o)
            def __repr__(self): return f'Plain({self.v})'
        class Declines:
            def __imod__(self, o): return NotImplemented
            def __mod__(self, o): return NotImplemented
            def __ilshift__(self, o): return NotImplemented
            def __repr__(self): return 'Declines()'
        class Right:
            def __rmod__(self, o): return ('rmod', o)
            def __rlshift__(self, o): return ('rlshift', o)
            def __rpow__(self, o): return ('rpow', o)
        class Nothing:
            pass
        def attempt(target, op, value):
            holder = {'k': target}
            class Box:
                pass
            box = Box()
            box.k = target
            out = []
            for kind in ('name', 'item', 'attribute'):
                try:
                    if kind == 'name':
                        t = target
                        if op == '%': t %= value
                        elif op == '<<': t <<= value
                        else: t **= value
                        out.append(t)
                    elif kind == 'item':
                        if op == '%': holder['k'] %= value
                        elif op == '<<': holder['k'] <<= value
                        else: holder['k'] **= value
                        out.append(holder['k'])
                    else:
                        if op == '%': box.k %= value
                        elif op == '<<': box.k <<= value
                        else: box.k **= value
                        out.append(box.k)
                except TypeError as e:
                    out.append(str(e))
            return out
        results = []
        for op in ('%', '<<', '**'):
            results.append(attempt(Plain(7), op, 2))
            results.append(attempt(Declines(), op, Right()))
            results.append(attempt(Declines(), op, 3))
            results.append(attempt(5, op, Right()))
            results.append(attempt(5, op, Nothing()))
            results.append(attempt(Nothing(), op, 1))
            results.append(attempt(2.5, op, 'x'))
        s = 'hello %s'
        s %= ('world',)
        n = 3
        n <<= 4
        n %= 5
        results
        """,
    ),
    _snippet(
        "attribute-builtins",
        """
        class Config:
            debug = False
        c = Config()
        setattr(c, 'level', 3)
        (getattr(c, 'debug'), getattr(c, 'missing', 'default'), hasattr(c, 'level'), c.level, isinstance(c, object))
        """,
    ),
    _snippet(
        "enum-members",
        """
        import enum
        class Color(enum.Enum):
            RED = 1
            GREEN = 2
        def name_of(c):
            match c:
                case Color.RED:
                    return 'red!'
                case _:
                    return c.name.lower()
        ([c.name for c in Color], Color(2).name, Color['RED'].value, name_of(Color.RED), name_of(Color.GREEN), str(Color.RED))
        """,
        "enum",
    ),
]

EXCEPTIONS = [
    _snippet(
        "custom-exceptions",
        """
        class AppError(Exception):
            pass
        class NotFound(AppError):
            def __init__(self, key):
                super().__init__(f'{key!r} not found')
                self.key = key
        def lookup(key):
            raise NotFound(key)
        try:
            lookup('user')
        except AppError as e:
            info = (str(e), e.key, e.args, isinstance(e, Exception), repr(e))
        print(info)
        lookup('other')
        """,
    ),
    _snippet(
        "exception-args-and-notes",
        """
        errors = []
        for bad in ([], {}, '', None):
            try:
                bad[1]
            except (KeyError, IndexError, TypeError) as e:
                errors.append((type(e).__name__, str(e)))
        try:
            raise ValueError('base')
        except ValueError as e:
            e.add_note('extra context')
            noted = e.args
        (errors, noted, str(KeyError('k')), repr(ValueError('v', 2)))
        """,
    ),
    _snippet(
        "except-star",
        """
        try:
            raise ExceptionGroup('many', [ValueError(1), TypeError(2), ValueError(3)])
        except* ValueError as eg:
            print('values', [str(e) for e in eg.exceptions])
        except* TypeError as eg:
            print('types', len(eg.exceptions))
        """,
    ),
    _snippet(
        "except-star-leftover",
        """
        try:
            raise ExceptionGroup('mixed', [KeyError('k'), OSError('o')])
        except* KeyError:
            print('handled key')
        """,
    ),
    _snippet(
        "exception-group-uncaught",
        """
        eg = ExceptionGroup('batch', [ValueError('a'), ValueError('b')])
        print(len(eg.exceptions), eg.message)
        raise eg
        """,
    ),
    _snippet(
        "exception-hierarchy",
        """
        (issubclass(KeyError, LookupError), issubclass(FileNotFoundError, OSError), issubclass(ZeroDivisionError, ArithmeticError),
         issubclass(StopIteration, Exception), isinstance(GeneratorExit(), Exception), IOError is OSError)
        """,
    ),
    _snippet(
        "keyboard-interrupt-name",
        """
        try:
            print('working')
        except KeyboardInterrupt:
            print('interrupted')
        issubclass(KeyboardInterrupt, BaseException)
        """,
    ),
    _snippet(
        "error-in-handler",
        """
        try:
            int('x')
        except ValueError:
            {}['missing']
        """,
    ),
]

STDLIB = [
    _snippet(
        "collections",
        """
        from collections import Counter, defaultdict, OrderedDict, deque, ChainMap, namedtuple
        words = 'the cat and the hat and the bat'.split()
        counts = Counter(words)
        groups = defaultdict(list)
        for w in words:
            groups[len(w)].append(w)
        od = OrderedDict.fromkeys('abc')
        od.move_to_end('a')
        dq = deque(range(5), maxlen=4)
        dq.rotate(1)
        dq.appendleft(99)
        cm = ChainMap({'a': 1}, {'a': 2, 'b': 3})
        P = namedtuple('P', 'x y', defaults=[0])
        (counts.most_common(2), counts['zebra'], dict(groups), list(od), dq, cm['a'], cm['b'], P(1), P(1, 2).x,
         Counter('abca') + Counter('b'), Counter(a=3) - Counter(a=1), sorted(Counter('hello').elements()))
        """,
    ),
    _snippet(
        "namedtuple-private-api",
        """
        from collections import namedtuple
        P = namedtuple('P', 'x y')
        P(1, 2)._replace(x=5)
        """,
        refusal=Refusal(
            "CodeRefused",
            "attributes starting with '_' are refused (README, local: the policy), namedtuple's _replace among them",
        ),
    ),
    _snippet(
        "itertools",
        """
        import itertools as it
        (list(it.chain([1, 2], 'ab')), list(it.combinations('abc', 2)), list(it.permutations([1, 2, 3], 2))[:4],
         list(it.product('ab', repeat=2)), [(k, list(g)) for k, g in it.groupby('aabbbc')], list(it.accumulate([1, 2, 3, 4])),
         list(it.islice(it.count(10, 5), 3)), list(it.islice(it.cycle('xy'), 5)), list(it.zip_longest('ab', [1], fillvalue='-')),
         list(it.pairwise(range(4))), list(it.starmap(pow, [(2, 3), (3, 2)])), list(it.takewhile(lambda v: v < 3, range(10))),
         list(it.dropwhile(lambda v: v < 8, range(10))), list(it.compress('abcd', [1, 0, 1, 0])), list(it.accumulate([3, 1, 4], max)),
         [list(t) for t in it.tee([1, 2], 2)], list(it.combinations_with_replacement('ab', 2)), list(it.repeat('z', 2)))
        """,
    ),
    _snippet(
        "functools",
        """
        import functools
        import operator

        @functools.lru_cache(maxsize=None)
        def fib(n):
            return n if n < 2 else fib(n - 1) + fib(n - 2)

        @functools.cache
        def square(n):
            return n * n

        def power(base, exp):
            return base ** exp

        cube = functools.partial(power, exp=3)
        by_len = functools.cmp_to_key(lambda a, b: len(a) - len(b))
        fib(30)
        square(4)
        square(4)
        (fib(30), fib.cache_info(), square.cache_info().hits, functools.reduce(operator.mul, range(1, 6)),
         functools.reduce(lambda a, b: a + [b * 2], [1, 2, 3], []), cube(2), cube(base=3), sorted(['ccc', 'a', 'bb'], key=by_len))
        """,
    ),
    _snippet(
        "singledispatch",
        """
        import functools
        @functools.singledispatch
        def show(x):
            return f'object {x}'
        @show.register
        def _(x: int):
            return f'int {x}'
        @show.register(list)
        def show_list(x):
            return 'list of ' + ', '.join(show(i) for i in x)
        [show(1), show('s'), show([1, 'a'])]
        """,
    ),
    _snippet(
        "math",
        """
        import math
        (math.sqrt(16), math.floor(-2.5), math.ceil(2.1), math.gcd(12, 18), math.lcm(4, 6), math.isclose(0.1 + 0.2, 0.3),
         math.comb(10, 3), math.perm(5, 2), math.prod([1, 2, 3, 4]), math.fsum([0.1] * 10), round(math.log(100, 10), 10),
         math.inf > 10 ** 100, math.pi, math.hypot(3, 4), math.isqrt(17), math.degrees(math.pi), math.trunc(-3.7),
         math.copysign(2, -0.0), math.isnan(float('nan')), math.e, math.log2(1024), math.dist((0, 0), (3, 4)))
        """,
    ),
    _snippet("math-domain-error", "import math\nmath.sqrt(-1)"),
    _snippet(
        "statistics",
        """
        import statistics as st
        data = [2, 4, 4, 4, 5, 5, 7, 9]
        (st.mean(data), st.median(data), st.mode(data), st.stdev(data), st.pstdev(data), st.pvariance(data),
         st.quantiles(data, n=4), st.fmean([1.5, 2.5]), round(st.geometric_mean([1, 4, 16]), 9), st.median_low([1, 3, 5, 7]),
         st.multimode('aabbc'), round(st.correlation([1, 2, 3], [2, 4, 7]), 9), st.harmonic_mean([1, 2, 4]))
        """,
    ),
    _snippet("statistics-error", "import statistics\nstatistics.mean([])"),
    _snippet(
        "json",
        """
        import json
        record = {'name': 'Ann', 'tags': ['a', 'b'], 'score': 9.5, 'ok': True, 'none': None, 'nested': {'k': [1, 2]}}
        text = json.dumps(record, indent=2, sort_keys=True)
        print(text)
        back = json.loads(text)
        (back == record, json.dumps([1, 'é', (2, 3)]), json.dumps('é', ensure_ascii=False), json.loads('[1, 2.5, "x", null]'),
         json.dumps({'b': 1, 'a': 2}, separators=(',', ':')), json.loads('{"1": 2}'))
        """,
    ),
    _snippet("json-not-serializable", "import json\njson.dumps({'when': {1, 2}})"),
    _snippet("json-decode-error", "import json\njson.loads('{bad json}')"),
    _snippet(
        "re",
        """
        import re
        text = 'Contact: ann@example.com, bob@test.org on 2024-03-15 and 2023-12-01'
        date = re.compile(r'(?P<year>\\d{4})-(?P<month>\\d{2})-(?P<day>\\d{2})')
        m = date.search(text)
        (re.findall(r'[\\w.]+@[\\w.]+', text), m.group(0), m.group('year'), m.groupdict(), m.span(), [x.group() for x in date.finditer(text)],
         re.sub(r'\\d', '#', 'a1b22'), re.sub(r'(\\w+)@', lambda mm: mm.group(1).upper() + '@', 'x@y'), re.split(r'[,;]\\s*', 'a, b;c'),
         bool(re.fullmatch(r'[a-z]+', 'abc')), re.match(r'\\d+', 'abc'), re.escape('a.b'), re.findall(r'(a)(b)?', 'ab a'),
         re.IGNORECASE and re.findall('x', 'xX', re.I), re.subn('a', 'b', 'aaa'), date.pattern)
        """,
    ),
    _snippet("re-bad-pattern", "import re\nre.compile('(unclosed')"),
    _snippet(
        "datetime",
        """
        from datetime import date, datetime, timedelta, timezone
        d = date(2024, 2, 28)
        dt = datetime(2024, 3, 15, 14, 30, 5)
        utc = datetime(2024, 1, 1, 12, tzinfo=timezone.utc)
        (d + timedelta(days=2), (date(2024, 12, 25) - d).days, dt.strftime('%Y-%m-%d %H:%M'), dt.isoformat(), d.weekday(),
         datetime.strptime('2024-05-06 07:08', '%Y-%m-%d %H:%M'), date.fromisoformat('2024-07-04'), dt.replace(hour=0),
         utc.astimezone(timezone(timedelta(hours=2))).isoformat(), timedelta(hours=36), str(timedelta(minutes=90)),
         dt.date(), dt.time(), d.isocalendar().week, (dt - datetime(2024, 1, 1)).total_seconds(), d < date(2025, 1, 1),
         d.strftime('%A %B %d'), d.replace(day=1), utc)
        """,
    ),
    _snippet("datetime-bad-date", "from datetime import date\ndate(2023, 2, 29)"),
    _snippet(
        "heapq",
        """
        import heapq
        h = []
        for v in [5, 1, 8, 3, 2]:
            heapq.heappush(h, v)
        smallest = [heapq.heappop(h) for i in range(2)]
        data = [9, 4, 7, 1]
        heapq.heapify(data)
        tasks = [(2, 'write'), (1, 'plan'), (3, 'ship')]
        heapq.heapify(tasks)
        (smallest, h[0], data[0], heapq.nlargest(2, [5, 1, 8, 3]), heapq.nsmallest(2, ['bb', 'a', 'ccc'], key=len),
         list(heapq.merge([1, 4], [2, 3])), heapq.heappop(tasks), heapq.heappushpop(h, 0))
        """,
    ),
    _snippet(
        "bisect",
        """
        import bisect
        grades = [60, 70, 80, 90]
        def grade(score):
            return 'FDCBA'[bisect.bisect(grades, score)]
        sorted_list = [1, 3, 5]
        bisect.insort(sorted_list, 4)
        bisect.insort_left(sorted_list, 3)
        ([grade(s) for s in (55, 70, 85, 99)], bisect.bisect_left([1, 2, 2, 3], 2), bisect.bisect_right([1, 2, 2, 3], 2), sorted_list,
         bisect.bisect_left(['a', 'bb', 'ccc'], 2, key=len))
        """,
    ),
    _snippet(
        "textwrap",
        """
        import textwrap
        text = 'The quick brown fox jumps over the lazy dog and keeps running far away'
        print(textwrap.fill(text, width=20))
        (textwrap.wrap(text, 25), textwrap.shorten(text, width=30), textwrap.dedent('    a\\n      b'), textwrap.indent('x\\ny', '> '))
        """,
    ),
    _snippet(
        "typing-hints",
        """
        import typing
        from typing import Optional, ClassVar
        from dataclasses import dataclass

        @dataclass
        class User:
            name: str
            age: Optional[int] = None
            friends: list[str] = None
            count: ClassVar[int] = 0

        def greet(user: User, times: int = 1) -> str:
            return 'hi ' * times + user.name

        hints = typing.get_type_hints(User)
        (sorted(hints), hints['age'] == Optional[int], typing.get_type_hints(greet)['return'] is str,
         typing.get_origin(list[int]) is list, typing.get_args(dict[str, int]) == (str, int))
        """,
    ),
    _snippet(
        "typing-hints-string-annotation",
        """
        import typing

        class Node:
            parent: 'Node'

        typing.get_type_hints(Node)
        """,
        refusal=Refusal(
            "SandboxViolation",
            "get_type_hints refuses an annotation written as a string: evaluating it would run code "
            "outside the policy (README, local)",
        ),
    ),
    _snippet(
        "typing-constructs",
        """
        from typing import NamedTuple, TypedDict, Generic, TypeVar, Union, Any, Callable, Iterable

        T = TypeVar('T')

        class Pt(NamedTuple):
            x: int
            y: int = 0

        class Movie(TypedDict):
            title: str
            year: int

        class Stack(Generic[T]):
            def __init__(self) -> None:
                self.items: list[T] = []
            def push(self, item: T) -> None:
                self.items.append(item)

        def apply(f: Callable[[int], int], xs: Iterable[int]) -> list[int]:
            return [f(x) for x in xs]

        s: Stack[int] = Stack()
        s.push(3)
        m: Movie = {'title': 'Up', 'year': 2009}
        (Pt(1), Pt(1, 2).x, m, s.items, apply(lambda v: v + 1, [1, 2]), Union[int, str] == Union[str, int])
        """,
    ),
    _snippet(
        "random-seeded",
        """
        import random
        random.seed(42)
        draws = [random.randint(1, 100) for i in range(5)]
        items = list(range(10))
        random.shuffle(items)
        (draws, items, random.choice('abcdef'), round(random.random(), 12), random.sample(range(100), 3), round(random.uniform(1, 2), 12))
        """,
    ),
    _snippet(
        "hashing-and-encoding",
        """
        import hashlib
        import base64
        (hashlib.md5(b'hello').hexdigest(), hashlib.sha256('hé'.encode()).hexdigest()[:16], base64.b64encode(b'data!'),
         base64.b64decode('ZGF0YSE='), base64.urlsafe_b64encode(b'\\xfb\\xff'))
        """,
    ),
    _snippet(
        "difflib-operator",
        """
        import difflib
        import operator
        rows = [{'n': 'b', 'v': 2}, {'n': 'a', 'v': 1}]
        class O:
            def __init__(self, w):
                self.w = w
            def scaled(self, k):
                return self.w * k
        (round(difflib.SequenceMatcher(None, 'kitten', 'sitting').ratio(), 6), difflib.get_close_matches('appel', ['ape', 'apple', 'peach']),
         sorted(rows, key=operator.itemgetter('v')), operator.attrgetter('w')(O(3)), operator.methodcaller('scaled', 2)(O(4)),
         list(map(operator.add, [1, 2], [10, 20])), operator.itemgetter(0, 2)('abc'))
        """,
    ),
    _snippet(
        "cmath-and-numbers",
        """
        import cmath
        import numbers
        (cmath.sqrt(-1), cmath.phase(-1), abs(cmath.exp(1j * cmath.pi) + 1) < 1e-12, isinstance(3, numbers.Integral), isinstance(2.5, numbers.Real))
        """,
    ),
    _snippet(
        "collections-abc",
        """
        from collections.abc import Mapping, Sequence, Iterable, Callable
        (isinstance({}, Mapping), isinstance([], Sequence), isinstance('s', Iterable), isinstance(len, Callable), isinstance(5, Iterable))
        """,
    ),
    _snippet(
        "open-a-missing-file",  # open() reaches the working folder only (README, Files): both find no such file
        "with open('notes.txt') as f:\n    f.read()",
    ),
    _snippet(
        "import-os",
        "import os\nos.getcwd() is not None",
        refusal=Refusal(
            "SandboxViolation",
            "os is not among the authorized imports (README, local: Imports); the code did not allow it",
        ),
    ),
]

MODULE_AND_PRINTING = [
    _snippet(
        "main-guard",
        """
        def main():
            print('running main')
            return 42
        result = None
        if __name__ == '__main__':
            result = main()
        result
        """,
    ),
    _snippet(
        "print-sep-end",
        """
        print('a', 'b', 'c', sep='-')
        print('no newline', end='')
        print(' continued', end='!\\n')
        print()
        print(1, 2.5, None, [1, 'x'], {'k': (1,)}, True, sep=' | ')
        print('flushed', flush=True)
        print(*'xyz', sep='')
        """,
    ),
    _snippet(
        "print-to-stderr",
        """
        import sys
        print('to stdout')
        print('to stderr', file=sys.stderr)
        sys.stdout.write('written\\n')
        sys.stderr.write('err written\\n')
        print('last', file=sys.stdout)
        """,
        "sys",
    ),
    _snippet("last-expression-none", "x = 3\nx if x > 5 else None"),
    _snippet("last-statement-assignment", "y = 10 * 2"),
    _snippet("last-expression-print", "print('shown')"),
    _snippet("last-expression-after-loop", "acc = []\nfor i in range(3):\n    acc.append(i)\nacc[-1] * 10"),
    _snippet("semicolons", "a = 1; b = 2; a + b"),
    _snippet("last-expression-multiline", "(\n    1 +\n    2\n)"),
    _snippet("last-expression-string", "'just text'"),
    _snippet("last-expression-in-block", "if True:\n    42"),
    _snippet("last-expression-comparison", "values = [3, 1, 2]\nsorted(values) == [1, 2, 3]"),
    _snippet("nested-data-value", "{'a': [1, (2, 3)], 'b': {'c': None, 1: 2.5}, (1, 2): {3, 4}, 'd': b'x', 'e': 1e-7}"),
    _snippet("empty-code", "# nothing but a comment\n"),
    _snippet(
        "async",
        """
        import asyncio

        async def work(n):
            await asyncio.sleep(0)
            return n * 2

        async def main():
            results = await asyncio.gather(*(work(i) for i in range(3)))
            async def agen():
                for i in range(2):
                    yield i
            collected = [v async for v in agen()]
            return results, collected

        asyncio.run(main())
        """,
        "asyncio",
        refusal=Refusal(
            "CodeRefused",
            "async def is refused: the event loop runs coroutines from callbacks and threads the time limit does not reach",
        ),
    ),
]

NUMPY = [
    _snippet("numpy-sum", "import numpy as np\nnp.arange(6).sum()", "numpy"),
    _snippet(
        "numpy-mean-max-dtype",
        "import numpy as np\na = np.arange(4.0)\n(a.mean(), a.max(), str(a.dtype), a.dtype.name, a.dtype, np.array([1, 2]).dtype)",
        "numpy",
    ),
    _snippet("numpy-dtype-text", "import numpy as np\nstr(np.arange(3).dtype)", "numpy"),
    _snippet(
        "numpy-broadcasting",
        "import numpy as np\ngrid = np.arange(3)[:, None] * np.arange(4)\nprint(grid)\n(grid, grid + np.array([10, 20, 30, 40]), grid.shape)",
        "numpy",
    ),
    _snippet(
        "numpy-boolean-masks",
        """
        import numpy as np
        a = np.arange(10)
        evens = a[(a % 2 == 0) & (a > 2)]
        b = a.copy()
        b[b > 5] = 0
        (evens, b, np.where(a > 4, a, -1), int((a > 3).sum()), a[~(a < 8)], np.any(a > 8), np.all(a >= 0))
        """,
        "numpy",
    ),
    _snippet(
        "numpy-linalg",
        """
        import numpy as np
        m = np.array([[2.0, 1.0], [1.0, 3.0]])
        (np.linalg.norm([3, 4]), np.linalg.norm(m), np.linalg.solve(m, [1, 2]), np.round(np.linalg.inv(m), 6), round(float(np.linalg.det(m)), 9),
         m @ np.array([1, 1]), np.dot([1, 2], [3, 4]))
        """,
        "numpy",
    ),
    _snippet(
        "numpy-reshape-axis",
        """
        import numpy as np
        m = np.arange(12).reshape(3, 4)
        (m.sum(axis=0), m.T.shape, m.mean(axis=1), m.cumsum()[-3:], np.unique([3, 1, 3, 2, 1], return_counts=True), np.argsort([3, 1, 2]),
         np.linspace(0, 1, 5), np.percentile([1, 2, 3, 4], 50), np.round(np.std([1, 2, 3, 4]), 6), m[1:, ::2], np.concatenate([m[0], m[2]]),
         np.vstack([m[0], m[1]]).shape, m.flatten()[:3], m.max(), m.argmax(axis=1))
        """,
        "numpy",
    ),
    _snippet(
        "numpy-random-generator",
        "import numpy as np\nrng = np.random.default_rng(0)\n(rng.integers(0, 10, 5), np.round(rng.normal(size=3), 6), rng.choice(['a', 'b', 'c'], 2))",
        "numpy",
    ),
    _snippet(
        "numpy-augmented-items",
        """
        import numpy as np
        a = np.zeros(4)
        a[1] += 5
        a[[0, 2]] -= 1
        a[a > 0] *= 3
        a[-1] **= 2
        m = np.eye(2)
        m @= np.array([[1, 2], [3, 4]])
        (a, m)
        """,
        "numpy",
    ),
    _snippet(
        "numpy-inplace-mod-and-shift-keep-the-array",
        """
        import numpy as np
        a = np.arange(8)
        alias = a
        a %= 5
        a <<= 1
        holder = {'a': a}
        holder['a'] %= 3
        (alias, a is alias, holder['a'] is alias)
        """,
        "numpy",
    ),
    _snippet("numpy-shape-error", "import numpy as np\nnp.arange(3) + np.arange(4)", "numpy"),
    _snippet(
        "numpy-scalars-text",
        "import numpy as np\nv = np.float64(2.5) * 2\nprint(v, np.int64(7) // 2, np.array([1.5, 2.25]))\n(float(v), int(np.int32(3)), repr(np.float32(0.1)), f'{np.pi:.3f}')",
        "numpy",
    ),
]

PANDAS = [
    _snippet(
        "pandas-dataframe-build",
        """
        import pandas as pd
        df = pd.DataFrame({'name': ['Ann', 'Bob', 'Cy', 'Dee'], 'dept': ['eng', 'ops', 'eng', 'ops'], 'salary': [100, 80, 120, 90]})
        print(df)
        (df.shape, df.columns.tolist(), df.dtypes, df.head(2), df.iloc[1], df.loc[df.salary > 85, 'name'].tolist())
        """,
        "pandas",
    ),
    _snippet(
        "pandas-groupby-agg",
        """
        import pandas as pd
        df = pd.DataFrame({'dept': ['eng', 'ops', 'eng', 'ops', 'eng'], 'salary': [100, 80, 120, 90, 110], 'age': [30, 40, 25, 35, 45]})
        (df.groupby('dept').agg({'salary': ['mean', 'max'], 'age': 'count'}), df.groupby('dept').agg(total=('salary', 'sum'), oldest=('age', 'max')),
         df.groupby('dept')['salary'].mean(), df.groupby('dept').size())
        """,
        "pandas",
    ),
    _snippet(
        "pandas-merge",
        """
        import pandas as pd
        left = pd.DataFrame({'key': ['a', 'b', 'c'], 'x': [1, 2, 3]})
        right = pd.DataFrame({'key': ['a', 'c', 'd'], 'y': [10, 30, 40]})
        (pd.merge(left, right, on='key'), left.merge(right, on='key', how='left'), pd.concat([left, left], ignore_index=True).shape)
        """,
        "pandas",
    ),
    _snippet(
        "pandas-pivot-table",
        """
        import pandas as pd
        sales = pd.DataFrame({'region': ['N', 'N', 'S', 'S', 'N'], 'quarter': ['Q1', 'Q2', 'Q1', 'Q2', 'Q1'], 'amount': [10, 20, 30, 40, 50]})
        pd.pivot_table(sales, values='amount', index='region', columns='quarter', aggfunc='sum', fill_value=0)
        """,
        "pandas",
    ),
    _snippet(
        "pandas-describe",
        "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, 3, 4], 'b': [2.5, 3.5, 1.0, 0.5]})\nprint(df.describe())\ndf.describe()",
        "pandas",
    ),
    _snippet(
        "pandas-string-methods",
        """
        import pandas as pd
        s = pd.Series(['apple pie', 'Banana split', 'cherry'])
        (s.str.upper(), s.str.contains('an'), s.str.len(), s.str.split().str[0], s.str.replace('a', 'A'), s.str.title().tolist())
        """,
        "pandas",
    ),
    _snippet(
        "pandas-datetime-columns",
        """
        import pandas as pd
        df = pd.DataFrame({'when': pd.to_datetime(['2024-01-15', '2024-02-20', '2024-02-25']), 'v': [1, 2, 3]})
        (df['when'].dt.year.tolist(), df['when'].dt.day_name().tolist(), df.set_index('when').resample('MS')['v'].sum(),
         pd.date_range('2024-01-01', periods=3, freq='D'), (df['when'].max() - df['when'].min()).days, df['when'].dt.strftime('%d/%m').tolist())
        """,
        "pandas",
    ),
    _snippet(
        "pandas-apply-len",
        """
        import pandas as pd
        df = pd.DataFrame({'a': ['x', 'yy', 'zzz'], 'b': ['1', '22', '4444']})
        (df.apply(len), df['b'].apply(len), df.map(len), df['a'].map(str.upper))
        """,
        "pandas",
    ),
    _snippet(
        "pandas-agg-sum",
        """
        import pandas as pd
        df = pd.DataFrame({'a': [1, 2, 3], 'b': [4.5, 5.5, 6.5]})
        (df.agg('sum'), df.agg(['min', 'max']), df['a'].agg('sum'), df.sum(), df.cumsum(), df.mean().round(3))
        """,
        "pandas",
    ),
    _snippet(
        "pandas-cleaning",
        """
        import pandas as pd
        import numpy as np
        df = pd.DataFrame({'a': [1, np.nan, 3], 'b': ['x', None, 'z'], 'c': [5, 5, 6]})
        (df.isna().sum(), df.fillna({'a': 0, 'b': '?'}), df.dropna(), df['c'].value_counts(), df.sort_values('a', ascending=False),
         df.assign(d=lambda t: t['c'] * 2), df['a'].astype('float32').dtype, df.drop_duplicates('c'), df.rename(columns={'a': 'A'}).columns.tolist())
        """,
        "pandas",
        "numpy",
    ),
    _snippet(
        "pandas-export-text",
        """
        import pandas as pd
        df = pd.DataFrame({'a': [1, 2], 'b': ['x', 'y']})
        (df.to_csv(index=False), df.to_dict('records'), df.to_json(orient='records'), df.to_string())
        """,
        "pandas",
    ),
    _snippet("pandas-missing-column", "import pandas as pd\npd.DataFrame({'a': [1]})['b']", "pandas"),
    _snippet(
        "pandas-query",
        "import pandas as pd\npd.DataFrame({'a': [1, 2, 3]}).query('a > 1')",
        "pandas",
        refusal=Refusal(
            "SandboxViolation",
            "DataFrame.query evaluates code and is refused (README, local: granting numpy or pandas)",
        ),
    ),
]

#: Module-level code, which the sandbox runs as a function whose names are all global
#: (`block_function`), or as module code where that would change its meaning.
MODULE_SCOPE = [
    _snippet(
        "module-scope-names-and-qualnames",
        """
        total = 0
        for i in range(5):
            total += i
        square = lambda v: v * v
        class Shape:
            def area(self):
                return 0
        def outer():
            def inner():
                return 1
            return inner
        found = [hit := w for w in ['a', 'bb'] if len(w) > 1]
        try:
            1 / 0
        except ZeroDivisionError as error:
            caught = type(error).__name__
        gone = 1
        del gone
        (total, square(4), square.__qualname__, Shape.__qualname__, Shape.area.__qualname__,
         outer().__qualname__, found, hit, caught, (lambda: [k for k in range(2)])(),
         type(x for x in ()).__name__)
        """,
    ),
    _snippet(
        "module-scope-deleted-name",
        """
        value = 1
        del value
        value
        """,
    ),
    _snippet(
        "module-scope-global-statement-and-annotations",
        """
        global counter
        counter: int = 3
        label: str
        def bump():
            global counter
            counter += 1
        bump()
        counter
        """,
    ),
    _snippet(
        "module-scope-docstring",
        '''
        """What this block does."""
        words = 'one two'.split()
        words
        ''',
    ),
    _snippet("return-outside-function", "x = 1\nreturn x"),
    _snippet("break-outside-loop", "if True:\n    break"),
    _snippet("yield-outside-function", "yield 1"),
]


#: Methods whose receiver the sandbox reads without the attribute guard when its class is plain
#: (`receivers`): each form of access on ``self``, and the cases that must keep the guard.
METHODS_ON_SELF = [
    _snippet(
        "method-calls-with-expression-arguments",
        """
        class Acc:
            def __init__(self):
                self.total, self.log = 0, []
            def add(self, value, scale=1, *rest, **extra):
                self.total += value * scale
                self.log.append((value, scale, rest, sorted(extra)))
                return self.total
            def twice(self, value):
                self.add(value % 5, scale=2)
                got = self.add(*[value, 3], note=f"{value:03d}")
                return self.add(**{'value': value // 2, 'scale': len(self.log)})
        a, b = Acc(), Acc()
        for i in range(30):
            a.add(i % 7)
            a.add(b.add(i) % 3, scale=i & 3)
            a.add(*(i, 2), **{'tag': str(i)})
            last = a.twice(i + 1)
            b.add(abs(-i), *[4], key=[j for j in range(i % 3)])
        (a.total, b.total, last, a.log[-4:], b.log[-1])
        """,
    ),
    _snippet(
        "method-call-arguments-run-in-order",
        """
        order = []
        class Box:
            def __init__(self, name):
                self.name = name
            def put(self, *values, **named):
                order.append((self.name, values, sorted(named.items())))
                return self.name
            def swap(self):
                global box
                box = Box('second')
                return self.name
        box = Box('first')
        box.put(box.swap(), (box := Box('third')).name)
        box.put(box.put('inner'), after=box.name)
        def in_function(target):
            target.put(target.swap(), *[target.name], key=(target := Box('local')).name)
            return target.put('end')
        ended = in_function(Box('argument'))
        try:
            box.put(1 // 0)
        except ZeroDivisionError as error:
            order.append(type(error).__name__)
        (order, box.name, ended)
        """,
    ),
    _snippet(
        "method-calls-from-closures-generators-and-try",
        """
        from dataclasses import dataclass, field
        @dataclass
        class Stats:
            seen: list = field(default_factory=list)
            count: int = 0
            def note(self, value, label=''):
                self.count += 1
                self.seen.append(f"{label}{value!r:>4}")
                return self.count
        stats = Stats()
        def make(step):
            def inner(value):
                return stats.note(value * step, label=f"x{step}:")
            return inner
        triple = make(3)
        def produce(n):
            for k in range(n):
                got = stats.note(k ** 2, label='g')
                yield got + stats.note(-k)
        results = [triple(k) for k in range(4)] + list(produce(3))
        for k in range(6):
            try:
                stats.note(10 // (k - 3), label='ok')
            except ZeroDivisionError:
                stats.note(None, label='zero')
            finally:
                stats.note(k, label='f')
        (stats.count, stats.seen[-6:], results, stats)
        """,
        "dataclasses",
    ),
    _snippet(
        "products-in-a-def",
        """
        class Money:
            def __init__(self, cents):
                self.cents = cents
            def __mul__(self, n):
                return Money(self.cents * n)
            def __rmul__(self, n):
                return Money(n * self.cents)
            def __repr__(self):
                return f"Money({self.cents})"
        class Count(int):
            pass
        def times(a, b):
            return a * b
        def scaled(values, factor):
            out = []
            for v in values:
                out.append(v * factor)
                out.append(factor * (v + 0))
            return out
        cases = [(3, 4), (2**31 - 1, 2**31 - 1), (2**31, 3), (-2**31, 2), (10**30, 10**30), (2.5, 4),
                 (3, 0.5), (True, 7), (Count(6), 7), (7, Count(6)), ('ab', 3), (3, 'ab'), ([1], 2),
                 ((1, 2), 2), (Money(5), 3), (3, Money(5)), (1 + 2j, 2), (float('inf'), 0)]
        results = [repr(times(a, b)) for a, b in cases]
        errors = []
        for a, b in [('a', 'b'), ([1], 2.5), (None, 1), (2.0, 'x')]:
            try:
                times(a, b)
            except TypeError as error:
                errors.append(str(error))
        (results, errors, scaled([1, 2.5, -3], 4), scaled(['x'], 2), type(times(Count(2), 3)).__name__)
        """,
    ),
    _snippet(
        "self-augmented-operators",
        """
        class Cell:
            def __init__(self):
                self.i, self.f, self.s, self.items, self.bits = 7, 2.5, 'ab', [1], 0b1100
            def apply(self):
                self.i += 3; self.i -= 1; self.i *= 4; self.i //= 3; self.i %= 7; self.i **= 3
                self.i <<= 2; self.i >>= 1; self.bits &= 0b0110; self.bits |= 1; self.bits ^= 0b1000
                self.f /= 2; self.f += 0.25; self.s += 'cd'; self.s *= 2
                before = self.items
                self.items += [2, 3]
                self.items *= 2
                return self.i, self.f, self.s, self.items, self.bits, before is self.items
        Cell().apply()
        """,
    ),
    _snippet(
        "self-inplace-dunders",
        """
        class Mask:
            def __init__(self, bits):
                self.bits = bits
            def __ilshift__(self, n):
                self.bits = self.bits + [0] * n
                return self
            def __imod__(self, n):
                self.bits = self.bits[-n:]
                return self
            def __rshift__(self, n):
                return Mask(self.bits[:-n])
        class Register:
            def __init__(self):
                self.mask = Mask([1])
            def step(self):
                before = self.mask
                self.mask <<= 3
                self.mask %= 2
                same = self.mask is before
                self.mask >>= 1
                return same, self.mask is before, self.mask.bits
        Register().step()
        """,
    ),
    _snippet(
        "self-properties",
        """
        class Lazy:
            def __init__(self):
                self.calls = 0
            @property
            def double(self):
                self.calls += 1
                return self.calls * 2
            @double.setter
            def double(self, value):
                self.calls = value
            @staticmethod
            def twice(other):
                return other.calls * 2
            def read(self):
                self.double = 10
                return self.double, self.calls, self.twice(self)
        Lazy().read()
        """,
    ),
    _snippet(
        "self-in-closures-generators-and-class-counters",
        """
        class Counter:
            made = 0
            def __init__(self, start):
                Counter.made += 1
                self.value = start
            def steps(self, n):
                for _ in range(n):
                    self.value += 1
                    yield self.value
            def adder(self):
                return lambda k: self.value + k
            def squares(self):
                return [self.value * k for k in range(3)]
        c = Counter(5)
        Counter(1)
        (list(c.steps(3)), c.adder()(10), c.squares(), Counter.made)
        """,
    ),
    _snippet(
        "self-on-a-subclass-of-a-builtin",
        """
        class Named:
            def label(self):
                return f'{self.name}:{len(self)}'
            def grow(self):
                self.name += '!'
                return self.name
        class Bag(Named, list):
            def __init__(self, name, items):
                super().__init__(items)
                self.name = name
        b = Bag('bag', [1, 2])
        (b.label(), b.grow(), Named.label(b), isinstance(b, list))
        """,
    ),
    _snippet(
        "self-rebound-and-missing-attributes",
        """
        class Node:
            def __init__(self, value, nxt=None):
                self.value, self.nxt = value, nxt
            def last(self):
                while self.nxt is not None:
                    self = self.nxt
                return self.value
            def missing(self):
                try:
                    return self.absent
                except AttributeError as error:
                    return type(error).__name__, error.name
        (Node(1, Node(2, Node(3))).last(), Node(0).missing())
        """,
    ),
    _snippet(
        "self-dataclass-methods",
        """
        from dataclasses import dataclass, field
        @dataclass
        class Ledger:
            owner: str
            entries: list = field(default_factory=list)
            def add(self, amount):
                self.entries += [amount]
                return self.balance()
            def balance(self):
                return sum(self.entries)
        @dataclass(frozen=True)
        class Frozen:
            x: int
            def bump(self):
                try:
                    self.x += 1
                except Exception as error:
                    return type(error).__name__
        l = Ledger('ann')
        (l.add(5), l.add(7), l, Frozen(1).bump())
        """,
        "dataclasses",
    ),
    _snippet(
        "own-receivers-outside-methods",
        """
        class Account:
            kind = 'basic'
            def __init__(self, owner):
                self.owner, self.balance = owner, 0
            def deposit(self, amount):
                self.balance += amount
                return self.balance
            @property
            def upper(self):
                return self.owner.upper()
        def total(accounts):
            for account in accounts:
                account.deposit(2)
            return [account.balance for account in accounts]
        accounts = [Account(f'u{i}') for i in range(3)]
        for account in accounts:
            account.deposit(1)
        mixed = []
        for item in [accounts[0], 'text', Account]:
            mixed.append(item.upper if isinstance(item, Account) else type(item).__name__)
            mixed.append(None if isinstance(item, str) else item.kind)
        try:
            accounts[0].absent
        except AttributeError as error:
            mixed.append((type(error).__name__, error.name))
        f = lambda a: a.deposit(0)
        (total(accounts), mixed, account.owner, f(account), Account.kind)
        """,
    ),
    _snippet(
        "method-call-statements-hand-the-receiver-on",
        """
        class Node:
            def __init__(self, name):
                self.name, self.seen, self.children = name, [], []
            def add(self, child):
                self.children.append(child)
                return child
            def visit(self, depth):
                self.seen.append(depth)
                for child in self.children:
                    child.visit(depth + 1)
            def rename(self, name):
                old = self.name
                self.name = name
                return old
            def relabel(self, prefix):
                self.rename(prefix)
                last = self.rename(prefix + self.name)
                return self.rename(last)
        class Other:
            def visit(self, depth):
                log.append(('other', depth))
        log = []
        root = Node('root')
        child = root.add(Node('child'))
        root.add(Other())
        root.visit(0)
        kept = child.relabel('x')
        def walk(node, depth):
            return node.visit(depth)
        for each in [root, Other(), child]:
            walk(each, 5)
        try:
            absent = root.missing(1)
        except AttributeError as error:
            log.append(type(error).__name__)
        try:
            root.rename()
        except TypeError as error:
            log.append('TypeError')
        (root.seen, child.seen, child.name, kept, log)
        """,
    ),
    _snippet(
        "comprehensions-over-the-code-s-instances",
        """
        class Item:
            def __init__(self, name, price, tags):
                self.name, self.price, self.tags = name, price, tags
        items = [Item('a', 3, ['x']), Item('b', 5, []), Item('c', 1, ['x', 'y'])]
        names = [item.name for item in items]
        prices = {item.name: item.price for item in items if item.tags}
        tags = sorted({tag for item in items for tag in item.tags})
        nested = [[tag + item.name for tag in item.tags] for item in items]
        later = [(lambda: item.price)() for item in items]
        total = sum(item.price for item in items)
        mixed = [getattr(value, 'name', None) for value in [items[0], 'text', 3]]
        try:
            [value.price for value in [items[0], 'text']]
        except AttributeError as error:
            mixed.append((type(error).__name__, error.name))
        (names, prices, tags, nested, later, total, mixed)
        """,
    ),
]


CORPUS: list[Snippet] = [
    *ARITHMETIC,
    *STRINGS,
    *CONTAINERS,
    *CONTROL_FLOW,
    *FUNCTIONS,
    *CLASSES,
    *METHODS_ON_SELF,
    *EXCEPTIONS,
    *STDLIB,
    *MODULE_AND_PRINTING,
    *MODULE_SCOPE,
    *NUMPY,
    *PANDAS,
]


# --- CPython's side -------------------------------------------------------------------------

_PLAIN_SCALARS = (type(None), bool, int, float, complex, str, bytes)


def _canonical(value: Any, depth: int = 0) -> Any:
    """Plain data as nested tuples of type names and reprs, set items sorted (their order is hash
    order, which differs between processes); None for anything else."""
    kind = type(value)
    if depth > 50:
        return None
    if kind in _PLAIN_SCALARS:
        return (kind.__name__, repr(value))
    if kind in (list, tuple):
        items = [_canonical(item, depth + 1) for item in value]
        return None if None in items else (kind.__name__, *items)
    if kind in (set, frozenset):
        items = [_canonical(item, depth + 1) for item in value]
        return None if None in items else (kind.__name__, *sorted(items, key=repr))
    if kind is dict:
        pairs = [(_canonical(k, depth + 1), _canonical(v, depth + 1)) for k, v in value.items()]
        return None if any(None in pair for pair in pairs) else (kind.__name__, *pairs)
    return None


def _codec_form(value: Any, depth: int = 0) -> Any:
    """A value as the codec gives it where its classes are not loaded: a dataclass as a dict
    of its fields, a namedtuple as a plain tuple, at any depth (the codec's documented rule)."""
    if depth > 50:
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _codec_form(getattr(value, f.name), depth + 1) for f in dataclasses.fields(value)}
    if isinstance(value, tuple):
        return tuple(_codec_form(item, depth + 1) for item in value)
    if type(value) is list:
        return [_codec_form(item, depth + 1) for item in value]
    if type(value) is dict:
        return {key: _codec_form(item, depth + 1) for key, item in value.items()}
    return value


def describe(value: Any) -> dict[str, Any]:
    """What a value is, as JSON: its type's name, its repr, the canonical form of plain data and,
    for a snippet's own dataclass or namedtuple, the description of its codec form."""
    try:
        text = repr(value)
    except Exception as error:
        text = f"<repr failed: {type(error).__name__}>"
    canonical = _canonical(value)
    carried = _codec_form(value)
    if type(carried) is type(value) and repr(carried) == text:
        carried = None
    return {
        "type": type(value).__qualname__,
        "repr": text,
        "canonical": None if canonical is None else repr(canonical),
        "carried": None if carried is None else describe(carried),
    }


def sandbox_outcome(executor: Any, code: str) -> dict[str, Any]:
    """One block's outcome in a codeward sandbox, in the form `run_plain` gives CPython's."""
    import warnings

    from codeward.executors import ExecutionError, SandboxError
    from codeward.executors.codec import CodecWarning

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CodecWarning)  # a snippet's dataclass arrives as its fields
            result = executor.run(code)
    except ExecutionError as error:
        return {"value": None, "error": error.error_type or type(error).__name__, "logs": error.logs}
    except SandboxError as error:
        return {"value": None, "error": f"SandboxError: {error.message}", "logs": error.logs}
    return {"value": describe(result.output), "error": None, "logs": result.logs}


def _future_flags(tree: ast.Module) -> int:
    import __future__

    flags = 0
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "__future__":
            for alias in node.names:
                flags |= getattr(__future__, alias.name).compiler_flag
    return flags


def _run_one(code: str, module: types.ModuleType) -> dict[str, Any]:
    try:
        body, final = _compiled(code)
    except SyntaxError as error:  # what the compiler refuses ('return' outside function) is an outcome too
        return {"value": None, "error": type(error).__name__, "logs": ""}
    output = io.StringIO()
    saved_main = sys.modules["__main__"]
    sys.modules["__main__"] = module
    outcome: dict[str, Any] = {"value": None, "error": None}
    try:
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            try:
                exec(body, module.__dict__)
                value = eval(final, module.__dict__) if final is not None else None
                outcome["value"] = describe(value)
            except BaseException as error:
                outcome["error"] = type(error).__name__
    finally:
        sys.modules["__main__"] = saved_main
    outcome["logs"] = output.getvalue()
    return outcome


def _compiled(code: str) -> tuple[CodeType, CodeType | None]:
    """The snippet's statements, and its last expression apart (its value is the outcome's)."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    flags = _future_flags(tree)
    body = compile(tree, "<snippet>", "exec", flags=flags, dont_inherit=True)
    final = None
    if last is not None:
        final = compile(ast.Expression(last.value), "<snippet>", "eval", flags=flags, dont_inherit=True)
    return body, final


def run_plain(snippets: list[dict[str, str]], mode: str) -> dict[str, dict[str, Any]]:
    """Each snippet's outcome under plain CPython, by name: value, logs and exception type name."""
    shared = types.ModuleType("__main__")
    results = {}
    for snippet in snippets:
        module = shared if mode == "shared" else types.ModuleType("__main__")
        results[snippet["name"]] = _run_one(snippet["code"], module)
    return results


if __name__ == "__main__":
    request = json.load(sys.stdin)
    answer = run_plain(request["snippets"], request["mode"])
    with open(sys.argv[1], "w", encoding="utf-8") as out:
        json.dump(answer, out)
