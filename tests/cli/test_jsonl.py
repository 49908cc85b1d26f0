"""The results and audit files: whole lines only, from any number of writers, after any crash."""

from __future__ import annotations

import json
import multiprocessing
import os
import time

import pytest

from codeward.batch.jsonl import JsonlAppender, exclusive_writer, repair_and_read


@pytest.mark.parametrize(
    ("content", "kept", "dropped"),
    [
        (b"", 0, 0),
        (b'{"id": 1}\n{"id": 2}\n', 2, 0),
        (b'{"id": 1}\n{"id": 2, "sta', 1, 14),
        (b'{"id": 1, "sta', 0, 14),
    ],
)
def test_a_torn_last_line_is_cut_and_the_rest_kept(tmp_path, content, kept, dropped):
    path = tmp_path / "results.jsonl"
    path.write_bytes(content)
    records, cut = repair_and_read(path)
    assert len(records) == kept and cut == dropped
    assert path.read_bytes() == content[: len(content) - dropped]
    with JsonlAppender(path) as out:
        out.append({"id": "next"})
    assert [json.loads(line)["id"] for line in path.read_text().splitlines()][-1] == "next"


def test_a_torn_line_in_the_middle_is_reported_not_skipped(tmp_path):
    path = tmp_path / "results.jsonl"
    path.write_text('{"id": 1}\n{"id": 2, "st\n{"id": 3}\n')
    with pytest.raises(ValueError, match="line 2 is not a JSON record"):
        repair_and_read(path)


def _append_many(path: str, writer: int) -> None:
    """Each line goes out in many short writes, as a network file system or a signal can split
    it: only the lock held across the whole line keeps other writers out of its middle."""
    real_write = os.write

    def short_write(fd: int, data: bytes | memoryview) -> int:
        time.sleep(0.0002)
        return real_write(fd, bytes(data[:4096]))

    os.write = short_write  # this is a child process of its own
    with JsonlAppender(path, shared=True) as out:
        for index in range(100):
            out.append({"writer": writer, "index": index, "padding": "x" * 20_000})  # several pages per line


def test_lines_from_concurrent_processes_never_interleave(tmp_path):
    path = tmp_path / "audit.jsonl"
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_append_many, args=(str(path), n)) for n in range(4)]
    for process in writers:
        process.start()
    for process in writers:
        process.join(60)
    records, cut = repair_and_read(path)
    assert cut == 0
    assert sorted((r["writer"], r["index"]) for r in records) == [(w, i) for w in range(4) for i in range(100)]


def test_a_second_writer_of_a_results_file_is_refused(tmp_path):
    path = tmp_path / "results.jsonl"
    with (
        exclusive_writer(path),
        pytest.raises(ValueError, match="another running codeward batch"),
        exclusive_writer(path),
    ):
        pass
    with exclusive_writer(path):  # released with the first
        pass
