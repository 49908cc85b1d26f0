"""The rules for files a user may have been handed, each attacked, and each shown to matter: with its
one guard turned off, the same attack reads the file outside, writes through the link, or leaves the
file readable by others."""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from codeward import handed_files
from codeward.batch.jsonl import JsonlAppender, exclusive_writer, repair_and_read
from codeward.handed_files import HandedFileError, file_name, open_append, open_handed, write_fresh
from codeward.platform.memory import AgentMemory
from codeward.platform.models import ReplayModel
from codeward.platform.run_files import load_run_file, run_file, write_run
from codeward.usage import UsageError

SECRET = "ssh-ed25519 AAAA-the-users-own-key"


@pytest.fixture(autouse=True)
def _umask() -> Iterator[None]:
    """A usual umask (022), under which a file created 0644 is readable by everyone: the harm to show."""
    previous = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(previous)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A file of the user's outside the handed folder, which a link in the folder points at."""
    path = tmp_path / "home" / "authorized_keys"
    path.parent.mkdir()
    path.write_text(SECRET + "\n")
    return path


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    path = tmp_path / "handed"
    path.mkdir()
    return path


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def test_a_link_at_a_read_files_name_is_refused_naming_the_file(folder, outside):
    (folder / "results.jsonl").symlink_to(outside)
    with pytest.raises(HandedFileError, match=r"results.jsonl is a symbolic link; .* remove the link"):
        open_handed(folder / "results.jsonl")
    with pytest.raises(HandedFileError, match="is a symbolic link"):
        repair_and_read(folder / "results.jsonl")  # which would cut the outside file's "torn tail"
    assert outside.read_text() == SECRET + "\n"


def test_control_reading_through_the_link_shows_the_outside_file(folder, outside, monkeypatch):
    (folder / "run.json").symlink_to(outside)
    monkeypatch.setattr(handed_files, "_NO_FOLLOW", 0)
    with open_handed(folder / "run.json") as stream:
        assert stream.read().decode() == SECRET + "\n"


def test_a_fifo_or_a_folder_is_refused_without_waiting(folder):
    os.mkfifo(folder / "results.jsonl")  # opening it to read would wait for a writer forever
    with pytest.raises(HandedFileError, match="not a regular file"):
        open_handed(folder / "results.jsonl")
    with pytest.raises(HandedFileError, match="not a regular file"):
        load_run_file(folder)


def test_a_run_written_over_a_link_replaces_the_link_not_its_target(folder, outside):
    path = folder / "run.json"
    path.symlink_to(outside)
    write_run(path, {"steps": [{"type": "task", "task": "printed output"}]}, None)
    assert outside.read_text() == SECRET + "\n"
    assert not path.is_symlink() and json.loads(path.read_text())["steps"][0]["task"] == "printed output"
    assert _mode(path) == 0o600
    assert sorted(p.name for p in folder.iterdir()) == ["run.json"]  # no temporary file left behind


def test_control_a_plain_write_goes_through_the_link(folder, outside, monkeypatch):
    """The landed write (``Path.write_text``) in place of `write_fresh`: the run's text lands in the user's file."""
    from codeward.platform import run_files

    monkeypatch.setattr(run_files, "write_fresh", lambda path, data: path.write_bytes(data))
    (folder / "run.json").symlink_to(outside)
    write_run(folder / "run.json", {"steps": [{"type": "task", "task": "printed output"}]}, None)
    assert "printed output" in outside.read_text()


def test_appending_never_follows_a_link(folder, outside):
    (folder / "audit.jsonl").symlink_to(outside)
    with pytest.raises(HandedFileError, match=r"audit\.jsonl is a symbolic link"):
        JsonlAppender(folder / "audit.jsonl", shared=True)
    with pytest.raises(HandedFileError), exclusive_writer(folder / "audit.jsonl"):
        pass
    assert outside.read_text() == SECRET + "\n"


def test_control_appending_through_the_link_writes_the_users_file(folder, outside, monkeypatch):
    monkeypatch.setattr(handed_files, "_NO_FOLLOW", 0)
    (folder / "audit.jsonl").symlink_to(outside)
    with JsonlAppender(folder / "audit.jsonl") as audit:
        audit.append({"code": "the model's line"})
    assert "the model's line" in outside.read_text()


