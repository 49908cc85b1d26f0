"""Attacks from inside a default sandbox: each must fail, and the host must not notice."""

from __future__ import annotations

import errno
import os
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from jupyter_client.blocking.client import BlockingKernelClient

from codeward.executors.docker.executor import DockerExecutor
from codeward.executors.docker.hardening import Hardening
from codeward.executors.docker.sandbox import CONTAINER_IPC_DIR, KernelContainer, sandbox_ids, start_kernel_container
from tests.executors.docker.conftest import HOST_SECRET
from tests.executors.docker.containers import LAUNCH_FORK_BOMB, gone, host_runs_a_process, log_bytes
from tests.executors.docker.kernel_calls import run_code, run_json, run_json_unhardened


@pytest.fixture(scope="module")
def sandbox(docker_client, sandbox_image: str, runtime: str | None) -> Iterator[KernelContainer]:  # type: ignore[no-untyped-def]
    """One default-hardened sandbox per runtime, shared by the module's read-only probes."""
    started = start_kernel_container(docker_client, sandbox_image, Hardening(runtime=runtime))
    yield started
    started.remove()


@pytest.fixture(scope="module")
def kernel(sandbox: KernelContainer) -> BlockingKernelClient:
    return sandbox.client()


@pytest.fixture(scope="module")
def executor(sandbox_image: str, runtime: str | None) -> Iterator[DockerExecutor]:
    """A default executor per runtime, for attacks after which it must still run code."""
    with DockerExecutor(runtime=runtime) as started:
        yield started


def _folder_bytes(folder: Path) -> int:
    return sum((Path(parent) / name).lstat().st_size for parent, _, names in os.walk(folder) for name in names)


def test_a_plain_host_client_runs_code_over_the_ipc_sockets(sandbox: KernelContainer) -> None:
    """As every Jupyter client must, it waits for the kernel first: under gVisor, output published
    before its subscription is live is lost, and that takes long enough to miss a first cell's."""
    client = BlockingKernelClient()
    client.load_connection_info(sandbox.connection_info)
    client.start_channels()
    try:
        client.wait_for_ready(timeout=30)
        assert client.transport == "ipc"
        assert run_code(client, "import sys\nprint(sum(range(10)), sys.version_info[0])") == "45 3\n"
    finally:
        client.stop_channels()


def test_no_network_route_leaves_the_sandbox(
    kernel: BlockingKernelClient,
    docker_client,
    sandbox_image: str,
    gateway_listener: tuple[str, int],
    runtime: str | None,
) -> None:
    """The host listens on the bridge gateway: a plain container reaches it, the sandbox reaches nothing.

    Under gVisor the sandbox's network stack is gVisor's own, with loopback alone: it answers
    "no route to host" where Linux answers "network unreachable".
    """
    host_address, host_port = gateway_listener
    probe = f"""
import json, os, socket
results = {{}}
for host, port in [({host_address!r}, {host_port}), ("1.1.1.1", 53), ("10.0.0.1", 80), ("192.168.1.1", 80)]:
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect((host, port))
        results[host] = "connected"
    except OSError as error:
        results[host] = error.errno
    finally:
        s.close()
try:
    socket.getaddrinfo("pypi.org", 443)
    results["dns"] = "resolved"
except OSError as error:
    results["dns"] = "failed"
results["interfaces"] = sorted(os.listdir("/sys/class/net"))
print(json.dumps(results))
"""
    control = run_json_unhardened(docker_client, sandbox_image, probe)
    assert control[host_address] == "connected" and control["interfaces"] != ["lo"], control
    results = run_json(kernel, probe)
    assert results.pop("interfaces") == ["lo"]
    assert results.pop("dns") == "failed"
    unreachable = errno.EHOSTUNREACH if runtime == "runsc" else errno.ENETUNREACH
    assert all(code == unreachable for code in results.values()), results


def test_the_kernel_runs_as_the_unprivileged_sandbox_user(kernel: BlockingKernelClient) -> None:
    ids = run_json(
        kernel, "import os, json\nprint(json.dumps([os.getuid(), os.geteuid(), os.getgid(), os.getgroups()]))"
    )
    uid, gid = sandbox_ids()
    assert ids[:3] == [uid, uid, gid]
    assert 0 not in ids[:3] and 0 not in ids[3]


