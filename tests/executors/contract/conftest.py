"""The executor contract suite's fixtures: one profile per registered executor.

A new sandbox joins the suite by registering itself and adding a profile here;
an executor registered without a profile fails the suite, so none slips past it.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from codeward.executors.base import Executor, available_executors, create_executor, executor_class

#: Seconds every executor in the suite gets per run; the timeout checks rely on it.
TIMEOUT = 3.0


@dataclass(frozen=True)
class Profile:
    """How to build an executor for the suite, and what kind of sandbox it is."""

    make: Callable[..., Executor]  # settings given override the suite's
    #: The code runs inside the test's own process: no process to kill or leak.
    in_process: bool = False
    #: The code may start processes of its own (the local worker's seccomp filter refuses them).
    spawns: bool = True
    #: Process ids the sandbox reports are this host's (so the suite can check they are gone).
    host_pids: bool = True
    #: Why the sandbox cannot run on this machine (e.g. no Docker engine), or None when it can.
    unavailable: Callable[[], str | None] = lambda: None
    #: For a sandbox whose processes are not the host's: given a running executor, a probe
    #: that lists what of its sandbox still exists (called after close()).
    remains: Callable[[Executor], Callable[[], list[str]]] | None = None


@functools.cache
def _docker_unavailable() -> str | None:
    from codeward.executors.base import ExecutorError
    from codeward.executors.docker.images import BUILD_COMMAND, engine_client, find_image

    try:
        if find_image(engine_client()) is None:
            return f"the current docker sandbox image is not built; run `{BUILD_COMMAND}`"
    except ExecutorError as error:
        return f"no Docker engine here: {error.message}"
    return None


@functools.cache
def _gvisor_unavailable() -> str | None:
    """Why `runtime="runsc"` cannot run here (no engine, no image, or no usable gVisor), or None."""
    from codeward.executors.docker.gvisor import GVISOR, runtime_problem
    from codeward.executors.docker.images import engine_client

    missing = _docker_unavailable()
    if missing:
        return missing
    problem = runtime_problem(engine_client().info().get("Runtimes") or {}, GVISOR)
    return f"gVisor cannot run codeward's sandboxes here: {problem}" if problem else None


def _docker_remains(executor: Executor) -> Callable[[], list[str]]:
    import docker.errors

    sandbox = executor.sandbox  # type: ignore[attr-defined]
    container, ipc_dir = sandbox.container, sandbox.ipc_dir

    def probe() -> list[str]:
        left = [f"ipc folder {ipc_dir}"] if ipc_dir.exists() else []
        try:
            container.reload()
        except docker.errors.NotFound:
            return left
        return [*left, f"container {container.short_id} ({container.status})"]

    return probe


def _local_e2b(**settings: object) -> Executor:
    """The E2B SDK, unmodified, against the local server that speaks E2B's protocol (its kernels run on this host)."""
    from tests.e2b_server import shared_server  # imported only when e2b is tested: it needs jupyter_client

    return create_executor("e2b", **{"timeout_seconds": TIMEOUT, "connection": shared_server().connection, **settings})


_LOCAL = {"timeout_seconds": TIMEOUT, "max_operations": 10**12, "authorized_imports": ["sys"]}

PROFILES: dict[str, Profile] = {
    # The time limit, not the operation budget, must be what stops the suite's endless loop;
    # `sys` is allowed so that the code can write to stderr at all.
    "local": Profile(
        make=lambda **settings: create_executor("local", **{**_LOCAL, "authorized_imports": ["*"], **settings}),
        spawns=False,
    ),
    "local-in-process": Profile(
        make=lambda **settings: create_executor("local", **{**_LOCAL, "isolation": "in_process", **settings}),
        in_process=True,
        host_pids=False,
    ),
    "jupyter": Profile(make=lambda **settings: create_executor("jupyter", **{"timeout_seconds": TIMEOUT, **settings})),
    "e2b": Profile(make=_local_e2b),
    # Tools called on the host, rather than shipped into the sandbox as source (e2b's default).
    "e2b-host": Profile(make=lambda **settings: _local_e2b(**{"tools_mode": "host", **settings})),
    "docker": Profile(
        make=lambda **settings: create_executor("docker", **{"timeout_seconds": TIMEOUT, **settings}),
        host_pids=False,
        unavailable=_docker_unavailable,
        remains=_docker_remains,
    ),
    # The same sandbox under gVisor: the code's system calls reach gVisor's kernel, not the host's.
    "docker-runsc": Profile(
        make=lambda **settings: create_executor(
            "docker", **{"timeout_seconds": TIMEOUT, "runtime": "runsc", **settings}
        ),
        host_pids=False,
        unavailable=_gvisor_unavailable,
        remains=_docker_remains,
    ),
}


def _module_missing(name: str) -> str | None:
    """Why the executor's class cannot be imported here, or None when it can."""
    try:
        executor_class(name)
    except ImportError as error:
        return f"the {name!r} executor cannot be imported here: {error}"
    return None


#: Every registered executor, and the settings that make another kind of sandbox of one of them.
SUITE = sorted({*available_executors(), "local-in-process", "docker-runsc", "e2b-host"})


@pytest.fixture(params=SUITE)
def executor_name(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    if name not in PROFILES:
        pytest.fail(f"executor {name!r} is registered but has no profile in tests/executors/contract/conftest.py")
    missing = _module_missing(name.split("-")[0]) or PROFILES[name].unavailable()
    if missing:
        pytest.skip(missing)
    return name


@pytest.fixture
def profile(executor_name: str) -> Profile:
    return PROFILES[executor_name]


@pytest.fixture
def executor(profile: Profile) -> Iterator[Executor]:
    with profile.make() as made:
        yield made


def process_gone(pid: int) -> bool:
    """True when no live process has this id (a zombie waiting for its reaper counts as gone)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
    except OSError:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        return False
