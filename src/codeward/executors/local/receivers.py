"""Attribute reads and writes on instances of the code's own *plain* classes, without the
attribute guards: the methods of its classes run near CPython's speed.

A class is plain (`Guards.build_class` registers it, `plain_class` decides) when a class
statement of the code made it with `type` as its metaclass, every base is plain or
`object`, and every value in its namespace that an attribute read could bind binds as
CPython's own kinds do: a function, a property, a staticmethod or classmethod, a
cached_property or lru_cache (the policy refuses ``__get__``, ``__getattr__``,
``__getattribute__`` and ``__slots__``). Reading a public
attribute of an instance then gives a value the code held (it stored it in the instance or
the class) or what calling a function the code holds returns: never a module or an object
of the machine, which is all the read guard stops. A plain class stays plain: `_write_`
gives a `ClassWriter` that vets each value set on it the same way, its bases cannot be
changed, and the ids of plain classes are kept alive with them so no other class takes one.

This pass changes the instrumented tree in the methods (defs directly in a class body) whose
first parameter is never rebound: the method computes once whether that parameter is an
instance of a plain class (``_own_self_ = _id_(_type_(self)) in _own_ids_``), and each guarded
read, write and augmented assignment of ``self.name`` takes the plain form when it is, for the
public names that the guard does not treat specially; ``self.name += value`` adds numbers
inline (`number_sum`). Reads outside methods are in `own_reads`.

A call statement ``x.name(arguments)`` on such a receiver (``self.helper(a)`` in a method, and
outside methods see `own_reads`) hands it on to the method it calls: it puts the receiver in a
list of the sandbox's (``_plain_receiver_``) just before the call, and a method's check passes
at once when its receiver is the object there (``_own_self_ = self is _plain_receiver_[0] or
...``). The list only ever holds an instance of a plain class, so the method trusts only what
some check found. The call's arguments, whatever they are (`repeatable_arguments`), run after
the hand-on, as CPython reads the method before them: a call among them may hand on another
instance, and the method then checks its receiver itself; no order puts anything else in the list.
"""

from __future__ import annotations

import ast
import functools
from types import FunctionType
from typing import Any, TypeGuard

from codeward.executors.local.imports import SandboxViolation
from codeward.executors.local.instrumenter import number_sum
from codeward.executors.local.name_bindings import BINDERS, CHILD_FIELDS, bound_here, child_nodes, walk
from codeward.executors.local.syntax_nodes import call_node, located, name_node, position
from codeward.wording import a

__all__ = [
    "CALL_STATEMENTS",
    "CLASS_IDS",
    "PLAIN_RECEIVER",
    "ClassWriter",
    "fast_receivers",
    "is_call",
    "is_method_call",
    "plain_class",
    "plain_class_value",
    "plain_receiver_item",
    "repeatable_arguments",
    "with_value",
]

#: The global holding the ids of the plain classes.
CLASS_IDS = "_own_ids_"
#: The global two-item list holding the receiver a call statement last found to be an
#: instance of a plain class, just before calling a method on it, and the plain class last
#: found so (see `own_reads`). Only the instrumented code sets it, never to anything else.
PLAIN_RECEIVER = "_plain_receiver_"
#: The most nodes the arguments of a call statement's plain form may hold, which it writes
#: twice (see `repeatable_arguments`).
_MOST_REPEATED = 120
#: Nodes that hold no other (what `repeatable_arguments` counts without looking inside).
_NO_CHILDREN = frozenset({ast.Name, ast.Constant})
#: What `_Rewrite.replace` may replace: a guarded read, a write's target, an augmented assignment.
_REPLACEABLE = frozenset({ast.Call, ast.Attribute, ast.Expr, ast.Assign, ast.Return})
#: The statements whose value may be a method call that hands its receiver on.
CALL_STATEMENTS = (ast.Expr, ast.Assign, ast.Return)
#: Descriptors whose ``__get__`` returns the value itself or binds it as CPython binds a function.
_BINDS_PLAINLY: frozenset[type] = frozenset(
    {FunctionType, property, staticmethod, classmethod, functools.cached_property, functools.partialmethod}
    | {type(functools.lru_cache(maxsize=None)(len))}
)