def test_the_root_filesystem_is_read_only(
    kernel: BlockingKernelClient, docker_client, sandbox_image: str, runtime: str | None
) -> None:
    """Under gVisor a write is refused for permissions (EACCES) before the read-only mount is
    consulted; that the root is mounted read-only is then read from the sandbox's own mount table."""
    probe = """
import json
codes = {}
for path in ["/escape", "/usr/lib/escape", "/etc/passwd", "/opt/sandbox/bin/python3"]:
    try:
        with open(path, "a") as stream:
            stream.write("x")
        codes[path] = "written"
    except OSError as error:
        codes[path] = error.errno
print(json.dumps(codes))
"""
    control = run_json_unhardened(docker_client, sandbox_image, probe)  # its own running python3 is busy (ETXTBSY)
    assert all(control[path] == "written" for path in ("/escape", "/usr/lib/escape", "/etc/passwd")), control
    codes = run_json(kernel, probe)
    if runtime == "runsc":
        assert codes["/escape"] == errno.EACCES and codes["/usr/lib/escape"] == errno.EACCES
        root = next(line for line in _mounts(kernel) if line.split()[1] == "/")
        assert "ro" in root.split()[3].split(","), root
    else:
        assert codes["/escape"] == errno.EROFS and codes["/usr/lib/escape"] == errno.EROFS
    assert codes["/etc/passwd"] in (errno.EROFS, errno.EACCES)
    assert codes["/opt/sandbox/bin/python3"] in (errno.EROFS, errno.EACCES)


def _mounts(kernel: BlockingKernelClient) -> list[str]:
    return run_code(kernel, "print(open('/proc/self/mounts').read())").splitlines()


def test_scratch_space_is_size_capped_tmpfs(kernel: BlockingKernelClient, runtime: str | None) -> None:
    """gVisor writes the size as it was given (256m) where Linux writes it in KiB."""
    size = "size=256m" if runtime == "runsc" else "size=262144k"
    for folder in ("/tmp", "/home/sandbox"):
        line = next(line for line in _mounts(kernel) if line.split()[1] == folder)
        assert line.split()[2] == "tmpfs" and size in line.split()[3].split(","), line
        assert "noexec" in line.split()[3].split(","), line
    probe = "import os\nos.makedirs('/home/sandbox/work', exist_ok=True)\nopen('/tmp/a', 'w').write('ok')\nprint(open('/tmp/a').read())"
    assert run_code(kernel, probe) == "ok\n"


def test_every_capability_set_is_empty_and_privileges_cannot_grow(
    kernel: BlockingKernelClient, runtime: str | None
) -> None:
    """Under gVisor, /proc/self/status has no CapAmb, NoNewPrivs or Seccomp lines, and Docker's
    seccomp profile is not applied: the code's system calls reach gVisor's own kernel, never the
    host's (which gVisor itself holds under a seccomp filter). What gVisor guarantees instead:
    the capability sets it shows are empty, and prctl reports no_new_privs."""
    status = run_code(kernel, "print(open('/proc/self/status').read())")
    fields = dict(line.split(":\t", 1) for line in status.splitlines() if ":\t" in line)
    names = ("CapInh", "CapPrm", "CapEff", "CapBnd") + (() if runtime == "runsc" else ("CapAmb",))
    for name in names:
        assert int(fields[name], 16) == 0, (name, fields[name])
    probe = "import ctypes, json\nlibc = ctypes.CDLL(None)\nprint(json.dumps([libc.prctl(39, 0, 0, 0, 0), libc.prctl(21, 0, 0, 0, 0)]))"
    no_new_privs, seccomp_mode = run_json(kernel, probe)  # PR_GET_NO_NEW_PRIVS, PR_GET_SECCOMP
    assert no_new_privs == 1
    assert seccomp_mode == (0 if runtime == "runsc" else 2)  # 2: filter mode, Docker's default profile


