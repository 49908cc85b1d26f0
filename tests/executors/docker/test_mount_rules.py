"""The rules a docker sandbox's mounts are checked against, one test (with its control) per rule.

No container starts here: `checked_mounts` runs before any does. Each test asserts the reason
the rule gives, so that removing the rule alone fails its test even where another rule would
still refuse the same path for another reason.
"""

from __future__ import annotations

import os
import socket
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from codeward.executors.docker.mounts import Mount, checked_mounts, parse_mount_option


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    made = tmp_path / "data"
    made.mkdir()
    (made / "file.txt").write_text("hello")
    return made


@pytest.fixture
def unix_socket(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "s" / "a.sock"
    path.parent.mkdir()
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(path))
    yield path
    server.close()


# -- what a mount may be written as ---------------------------------------------------------


def test_a_path_is_read_only_and_a_mount_or_a_dict_may_be_writable(folder: Path) -> None:
    checked = checked_mounts(
        {
            "/a": str(folder),
            "/b": folder,
            "/c": Mount(str(folder), "rw"),
            "/d": {"source": str(folder), "mode": "rw"},
            "/e": {"source": str(folder)},
        }
    )
    assert {target: mount.mode for target, mount in checked.items()} == {
        "/a": "ro",
        "/b": "ro",
        "/c": "rw",
        "/d": "rw",
        "/e": "ro",
    }
    assert {mount.source for mount in checked.values()} == {os.path.realpath(folder)}


def test_a_mode_other_than_ro_or_rw_is_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="mode must be 'ro'"):
        checked_mounts({"/data": {"source": str(folder), "mode": "rwx"}})
    with pytest.raises(ValueError, match="mode must be 'ro'"):
        checked_mounts({"/data": Mount(str(folder), "RW")})  # type: ignore[arg-type]
    assert checked_mounts({"/data": Mount(str(folder), "rw")})["/data"].mode == "rw"  # control


def test_a_dict_with_other_keys_is_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="unknown key"):
        checked_mounts({"/data": {"source": str(folder), "propagation": "shared"}})


def test_a_source_that_is_not_a_path_is_refused(folder: Path) -> None:
    for source in (None, 3, "", {"mode": "rw"}):
        with pytest.raises(ValueError, match="must be a host path"):
            checked_mounts({"/data": source})  # type: ignore[dict-item]


def test_mounts_that_are_not_a_mapping_are_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="must map sandbox paths"):
        checked_mounts([("/data", str(folder))])  # type: ignore[arg-type]


# -- targets ------------------------------------------------------------------------------------


def test_a_relative_target_is_refused(folder: Path) -> None:
    for target in ("data", "./data", "", 7):
        with pytest.raises(ValueError, match="must be absolute"):
            checked_mounts({target: str(folder)})  # type: ignore[dict-item]


def test_a_target_with_dot_dot_is_refused(folder: Path) -> None:
    # /data/../proc would land on /proc; /data/.. on /: both refused by this rule first.
    for target in ("/data/../proc", "/data/..", "/home/sandbox/../../etc"):
        with pytest.raises(ValueError, match=r"may not hold '\.\.'"):
            checked_mounts({target: str(folder)})
    assert "/data..x" in checked_mounts({"/data..x": str(folder)})  # control: a name with dots


@pytest.mark.parametrize(
    "target",
    [
        "/proc",
        "/proc/1",
        "/sys",
        "/dev/shm",
        "/usr",
        "/usr/local/lib",
        "/bin",
        "/lib64",
        "/etc",
        "/etc/passwd",
        "/opt/sandbox/bin",
        "/run/codeward",
        "/run/codeward-egress",
        "/opt/codeward-packages/x",
    ],
)
def test_a_target_over_the_sandboxs_own_folders_is_refused(folder: Path, target: str) -> None:
    with pytest.raises(ValueError, match="would cover the sandbox's own"):
        checked_mounts({target: str(folder)})


@pytest.mark.parametrize("target", ["/", "//", "/run", "/opt", "/opt/"])
def test_a_target_that_would_hide_the_sandboxs_own_folders_is_refused(folder: Path, target: str) -> None:
    with pytest.raises(ValueError, match="would hide"):
        checked_mounts({target: str(folder)})


@pytest.mark.parametrize("target", ["/tmp", "/home/sandbox", "/home/sandbox/"])
def test_a_target_that_replaces_the_sandboxs_writable_folders_is_refused(folder: Path, target: str) -> None:
    with pytest.raises(ValueError, match="would replace the sandbox's own writable folder"):
        checked_mounts({target: str(folder)})