def plain_class_value(value: Any) -> bool:
    """Whether a read through a class's namespace can bind `value` only as CPython's own
    kinds do (or not at all), so the read gives nothing the code could not reach itself."""
    kind = type(value)
    return kind in _BINDS_PLAINLY or not hasattr(kind, "__get__")


def plain_class(cls: type, plain_ids: set[int]) -> bool:
    """Whether `cls`, just made by a class statement of the code, is plain (see the module)."""
    if type(cls) is not type or not all(base is object or id(base) in plain_ids for base in cls.__mro__[1:]):
        return False
    return all(
        plain_class_value(value)
        for name, value in vars(cls).items()
        if not name.startswith("_")  # the policy refuses __getattr__, __slots__ and the like
    )


class ClassWriter:
    """What ``_write_`` gives for a plain class: its attributes set and deleted, each value
    vetted as the class statement's were, so that the class stays plain."""

    __slots__ = ("_cls",)
    _cls: type

    def __init__(self, cls: type) -> None:
        object.__setattr__(self, "_cls", cls)

    def __setattr__(self, name: str, value: Any) -> None:
        if not name.startswith("_") and not plain_class_value(value):
            raise SandboxViolation(
                f"cannot set {name!r} of class {self._cls.__name__!r} to {a(type(value).__name__)}: a "
                "descriptor from outside the sandbox binds in ways the sandbox does not check; "
                "define it in the class body instead"
            )
        setattr(self._cls, name, value)

    def __delattr__(self, name: str) -> None:
        delattr(self._cls, name)


def fast_receivers(
    classes: list[ast.ClassDef], source: str, guarded_names: frozenset[str], augmented: tuple[str, str, str]
) -> None:
    """Rewrite, in place, the guarded attribute access on the receivers of the methods of
    `classes` (the class statements of the block `source`; see the module).

    `guarded_names`: the attribute names the read guard treats specially, which keep it;
    `augmented`: the guards of ``a.name op= v`` (whole, read, store; see `policy`)."""
    lines = source.splitlines()
    rewrite = _Rewrite(guarded_names, augmented)
    for node in classes:
        for method in node.body:
            if isinstance(method, ast.FunctionDef):
                rewrite.method(method, lines)


def _placed(replacement: ast.AST, old: ast.AST) -> ast.AST:
    """`replacement` at the position of `old`: as `located` places it, which it need not walk
    when `replace` placed it already (a guarded read's plain form, a write changed in place)."""
    return replacement if "lineno" in replacement.__dict__ else located(replacement, old)


def _flag_assignment(flag: str, receiver: str, where: dict[str, Any] | None) -> ast.Assign:
    """``flag = receiver is _plain_receiver_[0] or _id_(_type_(receiver)) in _own_ids_``, each
    node made at `where` (the method's position, as `located` would place them, without
    walking them). The first test is the caller's check handed on (see the module):
    the list only ever holds instances of plain classes, and an instance stays one."""
    at = where or {}
    load = ast.Load()

    def name(identifier: str) -> ast.Name:
        return ast.Name(identifier, load, **at)

    # Fields by position: a node is made in two thirds of the time it takes by keyword.
    handed_on = ast.Compare(name(receiver), [ast.Is()], [plain_receiver_item(0, load, at)], **at)
    receiver_class = ast.Call(name("_type_"), [name(receiver)], [], **at)
    class_id = ast.Call(name("_id_"), [receiver_class], [], **at)
    check = ast.Compare(class_id, [ast.In()], [name(CLASS_IDS)], **at)
    either = ast.BoolOp(ast.Or(), [handed_on, check], **at)
    return ast.Assign([ast.Name(flag, ast.Store(), **at)], either, **at)


def plain_receiver_item(index: int, context: ast.expr_context, where: dict[str, Any]) -> ast.Subscript:
    """``_plain_receiver_[index]`` (0: the receiver handed on, 1: its class), read or written
    as `context` says, each node made at `where`."""
    return ast.Subscript(ast.Name(PLAIN_RECEIVER, ast.Load(), **where), ast.Constant(index, **where), context, **where)


