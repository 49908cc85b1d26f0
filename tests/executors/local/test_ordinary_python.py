"""Ordinary Python, numpy and pandas run as CPython runs them, in a fresh process.

Each check runs where nothing warmed the libraries first: a new worker (the default), and a
new interpreter for the in-process mode, since an import made earlier in the same process
hides a lazy import that the sandbox would judge.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError

pytestmark = pytest.mark.timeout(120)

FIRST_BLOCKS = {
    "numpy-sum": (["numpy"], "import numpy as np\nint(np.arange(6).sum())", 15),
    "numpy-mean-max": (
        ["numpy.*"],
        "import numpy as np\na = np.arange(4.0)\n[float(a.mean()), float(a.max())]",
        [1.5, 3.0],
    ),
    "numpy-dtype-text": (["numpy"], "import numpy as np\nstr(np.arange(3).dtype)", "int64"),
    "pandas-describe": (["pandas"], "import pandas as pd\npd.Series([1, 2, 3]).describe()['mean']", 2.0),
}


def _in_a_fresh_interpreter(imports: list[str], code: str) -> object:
    script = (
        "import json, sys\n"
        "from codeward.executors import LocalExecutor\n"
        "executor = LocalExecutor(authorized_imports=json.loads(sys.argv[1]), isolation='in_process')\n"
        "print(json.dumps(executor.run(sys.argv[2]).output))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, json.dumps(imports), code], capture_output=True, text=True, timeout=100
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.parametrize(("imports", "code", "expected"), FIRST_BLOCKS.values(), ids=FIRST_BLOCKS.keys())
def test_the_first_block_of_a_fresh_process_runs_library_code_whole(imports, code, expected):
    pytest.importorskip(imports[0].split(".")[0])
    with LocalExecutor(authorized_imports=imports) as executor:  # a new worker: nothing warmed
        assert executor.run(code).output == expected
    assert _in_a_fresh_interpreter(imports, code) == expected


def test_a_librarys_own_imports_do_not_open_the_model_s():
    pytest.importorskip("numpy")
    with LocalExecutor(authorized_imports=["numpy"]) as executor:
        executor.run("import numpy as np\nnp.arange(3).sum()")  # numpy imported numpy._core._methods
        for code in ("import numpy._core._methods", "from numpy._core import _methods", "import os"):
            with pytest.raises(Exception, match="not allowed"):
                executor.run(code)


def test_annotations_are_the_objects_cpython_makes():
    code = (
        "import dataclasses, typing\n"
        "@dataclasses.dataclass\n"
        "class C:\n"
        "    x: int\n"
        "    items: list[int]\n"
        "    count: typing.ClassVar[int] = 0\n"
        "[f.name for f in dataclasses.fields(C)], [f.type is int for f in dataclasses.fields(C)]"
    )
    with LocalExecutor() as executor:
        assert executor.run(code).output == (["x", "items"], [True, False])


def _as_cpython_runs_it(code: str) -> object:
    """The value of `code`'s last expression under plain CPython."""
    tree = ast.parse(code)
    last = tree.body.pop()
    assert isinstance(last, ast.Expr)
    namespace: dict[str, object] = {"__name__": "__main__"}
    exec(compile(tree, "<cpython>", "exec", dont_inherit=True), namespace)  # not this file's future imports
    return eval(compile(ast.Expression(last.value), "<cpython>", "eval", dont_inherit=True), namespace)