def test_targets_of_ones_own_are_taken_normalised(folder: Path) -> None:
    checked = checked_mounts(
        {"/data": str(folder), "/home/sandbox/in": str(folder), "/tmp/in/": str(folder), "/run/mine": str(folder)}
    )
    assert set(checked) == {"/data", "/home/sandbox/in", "/tmp/in", "/run/mine"}


def test_two_mounts_at_one_target_are_refused(folder: Path) -> None:
    with pytest.raises(ValueError, match="two mounts at '/data'"):
        checked_mounts({"/data": str(folder), "/data/": str(folder)})


# -- sources -------------------------------------------------------------------------------------


def test_a_source_that_does_not_exist_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="cannot be read"):
        checked_mounts({"/data": str(tmp_path / "missing")})
    with pytest.raises(ValueError, match="cannot be read"):  # a dangling link too: Docker would make the folder
        (tmp_path / "dangling").symlink_to(tmp_path / "missing")
        checked_mounts({"/data": str(tmp_path / "dangling")})


def test_the_hosts_root_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="is the host's root"):
        checked_mounts({"/data": "/"})
    (tmp_path / "root").symlink_to("/")
    with pytest.raises(ValueError, match="is the host's root"):
        checked_mounts({"/data": str(tmp_path / "root")})
    with pytest.raises(ValueError, match="is the host's root"):
        checked_mounts({"/data": "/usr/.."})


@pytest.mark.parametrize("source", ["/proc", "/proc/self", "/sys", "/sys/kernel", "/dev", "/dev/shm", "/boot"])
def test_proc_sys_dev_and_boot_are_refused(source: str) -> None:
    if not os.path.exists(source):
        pytest.skip(f"{source} does not exist on this host")
    with pytest.raises(ValueError, match="which no sandbox may see"):
        checked_mounts({"/data": source})


def test_a_link_on_the_host_is_followed_before_the_rules(tmp_path: Path, folder: Path) -> None:
    (tmp_path / "innocent").symlink_to("/proc")
    (tmp_path / "nested").mkdir()
    (tmp_path / "nested" / "deeper").symlink_to("/proc/self")
    for source in (tmp_path / "innocent", tmp_path / "nested" / "deeper", tmp_path / "innocent" / "self"):
        with pytest.raises(ValueError, match="under the host's /proc"):
            checked_mounts({"/data": str(source)})
    (tmp_path / "fine").symlink_to(folder)  # control: a link to a folder of one's own is mounted as its target
    assert checked_mounts({"/data": str(tmp_path / "fine")})["/data"].source == os.path.realpath(folder)


def test_a_socket_or_a_fifo_is_refused(tmp_path: Path, unix_socket: Path) -> None:
    with pytest.raises(ValueError, match="neither a folder nor a regular file"):
        checked_mounts({"/data": str(unix_socket)})
    (tmp_path / "link").symlink_to(unix_socket)
    with pytest.raises(ValueError, match="neither a folder nor a regular file"):
        checked_mounts({"/data": str(tmp_path / "link")})
    os.mkfifo(tmp_path / "fifo")
    with pytest.raises(ValueError, match="neither a folder nor a regular file"):
        checked_mounts({"/data": str(tmp_path / "fifo")})
    assert checked_mounts({"/data": str(unix_socket.parent)})  # control: a folder that holds some socket


def test_the_engines_socket_and_its_folder_are_refused() -> None:
    engine = next((path for path in ("/var/run/docker.sock", "/run/docker.sock") if os.path.exists(path)), None)
    if engine is None:
        pytest.skip("no Docker engine socket at its usual place")
    with pytest.raises(ValueError, match="neither a folder nor a regular file"):
        checked_mounts({"/data": engine})
    for holder in ("/run", "/var/run"):
        with pytest.raises(ValueError, match="holds the Docker engine's socket"):
            checked_mounts({"/data": holder})


