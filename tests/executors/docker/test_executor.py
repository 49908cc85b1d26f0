"""DockerExecutor: hardened by default, never silently loosened, recovering from every way a sandbox dies."""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import docker
import pytest

import codeward
from codeward.executors import create_executor
from codeward.executors.base import ExecutionTimeout, ExecutorError, SandboxError
from codeward.executors.docker.executor import DockerExecutor
from codeward.executors.docker.hardening import PACKAGES_DIR
from codeward.executors.docker.images import BUILD_COMMAND, SandboxImageError, source_dir
from codeward.executors.docker.owners import OWNER_PID_LABEL, list_sandboxes
from codeward.executors.docker.sandbox import sandbox_ids
from codeward.platform.tools import tool
from tests.executors.docker.containers import UNWATCHED, gone
from tests.executors.docker.engine_proxy import EngineProxy
from tests.package_index import package_index, tiny_wheel, wheel


@tool
def triple(x: int) -> int:
    """Triples a number.

    Args:
        x: the number to triple
    """
    return 3 * x


@pytest.fixture
def make(sandbox_image: str) -> Iterator:  # type: ignore[type-arg]
    """Builds executors on the current image and closes them all at the end."""
    made: list[DockerExecutor] = []

    def build(**kwargs: object) -> DockerExecutor:
        made.append(DockerExecutor(**kwargs))  # type: ignore[arg-type]
        return made[-1]

    yield build
    for executor in made:
        executor.close()


def _assert_recovers(executor: DockerExecutor) -> None:
    """The next run has a fresh sandbox with the caller's variables and tools, and none of the code's state."""
    assert executor.run("triple(given)").output == 9
    assert executor.run("'defined_by_code' in globals()").output is False


def _prepare(executor: DockerExecutor) -> str:
    executor.send_variables({"given": 3})
    executor.send_tools({"triple": triple})
    executor.run("defined_by_code = 1")
    assert executor.sandbox is not None
    return str(executor.sandbox.container.id)


def test_it_is_registered_and_hardened_by_default(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    with create_executor("docker") as executor:
        assert isinstance(executor, DockerExecutor)
        status = executor.run("open('/proc/self/status').read()").output
        fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
        assert int(fields["CapEff"], 16) == 0 and fields["NoNewPrivs"].strip() == "1"
        assert executor.run("import os\n(os.getuid(), sorted(os.listdir('/sys/class/net')))").output == (
            sandbox_ids()[0],
            ["lo"],
        )
        config = executor.sandbox.container.attrs["HostConfig"]  # type: ignore[union-attr]
        assert (config["NetworkMode"], config["ReadonlyRootfs"], config["CapDrop"]) == ("none", True, ["ALL"])
        container_id, ipc_dir = executor.sandbox.container.id, executor.sandbox.ipc_dir  # type: ignore[union-attr]
    assert gone(docker_client, container_id) and not ipc_dir.exists()
    executor.close()  # idempotent


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"privileged": True}, "cannot set 'privileged'"),
        ({"cap_add": ["SYS_ADMIN"]}, "cannot set 'cap_add'"),
        ({"volumes": {"/": {"bind": "/host"}}}, "cannot set 'volumes'"),
        ({"security_opt": ["seccomp=unconfined"]}, "cannot set 'security_opt'"),
        ({"network_mode": "host"}, "use the named argument network="),
        ({"pids_limit": -1}, "use the named argument pids_limit="),
        ({"environment": "A=1"}, "must be a dict"),
    ],
)
def test_extra_run_kwargs_cannot_loosen_the_sandbox(sandbox_image: str, extra: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises((ValueError, TypeError), match=message):
        DockerExecutor(extra_run_kwargs=extra)


def test_extra_run_kwargs_may_add_what_weakens_nothing(make) -> None:  # type: ignore[no-untyped-def]
    extra = {"environment": {"GREETING": "hello"}, "hostname": "box", "log_config": {"type": "none"}}
    executor = make(extra_run_kwargs=extra)
    assert executor.run("import os, socket\n(os.environ['GREETING'], socket.gethostname())").output == ("hello", "box")
    assert executor.sandbox.container.attrs["HostConfig"]["LogConfig"]["Type"] == "none"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mem_limit": "lots"}, "mem_limit must be a size"),
        ({"cpus": 0}, "cpus must be a positive number"),
        ({"pids_limit": True}, "pids_limit must be a whole number"),
        ({"network": ""}, "network must name a Docker network"),
        ({"tmpfs_size": "-1m"}, "tmpfs_size must be a size"),
    ],
)
def test_bad_limits_are_refused_with_the_reason(sandbox_image: str, kwargs: dict, message: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ValueError, match=message):
        DockerExecutor(**kwargs)