AUGMENTED = {
    "every-operator-on-items": (
        "d = {'n': 7, 's': {1, 2}, 'text': 'a%sb'}\n"
        "d['n'] += 5\nd['n'] -= 2\nd['n'] *= 3\nd['n'] //= 4\nd['n'] %= 5\nd['n'] **= 3\n"
        "d['n'] <<= 2\nd['n'] >>= 1\nd['n'] &= 12\nd['n'] |= 3\nd['n'] ^= 5\nd['n'] /= 4\n"
        "d['s'] |= {3}\nd['s'] &= {2, 3}\nd['s'] ^= {5}\nd['s'] -= {2}\nd['text'] %= 'X'\n"
        "d"
    ),
    "every-operator-on-attributes": (
        "class Box:\n"
        "    def __init__(self):\n"
        "        self.value = 7\n"
        "    def grow(self, other):\n"
        "        self.value *= other\n"
        "        self.value **= 2\n"
        "        self.value %= 1000\n"
        "        self.value <<= 3\n"
        "        self.value >>= 1\n"
        "        self.value //= 3\n"
        "        self.value &= 255\n"
        "        self.value |= 1\n"
        "        self.value ^= 6\n"
        "        return self.value\n"
        "b = Box()\n"
        "[b.grow(3), b.grow(2)]"
    ),
    "side-effecting-keys-run-once": (
        "calls = []\n"
        "def key(k):\n"
        "    calls.append(k)\n"
        "    return k\n"
        "def box():\n"
        "    calls.append('box')\n"
        "    return boxes[0]\n"
        "class Box:\n"
        "    total = 1\n"
        "boxes = [Box()]\n"
        "d = {'a': 3}\n"
        "d[key('a')] *= 2\n"
        "d[key('a')] **= 2\n"
        "d[key('a')] += len(calls)\n"
        "box().total <<= 2\n"
        "box().total *= len(calls)\n"
        "d, boxes[0].total, calls"
    ),
    "the-item-is-read-before-the-right-side-runs": (
        "log = []\n"
        "def right():\n"
        "    log.append('right')\n"
        "    return 2\n"
        "d = {}\n"
        "try:\n"
        "    d['missing'] *= right()\n"
        "except KeyError as error:\n"
        "    log.append(repr(error))\n"
        "log"
    ),
    "in-place-as-cpython": (
        "shared = [1, 2]\n"
        "d = {'a': shared}\n"
        "d['a'] += [3]\n"
        "d['a'] *= 2\n"
        "class Acc:\n"
        "    def __init__(self):\n"
        "        self.seen = []\n"
        "    def __iadd__(self, other):\n"
        "        self.seen.append(other)\n"
        "        return self\n"
        "    def __imul__(self, other):\n"
        "        self.seen.append(-other)\n"
        "        return self\n"
        "acc = Acc()\n"
        "holder = {'acc': acc}\n"
        "holder['acc'] += 1\n"
        "holder['acc'] *= 2\n"
        "acc2 = acc\n"
        "acc2 += 5\n"
        "acc2 *= 6\n"
        "shared, d['a'] is shared, holder['acc'] is acc, acc.seen"
    ),
    "slices-and-nested-targets": (
        "grid = [[0] * 3 for _ in range(2)]\ngrid[1][2] += 5\ngrid[0][1:3] *= 2\ngrid[1][0] -= 1\ngrid"
    ),
}


@pytest.mark.parametrize("code", AUGMENTED.values(), ids=AUGMENTED.keys())
def test_augmented_assignment_of_items_and_attributes_runs_as_cpython(code):
    with LocalExecutor() as executor:
        assert executor.run(code).output == _as_cpython_runs_it(code)


def test_augmented_assignment_keeps_the_guards_of_the_plain_form():
    with LocalExecutor() as executor:
        for code, words in [
            ("d = {'a': [0] * 1000}\nd['a'] *= 10**6", "the sandbox allows"),
            ("class C:\n    pass\nc = C()\nc.s = 'ab'\nc.s *= 10**9", "the sandbox allows"),
            ("d = {'n': 10}\nd['n'] **= 10**7", "the sandbox allows"),
            ("d = {'n': 1}\nd['n'] <<= 10**9", "the sandbox allows"),
            ("import math\nmath.pi *= 2", "belongs to the host"),
            ("class C:\n    pass\nc = C()\nc._hidden *= 2", "not allowed"),
        ]:
            with pytest.raises(ExecutionError, match=words):
                executor.run(code)