def test_privileged_calls_fail(
    kernel: BlockingKernelClient, docker_client, sandbox_image: str, runtime: str | None
) -> None:
    """gVisor lets an unprivileged user make a device node in its own tmpfs, but the node leads to
    no device: gVisor has no driver behind it and never opens the host's, so opening it is ENXIO."""
    probe = """
import json, os
codes = {}
for name, call in [("setuid0", lambda: os.setuid(0)),
                   ("mknod", lambda: os.mknod("/tmp/dev", 0o600 | 0o060000, os.makedev(8, 0))),
                   ("chown", lambda: os.chown("/tmp", 0, 0)), ("chroot", lambda: os.chroot("/tmp"))]:
    try:
        call()
        codes[name] = "allowed"
    except OSError as error:
        codes[name] = error.errno
print(json.dumps(codes))
"""
    assert set(run_json_unhardened(docker_client, sandbox_image, probe).values()) == {"allowed"}
    codes = run_json(kernel, probe)
    if runtime == "runsc":
        assert codes.pop("mknod") == "allowed"
        opened = "import os\ntry:\n    os.open('/tmp/dev', os.O_RDWR)\n    print('opened')\nexcept OSError as error:\n    print(error.errno)"
        assert run_code(kernel, opened) == f"{errno.ENXIO}\n"
    assert all(code == errno.EPERM for code in codes.values()), codes


def test_the_hosts_environment_and_files_stay_outside(kernel: BlockingKernelClient) -> None:
    name, value = HOST_SECRET
    assert os.environ[name] == value  # the host does have it
    probe = f"""
import json, os
print(json.dumps([os.environ.get({name!r}), {value!r} in repr(dict(os.environ)),
                  os.path.exists({str(Path(__file__).resolve())!r}), os.path.exists({sys.prefix!r})]))
"""
    assert run_json(kernel, probe) == [None, False, False, False]


def test_the_limits_are_set_on_the_container(sandbox: KernelContainer) -> None:
    sandbox.container.reload()
    host_config = sandbox.container.attrs["HostConfig"]
    assert host_config["Memory"] == 1024**3 and host_config["MemorySwap"] == 1024**3
    assert host_config["NanoCpus"] == 10**9
    assert host_config["PidsLimit"] == 256
    assert host_config["Privileged"] is False
    assert not host_config.get("PortBindings")
    assert sandbox.container.attrs["NetworkSettings"]["Ports"] in ({}, None)


def test_the_ipc_folder_is_private_to_the_host_user(sandbox: KernelContainer) -> None:
    info = sandbox.ipc_dir.stat()
    assert stat.S_IMODE(info.st_mode) == 0o700 and info.st_uid == os.getuid()
    sockets = [f"kernel-{port}" for port in range(1, 6)]
    assert sorted(os.listdir(sandbox.ipc_dir)) == sockets
    assert all(stat.S_ISSOCK((sandbox.ipc_dir / name).stat().st_mode) for name in sockets)
    (shared,) = [mount["Source"] for mount in sandbox.container.attrs["Mounts"]]
    assert not Path(shared).exists(), "the folder the container saw must be gone once its kernel answers"


def test_output_to_stderr_fills_no_log_on_the_host(executor: DockerExecutor) -> None:
    """The kernel's fd 2 is the container's output, which Docker logs on the host: the log must stay small."""
    assert executor.sandbox is not None
    before = log_bytes(executor.sandbox.container)
    executor.run("import os\nfor _ in range(50):\n    os.write(2, b'x' * 2**20)")
    assert executor.run("6 * 7").output == 42
    assert log_bytes(executor.sandbox.container) - before < 2**20


def test_the_ipc_folder_takes_no_file_from_the_sandbox(executor: DockerExecutor) -> None:
    """The ipc folder lies on the host's disk, outside the container's size-capped tmpfs."""
    assert executor.sandbox is not None
    before = _folder_bytes(executor.sandbox.ipc_dir)
    attack = f"""
import os
try:
    os.chmod({CONTAINER_IPC_DIR!r}, 0o777)
except OSError:
    pass
try:
    with open({CONTAINER_IPC_DIR + "/fill.bin"!r}, "wb") as stream:
        for _ in range(50):
            stream.write(b"x" * 2**20)
    result = "written"
except OSError as error:
    result = error.errno
result
"""
    assert executor.run(attack).output in (errno.ENOENT, errno.EACCES)
    assert _folder_bytes(executor.sandbox.ipc_dir) - before < 2**20
    assert executor.run("6 * 7").output == 42


