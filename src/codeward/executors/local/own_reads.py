"""Reads and calls of the names the code's classes define, outside their methods: the checked
form, which skips the attribute guard for an instance of a plain class (`receivers`).

Outside methods (`fast_own_reads`), a read of a name that some class of the code defines
checks its receiver's class at that read, the receiver bound to a local first; in a
comprehension, a read on its own iteration variable checks it without binding. Reads of other
names keep the guard alone, since the check costs every other receiver (a str, a module) a
fifth of the read. A call statement on such a receiver (``account.deposit(step)``, ``x =
a.m(b)``, ``return a.m(b)``) hands the receiver on to the method it calls (see `receivers`).
"""

from __future__ import annotations

import ast
import re

from codeward.executors.local.name_bindings import CHILD_FIELDS, COMPREHENSIONS, walk
from codeward.executors.local.receivers import (
    CALL_STATEMENTS,
    CLASS_IDS,
    is_call,
    is_method_call,
    plain_receiver_item,
    repeatable_arguments,
    with_value,
)
from codeward.executors.local.syntax_nodes import LEAVES, position

__all__ = ["fast_own_reads", "own_attribute_names"]

#: The local a read outside a method binds its receiver to (see `fast_own_reads`).
_RECEIVER = "_receiver_"
#: The local a call statement binds its receiver's class to (see `_own_call`).
_RECEIVER_CLASS = "_receiver_class_"
#: Nodes that hold no attribute read: most of a tree, passed over by `fast_own_reads`.
_NOTHING_INSIDE = LEAVES | {ast.Name, ast.Constant}
_POSITION = ("lineno", "col_offset", "end_lineno", "end_col_offset")
#: An indented def's name, or the name of an attribute stored (``=`` or an augmented operator).
_DEFINED = re.compile(r"^[ \t]+def[ \t]+(\w+)|\.[ \t]*(\w+)[ \t]*(?:[-+*/%@&|^]|//|\*\*|<<|>>)?=(?!=)", re.MULTILINE)


def own_attribute_names(source: str, guarded_names: frozenset[str]) -> set[str]:
    """The public names the classes of the block `source` likely define: its indented defs
    (methods), and the attributes it stores (``self.balance = 0``, ``self.n += 1``). What
    `fast_own_reads` looks for. Read from the text, which costs a tenth of walking the classes:
    a name caught wrongly only puts the check where it does not pay, a name missed only keeps
    the guard alone; the guarded names and those starting with ``_`` are left out."""
    if "class" not in source:
        return set()
    names = {method or stored for method, stored in _DEFINED.findall(source)}
    return {name for name in names if not name.startswith("_") and name not in guarded_names}


def fast_own_reads(tree: ast.Module, source: str, names: set[str] | frozenset[str]) -> None:
    """Give each guarded read ``_getattr_(x, 'name')`` of one of `names` (the public attributes
    of the code's classes, see `own_attribute_names`) a plain form for when `x` is an instance
    of a plain class, in place: ``(_receiver_.name if _id_(_type_(_receiver_ := x)) in
    _own_ids_ else _getattr_(_receiver_, 'name'))``. The receiver is bound once, to a local of
    the function the read is in, so that the check and the read see the same object whatever
    else runs (a thread of the code cannot rebind another frame's local). Reads elsewhere
    (module code that is not the block function, annotations) keep the guard alone, but a
    comprehension checks its own variables without binding them (`_iteration_reads`); reads in
    class bodies and methods keep it too, since those are not walked: a method reads
    its receiver through `fast_receivers`, and walking every method cost more compile time
    than the other reads there save. Other names keep it too: the check costs a receiver that is not an
    instance of a plain class (a str, a module) a fifth of the read, and most reads of a
    class's names are of its instances. Statements whose lines read none of `names` are not
    walked: the walk would cost more than the reads it speeds up save in most blocks."""
    if not names:
        return
    pattern = re.compile(r"\.\s*(?:" + "|".join(sorted(names)) + r")\b")
    seen = [0]  # seen[n]: how many of the first n lines read one of the names
    for line in source.splitlines():
        seen.append(seen[-1] + (pattern.search(line) is not None))
    if seen[-1]:
        _OwnReads(names, seen).fields(tree, ("body",), in_function=False)


