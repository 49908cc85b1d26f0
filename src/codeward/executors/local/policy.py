"""What the local executor lets the model's code say, decided before it runs.

RestrictedPython's transformer supplies the base policy (no names or attributes
starting with ``_``, attribute reads through ``_getattr_``, writes through
``_write_``). We keep that and change what agents need changed: ``nonlocal``,
``match``, augmented assignment of items and attributes, plain ``print`` and
dunder methods on the model's own classes. RestrictedPython's per-item
iteration and unpacking guards are dropped: iterating cannot reach anything new,
and they cost a Python call per element.

The instrumenter (`instrumenter`) walks the tree with these visitors, adding what makes
limits hold while the code runs to what they accept; `block_compiler` runs it.
"""

from __future__ import annotations

import ast
from typing import TypeVar

from RestrictedPython.transformer import RestrictingNodeTransformer

from codeward.executors.local.data_policy import DataPolicy
from codeward.executors.local.forbidden import FORBIDDEN_ATTRIBUTES
from codeward.executors.local.refusals import CodeRefused, Problem
from codeward.executors.local.syntax_nodes import (
    call_at,
    call_node,
    dispatched_visit,
    located,
    name_node,
    position,
    transform_children,
)
from codeward.executors.local.type_inference import (
    PLAIN_TYPES,
    is_plain_expression,
)

__all__ = [
    "AUGMENTED",
    "FORMAT_METHODS",
    "GUARDED_ATTRIBUTES",
    "MATCH_CLASS",
    "MATCH_VALUE",
    "PLAIN_METHODS",
    "READABLE_DUNDERS",
    "REGISTER",
    "SIZE_ANSWER",
    "SIZE_ANSWERS",
    "SIZING_METHODS",
    "CodeRefused",
    "SandboxPolicy",
]

#: Special methods the model may define on its own classes: the operator and
#: container protocols whole. Each is compiled like any method, so it runs as model
#: code (ticked, guarded) wherever it is called from, C code and the host included;
#: the two whose answers C code uses as sizes, ``__len__`` (and ``__length_hint__``)
#: and ``__index__``, are made to check them when the class is built (see
#: `Limits.checked_special`).
_OPERATORS = (
    "add",
    "sub",
    "mul",
    "matmul",
    "truediv",
    "floordiv",
    "mod",
    "pow",
    "lshift",
    "rshift",
    "and",
    "or",
    "xor",
)
ALLOWED_DUNDERS = frozenset(
    [f"__{name}__" for name in _OPERATORS]
    + [f"__r{name}__" for name in _OPERATORS]
    + [f"__i{name}__" for name in _OPERATORS]
    + [
        "__init__",
        "__post_init__",
        "__init_subclass__",
        "__class_getitem__",
        "__repr__",
        "__str__",
        "__format__",
        "__bytes__",
        "__eq__",
        "__ne__",
        "__lt__",
        "__le__",
        "__gt__",
        "__ge__",
        "__hash__",
        "__bool__",
        "__len__",
        "__length_hint__",
        "__iter__",
        "__next__",
        "__reversed__",
        "__contains__",
        "__getitem__",
        "__setitem__",
        "__delitem__",
        "__missing__",
        "__divmod__",
        "__rdivmod__",
        "__neg__",
        "__pos__",
        "__abs__",
        "__invert__",
        "__round__",
        "__trunc__",
        "__floor__",
        "__ceil__",
        "__int__",
        "__float__",
        "__complex__",
        "__index__",
        "__call__",
        "__enter__",
        "__exit__",
        "__copy__",
        "__deepcopy__",
    ]
)

#: Special methods whose answers C code uses as sizes: the class body applies
#: ``_size_answer_(name)`` to them, before the class (or an ``__init_subclass__``) can
#: call them (see `Limits.checked_special`).
SIZE_ANSWERS = frozenset({"__len__", "__length_hint__", "__index__"})
SIZE_ANSWER = "_size_answer_"

