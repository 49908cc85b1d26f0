"""`codeward doctor --attack`: every probe holds in the local sandbox, and gets through where nothing stops it.

The command runs in a fresh process, as a user runs it. Each probe's control is a sandbox without
the walls: a Jupyter kernel, which is plain Python running as the user, with no policy and no
confinement (the local executor with both switched off), given the local probes; there each probe must
report what got through, judged on the host (a file written, a listener reached, a process killed,
a secret brought back, processes counted, memory filled).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest

from codeward.cli.attack_bait import Bait
from codeward.cli.attack_probes import PROBES, Probe, run_probes
from codeward.executors.base import Executor

#: The probes the local executor runs: every one.
LOCAL_PROBES = [probe for probe in PROBES if probe.executors is None or "local" in probe.executors]
#: The probes that run on every executor (the local policy's escapes are local-only).
EVERY_EXECUTOR = [probe.name for probe in PROBES if probe.executors is None]


def probe_lines(out: str) -> dict[str, str]:
    """Each probe's line, by the probe's name."""
    lines = {}
    for line in out.splitlines():
        found = re.match(r"^[✓✗–] (?P<name>[^:]+): (?P<verdict>.*)$", line)
        if found:
            lines[found["name"]] = found["verdict"]
    return lines


def test_every_probe_holds_in_the_local_sandbox(codeward) -> None:
    done = codeward("doctor", "--attack", timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = probe_lines(done.stdout)
    assert set(lines) == {probe.name for probe in LOCAL_PROBES}, done.stdout
    assert all(verdict == "held" for verdict in lines.values()), done.stdout
    assert f"all {len(LOCAL_PROBES)} probes held in the local sandbox" in done.stdout
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


@pytest.fixture(scope="module")
def no_walls() -> Iterator[tuple[Executor, Bait]]:
    """A kernel with no policy and no confinement, and bait for the local probes, shared by the controls."""
    pytest.importorskip("jupyter_client")
    from codeward.executors.jupyter import JupyterExecutor

    with Bait("local") as bait, JupyterExecutor(timeout_seconds=60) as kernel:
        yield kernel, bait


@pytest.mark.parametrize("probe", LOCAL_PROBES, ids=[probe.name for probe in LOCAL_PROBES])
def test_each_probe_reports_what_got_through_where_nothing_stops_it(no_walls, probe: Probe) -> None:
    kernel, bait = no_walls
    (verdict,) = run_probes(kernel, bait, 1 << 30, probes=(probe,))
    assert verdict.held is False, f"{probe.name}: {verdict}"
    assert verdict.detail, verdict
