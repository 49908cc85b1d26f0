"""Model ids: a litellm id, replay:PATH or script:PATH, wherever a model is named."""

from __future__ import annotations

import json

import pytest

from codeward import LiteLLMModel, ReplayModel, ScriptedModel
from codeward.platform.model_ids import ModelIdError, check_model_id, default_model_id, resolve_model


def test_script_files_in_yaml_and_json(tmp_path):
    (tmp_path / "a.yaml").write_text("- first\n- {content: second}\n")
    (tmp_path / "b.json").write_text(json.dumps(["only"]))
    model = resolve_model("script:a.yaml", base_dir=tmp_path)
    assert isinstance(model, ScriptedModel) and [m.text() for m in model.responses] == ["first", "second"]
    assert resolve_model(f"script:{tmp_path / 'b.json'}").responses[0].text() == "only"
    assert check_model_id("script:a.yaml", tmp_path) == f"script:{tmp_path / 'a.yaml'}"


def test_a_replay_id_plays_a_saved_run(tmp_path):
    run = {"steps": [{"type": "action", "model_output_message": {"role": "assistant", "content": "hi"}}]}
    (tmp_path / "run.json").write_text(json.dumps(run))
    model = resolve_model(f"replay:{tmp_path / 'run.json'}")
    assert isinstance(model, ReplayModel) and model.responses[0].text() == "hi"


def test_anything_else_is_a_litellm_id():
    model = resolve_model("openai/gpt-4o-mini")
    assert isinstance(model, LiteLLMModel) and model.model_id == "openai/gpt-4o-mini"


@pytest.mark.parametrize(
    ("model_id", "content", "message"),
    [
        ("script:", None, "names no file"),
        ("script:gone.yaml", None, "no such file"),
        ("replay:gone.json", None, "no such file"),
        ("script:bad.yaml", "- [unclosed", "not valid YAML"),
        ("script:bad.yaml", "just: a map", "non-empty list of responses"),
        ("script:bad.yaml", "- 3", "response 1 is an int"),
        ("", None, "non-empty string"),
    ],
)
def test_bad_ids_say_what_is_wrong(tmp_path, model_id, content, message):
    if content is not None:
        (tmp_path / "bad.yaml").write_text(content)
    with pytest.raises(ModelIdError, match=message):
        check_model_id(model_id, tmp_path)


def test_the_default_model_comes_from_the_environment_then_a_provider_key():
    assert default_model_id({"CODEWARD_MODEL": "ollama/llama3", "OPENAI_API_KEY": "k"}) == "ollama/llama3"
    assert default_model_id({"ANTHROPIC_API_KEY": "k"}).startswith("anthropic/")
    assert default_model_id({}) is None