def test_loosening_is_logged(make, caplog: pytest.LogCaptureFixture) -> None:  # type: ignore[no-untyped-def]
    with caplog.at_level(logging.WARNING, logger="codeward.executors.docker.executor"):
        executor = make(network="bridge")
    assert "network': 'bridge'" in caplog.text
    assert executor.sandbox.container.attrs["HostConfig"]["NetworkMode"] == "bridge"


def test_a_missing_image_names_the_command_that_builds_it(
    docker_client: docker.DockerClient, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = Path(shutil.copytree(source_dir(), tmp_path / "tree", ignore=shutil.ignore_patterns("wheels")))
    (tree / "Dockerfile").write_text((tree / "Dockerfile").read_text() + "\n# not built\n")
    monkeypatch.setenv("CODEWARD_SANDBOX_IMAGES", str(tree))
    with pytest.raises(SandboxImageError, match=BUILD_COMMAND):
        DockerExecutor()


def test_a_memory_bomb_ends_in_sandbox_error_and_recovery(make) -> None:  # type: ignore[no-untyped-def]
    executor = make(mem_limit="256m")
    _prepare(executor)
    with pytest.raises(SandboxError, match="out of memory") as caught:
        executor.run("blob = b'x' * (600 * 2**20)")
    assert caught.value.state_lost
    assert "existing" not in caught.value.message  # no kernel banner in the account of the death
    _assert_recovers(executor)


def test_a_fork_bomb_is_held_and_the_sandbox_replaced(docker_client: docker.DockerClient, make) -> None:  # type: ignore[no-untyped-def]
    executor = make(pids_limit=64, timeout_seconds=3)
    bombed = _prepare(executor)
    bomb = "import os\nwhile True:\n    try:\n        os.fork()\n    except OSError:\n        pass\n"
    # In a session of its own, the bomb outlives the interrupt that stops the cell (as a real one would).
    launch = f"import subprocess, sys\nsubprocess.Popen([sys.executable, '-c', {bomb!r}], start_new_session=True)"
    with pytest.raises(SandboxError, match="process limit") as caught:
        executor.run(f"{launch}\nimport time\ntime.sleep(60)")
    assert caught.value.state_lost
    assert caught.value.usage is not None and caught.value.usage.wall_seconds >= 3  # what the bomb's block cost
    assert gone(docker_client, bombed)
    _assert_recovers(executor)


def test_a_fork_bomb_in_the_kernel_itself_is_held_and_the_sandbox_replaced(
    docker_client: docker.DockerClient, make
) -> None:  # type: ignore[no-untyped-def]
    executor = make(pids_limit=64, timeout_seconds=10)
    bombed = _prepare(executor)
    with pytest.raises(SandboxError, match="process limit"):
        executor.run("import os\nfor _ in range(100):\n    os.fork()")  # every child forks on: 2**100 wanted
    assert gone(docker_client, bombed)
    _assert_recovers(executor)


def test_a_container_killed_from_outside_raises_and_recovers(docker_client: docker.DockerClient, make) -> None:  # type: ignore[no-untyped-def]
    executor = make()
    victim = _prepare(executor)
    threading.Timer(1.0, lambda: docker_client.containers.get(victim).kill()).start()
    with pytest.raises(SandboxError, match="killed"):
        executor.run("import time\ntime.sleep(30)")
    assert gone(docker_client, victim)
    _assert_recovers(executor)


def test_code_that_ignores_the_interrupt_gets_a_fresh_sandbox(docker_client: docker.DockerClient, make) -> None:  # type: ignore[no-untyped-def]
    executor = make(timeout_seconds=1)
    stubborn = _prepare(executor)
    code = "import time\nwhile True:\n    try:\n        time.sleep(5)\n    except KeyboardInterrupt:\n        print('ignored')"
    with pytest.raises(ExecutionTimeout, match="restarted"):
        executor.run(code)
    assert gone(docker_client, stubborn)
    _assert_recovers(executor)


def test_an_engine_that_goes_away_raises_and_nothing_is_left_once_it_is_back(
    docker_client: docker.DockerClient, sandbox_image: str, tmp_path: Path
) -> None:
    target = docker_client.api.base_url.replace("http+docker://localhost", "/var/run/docker.sock")
    if not os.path.exists(target):
        pytest.skip(f"the engine is not reached through a local unix socket ({docker_client.api.base_url})")
    proxy = EngineProxy(tmp_path / "engine.sock", target)
    executor = DockerExecutor(docker_client=docker.DockerClient(base_url=proxy.url), image=sandbox_image)
    try:
        stranded = _prepare(executor)
        proxy.cut()
        with pytest.raises(SandboxError, match="Docker engine stopped answering"):
            executor.run("import time\ntime.sleep(5)")
        with pytest.raises(SandboxError, match="does not answer"):
            executor.run("1")
        assert not gone(docker_client, stranded)  # the engine could not be told to remove it
        proxy.restore()
        _assert_recovers(executor)
        assert gone(docker_client, stranded)  # removed at the first chance
    finally:
        executor.close()


OWNER = UNWATCHED + textwrap.dedent(
    """
    import sys
    from codeward.executors.docker.executor import DockerExecutor
    executor = DockerExecutor(image=sys.argv[1])
    print(executor.sandbox.container.id, flush=True)
    executor.run("import time; time.sleep(120)")
    """
)


def test_a_killed_owner_leaves_nothing_after_the_next_executor_starts(
    docker_client: docker.DockerClient, sandbox_image: str, make
) -> None:  # type: ignore[no-untyped-def]
    env = {**os.environ, "PYTHONPATH": str(Path(codeward.__file__).parents[1])}
    owner = subprocess.Popen([sys.executable, "-c", OWNER, sandbox_image], stdout=subprocess.PIPE, text=True, env=env)
    try:
        orphan = owner.stdout.readline().strip()  # type: ignore[union-attr]
        assert orphan, "the owner process did not start its sandbox"
    finally:
        owner.send_signal(signal.SIGKILL)  # mid-run: its time.sleep(120) is running in the sandbox
        owner.wait()
    assert not gone(docker_client, orphan)
    make()
    assert gone(docker_client, orphan)
    assert all(c.labels[OWNER_PID_LABEL] != str(owner.pid) for c in list_sandboxes(docker_client))


def test_install_packages_needs_a_network_and_says_so(make: Callable[..., DockerExecutor]) -> None:
    executor = make()
    with pytest.raises(ExecutorError, match=r"egress=codeward\.egress\.PYPI"):
        executor.install_packages(["requests"])
    # Without a network there is also no folder where the sandbox may write code and run it.
    assert executor.run(f"import os; os.path.exists({PACKAGES_DIR!r})").output is False


def test_install_packages_fetches_from_an_index_over_the_network(
    make: Callable[..., DockerExecutor], gateway: str, docker_client: docker.DockerClient, tmp_path: Path
) -> None:
    """pip downloads from an index on the host through the bridge network. One package needs
    numpy, which the image has (pip must not fetch it: the index has none); one holds a
    compiled extension (its folder must allow mapping code as executable). A sandbox that
    replaces a dead one gets the packages again."""
    executor = make(network="bridge")
    native = executor.run("import _bz2; open(_bz2.__file__, 'rb').read(), _bz2.__file__.rsplit('/', 1)[-1]").output
    library, filename = native
    wheel(tmp_path, "codeward-native", {f"codeward_native/{filename}": library, "codeward_native/__init__.py": ""})
    tiny_wheel(tmp_path, requires=("numpy",))
    with package_index(tmp_path, gateway) as url:
        installed = executor.install_packages(
            ["--index-url", url, "--trusted-host", gateway, "codeward-tinypkg", "codeward-native"]
        )
        assert installed == ["codeward_native", "codeward_tinypkg"]
        assert executor.run("import codeward_tinypkg; codeward_tinypkg.ANSWER").output == 42
        assert executor.sandbox is not None
        first = executor.sandbox.container.id
        docker_client.containers.get(first).kill()
        with pytest.raises(SandboxError):
            executor.run("1")
        # The replacement sandbox gets the same install again.
        assert executor.run("import codeward_tinypkg; codeward_tinypkg.ANSWER").output == 42
        assert executor.sandbox.container.id != first
    probe = (
        "import bz2, codeward_native._bz2 as native\n"
        "packer = native.BZ2Compressor()\n"
        "native.__file__.startswith('/opt/'), bz2.decompress(packer.compress(b'payload') + packer.flush())"
    )
    assert executor.run(probe).output == (True, b"payload")


def test_install_packages_replaces_a_version_the_read_only_image_holds(
    make: Callable[..., DockerExecutor], gateway: str, tmp_path: Path
) -> None:
    executor = make(network="bridge")
    assert executor.run("import sys; 'parso' in sys.modules").output is False  # the image has parso, not loaded
    wheel(tmp_path, "parso", {"parso/__init__.py": "version_info = (1, 0)\n"})
    with package_index(tmp_path, gateway) as url:
        assert executor.install_packages(["--index-url", url, "--trusted-host", gateway, "parso==1.0"]) == ["parso"]
    assert executor.run("import parso; parso.version_info").output == (1, 0)