def _either(flag: ast.Name, receiver: str, target: ast.expr) -> ast.IfExp:
    """``receiver if flag else target`` at the position of `target` (the write guard's call), as
    `located` would place it: the new nodes made there, `flag` placed at its first use."""
    where = position(target)
    if where is None:
        return ast.IfExp(test=flag, body=name_node(receiver), orelse=target)
    if "lineno" not in flag.__dict__:
        flag.__dict__.update(where)
    return ast.IfExp(test=flag, body=ast.Name(id=receiver, ctx=ast.Load(), **where), orelse=target, **where)


def _flag(parameter: str) -> str:
    return f"_own_{parameter}_"


def _read(receiver: str, name: str) -> ast.Attribute:
    return ast.Attribute(value=name_node(receiver), attr=name, ctx=ast.Load())


class _Rewrite:
    """The rewriting of one block's methods; each method's receiver gets its own flag, so a
    method nested in another's class body keeps both apart."""

    def __init__(self, guarded_names: frozenset[str], augmented: tuple[str, str, str]) -> None:
        self.guarded_names = guarded_names
        self.whole, self.read, self.store = augmented
        self.in_class_bodies: set[int] = set()  # ids of the nodes of the method's nested class bodies

    def method(self, function: ast.FunctionDef, lines: list[str]) -> None:
        positional = function.args.posonlyargs + function.args.args
        if not positional:
            return
        receiver = positional[0].arg
        text = lines[function.lineno - 1 : function.end_lineno]
        if not any(receiver + "." in line for line in text):
            return
        nodes, slots = _walk_with_slots(function)
        if _rebinds(nodes, receiver, positional[0]):
            return
        flag = name_node(_flag(receiver))
        self.in_class_bodies = {id(item) for node in nodes if isinstance(node, ast.ClassDef) for item in walk(node)}
        changed = False
        for container, key in slots:  # in the order of the walk; each read as it is now
            if type(container) is list:
                item = container[key]  # type: ignore[index]
                replacement = self.replace(item, receiver, flag)
                if replacement is not None:
                    container[key] = _placed(replacement, item)  # type: ignore[index]
                    changed = True
            else:
                child = getattr(container, key)  # type: ignore[arg-type]
                if type(child) in _REPLACEABLE:
                    replacement = self.replace(child, receiver, flag)
                    if replacement is not None:
                        setattr(container, key, _placed(replacement, child))  # type: ignore[arg-type]
                        changed = True
        if changed:
            first = function.body[0]
            docstring = isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            function.body.insert(1 if docstring else 0, _flag_assignment(flag.id, receiver, position(function)))

    def replace(self, node: ast.AST, receiver: str, flag: ast.Name) -> ast.AST | None:
        """The plain form of a guarded access on `receiver`, behind `flag`; None if `node` is none."""
        if isinstance(node, ast.Call):
            read = self.guarded_read(node, receiver)
            if read is None:
                return None
            where = position(node)  # the new nodes placed here, where `located` would put them, unwalked
            if where is None:
                return ast.IfExp(test=flag, body=_read(receiver, read), orelse=node)
            if "lineno" not in flag.__dict__:
                flag.__dict__.update(where)
            plain = ast.Attribute(
                value=ast.Name(id=receiver, ctx=ast.Load(), **where), attr=read, ctx=ast.Load(), **where
            )
            return ast.IfExp(test=flag, body=plain, orelse=node, **where)
        if isinstance(node, ast.Attribute):
            target = node.value
            if is_call(target, "_write_", 1) and _is_name(target.args[0], receiver):
                node.value = _either(flag, receiver, target)
                return node  # changed in place
            return None
        if type(node) in CALL_STATEMENTS and is_method_call(node.value):  # type: ignore[attr-defined]
            return self.method_call(node, receiver, flag)  # type: ignore[arg-type]
        if isinstance(node, ast.Expr):
            parts = self.augmented_attribute(node.value, receiver)
            if parts is None:
                return None
            operator, name, value = parts
            at = position(node)
            if operator == "+=" and id(node) not in self.in_class_bodies and at is not None:
                return self.number_sum(node, receiver, flag, name, value, at)
            current = _read(receiver, name)
            result: ast.expr
            if operator == "+=" and id(node) not in self.in_class_bodies:  # where the walrus binds a local
                result = number_sum(current, value, "_iadd_")
            elif operator == "+=":
                result = call_node("_iadd_", current, value)
            else:
                result = call_node("_inplacevar_", ast.Constant(operator), current, value)
            store = ast.Attribute(value=name_node(receiver), attr=name, ctx=ast.Store())
            return ast.If(test=flag, body=[ast.Assign(targets=[store], value=result)], orelse=[node])
        return None

    def method_call(self, node: ast.Expr | ast.Assign | ast.Return, receiver: str, flag: ast.Name) -> ast.If | None:
        """The statement ``receiver.name(arguments)`` (or ``x = ...``, ``return ...``), when
        public and its arguments `repeatable_arguments`, in the form that hands the receiver on to the
        method it calls, as `own_reads` does outside methods: ``if flag: _plain_receiver_[0] =
        receiver; receiver.name(arguments)`` and the guarded call otherwise. The class item
        keeps the plain class it holds."""
        call: ast.Call = node.value  # type: ignore[assignment]
        read: ast.Call = call.func  # type: ignore[assignment]
        name = self.guarded_read(read, receiver)
        if name is None or not repeatable_arguments(call):
            return None
        at = position(node) or {}
        load = ast.Load()
        handed = plain_receiver_item(0, ast.Store(), at)
        hand_on = ast.Assign(targets=[handed], value=ast.Name(id=receiver, ctx=load, **at), **at)
        guarded = ast.Call(func=read, args=call.args, keywords=call.keywords, **at)
        call.func = ast.Attribute(value=ast.Name(id=receiver, ctx=load, **at), attr=name, ctx=load, **at)
        if at and "lineno" not in flag.__dict__:
            flag.__dict__.update(at)
        return ast.If(test=flag, body=[hand_on, node], orelse=[with_value(node, guarded)], **at)

    def number_sum(
        self, node: ast.Expr, receiver: str, flag: ast.Name, name: str, value: ast.expr, where: dict[str, Any]
    ) -> ast.If:
        """``receiver.name += value`` in its plain form, in a method's own frame, each node made
        at the position of `node`, the augmented assignment it stands for: where `located`
        would put them, without walking them (see `replace`)."""
        load = ast.Load()
        current = ast.Attribute(value=ast.Name(id=receiver, ctx=load, **where), attr=name, ctx=load, **where)
        result = number_sum(current, value, "_iadd_", where)
        store = ast.Attribute(value=ast.Name(id=receiver, ctx=load, **where), attr=name, ctx=ast.Store(), **where)
        if "lineno" not in flag.__dict__:
            flag.__dict__.update(where)
        return ast.If(test=flag, body=[ast.Assign(targets=[store], value=result, **where)], orelse=[node], **where)

    def public(self, name: object) -> TypeGuard[str]:
        return isinstance(name, str) and not name.startswith("_") and name not in self.guarded_names

    def guarded_read(self, node: ast.Call, receiver: str) -> str | None:
        """The name of ``_getattr_(receiver, 'name')``, when public."""
        if is_call(node, "_getattr_", 2) and _is_name(node.args[0], receiver):
            name = node.args[1]
            if isinstance(name, ast.Constant) and self.public(name.value):
                return name.value
        return None

    def augmented_attribute(self, call: ast.expr, receiver: str) -> tuple[str, str, ast.expr] | None:
        """(operator, name, value) of ``receiver.name op= value`` as `policy` wrote it, when public."""
        if is_call(call, self.whole, 4):
            operator, target, name, value = call.args
        elif is_call(call, self.store, 3) and isinstance(call.args[1], ast.Starred):
            read = call.args[1].value
            if not is_call(read, self.read, 2):
                return None
            operator, value = call.args[0], call.args[2]
            target, name = read.args
        else:
            return None
        if (
            _is_name(target, receiver)
            and isinstance(operator, ast.Constant)
            and isinstance(operator.value, str)
            and isinstance(name, ast.Constant)
            and self.public(name.value)
        ):
            return operator.value, name.value, value
        return None


