"""Questions the tests ask the engine about containers."""

from __future__ import annotations

import docker


def gone(client: docker.DockerClient, container_id: str) -> bool:
    """Whether the engine no longer has this container, running or not."""
    try:
        client.containers.get(container_id)
    except docker.errors.NotFound:
        return True
    return False
