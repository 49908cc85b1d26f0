"""A block's module-level code compiled as the body of a function whose every name is global.

At module level CPython looks each name up with ``LOAD_NAME``: the block's globals, then the
builtins, at every use. In a function, a name declared ``global`` is read with ``LOAD_GLOBAL``,
which CPython specializes to one cached lookup: the same names in the same dict, read faster,
which matters in the loops agents write at module level. Every name the block binds at module
level is declared global, so the function has no locals and each binding lands in the sandbox's
globals as it would at module level; classes and functions keep their qualified names (a name
declared global gives its class or function a plain one), and the code objects of lambdas,
comprehensions and generator expressions get theirs back from `function_code`.

A block whose meaning would change stays module code: one with ``return``, ``yield`` or
``await`` outside a function (CPython's own error then names it), a ``global`` or
``nonlocal`` statement at module level, an annotated name at module level (it fills the
module's ``__annotations__``), a star import, a module docstring (it sets ``__doc__``), or a
call of ``dir()``, ``locals()`` or ``vars()`` with no arguments (they list the module's names).
"""

from __future__ import annotations

import ast
from types import CodeType

from codeward.executors.local.name_bindings import bound_here, child_nodes, walk
from codeward.executors.local.syntax_nodes import located

__all__ = ["as_function", "function_code"]

_FUNCTION = "_block_"
_PREFIX = f"{_FUNCTION}.<locals>."
_MODULE_ONLY = (ast.Return, ast.Yield, ast.YieldFrom, ast.Await, ast.Global, ast.Nonlocal)
_SCOPE_LISTINGS = ("dir()", "locals()", "vars()")
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
#: What only an expression can hold among the things looked for: without these words in the
#: source, the statements alone are walked, which is most of the saving on a large block.
_IN_EXPRESSIONS = (":=", "yield", "await")
#: The fields of statements that hold statements, and those that hold binding targets.
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")
_TARGETS = ("targets", "target", "items", "names", "pattern")
_MODULE_ONLY_KINDS = frozenset(_MODULE_ONLY)


class _StatementFields(dict[type[ast.AST], tuple[tuple[str, ...], tuple[str, ...]]]):
    """``_STATEMENT_FIELDS[kind]``: which of `_TARGETS` and of `_BODIES` a node of class `kind` has,
    found once per class: a statement is then not asked for ten fields it may not have."""

    def __missing__(self, kind: type[ast.AST]) -> tuple[tuple[str, ...], tuple[str, ...]]:
        fields = kind._fields
        found = self[kind] = (
            tuple(field for field in _TARGETS if field in fields),
            tuple(field for field in _BODIES if field in fields),
        )
        return found


_STATEMENT_FIELDS = _StatementFields()


def as_function(tree: ast.Module, source: str) -> bool:
    """Make `tree`'s body the body of a function with every module-level binding global, in
    place; False, leaving `tree` as it was, for a block whose meaning that would change."""
    body = tree.body
    if not body or _is_docstring(body[0]) or any(listing in source for listing in _SCOPE_LISTINGS):
        return False
    walk_expressions = any(word in source for word in _IN_EXPRESSIONS)
    names = _module_bindings(body) if walk_expressions else _statement_bindings(body)
    if names is None:
        return False
    statements: list[ast.stmt] = [ast.Global(names=sorted(names))] if names else []
    function = ast.FunctionDef(
        name=_FUNCTION,
        args=ast.arguments(
            posonlyargs=[], args=[], vararg=None, kwonlyargs=[], kw_defaults=[], kwarg=None, defaults=[]
        ),
        body=statements + body,
        decorator_list=[],
        returns=None,
        type_comment=None,
    )
    tree.body = [located(function, body[0])]
    return True


def function_code(module: CodeType) -> CodeType:
    """The code of the function `as_function` made, from its compiled module, named as module code."""
    for constant in module.co_consts:
        if isinstance(constant, CodeType) and constant.co_name == _FUNCTION:
            return _requalified(constant).replace(co_name="<module>", co_qualname="<module>")
    raise ValueError("the module holds no block function")


def _requalified(code: CodeType) -> CodeType:
    """`code` with the function's name taken out of its nested code objects' qualified names."""
    constants = tuple(_requalified(item) if isinstance(item, CodeType) else item for item in code.co_consts)
    qualname = code.co_qualname.removeprefix(_PREFIX)
    return code.replace(co_consts=constants, co_qualname=qualname)


def _is_docstring(statement: ast.stmt) -> bool:
    return (
        isinstance(statement, ast.Expr)
        and isinstance(statement.value, ast.Constant)
        and isinstance(statement.value.value, str)
    )


def _statement_bindings(body: list[ast.stmt]) -> set[str] | None:
    """`_module_bindings` for a block with no walrus, yield or await: only statements bind."""
    names: set[str] = set()
    pending: list[ast.AST] = list(body)
    while pending:
        node = pending.pop()
        kind = type(node)
        targets, bodies = _STATEMENT_FIELDS[kind]
        if kind in _MODULE_ONLY_KINDS or (kind is ast.ImportFrom and node.names[0].name == "*"):  # type: ignore[attr-defined]
            return None
        if kind is ast.AnnAssign and type(node.target) is ast.Name:  # type: ignore[attr-defined]
            return None
        if kind is ast.FunctionDef or kind is ast.ClassDef:
            names.add(node.name)  # type: ignore[attr-defined]
            continue
        if kind is ast.ExceptHandler and node.name:  # type: ignore[attr-defined]
            names.add(node.name)  # type: ignore[attr-defined]
        for field in targets:
            value = getattr(node, field, None)
            for target in value if type(value) is list else [value]:
                if isinstance(target, ast.AST):
                    names.update(name for item in walk(target) for name in bound_here(item))
        for field in bodies:
            pending.extend(getattr(node, field, ()))
    return names


def _module_bindings(body: list[ast.stmt]) -> set[str] | None:
    """The names module-level code binds, or None if it holds what only module code may hold."""
    names: set[str] = set()
    pending: list[tuple[ast.AST, bool]] = [(statement, False) for statement in body]  # (node, in a comprehension)
    while pending:
        node, in_comprehension = pending.pop()
        if isinstance(node, _MODULE_ONLY) or (isinstance(node, ast.ImportFrom) and node.names[0].name == "*"):
            return None
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and not in_comprehension:
            return None
        if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.Lambda)):
            if not isinstance(node, ast.Lambda):
                names.add(node.name)
            pending.extend((item, in_comprehension) for item in _evaluated_outside(node))
            continue  # the body is a scope of its own
        if isinstance(node, ast.NamedExpr) and isinstance(node.target, ast.Name):
            names.add(node.target.id)  # a walrus binds here, from a comprehension too
        elif not in_comprehension:
            names.update(bound_here(node))
        inner = in_comprehension or isinstance(node, _COMPREHENSIONS)
        pending.extend((child, inner) for child in child_nodes(node))
    return names


def _evaluated_outside(node: ast.FunctionDef | ast.ClassDef | ast.Lambda) -> list[ast.AST]:
    """What a def, class or lambda evaluates in the scope around it: decorators, defaults and
    annotations, bases and keywords."""
    if isinstance(node, ast.ClassDef):
        return [*node.decorator_list, *node.bases, *node.keywords]
    outside: list[ast.AST] = [node.args]
    if isinstance(node, ast.FunctionDef):
        outside += node.decorator_list
        if node.returns is not None:
            outside.append(node.returns)
    return outside
