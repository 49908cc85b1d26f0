"""Run code in a sandbox's kernel from the host and get back what it printed."""

from __future__ import annotations

import json
from typing import Any

from jupyter_client.blocking.client import BlockingKernelClient


def run_code(client: BlockingKernelClient, code: str, timeout: float = 30) -> str:
    """Run `code` and return its stdout; a failure in the kernel fails the caller with its traceback."""
    printed: list[str] = []

    def collect(message: dict[str, Any]) -> None:
        if message["msg_type"] == "stream":
            printed.append(message["content"]["text"])

    reply = client.execute_interactive(code, output_hook=collect, timeout=timeout)
    content = reply["content"]
    if content["status"] != "ok":
        raise AssertionError(
            f"{content.get('ename')}: {content.get('evalue')}\n" + "\n".join(content.get("traceback", []))
        )
    return "".join(printed)


def run_json(client: BlockingKernelClient, code: str, timeout: float = 30) -> Any:
    """Run `code`, whose last line prints one JSON document, and return that document."""
    return json.loads(run_code(client, code, timeout).strip().splitlines()[-1])


def run_json_unhardened(client: Any, image: str, code: str, **run_options: Any) -> Any:
    """The control of a hardening attack: `code` in a plain `docker run` of the same image, as root, with
    Docker's defaults (a network, capabilities, a writable root). The attack must work there."""
    output = client.containers.run(image, ["python3", "-c", code], user="0", remove=True, **run_options)
    return json.loads(output.decode().strip().splitlines()[-1])
