"""Programs made up by hypothesis (`program_grammar.py`) run in the local sandbox as plain CPython runs them.

Each generated program is a few agent-style blocks. CPython runs them with ``exec`` in a fresh
module of this process; the sandbox runs them in a worker process and in process, each mode one
executor for the whole run (the programs' names carry a prefix of their own, so they share it
without sharing state). Block by block, the printed output (stdout and stderr together), the
exception's type and message (the last line of its traceback) and the value of the last
expression must be CPython's. The run is reproducible (``derandomize``) and its size is fixed
(`PROGRAMS`); a difference is shown with the two outcomes, its program as generated (shrunk to a
small one with CODEWARD_GENERATED_SHRINK=1).

The grammar leaves out what the sandbox refuses on purpose (names starting with ``_``, the
names ``KeyboardInterrupt`` and ``SystemExit``, ``functools.singledispatch``: README, local).
"""

from __future__ import annotations

import ast
import contextlib
import io
import itertools
import os
import sys
import time
import types
import warnings
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from hypothesis import HealthCheck, Phase, given, settings

from codeward.executors import ExecutionError, LocalExecutor, SandboxError
from codeward.executors.codec import CodecWarning
from tests.executors.local.differential_corpus import describe
from tests.executors.local.program_grammar import Program, programs, with_prefix

pytestmark = pytest.mark.timeout(600)

#: Programs a run checks; CODEWARD_GENERATED_PROGRAMS sets another number (a longer hunt).
PROGRAMS = int(os.environ.get("CODEWARD_GENERATED_PROGRAMS", "2500"))

_prefixes = itertools.count()


def _compiled(code: str) -> tuple[types.CodeType, types.CodeType | None]:
    """The block's statements, and its last expression apart: its value is the block's, as in the sandbox."""
    tree = ast.parse(code)
    last = tree.body.pop() if tree.body and isinstance(tree.body[-1], ast.Expr) else None
    body = compile(tree, "<block>", "exec", dont_inherit=True)
    final = None if last is None else compile(ast.Expression(last.value), "<block>", "eval", dont_inherit=True)
    return body, final


def cpython_outcomes(blocks: list[str]) -> list[dict[str, Any]]:
    """Each block's outcome under plain CPython, the blocks run in one fresh ``__main__`` module."""
    module = types.ModuleType("__main__")
    outcomes = []
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = module  # dataclasses look their class's module up there
    try:
        for block in blocks:
            body, final = _compiled(block)
            output = io.StringIO()
            outcome: dict[str, Any] = {"value": None, "error": None, "message": None}
            with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
                try:
                    exec(body, module.__dict__)
                    outcome["value"] = describe(eval(final, module.__dict__) if final is not None else None)
                except Exception as error:
                    outcome["error"] = type(error).__name__
                    text = str(error)  # the type's bare name, as the sandbox words it (json.decoder.JSONDecodeError)
                    outcome["message"] = f"{type(error).__name__}: {text}" if text else type(error).__name__
            outcome["logs"] = output.getvalue()
            outcomes.append(outcome)
    finally:
        sys.modules["__main__"] = saved
    return outcomes


def sandbox_outcomes(executor: LocalExecutor, blocks: list[str]) -> list[dict[str, Any]]:
    outcomes = []
    for block in blocks:
        outcome: dict[str, Any] = {"value": None, "error": None, "message": None}
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", CodecWarning)
                result = executor.run(block)
            outcome["value"] = describe(result.output)
            outcome["logs"] = result.logs
        except ExecutionError as error:
            outcome["error"] = error.error_type or type(error).__name__
            lead = error.message.removesuffix(error.traceback).removesuffix("\n")  # the traceback follows the lead
            outcome["message"] = lead or error.message
            outcome["logs"] = error.logs
        except SandboxError as error:  # the worker died: never what CPython does
            outcome.update(error=f"SandboxError: {error.message}", logs=error.logs)
        outcomes.append(outcome)
    return outcomes


def _same(plain: dict[str, Any], boxed: dict[str, Any]) -> bool:
    if (plain["error"], plain["message"], plain["logs"]) != (boxed["error"], boxed["message"], boxed["logs"]):
        return False
    return plain["error"] is not None or _same_value(plain["value"], boxed["value"])


