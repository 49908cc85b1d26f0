"""One block of the model's code compiled for the local executor: parsed, accepted by the
policy and instrumented in one walk (`instrumenter`), then given the fast forms that rest
on what that walk found (`receivers`, `block_function`, `own_reads`), and compiled.
"""

from __future__ import annotations

import ast
from types import CodeType

from codeward.executors.local.block_function import as_function, function_code
from codeward.executors.local.instrumenter import Instrumenter, capture_last_expression
from codeward.executors.local.name_bindings import later_global_bindings
from codeward.executors.local.own_reads import fast_own_reads, own_attribute_names
from codeward.executors.local.policy import AUGMENTED, GUARDED_ATTRIBUTES
from codeward.executors.local.receivers import fast_receivers
from codeward.executors.local.refusals import CodeRefused, policy_report, syntax_report, unencodable
from codeward.executors.local.type_inference import plain_names

__all__ = ["CodeRefused", "compile_block"]

_TOO_DEEP = (
    "the code nests too deeply for the sandbox to compile it (hundreds of operators in one chain, or "
    "brackets, calls or functions hundreds deep); build the value in steps, with a name for each part"
)


def compile_block(
    source: str,
    filename: str,
    reserved: frozenset[str] = frozenset(),
    declared_global: set[str] | None = None,
    class_attributes: set[str] | None = None,
) -> CodeType:
    """Compile one block of the model's code, or raise `CodeRefused` with a readable report.

    `reserved` names (the tools) cannot be assigned. `declared_global` collects,
    across the blocks of one sandbox, the names code may bind at module level after the
    statement that holds it (``global`` in a function, a walrus in a kept generator);
    `class_attributes` the public names its classes define (see `receivers`); pass the
    same sets every time (None: a one-off block). Neither grows for a block the policy refused.
    A block nested too deeply for the walks over its tree (CPython's own included) is refused too.
    """
    try:
        return _compiled(source, filename, reserved, declared_global, class_attributes)
    except RecursionError:  # ours or CPython's own: the walks over the tree recurse
        raise CodeRefused(_TOO_DEEP, "SyntaxError") from None


def _compiled(
    source: str,
    filename: str,
    reserved: frozenset[str],
    declared_global: set[str] | None,
    class_attributes: set[str] | None,
) -> CodeType:
    try:
        tree = ast.parse(source, filename=filename, mode="exec")
    except SyntaxError as error:
        raise CodeRefused(syntax_report(source, error), "SyntaxError") from None
    except UnicodeEncodeError as error:  # a lone surrogate: no Python source can hold one
        raise CodeRefused(syntax_report(source, unencodable(source, filename, error)), "SyntaxError") from None
    declared = declared_global if declared_global is not None else set()
    block_globals = later_global_bindings(tree, source)
    with_block_globals = declared | block_globals
    walk = Instrumenter(source, with_block_globals, reserved, plain_names(tree, with_block_globals, source))
    try:
        tree = walk.visit(tree)
    except RecursionError:
        raise
    except Exception:
        # The instrumenting works on what the policy accepted; on a tree it refused, what it trips
        # over is the refused code's, and the refusal is the answer.
        if not walk.problems:
            raise
    if walk.problems:
        raise CodeRefused(policy_report(source, walk.problems), "CodeRefused", walk.problems)
    declared |= block_globals
    fast_receivers(walk.classes, source, GUARDED_ATTRIBUTES, AUGMENTED["attribute"])
    capture_last_expression(tree)
    wrapped = as_function(tree, source)
    attributes = class_attributes if class_attributes is not None else set()
    attributes |= own_attribute_names(source, GUARDED_ATTRIBUTES)
    fast_own_reads(tree, source, attributes)
    try:
        code = compile(tree, filename, "exec", dont_inherit=True)  # the block's own future imports, not ours
    except SyntaxError as error:  # what only the compiler sees: 'return' or 'break' outside their place
        raise CodeRefused(syntax_report(source, error), "SyntaxError") from None
    return function_code(code) if wrapped else code
