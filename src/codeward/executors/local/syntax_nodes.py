"""Nodes of a block's syntax tree: walking it once as a transformer would, without a Python
call for each of the many nodes that hold nothing to check or change, and making the new nodes
the walk puts in, at the place of the code they stand for (so that no pass over the whole tree
is needed to place them, and errors point at the model's own line).
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from typing import Any, TypeVar

from codeward.executors.local.name_bindings import CHILD_FIELDS, child_nodes

__all__ = [
    "LEAVES",
    "call_at",
    "call_node",
    "dispatched_visit",
    "located",
    "name_node",
    "place",
    "position",
    "transform_children",
    "visitors_of",
]

_Node = TypeVar("_Node", bound=ast.AST)

# Field-less nodes (contexts, operators, pass): a third of a tree, and nothing to check or change.
LEAVES = frozenset(
    kind for kind in vars(ast).values() if isinstance(kind, type) and issubclass(kind, ast.AST) and not kind._fields
)
# Names and constants: a third of what is left, with no node inside them to place.
_NAMES_AND_CONSTANTS = frozenset({ast.Name, ast.Constant})


class _Visitors(dict[type, Callable[[Any, Any], Any]]):
    """The visitor of each node class (``visit_<class>`` or ``generic_visit``) for one
    transformer class, looked up once per class: a visit is then one dict access."""

    def __init__(self, transformer: type[ast.NodeVisitor]) -> None:
        super().__init__()
        self.transformer = transformer

    def __missing__(self, kind: type) -> Callable[[Any, Any], Any]:
        generic: Callable[[Any, Any], Any] = self.transformer.generic_visit
        found: Callable[[Any, Any], Any] = getattr(self.transformer, f"visit_{kind.__name__}", generic)
        self[kind] = found
        return found


class _TransformerVisitors(dict[type[ast.NodeVisitor], _Visitors]):
    """``_VISITORS[transformer class]``: its `_Visitors`, made when the class is first met."""

    def __missing__(self, transformer: type[ast.NodeVisitor]) -> _Visitors:
        table = self[transformer] = _Visitors(transformer)
        return table


_VISITORS = _TransformerVisitors()  # see dispatched_visit


def transform_children(transformer: ast.NodeTransformer, node: _Node, leaves: frozenset[type]) -> _Node:
    """`ast.NodeTransformer.generic_visit` without visiting nodes of the `leaves` types,
    which every block has many of (every visit is a Python call), nor reading the fields that
    hold no node (`CHILD_FIELDS`); each child's visitor is called directly, as
    `dispatched_visit` would call it, and a list of children is changed only where a visitor
    replaced one."""
    visitors = _VISITORS[type(transformer)]
    for field in CHILD_FIELDS[type(node)]:
        old = getattr(node, field, None)
        if type(old) is list:
            index = 0
            while index < len(old):
                item = old[index]
                if isinstance(item, ast.AST) and type(item) not in leaves:
                    visit = visitors[type(item)]
                    result = visit(transformer, item)
                    if result is None:
                        del old[index]
                        continue
                    if not isinstance(result, ast.AST):
                        old[index : index + 1] = result
                        index += len(result)
                        continue
                    old[index] = result
                index += 1
        elif isinstance(old, ast.AST) and type(old) not in leaves:
            visit = visitors[type(old)]
            replacement = visit(transformer, old)
            if replacement is None:
                delattr(node, field)
            elif replacement is not old:
                setattr(node, field, replacement)
    return node


def dispatched_visit(transformer: ast.NodeVisitor, node: ast.AST) -> Any:
    """`ast.NodeVisitor.visit` with the visitor of each node class looked up once per
    transformer class, not by building its name at every node."""
    return _VISITORS[type(transformer)][type(node)](transformer, node)


def visitors_of(transformer: type[ast.NodeVisitor]) -> dict[type, Callable[[Any, Any], Any]]:
    """The visitor class `transformer` has for each node class, as `dispatched_visit` finds it: for a
    subclass to call a base class's visitor of a node without naming it, nor a call between."""
    return _VISITORS[transformer]


def name_node(identifier: str) -> ast.Name:
    return ast.Name(id=identifier, ctx=ast.Load())


def call_node(function: str, *args: ast.expr) -> ast.Call:
    return ast.Call(func=name_node(function), args=list(args), keywords=[])


def located(new: _Node, old: ast.AST) -> _Node:
    """Give `new`, and the nodes made with it, the position of `old`.

    Nodes that came from the parsed code keep theirs, which spares a pass over
    the whole tree (`ast.fix_missing_locations`) for every block.
    """
    where = position(old)
    if where is None:
        return new
    return place(new, where)


def call_at(function: str, args: list[ast.expr], where: dict[str, Any] | None) -> ast.Call:
    """``located(call_node(function, *args), old)`` for `where` = ``position(old)``, its nodes
    made at their place: only the arguments that have no position are walked to place them."""
    if where is None:
        return ast.Call(func=name_node(function), args=args, keywords=[])
    for arg in args:
        if "lineno" not in arg.__dict__:
            place(arg, where)
    return ast.Call(func=ast.Name(id=function, ctx=ast.Load(), **where), args=args, keywords=[], **where)


def position(node: ast.AST) -> dict[str, Any] | None:
    """`node`'s position, as `located` gives it; None when it has none. Read from the node's
    own attributes: the node classes default the end of a position to None, and no more."""
    own = node.__dict__
    lineno = own.get("lineno")
    if lineno is None:
        return None
    return {
        "lineno": lineno,
        "col_offset": own.get("col_offset"),
        "end_lineno": own.get("end_lineno"),
        "end_col_offset": own.get("end_col_offset"),
    }


def place(new: _Node, where: dict[str, Any]) -> _Node:
    """`located`'s work with the position given: `new` and the nodes in it that have none."""
    pending: list[ast.AST] = [new]
    while pending:
        node = pending.pop()
        node.__dict__.update(where)  # ast.copy_location's work, without its per-attribute checks
        if type(node) not in _NAMES_AND_CONSTANTS:  # most new nodes, and nothing inside them to place
            pending.extend(child for child in child_nodes(node) if "lineno" not in child.__dict__)
    return new