#: Special methods that stay refused, with the reason the model reads.
_ATTRIBUTE_LOOKUP = "it changes how attributes are looked up, which the sandbox's attribute guards rely on"
_REBUILDING = "it tells copy and pickle how to rebuild the object, by naming any callable to call"
_ASYNC = "async code is not supported here (see the message on async def)"
REFUSED_DUNDERS = {
    "__del__": "it runs when the object is collected: at any time, outside the code's block and its limits",
    "__getattr__": _ATTRIBUTE_LOOKUP,
    "__getattribute__": _ATTRIBUTE_LOOKUP,
    "__setattr__": _ATTRIBUTE_LOOKUP,
    "__delattr__": _ATTRIBUTE_LOOKUP,
    "__dir__": _ATTRIBUTE_LOOKUP,
    "__get__": _ATTRIBUTE_LOOKUP + " (descriptors)",
    "__set__": _ATTRIBUTE_LOOKUP + " (descriptors)",
    "__delete__": _ATTRIBUTE_LOOKUP + " (descriptors)",
    "__set_name__": _ATTRIBUTE_LOOKUP + " (descriptors)",
    "__new__": (
        "it builds objects without __init__ and, read back as super().__new__, any class's objects; "
        "use __init__, or a classmethod that builds the object"
    ),
    "__reduce__": _REBUILDING,
    "__reduce_ex__": _REBUILDING,
    "__getstate__": _REBUILDING,
    "__setstate__": _REBUILDING,
    "__getnewargs__": _REBUILDING,
    "__getnewargs_ex__": _REBUILDING,
    "__instancecheck__": "it changes isinstance(), which the sandbox's guards rely on",
    "__subclasscheck__": "it changes issubclass(), which the sandbox's guards rely on",
    "__subclasshook__": "it changes isinstance() and issubclass(), which the sandbox's guards rely on",
    "__mro_entries__": "it changes the bases of the classes built with the object",
    "__prepare__": "metaclasses are not allowed",
    "__fspath__": "file functions read a path from it, and may read it more than once",
    "__buffer__": "it hands C code raw memory",
    "__release_buffer__": "it hands C code raw memory",
    "__sizeof__": "it would misreport the object's size to the host",
    "__await__": _ASYNC,
    "__aiter__": _ASYNC,
    "__anext__": _ASYNC,
    "__aenter__": _ASYNC,
    "__aexit__": _ASYNC,
}

#: Special attributes the code may read: its own special methods (for
#: ``super().__init__(...)``) and names. Not those whose direct call on a builtin
#: value would skip a guard: items (the item guard), calls, the operators that
#: size their result (``'a'.__mul__(n)``, ``(2).__pow__(n)``), formatting and
#: rounding (their specs and digits are checked by `format` and `round`).
_UNREADABLE_SUFFIXES = ("item__", "mul__", "mod__", "call__", "pow__", "shift__", "format__", "round__")
READABLE_DUNDERS = frozenset({"__name__", "__qualname__", "__doc__"}) | (
    ALLOWED_DUNDERS - {name for name in ALLOWED_DUNDERS if name.endswith(_UNREADABLE_SUFFIXES)}
)

#: Names the attribute guard treats specially whatever the value: str formatting
#: walks attributes, these str methods allocate as much as their argument asks,
#: and ``ABC.register`` changes isinstance() for the whole host.
FORMAT_METHODS = frozenset({"format", "format_map"})
SIZING_METHODS = frozenset({"ljust", "rjust", "center", "zfill", "expandtabs", "replace"})
REGISTER = "register"

#: Attributes read without the guard when the receiver is certainly a plain
#: value (see `type_inference`): the public names of the plain types, less the
#: special ones. On a plain value each is a method of the builtin type, never a
#: module or an object of the machine, so the guard would pass it unchanged.
GUARDED_ATTRIBUTES = FORMAT_METHODS | SIZING_METHODS | {REGISTER} | FORBIDDEN_ATTRIBUTES | DataPolicy.attribute_names
PLAIN_METHODS = (
    frozenset(name for kind in PLAIN_TYPES for name in dir(kind) if not name.startswith("_")) - GUARDED_ATTRIBUTES
)