PROTOCOL = (
    "import copy, math\n"
    "class V:\n"
    "    def __init__(self, x):\n"
    "        self.x = x\n"
    "    def __repr__(self):\n"
    "        return f'V({self.x!r})'\n"
    "    def __pow__(self, other):\n"
    "        return V(self.x ** other)\n"
    "    def __rpow__(self, other):\n"
    "        return V(other ** self.x)\n"
    "    def __ipow__(self, other):\n"
    "        self.x = self.x ** other + 1\n"
    "        return self\n"
    "    def __matmul__(self, other):\n"
    "        return self.x * other.x\n"
    "    def __and__(self, other):\n"
    "        return V(self.x & other)\n"
    "    def __or__(self, other):\n"
    "        return V(self.x | other)\n"
    "    def __xor__(self, other):\n"
    "        return V(self.x ^ other)\n"
    "    def __lshift__(self, other):\n"
    "        return V(self.x << other)\n"
    "    def __rshift__(self, other):\n"
    "        return V(self.x >> other)\n"
    "    def __rfloordiv__(self, other):\n"
    "        return V(other // self.x)\n"
    "    def __rmod__(self, other):\n"
    "        return V(other % self.x)\n"
    "    def __divmod__(self, other):\n"
    "        return ('divmod', self.x, other)\n"
    "    def __rdivmod__(self, other):\n"
    "        return ('rdivmod', other, self.x)\n"
    "    def __invert__(self):\n"
    "        return V(~self.x)\n"
    "    def __neg__(self):\n"
    "        return V(-self.x)\n"
    "    def __abs__(self):\n"
    "        return V(abs(self.x))\n"
    "    def __round__(self, ndigits=None):\n"
    "        return ('round', ndigits)\n"
    "    def __trunc__(self):\n"
    "        return 't'\n"
    "    def __floor__(self):\n"
    "        return 'f'\n"
    "    def __ceil__(self):\n"
    "        return 'c'\n"
    "    def __index__(self):\n"
    "        return self.x\n"
    "    def __complex__(self):\n"
    "        return complex(self.x, 1)\n"
    "    def __format__(self, spec):\n"
    "        return f'<{spec}:{self.x}>'\n"
    "    def __eq__(self, other):\n"
    "        return isinstance(other, V) and self.x == other.x\n"
    "    def __hash__(self):\n"
    "        return hash(self.x)\n"
    "    def __copy__(self):\n"
    "        return V(self.x + 100)\n"
    "class Seq:\n"
    "    def __init__(self, items):\n"
    "        self.items = list(items)\n"
    "    def __len__(self):\n"
    "        return len(self.items)\n"
    "    def __getitem__(self, i):\n"
    "        return self.items[i]\n"
    "    def __reversed__(self):\n"
    "        return iter(['reversed'])\n"
    "    def __contains__(self, item):\n"
    "        return item == 'anything'\n"
    "class Table(dict):\n"
    "    def __missing__(self, key):\n"
    "        return key * 2\n"
    "class Tagged:\n"
    "    def __init_subclass__(cls, tag='none', **kwargs):\n"
    "        super().__init_subclass__(**kwargs)\n"
    "        cls.tag = tag\n"
    "    def __class_getitem__(cls, item):\n"
    "        return (cls.__name__, item)\n"
    "class Child(Tagged, tag='child'):\n"
    "    pass\n"
    "v = V(3)\n"
    "w = v\n"
    "w **= 2\n"
    "repr([\n"
    "    V(2) ** 3, 2 ** V(3), V(2) @ V(5), V(6) & 3, V(6) | 1, V(6) ^ 3, V(1) << 4, V(16) >> 2,\n"
    "    17 // V(5), 17 % V(5), divmod(V(1), 2), divmod(2, V(1)), ~V(1), -V(1), abs(V(-4)),\n"
    "    round(V(1)), round(V(1), 2), math.trunc(V(1)), math.floor(V(1)), math.ceil(V(1)),\n"
    "    [10, 20, 30, 40][V(2)], 'ab' * V(2), [0] * V(3), bin(V(5)), complex(V(2)),\n"
    "    f'{V(7):>3}', format(V(8), 'x'), v is w, v, {V(1): 'one'}[V(1)], copy.copy(V(1)),\n"
    "    len(Seq('abc')), list(reversed(Seq('ab'))), 'anything' in Seq(''), Table()[21],\n"
    "    Child.tag, Tagged[int], tuple(Seq('xy')), range(10)[V(4)],\n"
    "])"
)


def test_classes_define_the_whole_operator_and_container_protocol():
    with LocalExecutor() as executor:
        assert executor.run(PROTOCOL).output == _as_cpython_runs_it(PROTOCOL)


@pytest.mark.parametrize(
    ("method", "reason"),
    [
        ("__del__", "outside the code's block"),
        ("__getattr__", "how attributes are looked up"),
        ("__setattr__", "how attributes are looked up"),
        ("__get__", "descriptors"),
        ("__set_name__", "descriptors"),
        ("__reduce__", "rebuild the object"),
        ("__setstate__", "rebuild the object"),
        ("__new__", "without __init__"),
        ("__instancecheck__", "isinstance()"),
        ("__fspath__", "path"),
    ],
)
def test_special_methods_that_stay_refused_say_why(method, reason):
    with LocalExecutor() as executor, pytest.raises(ExecutionError, match=reason):
        executor.run(f"class C:\n    def {method}(self, *args):\n        pass")


SCRIPTS = {
    "main-idiom": (
        "def main():\n"
        "    return 'ran'\n"
        "result = None\n"
        "if __name__ == '__main__':\n"
        "    result = main()\n"
        "def where():\n"
        "    return __name__\n"
        "class C:\n"
        "    module = __name__\n"
        "result, where(), C.module"
    ),
    "except-star": (
        "seen = []\n"
        "try:\n"
        "    raise ExceptionGroup('many', [ValueError(1), TypeError(2), ValueError(3)])\n"
        "except* ValueError as group:\n"
        "    seen.append(('value', [str(e) for e in group.exceptions]))\n"
        "except* TypeError as group:\n"
        "    seen.append(('type', [str(e) for e in group.exceptions]))\n"
        "try:\n"
        "    raise KeyError('k')\n"
        "except* LookupError as group:\n"
        "    seen.append(('naked', type(group).__name__, repr(group.exceptions[0])))\n"
        "seen"
    ),
}


