"""Ordinary Python, numpy and pandas run as CPython runs them, in a fresh process.

Each check runs where nothing warmed the libraries first: a new worker (the default), and a
new interpreter for the in-process mode, since an import made earlier in the same process
hides a lazy import that the sandbox would judge.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from codeward.executors import LocalExecutor

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
