"""The sandbox image: labelled by its content, found again, built offline, never rebuilt when current."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import docker
import pytest
from docker.models.images import ImageCollection

from codeward.executors.docker.executor import DockerExecutor
from codeward.executors.docker.images import (
    BUILD_COMMAND,
    CONTENT_LABEL,
    SandboxImageError,
    build_image,
    content_label,
    ensure_image,
    find_image,
    require_image,
    source_dir,
)


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """A copy of sandbox_images/ that a test may change."""
    return Path(shutil.copytree(source_dir(), tmp_path / "sandbox_images", ignore=shutil.ignore_patterns("wheels")))


def test_the_label_follows_the_content_and_nothing_else(tree_copy: Path) -> None:
    assert content_label(tree_copy) == content_label(source_dir())
    (tree_copy / "debian-base.sh").write_text("# the base script is labelled on its own\n")
    assert content_label(tree_copy) == content_label(source_dir())
    (tree_copy / "requirements.txt").write_text((tree_copy / "requirements.txt").read_text() + "six==1.17.0\n")
    changed_requirements = content_label(tree_copy)
    assert changed_requirements != content_label(source_dir())
    (tree_copy / "Dockerfile").write_text((tree_copy / "Dockerfile").read_text() + "\n# a comment\n")
    assert content_label(tree_copy) not in (changed_requirements, content_label(source_dir()))


def test_the_current_image_is_found_by_its_label(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    image = find_image(docker_client)
    assert image is not None and image.id == sandbox_image
    assert image.labels[CONTENT_LABEL] == content_label()
    assert require_image(docker_client).id == sandbox_image


def test_the_sandbox_user_can_reach_the_whole_tree(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    """A debootstrap base made in a 0700 temporary folder had a 0700 root: under vfs no sandbox could start."""
    probe = "import os, stat; print(oct(stat.S_IMODE(os.stat('/').st_mode)), os.getuid())"
    output = docker_client.containers.run(sandbox_image, ["python3", "-c", probe], network_mode="none", remove=True)
    mode, uid = output.decode().split()
    assert (mode, uid != "0") == ("0o755", True)


def test_the_image_holds_the_pinned_packages_and_runs_as_non_root(
    docker_client: docker.DockerClient, sandbox_image: str
) -> None:
    pins = dict(
        line.split("==")
        for line in (source_dir() / "requirements.txt").read_text().splitlines()
        if line and not line.startswith("#")
    )
    probe = (
        "import importlib.metadata as m, os, json\n"
        f"print(json.dumps([os.getuid(), {{n: m.version(n) for n in {sorted(pins)!r}}}, os.path.exists('/build')]))"
    )
    output = docker_client.containers.run(sandbox_image, ["python3", "-c", probe], network_mode="none", remove=True)
    uid, versions, has_build_folder = json.loads(output)
    assert uid == 1000
    assert versions == pins
    assert has_build_folder is False  # the wheels stayed in the build stage


def test_a_missing_image_names_the_command_that_builds_it(
    docker_client: docker.DockerClient, tree_copy: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tree_copy / "Dockerfile").write_text((tree_copy / "Dockerfile").read_text() + "\n# never built\n")
    monkeypatch.setenv("CODEWARD_SANDBOX_IMAGES", str(tree_copy))
    with pytest.raises(SandboxImageError, match=f"build it with `{BUILD_COMMAND}`"):
        require_image(docker_client)


def test_a_current_image_is_never_rebuilt(docker_client: docker.DockerClient, sandbox_image: str) -> None:
    # A build would fail on this base; the current image is returned without one.
    assert ensure_image(docker_client, base="codeward-no-such-base:0").id == sandbox_image


def test_a_variant_builds_offline_from_host_wheels(
    docker_client: docker.DockerClient, tree_copy: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A small image from the same Dockerfile: wheels downloaded on the host, no network in the build."""
    (tree_copy / "requirements.txt").write_text("pip==26.3\nsix==1.17.0\n")
    monkeypatch.setenv("CODEWARD_CACHE_DIR", str(tmp_path / "cache"))
    image = build_image(docker_client, folder=tree_copy, repository="codeward-test-variant")
    try:
        assert image.labels[CONTENT_LABEL] == content_label(tree_copy)
        assert image.tags == [f"codeward-test-variant:{content_label(tree_copy)}"]
        assert find_image(docker_client, content_label(tree_copy)).id == image.id
        output = docker_client.containers.run(
            image.id, ["python3", "-c", "import six; print(six.__version__)"], network_mode="none", remove=True
        )
        assert output == b"1.17.0\n"
        wheels = list((tmp_path / "cache" / "wheels").glob("*/six-1.17.0-*.whl"))
        assert len(wheels) == 1
    finally:
        docker_client.images.remove(image.id, force=True)


def test_a_named_image_missing_from_the_engine_is_never_pulled(
    docker_client: docker.DockerClient, sandbox_image: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pulled: list[str] = []
    monkeypatch.setattr(ImageCollection, "pull", lambda self, name, *args, **kwargs: pulled.append(name))
    with pytest.raises(SandboxImageError, match=r"'codeward-absent:1' is not on this Docker engine.*docker pull"):
        DockerExecutor(image="codeward-absent:1", docker_client=docker_client)
    assert pulled == []
    with DockerExecutor(image=sandbox_image, docker_client=docker_client) as executor:  # one it has starts
        assert executor.run("1 + 1").output == 2
