"""The local E2B protocol server: what the SDK and the executor rely on, checked over raw HTTP and the SDK.

These pin the server to E2B's published behaviour, so that the executor's tests
against it mean something: status codes, the JSON-lines stream, keepalives,
interrupt on disconnect, contexts, and the sandbox vanishing.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest
from e2b import NotFoundException
from e2b import TimeoutException as E2BTimeout
from e2b_code_interpreter import Sandbox

from tests.e2b_server import E2BServer


@pytest.fixture(scope="module")
def server() -> Iterator[E2BServer]:
    with E2BServer(keepalive=0.3) as running:
        yield running


@pytest.fixture
def sandbox(server: E2BServer) -> Sandbox:
    return Sandbox.create(**server.connection)


@contextmanager
def streamed(server: E2BServer, body: dict) -> Iterator[Iterator[dict]]:
    """An execution's lines as they arrive; leaving the block closes the connection."""
    with httpx.Client(timeout=30) as client, client.stream("POST", f"{server.url}/execute", json=body) as response:
        yield (json.loads(line) for line in response.iter_lines())


def new_context(server: E2BServer) -> str:
    return httpx.post(f"{server.url}/contexts", json={}).json()["id"]


def results(got: list[dict]) -> list[str]:
    return [line["text"] for line in got if line["type"] == "result"]


def lines(server: E2BServer, body: dict) -> tuple[int, list[dict]]:
    with httpx.Client(timeout=30) as client:
        response = client.post(f"{server.url}/execute", json=body)
    if response.status_code != 200:
        return response.status_code, []
    return 200, [json.loads(line) for line in response.text.splitlines()]


def test_execute_streams_e2b_lines_in_order(server: E2BServer) -> None:
    status, got = lines(server, {"code": "import sys\nprint('out')\nprint('err', file=sys.stderr)\n6 * 7"})
    assert status == 200
    kinds = [line["type"] for line in got if line["type"] != "keepalive"]
    assert kinds == ["number_of_executions", "stdout", "stderr", "result", "end_of_execution"]
    result = next(line for line in got if line["type"] == "result")
    assert result["text"] == "42" and result["is_main_result"] is True and result["extra"] == {}


def test_an_error_is_reported_once_with_its_traceback(server: E2BServer) -> None:
    _, got = lines(server, {"code": "def f():\n    raise KeyError('k')\nf()"})
    errors = [line for line in got if line["type"] == "error"]
    assert len(errors) == 1
    assert errors[0]["name"] == "KeyError" and "raise" in errors[0]["traceback"]


def test_status_codes_match_e2b(server: E2BServer) -> None:
    assert server.url.startswith("http://127.0.0.1:")  # loopback only: it runs any code it is sent
    assert lines(server, {"code": "1", "context_id": "nope", "language": "python"})[0] == 400
    assert lines(server, {"code": "1", "context_id": "nope"})[0] == 404
    with httpx.Client(timeout=10) as client:
        assert client.get(f"{server.url}/health").status_code == 200
        assert client.delete(f"{server.url}/contexts/nope").status_code == 404
        assert client.post(f"{server.url}/contexts/nope/restart").status_code == 404


def test_keepalive_lines_fill_a_silence(server: E2BServer) -> None:
    _, got = lines(server, {"code": "import time\ntime.sleep(1.2)\n'done'"})
    assert sum(line["type"] == "keepalive" for line in got) >= 2
    assert got[-2]["type"] == "result" and got[-2]["text"] == "done"


def test_a_client_that_disconnects_has_its_execution_interrupted(server: E2BServer) -> None:
    context = new_context(server)
    code = "state = 'kept'\nimport time\nprint('started', flush=True)\nwhile True:\n    time.sleep(0.05)"
    with streamed(server, {"code": code, "context_id": context}) as execution:
        for line in execution:
            if line["type"] == "stdout":
                break  # leave while the loop runs: the response closes with the client
    _, got = lines(server, {"code": "state", "context_id": context})  # waits for the context's lock
    assert results(got) == ["kept"]
    _, got = lines(server, {"code": "__import__('sys').last_type.__name__", "context_id": context})
    assert results(got) == ["KeyboardInterrupt"]


