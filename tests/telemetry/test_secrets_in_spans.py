"""No secret leaves in a span: exception messages stay out unless values are captured, and every
text a span carries has the secrets codeward knows of replaced, captured or not."""

from __future__ import annotations

import pytest

from codeward import CodeAgent, ScriptedModel, telemetry, tool
from codeward.redaction import REDACTED
from tests.telemetry.conftest import Span, from_sdk

#: A key in the environment litellm reads: codeward knows it is a secret without being told.
KEY = "sk-test-span-7f3c9e1b2a"
#: A value the user passed, known to nobody as a secret: only the exception-message rule keeps it out.
TOKEN = "tok-9d8c7b6a5e4f"


@tool
def fetch(url: str) -> str:
    """Fetches a URL.

    Args:
        url: where.
    """
    raise ConnectionError(f"cannot reach {url} with key {KEY}")


def _spans(exporter: object, *bodies: str) -> list[Span]:
    model = ScriptedModel([f"<code>\n{body}\n</code>" for body in bodies])
    with CodeAgent(tools=[fetch], model=model, executor="local", verbosity_level=-1) as agent:
        agent.run("go", additional_args={"token": TOKEN})
    return [from_sdk(span) for span in exporter.get_finished_spans()]  # type: ignore[attr-defined]


def _texts(spans: list[Span]) -> str:
    return repr([(span.attributes, span.events) for span in spans])


def test_without_captured_values_no_exception_message_reaches_a_span(memory_exporter, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    spans = _spans(memory_exporter, "fetch(f'https://api.example/{token}')", "int(token)", "final_answer(1)")
    texts = _texts(spans)
    assert TOKEN not in texts and KEY not in texts
    assert "ConnectionError" in texts and "AgentExecutionError" in texts  # the kind of failure is still told


def test_captured_values_have_known_secrets_replaced(instrumented, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    exporter = instrumented(capture_values=True)
    texts = _texts(_spans(exporter, f"print('{KEY}')\nfetch('https://api.example/')", "final_answer(1)"))
    assert KEY not in texts and REDACTED in texts
    assert "cannot reach https://api.example/ with key" in texts  # the rest of the message is kept


def test_control_exception_messages_carry_values_into_spans(instrumented, monkeypatch) -> None:
    """The harm, with values captured: `int(token)`'s message holds the token."""
    exporter = instrumented(capture_values=True)
    assert TOKEN in _texts(_spans(exporter, "int(token)", "final_answer(1)"))


def test_control_without_redaction_a_known_key_reaches_the_spans(instrumented, monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    monkeypatch.setattr(telemetry, "redacted", lambda text: text)
    exporter = instrumented(capture_values=True)
    assert KEY in _texts(_spans(exporter, "fetch('https://api.example/')", "final_answer(1)"))


@pytest.mark.parametrize("name", ["ANTHROPIC_API_KEY", "AWS_SECRET_ACCESS_KEY", "HF_TOKEN", "E2B_API_KEY"])
def test_the_keys_litellm_and_the_sdks_read_are_known(name: str, monkeypatch) -> None:
    from codeward.redaction import redacted

    monkeypatch.setenv(name, KEY)
    assert redacted(f"the key is {KEY}.") == f"the key is {REDACTED}."
