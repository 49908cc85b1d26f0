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
    exec(compile(tree, "<cpython>", "exec"), namespace)
    return eval(compile(ast.Expression(last.value), "<cpython>", "eval"), namespace)


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
