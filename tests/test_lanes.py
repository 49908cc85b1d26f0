"""How the suite is shared out among workers: every test of the engine in one lane, the rest by file."""

from __future__ import annotations

from pathlib import Path

from tests.lanes import ENGINE_LANE, unit_of

ROOT = Path(__file__).parents[1]


def test_a_file_of_the_engine_is_in_the_lane_whole() -> None:
    for nodeid in (
        "tests/executors/docker/test_commands.py::test_sandboxes_ls_shows_an_orphan_and_prune_removes_it",
        "tests/cli/test_batch_backends.py::test_ray_without_an_address_starts_a_local_cluster_for_the_run_and_stops_it",
        "tests/cli/test_mcp_serve.py::test_anything[local]",
    ):
        assert unit_of(nodeid, ROOT) == ENGINE_LANE, nodeid


def test_a_docker_profile_is_in_the_lane_and_the_same_files_other_profiles_are_not() -> None:
    contract = (
        "tests/executors/contract/test_contract.py::test_a_bad_variable_name_is_refused_alike_and_nothing_is_sent"
    )
    assert unit_of(f"{contract}[docker-runsc-not an identifier]", ROOT) == ENGINE_LANE
    assert unit_of(f"{contract}[docker-str]", ROOT) == ENGINE_LANE
    assert unit_of(f"{contract}[local-str]", ROOT) == "tests/executors/contract/test_contract.py"
    assert unit_of(f"{contract}[jupyter-dockerish]", ROOT) == "tests/executors/contract/test_contract.py"


def test_other_files_are_units_of_their_own() -> None:
    assert unit_of("tests/executors/local/test_interrupt.py::test_x", ROOT) == "tests/executors/local/test_interrupt.py"
    assert unit_of("tests/test_layout.py::test_x[codeward.executors-codeward.cli]", ROOT) == "tests/test_layout.py"
