"""Prompt templates: YAML shipped with the package, rendered with Jinja2 in strict mode.

Strict mode makes a misspelt variable an error at construction, instead of a
silently empty hole in what the model reads.
"""

from __future__ import annotations

import copy
import functools
from importlib import resources
from typing import Any

import jinja2
import yaml

__all__ = ["REQUIRED_KEYS", "load_prompt_templates", "render", "validate_prompt_templates"]

REQUIRED_KEYS: dict[str, tuple[str, ...]] = {
    "system_prompt": (),
    "planning": ("initial_plan", "update_plan_pre_messages", "update_plan_post_messages"),
    "managed_agent": ("task", "report"),
    "final_answer": ("pre_messages", "post_messages"),
}

_ENVIRONMENT = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=False)


def load_prompt_templates(name: str) -> dict[str, Any]:
    """The package's own templates for an agent kind (``"code_agent"``, ``"toolcalling_agent"``): a copy
    of its own, which the caller may change, of what is read once a process (forty agents started
    together on one event loop would otherwise parse the same YAML forty times)."""
    return copy.deepcopy(_parsed_templates(name))


@functools.cache
def _parsed_templates(name: str) -> dict[str, Any]:
    text = resources.files("codeward.prompts").joinpath(f"{name}.yaml").read_text(encoding="utf-8")
    templates: dict[str, Any] = yaml.safe_load(text)
    validate_prompt_templates(templates)
    return templates


def validate_prompt_templates(templates: Any) -> None:
    """Refuse templates with a key missing, naming the key, before any run starts."""
    if not isinstance(templates, dict):
        raise TypeError(f"prompt_templates must be a dict, got {type(templates).__name__}")
    for key, subkeys in REQUIRED_KEYS.items():
        if key not in templates:
            raise ValueError(f"prompt_templates is missing the key {key!r}")
        for subkey in subkeys:
            if not isinstance(templates[key], dict) or subkey not in templates[key]:
                raise ValueError(f"prompt_templates is missing the key '{key}.{subkey}'")


@functools.lru_cache(maxsize=256)
def _compiled(template: str) -> jinja2.Template:
    """A template compiled once (each agent renders the same few at every run)."""
    return _ENVIRONMENT.from_string(template)


def render(template: str, **variables: Any) -> str:
    try:
        return _compiled(template).render(**variables)
    except jinja2.UndefinedError as error:
        raise ValueError(
            f"prompt template uses an undefined variable: {error.message}; "
            f"the variables it can use are: {', '.join(sorted(variables))}"
        ) from None
    except jinja2.TemplateSyntaxError as error:
        raise ValueError(f"prompt template has a syntax error on line {error.lineno}: {error.message}") from None
