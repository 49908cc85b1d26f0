"""The Jupyter executor beyond the shared contract: environment, interpreter, rich output, bad input."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import site
import subprocess
import sys
import sysconfig
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from codeward.executors.base import ExecutionError, ExecutionTimeout, SandboxError, create_executor
from codeward.executors.codec import CodecError
from codeward.executors.jupyter import JupyterExecutor, clean_environment
from tests.package_index import tiny_wheel


@dataclasses.dataclass
class Point:
    x: int
    y: int


@pytest.fixture(scope="module")
def shared() -> Iterator[JupyterExecutor]:
    """One kernel for the checks that leave nothing behind that matters to the others."""
    with JupyterExecutor(timeout_seconds=10) as executor:
        yield executor


def test_registered_as_jupyter() -> None:
    with create_executor("jupyter", timeout_seconds=5) as executor:
        assert isinstance(executor, JupyterExecutor)
        assert executor.run("6 * 7").output == 42


def test_the_hosts_environment_stays_out_of_the_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-host-secret-123")
    with JupyterExecutor(env={"GIVEN": "yes"}) as executor:
        seen = executor.run(
            "import os, subprocess\n"
            "(os.environ.get('OPENAI_API_KEY'), os.environ.get('GIVEN'),\n"
            " open('/proc/self/environ', 'rb').read(), subprocess.run(['env'], capture_output=True).stdout)"
        ).output
    assert seen[0] is None and seen[1] == "yes"
    assert b"sk-host-secret" not in seen[2] and b"sk-host-secret" not in seen[3]


def test_clean_environment_has_only_the_basics_and_what_is_given() -> None:
    env = clean_environment({"A": "1"})
    assert set(env) == {"PATH", "HOME", "LANG", "A"}
    with pytest.raises(TypeError, match="'B' maps to an int"):
        clean_environment({"B": 2})  # type: ignore[dict-item]


def test_rich_displays_come_back_as_images_and_html(shared: JupyterExecutor) -> None:
    result = shared.run(
        "from IPython.display import display, HTML\nfrom PIL import Image\n"
        "display(Image.new('RGB', (4, 3), 'red'))\ndisplay(HTML('<b>bold</b>'))\nprint('shown')"
    )
    shown, html = result.displays  # kept as sent; an image is decoded when asked for
    assert (shown.mime, html.mime, html.data) == ("image/png", "text/html", "<b>bold</b>")
    image = shown.image()
    assert isinstance(image, Image.Image) and image.size == (4, 3) and image.getpixel((0, 0)) == (255, 0, 0)
    assert "shown" in result.logs


def test_a_last_value_the_codec_cannot_carry_comes_back_as_its_repr(shared: JupyterExecutor) -> None:
    result = shared.run("class Opaque:\n    def __repr__(self):\n        return 'Opaque()!'\nOpaque()")
    assert result.output == "Opaque()!"


def test_a_final_answer_that_cannot_leave_the_sandbox_is_a_clear_error(shared: JupyterExecutor) -> None:
    from codeward.platform.tools import FinalAnswerTool

    shared.send_tools({"final_answer": FinalAnswerTool()})
    with pytest.raises(ExecutionError, match=r"final answer, of type .*Opaque, cannot leave the sandbox"):
        shared.run("final_answer(Opaque())")


def test_input_is_refused_with_a_reason(shared: JupyterExecutor) -> None:
    with pytest.raises(ExecutionError, match="input\\(\\) is not available"):
        shared.run("input('your name? ')")


def test_a_variable_that_cannot_be_carried_fails_before_anything_is_sent(shared: JupyterExecutor) -> None:
    with pytest.raises(CodecError, match="'bad'"):
        shared.send_variables({"good_one": 1, "bad": object()})
    with pytest.raises(ExecutionError, match="good_one"):
        shared.run("good_one")


def test_a_dataclass_the_sandbox_cannot_import_arrives_as_a_dict_said_plainly(shared: JupyterExecutor) -> None:
    shared.send_variables({"point": Point(1, 2)})
    result = shared.run("point")
    assert result.output == {"x": 1, "y": 2}
    assert "Point" in result.logs and "dict" in result.logs


def test_code_that_ignores_interrupts_is_stopped_by_a_restart(monkeypatch: pytest.MonkeyPatch) -> None:
    with JupyterExecutor(timeout_seconds=1) as executor:
        executor.send_variables({"kept": 3})
        executor.run("made_here = 1")
        started = time.monotonic()
        with pytest.raises(ExecutionTimeout, match="restarted"):
            executor.run(
                "import time\nwhile True:\n    try:\n        time.sleep(10)\n    except KeyboardInterrupt:\n        pass"
            )
        assert time.monotonic() - started < 1 + 3 + 5  # limit + interrupt grace + slack
        assert executor.run("kept + 1").output == 4
        with pytest.raises(ExecutionError, match="made_here"):
            executor.run("made_here")


def test_the_kernel_runs_in_the_given_folder(tmp_path: Path) -> None:
    with JupyterExecutor(cwd=str(tmp_path)) as executor:
        assert executor.run("import os; os.getcwd()").output == str(tmp_path)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tools_mode": "remote"}, "tools_mode must be one of 'auto', 'host', 'inline'"),
        ({"timeout_seconds": 0}, "timeout_seconds must be a positive number"),
        ({"python": "/no/such/python"}, "not an executable interpreter"),
        ({"cwd": "/no/such/folder"}, "is not a directory"),
    ],
)
def test_bad_arguments_are_refused_before_a_kernel_starts(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        JupyterExecutor(**kwargs)


def test_a_closed_executor_says_so() -> None:
    executor = JupyterExecutor()
    executor.close()
    with pytest.raises(Exception, match="closed"):
        executor.run("1")


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A virtual environment that sees this interpreter's packages (ipykernel, pip) but installs into its own.

    `--system-site-packages` would not do: run from a virtual environment, it shows the base
    interpreter's packages, which need not have ipykernel. A .pth file adds this one's instead.
    """
    folder = tmp_path_factory.mktemp("venv")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    own = Path(sysconfig.get_path("purelib", vars={"base": str(folder), "platbase": str(folder)}))
    added = "; ".join(f"site.addsitedir({path!r})" for path in site.getsitepackages())
    (own / "codeward_host_packages.pth").write_text(f"import site; {added}\n")
    return folder