def test_the_folder_of_docker_hosts_socket_is_refused(
    tmp_path: Path, unix_socket: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert checked_mounts({"/data": str(unix_socket.parent)})  # control: not the engine's socket (yet)
    monkeypatch.setenv("DOCKER_HOST", f"unix://{unix_socket}")
    for holder in (unix_socket.parent, tmp_path):
        with pytest.raises(ValueError, match="holds the Docker engine's socket"):
            checked_mounts({"/data": str(holder)})
    (tmp_path / "elsewhere").mkdir()
    assert checked_mounts({"/data": str(tmp_path / "elsewhere")})  # control: a folder beside it


def test_the_temporary_root_that_holds_codewards_folders_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    temp = tmp_path / "temp"
    (temp / "mine").mkdir(parents=True)
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    for holder in (temp, tmp_path):
        with pytest.raises(ValueError, match="holds the temporary root"):
            checked_mounts({"/data": str(holder)})
    assert checked_mounts({"/data": str(temp / "mine")})  # control: a folder of one's own inside it


@pytest.mark.parametrize("prefix", ["codeward-ipc-", "codeward-egress-"])
def test_codewards_folders_for_other_sandboxes_are_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, prefix: str
) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    (tmp_path / f"{prefix}abc" / "sandbox").mkdir(parents=True)
    (tmp_path / "codeward-mine").mkdir()
    for source in (tmp_path / f"{prefix}abc", tmp_path / f"{prefix}abc" / "sandbox"):
        with pytest.raises(ValueError, match="which belongs to a sandbox"):
            checked_mounts({"/data": str(source)})
    assert checked_mounts({"/data": str(tmp_path / "codeward-mine")})  # control


def test_the_egress_proxys_home_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "cache"
    (cache / "codeward" / "egress-proxy" / "bin").mkdir(parents=True)
    (cache / "other").mkdir()
    monkeypatch.setenv("XDG_CACHE_HOME", str(cache))
    for source in (cache, cache / "codeward", cache / "codeward" / "egress-proxy" / "bin"):
        with pytest.raises(ValueError, match="egress proxy's home"):
            checked_mounts({"/data": str(source)})
    assert checked_mounts({"/data": str(cache / "other")})  # control


def test_a_writable_mount_the_sandboxs_uid_cannot_write_is_refused(folder: Path) -> None:
    uid = 61234
    folder.chmod(0o755)
    with pytest.raises(ValueError, match=f"runs as uid {uid}, which cannot write"):
        checked_mounts({"/data": Mount(str(folder), "rw")}, (uid, uid))
    assert checked_mounts({"/data": str(folder)}, (uid, uid))  # control: read-only needs no write access
    if os.getuid() == 0:
        os.chown(folder, uid, uid)
        assert checked_mounts({"/data": Mount(str(folder), "rw")}, (uid, uid))  # control: its owner
        os.chown(folder, 0, 0)
    folder.chmod(0o777)
    assert checked_mounts({"/data": Mount(str(folder), "rw")}, (uid, uid))  # control: anyone may write


# -- the command line's form ------------------------------------------------------------------------


def test_the_mount_option_reads_target_source_and_mode(tmp_path: Path) -> None:
    assert parse_mount_option("/data=in", tmp_path) == ("/data", Mount(str(tmp_path / "in"), "ro"))
    assert parse_mount_option("/out=/srv/out:rw") == ("/out", Mount("/srv/out", "rw"))
    assert parse_mount_option("/out=/srv/out:ro") == ("/out", Mount("/srv/out", "ro"))
    assert parse_mount_option("/x=/srv/a:b") == ("/x", Mount("/srv/a:b", "ro"))  # a colon in a name
    for option in ("/data", "=/srv", "/data="):
        with pytest.raises(ValueError, match="write TARGET=SOURCE"):
            parse_mount_option(option)


# -- gVisor's registration --------------------------------------------------------------------------


def test_gvisor_that_would_keep_a_writable_mounts_writes_from_the_host_is_refused() -> None:
    from codeward.executors.docker.gvisor import RUNSC_ARGS, mounts_problem

    def runtimes(*extra: str) -> dict[str, Any]:
        return {"runsc": {"path": "/usr/bin/runsc", "runtimeArgs": [*RUNSC_ARGS, *extra]}}

    for flags in (("--overlay2=all:memory",), ("--overlay",), ("--overlay2", "all:/var/cache")):
        problem = mounts_problem(runtimes(*flags), "runsc", {"/out": "rw"})
        assert problem is not None and "never reach the host" in str(problem)
        assert mounts_problem(runtimes(*flags), "runsc", {"/data": "ro"}) is None  # control: read-only
    exclusive = mounts_problem(runtimes("--file-access-mounts=exclusive"), "runsc", {"/data": "ro"})
    assert exclusive is not None and "not see the host's changes" in str(exclusive)
    assert mounts_problem(runtimes("--overlay2=root:memory"), "runsc", {"/out": "rw"}) is None  # control: root only
    assert mounts_problem(runtimes(), "runsc", {"/out": "rw"}) is None  # control: the registration codeward gives
    assert mounts_problem(runtimes("--overlay"), "runsc", {}) is None  # control: no mounts
    assert mounts_problem({"runc": {"path": "runc"}}, "runc", {"/out": "rw"}) is None  # control: not gVisor
