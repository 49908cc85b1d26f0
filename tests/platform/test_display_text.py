"""The agent's own display, as library users see it on a real terminal: what the sandbox printed, a
tool returned, the code raised and the model answered is shown with its control characters written
out. Each test's control prints the same text through rich unguarded and gets the raw sequence."""

from __future__ import annotations

import json
from io import StringIO

from rich.console import Console
from rich.text import Text

from codeward import AgentLogger, CodeAgent, ScriptedModel, ToolCallingAgent, tool
from codeward.terminal_text import visible

CLIPBOARD_WRITE = "\x1b]52;c;aGVsbG8=\x07"
HIDDEN_ANSWER = "42\x1b[1A\x1b[2K\rFinal answer: 41 (verified by a human)"
BIDI_OVERRIDE = "\u202e"
#: What a terminal acts on (rich's own colours aside, which start with "\x1b[" and a digit or "m").
RAW = ("\x1b]", "\x1b[1A", "\x1b[2K", "\r", "\x07", BIDI_OVERRIDE)


@tool
def fetch_page(url: str) -> str:
    """A web page's text, as a hostile page would return it.

    Args:
        url: The page's address.
    """
    return f"page {CLIPBOARD_WRITE} {BIDI_OVERRIDE}"


def terminal() -> tuple[Console, StringIO]:
    """A console that believes it writes to a terminal, and what it wrote."""
    buffer = StringIO()
    return Console(file=buffer, force_terminal=True, width=200), buffer


def code(body: str) -> str:
    return f"Thought: I will do it.\n<code>\n{body}\n</code>"


def made_by_the_sandbox(text: str) -> str:
    """Python that builds `text` in the sandbox, so the model's code itself holds no escaped form of it."""
    return f"bytes.fromhex({text.encode().hex()!r}).decode()"


def assert_made_visible(shown: str, *texts: str) -> None:
    assert not [raw for raw in RAW if raw in shown], shown
    for text in texts:
        assert visible(text) in shown, text


def test_rich_unguarded_on_a_terminal_passes_the_sequences():
    """The control: printed as a plain `Text`, the clipboard write and the override reach the terminal."""
    console, buffer = terminal()
    console.print(Text(f"{CLIPBOARD_WRITE.rstrip(chr(7))} {BIDI_OVERRIDE}"))
    assert "\x1b]52;c;" in buffer.getvalue() and BIDI_OVERRIDE in buffer.getvalue()


def test_the_code_agent_shows_observations_errors_and_answer_made_visible():
    console, buffer = terminal()
    model = ScriptedModel(
        [
            code(f"print(fetch_page('https://example.org'), {made_by_the_sandbox(CLIPBOARD_WRITE)})"),
            code(f"raise ValueError({made_by_the_sandbox(CLIPBOARD_WRITE)})"),
            code(f"final_answer({made_by_the_sandbox(HIDDEN_ANSWER)})"),
        ]
    )
    with CodeAgent(tools=[fetch_page], model=model, executor="local", logger=AgentLogger(console=console)) as agent:
        assert agent.run("Read the page.") == HIDDEN_ANSWER
    shown = buffer.getvalue()
    assert_made_visible(shown, f"page {CLIPBOARD_WRITE} {BIDI_OVERRIDE}", f"ValueError: {CLIPBOARD_WRITE}")
    assert visible(f"Final answer: {HIDDEN_ANSWER}") in Text.from_ansi(shown).plain

    replayed, replay_buffer = terminal()
    agent.logger = AgentLogger(console=replayed)
    agent.replay()
    assert_made_visible(replay_buffer.getvalue(), f"ValueError: {CLIPBOARD_WRITE}")


def test_the_tool_calling_agent_shows_tool_outputs_made_visible():
    console, buffer = terminal()
    calls = [
        {"name": "fetch_page", "arguments": {"url": "https://example.org"}},
        {"name": "final_answer", "arguments": {"answer": HIDDEN_ANSWER}},
    ]
    model = ScriptedModel([f"Action:\n{json.dumps(call)}" for call in calls])
    agent = ToolCallingAgent(tools=[fetch_page], model=model, logger=AgentLogger(console=console))
    assert agent.run("Read the page.") == HIDDEN_ANSWER
    assert_made_visible(buffer.getvalue(), f"page {CLIPBOARD_WRITE} {BIDI_OVERRIDE}")
    assert visible(f"Final answer: {HIDDEN_ANSWER}") in Text.from_ansi(buffer.getvalue()).plain