def test_written_files_are_the_owners_only_unless_shared_files_are_asked_for(folder, monkeypatch):
    write_fresh(folder / "page.html", b"<p>secret</p>")
    with JsonlAppender(folder / "results.jsonl") as results:
        results.append({"id": "a"})
    with exclusive_writer(folder / "held.jsonl"):
        pass
    assert {p.name: _mode(p) for p in folder.iterdir()} == dict.fromkeys(
        ["page.html", "results.jsonl", "held.jsonl"], 0o600
    )
    monkeypatch.setenv(handed_files.SHARED_FILES_VARIABLE, "1")
    write_fresh(folder / "shared.html", b"<p>for the team</p>")
    assert _mode(folder / "shared.html") == 0o644


def test_control_with_the_mode_rule_off_files_are_readable_by_everyone(folder, monkeypatch):
    monkeypatch.setattr(handed_files, "file_mode", lambda: 0o644)
    write_run(folder / "run.json", {"steps": []}, None)
    with JsonlAppender(folder / "audit.jsonl") as audit:
        audit.append({"job_id": "a"})
    assert _mode(folder / "run.json") == _mode(folder / "audit.jsonl") == 0o644


def test_ids_become_short_safe_distinct_file_names(folder):
    long = "x" * 1000
    names = {
        job_id: file_name(job_id, ".json") for job_id in ["job-01", long, long + "y", "../../etc/passwd", ".", "a\0b"]
    }
    assert names["job-01"] == "job-01.json"  # a safe id keeps its name, so older folders still read
    assert len(set(names.values())) == len(names)
    for name in names.values():
        assert len(name.encode()) <= handed_files.MOST_NAME_CHARACTERS + 14 and "/" not in name and "\0" not in name
        assert not name.startswith(".")
    write_fresh(run_file(folder, long), b"{}")  # a file system takes it (255 bytes at most)
    assert load_run_file(run_file(folder, long)) == {}


def test_control_without_the_length_rule_a_long_id_names_no_file(folder, monkeypatch):
    monkeypatch.setattr(handed_files, "MOST_NAME_CHARACTERS", 10**6)
    with pytest.raises(OSError, match="File name too long"):
        write_fresh(run_file(folder, "x" * 1000), b"{}")


def test_open_append_creates_with_the_mode_and_holds_no_link(folder):
    fd = open_append(folder / "new.jsonl")
    os.close(fd)
    assert _mode(folder / "new.jsonl") == 0o600


def _outside_run(folder: Path, outside: Path) -> Path:
    """A saved run of the user's outside the folder, and a link to it in the folder."""
    steps = [
        {"type": "task", "task": SECRET},
        {"type": "action", "step_number": 1, "model_output_message": {"role": "assistant"}},
    ]
    outside.write_text(json.dumps({"steps": steps}))
    (folder / "run.json").symlink_to(outside)
    return folder / "run.json"


def test_replay_and_memory_refuse_a_run_behind_a_link(folder, outside):
    link = _outside_run(folder, outside)
    for read in (ReplayModel, AgentMemory.load):
        with pytest.raises(HandedFileError, match="is a symbolic link"):
            read(link)


def test_control_following_the_link_loads_the_outside_run(folder, outside, monkeypatch):
    monkeypatch.setattr(handed_files, "_NO_FOLLOW", 0)
    memory = AgentMemory.load(_outside_run(folder, outside))
    assert SECRET in json.dumps(memory.to_dict())


def test_a_long_name_the_user_chose_still_gets_its_temporary_file(folder):
    path = folder / ("p" * 250 + ".html")  # what -o may name: the temporary beside it must fit too
    write_fresh(path, b"page")
    assert path.read_bytes() == b"page" and [p.name for p in folder.iterdir()] == [path.name]


def test_a_fifo_at_an_appended_files_name_is_refused_without_waiting(folder):
    os.mkfifo(folder / "results.jsonl")
    with pytest.raises(HandedFileError, match="not a regular file"):
        JsonlAppender(folder / "results.jsonl")


def test_control_opened_as_usual_the_fifo_holds_the_writer_until_someone_reads(folder, monkeypatch):
    monkeypatch.setattr(handed_files.os, "O_NONBLOCK", 0)
    fifo = folder / "results.jsonl"
    os.mkfifo(fifo)

    def open_it() -> None:
        with contextlib.suppress(HandedFileError):  # once a reader lets it go, the kind check refuses it
            JsonlAppender(fifo).close()

    opening = threading.Thread(target=open_it, daemon=True)
    opening.start()
    opening.join(1.0)
    held = opening.is_alive()
    with open(fifo, "rb"):  # a reader lets it go, so the test leaves no thread behind
        opening.join(5.0)
    assert held


def test_an_existing_file_readable_by_others_is_narrowed_before_anything_is_appended(folder):
    (folder / "audit.jsonl").write_text("")
    (folder / "audit.jsonl").chmod(0o666)
    with JsonlAppender(folder / "audit.jsonl") as audit:
        audit.append({"job_id": "a"})
    assert _mode(folder / "audit.jsonl") == 0o600


