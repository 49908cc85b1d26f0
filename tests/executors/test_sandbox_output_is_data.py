"""What a real kernel sends back is data from a stranger: it chooses no class the host makes, and
no display or answer of it ends a run with an exception from inside codeward.

The kernel plays the hostile sandbox with ordinary code: a standard-library record whose class
runs ``uname -p`` when iterated, image displays whose bytes are not what their MIME type says,
and an answer that cannot be turned into text.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from PIL import Image

from codeward import CodeAgent
from codeward.executors import codec
from codeward.executors.codec import CodecWarning
from codeward.executors.displays import DisplayError
from codeward.executors.jupyter import JupyterExecutor
from codeward.platform.models import ScriptedModel
from tests.cli.conftest import command, command_env, write_script
from tests.executors.test_codec_safety import STARTED_SUBPROCESSES

pytest.importorskip("jupyter_client")


def _png_with_broken_pixels() -> bytes:
    """A PNG whose header reads well and whose pixel data does not: pillow fails only once it decodes."""
    buffer = io.BytesIO()
    Image.new("RGB", (20, 20)).save(buffer, "PNG")
    return buffer.getvalue()[:-20] + b"x" * 20


#: An EPS file: pillow reads it with Ghostscript, a program, when it is let choose the format.
_EPS = b"%!PS-Adobe-3.0 EPSF-3.0\n%%BoundingBox: 0 0 10 10\n%%EndComments\nshowpage\n%%EOF\n"


def _display_code(data: bytes) -> str:
    """Kernel code that shows `data` as a PNG display."""
    encoded = base64.b64encode(data).decode()
    return f"from IPython.display import display\ndisplay({{'image/png': {encoded!r}}}, raw=True)"


@pytest.fixture(scope="module")
def kernel() -> Iterator[JupyterExecutor]:
    with JupyterExecutor(timeout_seconds=20) as executor:
        yield executor


def test_a_record_the_kernel_names_by_a_host_class_arrives_as_a_plain_tuple(kernel: JupyterExecutor) -> None:
    import platform  # loaded on the host, as in most programs

    with pytest.warns(CodecWarning, match="platform:uname_result"):
        result = kernel.run("import platform\nplatform.uname()")
    answer = result.output
    assert type(answer) is tuple and len(answer) == 6 and answer[0] == platform.system()
    before = len(STARTED_SUBPROCESSES)
    list(answer), str(answer), repr(answer), hash(answer), answer == answer  # what batch and run --json do
    assert len(STARTED_SUBPROCESSES) == before


@pytest.mark.parametrize(
    ("data", "reason"),
    [(_png_with_broken_pixels(), "not a readable image"), (_EPS, "not a PNG image"), (b"\x00" * 64, "not a PNG image")],
    ids=["broken pixels", "eps", "zeros"],
)
def test_an_image_display_that_is_not_its_format_is_a_display_error(
    kernel: JupyterExecutor, data: bytes, reason: str
) -> None:
    [shown] = kernel.run(_display_code(data)).displays
    before = len(STARTED_SUBPROCESSES)
    with pytest.raises(DisplayError, match=reason):
        shown.image()
    assert shown.describe().startswith("[image that could not be decoded: the image/png display")
    assert len(STARTED_SUBPROCESSES) == before


def test_an_image_display_that_is_its_format_still_decodes(kernel: JupyterExecutor) -> None:
    """The control: a real PNG from the kernel decodes and is described by its size."""
    buffer = io.BytesIO()
    Image.new("RGB", (3, 2), "red").save(buffer, "PNG")
    [shown] = kernel.run(_display_code(buffer.getvalue())).displays
    assert shown.image().getpixel((0, 0)) == (255, 0, 0)
    assert shown.describe() == "[image/png image, 3x2]"


@dataclasses.dataclass
class Unprintable:
    """A class the user registered whose text form is broken; the kernel defines one of the same name."""

    a: int

    def __str__(self) -> str:
        raise TypeError("no text for this")

    __repr__ = __str__


Unprintable.__module__ = "__main__"  # where the kernel's code defines its classes
codec.register_class(Unprintable)

_KERNEL_CLASS = "import dataclasses\n@dataclasses.dataclass\nclass Unprintable:\n    a: int\n"


def _step(body: str) -> str:
    return f"Thought: next.\n<code>\n{body}\n</code>"


def test_an_answer_that_cannot_be_shown_is_a_step_error_the_model_sees() -> None:
    model = ScriptedModel(
        [
            _step(_KERNEL_CLASS + "Unprintable(1)"),
            _step("final_answer(Unprintable(2))"),
            _step("final_answer('done')"),
        ]
    )
    with CodeAgent(tools=[], model=model, executor=JupyterExecutor(timeout_seconds=20)) as agent:
        assert agent.run("Answer.") == "done"
    value_step, answer_step, last = agent.memory.action_steps()
    assert value_step.error is not None and "value cannot be shown" in value_step.error.message
    assert answer_step.error is not None and "final answer cannot be shown" in answer_step.error.message
    assert not answer_step.is_final_answer and last.is_final_answer
    assert "cannot be shown" in str(model.calls[2])  # the model was told


def test_codeward_run_shows_an_undecodable_display_as_a_note_and_goes_on(tmp_path: Path) -> None:
    model = write_script(tmp_path / "responses.yaml", _display_code(_png_with_broken_pixels()), "final_answer('done')")
    result = subprocess.run(
        command("run", "Show it.", "--executor", "jupyter", "--model", model),
        capture_output=True,
        text=True,
        env=command_env(),
        cwd=tmp_path,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert "[image that could not be decoded: the image/png display is not a readable image" in result.stdout
    assert "Final answer: done" in result.stdout


def test_the_host_restores_no_loaded_class_after_running_every_sandbox_in_process() -> None:
    """Only a sandbox restores the classes loaded there; running sandboxes never turns it on for the host."""
    script = (
        "import warnings\n"
        "from codeward.executors import codec\n"
        "from codeward.executors.local import LocalExecutor\n"
        "from codeward.executors.jupyter import JupyterExecutor\n"
        "for executor in (LocalExecutor(), LocalExecutor(isolation='in_process'), JupyterExecutor()):\n"
        "    with executor:\n"
        "        executor.send_variables({'flag': 1})\n"
        "        executor.run('flag')\n"
        "import platform\n"
        "with warnings.catch_warnings():\n"
        "    warnings.simplefilter('ignore')\n"
        "    value = codec.loads(codec.dumps(platform.uname()))\n"
        "print(type(value).__name__)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "tuple"
