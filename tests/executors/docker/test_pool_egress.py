"""A SandboxPool with an egress list: each pooled sandbox has a proxy of its own, and executors take the pool's list."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from codeward.batch.worker import pool_settings
from codeward.executors import DockerExecutor, SandboxPool
from tests.egress.internet import Origin, fetch_code, require_mitmdump


@pytest.fixture
def server(http_origin: Origin) -> Origin:
    return http_origin


@pytest.fixture
def pool(sandbox_image: str, server: Origin) -> Iterator[SandboxPool]:
    require_mitmdump()
    with SandboxPool(size=2, image=sandbox_image, egress=[server.entry]) as started:
        assert started.wait_until_full(timeout=120)
        yield started


def test_each_pooled_sandbox_has_a_proxy_of_its_own(pool: SandboxPool) -> None:
    proxies = [sandbox.egress for sandbox in pool.idle]
    assert all(proxy is not None and proxy.is_running() for proxy in proxies)
    assert len({id(proxy) for proxy in proxies}) == 2


def test_a_pooled_executor_reaches_the_pools_list_and_nothing_else(pool: SandboxPool, server: Origin) -> None:
    with DockerExecutor(pool=pool) as executor:
        assert executor.run(fetch_code(server.url("/echo?at=listed"))).output == "/echo?at=listed"
        assert executor.run(fetch_code("http://127.0.0.1:9/other")).output.startswith("failed")
        verdicts = [(entry["port"], entry["verdict"]) for entry in executor.egress_log]
    assert verdicts == [(server.port, "allowed"), (9, "refused")]
    assert [request.path for request in server.requests] == ["/echo?at=listed"]


def test_each_executor_reads_its_own_sandboxs_record(pool: SandboxPool, server: Origin) -> None:
    with DockerExecutor(pool=pool) as first:
        first.run(fetch_code(server.url("/echo?at=first")))
        with DockerExecutor(pool=pool) as second:
            second.run(fetch_code(server.url("/echo?at=second")))
            assert [entry["path"] for entry in second.egress_log] == ["/echo?at=second"]
        assert [entry["path"] for entry in first.egress_log] == ["/echo?at=first"]


def test_set_egress_on_a_pooled_executor_changes_its_sandbox_not_the_pool(pool: SandboxPool, server: Origin) -> None:
    with DockerExecutor(pool=pool) as closed:
        closed.set_egress([])
        assert closed.run(fetch_code(server.url("/echo?at=closed"))).output.startswith("failed")
        assert closed.egress_log[-1]["verdict"] == "refused"
        with DockerExecutor(pool=pool) as other:  # taken from the same pool afterwards: the pool's list
            assert other.run(fetch_code(server.url("/echo?at=open"))).output == "/echo?at=open"
    assert pool.spec.egress is not None and not pool.spec.egress.closed
    assert [request.path for request in server.requests] == ["/echo?at=open"]


def test_the_pools_headers_are_added_on_the_host(sandbox_image: str, server: Origin) -> None:
    require_mitmdump()
    headers = {f"localhost:{server.port}": {"X-Key": "pool-key-1b7e"}}
    listed = [f"localhost:{server.port}", server.entry]  # the name, and the loopback address it leads to
    with (
        SandboxPool(size=1, image=sandbox_image, egress=listed, egress_headers=headers) as pool,
        DockerExecutor(pool=pool) as executor,
    ):
        executor.run(fetch_code(server.url("/echo?at=h", "localhost")))
        assert executor.run("import os; 'pool-key-1b7e' in str(os.environ)").output is False
    assert server.requests and server.requests[0].header("X-Key") == "pool-key-1b7e"


def test_egress_settings_decide_which_pool_a_batch_job_takes() -> None:
    key, settings, rest = pool_settings({"egress": ["pypi.org"], "egress_headers": {}, "timeout_seconds": 5})
    assert settings == {"egress": ["pypi.org"], "egress_headers": {}}
    assert rest == {"timeout_seconds": 5}
    assert key != pool_settings({"egress": ["example.org"]})[0]


def test_headers_without_a_list_are_refused(sandbox_image: str) -> None:
    with pytest.raises(ValueError, match=r"egress=\[\.\.\.\]"):
        SandboxPool(size=1, image=sandbox_image, egress_headers={"pypi.org": {"X": "y"}})