#: What ``__name__`` reads in the model's code: the name of a script's module. (The
#: sandbox's globals keep their own ``__name__``, the module of the code's classes.)
SCRIPT_NAME = "__main__"
_ASYNC_REFUSED = (
    "async code is not supported in the local sandbox: an event loop runs coroutines from its own "
    "callbacks and worker threads (asyncio.to_thread, run_in_executor), where the time limit does not "
    "reach them; write the code synchronously (the docker executor runs asyncio)"
)

_FUTURE_REFUSED = (
    "from __future__ imports are not supported here: the features they turned on are on already, "
    "except `annotations`, which would make annotations strings; the sandbox keeps them the objects "
    "they name (typing.get_type_hints refuses to evaluate strings)"
)

_T = TypeVar("_T", bound=ast.AST)
#: Field-less node types whose RestrictedPython visitor allows them unchanged.
_ALLOWED_LEAVES = frozenset(
    kind
    for kind in vars(ast).values()
    if isinstance(kind, type)
    and issubclass(kind, ast.AST)
    and not kind._fields
    and hasattr(RestrictingNodeTransformer, f"visit_{kind.__name__}")
)
#: The code of a RestrictedPython visitor that only visits the node's children.
_DELEGATION = (lambda self, node: self.node_contents_visit(node)).__code__


def _delegates(name: str) -> bool:
    """Whether RestrictedPython's visitor `name` only visits the node's children (its code is
    ``return self.node_contents_visit(node)``): calling `node_contents_visit` in its place is the
    same, a Python call fewer per node. Read from its bytecode, so a visitor that checks
    anything keeps its own code."""
    code = getattr(RestrictingNodeTransformer, name).__code__
    return bool(code.co_code == _DELEGATION.co_code and code.co_names == _DELEGATION.co_names)


#: What the policy passes over: the leaves it allows, and constants when their visitor only
#: visits their children (a constant holds no node).
_POLICY_LEAVES = _ALLOWED_LEAVES | ({ast.Constant} if _delegates("visit_Constant") else set())
#: Guards a ``match`` statement's class patterns and dotted value patterns call (see
#: `SandboxPolicy.visit_Match`).
MATCH_CLASS = "_match_class_"
MATCH_VALUE = "_match_value_"
_IOPERATOR = {ast.Mult: "*=", ast.Pow: "**=", ast.LShift: "<<=", ast.Mod: "%="}
#: Every augmented operator, as written: items and attributes take any of them (see
#: `SandboxPolicy.visit_AugAssign`).
_AUGMENTED = {
    ast.Add: "+=",
    ast.Sub: "-=",
    ast.Mult: "*=",
    ast.MatMult: "@=",
    ast.Div: "/=",
    ast.FloorDiv: "//=",
    ast.Mod: "%=",
    ast.Pow: "**=",
    ast.LShift: "<<=",
    ast.RShift: ">>=",
    ast.BitAnd: "&=",
    ast.BitOr: "|=",
    ast.BitXor: "^=",
}
#: Guards of augmented assignment to items and attributes (see `Guards.augmented`): the
#: whole statement in one call, or a read then a store when the right side must be
#: evaluated between them.
AUGMENTED = {kind: (f"_aug_{kind}_", f"_aug_read_{kind}_", f"_aug_store_{kind}_") for kind in ("item", "attribute")}


