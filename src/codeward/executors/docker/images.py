"""Sandbox images: built once, found again by what they contain.

An image carries the label ``codeward.content``: a hash of the Dockerfile, the
pinned requirements and the version of this build logic. A sandbox asks for the
image whose label matches the tree it runs from, so an image that is current is
never rebuilt and a stale one is never used by accident.

Builds need no network inside Docker and no container registry: the base is
``python:3.12-slim`` when that image is already on the machine, otherwise a
Debian made by ``debootstrap`` and ``docker import`` (``debian-base.sh``); the
Python packages come from wheels that pip downloads on the host for the base's
own Python version and platform, fed to the build in its context.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors
import requests
from docker.models.images import Image

from codeward.executors.base import ExecutorError, SandboxError
from codeward.usage import UsageError

__all__ = [
    "BUILD_COMMAND",
    "CONTENT_LABEL",
    "ENGINE_ERRORS",
    "IMAGE_REPOSITORY",
    "REGISTRY_BASE",
    "EngineUnavailable",
    "SandboxImageError",
    "build_image",
    "content_label",
    "engine_client",
    "ensure_image",
    "find_image",
    "require_image",
]

log = logging.getLogger(__name__)

#: Bump when the build logic below changes what ends up in an image.
BUILD_LOGIC_VERSION = 2
IMAGE_REPOSITORY = "codeward-sandbox"
BASE_REPOSITORY = "codeward-debian-base"
CONTENT_LABEL = "codeward.content"
BASE_LABEL = "codeward.base"
BUILT_ON_LABEL = "codeward.built_on"
# Set in the Dockerfile on the stage that installs the wheels; its image is removed after a build.
BUILD_STAGE_LABEL = "codeward.build_stage"
REGISTRY_BASE = "python:3.12-slim"
BUILD_COMMAND = "codeward images build"
# The files whose bytes decide what an image holds (.dockerignore decides what the build sees).
_CONTENT_FILES = ("Dockerfile", "requirements.txt", ".dockerignore")
_BASE_SCRIPT = "debian-base.sh"
_PROBE = (
    "import platform, sys; print('%d.%d' % sys.version_info[:2], platform.libc_ver()[1] or '0.0', platform.machine())"
)


#: What a call to the engine raises when it fails, or when the engine is gone (the SDK lets
#: connection errors through unwrapped).
ENGINE_ERRORS = (docker.errors.DockerException, requests.RequestException)


class EngineUnavailable(SandboxError, UsageError):
    """No Docker engine answers: a setup step for the user (the message says how), not a fault."""


class SandboxImageError(ExecutorError, UsageError):
    """The sandbox image is missing or could not be built; the message says what to run."""


def source_dir() -> Path:
    """The folder holding the Dockerfile: `$CODEWARD_SANDBOX_IMAGES`, else the one shipped in the package."""
    configured = os.environ.get("CODEWARD_SANDBOX_IMAGES")
    folder = Path(configured) if configured else Path(__file__).resolve().parents[2] / "sandbox_images"
    if not (folder / "Dockerfile").is_file():
        raise SandboxImageError(
            f"no sandbox Dockerfile in {folder}; set CODEWARD_SANDBOX_IMAGES to the folder "
            "that holds codeward's sandbox_images (Dockerfile, requirements.txt, debian-base.sh)"
        )
    return folder


def cache_dir() -> Path:
    """Where downloaded wheels and Debian packages are kept between builds."""
    configured = os.environ.get("CODEWARD_CACHE_DIR")
    if configured:
        return Path(configured)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "codeward"


def _digest(parts: Iterable[bytes]) -> str:
    sha = hashlib.sha256()
    for part in parts:
        sha.update(len(part).to_bytes(8, "big"))
        sha.update(part)
    return sha.hexdigest()[:16]


def content_label(folder: Path | None = None) -> str:
    """The label an image built from `folder` carries; it changes exactly when the content does."""
    folder = folder or source_dir()
    parts = [str(BUILD_LOGIC_VERSION).encode()]
    parts += [(folder / name).read_bytes() if (folder / name).exists() else b"" for name in _CONTENT_FILES]
    return _digest(parts)


def engine_client() -> docker.DockerClient:
    """A client for the Docker engine the environment points at, or an error that says how to start one."""
    try:
        client = docker.from_env()
        client.ping()
    except ENGINE_ERRORS as error:
        where = f" at {os.environ['DOCKER_HOST']} (DOCKER_HOST)" if os.environ.get("DOCKER_HOST") else ""
        raise EngineUnavailable(
            f"the Docker engine{where} does not answer ({error}); start it (on Debian: "
            "apt-get install -y docker.io && dockerd &) or point DOCKER_HOST at a running one",
            state_lost=False,
        ) from error
    return client


def find_image(client: docker.DockerClient, label: str | None = None) -> Image | None:
    """The newest local image whose content label is `label` (default: the current tree's)."""
    label = label or content_label()
    images = client.images.list(filters={"label": f"{CONTENT_LABEL}={label}"})
    return max(images, key=lambda image: image.attrs.get("Created", ""), default=None)


def require_image(client: docker.DockerClient) -> Image:
    """The current sandbox image; its absence is an error that names the command that builds it."""
    label = content_label()
    image = find_image(client, label)
    if image is None:
        raise SandboxImageError(
            f"no current codeward sandbox image (content label {label}) on this Docker engine; "
            f"build it with `{BUILD_COMMAND}`, "
            "or pass image= to use your own"
        )
    return image


def ensure_image(client: docker.DockerClient, base: str = "auto") -> Image:
    """The current sandbox image, built first if it is missing."""
    return find_image(client) or build_image(client, base=base)


@dataclass(frozen=True)
class _BasePython:
    """What a base image's Python needs from a wheel: its version and platform."""

    version: str  # "3.11"
    glibc: str  # "2.36"
    machine: str  # "x86_64"

    @property
    def abi(self) -> str:
        return "cp" + self.version.replace(".", "")

    def platforms(self) -> list[str]:
        """Every manylinux tag this glibc runs, newest first (pip does not expand them itself)."""
        major, minor = (int(n) for n in self.glibc.split(".")[:2])
        if major != 2 or minor < 17:
            raise SandboxImageError(f"the base image's C library (glibc {self.glibc}) is too old for manylinux wheels")
        tags = [f"manylinux_2_{n}_{self.machine}" for n in range(minor, 16, -1)]
        return [*tags, f"manylinux2014_{self.machine}", f"linux_{self.machine}"]


def build_image(
    client: docker.DockerClient, base: str = "auto", folder: Path | None = None, repository: str = IMAGE_REPOSITORY
) -> Image:
    """Build the sandbox image with no network inside the build, and label it by its content.

    `base` is an image name, ``"debian"`` for a debootstrap base, or ``"auto"``:
    python:3.12-slim when it is already local, else the debootstrap base. `folder`
    and `repository` build another image the same way (a variant of the sandbox).
    """
    folder = folder or source_dir()
    label = content_label(folder)
    base_image = _resolve_base(client, base, folder)
    python = _probe_python(client, base_image)
    wheels = _download_wheels(folder / "requirements.txt", python, label)
    tag = f"{repository}:{label}"
    log.info("building %s on %s (Python %s) from %s", tag, base_image, python.version, folder)
    with tempfile.TemporaryDirectory(prefix="codeward-build-") as context:
        _fill_context(Path(context), folder, wheels)
        try:
            image, _ = client.images.build(
                path=context,
                tag=tag,
                buildargs={"BASE_IMAGE": base_image},
                labels={CONTENT_LABEL: label, BUILT_ON_LABEL: base_image},
                network_mode="none",
                pull=False,
                rm=True,
                forcerm=True,
            )
        except docker.errors.BuildError as error:
            tail = "".join(str(chunk.get("stream") or chunk.get("error") or "") for chunk in error.build_log)
            raise SandboxImageError(f"building {tag} failed: {error.msg}\n{tail[-3000:]}") from error
    client.images.prune(filters={"dangling": True, "label": BUILD_STAGE_LABEL})
    return image


def _resolve_base(client: docker.DockerClient, base: str, folder: Path) -> str:
    if base == "debian":
        return _ensure_debian_base(client, folder)
    if base != "auto":
        try:
            client.images.get(base)
        except docker.errors.ImageNotFound as error:
            raise SandboxImageError(f"base image {base!r} is not on this engine; pull or build it first") from error
        return base
    try:
        client.images.get(REGISTRY_BASE)
        return REGISTRY_BASE
    except docker.errors.ImageNotFound:
        return _ensure_debian_base(client, folder)


def _ensure_debian_base(client: docker.DockerClient, folder: Path) -> str:
    """A debootstrap base made by `debian-base.sh`, reused while that script is unchanged."""
    script = folder / _BASE_SCRIPT
    label = _digest([script.read_bytes()])
    tag = f"{BASE_REPOSITORY}:{label}"
    try:
        if client.images.get(tag).labels.get(BASE_LABEL) == label:
            return tag
    except docker.errors.ImageNotFound:
        pass
    log.info("making the Debian base %s with debootstrap", tag)
    env = {**os.environ, "CODEWARD_CACHE_DIR": str(cache_dir())}
    done = subprocess.run(["bash", str(script), tag, label], env=env, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SandboxImageError(
            f"making the Debian base image failed (it needs root, debootstrap and a Debian mirror):\n"
            f"{done.stderr[-3000:]}"
        )
    return tag


def _probe_python(client: docker.DockerClient, image: str) -> _BasePython:
    output = client.containers.run(image, ["python3", "-c", _PROBE], network_mode="none", remove=True)
    version, glibc, machine = output.decode().split()
    return _BasePython(version, glibc, machine)


def _download_wheels(requirements: Path, python: _BasePython, label: str) -> Path:
    """Wheels for every requirement, for the base's Python; downloaded once per content label."""
    target = cache_dir() / "wheels" / f"{label}-{python.abi}-{python.machine}"
    complete = target / ".complete"
    if complete.exists():
        return target
    shutil.rmtree(target, ignore_errors=True)
    command = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--quiet",
        "--disable-pip-version-check",
        "--only-binary=:all:",
        "--dest",
        str(target),
        "--requirement",
        str(requirements),
        "--python-version",
        python.version,
        "--implementation",
        "cp",
        "--abi",
        python.abi,
    ]
    command += [arg for platform in python.platforms() for arg in ("--platform", platform)]
    log.info("downloading wheels for Python %s on %s", python.version, python.machine)
    done = subprocess.run(command, check=False, capture_output=True, text=True)
    if done.returncode != 0:
        raise SandboxImageError(f"pip could not download the sandbox's wheels:\n{done.stderr[-3000:]}")
    complete.touch()
    return target


def _fill_context(context: Path, folder: Path, wheels: Path) -> None:
    """The build context: the content files and the wheels, and nothing else from the tree."""
    for name in _CONTENT_FILES:
        if (folder / name).exists():
            shutil.copy2(folder / name, context / name)
    (context / "wheels").mkdir()
    for wheel in wheels.glob("*.whl"):
        try:
            os.link(wheel, context / "wheels" / wheel.name)
        except OSError:
            shutil.copy2(wheel, context / "wheels" / wheel.name)
