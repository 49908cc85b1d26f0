"""smolagents' own executor tests against codeward: each test's executors are closed when it ends,
and the tests expected to fail (expectations.py) are marked so."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.integrations.smolagents_suite.expectations import mark


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if item.path.parent.name == "smolagents_suite":
            mark(item)


@pytest.fixture(autouse=True)
def _close_the_tests_executors() -> Iterator[None]:
    yield
    from tests.integrations.smolagents_suite.adapter import close_all

    close_all()
