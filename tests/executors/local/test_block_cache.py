"""The compiled code of blocks seen before (`block_cache`): kept by all the compile reads, the
sets it adds to added to again, renamed for the block that runs, bounded."""

from __future__ import annotations

import marshal
from types import CodeType

import pytest

from codeward.executors import LocalExecutor
from codeward.executors.base import ExecutionError
from codeward.executors.local.block_cache import CACHED_SOURCE, BlockCache, renamed
from codeward.executors.local.block_compiler import CodeRefused, compile_block

#: A block whose compile adds to both sets: a name a function declares global, a class's names.
ADDING = (
    "def f():\n    global later\n    later = 1\n"
    "class Box:\n    def put(self, item):\n        self.size = item\n"
    "box = Box()\nbox.put(len([n for n in range(3)]))\n"
)


def filenames(code: CodeType) -> set[str]:
    names = {code.co_filename}
    for item in code.co_consts:
        if isinstance(item, CodeType):
            names |= filenames(item)
    return names


def same_code(first: CodeType, second: CodeType, filename: str) -> bool:
    """Equal but for the file name, at every depth."""
    return marshal.dumps(renamed(first, filename)) == marshal.dumps(renamed(second, filename))


def test_a_block_seen_before_gives_the_code_a_fresh_compile_gives_under_its_own_name():
    cache = BlockCache()
    declared: set[str] = set()
    attributes: set[str] = set()
    first = cache.compile(ADDING, "<code block 1>", frozenset(), declared, attributes)
    fresh_declared, fresh_attributes = set(declared), set(attributes)
    second = cache.compile(ADDING, "<code block 2>", frozenset(), declared, attributes)
    third = cache.compile(ADDING, "<code block 3>", frozenset(), declared, attributes)
    assert third is not second and filenames(third) == {"<code block 3>"}
    assert filenames(first) == {"<code block 1>"}
    expected = compile_block(ADDING, "<code block 3>", frozenset(), set(fresh_declared), set(fresh_attributes))
    assert same_code(third, expected, "<x>")
    assert len(cache) == 2  # the second run saw the sets the first had grown: a key of its own


def test_a_block_taken_from_the_cache_adds_to_the_sets_as_its_compile_did():
    cache = BlockCache()
    cache.compile(ADDING, "<code block 1>", frozenset(), set(), set())
    declared: set[str] = set()
    attributes: set[str] = set()
    cache.compile(ADDING, "<code block 2>", frozenset(), declared, attributes)
    assert "later" in declared
    assert {"put", "size"} <= attributes


@pytest.mark.parametrize("changed", ["reserved", "declared", "attributes"])
def test_a_block_whose_compile_would_read_something_else_is_compiled_again(changed):
    source = "x = []\nx.append(1)\nbox.size\n"
    cache = BlockCache()
    cache.compile(source, "<code block 1>", frozenset(), set(), set())
    reserved = frozenset({"box"}) if changed == "reserved" else frozenset()
    declared = {"x"} if changed == "declared" else set()
    attributes = {"size"} if changed == "attributes" else set()
    code = cache.compile(source, "<code block 2>", reserved, declared, attributes)
    assert len(cache) == 2
    assert same_code(code, compile_block(source, "<code block 2>", reserved, set(declared), set(attributes)), "<x>")


def test_the_cache_keeps_the_latest_blocks_and_no_long_one():
    cache = BlockCache(size=2)
    for number in range(3):
        cache.compile(f"x = {number}", "<b>", frozenset(), set(), set())
    assert len(cache) == 2
    cache.compile("y = 1\n" + "#" * CACHED_SOURCE, "<b>", frozenset(), set(), set())
    assert len(cache) == 2


def test_a_refused_block_is_refused_each_time():
    cache = BlockCache()
    for _ in range(2):
        with pytest.raises(CodeRefused):
            cache.compile("().__class__", "<b>", frozenset(), set(), set())
    assert len(cache) == 0


@pytest.mark.parametrize("isolation", ["process", "in_process"])
def test_a_block_run_again_names_itself_in_its_traceback(isolation):
    code = "x = 1\n\n1 / 0\n"
    with LocalExecutor(isolation=isolation) as executor:
        executor.run("y = 2")
        for _ in range(2):
            with pytest.raises(ExecutionError) as info:
                executor.run(code)
        assert '"<code block 3>", line 3' in (info.value.traceback or ""), info.value.traceback
        assert executor.run(code.replace("1 / 0", "x + 1")).output == 2
