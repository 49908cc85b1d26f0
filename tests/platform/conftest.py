import pytest


@pytest.fixture(params=["local", "jupyter"])
def executor(request):
    """The sandboxes the lifecycle tests run on: real ones, by name, as users pass them."""
    return request.param