def test_python_runs_the_kernel_on_another_interpreter_and_installs_there(venv: Path, tmp_path: Path) -> None:
    python = venv / "bin" / "python"
    with JupyterExecutor(python=str(python)) as executor:
        assert executor.run("import sys; sys.prefix").output == str(venv)
        installed = executor.install_packages(["--no-index", str(tiny_wheel(tmp_path))])
        assert "codeward_tinypkg" in installed
        assert executor.run("import codeward_tinypkg; codeward_tinypkg.ANSWER").output == 42
    assert importlib.util.find_spec("codeward_tinypkg") is None  # the host's interpreter is untouched


def test_an_interpreter_without_ipykernel_fails_with_a_hint(tmp_path: Path) -> None:
    bare = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(bare)], check=True)
    with pytest.raises(SandboxError, match="ipykernel"):
        JupyterExecutor(python=str(bare / "bin" / "python"))


def test_install_packages_reports_pip_failures_and_bad_input(shared: JupyterExecutor) -> None:
    with pytest.raises(Exception, match="pip could not install"):
        shared.install_packages(["--no-index", "codeward-no-such-package-xyz"])
    with pytest.raises(TypeError, match="list of requirement strings"):
        shared.install_packages("requests")  # type: ignore[arg-type]


def test_no_kernel_outlives_a_forgotten_executor() -> None:
    executor = JupyterExecutor()
    pid = executor.run("import os; os.getpid()").output
    del executor
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
        time.sleep(0.05)
    assert not os.path.exists(f"/proc/{pid}") or "Z" in Path(f"/proc/{pid}/stat").read_text().split(")")[1][:3]


def test_pickle_is_an_opt_in_one_way_street() -> None:
    from array import array

    with JupyterExecutor() as executor, pytest.raises(CodecError, match="allow_pickle=True"):
        executor.send_variables({"numbers": array("i", [1, 2])})
    with JupyterExecutor(allow_pickle=True) as trusting:
        trusting.send_variables({"numbers": array("i", [1, 2])})
        assert trusting.run("type(numbers).__name__, list(numbers)").output == ("array", [1, 2])
        # Coming out, the value is not pickled: the host gets its text instead.
        assert trusting.run("numbers").output == "array('i', [1, 2])"
