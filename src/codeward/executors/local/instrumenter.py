"""What makes the local executor's limits hold while the model's code runs, added to
its syntax tree in the same walk in which the policy (`policy`) accepts it: a tick at
every loop iteration, function entry and comprehension step, size guards on the
operators that can build huge values in one step, a re-raise of the sandbox's own
signals at the top of every ``except`` block, and capture of the last
expression's value.

`Instrumenter` is the policy's transformer with these added: each of its visitors
lets the policy's visitor of the node check it and visit the children (through this
walk), then adds to what the policy gave back. One walk over the tree does both, where
two walks did, and the policy still sees the code as the model wrote it.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from codeward.executors.local.int_inference import comprehension_ints, function_ints, is_range_call, module_loop_ints
from codeward.executors.local.name_bindings import SCOPES, child_nodes, may_bind_inside
from codeward.executors.local.policy import SandboxPolicy
from codeward.executors.local.syntax_nodes import call_at, call_node, located, name_node, place, position, visitors_of

__all__ = [
    "MAX_FORMAT_WIDTH",
    "RESULT_NAME",
    "Instrumenter",
    "capture_last_expression",
    "number_product",
    "number_sum",
    "tick_at",
]

#: Where the value of the block's last expression is left for the executor.
RESULT_NAME = "_result_"

#: Format-spec widths and precisions above this are refused (they allocate).
MAX_FORMAT_WIDTH = 100_000
_WIDTH_DIGITS = len(str(MAX_FORMAT_WIDTH))

# Operators that can build a huge value in one C-level step, and their guards.
_SIZED_OPERATORS = {ast.Add: "_add_", ast.Mult: "_mul_", ast.Pow: "_pow_", ast.LShift: "_lshift_", ast.Mod: "_mod_"}
#: How those operators are written (``**`` holds ``*``; ``+=`` holds ``+``).
_SIZED_TEXT = ("+", "*", "%", "<<")
#: The fields of statements that hold statements.
_STATEMENT_LISTS = ("body", "orelse", "finalbody", "handlers", "cases")
#: The policy's visitor of each node class: what each visitor here calls on its node first, for the
#: policy's checks and its visit of the children (through this walk). It gives back what the
#: instrumenting then sees, as if the policy had walked first: the node itself for every class
#: instrumented here but ``AugAssign``, which the policy may rewrite into another statement.
#: Called from the table, with no call between: a block nested deeply costs no more frames than
#: the two walks did.
_POLICY = visitors_of(SandboxPolicy)
_SPEC_NUMBERS = re.compile(r"(\d+)")
#: The locals `number_sum` reads its left operand and its class into, and, for ``+=``, its right's.
_AUGEND, _KIND = "_augend_", "_kind_"
_ADDEND, _ADDEND_KIND = "_addend_", "_addend_kind_"
#: The guard of ``+=``, whose inline form `number_sum` writes with `_in_place_sum`.
_IN_PLACE_GUARD = "_iadd_"


class Instrumenter(SandboxPolicy):
    """The policy's walk, adding ticks, operator size guards and signal re-raises to what it
    accepts (see the module's docstring); the policy's `problems` say whether it accepted."""

    def __init__(
        self,
        source: str,
        declared_global: set[str],
        reserved: frozenset[str] = frozenset(),
        plain: frozenset[ast.Name] = frozenset(),
    ) -> None:
        """`declared_global`: the names any function of any block of the sandbox declares ``global``,
        this block's included; `reserved` and `plain`: as for `SandboxPolicy`."""
        super().__init__(reserved, plain)
        self.lines = source.splitlines()
        self.declared_global = declared_global
        self.ints: list[frozenset[str]] = [frozenset()]  # names certainly ints, per scope
        self.suspends: list[bool] = [False]  # per scope: a generator, whose loops may pause between blocks
        self.frames: list[bool] = [False]  # per scope: a def's body, where a walrus binds a local
        self.module_candidates: frozenset[str] = frozenset()  # module-level range loop variables
        self.infer_ints = "range" in source  # certain ints come only from range loops
        self.inner_binders = may_bind_inside(source)  # a walrus or nonlocal: nested scopes are walked
        self.classes: list[ast.ClassDef] = []  # the class statements met, for `receivers`

    def _mentions(self, node: ast.AST, word: str) -> bool:
        """Whether `word` is in the source of `node`: a text search that spares walking a
        function that cannot have what is looked for (a ``range`` loop, a ``yield``).
        Keywords are spelled in ASCII; a ``range`` spelled otherwise only loses a fast path."""
        return any(word in line for line in self.lines[node.lineno - 1 : node.end_lineno])  # type: ignore[attr-defined]

    def _in_scope(self, node: ast.AST, ints: frozenset[str], suspends: bool = False, frame: bool = False) -> None:
        self.ints.append(ints)
        self.suspends.append(suspends)
        self.frames.append(frame)
        try:
            _POLICY[type(node)](self, node)  # the policy's scope visitors give the node back
        finally:
            self.ints.pop()
            self.suspends.pop()
            self.frames.pop()

    def visit_arguments(self, node: ast.arguments) -> ast.AST:
        """Defaults and annotations, evaluated around the def or lambda: not in its frame."""
        self.frames.append(False)
        try:
            accepted: ast.AST = _POLICY[type(node)](self, node)
        finally:
            self.frames.pop()
        return accepted

    def visit_Module(self, node: ast.Module) -> ast.AST:  # type: ignore[override]  # the policy's takes any node
        if self.infer_ints and self._sized_range_loop(node.body):
            self.module_candidates = module_loop_ints(node, self.declared_global, self.inner_binders)
        accepted: ast.AST = _POLICY[type(node)](self, node)
        return accepted

    def _sized_range_loop(self, body: list[ast.stmt]) -> bool:
        """Whether a module-level ``for name in range(...)`` loop has in its text an operator that
        a certain int spares a guard (``+ * % <<``). In a loop without one, which names are
        certain ints changes nothing, so without such a loop `module_loop_ints` need not walk
        the block. Only statements are followed: a loop is one, and a def or class is a scope."""
        pending: list[ast.AST] = list(body)
        while pending:
            node = pending.pop()
            if isinstance(node, SCOPES):
                continue
            range_loop = isinstance(node, ast.For) and isinstance(node.target, ast.Name) and is_range_call(node.iter)
            if range_loop and any(self._mentions(node, operator) for operator in _SIZED_TEXT):
                return True
            for field in _STATEMENT_LISTS:
                pending.extend(getattr(node, field, ()))
        return False

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.classes.append(node)
        self._in_scope(node, frozenset())
        return node

    def _visit_comprehension_scope(self, node: ast.AST) -> ast.AST:
        ints = self.ints[-1] | comprehension_ints(node) if self.infer_ints else self.ints[-1]
        self._in_scope(node, ints, suspends=isinstance(node, ast.GeneratorExp))
        return node

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _visit_comprehension_scope

    def visit_For(self, node: ast.For) -> ast.AST:  # type: ignore[override]  # as visit_Module
        name = node.target.id if isinstance(node.target, ast.Name) else None
        if len(self.ints) == 1 and name in self.module_candidates and is_range_call(node.iter):
            node.target = self.visit(node.target)  # what the policy's visitor of a loop visits, in its order
            node.iter = self.visit(node.iter)
            self.ints.append(self.ints[-1] | {name})
            try:
                node.body = self._statements(node.body)
            finally:
                self.ints.pop()
            node.orelse = self._statements(node.orelse)
        else:
            node = _POLICY[type(node)](self, node)
        if self.suspends[-1]:
            node.body.insert(0, tick_at(position(node)))
        else:
            node.iter = ticking(node.iter)
        return node

    def _statements(self, statements: list[ast.stmt]) -> list[ast.stmt]:
        """`statements` visited, as the policy's own visit of a body would: a statement it gives back
        as several (a ``match`` with what its patterns read hoisted before it) stands in their place."""
        visited: list[ast.stmt] = []
        for statement in statements:
            result = self.visit(statement)
            visited += result if isinstance(result, list) else [result]
        return visited

    def visit_While(self, node: ast.While) -> ast.AST:
        node = _POLICY[type(node)](self, node)
        node.body.insert(0, tick_at(position(node)))
        return node

    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        ints = function_ints(node, self.inner_binders) if self._mentions(node, "range") else frozenset()
        decorators, node.decorator_list = node.decorator_list, []  # evaluated around the def
        self._in_scope(node, ints, self._mentions(node, "yield") and _is_generator(node), frame=True)
        node.decorator_list += [self.visit(decorator) for decorator in decorators]  # after the policy's own
        has_docstring = (
            node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
            and isinstance(node.body[0].value.value, str)
        )
        node.body.insert(1 if has_docstring else 0, tick_at(position(node)))
        if node.name == "__exit__":
            node.body.insert(0, located(ast.Expr(call_node("_handled_")), node))
        return node

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        # Not a frame for `number_sum`: a lambda can sit in a comprehension's iterable, where no walrus may.
        self._in_scope(node, frozenset(), self._mentions(node, "yield") and _is_generator(node))
        node.body = located(ast.BoolOp(op=ast.And(), values=[call_node("_tick_"), node.body]), node.body)
        return node

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        node = _POLICY[type(node)](self, node)
        if self.suspends[-1]:
            node.ifs.insert(0, call_at("_tick_", [], position(node.iter)))
        else:
            node.iter = ticking(node.iter)
        return node

    def visit_ExceptHandler(self, node: ast.ExceptHandler) -> ast.AST:
        node = _POLICY[type(node)](self, node)
        node.body.insert(0, located(ast.Expr(call_node("_handled_")), node))
        return node

    def visit_BinOp(self, node: ast.BinOp) -> ast.AST:
        node = _POLICY[type(node)](self, node)
        guard = _SIZED_OPERATORS.get(type(node.op))
        if guard is None or _cannot_grow(node, self.ints[-1]):
            return node
        if guard == "_add_" and self.frames[-1] and _small(node.right):
            return number_sum(node.left, node.right, guard, position(node))  # placed as `located` would
        if guard == "_mul_" and self.frames[-1] and _small(node.right):
            return number_product(node.left, node.right, position(node))
        return call_at(guard, [node.left, node.right], position(node))

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST:
        """``x += y`` on a name: concatenation can double a value in one C call, so it is sized.
        In a def's body, a number's sum is settled inline as ``x + y`` is (`number_sum`): the
        loop's running total is the commonest sum there is.

        (The other growing operators on names, and every operator on items and
        attributes, the policy rewrites: what it gives back for those is not an ``AugAssign``.)
        """
        accepted: ast.AST = _POLICY[type(node)](self, node)
        if accepted is not node or not isinstance(node.op, ast.Add) or not isinstance(node.target, ast.Name):
            return accepted
        probe = ast.BinOp(left=ast.Name(id=node.target.id, ctx=ast.Load()), op=node.op, right=node.value)
        if _cannot_grow(probe, self.ints[-1]):
            return node
        if self.frames[-1] and _small(node.value) and (where := position(node)) is not None:
            total = number_sum(ast.Name(node.target.id, ast.Load(), **where), node.value, "_iadd_", where)
            return ast.Assign([node.target], total, **where)
        value = call_node("_iadd_", name_node(node.target.id), node.value)
        return located(ast.Assign(targets=[node.target], value=value), node)

    def visit_FormattedValue(self, node: ast.FormattedValue) -> ast.AST:
        node = _POLICY[type(node)](self, node)
        spec = node.format_spec
        if spec is None:
            return node
        if all(isinstance(part, ast.Constant) for part in spec.values):  # type: ignore[attr-defined]
            text = "".join(str(part.value) for part in spec.values)  # type: ignore[attr-defined]
            numbers = _SPEC_NUMBERS.findall(text)  # a width of thousands of digits is past int()'s own limit
            if all(len(number) <= _WIDTH_DIGITS and int(number) <= MAX_FORMAT_WIDTH for number in numbers):
                return node
        node.value = located(call_node("_format_", node.value, ast.Constant(node.conversion), spec), node)
        node.conversion = -1
        node.format_spec = None
        return node


# Building nodes -------------------------------------------------------------
def number_sum(left: ast.expr, right: ast.expr, guard: str, where: dict[str, Any] | None = None) -> ast.IfExp:
    """``left + right`` settled inline when `left` is an int or a float, as the guard settles
    it first (the operator's own sum, or `right`'s ``__radd__``); ``guard(left, right)``
    otherwise. A call of the guard is most of the cost of a sum in a function. `left` is read
    once, into a local (``_augend_``), so only where a walrus binds one: a def's body. It is on the stack before `right` runs, so a sum nested in `right` that rebinds
    the local changes nothing. `right` is written in both branches (one runs): callers keep
    it `_small`, so that nested sums cannot double the tree at each level.

    `where`: the position (`position`) to give the nodes made here, and `left` and `right`
    when they have none: what `located` would give them, without walking them."""
    at = where or {}
    load, store = ast.Load(), ast.Store()

    def name(identifier: str, ctx: ast.expr_context = load) -> ast.Name:
        return ast.Name(identifier, ctx, **at)

    def call(function: str, *args: ast.expr) -> ast.Call:
        return ast.Call(name(function), list(args), [], **at)

    if where is not None:
        for operand in (left, right):
            if "lineno" not in operand.__dict__:
                place(operand, where)
    # Fields by position: a node is made in two thirds of the time it takes by keyword.
    augend = ast.NamedExpr(name(_AUGEND, store), left, **at)
    left_is_number = _int_or_float(ast.NamedExpr(name(_KIND, store), call("_type_", augend), **at), _KIND, at)
    if guard == _IN_PLACE_GUARD:
        return _in_place_sum(left_is_number, right, at)
    plain = ast.BinOp(name(_AUGEND), ast.Add(), right, **at)
    return ast.IfExp(left_is_number, plain, call(guard, name(_AUGEND), right), **at)


def _int_or_float(kind: ast.expr, local: str, at: dict[str, Any]) -> ast.BoolOp:
    """``kind is _int_ or local is _float_``: `kind` an expression that binds the class to the
    name `local` (or reads it), so the second test reads what the first bound."""
    is_int = ast.Compare(kind, [ast.Is()], [ast.Name("_int_", ast.Load(), **at)], **at)
    is_float = ast.Compare(ast.Name(local, ast.Load(), **at), [ast.Is()], [ast.Name("_float_", ast.Load(), **at)], **at)
    return ast.BoolOp(ast.Or(), [is_int, is_float], **at)


def _in_place_sum(left_is_number: ast.BoolOp, right: ast.expr, at: dict[str, Any]) -> ast.IfExp:
    """``left += right`` as `number_sum` settles it: inline only when `right` is an int or a float
    too, so that a sum the operands refuse is refused by the guard, whose error names ``+=`` as
    CPython's does (a plain ``+`` would name ``+``). `right` runs once, after `left`, into
    ``_addend_`` when `left` is a number (the guard then takes it from there), or in the guard's
    call when it is not::

        _augend_ + _addend_ if (left_is_number and ((_addend_kind_ := _type_(_addend_ := right))
            is _int_ or _addend_kind_ is _float_)) else _iadd_(_augend_, _addend_ if left_is_number' else right)

    where ``left_is_number'`` reads ``_kind_`` again, as `left_is_number` bound it."""
    load, store = ast.Load(), ast.Store()

    def name(identifier: str, ctx: ast.expr_context = load) -> ast.Name:
        return ast.Name(identifier, ctx, **at)

    addend = ast.NamedExpr(name(_ADDEND, store), right, **at)
    addend_kind = ast.NamedExpr(name(_ADDEND_KIND, store), ast.Call(name("_type_"), [addend], [], **at), **at)
    both = ast.BoolOp(ast.And(), [left_is_number, _int_or_float(addend_kind, _ADDEND_KIND, at)], **at)
    plain = ast.BinOp(name(_AUGEND), ast.Add(), name(_ADDEND), **at)
    right_once = ast.IfExp(_int_or_float(name(_KIND), _KIND, at), name(_ADDEND), right, **at)
    return ast.IfExp(both, plain, ast.Call(name(_IN_PLACE_GUARD), [name(_AUGEND), right_once], [], **at), **at)


def number_product(left: ast.expr, right: ast.expr, where: dict[str, Any] | None = None) -> ast.IfExp:
    """``left * right`` settled inline where the guard (``_mul_``) settles it first: a float on
    either side, or two ints whose product fits the int cap without counting bits (each within
    ``_factor_low_`` and ``_factor_high_``, which hold the guard's own bound); ``_mul_(left,
    right)`` otherwise, so a repetition (``'ab' * n``) and a large product are sized as before::

        _factor_ * _multiplier_ if ((_factor_kind_ := _type_(_factor_ := left)) is _float_)
            | ((_multiplier_kind_ := _type_(_multiplier_ := right)) is _float_)
            | (_factor_kind_ is _int_ and _multiplier_kind_ is _int_ and _factor_low_ < _factor_
               < _factor_high_ and _factor_low_ < _multiplier_ < _factor_high_)
        else _mul_(_factor_, _multiplier_)

    Each operand runs once, in CPython's order (``|`` does not short-circuit), and only ``type``
    and comparisons between ints run before the product: no code of the operands'. The operands
    are read into locals, so only where a walrus binds one (a def's body); `right` is kept
    `_small` by the caller, so that no product inside it rebinds them before they are read.
    `where`: as in `number_sum`."""
    at = where or {}
    load, store = ast.Load(), ast.Store()

    def name(identifier: str, ctx: ast.expr_context = load) -> ast.Name:
        return ast.Name(identifier, ctx, **at)

    def kind_of(kind: str, local: str, operand: ast.expr) -> ast.NamedExpr:
        bound = ast.NamedExpr(name(local, store), operand, **at)
        return ast.NamedExpr(name(kind, store), ast.Call(name("_type_"), [bound], [], **at), **at)

    def within(local: str) -> ast.Compare:
        return ast.Compare(name("_factor_low_"), [ast.Lt(), ast.Lt()], [name(local), name("_factor_high_")], **at)

    if where is not None:
        for operand in (left, right):
            if "lineno" not in operand.__dict__:
                place(operand, where)
    is_float = ast.Compare(kind_of("_factor_kind_", "_factor_", left), [ast.Is()], [name("_float_")], **at)
    other_float = ast.Compare(kind_of("_multiplier_kind_", "_multiplier_", right), [ast.Is()], [name("_float_")], **at)
    both_ints = ast.BoolOp(
        ast.And(),
        [
            ast.Compare(name("_factor_kind_"), [ast.Is()], [name("_int_")], **at),
            ast.Compare(name("_multiplier_kind_"), [ast.Is()], [name("_int_")], **at),
            within("_factor_"),
            within("_multiplier_"),
        ],
        **at,
    )
    either = ast.BinOp(ast.BinOp(is_float, ast.BitOr(), other_float, **at), ast.BitOr(), both_ints, **at)
    plain = ast.BinOp(name("_factor_"), ast.Mult(), name("_multiplier_"), **at)
    guarded = ast.Call(name("_mul_"), [name("_factor_"), name("_multiplier_")], [], **at)
    return ast.IfExp(either, plain, guarded, **at)


def _small(node: ast.expr) -> bool:
    """Names, constants, and attribute reads, calls and operators on those (``fib(n - 2)``):
    what `number_sum` may write twice. Never a sum it made, so that the copies do not nest."""
    kind = type(node)
    if kind is ast.Name or kind is ast.Constant:
        return True
    if kind is ast.Attribute:
        return _small(node.value)  # type: ignore[attr-defined]
    if kind is ast.UnaryOp:
        return _small(node.operand)  # type: ignore[attr-defined]
    if kind is ast.BinOp:
        return _small(node.left) and _small(node.right)  # type: ignore[attr-defined]
    if kind is ast.Call:
        call: ast.Call = node  # type: ignore[assignment]
        return type(call.func) is ast.Name and not call.keywords and all(_small(item) for item in call.args)
    return False


def tick_statement() -> ast.Expr:
    return ast.Expr(call_node("_tick_"))


def ticking(iterable: ast.expr) -> ast.Call:
    """``_each_(iterable, _tick_.__self__)``: `itertools.compress` pulls one item of the
    operation budget (whose iterator `_tick_` advances) with each item, in C, so a
    loop ticks at every iteration for a fifth of what a ``_tick_()`` call costs.

    The loop keeps the budget it started with, so a loop that can pause (in a
    generator) calls ``_tick_()`` instead: resumed later, it must count against the
    budget of that time, or stop at once when the host resumes it between blocks."""
    where = position(iterable)
    if where is None:
        budget = ast.Attribute(value=name_node("_tick_"), attr="__self__", ctx=ast.Load())
    else:
        load = ast.Load()
        budget = ast.Attribute(value=ast.Name(id="_tick_", ctx=load, **where), attr="__self__", ctx=load, **where)
    return call_at("_each_", [iterable, budget], where)


def tick_at(where: dict[str, Any] | None) -> ast.Expr:
    """``located(tick_statement(), old)`` for `where` = ``position(old)``, made at its place."""
    if where is None:
        return tick_statement()
    return ast.Expr(value=call_at("_tick_", [], where), **where)


def _is_generator(function: ast.FunctionDef | ast.Lambda) -> bool:
    """Whether `function` yields (its own body, not the scopes nested in it)."""
    pending: list[ast.AST] = list(function.body) if isinstance(function.body, list) else [function.body]
    while pending:
        node = pending.pop()
        if isinstance(node, (ast.Yield, ast.YieldFrom)):
            return True
        if not isinstance(node, SCOPES):
            pending.extend(child_nodes(node))
    return False


def _cannot_grow(node: ast.BinOp, ints: frozenset[str]) -> bool:
    """True when the operation is on numbers only, so its result cannot be huge in one step:
    ``+`` with a number on one side, a float constant times anything, or ``*`` and ``%``
    between certain ints and int constants."""
    sides = (node.left, node.right)
    if isinstance(node.op, ast.Add):  # a number on either side: a sum of numbers, or a TypeError
        return any(_is_number(side, ints) for side in sides)
    if isinstance(node.op, ast.Mult) and any(_is_constant(side, float) for side in sides):
        return True
    if isinstance(node.op, ast.Mod):
        return _is_int(node.left, ints)
    if isinstance(node.op, ast.Mult):
        return all(_is_int(side, ints) for side in sides)
    return False


def _is_constant(node: ast.expr, kind: type) -> bool:
    return isinstance(node, ast.Constant) and type(node.value) is kind


_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Pow)


def _is_number(node: ast.expr, ints: frozenset[str]) -> bool:
    """Certainly a number: a numeric constant, a certain int, or arithmetic on those."""
    if isinstance(node, ast.Constant):
        return type(node.value) in (int, float, complex)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        return _is_number(node.operand, ints)
    if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
        return _is_number(node.left, ints) and _is_number(node.right, ints)
    return _is_int(node, ints)


def _is_int(node: ast.expr, ints: frozenset[str]) -> bool:
    return (isinstance(node, ast.Name) and node.id in ints) or (
        _is_constant(node, int) and abs(node.value) < 1 << 64  # type: ignore[attr-defined]
    )


def capture_last_expression(tree: ast.Module) -> None:
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = tree.body[-1]
        store = ast.Name(id=RESULT_NAME, ctx=ast.Store())
        tree.body[-1] = located(ast.Assign(targets=[store], value=last.value), last)
