"""`codeward doctor --attack`: every probe holds in the local sandbox, and gets through where nothing stops it.

The command runs in a fresh process, as a user runs it. Each probe has controls without the walls it
meets, where it must report what got through, judged on the host (a file written, a listener reached,
a process killed, a secret brought back, processes counted, memory filled):
- for the local executor's policy, a Jupyter kernel, which is plain Python running as the user (the
  local executor with its policy and its confinement switched off), given every local probe;
- for the worker's confinement, the confined interpreter with its confine() call taken away;
- for the judges, a sandbox that lets everything through and claims it refused all: the probes whose
  harm the host can see for itself must still report it.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator

import pytest

from codeward.cli.attack_bait import Bait
from codeward.cli.attack_confined import ConfinedPython
from codeward.cli.attack_probes import PROBES, Probe, run_probes
from codeward.cli.doctor import CONFINEMENT_ALONE
from codeward.executors.base import CodeOutput, ExecutionError, Executor, ExecutorError
from codeward.tools import Tool

#: The probes the local executor runs: every one.
LOCAL_PROBES = [probe for probe in PROBES if probe.executors is None or "local" in probe.executors]
#: The probes that run on every executor (the local policy's escapes are local-only).
EVERY_EXECUTOR = [probe.name for probe in PROBES if probe.executors is None]
#: The line `confine()` is called on in the confined interpreter: its control runs without it.
CONFINE_CALL = "missing = confine("


def probe_lines(out: str) -> dict[str, str]:
    """Each probe's line, by the probe's name."""
    lines = {}
    for line in out.splitlines():
        found = re.match(r"^[✓✗–] (?P<name>.+?): (?P<verdict>held|got through: .*|not probed: .*)$", line)
        if found:
            lines[found["name"]] = found["verdict"]
    return lines


def test_every_probe_holds_in_the_local_sandbox(codeward) -> None:
    done = codeward("doctor", "--attack", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = probe_lines(done.stdout)
    confined = {CONFINEMENT_ALONE + name for name in EVERY_EXECUTOR}
    assert set(lines) == {probe.name for probe in LOCAL_PROBES} | confined, done.stdout
    assert all(verdict == "held" for verdict in lines.values()), done.stdout
    assert f"all {len(lines)} probes held in the local sandbox" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_a_jupyter_kernel_is_said_to_be_no_sandbox_and_what_got_through_is_named(codeward) -> None:
    pytest.importorskip("jupyter_client")
    done = codeward("doctor", "--attack", "--executor", "jupyter", timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    lines = probe_lines(done.stdout)
    assert set(lines) == set(EVERY_EXECUTOR), done.stdout
    for name in ("read a host file", "write outside", "exec a shell", "signal the host", "fork past the pids limit"):
        assert lines[name].startswith("got through: "), done.stdout
    assert "read the secret in /tmp/" in lines["read a host file"]
    assert "a Jupyter kernel is not a sandbox" in done.stdout and "is not a sandbox" in done.stderr
    assert "Traceback" not in done.stdout + done.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (("--attack", "--runtime", "runsc"), "--runtime chooses a docker sandbox's runtime"),
        (("--executor", "docker"), "add --attack"),
        (("--attack", "--executor", "dokcer"), "did you mean 'docker'"),
    ],
    ids=["runtime without docker", "executor without attack", "a misspelt executor"],
)
def test_options_that_cannot_work_are_said_and_exit_2(codeward, args, said) -> None:
    done = codeward("doctor", *args)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert done.stdout == "" or "held" not in done.stdout


@pytest.fixture
def bait() -> Iterator[Bait]:
    """Fresh bait for each control: a probe that gets through (kills the process, writes the file) spends its own."""
    with Bait("local") as fresh:
        yield fresh


@pytest.fixture(scope="module")
def no_walls() -> Iterator[Executor]:
    """A kernel with no policy and no confinement, shared by the policy's controls."""
    pytest.importorskip("jupyter_client")
    from codeward.executors.jupyter import JupyterExecutor

    with JupyterExecutor(timeout_seconds=60) as kernel:
        yield kernel


class Unconfined(ConfinedPython):
    """The confined interpreter with its confine() call taken away: the control of the confinement's probes."""

    assert CONFINE_CALL in ConfinedPython.runner
    runner = ConfinedPython.runner.replace(CONFINE_CALL, "missing = (lambda **settings: [])(")


@pytest.fixture(scope="module")
def unconfined() -> Iterator[Executor]:
    with Unconfined() as plain:
        yield plain


@pytest.mark.parametrize("probe", LOCAL_PROBES, ids=[probe.name for probe in LOCAL_PROBES])
def test_each_probe_reports_what_got_through_where_no_policy_stops_it(no_walls, bait, probe: Probe) -> None:
    (verdict,) = run_probes(no_walls, bait, 1 << 30, probes=(probe,))
    assert verdict.held is False, f"{probe.name}: {verdict}"
    assert verdict.detail, verdict


EVERYWHERE = [probe for probe in PROBES if probe.executors is None]


@pytest.mark.parametrize("probe", EVERYWHERE, ids=[probe.name for probe in EVERYWHERE])
def test_each_probe_holds_in_the_confined_interpreter_and_gets_through_without_confine(
    unconfined, bait, probe: Probe
) -> None:
    with ConfinedPython() as confined:
        if confined.missing:
            pytest.skip(f"this machine lacks {', '.join(confined.missing)}: codeward doctor says why")
        (held,) = run_probes(confined, bait, 1 << 30, probes=(probe,))
    assert held.held is True, f"{probe.name}: {held}"
    (verdict,) = run_probes(unconfined, bait, 1 << 30, probes=(probe,))
    assert verdict.held is False, f"{probe.name}: {verdict}"
    assert verdict.detail, verdict


class Liar(Executor):
    """A sandbox that lets everything through and says it refused all: what it did is kept, what it says is not."""

    def __init__(self, inner: Executor) -> None:
        self.inner = inner

    def run(self, code: str, on_output: object = None) -> CodeOutput:
        with contextlib.suppress(ExecutorError):
            self.inner.run(code)
        raise ExecutionError("CodeRefused: this sandbox allows none of that", error_type="CodeRefused")

    def send_variables(self, variables: dict[str, object]) -> None:
        self.inner.send_variables(variables)

    def send_tools(self, tools: dict[str, Tool]) -> None:
        self.inner.send_tools(tools)

    def close(self) -> None:
        """The kernel is the fixture's to close."""


#: The probes whose harm the host sees for itself, whatever the sandbox says.
SEEN_ON_THE_HOST = [
    probe
    for probe in LOCAL_PROBES
    if probe.name.startswith(("write", "exec", "open", "reach", "signal", "fork", "escape"))
    and "format" not in probe.name
]


@pytest.mark.parametrize("probe", SEEN_ON_THE_HOST, ids=[probe.name for probe in SEEN_ON_THE_HOST])
def test_a_sandbox_that_claims_a_refusal_is_not_believed(no_walls, bait, probe: Probe) -> None:
    (verdict,) = run_probes(Liar(no_walls), bait, 1 << 30, probes=(probe,))
    assert verdict.held is False, f"{probe.name}: {verdict}"
