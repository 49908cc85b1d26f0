"""Counts and articles in what users and models read: '1 step', '2 steps', 'an int', 'a str'."""

from __future__ import annotations

import pytest

from codeward import ScriptedModel
from codeward.executors.jupyter import clean_environment
from codeward.platform.agents import describe_variables
from codeward.platform.model_ids import ModelIdError, resolve_model
from codeward.platform.replay import ReplayReport
from codeward.wording import a, counted


def test_a_count_of_one_is_singular_and_others_plural() -> None:
    assert [counted(n, "step") for n in (0, 1, 2, 1500)] == ["0 steps", "1 step", "2 steps", "1,500 steps"]
    assert counted(1, "difference") == "1 difference"


def test_the_article_follows_the_word() -> None:
    assert [a(word) for word in ("int", "'int'", "str", "object", "image/png display", "dict")] == [
        "an int",
        "an 'int'",
        "a str",
        "an object",
        "an image/png display",
        "a dict",
    ]


def test_a_one_item_variable_is_told_as_one_item() -> None:
    assert "cities (list, 1 item:" in describe_variables({"cities": ["Oslo"]})


def test_a_replay_of_one_step_says_one_step(tmp_path) -> None:
    report = ReplayReport(tmp_path / "run.json", "local", 1, [])
    assert ": 1 step and the final answer match" in report.render()


def test_a_scripted_response_of_the_wrong_kind_takes_its_article() -> None:
    with pytest.raises(TypeError, match="is an int; use a string"):
        ScriptedModel([1])


def test_a_script_file_response_of_the_wrong_kind_takes_its_article(tmp_path) -> None:
    (tmp_path / "model.yaml").write_text("- 1\n")
    with pytest.raises(ModelIdError, match="is an int; use a string"):
        resolve_model(f"script:{tmp_path / 'model.yaml'}")


def test_a_kernel_environment_value_of_the_wrong_kind_takes_its_article() -> None:
    with pytest.raises(TypeError, match="'A' maps to an int"):
        clean_environment({"A": 1})  # type: ignore[dict-item]
