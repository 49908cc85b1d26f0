"""Model ids: one string names any model, wherever the command line takes one.

``--model``, ``CODEWARD_MODEL`` and a batch job's ``model`` all accept:

- a litellm model id (``openai/gpt-4o-mini``, ``anthropic/...``, ``ollama/...``);
- ``replay:PATH``: a saved run (``agent.memory.save`` or ``codeward run --save``),
  played by `ReplayModel`;
- ``script:PATH``: a YAML or JSON list of responses, played by `ScriptedModel`.

The last two need no provider and no network, which is how tests, CI and
offline users drive the command.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml

from codeward.json_values import read_json
from codeward.platform.model_retries import MAX_WAIT
from codeward.platform.models import Model, ReplayModel, ScriptedModel
from codeward.usage import UsageError
from codeward.wording import a

__all__ = [
    "MODEL_ENV",
    "PROVIDER_KEYS",
    "RETRIES_ENV",
    "RETRY_WAIT_ENV",
    "ModelIdError",
    "check_model_id",
    "default_model_id",
    "load_script",
    "no_model_message",
    "resolve_model",
    "retry_settings",
]

#: The environment variable that names the model when ``--model`` is not given.
MODEL_ENV = "CODEWARD_MODEL"

#: How many times a failed call to a litellm model is retried (`LiteLLMModel`'s ``max_retries``, 5 by default).
RETRIES_ENV = "CODEWARD_MODEL_RETRIES"

#: The seconds the first retry may wait; each next one's bound doubles (``retry_wait``, 1 by default).
RETRY_WAIT_ENV = "CODEWARD_MODEL_RETRY_WAIT"

#: Provider key -> the model used when that key is the only hint of what to call.
PROVIDER_KEYS: dict[str, str] = {
    "OPENAI_API_KEY": "openai/gpt-4o-mini",
    "ANTHROPIC_API_KEY": "anthropic/claude-3-5-haiku-latest",
    "GEMINI_API_KEY": "gemini/gemini-1.5-flash",
    "MISTRAL_API_KEY": "mistral/mistral-small-latest",
    "GROQ_API_KEY": "groq/llama-3.1-8b-instant",
    "DEEPSEEK_API_KEY": "deepseek/deepseek-chat",
}

_FILE_SCHEMES = ("replay:", "script:")


class ModelIdError(UsageError):
    """A model id that names nothing usable; the message says how to fix it."""


def default_model_id(environ: dict[str, str] | None = None) -> str | None:
    """`CODEWARD_MODEL`, else the default model of the first provider whose key is set."""
    environ = dict(os.environ) if environ is None else environ
    if environ.get(MODEL_ENV, "").strip():
        return environ[MODEL_ENV].strip()
    return next((model for key, model in PROVIDER_KEYS.items() if environ.get(key)), None)


def no_model_message() -> str:
    keys = ", ".join(PROVIDER_KEYS)
    return (
        "no model to call: pass --model ID (a litellm id such as openai/gpt-4o-mini, replay:RUN.json "
        f"or script:RESPONSES.yaml) or set {MODEL_ENV}; no provider key ({keys}) is set either. "
        "To see codeward work without a model, run: codeward demo"
    )


def _split(model_id: Any, base_dir: Path | None) -> tuple[str, Path | None]:
    if not isinstance(model_id, str) or not model_id.strip():
        raise ModelIdError(f"a model id must be a non-empty string, got {model_id!r}")
    model_id = model_id.strip()
    for scheme in _FILE_SCHEMES:
        if model_id.startswith(scheme):
            raw = model_id[len(scheme) :]
            if not raw:
                raise ModelIdError(f"{model_id!r} names no file; write {scheme}PATH")
            path = Path(raw).expanduser()
            if base_dir is not None and not path.is_absolute():
                path = base_dir / path
            return scheme[:-1], path
    return "litellm", None


def load_script(path: Path) -> list[Any]:
    """The responses of a ``script:`` file: a YAML or JSON list of strings or message dicts."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ModelIdError(f"script:{path}: no such file") from None
    try:
        responses = read_json(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (yaml.YAMLError, ValueError) as error:  # JSON's errors, and YAML's too long number, are ValueErrors
        raise ModelIdError(
            f"script:{path} is not valid {'JSON' if path.suffix == '.json' else 'YAML'}: {error}"
        ) from None
    if not isinstance(responses, list) or not responses:
        raise ModelIdError(f"script:{path} must hold a non-empty list of responses (strings or {{content: ...}} maps)")
    for index, response in enumerate(responses):
        if not isinstance(response, (str, dict)):
            raise ModelIdError(
                f"script:{path}: response {index + 1} is {a(type(response).__name__)}; use a string or a map"
            )
    return responses


def check_model_id(model_id: Any, base_dir: Path | None = None) -> str:
    """Refuse an id that cannot work before anything runs; return it with file paths made absolute."""
    kind, path = _split(model_id, base_dir)
    if path is None:  # a litellm id: no file to check, but its retry settings
        retry_settings()
        return str(model_id).strip()
    if kind == "script":
        load_script(path)
    elif not path.is_file():
        raise ModelIdError(f"replay:{path}: no such file; save a run with codeward run --save or agent.memory.save")
    return f"{kind}:{path.resolve()}"


def resolve_model(model_id: str, base_dir: Path | None = None) -> Model:
    """Build the model an id names (a fresh one each call: scripted models are consumed as they play)."""
    kind, path = _split(model_id, base_dir)
    if path is not None:
        if kind == "script":
            return ScriptedModel(load_script(path))
        try:
            return ReplayModel(path)
        except ValueError as error:  # the file is no saved run
            raise ModelIdError(f"replay:{path}: {error}") from None
    from codeward.platform.models import LiteLLMModel

    return LiteLLMModel(model_id.strip(), **retry_settings())


def retry_settings(environ: dict[str, str] | None = None) -> dict[str, Any]:
    """`LiteLLMModel`'s retry settings that `RETRIES_ENV` and `RETRY_WAIT_ENV` give, checked."""
    environ = dict(os.environ) if environ is None else environ
    settings: dict[str, Any] = {}
    if raw := environ.get(RETRIES_ENV, "").strip():
        if not raw.isdigit():
            raise UsageError(f"{RETRIES_ENV}={raw!r}: write how many times to retry a failed model call, 0 or more")
        settings["max_retries"] = int(raw)
    if raw := environ.get(RETRY_WAIT_ENV, "").strip():
        try:
            wait = float(raw)
        except ValueError:
            wait = -1.0
        if not 0 <= wait <= MAX_WAIT:
            raise UsageError(
                f"{RETRY_WAIT_ENV}={raw!r}: write the seconds the first retry may wait, from 0 to {MAX_WAIT:g}"
            )
        settings["retry_wait"] = wait
    return settings