def is_call(node: ast.AST, function: str, arguments: int) -> TypeGuard[ast.Call]:
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == function
        and len(node.args) == arguments
    )


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _walk_with_slots(function: ast.FunctionDef) -> tuple[list[ast.AST], list[tuple[object, int | str]]]:
    """`walk(function)`, and where in it `_Rewrite.replace` may put a node: each (list, index)
    or (node, field) holding one of the `_REPLACEABLE` kinds that it may replace (`_may_replace`),
    in the order of the walk. One pass over the method's fields for both."""
    found: list[ast.AST] = [function]
    slots: list[tuple[object, int | str]] = []
    index = 0
    while index < len(found):
        node = found[index]
        index += 1
        for field in CHILD_FIELDS[type(node)]:
            value = getattr(node, field, None)
            if type(value) is list:
                for position, item in enumerate(value):
                    if isinstance(item, ast.AST) and item._fields:
                        found.append(item)
                        if type(item) in _REPLACEABLE and _may_replace(item):
                            slots.append((value, position))
            elif isinstance(value, ast.AST) and value._fields:
                found.append(value)
                if type(value) in _REPLACEABLE and _may_replace(value):
                    slots.append((node, field))
    return found, slots


def _may_replace(node: ast.AST) -> bool:
    """Whether `_Rewrite.replace` may replace `node`, one of the `_REPLACEABLE` kinds: a call of
    ``_getattr_``, or an attribute or expression statement whose value is a call of a guard (a
    write's target, an augmented assignment). What a slot holds changes before `replace` reads
    it only where a replacement put a node it does not replace, so the others need no slot."""
    if isinstance(node, ast.Call):
        return isinstance(node.func, ast.Name) and node.func.id == "_getattr_"
    value = node.value  # type: ignore[attr-defined]
    if type(node) is ast.Assign or type(node) is ast.Return:
        return is_method_call(value)
    return isinstance(value, ast.Call) and (isinstance(value.func, ast.Name) or is_method_call(value))


