import pytest


@pytest.fixture
def executor():
    """The sandbox the lifecycle tests run on: the real local executor."""
    return "local"