def test_a_request_whose_client_left_while_it_waited_does_not_run(server: E2BServer, tmp_path: Path) -> None:
    """A probe that timed out behind a busy context must not run later: its interrupt for a
    gone client would land in whatever the context runs next."""
    context = new_context(server)
    started = threading.Event()
    release = tmp_path / "release"  # the context is held until the probe has timed out, however long that takes

    def hold_the_context() -> None:
        code = f"import os, time\nprint('started', flush=True)\nwhile not os.path.exists({str(release)!r}):\n    time.sleep(0.02)"
        with streamed(server, {"code": code, "context_id": context}) as execution:
            for line in execution:
                if line["type"] == "stdout":
                    started.set()

    busy = threading.Thread(target=hold_the_context)
    busy.start()
    try:
        assert started.wait(30)
        with pytest.raises(httpx.ReadTimeout), httpx.Client(timeout=0.5) as client:
            client.post(f"{server.url}/execute", json={"code": "ran_late = True", "context_id": context})
    finally:
        release.touch()
    busy.join()
    time.sleep(0.5)  # the waiting request, had it run, would have run by now
    _, got = lines(server, {"code": "import time\ntime.sleep(0.5)\n'ran_late' in globals()", "context_id": context})
    assert results(got) == ["False"]
    assert not [line for line in got if line["type"] == "error"]


def test_contexts_are_separate_and_can_be_listed_restarted_and_removed(sandbox: Sandbox) -> None:
    first, second = sandbox.create_code_context(), sandbox.create_code_context()
    sandbox.run_code("x = 1", context=first)
    assert sandbox.run_code("x", context=first).text == "1"
    assert sandbox.run_code("x", context=second).error.name == "NameError"
    assert {first.id, second.id} <= {context.id for context in sandbox.list_code_contexts()}
    sandbox.restart_code_context(first)
    assert sandbox.run_code("x", context=first).error.name == "NameError"
    sandbox.remove_code_context(second)
    with pytest.raises(NotFoundException):
        sandbox.run_code("1", context=second)


def test_the_sdk_sees_a_dead_kernel_as_e2b_reports_it(sandbox: Sandbox) -> None:
    context = sandbox.create_code_context()
    execution = sandbox.run_code("import os\nos._exit(3)", context=context)
    assert execution.error is not None and execution.error.name == "ContextRestarting"
    assert sandbox.run_code("'fresh'", context=context).text == "fresh"


def test_env_vars_hold_for_one_execution(sandbox: Sandbox) -> None:
    code = "import os\nos.environ.get('CODEWARD_PROBE')"
    assert sandbox.run_code(code, envs={"CODEWARD_PROBE": "it's here"}).text == '"it\'s here"'
    assert sandbox.run_code(code).text is None


def test_an_expired_sandbox_answers_502_and_cuts_a_running_execution() -> None:
    with E2BServer() as server:
        sandbox = Sandbox.create(**server.connection)
        # expired once the execution runs: a fixed delay could end while a busy machine's kernel still starts
        expiring = threading.Thread(target=server.expire)
        with pytest.raises(E2BTimeout, match="killed"):
            code = "import time\nprint('running', flush=True)\ntime.sleep(30)"
            sandbox.run_code(code, timeout=60, on_stdout=lambda message: expiring.start())
        expiring.join()
        assert sandbox.is_running() is False
        with pytest.raises(E2BTimeout, match="502"):
            sandbox.run_code("1")
        server.replace()
        assert sandbox.is_running() is True
        assert sandbox.run_code("1 + 1").text == "2"


def test_files_written_through_envds_api_land_in_the_sandbox_even_while_code_runs(
    server: E2BServer, sandbox: Sandbox
) -> None:
    """The SDK's `files.write` (octet-stream upload): folders made, a relative path under the home."""
    seen: list[str] = []

    def write_while_running(message: object) -> None:
        sandbox.files.write("uploads/deep/note.txt", b"written mid-run", use_octet_stream=True)
        seen.append("written")

    execution = sandbox.run_code(
        "import os, time\nprint('ready', flush=True)\n"
        "while not os.path.exists('uploads/deep/note.txt'):\n    time.sleep(0.01)\n"
        "open('uploads/deep/note.txt').read()",
        on_stdout=write_while_running,
        timeout=20,
    )
    assert seen == ["written"] and execution.text == "written mid-run"
    assert server.sandbox is not None
    absolute = f"{server.sandbox.cwd}/elsewhere/abs.txt"
    info = sandbox.files.write(absolute, b"again", use_octet_stream=True)
    assert (info.name, info.path) == ("abs.txt", absolute)
    with open(absolute, "rb") as handle:
        assert handle.read() == b"again"


def test_an_upload_that_is_not_octet_stream_is_refused_saying_what_is_taken(server: E2BServer) -> None:
    response = httpx.post(f"{server.url}/files", params={"path": "a.txt"}, files={"file": ("a.txt", b"x")})
    assert response.status_code == 400 and "application/octet-stream" in response.json()["message"]
    response = httpx.post(f"{server.url}/files", content=b"x", headers={"Content-Type": "application/octet-stream"})
    assert response.status_code == 400 and "no path" in response.json()["message"]
