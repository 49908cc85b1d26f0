"""The local sandbox against plain CPython `exec`, snippet by snippet (`differential_corpus.py`).

For each agent-style snippet, the sandbox's value, printed output (stdout and stderr together)
and exception type must equal what plain CPython gives for the same code in the same run, or
the snippet documents a refusal, which the sandbox must then raise exactly (and CPython not).
Nothing is compared with a written expectation: CPython runs the corpus in a subprocess of its
own, each snippet in a module of its own ("fresh") and the whole corpus in one module ("shared").

The sandbox runs the corpus three ways:
- each snippet in a new `LocalExecutor` (a new worker: nothing warmed, the first numpy or
  pandas block included), against CPython's fresh run;
- the whole corpus in order in one executor, against CPython's shared run (state effects);
- in process, in a fresh interpreter: every library snippet in an interpreter of its own (its
  first block must work there too), the other snippets each in a new in-process executor of one
  interpreter.

A value matches when its type name and repr are CPython's, or, for plain data, its canonical
form is (set order is hash order, which differs between processes); a value that cannot leave
the worker as data arrives as its repr text, and a dataclass or namedtuple whose class the host
has not loaded (a snippet's own, at any depth) as its fields or a plain tuple: the codec's
documented forms, each compared with CPython's value.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import pytest

import codeward
from codeward.executors import LocalExecutor
from tests.executors.local.differential_corpus import CORPUS, Snippet, sandbox_outcome

pytestmark = pytest.mark.timeout(600)

CORPUS_FILE = Path(__file__).with_name("differential_corpus.py")
LIBRARIES = ("numpy", "pandas")
AVAILABLE = [s for s in CORPUS if all(find_spec(m.split(".")[0]) for m in s.authorized_imports)]
ALL_IMPORTS = sorted({name for s in AVAILABLE for name in s.authorized_imports})
LIBRARY_SNIPPETS = [s for s in AVAILABLE if set(s.authorized_imports) & set(LIBRARIES)]
PYTHON_SNIPPETS = [s for s in AVAILABLE if s not in LIBRARY_SNIPPETS]

#: Divergences found by this test and not yet fixed, by snippet name: what differs. Each holds
#: in every mode; marked strict, a fix makes its test fail until the entry is removed.
KNOWN_DIVERGENCES: dict[str, str] = {
    # Found by this test.
    "singledispatch": "functools.singledispatch raises SandboxViolation (refused in guards.py; README, local)",
    "keyboard-interrupt-name": (
        "KeyboardInterrupt (and SystemExit) are not builtins in the sandbox (NameError; guards.py keeps them out "
        "so the code cannot raise them; not in the README), so `except KeyboardInterrupt:` or naming it fails"
    ),
}


def _params(snippets: list[Snippet]) -> list[Any]:
    params = []
    for snippet in snippets:
        reason = KNOWN_DIVERGENCES.get(snippet.name)
        marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
        params.append(pytest.param(snippet, id=snippet.name, marks=marks))
    return params


def _environment() -> dict[str, str]:
    """The environment for subprocesses: this checkout's codeward first on the path."""
    source = str(Path(codeward.__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (source, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path}


def _cpython(mode: str) -> dict[str, dict[str, Any]]:
    request = {"mode": mode, "snippets": [{"name": s.name, "code": s.code} for s in AVAILABLE]}
    with tempfile.TemporaryDirectory() as folder:
        answer = Path(folder) / "outcomes.json"
        done = subprocess.run(
            [sys.executable, str(CORPUS_FILE), str(answer)],
            input=json.dumps(request),
            capture_output=True,
            text=True,
            timeout=300,
            cwd=folder,
        )
        assert done.returncode == 0, done.stderr
        return json.loads(answer.read_text(encoding="utf-8"))


IN_PROCESS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from differential_corpus import CORPUS, sandbox_outcome
from codeward.executors import LocalExecutor

names = json.loads(sys.argv[3])
results = {}
for snippet in CORPUS:
    if snippet.name in names:
        with LocalExecutor(authorized_imports=list(snippet.authorized_imports), isolation="in_process") as executor:
            results[snippet.name] = sandbox_outcome(executor, snippet.code)
with open(sys.argv[2], "w", encoding="utf-8") as out:
    json.dump(results, out)
"""


def _in_fresh_interpreter(snippets: list[Snippet]) -> dict[str, dict[str, Any]]:
    """In-process sandboxes in a new interpreter, one executor a snippet, in corpus order."""
    with tempfile.TemporaryDirectory() as folder:
        answer = Path(folder) / "outcomes.json"
        names = json.dumps([s.name for s in snippets])
        done = subprocess.run(
            [sys.executable, "-c", IN_PROCESS, str(CORPUS_FILE.parent), str(answer), names],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=folder,
            env=_environment(),
        )
        assert done.returncode == 0, done.stderr
        return json.loads(answer.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def cpython_fresh() -> dict[str, dict[str, Any]]:
    return _cpython("fresh")


@pytest.fixture(scope="module")
def cpython_shared() -> dict[str, dict[str, Any]]:
    return _cpython("shared")


@pytest.fixture(scope="module")
def in_sequence() -> dict[str, dict[str, Any]]:
    with tempfile.TemporaryDirectory() as folder:
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            with LocalExecutor(authorized_imports=ALL_IMPORTS) as executor:
                return {s.name: sandbox_outcome(executor, s.code) for s in AVAILABLE}
        finally:
            os.chdir(cwd)


@pytest.fixture(scope="module")
def in_process() -> dict[str, dict[str, Any]]:
    batches = [[s] for s in LIBRARY_SNIPPETS] + [PYTHON_SNIPPETS]
    results: dict[str, dict[str, Any]] = {}
    with ThreadPoolExecutor(max_workers=2) as pool:
        for outcome in pool.map(_in_fresh_interpreter, batches):
            results.update(outcome)
    return results


def _same_value(plain: dict[str, Any], boxed: dict[str, Any]) -> bool:
    if plain["type"] == boxed["type"] and plain["repr"] == boxed["repr"]:
        return True
    if plain["canonical"] is not None and plain["canonical"] == boxed["canonical"]:
        return True
    if boxed["type"] == "str" and plain["type"] != "str" and boxed["repr"] == repr(plain["repr"]):
        return True  # a value that cannot leave the worker as data arrives as its repr
    return plain["carried"] is not None and _same_value(plain["carried"], boxed)


def _check(snippet: Snippet, plain: dict[str, Any], boxed: dict[str, Any]) -> None:
    shown = f"{snippet.name}\n  CPython: {plain}\n  sandbox: {boxed}"
    if snippet.refusal is not None:
        assert boxed["error"] == snippet.refusal.error_type, f"refusal expected ({snippet.refusal.reason}): {shown}"
        assert plain["error"] != snippet.refusal.error_type, f"CPython fails the same way; not a refusal: {shown}"
        return
    assert boxed["error"] == plain["error"], f"exception type differs: {shown}"
    assert boxed["logs"] == plain["logs"], f"printed output differs: {shown}"
    if plain["error"] is None:
        assert _same_value(plain["value"], boxed["value"]), f"value differs: {shown}"


@pytest.mark.parametrize("snippet", _params(AVAILABLE))
def test_each_snippet_in_a_new_worker_runs_as_cpython_runs_it(snippet: Snippet, cpython_fresh, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with LocalExecutor(authorized_imports=list(snippet.authorized_imports)) as executor:
        boxed = sandbox_outcome(executor, snippet.code)
    _check(snippet, cpython_fresh[snippet.name], boxed)


@pytest.mark.parametrize("snippet", _params(AVAILABLE))
def test_the_corpus_in_one_worker_runs_as_cpython_runs_it_in_one_module(snippet: Snippet, cpython_shared, in_sequence):
    _check(snippet, cpython_shared[snippet.name], in_sequence[snippet.name])


@pytest.mark.parametrize("snippet", _params(AVAILABLE))
def test_in_process_in_a_fresh_interpreter_runs_as_cpython_runs_it(snippet: Snippet, cpython_fresh, in_process):
    _check(snippet, cpython_fresh[snippet.name], in_process[snippet.name])


def test_the_corpus_covers_every_construct_and_keeps_refusals_few():
    assert len(CORPUS) >= 150
    assert len({s.name for s in CORPUS}) == len(CORPUS)
    refusals = [s for s in CORPUS if s.refusal is not None]
    assert len(refusals) <= len(CORPUS) // 15
    assert all(s.refusal.error_type and s.refusal.reason for s in refusals)
    assert {"numpy", "pandas"} <= {name for s in CORPUS for name in s.authorized_imports}
    assert set(KNOWN_DIVERGENCES) <= {s.name for s in CORPUS}
    assert not {s.name for s in CORPUS if s.refusal} & set(KNOWN_DIVERGENCES)
