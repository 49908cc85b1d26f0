"""`executor="docker"`: hardened containers running a Jupyter kernel.

- `executor`: `DockerExecutor`, the kernel executor whose kernel runs in a container;
- `hardening`: the limits a sandbox runs under and the settings a caller may add;
- `sandbox`: starting and watching the containers; `owners`: labelling and reaping them;
- `images`: the sandbox image, built once and found again by a content label;
- `pool`: `SandboxPool`, containers started ahead of need;
- `mounts`: `Mount`, host folders and files shown to a sandbox, checked against the hardening rules.

The Docker SDK loads with the module that needs it, never with this package.
"""

from typing import Any

from codeward.executors.docker.mounts import Mount

__all__ = ["DockerExecutor", "Mount", "SandboxPool"]


def __getattr__(name: str) -> Any:
    if name == "DockerExecutor":
        from codeward.executors.docker.executor import DockerExecutor

        return DockerExecutor
    if name == "SandboxPool":
        from codeward.executors.docker.pool import SandboxPool

        return SandboxPool
    raise AttributeError(f"module 'codeward.executors.docker' has no attribute {name!r}")
