"""Which receivers certainly hold a plain builtin value, so that reading a method of it
(``words.append``, ``",".join``, ``text.split``) can skip the attribute guard.

*Plain* means an instance of exactly str, bytes, list, dict, set, frozenset or
tuple. Every public attribute of those types is a method of the builtin type,
never a module or an object of the machine, so the guard could only pass it
through (`policy` keeps the few names the guard treats specially).

An expression is plain when it is a str or bytes constant, an f-string, a
display (``[...]``, ``{...}``, ``(...)``) or a list, set or dict comprehension.

A name is plain at one use when all of the following hold, which together leave
no route for another value to reach it:

- every binding of it in its scope is ``name = <plain expression>`` (or the
  annotated or augmented form with a plain value: operators between plain
  values give plain values); any other binding (a for, with, except, import or
  match target, a walrus, ``del``, a def or class, a parameter) disqualifies it;
- no nested scope may rebind it (``nonlocal``, or a walrus in a default value,
  decorator or comprehension), and it is not declared ``global`` or
  ``nonlocal`` in the scope itself;
- at module level, no function or class of any block declares it ``global``
  (a function the block calls could rebind it);
- the use follows an unconditional binding: a ``name = <plain expression>``
  statement (or its annotated form) directly in the same body, preceding the
  top-level statement that holds the use. Before it, a module-level name may
  hold a value from an earlier block or from `send_variables`;
- the use runs where it is written: not in a nested function, lambda, class
  body or generator expression, which may run after a later block rebound the
  name. In a list, set or dict comprehension the comprehension's own variables
  shadow it.
"""

from __future__ import annotations

import ast
import functools
import re
from collections.abc import Callable

from codeward.executors.local.name_bindings import (
    SCOPES,
    bound_here,
    child_nodes,
    enclosing_bindings,
    may_bind_inside,
    parameters,
    walk,
)

__all__ = ["PLAIN_TYPES", "is_plain_expression", "plain_names"]

#: The types whose values are plain.
PLAIN_TYPES = (str, bytes, list, dict, set, frozenset, tuple)

_PLAIN_DISPLAYS = (ast.JoinedStr, ast.List, ast.Tuple, ast.Set, ast.Dict, ast.ListComp, ast.SetComp, ast.DictComp)
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_EAGER_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp)
#: A word and the dot after it: what may be a read of an attribute. Possessive, from a word's
#: start: the words are those ``(\w+)\s*\.`` finds, without retrying each from every letter.
_DOTTED = re.compile(r"\b(\w++)\s*+\.")
_DEFERRED = (*SCOPES, ast.GeneratorExp)  # code that may run after a later block rebound the name
#: The fields that hold statements (an except handler's and a match case's bodies included).
_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")


def is_plain_expression(node: ast.AST) -> bool:
    """A str or bytes constant, an f-string, a display or an eager comprehension."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (str, bytes)
    return isinstance(node, _PLAIN_DISPLAYS)


def plain_names(module: ast.Module, declared_global: set[str], source: str) -> frozenset[ast.Name]:
    """The `ast.Name` loads in `module` that certainly hold a plain value (nodes hash by identity).

    `declared_global` holds the names any function or class of any block of the
    sandbox declares ``global``, this block's included. `source` is the module's
    text: only a name followed by a dot in it can gain anything, and a body with
    none is not scanned.
    """
    found: set[ast.Name] = set()
    dotted = frozenset(_DOTTED.findall(source))
    inner_binders = may_bind_inside(source)
    _scan_body(module.body, lambda: set(declared_global), found, dotted, inner_binders)
    for node in _functions(module.body):
        _scan_body(node.body, functools.partial(parameters, node), found, dotted, inner_binders)
    return frozenset(found)


def _functions(body: list[ast.stmt]) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    """The defs among `body` and the statements nested in it, at any depth. A def is a
    statement, so only the fields that hold statements are followed, not expressions."""
    found: list[ast.FunctionDef | ast.AsyncFunctionDef] = []
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        if isinstance(node, _FUNCTIONS):
            found.append(node)
        for field in _STATEMENT_LISTS:
            pending.extend(getattr(node, field, ()))
    return found


def _scan_body(
    body: list[ast.stmt],
    disqualifying: Callable[[], set[str]],
    found: set[ast.Name],
    dotted: frozenset[str],
    inner_binders: bool,
) -> None:
    """Add to `found` the plain uses of names bound in `body`, one scope's statements.
    `disqualifying` gives the names the scope's start leaves uncertain (its parameters),
    asked only for a body that has a plain binding of a name read with a dot."""
    first_binding: dict[str, int] = {}
    for index, statement in enumerate(body):
        if isinstance(statement, (ast.Assign, ast.AnnAssign)) and _plain_binding_value(statement) is not None:
            targets = statement.targets if isinstance(statement, ast.Assign) else [statement.target]
            for target in targets:
                first_binding.setdefault(target.id, index)  # type: ignore[attr-defined]
    # Only a name read with a dot can skip a guard. A dot the text search misses
    # (a comment between the name and its dot) only keeps the guard.
    if dotted.isdisjoint(first_binding):
        return
    uses: list[tuple[int, ast.Name]] = []
    disqualified = disqualifying()
    for index, statement in enumerate(body):  # all of them: an earlier def may rebind the name later
        _scan_statement(statement, index, disqualified, uses, inner_binders)
    for index, name in uses:
        if name.id not in disqualified and first_binding.get(name.id, index) < index:
            found.add(name)


def _scan_statement(
    statement: ast.stmt, index: int, disqualified: set[str], uses: list[tuple[int, ast.Name]], inner_binders: bool
) -> None:
    """Collect the names `statement` binds other than plainly, and its candidate uses."""
    pending: list[tuple[ast.AST, frozenset[str] | None]] = [(statement, None)]  # None: not in a comprehension
    while pending:
        node, shadowed = pending.pop()
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                if shadowed is None or node.id not in shadowed:
                    uses.append((index, node))
            elif shadowed is None:
                disqualified.add(node.id)
            continue
        if isinstance(node, _DEFERRED):
            disqualified.update(enclosing_bindings(node, inner_binders))
            continue
        if isinstance(node, _EAGER_COMPREHENSIONS) and shadowed is None:
            disqualified.update(enclosing_bindings(node, inner_binders))
            own = frozenset(n.id for n in walk(node) if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Load))
            pending.extend((child, own) for child in child_nodes(node))
            continue
        children = _plain_binding_value(node)
        if children is None:
            if shadowed is None:
                disqualified.update(bound_here(node))
            children = child_nodes(node)
        pending.extend((child, shadowed) for child in children)


def _plain_binding_value(node: ast.AST) -> list[ast.AST] | None:
    """For a binding of names to a plain value, the parts to scan (its targets bind plainly)."""
    if isinstance(node, ast.Assign) and _plain_assignment(node):
        return [node.value]
    if not isinstance(node, (ast.AugAssign, ast.AnnAssign)) or not isinstance(node.target, ast.Name):
        return None
    if node.value is None or not is_plain_expression(node.value):
        return None
    annotation = [node.annotation] if isinstance(node, ast.AnnAssign) else []
    return [node.value, *annotation]


def _plain_assignment(node: ast.Assign) -> bool:
    return is_plain_expression(node.value) and all(isinstance(target, ast.Name) for target in node.targets)