@pytest.mark.skipif(os.getuid() != 0, reason="a host user that is not root is the kernel's uid, and owns its folder")
def test_the_removed_shared_folder_takes_no_unnamed_file(
    docker_client, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On tmpfs a removed folder still takes O_TMPFILE files: the sandbox's uid must not own it."""
    if not os.path.isdir("/dev/shm"):
        pytest.skip("no /dev/shm here")
    monkeypatch.setattr(tempfile, "tempdir", "/dev/shm")
    started = start_kernel_container(docker_client, sandbox_image)
    try:
        attack = f"""
import os
try:
    descriptor = os.open({CONTAINER_IPC_DIR!r}, os.O_TMPFILE | os.O_WRONLY, 0o600)
    print(os.write(descriptor, b"x" * 2**20))
except OSError as error:
    print(error.errno)
"""
        assert run_code(started.client(), attack) == f"{errno.EACCES}\n"
    finally:
        started.remove()


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to act as another host user")
def test_another_host_user_cannot_reach_the_kernel(sandbox: KernelContainer) -> None:
    attack = f"""
import os, socket, sys
os.setgid(65534); os.setuid(65534)
results = []
folder = {str(sandbox.ipc_dir)!r}
actions = [lambda: os.listdir(folder)]
actions += [lambda n=n: socket.socket(socket.AF_UNIX).connect(os.path.join(folder, f"kernel-{{n}}")) for n in range(1, 6)]
for action in actions:
    try:
        action()
        results.append("allowed")
    except PermissionError:
        results.append("denied")
print(results)
"""
    done = subprocess.run([sys.executable, "-c", attack], check=False, capture_output=True, text=True, timeout=30)
    assert done.stdout.strip() == str(["denied"] * 6), done.stderr


def test_a_fork_bomb_stops_at_the_pids_limit(docker_client, sandbox_image: str) -> None:  # type: ignore[no-untyped-def]
    """On runc the sandbox's processes are host tasks, held at the limit (gVisor: test_gvisor.py)."""
    limit = 48
    bombed = start_kernel_container(docker_client, sandbox_image, Hardening(pids_limit=limit))
    try:
        kernel = bombed.client()
        assert run_code(kernel, LAUNCH_FORK_BOMB) == "launched\n"
        counts = []  # tasks (processes and threads) in the container's pids cgroup
        # the bomb's interpreter starts first, seconds on a busy machine: sampled until it reaches
        # the limit (a minute at most), then for a second more, where it must stay
        deadline = time.monotonic() + 60
        while (not counts or counts[-1] < limit) and time.monotonic() < deadline:
            time.sleep(0.25)
            counts.append(bombed.task_count())
        for _ in range(4):
            time.sleep(0.25)
            counts.append(bombed.task_count())
        assert max(counts) <= limit, counts
        assert counts[-1] == limit, f"the bomb never reached the limit: {counts}"
        assert host_runs_a_process()
    finally:
        bombed.remove()
    assert gone(docker_client, bombed.container.id), "removing the bombed sandbox must take its processes with it"


@pytest.mark.parametrize(
    ("settings", "looser"),
    [
        ({"runtime": "runsc"}, {}),
        ({"mem_limit": "512m", "cpus": 0.5, "pids_limit": 64, "tmpfs_size": "64m"}, {}),
        ({"mem_limit": "2048m", "tmpfs_size": "1g"}, {"mem_limit": "2048m", "tmpfs_size": "1g"}),
        (
            {"network": "bridge", "cpus": 2.0, "pids_limit": 1024},
            {"network": "bridge", "cpus": 2.0, "pids_limit": 1024},
        ),
        ({"runtime": "kata"}, {"runtime": "kata"}),
    ],
    ids=["gvisor", "lower-limits", "more-memory", "network-cpus-processes", "another-runtime"],
)
def test_only_settings_that_confine_less_are_warned_of(settings, looser) -> None:
    assert Hardening(**settings).loosened() == looser
    assert Hardening(**settings).changes() == settings  # control: every one of them differs from the default
