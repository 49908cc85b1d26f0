"""A run's artifacts saved, read back and shown: ``codeward run --collect-outputs --save`` and ``codeward
view`` end to end; ``--outputs-dir``; and handed run files whose artifacts try to lead out of a folder,
blow up the page, or run script (each with the budget or rule that stops it, and a control)."""

from __future__ import annotations

import base64
import json
import stat
import subprocess
from pathlib import Path

import pytest

from codeward.platform.artifacts import MOST_FILE_BYTES, Artifact
from codeward.platform.memory import AgentMemory
from codeward.view import render_run
from codeward.view import runs as run_pages
from tests.cli.conftest import command, command_env, write_script

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
HOSTILE_TEXT = "<script>window.__pwned=1</script> & more"
SVG = '<svg xmlns="http://www.w3.org/2000/svg"><script>window.__pwned=3</script></svg>'

WRITE = f"""with open('outputs/chart.png', 'wb') as f:
    f.write({PNG!r})
with open('outputs/report.txt', 'w') as f:
    f.write({HOSTILE_TEXT!r})"""


def _saved(tmp_path: Path, *extra: str) -> Path:
    model = write_script(tmp_path / "script.yaml", WRITE, "final_answer('done')")
    done = subprocess.run(
        command("run", "draw", "--model", model, "--collect-outputs", "--save", "run.json", *extra),
        capture_output=True,
        text=True,
        env=command_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr + done.stdout
    return tmp_path / "run.json"


def test_a_saved_run_carries_its_artifacts_and_the_page_shows_them(tmp_path: Path) -> None:
    saved = _saved(tmp_path)
    memory = AgentMemory.load(saved)
    step = memory.action_steps()[0]
    assert [(a.name, a.data, a.media_type) for a in step.artifacts] == [
        ("chart.png", PNG, "image/png"),
        ("report.txt", HOSTILE_TEXT.encode(), "text/plain"),
    ]
    page = render_run(saved)
    assert 'src="data:image/png;base64,' + base64.b64encode(PNG).decode() in page
    assert "&lt;script&gt;window.__pwned=1&lt;/script&gt; &amp; more" in page
    assert HOSTILE_TEXT not in page


def test_outputs_dir_writes_the_files_fresh_and_owner_only(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    outside = tmp_path / "outside.txt"
    outside.write_text("untouched")
    (tmp_path / "out" / "step1-report.txt").symlink_to(outside)  # a planted link at the name it would take
    _saved(tmp_path, "--outputs-dir", "out")
    files = sorted(p.name for p in (tmp_path / "out").iterdir())
    assert files == ["step1-chart.png", "step1-report-1.txt", "step1-report.txt"]
    assert (tmp_path / "out" / "step1-chart.png").read_bytes() == PNG
    assert (tmp_path / "out" / "step1-report-1.txt").read_text() == HOSTILE_TEXT
    assert outside.read_text() == "untouched"
    assert stat.S_IMODE((tmp_path / "out" / "step1-chart.png").stat().st_mode) == 0o600


def test_outputs_dir_flattens_names_from_folders(tmp_path: Path) -> None:
    from codeward.cli.outputs_dir import write_artifacts
    from codeward.platform.memory import ActionStep

    step = ActionStep(2, artifacts=[Artifact("plots/a/one.csv", b"x", "text/csv")])
    [written] = write_artifacts([step], tmp_path / "made")
    assert written.parent == tmp_path / "made" and written.name == "step2-plots_a_one.csv"
    step.artifacts.append(Artifact("a/../../b.txt", b"y", "text/plain"))  # never read back like this, but
    assert write_artifacts([step], tmp_path / "made")[1].parent == tmp_path / "made"  # it stays in the folder


# -- handed run files ---------------------------------------------------------------------------------


def _handed(tmp_path: Path, *records: object, notes: object = None) -> Path:
    step = {"type": "action", "step_number": 1, "artifacts": list(records), "artifact_notes": notes or []}
    path = tmp_path / "handed.json"
    path.write_text(json.dumps({"steps": [{"type": "task", "task": "t"}, step]}))
    return path


def _record(name: object, data: bytes) -> dict[str, object]:
    return {"name": name, "size": 1, "media_type": "image/png", "base64": base64.b64encode(data).decode()}


def test_a_name_that_leads_out_is_refused_and_a_plain_one_shown(tmp_path: Path) -> None:
    path = _handed(tmp_path, _record("../../x", b"escaped"), _record("plain.txt", b"kept"))
    view = run_pages.read_run(path)
    [step] = view.steps
    assert [a.name for a in step.artifacts] == ["plain.txt"]
    assert "could lead out" in step.artifacts_refused[0]
    assert [a.name for a in AgentMemory.load(path).action_steps()[0].artifacts] == ["plain.txt"]
    page = render_run(view)
    assert "escaped" not in page and "../../x" not in page


def test_an_oversized_blob_is_refused_before_it_is_decoded(tmp_path: Path) -> None:
    path = _handed(tmp_path, _record("huge.txt", b"a" * (MOST_FILE_BYTES + 1)), _record("small.txt", b"ok"))
    [step] = run_pages.read_run(path).steps
    assert [a.name for a in step.artifacts] == ["small.txt"]
    assert f"past the {MOST_FILE_BYTES:,} bytes allowed" in step.artifacts_refused[0]
    assert [a.name for a in AgentMemory.load(path).action_steps()[0].artifacts] == ["small.txt"]


def test_control_without_the_blob_budget_the_huge_artifact_is_decoded(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(run_pages, "MAX_ARTIFACT_BYTES", 10**12)
    path = _handed(tmp_path, _record("huge.txt", b"a" * (MOST_FILE_BYTES + 1)))
    [step] = run_pages.read_run(path).steps
    assert [a.size for a in step.artifacts] == [MOST_FILE_BYTES + 1]


def test_a_page_decodes_a_bounded_total_of_artifact_bytes(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(run_pages, "MOST_PAGE_ARTIFACT_BYTES", 2500)
    path = _handed(tmp_path, *[_record(f"f{i}.bin", bytes(1000)) for i in range(4)])
    [step] = run_pages.read_run(path).steps
    assert [a.name for a in step.artifacts] == ["f0.bin", "f1.bin"]
    assert all("bytes of artifacts a page decodes" in reason for reason in step.artifacts_refused)


def test_control_without_the_page_budget_every_artifact_is_decoded(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(run_pages, "MOST_PAGE_ARTIFACT_BYTES", 10**12)
    path = _handed(tmp_path, *[_record(f"f{i}.bin", bytes(1000)) for i in range(4)])
    [step] = run_pages.read_run(path).steps
    assert len(step.artifacts) == 4


def test_a_step_shows_a_bounded_number_of_artifacts(tmp_path: Path) -> None:
    count = run_pages.MOST_ARTIFACTS + 7
    path = _handed(tmp_path, *[_record(f"f{i}.txt", b"x") for i in range(count)])
    [step] = run_pages.read_run(path).steps
    assert len(step.artifacts) == run_pages.MOST_ARTIFACTS and step.artifacts_left_off == 7
    assert "7 more file(s); a step shows at most 50" in render_run(path)


def test_only_small_artifacts_are_shown_as_text(tmp_path: Path) -> None:
    large = b"y" * (run_pages.MOST_ARTIFACT_TEXT + 1)
    path = _handed(tmp_path, _record("small.txt", b"short"), _record("large.txt", large))
    [step] = run_pages.read_run(path).steps
    assert [(a.name, a.text) for a in step.artifacts] == [("small.txt", "short"), ("large.txt", None)]


@pytest.mark.parametrize(
    "name, data",
    [
        ("evil.svg", SVG.encode()),
        ("evil.html", b"<script>window.__pwned=4</script>"),
        ("fake.png", SVG.encode()),  # a name that says PNG, bytes that are not
        ("evil.svg", PNG),  # PNG bytes under a name that says SVG
    ],
)
def test_svg_html_and_false_images_are_never_inline(tmp_path: Path, name: str, data: bytes) -> None:
    path = _handed(tmp_path, {**_record(name, data), "media_type": "image/png"})
    [step] = run_pages.read_run(path).steps
    assert [a.image for a in step.artifacts] == [None]
    page = render_run(path)
    assert "<script>window.__pwned" not in page and "<svg" not in page
    assert "data:image/svg" not in page and "data:text/html" not in page
    assert page.count("data:image/png") == 0


def test_control_a_real_png_under_its_name_is_inline(tmp_path: Path) -> None:
    path = _handed(tmp_path, _record("chart.png", PNG))
    assert render_run(path).count('src="data:image/png;base64,') == 1


def test_names_and_notes_are_escaped(tmp_path: Path) -> None:
    path = _handed(tmp_path, _record("<b>x</b>.txt", b"1"), notes=["<i>big.bin</i>: over the budget"])
    page = render_run(path)
    assert "&lt;b&gt;x&lt;/b&gt;.txt" in page and "&lt;i&gt;big.bin&lt;/i&gt;" in page
    assert "<b>x</b>" not in page and "<i>big.bin</i>" not in page


def test_reading_a_saved_step_keeps_a_bounded_number_of_artifacts(tmp_path: Path) -> None:
    from codeward.platform.artifacts import MOST_FILES

    path = _handed(tmp_path, *[_record(f"f{i}.txt", b"x") for i in range(MOST_FILES + 10)])
    assert len(AgentMemory.load(path).action_steps()[0].artifacts) == MOST_FILES


def test_a_steps_notes_on_the_page_are_bounded(tmp_path: Path) -> None:
    notes = [f"note {i}: " + "n" * 5000 for i in range(run_pages.MOST_ARTIFACTS + 30)]
    [step] = run_pages.read_run(_handed(tmp_path, notes=notes)).steps
    assert len(step.artifact_notes) == run_pages.MOST_ARTIFACTS
    assert all(len(note) < 2100 for note in step.artifact_notes)


def test_an_outputs_dir_that_is_a_file_fails_before_the_run(tmp_path: Path) -> None:
    (tmp_path / "taken").write_text("a file")
    model = write_script(tmp_path / "script.yaml", "print('ran')", "final_answer('done')")
    done = subprocess.run(
        command("run", "x", "--model", model, "--outputs-dir", "taken"),
        capture_output=True,
        text=True,
        env=command_env(),
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 2 and "--outputs-dir taken" in done.stdout + done.stderr
    assert "Step 1" not in done.stdout


def test_a_page_of_artifacts_costs_a_bounded_multiple_of_the_file(tmp_path: Path) -> None:
    """40 images of 1 MiB and 10 texts: the page holds them as base64 and as a data URI, within the
    viewer's documented multiple (measured: about 7 times the file)."""
    from tests.viewer.test_page_budgets import MULTIPLE, OWN, _peak

    png = _record("c.png", b"\x89PNG\r\n\x1a\n" + bytes(2**20))["base64"]
    text = _record("r.txt", b"t" * 60_000)["base64"]
    records = [{"name": f"c{i}.png", "base64": png} for i in range(40)]
    records += [{"name": f"r{i}.txt", "base64": text} for i in range(10)]
    path = _handed(tmp_path, *records)
    assert _peak("run", path) <= MULTIPLE * path.stat().st_size + OWN
    assert render_run(path).count('src="data:image/png;base64,') == 40