@pytest.mark.parametrize("code", SCRIPTS.values(), ids=SCRIPTS.keys())
def test_blocks_run_as_a_script_runs(code):
    with LocalExecutor() as executor:
        assert executor.run(code).output == _as_cpython_runs_it(code)


def test_only_dunder_name_is_readable_as_a_name():
    with LocalExecutor() as executor:
        for code in ("__file__", "__builtins__", "__name__x = 1", "__name__ = 'x'"):
            with pytest.raises(ExecutionError, match="not allowed"):
                executor.run(code)


def test_except_star_cannot_hold_the_sandboxs_limits():
    with LocalExecutor(max_operations=50_000) as executor:
        for code in (
            "try:\n    while True:\n        pass\nexcept* BaseException:\n    pass",
            "try:\n    while True:\n        pass\nexcept* BaseException:\n    pass\nfinally:\n    x = 1",
            "while True:\n    try:\n        pass\n    except* Exception:\n        pass",
        ):
            with pytest.raises(ExecutionError, match="operations"):
                executor.run(code)


@pytest.mark.parametrize(
    ("code", "words"),
    [
        ("import asyncio\nasync def f():\n    return 1\nasyncio.run(f())", "async code is not supported"),
        ("from __future__ import annotations", "from __future__ imports are not supported"),
    ],
)
def test_what_stays_refused_says_why(code, words):
    with LocalExecutor(authorized_imports=["asyncio"]) as executor, pytest.raises(ExecutionError, match=words):
        executor.run(code)


TYPE_HINTS = (
    "import dataclasses, typing\n"
    "class Base:\n"
    "    x: int\n"
    "    nothing: None\n"
    "    items: list[int]\n"
    "@dataclasses.dataclass\n"
    "class Child(Base):\n"
    "    x: float = 0.0\n"
    "    tagged: typing.Annotated[int, 'meta'] = 0\n"
    "    kind: typing.Literal['a', 'b'] = 'a'\n"
    "    maybe: typing.Optional[dict[str, int]] = None\n"
    "def f(a: int, b: 'int | None' = None, *rest: str) -> None:\n"
    "    pass\n"
    "def g(a: int, *rest: str, **named: float) -> list[str]:\n"
    "    return []\n"
    "repr([\n"
    "    typing.get_type_hints(Child),\n"
    "    typing.get_type_hints(Child, include_extras=True)['tagged'],\n"
    "    typing.get_type_hints(g),\n"
    "    typing.get_type_hints(Child(1.0)),\n"
    "    typing.get_type_hints(len),\n"
    "])"
)


def test_get_type_hints_reads_the_code_s_own_annotations():
    with LocalExecutor() as executor:
        assert executor.run(TYPE_HINTS).output == _as_cpython_runs_it(TYPE_HINTS)


@pytest.mark.parametrize(
    "annotation",
    ["'int'", "list['Node']", "typing.Optional['Node']", "dict[str, list['Node']]", "typing.Callable[['Node'], int]"],
)
def test_get_type_hints_refuses_to_evaluate_strings(annotation):
    code = f"import typing\nclass Node:\n    pass\ndef f(x: {annotation}):\n    pass\ntyping.get_type_hints(f)"
    with LocalExecutor() as executor, pytest.raises(ExecutionError, match="which it would evaluate as code") as info:
        executor.run(code)
    assert info.value.error_type == "SandboxViolation"


def test_guarded_builtin_types_are_still_the_types():
    code = (
        "class Blob(bytes):\n"
        "    pass\n"
        "data, r = b'ab', range(3)\n"
        "(isinstance(data, bytes), isinstance(data, (bytes, bytearray)), type(data) == bytes,\n"
        " isinstance(r, range), isinstance(int, type), type(int) == type, isinstance(Blob(b'x'), bytes),\n"
        " bytes.fromhex('4142'), bytearray.fromhex('ff'), repr(bytes), type(data) is bytes, type(r) is range,\n"
        " type(data).__name__, type(int).__name__)"
    )
    expected = (
        True,
        True,
        True,
        True,
        True,
        True,
        True,
        b"AB",
        bytearray(b"\xff"),
        "<class 'bytes'>",
        True,
        True,
        "bytes",
        "type",
    )
    with LocalExecutor() as executor:
        assert executor.run(code).output == expected
        with pytest.raises(Exception, match="metaclasses are not available"):
            executor.run("class Meta(type):\n    pass")
        with pytest.raises(Exception) as info:
            executor.run("bytes(10**12)")
        assert info.value.error_type == "SizeLimitError"  # the size cap's own refusal, not the worker's memory cap
        with pytest.raises(Exception) as info:
            executor.run("type(b'')(10**12)")  # the type a value gives is the guarded one too
        assert info.value.error_type == "SizeLimitError"
