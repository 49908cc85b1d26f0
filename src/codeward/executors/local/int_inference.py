"""Which names are certainly ints, so that ``i % 3`` and ``i * i`` can skip their size guard.

A name qualifies only where nothing but the code at hand can rebind it: a local
of a function, or a comprehension variable, that is bound *only* as the target
of ``for ... in range(...)``. (``range`` cannot be rebound in the sandbox.)
At module level a name qualifies only inside the body of its ``for ... in range``
loop, and only if no function or class of any block declares it ``global``
(anything the loop calls could otherwise rebind it).
"""

from __future__ import annotations

import ast

from codeward.executors.local.name_bindings import (
    COMPREHENSIONS,
    SCOPES,
    bound_here,
    child_nodes,
    enclosing_bindings,
    parameters,
)

__all__ = ["comprehension_ints", "function_ints", "is_range_call", "module_loop_ints"]

_NESTED = (*SCOPES, *COMPREHENSIONS)
#: The contexts of an expression that is read (None: one that has no context, a call or an operator).
_READS = (type(None), ast.Load)


def is_range_call(node: ast.expr) -> bool:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and not node.keywords
        and not any(isinstance(arg, ast.Starred) for arg in node.args)
    )


def function_ints(function: ast.FunctionDef | ast.AsyncFunctionDef, inner_binders: bool = True) -> frozenset[str]:
    """Locals of `function` bound only by ``for name in range(...)``. `inner_binders`: as for
    `enclosing_bindings`."""
    return _range_only(function.body, parameters(function), inner_binders)


def module_loop_ints(module: ast.Module, declared_global: set[str], inner_binders: bool = True) -> frozenset[str]:
    """Module-level names bound in this block only by ``for name in range(...)``, and never
    declared ``global`` by any function or class of any block (`declared_global`), so that
    nothing but this block's own loop can rebind them while it runs. They are certain ints
    only inside the body of such a loop: before it, or after an empty one, the name may
    hold a value from an earlier block."""
    return _range_only(module.body, set(), inner_binders) - declared_global


def _range_only(body: list[ast.stmt], other: set[str], inner_binders: bool) -> frozenset[str]:
    range_targets: set[str] = set()
    other = set(other)
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if not inner_binders and isinstance(node, ast.expr) and type(getattr(node, "ctx", None)) in _READS:
            continue  # with no walrus, what is read binds nothing, nor do the lambdas and comprehensions in it
        if isinstance(node, _NESTED):
            other.update(enclosing_bindings(node, inner_binders))
            continue
        if isinstance(node, ast.For) and isinstance(node.target, ast.Name) and is_range_call(node.iter):
            range_targets.add(node.target.id)
            pending.extend([node.iter, *node.body, *node.orelse])
            continue
        other.update(bound_here(node))
        pending.extend(child_nodes(node))
    return frozenset(range_targets - other)


def comprehension_ints(node: ast.AST) -> frozenset[str]:
    """Variables of a comprehension bound once, by a ``for name in range(...)`` clause."""
    generators: list[ast.comprehension] = getattr(node, "generators", [])
    counts: dict[str, int] = {}
    candidates: set[str] = set()
    for generator in generators:
        for target in ast.walk(generator.target):
            if isinstance(target, ast.Name):
                counts[target.id] = counts.get(target.id, 0) + 1
        if isinstance(generator.target, ast.Name) and is_range_call(generator.iter):
            candidates.add(generator.target.id)
    return frozenset(name for name in candidates if counts[name] == 1)