class _OwnReads:
    """The rewriting of `fast_own_reads`: each node's children, knowing whether the expressions
    among them run directly in a function's frame (where the walrus binds a local)."""

    def __init__(self, names: set[str] | frozenset[str], seen: list[int]) -> None:
        self.names = names
        self.seen = seen

    def fields(self, node: ast.AST, fields: tuple[str, ...], in_function: bool) -> None:
        """Rewrite the children in `fields` of `node`; names, constants and leaves, which `child`
        gives back as they are, are passed over here."""
        for field in fields:
            child = getattr(node, field, None)
            if type(child) is list:
                for index, item in enumerate(child):
                    if isinstance(item, ast.AST) and type(item) not in _NOTHING_INSIDE:
                        child[index] = self.child(item, field, in_function)
            elif isinstance(child, ast.AST) and type(child) not in _NOTHING_INSIDE:
                setattr(node, field, self.child(child, field, in_function))

    def child(self, node: ast.AST, field: str, in_function: bool) -> ast.AST:
        if type(node) in _NOTHING_INSIDE:
            return node
        if in_function:
            read = _read_of(node, self.names)
            if read is not None:
                return _own_read(node, *read)
        if isinstance(node, ast.stmt) and not isinstance(node, ast.FunctionDef):
            seen = self.seen  # a def's lines may be those of its first statement (the block function)
            if seen[min(node.end_lineno or node.lineno, len(seen) - 1)] == seen[node.lineno - 1]:
                return node
            if in_function and isinstance(node, CALL_STATEMENTS):
                method_call = self.method_call(node.value)
                if method_call is not None:
                    self.fields(method_call[0], ("args", "keywords"), in_function)  # once: both forms share them
                    return _own_call(node, *method_call)
        if isinstance(node, (ast.FunctionDef, ast.Lambda)):
            self.fields(node, ("body",), in_function=True)  # decorators and defaults keep the guard
        elif isinstance(node, COMPREHENSIONS):
            _iteration_reads(node, frozenset(), self.names)
        elif not isinstance(node, ast.ClassDef) and field != "annotation":
            self.fields(node, CHILD_FIELDS[type(node)], in_function)
        return node

    def method_call(self, value: ast.expr | None) -> tuple[ast.Call, ast.Name, str] | None:
        """(call, receiver, name) of ``_getattr_(receiver, 'name')(arguments)`` where `name` is
        one of the names, the receiver a name and the arguments `repeatable_arguments`: what
        `_own_call` may write twice without doubling much."""
        if not is_method_call(value) or not repeatable_arguments(value):
            return None
        read = _read_of(value.func, self.names)
        return None if read is None else (value, *read)


def _read_of(node: ast.AST, names: set[str] | frozenset[str]) -> tuple[ast.Name, str] | None:
    """(receiver, name) of the guarded read ``_getattr_(receiver, 'name')`` of one of `names`,
    on a name; None for anything else."""
    if not is_call(node, "_getattr_", 2):
        return None
    receiver, name = node.args
    attribute = name.value if type(name) is ast.Constant else None
    if type(receiver) is not ast.Name or not isinstance(attribute, str) or attribute not in names:
        return None
    return receiver, attribute


def _own_call(statement: ast.Expr | ast.Assign | ast.Return, call: ast.Call, receiver: ast.Name, name: str) -> ast.If:
    """The call statement ``receiver.name(arguments)`` (or ``x = ...``, ``return ...``) in the
    form that hands the receiver on to the method it calls (whose ``_own_self_`` then needs no
    check of its own)::

        if (_receiver_class_ := _type_(_receiver_ := receiver)) is _plain_receiver_[1] \
                or _id_(_receiver_class_) in _own_ids_:
            _plain_receiver_[0] = _receiver_
            _plain_receiver_[1] = _receiver_class_
            _receiver_.name(arguments)
        else:
            _getattr_(_receiver_, 'name')(arguments)

    The list holds only a plain class and an instance of one (an instance keeps its class), so
    the class of the last receiver found plain passes without the look-up in the ids; a loop
    calling a method on many instances of one class looks up once. Each new node is set at the
    statement's place (`located` would walk them)."""
    where = position(statement) or {}
    load, store = ast.Load(), ast.Store()

    def local(identifier: str, context: ast.expr_context = load) -> ast.Name:
        return ast.Name(identifier, context, **where)

    # Fields by position, as in `receivers`.
    bound = ast.NamedExpr(local(_RECEIVER, store), receiver, **where)
    named_kind = ast.NamedExpr(local(_RECEIVER_CLASS, store), ast.Call(local("_type_"), [bound], [], **where), **where)
    last = ast.Compare(named_kind, [ast.Is()], [plain_receiver_item(1, load, where)], **where)
    class_id = ast.Call(local("_id_"), [local(_RECEIVER_CLASS)], [], **where)
    looked_up = ast.Compare(class_id, [ast.In()], [local(CLASS_IDS)], **where)
    check = ast.BoolOp(ast.Or(), [last, looked_up], **where)
    hand_on = [
        ast.Assign([plain_receiver_item(0, store, where)], local(_RECEIVER), **where),
        ast.Assign([plain_receiver_item(1, store, where)], local(_RECEIVER_CLASS), **where),
    ]
    method = ast.Attribute(local(_RECEIVER), name, load, **where)
    plain = with_value(statement, ast.Call(method, call.args, call.keywords, **where))
    call.func.args[0] = local(_RECEIVER)  # type: ignore[attr-defined]
    return ast.If(check, [*hand_on, plain], [statement], **where)


