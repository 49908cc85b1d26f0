"""Nothing from a sandbox reaches the terminal raw: what the code prints, its errors, its answer and a
container's labels are shown with their control characters written out, and never read as markup.

The commands run as users run them, in a subprocess, and their output is read as bytes: decoding it
as text would turn a carriage return into a newline and hide it. Each control shows that rich, given
the same text unguarded, passes the raw sequence on (or reads the markup), so these tests can fail.
"""

from __future__ import annotations

import json
import subprocess
import uuid
from collections import Counter
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from rich.control import strip_control_codes
from rich.table import Table
from rich.text import Text

from codeward.batch.display import summary_table
from codeward.batch.recording import BatchOutcome
from codeward.executors.base import SandboxError
from tests.cli.conftest import command, command_env, write_script

#: What hostile code prints, by what it would do to a terminal that obeyed it.
HOSTILE = {
    "clipboard write (OSC 52)": "\x1b]52;c;aGVsbG8=\x07",
    "cursor up and erase line": "\x1b[1A\x1b[2K",
    "hyperlink (OSC 8)": "\x1b]8;;https://attacker.example\x1b\\docs\x1b]8;;\x1b\\",
    "carriage return": "\r",
    "backspace": "\x08",
    "delete": "\x7f",
    "C1 control sequence introducer": "\x9b",
    "bidi override": "\u202e",
    "bidi isolate": "\u2066",
}
#: The bytes a terminal would act on; none may reach it.
RAW = [b"\x1b", b"\x07", b"\r", b"\x08", b"\x7f", "\x9b".encode(), "\u202e".encode(), "\u2066".encode()]
#: What the sandbox's answer would have the user read instead of the real one, 42.
HIDDEN_ANSWER = "42\x1b[1A\x1b[2K\rFinal answer: 41 (verified by a human)"
MARKUP = "[bold red]styled by the sandbox[/]"
LABEL = "[bold red]x[/]\x1b]52;c;aGk=\x07"


def shown(text: str) -> bytes:
    """How the terminal must show `text`: each control written out as Python writes it."""
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text).encode()


def made_by_the_sandbox(text: str) -> str:
    """Python that builds `text` in the sandbox, so the model's code itself holds no escaped form of it."""
    return f"bytes.fromhex({text.encode().hex()!r}).decode()"


def unguarded(renderable: Any, width: int = 200) -> str:
    """What rich writes for `renderable` when nothing makes its text visible."""
    buffer = StringIO()
    Console(file=buffer, width=width).print(renderable)
    return buffer.getvalue()