class SandboxPolicy(RestrictingNodeTransformer):
    """RestrictedPython's policy, adapted to the Python agents write."""

    def __init__(self, reserved: frozenset[str], plain: frozenset[ast.Name] = frozenset()) -> None:
        super().__init__(errors=[], warnings=[], used_names={})
        self.problems: list[Problem] = []
        self.reserved = reserved
        self.plain = plain  # name loads that certainly hold a plain value
        self.class_depth: list[bool] = []  # True while directly inside a class body
        self.hoisted = 0  # names made for the class and value expressions of match patterns
        self.hoisted_loads: set[int] = set()  # ids of the pattern nodes that read those names

    visit = dispatched_visit

    def node_contents_visit(self, node: _T) -> _T:
        """Visit the children, but not the field-less nodes that RestrictedPython allows
        as they are (contexts, operators, pass), nor constants when it allows them as they
        are (`_POLICY_LEAVES`): a field-less node it has not reviewed is still visited, and
        refused."""
        return transform_children(self, node, _POLICY_LEAVES)

    # Reporting -----------------------------------------------------------
    def refused(self, node: _T) -> _T:
        """RestrictedPython's refusal (`not_allowed`), the node kept where it stood: taken out of the
        tree, it would leave its parent without a field that the walk's later work on the parent
        reads (see `instrumenter`), and the rest of the block's problems unreported."""
        self.not_allowed(node)
        return node

    visit_Await = visit_AsyncFor = visit_AsyncWith = refused

    def generic_visit(self, node: _T) -> _T:
        """A node class RestrictedPython has not reviewed (newer syntax): refused as it refuses it."""
        super().generic_visit(node)
        return node

    def error(self, node: ast.AST, info: str) -> None:
        self.errors.append(info)
        self.problems.append(
            Problem(
                getattr(node, "lineno", 1) or 1,
                getattr(node, "col_offset", 0) or 0,
                getattr(node, "end_col_offset", None),
                info,
            )
        )

    def check_name(self, node: ast.AST, name: str | None, allow_magic_methods: bool = False) -> None:
        if name is None:
            return
        if name.startswith("_") and name != "_":
            self.error(node, f'names starting with "_" are not allowed here ({name!r}); use a public name')
        elif name == "range":
            self.error(node, "'range' cannot be redefined in the sandbox; pick another name")
        elif name in self.reserved:
            self.error(node, f"{name!r} is a tool and cannot be redefined; pick another name")

    # Names and attributes -----------------------------------------------
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if isinstance(node.ctx, ast.Load):
            if node.id == "__name__":  # the block runs as a script does: `if __name__ == "__main__":` runs
                return located(ast.Constant(SCRIPT_NAME), node)
            if node.id.startswith("_") and node.id != "_":
                self.check_name(node, node.id)
        else:
            self.check_name(node, node.id)
        return node

    def check_attribute(self, node: ast.AST, name: str, store: bool) -> None:
        if name.startswith("_") and (store or name not in READABLE_DUNDERS):
            self.error(
                node,
                f'attributes starting with "_" are not allowed ({name!r}); use the object\'s public API instead',
            )
        elif name in FORBIDDEN_ATTRIBUTES:
            self.error(node, f"the attribute {name!r} reaches interpreter internals and is not allowed")

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.check_attribute(node, node.attr, store=not isinstance(node.ctx, ast.Load))
        plain_method = node.attr in PLAIN_METHODS and (node.value in self.plain or is_plain_expression(node.value))
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            if plain_method:  # a plain value's method: what the guard would return (and a fast method call)
                return node
            where = position(node)
            return call_at("_getattr_", [node.value, ast.Constant(node.attr, **where or {})], where)
        node.value = call_at("_write_", [node.value], position(node.value))
        return node

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        node = self.node_contents_visit(node)
        if isinstance(node.ctx, ast.Load):
            return call_at("_getitem_", [node.value, node.slice], position(node))
        return node

    def visit_Slice(self, node: ast.Slice) -> ast.AST:
        node = self.node_contents_visit(node)
        parts = [part or ast.Constant(None) for part in (node.lower, node.upper, node.step)]
        return call_at("_slice_", parts, position(node))

    # Statements RestrictedPython handles differently from what agents need ----
    def allow(self, node: ast.AST) -> ast.AST:
        """Visit the children only: no unpacking or iteration guards (they protect nothing here)."""
        return self.node_contents_visit(node)

    visit_Assign = visit_AnnAssign = visit_For = visit_With = visit_Module = allow

    def visit_comprehension(self, node: ast.comprehension) -> ast.AST:
        """As `allow`; but ``async for`` in a generator expression, which CPython compiles outside an
        async function (it fails only when it runs), is refused as async code is."""
        if node.is_async:
            self.error(node.target, _ASYNC_REFUSED)
        return self.allow(node)

    visit_match_case = visit_MatchSequence = visit_MatchOr = allow

    def visit_Call(self, node: ast.Call) -> ast.AST:
        if isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval", "compile"):
            self.error(node, f"{node.func.id}() is not available; write the code directly")
        return self.node_contents_visit(node)

    def visit_AugAssign(self, node: ast.AugAssign) -> ast.AST | list[ast.AST]:
        """``x op= v`` on a name keeps CPython's statement (the growing operators sized
        through ``_inplacevar_``). On an item or attribute, ``a[k] op= v`` becomes
        ``_aug_store_item_(op, *_aug_read_item_(a, k), v)``: `a` and `k` are evaluated once,
        the item is read through the item guard before `v` is evaluated, the operator
        is applied in place with the size caps of ``_inplacevar_``, and the result is
        stored; attributes likewise, through the attribute and write guards. When `v` is
        a constant or a name, whose evaluation does nothing, one call does it all."""
        target = node.target
        if isinstance(target, ast.Name):
            node = self.node_contents_visit(node)
            if type(node.op) not in _IOPERATOR:
                return node
            value = call_node("_inplacevar_", ast.Constant(_IOPERATOR[type(node.op)]), name_node(target.id), node.value)
            return located(ast.Assign(targets=[target], value=value), node)
        if isinstance(target, ast.Attribute):
            self.check_attribute(target, target.attr, store=True)
            key: ast.expr = ast.Constant(target.attr)
            whole, read, store = AUGMENTED["attribute"]
        else:
            key = self.visit(target.slice)
            whole, read, store = AUGMENTED["item"]
        container = self.visit(target.value)
        value = self.visit(node.value)
        operator = ast.Constant(_AUGMENTED[type(node.op)])
        if isinstance(value, (ast.Constant, ast.Name)):
            call = call_node(whole, operator, container, key, value)
        else:
            call = call_node(store, operator, ast.Starred(call_node(read, container, key), ast.Load()), value)
        return located(ast.Expr(call), node)

    def visit_Nonlocal(self, node: ast.Nonlocal) -> ast.AST:
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_Global(self, node: ast.Global) -> ast.AST:
        for name in node.names:
            self.check_name(node, name)
        return node

    def visit_Try(self, node: ast.Try) -> ast.AST:
        for statement in node.finalbody:
            escape = _finally_escape(statement)
            if escape is not None:
                self.error(
                    escape,
                    f"'{type(escape).__name__.lower()}' inside 'finally' would swallow errors and "
                    "limits; move it after the try statement",
                )
        return self.node_contents_visit(node)

    def visit_TryStar(self, node: ast.AST) -> ast.AST:
        """``try: ... except* E:``: as ``try`` (``_handled_`` at the top of each handler
        finds the sandbox's signals inside exception groups too)."""
        return self.visit_Try(node)  # type: ignore[arg-type]

    def visit_AsyncFunctionDef(self, node: ast.AsyncFunctionDef) -> ast.AST:
        self.error(node, _ASYNC_REFUSED)
        return node  # its awaits are not reported one by one

    def visit_Import(self, node: ast.Import) -> ast.AST:
        for alias in node.names:
            self.check_name(node, (alias.asname or alias.name).split(".")[0])
            if any(part.startswith("_") for part in alias.name.split(".")):
                self.error(node, f"importing private modules is not allowed ({alias.name!r})")
        return node

    def visit_ImportFrom(self, node: ast.ImportFrom) -> ast.AST:
        if node.level:
            self.error(node, "relative imports are not allowed; import a module by its full name")
        if node.module == "__future__":
            self.error(node, _FUTURE_REFUSED)
            return node
        if node.module and any(part.startswith("_") for part in node.module.split(".")):
            self.error(node, f"importing private modules is not allowed ({node.module!r})")
        for alias in node.names:
            if alias.name == "*":
                self.error(node, "'from ... import *' is not allowed; import the names you need")
            self.check_name(node, alias.name)
            self.check_name(node, alias.asname)
        return node

    # Syntax newer than the policy: refused with the feature's name --------
    def visit_TypeAlias(self, node: ast.AST) -> ast.AST:
        self.error(node, "the `type X = ...` statement (new in Python 3.12) is not supported here; write `X = ...`")
        return node

    def refuse_type_parameters(self, node: ast.FunctionDef | ast.ClassDef) -> None:
        if getattr(node, "type_params", None):
            self.error(
                node,
                "type parameters such as `def f[T]` or `class C[T]` (new in Python 3.12) are not supported "
                "here; use typing.TypeVar",
            )
            node.type_params = []  # type: ignore[union-attr,unused-ignore]  # reported once, not per parameter

    # Functions and classes -------------------------------------------------
    def visit_FunctionDef(self, node: ast.FunctionDef) -> ast.AST:
        self.refuse_type_parameters(node)
        in_class = bool(self.class_depth) and self.class_depth[-1]
        if not (in_class and node.name in ALLOWED_DUNDERS):
            if node.name.startswith("__") and node.name.endswith("__"):
                reason = REFUSED_DUNDERS.get(node.name)
                if reason is not None:
                    self.error(node, f"defining {node.name!r} is not allowed: {reason}")
                else:
                    allowed = ", ".join(sorted(ALLOWED_DUNDERS)) if in_class else "none outside a class"
                    self.error(node, f"defining {node.name!r} is not allowed; allowed special methods: {allowed}")
            else:
                self.check_name(node, node.name)
        self.check_function_argument_names(node)
        self.visit_scope(node, in_class=False)
        if in_class and node.name in SIZE_ANSWERS:  # outermost: it checks what the other decorators made
            node.decorator_list.insert(0, located(call_node(SIZE_ANSWER, ast.Constant(node.name)), node))
        return node

    def visit_ClassDef(self, node: ast.ClassDef) -> ast.AST:
        self.refuse_type_parameters(node)
        self.check_name(node, node.name)
        if any(keyword.arg == "metaclass" for keyword in node.keywords):
            self.error(node, "metaclasses are not allowed; use a plain class")
        return self.visit_scope(node, in_class=True)

    def visit_Lambda(self, node: ast.Lambda) -> ast.AST:
        self.check_function_argument_names(node)
        return self.visit_scope(node, in_class=False)

    def visit_scope(self, node: ast.AST, in_class: bool) -> ast.AST:
        """Visit a new scope, remembering whether it is a class body (where dunder methods may be defined)."""
        self.class_depth.append(in_class)
        try:
            return self.node_contents_visit(node)
        finally:
            self.class_depth.pop()

    # match statements -------------------------------------------------------
    def visit_Match(self, node: ast.Match) -> ast.AST | list[ast.AST]:
        """A class pattern reads the subject's attributes in C, past ``_getattr_``: each
        class expression of a pattern with sub-patterns is evaluated just before the
        statement, through ``_match_class_``, whose answer stands in for the class and
        vets every attribute the pattern will read (see `Guards.match_class`). Dotted
        names (``case Color.RED``, ``case shapes.Point()``) are evaluated there too, so
        their attribute reads are guarded like any other (the pattern itself can hold
        only names). Classes and values are thus looked up once, before the first case
        is tried, rather than when their case is reached."""
        hoisted: list[ast.AST] = []
        for case in node.cases:
            for pattern in ast.walk(case.pattern):
                if isinstance(pattern, ast.MatchClass):
                    reads = pattern.patterns or pattern.kwd_patterns
                    if reads or not isinstance(pattern.cls, ast.Name):
                        names = ast.Tuple([ast.Constant(name) for name in pattern.kwd_attrs], ast.Load())
                        extra = (names, ast.Constant(len(pattern.patterns))) if reads else None
                        pattern.cls = self.hoist(pattern.cls, MATCH_CLASS if reads else None, extra, hoisted)
                elif isinstance(pattern, ast.MatchValue) and isinstance(pattern.value, ast.Attribute):
                    held = self.hoist(pattern.value, MATCH_VALUE, None, hoisted)
                    pattern.value = located(ast.Attribute(held, "value", ast.Load()), pattern.value)
                    self.hoisted_loads.add(id(pattern.value))
        node = self.node_contents_visit(node)
        return [*hoisted, node] if hoisted else node

    def hoist(
        self, expression: ast.expr, guard: str | None, extra: tuple[ast.expr, ...] | None, statements: list[ast.AST]
    ) -> ast.Name:
        """Assign the guarded `expression` (``guard(expression, *extra)``) to a new private
        name before the statement; return a load of the name for the pattern."""
        self.hoisted += 1
        name = f"_match_{self.hoisted}_"
        value = self.visit(expression)
        if guard is not None:
            value = call_node(guard, value, *(extra or ()))
        statements.append(located(ast.Assign([ast.Name(name, ast.Store())], value), expression))
        load = located(name_node(name), expression)
        self.hoisted_loads.add(id(load))
        return load

    def visit_MatchValue(self, node: ast.MatchValue) -> ast.AST:
        return node if id(node.value) in self.hoisted_loads else self.node_contents_visit(node)

    def visit_MatchSingleton(self, node: ast.MatchSingleton) -> ast.AST:
        return node

    def visit_MatchStar(self, node: ast.MatchStar) -> ast.AST:
        self.check_name(node, node.name)
        return node

    def visit_MatchAs(self, node: ast.MatchAs) -> ast.AST:
        self.check_name(node, node.name)
        return self.node_contents_visit(node)

    def visit_MatchMapping(self, node: ast.MatchMapping) -> ast.AST:
        self.check_name(node, node.rest)
        return self.node_contents_visit(node)

    def visit_MatchClass(self, node: ast.MatchClass) -> ast.AST:
        for attribute in node.kwd_attrs:
            if attribute.startswith("_") or attribute in FORBIDDEN_ATTRIBUTES:
                self.error(node, f"matching on the attribute {attribute!r} is not allowed")
        if id(node.cls) not in self.hoisted_loads:
            node.cls = self.visit(node.cls)
        node.patterns = [self.visit(pattern) for pattern in node.patterns]
        node.kwd_patterns = [self.visit(pattern) for pattern in node.kwd_patterns]
        return node


# RestrictedPython's visitors that only visit the children, and that the policy keeps: the
# children visited directly (see `_delegates`).
for _name in [name for name in vars(RestrictingNodeTransformer) if name.startswith("visit_")]:
    if _name not in vars(SandboxPolicy) and _delegates(_name):
        setattr(SandboxPolicy, _name, SandboxPolicy.node_contents_visit)


def _finally_escape(statement: ast.stmt) -> ast.stmt | None:
    """The first return/break/continue in a finally block that would leave it early."""
    pending: list[tuple[ast.AST, bool]] = [(statement, False)]
    while pending:
        node, in_loop = pending.pop()
        if isinstance(node, ast.Return) or (isinstance(node, (ast.Break, ast.Continue)) and not in_loop):
            return node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            continue
        loop = in_loop or isinstance(node, (ast.For, ast.While))
        pending.extend((child, loop) for child in ast.iter_child_nodes(node))
    return None
