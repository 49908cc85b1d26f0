"""Host objects inside the containers the host gives: every route out of a container gives what an
item read gives.

`fs[0]` refuses a function of the machine wherever it was found; iteration, unpacking, ``match``
and the containers' own methods run in C and never meet a guard. So what the host gives (variables,
a tool's result) is vetted inside its containers as it crosses: in process, a `SandboxViolation`
that names the place; from a worker, the codec refuses to carry a function at all.
"""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeward.executors.base import ExecutionError
from codeward.executors.codec import CodecError
from codeward.executors.local.imports import SandboxViolation
from codeward.tools import FunctionTool
from tests.security.conftest import ISOLATIONS, sandbox
from tests.security.unsandboxed import Unsandboxed

pytestmark = pytest.mark.timeout(60)

#: A careless host's variables: a machine function inside containers, never as a variable itself.
HANDED = {
    "fs": [shutil.copy],
    "pair": (1, shutil.copy),
    "table": {"copy": shutil.copy},
    "nested": {"steps": [("copy", shutil.copy)]},
    "keys": {shutil.copy: "copy"},
}
COPY = f"({__file__!r}, 'CANARY')"

#: Each route takes the function out of a container without an item read.
ROUTES = {
    "for": "for f in fs:\n    f" + COPY,
    "unpacking": "one, = fs\none" + COPY,
    "starred": "_, *rest = pair\nrest[0]" + COPY,
    "next-iter": "next(iter(fs))" + COPY,
    "dict-get": "table.get('copy')" + COPY,
    "dict-values": "list(table.values())[0]" + COPY,
    "match": "match fs:\n    case [f]:\n        f" + COPY,
    "max-key": "max(fs, key=id)" + COPY,
    "reduce": "import functools\nfunctools.reduce(lambda a, b: b, fs)" + COPY,
    "nested-loop": "for name, f in nested['steps']:\n    f" + COPY,
    "dict-keys": "for f in keys:\n    f" + COPY,
}


def _route(code: str, canary: Path) -> str:
    return code.replace("CANARY", str(canary))


@pytest.mark.parametrize("isolation", ISOLATIONS)
@pytest.mark.parametrize("code", ROUTES.values(), ids=ROUTES.keys())
def test_a_function_inside_a_given_container_never_reaches_the_code(code, isolation, canary):
    if isolation != "off":
        with Unsandboxed() as control:
            control.send_variables(HANDED)
            control.run(_route(code, canary))
        assert canary.exists(), "control: the route reaches the function without a sandbox"
        canary.unlink()
    options: dict[str, Any] = {} if isolation == "off" else {"isolation": isolation}
    with sandbox(authorized_imports=["functools"], **options) as executor:
        with pytest.raises((SandboxViolation, CodecError)) as refused:
            executor.send_variables(HANDED)
        if isolation == "in_process":
            assert "cannot be given to the code" in str(refused.value)
            assert "belongs to the module 'shutil'" in str(refused.value)
        with pytest.raises(ExecutionError):  # nothing was sent
            executor.run(_route(code, canary))
        assert executor.run("1 + 1").output == 2
    assert not canary.exists()


def test_the_refusal_names_the_place(canary):
    """The user is told which variable, and where in it, holds what the code may not have."""
    if ISOLATIONS == ("off",):
        pytest.fail("no sandbox: nothing refuses the container")
    refusal = r"the variable 'nested'\['steps'\]\[0\]\[1\] cannot be given"
    with sandbox(isolation="in_process") as executor, pytest.raises(SandboxViolation, match=refusal):
        executor.send_variables({"nested": HANDED["nested"]})


@contextlib.contextmanager
def _given(tool: FunctionTool, code: str, isolation: str, canary: Path) -> Iterator[Any]:
    """The executor under attack with `tool` sent, after the control: without a sandbox, `code`
    reaches the function through the tool and writes the canary."""
    if isolation != "off":
        with Unsandboxed() as control:
            control.send_tools({tool.name: tool})
            control.run(code)
        assert canary.exists(), "control: the tool hands over the function without a sandbox"
        canary.unlink()
    options: dict[str, Any] = {} if isolation == "off" else {"isolation": isolation}
    with sandbox(**options) as executor:
        executor.send_tools({tool.name: tool})
        yield executor


def helpers() -> list:
    """A host tool that returns functions of the machine."""
    return [shutil.copy]


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_tools_result_is_vetted_inside_its_containers(isolation, canary):
    code = _route("for f in helpers():\n    f" + COPY, canary)
    with _given(FunctionTool(helpers), code, isolation, canary) as executor:
        with pytest.raises(ExecutionError) as refused:
            executor.run(code)
        if isolation == "in_process":
            assert refused.value.error_type == "SandboxViolation"
            assert "the result of the tool 'helpers'[0] cannot be given" in refused.value.message
        assert executor.run("1 + 1").output == 2
    assert not canary.exists()


def test_a_module_given_alone_or_in_a_container_keeps_its_reads_guarded():
    """A module is given as it is, and every read of its attributes is guarded: unsandboxed, the
    module's own imports (`json.codecs`) are reachable through either route."""
    import json

    with sandbox(isolation="in_process") if ISOLATIONS != ("off",) else Unsandboxed() as executor:
        executor.send_variables({"alone": json, "mods": [json]})
        assert executor.run("alone.dumps([1])").output == "[1]"
        for route in ("alone.codecs", "for m in mods:\n    m.codecs", "[m.codecs for m in mods]"):
            with pytest.raises(ExecutionError):  # the raw module's imports stay out of reach
                executor.run(route)


def failing_step(step: str) -> str:
    """A host tool whose error carries what it was working with.

    Args:
        step: the step to run
    """
    raise LookupError("unknown step", step, [shutil.copy])


@pytest.mark.parametrize("isolation", ISOLATIONS)
def test_a_tools_exception_reaches_the_code_as_it_would_from_a_worker(isolation, canary):
    """The exception's arguments are the host's objects: only plain ones cross, as from a worker."""
    code = _route(
        "try:\n    failing_step('x')\nexcept LookupError as e:\n    for f in e.args[2]:\n        f" + COPY, canary
    )
    with _given(FunctionTool(failing_step), code, isolation, canary) as executor:
        with pytest.raises(ExecutionError):
            executor.run(code)
        caught = "try:\n    failing_step('x')\nexcept LookupError as e:\n    caught = str(e)\ncaught"
        assert "unknown step" in executor.run(caught).output
    assert not canary.exists()
