"""The `codeward` command as users run it: a real subprocess, in a scratch directory."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

SRC = str(Path(__file__).resolve().parents[2] / "src")
SAMPLE_TOOLS = str(Path(__file__).with_name("sample_tools.py"))
# No provider keys: every test names its model, and none may reach a provider.
_PROVIDER_KEYS = (
    "CODEWARD_MODEL",
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "GEMINI_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "DEEPSEEK_API_KEY",
)


def command_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _PROVIDER_KEYS}
    return {**env, "PYTHONPATH": SRC, "COLUMNS": "160", **extra}


def command(*args: str) -> list[str]:
    return [sys.executable, "-m", "codeward.cli", *args]


@pytest.fixture
def codeward(tmp_path: Path) -> Callable[..., subprocess.CompletedProcess[str]]:
    """Run `codeward ARGS` in tmp_path and wait for it."""

    def run(*args: str, timeout: float = 120, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command(*args), capture_output=True, text=True, env=command_env(**env), cwd=tmp_path, timeout=timeout
        )

    return run


@pytest.fixture
def spawn(tmp_path: Path) -> Callable[..., subprocess.Popen[str]]:
    """Start `codeward ARGS` in tmp_path without waiting (to signal it)."""
    started: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            command(*args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=command_env(), cwd=tmp_path
        )
        started.append(process)
        return process

    yield start
    for process in started:
        if process.poll() is None:
            process.kill()
        process.communicate()


def code(body: str, thought: str = "I will do it.") -> str:
    """A model response that runs `body`."""
    return f"Thought: {thought}\n<code>\n{body}\n</code>"


def write_script(path: Path, *bodies: str) -> str:
    """A script: model file whose responses run each body in turn; returns its model id."""
    path.write_text(yaml.safe_dump([code(body) for body in bodies]), encoding="utf-8")
    return f"script:{path}"


def children(pid: int) -> list[int]:
    """Every live descendant of `pid` (read from /proc, so nothing but Linux is needed)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat.rsplit(")", 1)[1].split()
            if fields[0] != "Z":
                parents[int(entry.name)] = int(fields[1])
    found, frontier = [], [pid]
    while frontier:
        current = frontier.pop()
        for child, parent in parents.items():
            if parent == current:
                found.append(child)
                frontier.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def files_appear(folder: Path, pattern: str, count: int = 1, seconds: float = 60) -> bool:
    """Wait until `count` files matching `pattern` are in `folder` (a tool such as sample_tools'
    touch made them, so the code has got that far); False if they were not there in `seconds`."""
    deadline = time.monotonic() + seconds
    while len(list(folder.glob(pattern))) < count:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True