def with_value(statement: ast.Expr | ast.Assign | ast.Return, value: ast.expr) -> ast.stmt:
    """A statement like `statement` (its targets, its place) with another value."""
    where = position(statement) or {}
    if type(statement) is ast.Assign:
        return ast.Assign(targets=statement.targets, value=value, **where)
    return type(statement)(value=value, **where)


def is_method_call(value: ast.expr | None) -> TypeGuard[ast.Call]:
    """Whether `value` is a call of what a guarded read gives: ``_getattr_(x, 'name')(...)``."""
    return type(value) is ast.Call and is_call(value.func, "_getattr_", 2)


def repeatable_arguments(call: ast.Call) -> bool:
    """Whether the arguments of `call` (any kind: expressions, ``*args``, keywords, ``**kwargs``)
    hold at most `_MOST_REPEATED` nodes: what a call statement's plain form may write twice, in
    its two branches (one runs), without doubling much compile work. A call statement holds no
    statement, so the copies never nest; a larger argument (a long literal) keeps the guarded
    call, whose method read still has its own plain form."""
    pending: list[ast.AST] = [*call.args, *call.keywords]
    count = 0
    while pending:
        count += len(pending)
        if count > _MOST_REPEATED:
            return False
        pending = [child for node in pending if type(node) not in _NO_CHILDREN for child in child_nodes(node)]
    return True


def _rebinds(nodes: list[ast.AST], name: str, parameter: ast.arg) -> bool:
    """Whether anything among `nodes` (a method and all it holds) but the method's own
    parameter binds `name`: in the method or in a scope nested in it."""
    for node in nodes:
        kind = type(node)
        if kind is ast.Name:
            if node.id == name and type(node.ctx) is not ast.Load:  # type: ignore[attr-defined]
                return True
        elif kind is ast.arg:
            if node.arg == name and node is not parameter:  # type: ignore[attr-defined]
                return True
        elif kind is ast.FunctionDef or kind is ast.ClassDef:
            if node.name == name:  # type: ignore[attr-defined]
                return True
        elif kind in BINDERS and name in bound_here(node):
            return True
    return False
