"""The compiled code of the blocks a sandbox has seen, so that a block sent again (an agent's
retry, a loop that runs the same snippet) skips the policy compile, most of a small block's time.

A block's compiled code depends on its source and on what `compile_block` reads besides: the
names reserved for tools, the names earlier blocks may bind at module level from elsewhere
(``global`` in a function, a walrus in a kept generator: they keep their guards) and the public
names earlier blocks' classes define (reads of them check the receiver's class). All of them are
in the key, so a block whose earlier blocks changed what its compile would give is compiled
again; nothing else of the sandbox's state (the values its names hold) is read by the compile.
A block compiled again also adds to the sandbox's sets what its compile added, as the compile would.

The code is kept under the name (``co_filename``) of the block that first compiled it and renamed
for each later block, so that a traceback names the block that ran. The cache is bounded: the
`CACHED_BLOCKS` most recently run, none longer than `CACHED_SOURCE` characters. Refused blocks are
not kept: their report is made again.
"""

from __future__ import annotations

from collections import OrderedDict
from types import CodeType

from codeward.executors.local.block_compiler import compile_block

__all__ = ["CACHED_BLOCKS", "CACHED_SOURCE", "BlockCache"]

#: How many compiled blocks a sandbox keeps (the most recently run).
CACHED_BLOCKS = 64
#: The longest source kept, in characters: a longer block is compiled each time.
CACHED_SOURCE = 100_000

_Key = tuple[str, frozenset[str], frozenset[str], frozenset[str]]


class BlockCache:
    """`compile_block` with the code of the blocks seen before kept (see the module)."""

    def __init__(self, size: int = CACHED_BLOCKS) -> None:
        self.size = size
        self._kept: OrderedDict[_Key, tuple[CodeType, frozenset[str], frozenset[str]]] = OrderedDict()

    def compile(
        self,
        source: str,
        filename: str,
        reserved: frozenset[str],
        declared_global: set[str],
        class_attributes: set[str],
    ) -> CodeType:
        """`compile_block(source, filename, reserved, declared_global, class_attributes)`, which
        adds to the two sets as it does; raises its `CodeRefused`."""
        if len(source) > CACHED_SOURCE:
            return compile_block(source, filename, reserved, declared_global, class_attributes)
        declared, attributes = frozenset(declared_global), frozenset(class_attributes)
        key = (source, reserved, declared, attributes)
        kept = self._kept.get(key)
        if kept is None:
            code = compile_block(source, filename, reserved, declared_global, class_attributes)
            self._kept[key] = (code, frozenset(declared_global - declared), frozenset(class_attributes - attributes))
            if len(self._kept) > self.size:
                self._kept.popitem(last=False)
            return code
        self._kept.move_to_end(key)
        code, added_declared, added_attributes = kept
        declared_global |= added_declared
        class_attributes |= added_attributes
        return renamed(code, filename)

    def __len__(self) -> int:
        return len(self._kept)


def renamed(code: CodeType, filename: str) -> CodeType:
    """`code` and the code objects it holds (functions, classes, lambdas, comprehensions) under
    `filename`."""
    if code.co_filename == filename:
        return code
    constants = code.co_consts
    if any(type(item) is CodeType for item in constants):
        constants = tuple(renamed(item, filename) if type(item) is CodeType else item for item in constants)
    return code.replace(co_filename=filename, co_consts=constants)