def run_bytes(folder: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    """`codeward ARGS`, its output kept as the bytes the terminal would receive."""
    return subprocess.run(command(*args), capture_output=True, env=command_env(), cwd=folder, timeout=180)


def docker_engine() -> tuple[Any, str]:
    """The engine and the current sandbox image, or a skip (a failure where CI requires Docker)."""
    try:
        from codeward.executors.docker.images import engine_client, find_image

        client = engine_client()
    except (ImportError, SandboxError) as missing:
        pytest.skip(f"no Docker engine: {missing}")
    image = find_image(client)
    if image is None:
        pytest.skip("the current sandbox image is not built")
    return client, image.id


def hostile_model(folder: Path) -> str:
    """A scripted model whose code prints every sequence, raises with them, then answers with them."""
    prints = "\n".join(f"print({name!r}, {made_by_the_sandbox(text)})" for name, text in HOSTILE.items())
    return write_script(
        folder / "model.yaml",
        f"{prints}\nprint({MARKUP!r})",
        f"raise ValueError({made_by_the_sandbox(''.join(HOSTILE.values()))})",
        f"final_answer({made_by_the_sandbox(HIDDEN_ANSWER)})",
    )


def test_rich_unguarded_passes_the_sequences_and_reads_the_markup() -> None:
    """The control: without codeward's guard, the terminal would get each of these."""
    for text in HOSTILE.values():
        passed_on = strip_control_codes(text)  # rich drops BEL, backspace and CR by itself, nothing more
        assert passed_on in unguarded(Text(text))
    assert "\x1b]52;" in unguarded(Text(HOSTILE["clipboard write (OSC 52)"]))
    assert "styled by the sandbox" in unguarded(MARKUP) and MARKUP not in unguarded(MARKUP)


@pytest.mark.parametrize("executor", ["local", "docker"])  # "docker": CI's hook fails this instead of skipping
def test_run_shows_what_the_sandbox_printed_raised_and_answered_made_visible(tmp_path: Path, executor: str) -> None:
    if executor == "docker":
        docker_engine()
    done = run_bytes(tmp_path, "run", "Report the number.", "--model", hostile_model(tmp_path), "--executor", executor)
    assert done.returncode == 0, done.stdout + done.stderr
    for raw in RAW:
        assert raw not in done.stdout + done.stderr, raw
    for name, text in HOSTILE.items():
        assert f"{name} ".encode() + shown(text) in done.stdout, name
    # the error starts with the clipboard write (a kernel's traceback drops colour-like CSI sequences itself)
    assert b"ValueError: " + shown(HOSTILE["clipboard write (OSC 52)"]) in done.stdout
    assert MARKUP.encode() in done.stdout
    assert b"Final answer: " + shown(HIDDEN_ANSWER) in done.stdout


def test_run_json_keeps_the_answer_exact_for_scripts(tmp_path: Path) -> None:
    """JSON is data for a script, not the terminal: the answer arrives as it was, JSON-escaped."""
    model = write_script(tmp_path / "model.yaml", f"final_answer({made_by_the_sandbox(HIDDEN_ANSWER)})")
    done = run_bytes(tmp_path, "run", "Report the number.", "--model", model, "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    assert b"\x1b" not in done.stdout
    assert json.loads(done.stdout)["output"] == HIDDEN_ANSWER


def test_the_batch_summary_shows_failures_made_visible() -> None:
    hostile = "".join(HOSTILE.values()) + MARKUP
    failure = {"id": f"job {MARKUP}", "status": "error", "steps": 1, "error": f"{hostile}\nsecond line"}
    outcome = BatchOutcome(counts=Counter(error=1), failures=[failure])
    shown_summary = "".join(unguarded(renderable, width=400) for renderable in summary_table(outcome))
    assert not any(raw.decode() in shown_summary for raw in RAW)
    assert shown(hostile).decode() in shown_summary and f"job {MARKUP}" in shown_summary
    assert "second line" not in shown_summary
    unguarded_table = Table("error")
    unguarded_table.add_row(hostile)
    assert "\x1b]52;" in unguarded(unguarded_table) and MARKUP not in unguarded(unguarded_table)


@pytest.mark.parametrize("engine", ["docker"])  # named for CI's hook, which fails this test instead of skipping
def test_sandboxes_ls_shows_a_container_label_made_visible(tmp_path: Path, engine: str) -> None:
    from codeward.executors.docker.owners import OWNER_HOST_LABEL, OWNER_PID_LABEL, SESSION_LABEL

    client, image = docker_engine()
    name = f"codeward-label-test-{uuid.uuid4().hex[:8]}"
    labels = {SESSION_LABEL: name, OWNER_HOST_LABEL: "another-machine", OWNER_PID_LABEL: LABEL}
    container = client.containers.create(image, command=["true"], name=name, labels=labels)
    try:
        listed = run_bytes(tmp_path, "sandboxes", "ls")
    finally:
        container.remove(force=True)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    row = next(line for line in listed.stdout.splitlines() if name.encode() in line)
    assert shown(LABEL) in row
    assert b"\x1b" not in listed.stdout and b"\x07" not in listed.stdout
    assert "\x1b]52;" in unguarded(LABEL) and "[bold red]" not in unguarded(LABEL)
