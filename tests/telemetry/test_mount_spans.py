"""A docker sandbox's mounts in its code blocks' spans: each target with its mode, never the host path."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from codeward import CodeAgent, ScriptedModel, tracing
from codeward.platform.run_files import plain_settings
from tests.telemetry.conftest import from_sdk


def test_code_blocks_name_the_mounts_and_not_their_host_paths(
    memory_exporter: InMemorySpanExporter, tmp_path: Path
) -> None:
    docker = pytest.importorskip("docker")
    try:
        docker.from_env().ping()
    except docker.errors.DockerException as error:
        pytest.skip(f"no Docker engine: {error}")
    from codeward.executors import DockerExecutor, Mount

    folder = tmp_path / "private-host-folder"
    folder.mkdir()
    (folder / "x").write_text("7")
    for each in (tmp_path, folder):
        os.chmod(each, 0o755)
    executor = DockerExecutor(mounts={"/data": str(folder), "/home/sandbox/x": Mount(str(folder / "x"))})
    model = ScriptedModel(["<code>\nfinal_answer(int(open('/data/x').read()))\n</code>"])
    with CodeAgent(tools=[], model=model, executor=executor) as agent:
        assert agent.run("Read it.") == 7
        assert plain_settings(agent.executor)["mounts"] == {"/data": "ro", "/home/sandbox/x": "ro"}
    spans = [from_sdk(span) for span in memory_exporter.get_finished_spans()]
    (block,) = [span for span in spans if span.name == "execute_code"]
    assert tuple(block.attributes[tracing.SANDBOX_MOUNTS]) == ("/data:ro", "/home/sandbox/x:ro")
    assert str(folder) not in json.dumps([span.attributes for span in spans], default=str)


def test_a_sandbox_without_mounts_says_nothing_of_them(memory_exporter: InMemorySpanExporter) -> None:
    model = ScriptedModel(["<code>\nfinal_answer(1)\n</code>"])
    with CodeAgent(tools=[], model=model, executor="local") as agent:
        assert agent.run("Go.") == 1
        assert "mounts" not in plain_settings(agent.executor)
    (block,) = [from_sdk(span) for span in memory_exporter.get_finished_spans() if span.name == "execute_code"]
    assert tracing.SANDBOX_MOUNTS not in block.attributes
