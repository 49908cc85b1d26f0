"""Finding the code or the tool call in what the model wrote."""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from codeward.json_values import read_json

__all__ = ["extract_code", "extract_tool_call"]

_FENCED = re.compile(r"```(?:py|python)?[ \t]*\n(.*?)\n?```", re.DOTALL)


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except SyntaxError:
        return False
    return True


def extract_code(text: str, opening_tag: str, closing_tag: str) -> str:
    """The code between the configured tags; else fenced blocks; else the text itself if it is Python.

    Raises ValueError with the format the model should use.
    """
    pattern = re.compile(re.escape(opening_tag) + r"(.*?)" + re.escape(closing_tag), re.DOTALL)
    blocks = [block.strip("\n") for block in pattern.findall(text)]
    if not blocks and opening_tag != "```python":
        blocks = [block.strip("\n") for block in _FENCED.findall(text)]
    blocks = [block for block in blocks if block.strip()]
    if blocks:
        return "\n\n".join(blocks)
    if text.strip() and _parses(text) and not _looks_like_prose(text):
        return text.strip()
    raise ValueError(
        "No code block was found in your answer. Write a short 'Thought:' and then your Python code "
        f"between {opening_tag} and {closing_tag}, for example:\n"
        f"Thought: I will compute the result.\n{opening_tag}\nresult = 6 * 7\nfinal_answer(result)\n{closing_tag}"
    )


def _looks_like_prose(text: str) -> bool:
    """A bare name or a lone string also parses as Python; neither is code meant to run."""
    body = ast.parse(text).body
    return all(isinstance(node, ast.Expr) and isinstance(node.value, (ast.Name, ast.Constant)) for node in body)


def extract_tool_call(text: str) -> tuple[str, Any]:
    """The first JSON object with a "name" in the text, as (name, arguments)."""
    decoder = json.JSONDecoder()
    for match in re.finditer(r"\{", text):
        try:
            value, _ = decoder.raw_decode(text, match.start())
        except ValueError:  # not JSON, or a number too long for Python's int
            continue
        if isinstance(value, dict) and isinstance(value.get("name"), str):
            arguments = value.get("arguments", value.get("parameters", {}))
            if isinstance(arguments, str):
                try:
                    arguments = read_json(arguments)
                except json.JSONDecodeError:
                    pass
            return value["name"], arguments
    raise ValueError(
        "No tool call was found in your answer. Call a tool with a JSON object such as "
        '{"name": "final_answer", "arguments": {"answer": "..."}}'
    )