def _same_value(plain: dict[str, Any], boxed: dict[str, Any]) -> bool:
    """Equal, or in the codec's documented form: a value that cannot leave the worker as data
    (an int subclass of the code's) arrives as its repr, a dataclass of the code's as its fields."""
    if (plain["type"], plain["repr"]) == (boxed["type"], boxed["repr"]):
        return True
    if plain["canonical"] is not None and plain["canonical"] == boxed["canonical"]:
        return True
    if boxed["type"] == "str" and plain["type"] != "str" and boxed["repr"] == repr(plain["repr"]):
        return True
    return plain["carried"] is not None and _same_value(plain["carried"], boxed)


#: Sends blocks to the worker process while this process runs them in process and under CPython.
_sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix="generated-programs")


def check(program: Program, sandboxes: dict[str, LocalExecutor]) -> None:
    blocks = with_prefix(program, f"p{next(_prefixes)}_")
    in_worker = {
        mode: _sender.submit(sandbox_outcomes, executor, blocks)
        for mode, executor in sandboxes.items()
        if executor.isolation == "process"
    }
    plain = cpython_outcomes(blocks)
    for mode, executor in sandboxes.items():
        boxed = in_worker[mode].result() if mode in in_worker else sandbox_outcomes(executor, blocks)
        for index, (ours, theirs) in enumerate(zip(plain, boxed, strict=True)):
            assert _same(ours, theirs), (
                f"block {index + 1} of this program differs ({mode}):\n{program}\n"
                f"  CPython: {ours}\n  sandbox: {theirs}"
            )


@pytest.fixture(scope="module")
def sandboxes(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, LocalExecutor]]:
    cwd = os.getcwd()
    os.chdir(tmp_path_factory.mktemp("generated"))
    try:
        with LocalExecutor() as worker, LocalExecutor(isolation="in_process") as host:
            yield {"worker process": worker, "in process": host}
    finally:
        os.chdir(cwd)


_checked: list[float] = []


#: Shrinking a difference to a small program runs the three sandboxes again and again: on a loaded
#: machine longer than the test may take, and a timeout inside hypothesis does not end it. A run then
#: shows the program as generated; CODEWARD_GENERATED_SHRINK=1 shrinks it (a hunt, a developer's run).
SHRINK = os.environ.get("CODEWARD_GENERATED_SHRINK") == "1"
PHASES = tuple(phase for phase in Phase if SHRINK or phase is not Phase.shrink)


@settings(
    max_examples=PROGRAMS,
    derandomize=True,
    deadline=None,
    phases=PHASES,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(program=programs())
def test_generated_programs_run_as_cpython_runs_them(program: Program, sandboxes: dict[str, LocalExecutor]) -> None:
    _checked.append(time.perf_counter())
    check(program, sandboxes)


def test_the_run_checked_the_programs_it_promises() -> None:
    """The budget is real: the run above checked `PROGRAMS` programs (fewer only if it found a difference)."""
    if len(_checked) < 2:
        pytest.skip("run with the generated-programs test")
    seconds = _checked[-1] - _checked[0]
    print(f"\n{len(_checked)} generated programs checked in {seconds:.1f} s: {len(_checked) / seconds:.0f} a second")
    assert len(_checked) == PROGRAMS


#: Differences the generator found, each as the small program it shrank to (or one its finding
#: led to), now fixed: each must keep running as CPython runs it.
FOUND = {
    "huge-range": "r = range(10 ** 20)\nprint(r[5], r[-1], 10 ** 19 in r, r)\nrange(2 ** 64)[2 ** 63]\n",
    "bare-exception-message": "raise ValueError\n",
    "empty-exception-message": "raise KeyError()\n",
    "bare-assert": "ZZvalues = []\nassert ZZvalues\n",
    "format-index-out-of-range": "try:\n    '{}{}'.format(1)\nexcept IndexError as e:\n    print(e)\n'{1}'.format(0)\n",
    "from-import-of-a-missing-name": (
        "try:\n    from math import tau, nothing_here\nexcept ImportError as e:\n    print(type(e).__name__, e.name)\n"
    ),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_what_the_generator_found_runs_as_cpython_runs_it(name: str, sandboxes: dict[str, LocalExecutor]) -> None:
    check(Program([FOUND[name]]), sandboxes)


def test_the_check_notices_a_program_the_sandbox_runs_differently(sandboxes: dict[str, LocalExecutor]) -> None:
    """The control: a program the sandbox refuses on purpose (a name starting with ``_``) fails the check."""
    with pytest.raises(AssertionError, match="CodeRefused"):
        check(Program(["_hidden = 1\nprint(_hidden)\n"]), sandboxes)
    check(Program(["ZZshown = 1\nprint(ZZshown)\nZZshown\n"]), sandboxes)