def test_control_without_narrowing_a_handed_world_readable_file_stays_so(folder, monkeypatch):
    monkeypatch.setattr(handed_files.os, "fchmod", lambda fd, mode: None)
    (folder / "audit.jsonl").write_text("")
    (folder / "audit.jsonl").chmod(0o666)
    with JsonlAppender(folder / "audit.jsonl") as audit:
        audit.append({"job_id": "a"})
    assert _mode(folder / "audit.jsonl") == 0o666


# Sizes: one read of a handed file holds at most the budget ----------------------------------------------


def _saved_run(path: Path, padding: int) -> Path:
    steps = [{"type": "action", "step_number": 1, "model_output_message": {"role": "assistant", "content": "x"}}]
    path.write_text(json.dumps({"steps": steps, "padding": "p" * padding}))
    return path


def test_a_saved_run_over_the_budget_is_refused_by_its_size_everywhere_it_is_read(folder, monkeypatch):
    from codeward.view.runs import read_run

    run = _saved_run(folder / "run.json", 5_000)
    monkeypatch.setenv(handed_files.MOST_HANDED_BYTES_VARIABLE, "1000")
    for read in (load_run_file, ReplayModel, AgentMemory.load, read_run):
        with pytest.raises(UsageError) as refused:
            read(run)
        message = str(refused.value)
        assert f"holds {run.stat().st_size:,} bytes" in message and "1,000 bytes" in message, message
        assert handed_files.MOST_HANDED_BYTES_VARIABLE in message


def test_control_under_a_larger_budget_the_same_run_is_read(folder, monkeypatch):
    run = _saved_run(folder / "run.json", 5_000)
    monkeypatch.setenv(handed_files.MOST_HANDED_BYTES_VARIABLE, "10_000")
    assert len(load_run_file(run)["padding"]) == 5_000
    assert ReplayModel(run) is not None


def test_a_huge_handed_run_is_refused_before_a_byte_is_read(folder, monkeypatch):
    run = folder / "run.json"
    with open(run, "wb") as handle:
        handle.truncate(8 * 2**30)  # 8 GiB on paper, no block on disk: read whole, it would take 8 GiB
    reads: list[int] = []
    real_open = handed_files.open_handed

    def counting(path, **kwargs):
        stream = real_open(path, **kwargs)
        real_read = stream.read
        stream.read = lambda *size: reads.append(1) or real_read(*size)  # type: ignore[method-assign]
        return stream

    monkeypatch.setattr(handed_files, "open_handed", counting)
    with pytest.raises(HandedFileError, match="8,589,934,592 bytes"):
        load_run_file(run)
    assert reads == []


def test_a_line_over_the_budget_is_passed_over_and_the_lines_after_it_are_read(folder, monkeypatch):
    from codeward.view.batches import read_batch

    record = json.dumps({"id": "after", "ok": True, "output": 1})
    results = folder / "results.jsonl"
    with open(results, "wb") as handle:
        handle.write(b'{"id": "long", "output": "')
        handle.seek(64 * 2**20, os.SEEK_CUR)  # a 64 MiB line of zero bytes, sparse
        handle.write(b'"}\n' + record.encode() + b"\n")
    monkeypatch.setenv(handed_files.MOST_HANDED_BYTES_VARIABLE, str(2**20))
    lines = list(handed_files.handed_lines(results))
    assert [(number, line) for number, line in lines] == [(1, None), (2, record.encode() + b"\n")]
    view = read_batch(folder)
    assert [(bad.number, bad.reason) for bad in view.bad_lines] == [(1, "over the 1,048,576 bytes a line may hold")]
    with pytest.raises(UsageError, match="line 1 is over the 1,048,576 bytes"):
        repair_and_read(results)


def test_control_under_a_larger_budget_the_long_line_is_read_whole(folder, monkeypatch):
    results = folder / "results.jsonl"
    results.write_text(json.dumps({"id": "long", "output": "o" * 3_000}) + "\n")
    monkeypatch.setenv(handed_files.MOST_HANDED_BYTES_VARIABLE, "10000")
    records, _ = repair_and_read(results)
    assert len(records[0]["output"]) == 3_000


def test_a_budget_that_is_not_a_number_of_bytes_says_so(folder, monkeypatch):
    run = _saved_run(folder / "run.json", 10)
    for setting in ("lots", "0", "-5"):
        monkeypatch.setenv(handed_files.MOST_HANDED_BYTES_VARIABLE, setting)
        with pytest.raises(HandedFileError, match="is not a number of bytes"):
            load_run_file(run)