def _iteration_reads(node: ast.AST, variables: frozenset[str], names: set[str] | frozenset[str]) -> None:
    """Give each guarded read of one of `names` on one of `variables` (the iteration variables of
    the comprehension `node` is in), among `node`'s descendants, the checked form without binding
    a local: the comprehension's own ``for`` alone can rebind them (a walrus cannot), nothing of
    its runs between the check and the read, and no other frame or thread reaches them. A
    comprehension reads its own variables so, and its first iterable, which runs in the scope
    around it, the variables of that scope; a lambda's body runs later, when a variable of the
    comprehension around it may have moved on, and reads none so."""
    if isinstance(node, COMPREHENSIONS):
        first, *rest = node.generators
        _iteration_reads_in(first, "iter", variables, names)
        own = frozenset(  # names bound by the targets, not those an attribute or item target reads
            item.id
            for each in node.generators
            for item in walk(each.target)
            if type(item) is ast.Name and type(item.ctx) is ast.Store
        )
        _iteration_reads_in(first, "ifs", own, names)
        for generator in rest:
            _iteration_reads_in(generator, "iter", own, names)
            _iteration_reads_in(generator, "ifs", own, names)
        for field in ("key", "value") if isinstance(node, ast.DictComp) else ("elt",):
            _iteration_reads_in(node, field, own, names)
        return
    inner = frozenset() if isinstance(node, ast.Lambda) else variables
    for field in CHILD_FIELDS[type(node)]:
        _iteration_reads_in(node, field, inner, names)


def _iteration_reads_in(
    holder: ast.AST, field: str, variables: frozenset[str], names: set[str] | frozenset[str]
) -> None:
    """`_iteration_reads` on what `holder`'s `field` holds (a node or a list of them), each read
    replaced where it is."""
    value = getattr(holder, field, None)
    items = value if type(value) is list else [value]
    for index, item in enumerate(items):
        if not isinstance(item, ast.AST) or type(item) in _NOTHING_INSIDE:
            continue
        read = _read_of(item, names) if variables else None
        if read is not None and read[0].id in variables:
            replacement = _own_read(item, *read, bind=False)
            if type(value) is list:
                value[index] = replacement
            else:
                setattr(holder, field, replacement)
            continue
        _iteration_reads(item, variables, names)


def _own_read(read: ast.AST, receiver: ast.Name, name: str, *, bind: bool = True) -> ast.IfExp:
    """The form of `read` that `fast_own_reads` gives, at its place (set on each new node here:
    `located` would walk them). `bind`: the receiver is bound to a local first; without it, the
    receiver is a name that nothing can rebind between the check and the read."""
    where = {field: getattr(read, field) for field in _POSITION}
    load, store = ast.Load(), ast.Store()
    local = _RECEIVER if bind else receiver.id

    def call(function: str, *arguments: ast.expr) -> ast.Call:
        return ast.Call(ast.Name(function, load, **where), list(arguments), [], **where)

    # Fields by position, as in `receivers`.
    checked: ast.expr = ast.Name(local, load, **where)
    if bind:
        checked = ast.NamedExpr(ast.Name(local, store, **where), receiver, **where)
    classes = ast.Name(CLASS_IDS, load, **where)
    check = ast.Compare(call("_id_", call("_type_", checked)), [ast.In()], [classes], **where)
    plain = ast.Attribute(ast.Name(local, load, **where), name, load, **where)
    guarded = call("_getattr_", ast.Name(local, load, **where), ast.Constant(name, **where))
    return ast.IfExp(check, plain, guarded, **where)
