"""What the viewer's tests look at, made as users make it: a run saved by ``codeward run --save``
and a batch folder written by ``codeward batch --runs``, both real commands with a scripted model;
and a headless Chromium (Debian's, with its driver) to open the pages in."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cli.conftest import SAMPLE_TOOLS, code, command, command_env
from tests.conftest import missing

HOSTILE_PRINT = "<script>window.__pwned=1</script>"
HOSTILE_IMAGE = '<img src=x onerror="window.__pwned=2">'
LONG_LINES = 120
#: The batch's jobs: what each kind's script runs, the state it ends in, and its job settings.
KINDS: dict[str, tuple[list[str], str, dict[str, Any]]] = {
    "success": (
        ["waited = stubborn_wait(0.1)\nimport time\ntime.sleep(0.05)\nn = double(21)\nprint(n)", "final_answer(n)"],
        "success",
        {},
    ),
    "recovers": (["print(1 / 0)", "final_answer('recovered')"], "success", {}),
    "out_of_steps": (["a = 1", "b = 2", "final_answer('late')"], "max_steps_error", {"max_steps": 2}),
    "model_fails": (["c = 3"], "error", {}),
    "hostile": ([f"print({HOSTILE_PRINT!r})", f"final_answer({HOSTILE_IMAGE!r})"], "success", {}),
}
ORDER = ["success", "recovers", "out_of_steps", "model_fails", "hostile"]
JOBS = 50


def _codeward(folder: Path, *args: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command(*args), capture_output=True, text=True, env=command_env(), cwd=folder, timeout=timeout
    )


@pytest.fixture(scope="session")
def saved_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A run saved by ``codeward run --save`` on the jupyter executor (one that displays images): hostile
    text in the model's words and in what the code printed, a long output, a displayed PNG, an error."""
    folder = tmp_path_factory.mktemp("run")
    responses = [
        code(
            f"print({HOSTILE_PRINT!r})\nprint({HOSTILE_IMAGE!r})\nfor i in range({LONG_LINES}):\n    print('line', i)",
            thought=f"Let me look. {HOSTILE_IMAGE}",
        ),
        code("from PIL import Image\nimage = Image.new('RGB', (40, 30), (200, 30, 30))\ndisplay(image)"),
        code("print(1 / 0)", thought="This will fail."),
        code("final_answer('<b>done</b>')"),
    ]
    (folder / "script.yaml").write_text(yaml.safe_dump(responses), encoding="utf-8")
    done = _codeward(
        folder,
        "run",
        "Show what you can.",
        "--model",
        "script:script.yaml",
        "--executor",
        "jupyter",
        "--save",
        "run.json",
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / "run.json"


@pytest.fixture(scope="session")
def batch_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder written by a real ``codeward batch --runs`` of `JOBS` jobs on the local executor, some failing."""
    folder = tmp_path_factory.mktemp("batch")
    scripts = {}
    for kind, (bodies, _, _) in KINDS.items():
        (folder / f"{kind}.yaml").write_text(yaml.safe_dump([code(body) for body in bodies]), encoding="utf-8")
        scripts[kind] = f"script:{kind}.yaml"
    with open(folder / "jobs.jsonl", "w", encoding="utf-8") as jobs:
        for index in range(JOBS):
            kind = ORDER[index % len(ORDER)]
            job = {
                "id": f"job-{index:02d}",
                "task": f"Task {index} ({kind}).",
                "model": scripts[kind],
                **KINDS[kind][2],
            }
            jobs.write(json.dumps(job) + "\n")
    done = _codeward(folder, "batch", "jobs.jsonl", "--tools", SAMPLE_TOOLS, "--concurrency", "4", "--runs", "runs")
    assert done.returncode == 1, done.stdout + done.stderr  # some jobs failed, as meant
    return folder / "runs"


def expected_state(job_id: str) -> str:
    return KINDS[ORDER[int(job_id.split("-")[1]) % len(ORDER)]][1]


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless Chromium driven by Selenium; missing, it fails the test under CODEWARD_REQUIRE_ALL=1."""
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing("the viewer's browser tests need Debian's chromium and chromium-driver: run .ci/browser.sh")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for argument in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1200,1500"):
        options.add_argument(argument)
    chrome = webdriver.Chrome(service=Service(driver), options=options)
    try:
        yield chrome
    finally:
        chrome.quit()


def screenshot_path(tmp_path: Path, name: str) -> Path:
    """Where a page's screenshot goes: the README's images with CODEWARD_UPDATE_SCREENSHOTS=1, else scratch."""
    if os.environ.get("CODEWARD_UPDATE_SCREENSHOTS") == "1":
        folder = Path(__file__).resolve().parents[2] / "docs" / "images"
        folder.mkdir(parents=True, exist_ok=True)
        return folder / name
    return tmp_path / name


#: How many jobs the viewer's scale tests write pages for: the issue's batch of ten thousand.
SCALE_JOBS = 10_000
_MEASURE = """
import resource, subprocess, sys, time
started = time.monotonic()
done = subprocess.run(sys.argv[1:], capture_output=True, text=True)
seconds = time.monotonic() - started
sys.stderr.write(done.stdout + done.stderr)
print(done.returncode, seconds, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024)
"""


def scale_folder(batch_folder: Path, folder: Path, jobs: int) -> Path:
    """A runs folder of `jobs` jobs in the files ``codeward batch --runs`` writes, made quickly from the real
    batch's: each job is one of its `JOBS` (its results line, audit lines and run file) under a new id."""
    results = [json.loads(line) for line in (batch_folder / "results.jsonl").read_text().splitlines()]
    blocks: dict[str, list[dict[str, Any]]] = {}
    for line in (batch_folder / "audit.jsonl").read_text().splitlines():
        record = json.loads(line)
        blocks.setdefault(record["job_id"], []).append(record)
    runs = {record["id"]: (batch_folder / f"{record['id']}.json").read_bytes() for record in results}
    folder.mkdir()
    with open(folder / "results.jsonl", "w") as out, open(folder / "audit.jsonl", "w") as audit:
        for index in range(jobs):
            model = results[index % len(results)]
            job_id = f"job-{index:05d}"
            out.write(json.dumps({**model, "id": job_id}) + "\n")
            audit.writelines(json.dumps({**block, "job_id": job_id}) + "\n" for block in blocks.get(model["id"], []))
            (folder / f"{job_id}.json").write_bytes(runs[model["id"]])
    return folder


def measured(*args: str) -> tuple[subprocess.CompletedProcess[str], float, int]:
    """`codeward ARGS` run in a process of its own, with its wall time (s) and peak resident memory (bytes)."""
    done = subprocess.run(
        [sys.executable, "-c", _MEASURE, *command(*args)],
        capture_output=True,
        text=True,
        env=command_env(),
        timeout=600,
    )
    code, seconds, peak = done.stdout.split()
    return done, float(seconds), int(peak) if code == "0" else -1


@pytest.fixture(scope="session")
def many_jobs(batch_folder: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, float, int]:
    """`SCALE_JOBS` jobs' folder after a real ``codeward view --runs`` of it: the folder, the seconds the command
    took and its peak resident memory (ru_maxrss, in bytes)."""
    folder = scale_folder(batch_folder, tmp_path_factory.mktemp("scale") / "runs", SCALE_JOBS)
    done, seconds, peak = measured("view", "--runs", str(folder))
    assert peak > 0, done.stderr
    return folder, seconds, peak
