"""Where the model's code binds names: the ground shared by `int_inference` and
`type_inference`, which must both know every way a name can be rebound.

The walkers here replace `ast.walk` and `ast.iter_child_nodes` because every
block is analysed before it runs: their generators cost more than the analysis.
"""

from __future__ import annotations

import ast

__all__ = [
    "BINDERS",
    "CHILD_FIELDS",
    "COMPREHENSIONS",
    "SCOPES",
    "bound_here",
    "child_nodes",
    "declared_globals",
    "enclosing_bindings",
    "later_global_bindings",
    "may_bind_inside",
    "parameters",
    "walk",
]

SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)
COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
_AST = ast.AST
#: The node types that may bind a name besides `ast.Name` (see `bound_here`).
BINDERS = frozenset(
    {ast.Global, ast.Nonlocal, ast.ExceptHandler, ast.alias, ast.MatchAs, ast.MatchStar, ast.MatchMapping}
)


#: Fields that never hold a node with fields of its own: names, numbers and flags, and the
#: operators and contexts (field-less nodes).
_NO_CHILD = frozenset(
    {"ctx", "op", "ops", "id", "attr", "arg", "type_comment", "kind", "conversion", "simple", "is_async", "level"}
    | {"module"}
)


class _ChildFields(dict[type[ast.AST], tuple[str, ...]]):
    """``CHILD_FIELDS[kind]``: the fields of a node of class `kind` that may hold a node with
    fields; the others are not read by the walks here, nor by the passes that change the tree
    (a getattr each). Filled as classes are met, so that a lookup is one dict access."""

    def __missing__(self, kind: type[ast.AST]) -> tuple[str, ...]:
        fields = self[kind] = tuple(field for field in kind._fields if field not in _NO_CHILD)
        return fields


CHILD_FIELDS = _ChildFields()


def child_nodes(node: ast.AST) -> list[ast.AST]:
    """`ast.iter_child_nodes` as a list, less the field-less context and operator
    nodes (``Load``, ``Add``): a third of a tree, and they bind nothing."""
    children: list[ast.AST] = []
    for field in CHILD_FIELDS[type(node)]:
        value = getattr(node, field, None)
        if type(value) is list:
            for item in value:
                if isinstance(item, _AST) and item._fields:
                    children.append(item)
        elif isinstance(value, _AST) and value._fields:
            children.append(value)
    return children


def walk(node: ast.AST) -> list[ast.AST]:
    """`node` and its descendants (`ast.walk` as a list, less what `child_nodes` leaves out)."""
    found = [node]
    index = 0
    while index < len(found):
        found.extend(child_nodes(found[index]))
        index += 1
    return found


def declared_globals(tree: ast.AST) -> set[str]:
    """Names some function or class body in `tree` declares ``global``."""
    return {name for node in walk(tree) if isinstance(node, ast.Global) for name in node.names}


def later_global_bindings(tree: ast.AST, source: str) -> set[str]:
    """Names code in `tree` may bind at module level when it runs, in this block or a later one.

    A function or class body binds them through ``global``; a generator kept from this block binds
    them through a walrus in it (in a comprehension or generator expression at module level the
    walrus binds the module's name), whenever it is resumed, even between a later block's own plain
    binding of the name and its use. Every walrus target counts, wherever it stands: counting one
    that binds a local only loses a guard-free read of a module-level name of that spelling.
    """
    names = declared_globals(tree) if "global" in source else set()  # no keyword, no declaration
    if ":=" in source:
        names |= {
            node.target.id
            for node in walk(tree)
            if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name)
        }
    return names


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> set[str]:
    """The names of `function`'s parameters: bound by the caller, so never certain of anything."""
    return {arg.arg for arg in walk(function.args) if isinstance(arg, ast.arg)}


def enclosing_bindings(node: ast.AST, inner_binders: bool = True) -> set[str]:
    """Names a nested scope or comprehension may bind in the scope around it.

    A def or class binds its own name; an inner function may declare a name
    ``nonlocal``; a walrus binds around it when it sits in a comprehension, a
    default value, a decorator or a base class (and in the scope's own body,
    counted here too: over-counting only loses a guard-free fast path).
    `inner_binders` False says the code holds neither ``nonlocal`` nor a walrus (see
    `may_bind_inside`), so `node` is not walked.
    """
    names = {node.name} if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else set()
    if not inner_binders:
        return names
    for inner in walk(node):
        if isinstance(inner, ast.Nonlocal):
            names.update(inner.names)
        elif isinstance(inner, ast.NamedExpr) and isinstance(inner.target, ast.Name):
            names.add(inner.target.id)
    return names


def may_bind_inside(source: str) -> bool:
    """Whether the code `source` may hold a ``nonlocal`` statement or a walrus: without the
    keyword or the ``:=`` token in its text it holds neither (both are spelled in ASCII and
    written whole), and `enclosing_bindings` need not walk its scopes."""
    return ":=" in source or "nonlocal" in source


def bound_here(node: ast.AST) -> list[str]:
    """Names this one node binds (not counting its children)."""
    kind = type(node)
    if kind is ast.Name:
        return [] if type(node.ctx) is ast.Load else [node.id]  # type: ignore[attr-defined]
    if kind not in BINDERS:  # most nodes: one set lookup
        return []
    if kind in (ast.Global, ast.Nonlocal):
        return list(node.names)  # type: ignore[attr-defined]
    if kind is ast.alias:
        return [(node.asname or node.name).split(".")[0]]  # type: ignore[attr-defined]
    name = node.rest if kind is ast.MatchMapping else node.name  # type: ignore[attr-defined]
    return [name] if name else []
