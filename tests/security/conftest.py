"""The attack harness: every attack is shown to work without the sandbox, then to be refused by it.

`attack(code, ...)` first runs the payload with no sandbox (`Unsandboxed`): it must
do what it claims there (the control), or the test is broken and says so. Then
it runs in the local executor, once in each isolation mode (a worker process, and
the host's own process), and must be refused *by the sandbox*, with one of its own
refusals, leaving the canary untouched and the executor usable. In a worker, the
worker's death (a `SandboxError`) is a refusal too: what killed it stayed in it.

With CODEWARD_SECURITY_SANDBOX=off the sandbox is swapped for `Unsandboxed` and
the controls are skipped: every attack test must then fail, which
`test_the_suite_notices_a_missing_sandbox` checks.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError, Executor, SandboxError
from codeward.platform.tools import FinalAnswerTool
from tests.security.unsandboxed import (
    ALLOWANCE,
    CONTROL_SECONDS,
    EXHAUSTED_SECONDS,
    MEMORY_ROOM,
    HostHarmed,
    Unsandboxed,
)
from tests.timing import busy_seconds

SANDBOX_OFF = os.environ.get("CODEWARD_SECURITY_SANDBOX") == "off"

#: What the code is meant to do unsandboxed: complete (and write the canary if it names it),
#: exhaust the control's time or memory, stop the process it runs in, or crash it. An attack on an
#: object only the sandbox makes passes instead a function that shows, on the host, that
#: the object holds what the attack is after.
CONTROLS = ("works", "exhausts", "stops", "crashes")

#: The local executor's own refusals: error types only the sandbox reports, and the limits
#: that it reports under an ordinary type, told apart by the words that name the limit.
SANDBOX_REFUSALS = frozenset({"SandboxViolation", "CodeRefused", "SizeLimitError", "OperationLimitExceeded"})
NAMED_LIMITS = {
    "TimeoutError": "limit and was stopped",
    "MemoryError": "grew memory by more than",
    "NameError": "is not available in this sandbox",
}


def refused_by_sandbox(error: ExecutionError | SandboxError) -> bool:
    if isinstance(error, SandboxError):
        return True
    if error.error_type in SANDBOX_REFUSALS:
        return True
    words = NAMED_LIMITS.get(error.error_type or "")
    return words is not None and words in error.message


def sandbox(**options: Any) -> Executor:
    """The executor under attack: the local executor, or nothing at all with the switch off (where an
    attack that hangs fails as soon as it shows, as the suite only asks whether each attack fails)."""
    return Unsandboxed(hung_after=EXHAUSTED_SECONDS, **options) if SANDBOX_OFF else LocalExecutor(**options)


@pytest.fixture
def canary(tmp_path: Path) -> Path:
    """A file attacks try to create; its absence shows the host was untouched."""
    return tmp_path / "pwned"


#: Each attack runs in both isolation modes; with the sandbox off there is only the one way.
ISOLATIONS = ("off",) if SANDBOX_OFF else ("process", "in_process")


#: For attacks that need a host object as a variable: only the host's own process can hold one
#: (the codec refuses to send it to a worker).
in_process_only = pytest.mark.parametrize("isolation", ["off"] if SANDBOX_OFF else ["in_process"])


@pytest.fixture(params=ISOLATIONS)
def isolation(request: pytest.FixtureRequest) -> str:
    mode: str = request.param
    return mode


@pytest.fixture
def attack(canary: Path, isolation: str) -> Callable[..., ExecutionError | SandboxError]:
    """`attack(code, control="works", **options)`, with CANARY in `code` standing for the canary path."""
    if not SANDBOX_OFF:
        return lambda code, **options: run_attack(code, canary, **{"isolation": isolation, **options})
    return lambda code, **options: run_attack(code, canary, **options)


def run_attack(
    code: str,
    canary: Path,
    *,
    control: str | Callable[[], bool] = "works",
    tools: bool = False,
    variables: dict[str, Any] | None = None,
    before: str | Sequence[str] | None = None,
    replace: dict[str, str] | None = None,
    **options: Any,
) -> ExecutionError | SandboxError:
    """Run the control, then the attack; return the sandbox's refusal for further checks.

    `tools=True` gives the code the final_answer tool to attack; `variables` are sent
    with send_variables; `before` runs (and must succeed) as an earlier block, or each of a
    list of blocks in order; `replace` maps more placeholders to text.
    """
    assert callable(control) or control in CONTROLS, f"control must be one of {CONTROLS}, or a function"
    earlier = [before] if isinstance(before, str) else list(before or ())
    for placeholder, text in {"CANARY": str(canary), **(replace or {})}.items():
        code = code.replace(placeholder, text)
        earlier = [block.replace(placeholder, text) for block in earlier]
    setup = (tools, variables or {}, earlier)
    if callable(control):
        assert control(), "broken attack test: the object attacked does not hold what the attack is after"
    elif not SANDBOX_OFF:
        _check_control(code, canary, control, setup)
    options.setdefault("timeout_seconds", 5)
    with sandbox(**options) as executor:
        _prepare(executor, setup)
        with pytest.raises((ExecutionError, SandboxError)) as info:
            executor.run(code)
        if isinstance(info.value, SandboxError):
            assert options.get("isolation") == "process", "only a worker can die and be replaced"
        assert executor.run("1 + 1").output == 2, "the executor must stay usable after an attack"
    assert not canary.exists(), "the attack reached the host"
    if control not in ("stops", "crashes"):  # for these, that the host is still here to see the error is the proof
        refusal = info.value
        assert refused_by_sandbox(refusal), f"not refused by the sandbox: {refusal.error_type}: {refusal.message}"
    return info.value


def _prepare(executor: Executor, setup: tuple[bool, dict[str, Any], list[str]]) -> None:
    tools, variables, before = setup
    if tools:
        executor.send_tools({"final_answer": FinalAnswerTool()})
    executor.send_variables(variables)
    for block in before:
        executor.run(block)


def _check_control(code: str, canary: Path, control: str, setup: tuple[bool, dict[str, Any], list[str]]) -> None:
    """The payload must do its harm with no sandbox; a control that fails is a broken attack test."""
    outcome: BaseException | None = None
    # A hang is the harm an exhausting payload may do; any other control must end, if slowly on a busy machine.
    hung_after = EXHAUSTED_SECONDS if control == "exhausts" else busy_seconds(CONTROL_SECONDS)
    with Unsandboxed(hung_after=hung_after, memory_room=ALLOWANCE if control == "exhausts" else MEMORY_ROOM) as plain:
        _prepare(plain, setup)
        try:
            plain.run(code)
        except (ExecutionError, HostHarmed) as error:
            outcome = error
    wrote = canary.exists()
    canary.unlink(missing_ok=True)
    broken = f"broken attack test: unsandboxed, the payload did not {control!r}: "
    if control == "works":
        assert outcome is None, broken + f"it failed with {outcome}"
        assert wrote or str(canary) not in code, broken + "it named the canary but left it alone"
    elif control == "exhausts":
        exhausted = isinstance(outcome, HostHarmed) or (
            isinstance(outcome, ExecutionError) and outcome.error_type == "MemoryError"
        )
        assert exhausted, broken + f"it ended with {outcome!r}"
    else:
        words = "stopped the process" if control == "stops" else "died"
        assert isinstance(outcome, HostHarmed) and words in outcome.how, broken + f"got {outcome!r}"
