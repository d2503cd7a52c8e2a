"""Translate a checked CEL AST into the source of one Python function.

Why source and not closures or a tree walk: one device evaluation becomes a handful of
bytecodes with no per-node call (cel-engines.md §4: 2.6x faster than closures).

Errors are Python exceptions (``CelRuntimeError``). Each node yields a Python expression,
possibly after emitting statements into the current block; the operators that absorb
errors (``&&``, ``||``, ``all``, ``exists``) wrap their operands in ``try`` blocks, and
laziness is kept by emitting a branch's statements inside the ``if`` that guards it. When a
later argument needs statements, earlier arguments are first spilled to temporaries so that
evaluation order (and so the error reported) stays left to right, as in cel-go.

Specialisations are only generated when exact: Python ``==``/``<`` where both static types
are the same primitive, a guarded ``type(x) is str`` fast path against literals, ``in`` for
metacharacter-free regex literals, and integer comparisons for constant quantities.

Cost: when the expression has a comprehension, every iteration adds the static cost of its
body (cel-go's runtime cost model with unit-size operands) plus the size-dependent cost of
Kubernetes' string and list functions, and aborts past the limit with
``actual cost limit exceeded``. Code outside comprehensions is a bounded number of steps
and is not metered.
"""

from __future__ import annotations

import math
import re
from typing import Any

from . import regex, runtime
from .checker import CheckResult
from .environment import value_key
from .errors import CelCompileError, CelError, CelRuntimeError, CostLimitExceeded
from .functions import DECLARATIONS, GLOBAL_IMPLS, OPERATOR_IMPLS, RECEIVER_IMPLS
from .parser import (
    Bind,
    Call,
    Comprehension,
    CreateList,
    CreateMap,
    CreateStruct,
    Ident,
    Index,
    Literal,
    Node,
    OptMap,
    Select,
)
from .quantity import Quantity
from .semver import Semver
from .typesys import BOOL, DEVICE, T

__all__ = [
    "generate",
    "COST_LIMIT",
    "GeneratedCode",
    "FUNCTION",
    "SWEEP",
    "SELECT",
    "ROWS",
    "NotRowwise",
    "detach",
]

# What generate() emits: one function of a device, or a loop over a sequence of devices
# with the expression inlined in its body (the batch API), returning one result per device
# (SWEEP) or the indexes that matched and the errors by index (SELECT). ROWS is SWEEP over
# rows of values instead of devices: each row holds, at fixed positions, the converted
# values the expression reads (``_MISSING`` where the device publishes none), so a caller
# that keeps devices as columns converts only those values and builds no device objects.
FUNCTION = "function"
SWEEP = "sweep"
SELECT = "select"
ROWS = "rows"


class NotRowwise(ValueError):
    """The expression reads more of a device than values at literal keys (ROWS cannot)."""


_NAME_RE = re.compile(r"\b_[A-Za-z][A-Za-z0-9_]*\b")
_EMPTY_VARS: dict[str, Any] = {}

COST_LIMIT = 1_000_000
_SPILL_EVERY = 16
_BRACKETS = re.compile(r"[(\[{]")

_PRIMITIVE_EQ = frozenset({"int", "string", "bool", "bytes", "double", "uint"})
_ORDER_OPS = {"_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}
_CMP_HELPERS = {"_<_": "_lt", "_<=_": "_le", "_>_": "_gt", "_>=_": "_ge"}
_SIZE_COST_FUNCS = {"lowerAscii", "upperAscii", "trim", "substring", "quantity", "url"}
_SIZE2_COST_FUNCS = {"replace", "split"}
_ASCII_CASE = {"lowerAscii": "lower", "upperAscii": "upper"}
_STRING_TESTS = {
    "startsWith": "{s}.startswith({arg})",
    "endsWith": "{s}.endswith({arg})",
    "contains": "{arg} in {s}",
}
"""stdlib.starts_with/ends_with/str_contains on a string and a string literal, inlined."""
_TRAVERSAL_COST_FUNCS = {"isSorted", "sum", "max", "min", "indexOf", "lastIndexOf"}
_DEVICE_FIELDS = {
    "driver": "driver",
    "attributes": "attributes",
    "capacity": "capacity",
    "allowMultipleAllocations": "allow_multiple_allocations",
}


def _raise(exc: BaseException) -> Any:
    raise exc


def detach(exc: CelRuntimeError) -> CelRuntimeError:
    """``exc`` without its traceback and context, to be kept as a value.

    A traceback holds the frames it passed through (a sweep's frame holds every device), so
    an error returned in a batch result or cached by memoization must not keep one.
    """
    exc.__traceback__ = None
    exc.__context__ = None
    return exc


def _cost_size(v: Any) -> int:
    if v.__class__ is str or v.__class__ is bytes or v.__class__ in runtime.LIST_TYPES:
        return len(v)
    return 1


def _cost_str(v: Any) -> int:
    return math.ceil(_cost_size(v) * 0.1)


def _cost_str2(v: Any) -> int:
    return math.ceil(_cost_size(v) * 0.2)


BASE_NAMESPACE: dict[str, Any] = {
    "_CelError": CelError,
    "_RtErr": CelRuntimeError,
    "_CostExceeded": CostLimitExceeded,
    "_MISSING": runtime.MISSING,
    "_UNSET": object(),
    "_nokey": runtime.no_such_key,
    "_noov": runtime.no_such_overload,
    "_eq": runtime.equals,
    "_ne": runtime.not_equals,
    "_lt": runtime.less,
    "_le": runtime.less_equals,
    "_gt": runtime.greater,
    "_ge": runtime.greater_equals,
    "_ci": runtime.check_int,
    "_cu": runtime.check_uint,
    "_index": runtime.index,
    "_select": runtime.select,
    "_has": runtime.has_field,
    "_in": runtime.contains,
    "_opt_select": runtime.optional_select_value,
    "_opt_index": runtime.optional_index,
    "_iter": runtime.iter_range,
    "_pairs": runtime.iter_pairs,
    "_make_map": runtime.make_map,
    "_map_key": runtime.map_key,
    "_Optional": runtime.OptionalValue,
    "_NONE": runtime.NONE,
    "_Quantity": Quantity,
    "_Semver": Semver,
    "_raise": _raise,
    "_detach": detach,
    "_cost_size": _cost_size,
    "_cost_str": _cost_str,
    "_cost_str2": _cost_str2,
    "_to_bool": runtime.to_bool_result,
    "_LIST_TYPES": runtime.LIST_TYPES,
}


class GeneratedCode:
    """The generated source, the names it needs, and whether it meters cost."""

    def __init__(self, source: str, namespace: dict[str, Any], metered: bool) -> None:
        self.source = source
        self.namespace = namespace
        self.metered = metered
        self.row_keys: tuple[str, ...] = ()
        """ROWS: the value key (``environment.value_key``) at each position of a row."""


class _Gen:
    def __init__(
        self,
        expression: str,
        checked: CheckResult,
        *,
        selector: bool,
        validate_regex: bool,
        mode: str = FUNCTION,
    ) -> None:
        self.expression = expression
        self.mode = mode
        self.checked = checked
        self.selector = selector
        self.validate_regex = validate_regex
        self.lines: list[str] = []
        self.depth = 1
        self.nesting = 0  # gen() calls in progress
        self.counter = 0
        self.consts: dict[str, Any] = {}
        self.const_ids: dict[tuple[str, Any], str] = {}
        self.loop_depth = 0
        self.metered = False
        self.report_cost = False  # return (result, cost): the conformance test's view
        self.root: Node | None = None
        self.lazy: dict[str, tuple[Node, dict[str, str]]] = {}
        self.returned = False  # the root already returned its result on every path
        self.positions: dict[str, str] = {}  # batch: value key constant -> its position variable
        self.row_keys: list[str] = []  # ROWS: the value key at each position of a row

    # helpers ----------------------------------------------------------------------------
    def emit(self, line: str) -> None:
        self.lines.append("    " * self.depth + line)

    def ret(self, expr: str) -> None:
        """The device's result is ``expr``: return it, or record it and go to the next device."""
        if self.mode == FUNCTION:
            self.emit(f"return ({expr}, _cost)" if self.report_cost else f"return {expr}")
        elif self.mode == SWEEP or self.mode == ROWS:
            self.emit(f"_ap({expr})")
            self.emit("continue")
        else:
            if expr == "True":
                self.emit("_ap(_i)")
            elif expr != "False":
                self.emit(f"if {expr}: _ap(_i)")
            self.emit("continue")

    def tmp(self, prefix: str = "_t") -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def const(self, value: Any, kind: str = "v") -> str:
        if isinstance(value, (Quantity, Semver, runtime.CelType, runtime.Uint, float)):
            key: tuple[str, Any] = (kind, (type(value).__name__, repr(value)))
        else:
            key = (kind, id(value))
        name = self.const_ids.get(key)
        if name is None:
            self.counter += 1
            name = f"_k{self.counter}"
            self.consts[name] = value
            self.const_ids[key] = name
        return name

    def type_of(self, node: Node) -> T:
        return self.checked.type_of(node)

    def literal(self, value: Any) -> str:
        cls = value.__class__
        if value is None or cls is bool or cls is str or cls is bytes:
            return repr(value)
        if cls is int:
            return repr(value) if value >= 0 else f"({value})"
        if cls is float and math.isfinite(value):
            return f"({value!r})"
        return self.const(value)

    def name_of(self, expr: str) -> str:
        """Make ``expr`` a simple local name (spill to a temporary unless it is one)."""
        if expr.isidentifier():
            return expr
        t = self.tmp()
        self.emit(f"{t} = {expr}")
        return t

    def gen_args(self, nodes: list[Node], scope: dict[str, str]) -> list[str]:
        """Generate arguments left to right, spilling earlier ones when a later one emits statements."""
        out: list[str] = []
        for node in nodes:
            mark = len(self.lines)
            expr = self.gen(node, scope)
            if len(self.lines) > mark:
                spills = []
                for i, prev in enumerate(out):
                    if not _is_simple(prev):
                        t = self.tmp()
                        spills.append("    " * self.depth + f"{t} = {prev}")
                        out[i] = t
                self.lines[mark:mark] = spills
            out.append(expr)
        return out

    # dispatch ---------------------------------------------------------------------------
    def gen(self, node: Node, scope: dict[str, str]) -> str:
        """The Python expression of ``node``; every ``_SPILL_EVERY`` levels it becomes a temporary.

        Python's own parser refuses an expression nested 200 parentheses deep, and a CEL
        expression within cel-go's limits can nest deeper than that (``a.b.c...`` 250
        times); a temporary every few levels keeps the generated source shallow. Spilling is
        safe wherever statements are (gen_args spills earlier arguments first).
        """
        self.nesting += 1
        expr = self._gen(node, scope)
        self.nesting -= 1
        if self.nesting and self.nesting % _SPILL_EVERY == 0 and _BRACKETS.search(expr):
            expr = self.name_of(expr)
        return expr

    def _gen(self, node: Node, scope: dict[str, str]) -> str:
        if isinstance(node, Literal):
            if node.kind == "uint":
                return self.const(runtime.Uint(node.value))
            return self.literal(node.value)
        if isinstance(node, Ident):
            return self.gen_ident(node, scope)
        if isinstance(node, Select):
            return self.gen_select(node, scope)
        if isinstance(node, Index):
            return self.gen_index(node, scope)
        if isinstance(node, Call):
            return self.gen_call(node, scope)
        if isinstance(node, CreateList):
            return self.gen_list(node, scope)
        if isinstance(node, CreateMap):
            return self.gen_map(node, scope)
        if isinstance(node, Comprehension):
            return self.gen_comprehension(node, scope)
        if isinstance(node, Bind):
            # cel.bind is lazy (as in CEL-C++ and cel-go): the init runs at the first use,
            # so an unused binding of a missing attribute is not an error.
            var = self.tmp("_b")
            self.emit(f"{var} = _UNSET")
            self.lazy[var] = (node.init, scope)
            return self.gen(node.body, {**scope, node.var: var})
        if isinstance(node, OptMap):
            return self.gen_optmap(node, scope)
        if isinstance(node, CreateStruct):
            return self.raise_expr(f"unsupported: message construction '{node.type_name}'")
        raise AssertionError(f"unknown node {node!r}")

    def raise_expr(self, message: str) -> str:
        return f"_raise(_RtErr({message!r}))"

    def gen_ident(self, node: Ident, scope: dict[str, str]) -> str:
        if node.name in scope:
            name = scope[node.name]
            if name in self.lazy:
                init, bind_scope = self.lazy[name]
                self.emit(f"if {name} is _UNSET:")
                self.depth += 1
                self.emit(f"{name} = {self.gen(init, bind_scope)}")
                self.depth -= 1
            return name
        if node.name == "device" and self.type_of(node) == DEVICE:
            return "device.as_value()"
        if node.name in runtime.TYPE_IDENTS:
            return self.const(runtime.TYPE_IDENTS[node.name])
        # A declared variable other than `device` (conformance bindings) or an unbound one.
        return f"(_vars[{node.name!r}] if {node.name!r} in _vars else _raise(_RtErr({('no such attribute: ' + node.name)!r})))"

    def is_device(self, node: Node, scope: dict[str, str]) -> bool:
        return (
            isinstance(node, Ident)
            and node.name == "device"
            and node.name not in scope
            and self.type_of(node) == DEVICE
        )

    def is_domain_map(self, node: Node, scope: dict[str, str]) -> bool:
        """``device.attributes`` / ``device.capacity``: maps whose unknown keys give ``{}``."""
        return (
            isinstance(node, Select)
            and not node.test_only
            and not node.optional
            and node.field in ("attributes", "capacity")
            and self.is_device(node.operand, scope)
        )

    def domain_of(self, node: Node, scope: dict[str, str]) -> tuple[str, str] | None:
        """``(kind, domain)`` when ``node`` is ``device.attributes[<literal>]`` or ``device.capacity.<field>``."""
        if (
            isinstance(node, Index)
            and not node.optional
            and self.is_domain_map(node.operand, scope)
        ):
            if isinstance(node.index, Literal) and node.index.kind == "string":
                field = node.operand.field  # type: ignore[attr-defined]
                return ("attribute" if field == "attributes" else "capacity", str(node.index.value))
        if (
            isinstance(node, Select)
            and not node.optional
            and not node.test_only
            and self.is_domain_map(node.operand, scope)
        ):
            field = node.operand.field  # type: ignore[attr-defined]
            return ("attribute" if field == "attributes" else "capacity", node.field)
        return None

    def value_key(self, node: Node, name: str, scope: dict[str, str]) -> str | None:
        """The constant naming ``node[name]`` in ``device.shape`` when ``node`` is a literal domain."""
        domain = self.domain_of(node, scope)
        if domain is None:
            return None
        return self.const(value_key(domain[0], domain[1], name), "key")

    def position(self, key: str) -> str | None:
        """In a batch loop, the variable holding ``device.shape.get(key)`` (looked up once per shape)."""
        if self.mode == FUNCTION:
            return None
        found = self.positions.get(key)
        if found is None:
            found = self.positions[key] = self.tmp("_p")
        return found

    def row_position(self, key: str) -> int:
        """ROWS: where the value of ``key`` (a value key constant) sits in a row."""
        value = self.consts[key]
        if value not in self.row_keys:
            self.row_keys.append(value)
        return self.row_keys.index(value)

    def flat_lookup(self, key: str, name: str) -> str:
        value = self.tmp()
        if self.mode == ROWS:
            self.emit(f"{value} = _row[{self.row_position(key)}]")
            self.emit(f"if {value} is _MISSING: raise _nokey({name!r})")
            return value
        at = self.position(key)
        if at is None:
            self.emit(f"{value} = device.shape.get({key})")
            at = value
        self.emit(f"if {at} is None: raise _nokey({name!r})")
        self.emit(f"{value} = device.vals[{at}]")
        return value

    def flat_has(self, key: str) -> str:
        if self.mode == ROWS:
            return f"(_row[{self.row_position(key)}] is not _MISSING)"
        at = self.position(key)
        return f"({key} in device.shape)" if at is None else f"({at} is not None)"

    def gen_select(self, node: Select, scope: dict[str, str]) -> str:
        if self.is_device(node.operand, scope) and not node.optional:
            if node.test_only:
                return "True"
            return f"device.{_DEVICE_FIELDS[node.field]}"
        operand_type = self.type_of(node.operand)
        if not node.optional and operand_type.kind == "map":
            # device.attributes['d'].x: one position lookup and device.vals[i]; same result and error.
            key = self.value_key(node.operand, node.field, scope)
            if key is not None:
                return self.flat_has(key) if node.test_only else self.flat_lookup(key, node.field)
        operand = self.gen(node.operand, scope)
        if node.optional:
            return f"_opt_select({operand}, {node.field!r})"
        if node.test_only:
            if operand_type.kind == "map":
                return f"({node.field!r} in {operand})"
            return f"_has({operand}, {node.field!r})"
        if self.is_domain_map(node.operand, scope):
            return f"{operand}[{node.field!r}]"
        if operand_type.kind == "map":
            value = self.tmp()
            self.emit(f"{value} = {operand}.get({node.field!r}, _MISSING)")
            self.emit(f"if {value} is _MISSING: raise _nokey({node.field!r})")
            return value
        return f"_select({operand}, {node.field!r})"

    def gen_index(self, node: Index, scope: dict[str, str]) -> str:
        if not node.optional and isinstance(node.index, Literal) and node.index.kind == "string":
            operand_type = self.type_of(node.operand)
            if operand_type.kind == "map" and operand_type.params[0].kind == "string":
                name = str(node.index.value)
                flat = self.value_key(node.operand, name, scope)
                if flat is not None:
                    return self.flat_lookup(flat, name)
        operand_expr, key = self.gen_args([node.operand, node.index], scope)
        if node.optional:
            return f"_opt_index({operand_expr}, {key})"
        key_type = self.type_of(node.index)
        if self.is_domain_map(node.operand, scope) and key_type.kind == "string":
            return f"{operand_expr}[{key}]"
        operand_type = self.type_of(node.operand)
        if operand_type.kind == "map" and key_type.kind == "string":
            if operand_type.params[0].kind == "string":
                key_name = self.name_of(key)
                value = self.tmp()
                self.emit(f"{value} = {operand_expr}.get({key_name}, _MISSING)")
                self.emit(f"if {value} is _MISSING: raise _nokey({key_name})")
                return value
        return f"_index({operand_expr}, {key})"

    def gen_list(self, node: CreateList, scope: dict[str, str]) -> str:
        elems = self.gen_args(node.elements, scope)
        if not node.optional_indices:
            return f"[{', '.join(elems)}]"
        out = self.tmp()
        self.emit(f"{out} = []")
        for i, e in enumerate(elems):
            if i in node.optional_indices:
                o = self.name_of(e)
                self.emit(f"if {o}.__class__ is not _Optional: raise _noov()")
                self.emit(f"if {o}.present: {out}.append({o}.value)")
            else:
                self.emit(f"{out}.append({e})")
        return out

    def gen_map(self, node: CreateMap, scope: dict[str, str]) -> str:
        flat: list[Node] = []
        for entry in node.entries:
            flat += [entry.key, entry.value]
        exprs = self.gen_args(flat, scope)
        pairs = [(exprs[2 * i], exprs[2 * i + 1]) for i in range(len(node.entries))]
        literal_keys = [
            e.key.value
            for e in node.entries
            if isinstance(e.key, Literal) and e.key.kind == "string"
        ]
        if (
            not any(e.optional for e in node.entries)
            and len(literal_keys) == len(node.entries)
            and len(set(literal_keys)) == len(literal_keys)
        ):
            return "{" + ", ".join(f"{k}: {v}" for k, v in pairs) + "}"
        out = self.tmp()
        self.emit(f"{out} = []")
        for entry, (k, v) in zip(node.entries, pairs, strict=True):
            if entry.optional:
                o = self.name_of(v)
                self.emit(f"if {o}.__class__ is not _Optional: raise _noov()")
                self.emit(f"if {o}.present: {out}.append(({k}, {o}.value))")
            else:
                self.emit(f"{out}.append(({k}, {v}))")
        return f"_make_map({out})"

    # calls ------------------------------------------------------------------------------
    def gen_call(self, node: Call, scope: dict[str, str]) -> str:
        fn = node.function
        if fn in ("_&&_", "_||_"):
            return self.gen_logic(node, scope)
        if fn == "_?_:_":
            return self.gen_ternary(node, scope)
        if node.target is None and fn in OPERATOR_IMPLS:
            return self.gen_operator(node, scope)
        if fn in ("quantity", "semver") and node.target is None:
            folded = self.fold_constructor(node)
            if folded is not None:
                return folded
        if fn == "matches":
            special = self.gen_matches(node, scope)
            if special is not None:
                return special
        if fn in ("compareTo", "isGreaterThan", "isLessThan") and node.target is not None:
            special = self.gen_compare_method(node, scope)
            if special is not None:
                return special
        nodes = ([node.target] if node.target is not None else []) + list(node.args)
        args = self.gen_args(nodes, scope)
        impls = RECEIVER_IMPLS if node.target is not None else GLOBAL_IMPLS
        impl = impls.get(fn)
        if impl is None:
            return self.raise_expr(
                f"unbound function: {fn}" if node.target is None else "no such overload"
            )
        receiver = node.target is not None
        if not any(
            o.receiver == receiver and len(o.params) == len(args) for o in DECLARATIONS.get(fn, [])
        ):
            return self.raise_expr("no such overload")
        if self.metered and args:
            self.add_dynamic_cost(fn, args)
        if receiver and fn in _ASCII_CASE and len(args) == 1:
            # stdlib.lower_ascii/upper_ascii inlined: str.lower() is exact on ASCII text.
            s = self.name_of(args[0])
            return f"({s}.{_ASCII_CASE[fn]}() if {s}.__class__ is str and {s}.isascii() else {self.const(impl, 'fn')}({s}))"
        if (
            receiver
            and fn in _STRING_TESTS
            and len(args) == 2
            and isinstance(node.args[0], Literal)
            and node.args[0].value.__class__ is str
        ):
            # A call per device was most of a per-device `uuid.startsWith('GPU-…')`. The
            # literal emits no statement, so spilling the receiver keeps the order.
            s = self.name_of(args[0])
            test = _STRING_TESTS[fn].format(s=s, arg=args[1])
            return f"({test} if {s}.__class__ is str else {self.const(impl, 'fn')}({s}, {args[1]}))"
        return f"{self.const(impl, 'fn')}({', '.join(args)})"

    def add_dynamic_cost(self, fn: str, args: list[str]) -> None:
        if fn in _SIZE_COST_FUNCS:
            a = self.spill_arg(args, 0)
            self.emit(f"_cost += _cost_str({a}) - 1")
        elif fn in _SIZE2_COST_FUNCS:
            a = self.spill_arg(args, 0)
            self.emit(f"_cost += _cost_str2({a}) - 1")
        elif fn in _TRAVERSAL_COST_FUNCS:
            a = self.spill_arg(args, 0)
            self.emit(f"_cost += _cost_size({a}) - 1")
            self.emit(f"if _cost > {COST_LIMIT}: raise _CostExceeded()")

    def spill_arg(self, args: list[str], i: int) -> str:
        args[i] = self.name_of(args[i])
        return args[i]

    def fold_constructor(self, node: Call) -> str | None:
        if not node.args or not all(isinstance(a, Literal) for a in node.args):
            return None
        impl = GLOBAL_IMPLS[node.function]
        try:
            value = impl(*[a.value for a in node.args])  # type: ignore[attr-defined]
        except CelRuntimeError as exc:
            return self.raise_expr(exc.message)
        return self.const(value)

    def gen_matches(self, node: Call, scope: dict[str, str]) -> str | None:
        if node.target is not None:
            subject_node, pattern_node = node.target, node.args[0]
        elif len(node.args) == 2:
            subject_node, pattern_node = node.args
        else:
            return None
        if not (isinstance(pattern_node, Literal) and pattern_node.kind == "string"):
            return None
        pattern = pattern_node.value
        subject = self.gen(subject_node, scope)
        is_str = self.type_of(subject_node).kind == "string"
        if regex.is_literal_pattern(pattern):
            test = f"({pattern!r} in {{s}})"
        else:
            try:
                compiled = regex.compile_regex(pattern)
            except CelRuntimeError as exc:
                if self.validate_regex:
                    raise CelCompileError(self.expression, pattern_node.pos, exc.message) from None
                return self.raise_expr(exc.message)
            test = f"({self.const(compiled)}.search({{s}}) is not None)"
        if is_str:
            return test.format(s=subject)
        s = self.name_of(subject)
        fallback = f"{self.const(regex.matches, 'fn')}({s}, {pattern!r})"
        return f"({test.format(s=s)} if {s}.__class__ is str else {fallback})"

    def gen_compare_method(self, node: Call, scope: dict[str, str]) -> str | None:
        if len(node.args) != 1:
            return None
        arg = node.args[0]
        if not (
            isinstance(arg, Call) and arg.function in ("quantity", "semver") and arg.target is None
        ):
            return None
        const_expr = self.fold_constructor(arg)
        if const_expr is None or not const_expr.startswith("_k"):
            return None
        value = self.consts[const_expr]
        target = self.name_of(self.gen(node.target, scope))  # type: ignore[arg-type]
        fallback = f"{self.const(RECEIVER_IMPLS[node.function], 'fn')}({target}, {const_expr})"
        if isinstance(value, Quantity):
            n = value.nanos
            cls = "_Quantity"
            if node.function == "compareTo":
                fast = f"(({target}.nanos > {n}) - ({target}.nanos < {n}))"
            elif node.function == "isGreaterThan":
                fast = f"({target}.nanos > {n})"
            else:
                fast = f"({target}.nanos < {n})"
        elif not value.pre:
            # A release constant: Semver.compare reduces to comparing (major, minor, patch),
            # with a pre-release of the same core sorting below it.
            cls = "_Semver"
            core = repr(value._key)
            if node.function == "compareTo":
                fast = f"((({target}._key > {core}) - ({target}._key < {core})) if {target}._key != {core} else -({target}.pre != ()))"
            elif node.function == "isGreaterThan":
                fast = f"({target}._key > {core})"
            else:
                fast = f"(({target}._key < {core}) if {target}._key != {core} else ({target}.pre != ()))"
        else:
            cls = "_Semver"
            if node.function == "compareTo":
                fast = f"{target}.compare({const_expr})"
            elif node.function == "isGreaterThan":
                fast = f"({target}.compare({const_expr}) > 0)"
            else:
                fast = f"({target}.compare({const_expr}) < 0)"
        return f"({fast} if {target}.__class__ is {cls} else {fallback})"

    def gen_operator(self, node: Call, scope: dict[str, str]) -> str:
        fn = node.function
        types = [self.type_of(a) for a in node.args]
        args = self.gen_args(node.args, scope)
        if fn == "!_":
            if types[0] == BOOL:
                return f"(not {args[0]})"
            return f"{self.const(runtime.logical_not, 'fn')}({args[0]})"
        if fn == "-_":
            if types[0].kind == "double":
                return f"(-{args[0]})"
            return f"{self.const(runtime.neg, 'fn')}({args[0]})"
        a, b = args
        ta, tb = types
        same_prim = ta == tb and ta.kind in _PRIMITIVE_EQ
        if fn in ("_==_", "_!=_"):
            pyop = "==" if fn == "_==_" else "!="
            helper = "_eq" if fn == "_==_" else "_ne"
            if same_prim:
                return f"({a} {pyop} {b})"
            lit = _literal_class(node.args[1])
            if lit is not None and (ta.is_dyn or ta.kind == lit):
                x = self.name_of(a)
                return f"(({x} {pyop} {b}) if {x}.__class__ is {lit} else {helper}({x}, {b}))"
            return f"{helper}({a}, {b})"
        if fn in _ORDER_OPS:
            pyop = _ORDER_OPS[fn]
            if same_prim and ta.kind in ("int", "string", "double", "uint", "bytes", "bool"):
                return f"({a} {pyop} {b})"
            lit = _literal_class(node.args[1])
            if lit in ("int", "str") and (
                ta.is_dyn or ta.kind == ("string" if lit == "str" else lit)
            ):
                x = self.name_of(a)
                return f"(({x} {pyop} {b}) if {x}.__class__ is {lit} else {_CMP_HELPERS[fn]}({x}, {b}))"
            return f"{_CMP_HELPERS[fn]}({a}, {b})"
        if fn == "@in":
            if tb.kind == "map" and ta.kind == "string":
                lhs = node.args[0]
                if isinstance(lhs, Literal) and lhs.kind == "string":
                    flat = self.value_key(node.args[1], str(lhs.value), scope)
                    if flat is not None:
                        return self.flat_has(flat)
                return f"({a} in {b})"
            return f"_in({a}, {b})"
        if same_prim:
            if ta.kind == "int" and fn in ("_+_", "_-_", "_*_"):
                op = {"_+_": "+", "_-_": "-", "_*_": "*"}[fn]
                return f"_ci({a} {op} {b})"
            if ta.kind == "double" and fn in ("_+_", "_-_", "_*_"):
                op = {"_+_": "+", "_-_": "-", "_*_": "*"}[fn]
                return f"({a} {op} {b})"
            if ta.kind in ("string", "bytes") and fn == "_+_":
                return f"({a} + {b})"
        return f"{self.const(OPERATOR_IMPLS[fn], 'fn')}({a}, {b})"

    def gen_logic(self, node: Call, scope: dict[str, str]) -> str:
        """n-ary ``&&``/``||`` with CEL's commutative error absorption."""
        is_and = node.function == "_&&_"
        terms = _flatten(node, node.function)
        absorbing = "False" if is_and else "True"
        if node is self.root and not self.metered:
            return self.gen_logic_returning(terms, is_and, scope)
        result = self.tmp("_r")
        err = self.tmp("_e")
        self.emit(f"{result} = {'True' if is_and else 'False'}")
        self.emit(f"{err} = None")
        for i, term in enumerate(terms):
            guard_open = i > 0
            if guard_open:
                self.emit(f"if {result} is not {absorbing}:")
                self.depth += 1
            value = self.tmp()
            can_fail = not _cannot_fail(term, self.checked)
            if can_fail:
                self.emit("try:")
                self.depth += 1
            expr = self.gen(term, scope)
            self.emit(f"{value} = {expr}")
            if can_fail:
                self.depth -= 1
                self.emit("except _CelError as _x:")
                self.emit(f"    {value} = _x")
            self.emit(f"if {value} is {absorbing}: {result} = {absorbing}")
            if self.type_of(term) != BOOL or can_fail:
                self.emit(f"elif {value} is not {'True' if is_and else 'False'} and {err} is None:")
                self.emit(f"    {err} = {value} if isinstance({value}, _CelError) else _noov()")
            if guard_open:
                self.depth -= 1
        self.emit(f"if {result} is not {absorbing} and {err} is not None: raise {err}")
        return result

    def gen_logic_returning(self, terms: list[Node], is_and: bool, scope: dict[str, str]) -> str:
        """The root ``&&``/``||``: return as soon as a term decides the result.

        The first error is kept until no later term can decide. The last term decides alone
        when no error can have been kept: its value, or its error, is the result.
        """
        absorbing = "False" if is_and else "True"
        other = "True" if is_and else "False"
        decides = "not " if is_and else ""
        err = self.tmp("_e")
        err_at = (len(self.lines), "    " * self.depth)
        err_used = False
        for i, term in enumerate(terms):
            is_bool = self.type_of(term) == BOOL
            if _cannot_fail(term, self.checked) and is_bool:
                expr = self.gen(term, scope)
                self.emit(f"if {decides}{expr}:")
                self.depth += 1
                self.ret(absorbing)
                self.depth -= 1
                continue
            if i == len(terms) - 1 and is_bool:
                if not err_used:
                    self.ret(self.gen(term, scope))
                    self.returned = True
                    return other
                self.emit(f"if {err} is None:")
                self.depth += 1
                self.ret(self.gen(term, scope))
                self.depth -= 1
            err_used = True
            self.emit("try:")
            self.depth += 1
            expr = self.gen(term, scope)
            if is_bool:
                self.emit(f"if {decides}{expr}:")
                self.depth += 1
                self.ret(absorbing)
                self.depth -= 1
                self.depth -= 1
                self.emit("except _CelError as _x:")
                self.emit(f"    if {err} is None: {err} = _x")
                continue
            value = self.tmp()
            self.emit(f"{value} = {expr}")
            self.depth -= 1
            self.emit("except _CelError as _x:")
            self.emit(f"    {value} = _x")
            self.emit(f"if {value} is not {other}:")
            self.depth += 1
            self.emit(f"if {value} is {absorbing}:")
            self.depth += 1
            self.ret(absorbing)
            self.depth -= 1
            self.emit(
                f"if {err} is None: {err} = {value} if isinstance({value}, _CelError) else _noov()"
            )
            self.depth -= 1
        if err_used:
            self.lines.insert(err_at[0], f"{err_at[1]}{err} = None")
            self.emit(f"if {err} is not None: raise {err}")
        return other

    def gen_ternary(self, node: Call, scope: dict[str, str]) -> str:
        cond_node, then_node, else_node = node.args
        cond = self.gen(cond_node, scope)
        out = self.tmp()
        if self.type_of(cond_node) == BOOL:
            self.emit(f"if {cond}:")
        else:
            c = self.name_of(cond)
            self.emit(f"if {c}.__class__ is not bool: raise _noov()")
            self.emit(f"if {c}:")
        self.depth += 1
        self.emit(f"{out} = {self.gen(then_node, scope)}")
        self.depth -= 1
        self.emit("else:")
        self.depth += 1
        self.emit(f"{out} = {self.gen(else_node, scope)}")
        self.depth -= 1
        return out

    def gen_optmap(self, node: OptMap, scope: dict[str, str]) -> str:
        target = self.name_of(self.gen(node.target, scope))
        out = self.tmp()
        self.emit(f"if {target}.__class__ is not _Optional: raise _noov()")
        self.emit(f"if {target}.present:")
        self.depth += 1
        var = self.tmp("_v")
        self.emit(f"{var} = {target}.value")
        body = self.gen(node.body, {**scope, node.var: var})
        if node.flat:
            self.emit(f"{out} = {body}")
            self.emit(f"if {out}.__class__ is not _Optional: raise _noov()")
        else:
            self.emit(f"{out} = _Optional({body})")
        self.depth -= 1
        self.emit("else:")
        self.emit(f"    {out} = _NONE")
        return out

    # comprehensions ---------------------------------------------------------------------
    def gen_comprehension(self, node: Comprehension, scope: dict[str, str]) -> str:
        rng = self.gen(node.range, scope)
        kind = node.kind
        out = self.tmp("_r")
        err = self.tmp("_e")
        v1 = self.tmp("_v")
        v2 = self.tmp("_v") if node.var2 else None
        inner = {**scope, node.var: v1}
        if node.var2 and v2:
            inner[node.var2] = v2
        init = {
            "all": "True",
            "exists": "False",
            "exists_one": "0",
            "map": "[]",
            "filter": "[]",
            "transformList": "[]",
            "transformMap": "{}",
            "transformMapEntry": "{}",
        }[kind]
        self.emit(f"{out} = {init}")
        self.emit(f"{err} = None")
        # cel-go: accumulator init (a list literal costs 10) plus the result expression.
        self.emit(f"_cost += {11 if init in ('[]', '{}') else 1}")
        loop_vars = f"{v1}, {v2}" if v2 else v1
        iterator = f"_pairs({rng})" if v2 else f"_iter({rng})"
        self.emit(f"for {loop_vars} in {iterator}:")
        self.depth += 1
        self.loop_depth += 1
        step_cost = _STEP_COST[kind] + sum(_static_cost(a) for a in node.args)
        self.emit(f"_cost += {step_cost}")
        self.emit(f"if _cost > {COST_LIMIT}: raise _CostExceeded()")
        if kind in ("all", "exists"):
            absorbing = "False" if kind == "all" else "True"
            other = "True" if kind == "all" else "False"
            p = self.tmp()
            self.emit("try:")
            self.depth += 1
            self.emit(f"{p} = {self.gen(node.args[0], inner)}")
            self.depth -= 1
            self.emit("except _CelError as _x:")
            self.emit(f"    {p} = _x")
            self.emit(f"if {p} is {absorbing}:")
            self.emit(f"    {out} = {absorbing}")
            self.emit("    break")
            self.emit(f"if {p} is not {other} and {err} is None:")
            self.emit(f"    {err} = {p} if isinstance({p}, _CelError) else _noov()")
            self.depth -= 1
            self.loop_depth -= 1
            self.emit(f"if {out} is not {absorbing} and {err} is not None: raise {err}")
            return out
        if kind == "exists_one":
            p = self.name_of(self.gen(node.args[0], inner))
            self.emit(f"if {p} is True: {out} += 1")
            self.emit(f"elif {p} is not False: raise _noov()")
            self.depth -= 1
            self.loop_depth -= 1
            return f"({out} == 1)"
        if kind == "filter":
            p = self.name_of(self.gen(node.args[0], inner))
            self.emit(f"if {p} is True: {out}.append({v1})")
            self.emit(f"elif {p} is not False: raise _noov()")
            self.depth -= 1
            self.loop_depth -= 1
            return out
        # map / transformList / transformMap / transformMapEntry, optionally with a filter
        body = node.args[-1]
        if len(node.args) == 2:
            f = self.name_of(self.gen(node.args[0], inner))
            self.emit(f"if {f}.__class__ is not bool: raise _noov()")
            self.emit(f"if {f}:")
            self.depth += 1
        value = self.gen(body, inner)
        if kind in ("map", "transformList"):
            self.emit(f"{out}.append({value})")
        elif kind == "transformMap":
            self.emit(f"{out}[{v1}] = {value}")
        else:
            entry = self.name_of(value)
            self.emit(f"if not isinstance({entry}, dict): raise _noov()")
            self.emit(f"for _mk in {entry}:")
            self.emit(
                f"    if _mk in {out}: raise _RtErr('insert failed: key ' + str(_mk) + ' already exists')"
            )
            self.emit(f"{out}.update({entry})")
        if len(node.args) == 2:
            self.depth -= 1
        self.depth -= 1
        self.loop_depth -= 1
        return out


# cel-go's per-iteration overhead of each macro expansion (loop condition + accumulator
# update), from the expansions in cel-go parser/macro.go and interpreter/runtimecost.go.
_STEP_COST = {
    "all": 3,
    "exists": 4,
    "exists_one": 2,
    "map": 12,
    "filter": 13,
    "transformList": 12,
    "transformMap": 3,
    "transformMapEntry": 3,
}


def _static_cost(node: Node) -> int:
    """cel-go runtime cost of one evaluation of ``node`` with unit-size operands.

    Nested comprehensions count only their set-up; their iterations meter themselves.
    """
    if isinstance(node, Literal):
        return 0
    if isinstance(node, Ident):
        return 1
    if isinstance(node, Select):
        return 1 + _static_cost(node.operand)
    if isinstance(node, Index):
        return 1 + _static_cost(node.operand) + _static_cost(node.index)
    if isinstance(node, Call):
        own = 0 if node.function in ("_&&_", "_||_", "_?_:_") else 1
        parts = [node.target] if node.target is not None else []
        return own + sum(_static_cost(a) for a in [*parts, *node.args])
    if isinstance(node, CreateList):
        return 10 + sum(_static_cost(e) for e in node.elements)
    if isinstance(node, CreateMap):
        return 30 + sum(_static_cost(e.key) + _static_cost(e.value) for e in node.entries)
    if isinstance(node, Comprehension):
        return _static_cost(node.range) + 1
    if isinstance(node, Bind):
        return _static_cost(node.init) + _static_cost(node.body)
    if isinstance(node, OptMap):
        return 2 + _static_cost(node.target) + _static_cost(node.body)
    return 1


def _has_comprehension(node: Node) -> bool:
    if isinstance(node, Comprehension):
        return True
    children: list[Node] = []
    if isinstance(node, (Select,)):
        children = [node.operand]
    elif isinstance(node, Index):
        children = [node.operand, node.index]
    elif isinstance(node, Call):
        children = ([node.target] if node.target is not None else []) + list(node.args)
    elif isinstance(node, CreateList):
        children = list(node.elements)
    elif isinstance(node, CreateMap):
        children = [x for e in node.entries for x in (e.key, e.value)]
    elif isinstance(node, Bind):
        children = [node.init, node.body]
    elif isinstance(node, OptMap):
        children = [node.target, node.body]
    elif isinstance(node, CreateStruct):
        children = [v for _, v, _ in node.fields]
    return any(_has_comprehension(c) for c in children)


def _flatten(node: Node, fn: str) -> list[Node]:
    if isinstance(node, Call) and node.function == fn and node.target is None:
        return [t for a in node.args for t in _flatten(a, fn)]
    return [node]


def _literal_class(node: Node) -> str | None:
    if isinstance(node, Literal):
        return {
            "string": "str",
            "int": "int",
            "bool": "bool",
            "double": "float",
            "bytes": "bytes",
        }.get(node.kind)
    return None


def _is_simple(expr: str) -> bool:
    return expr.isidentifier() or expr in ("True", "False", "None") or _is_plain_literal(expr)


def _is_plain_literal(expr: str) -> bool:
    try:
        import ast

        ast.literal_eval(expr)
    except (ValueError, SyntaxError):
        return False
    return True


def _cannot_fail(node: Node, checked: CheckResult) -> bool:
    """Conservative: a comparison of device.driver with a string literal, or a bool literal."""
    if isinstance(node, Literal):
        return node.kind == "bool"
    if isinstance(node, Call) and node.function in ("_==_", "_!=_") and node.target is None:
        a, b = node.args
        return (
            isinstance(a, Select)
            and isinstance(a.operand, Ident)
            and a.operand.name == "device"
            and a.field == "driver"
            and checked.type_of(a.operand) == DEVICE
            and isinstance(b, Literal)
            and b.kind == "string"
        )
    return False


def generate(
    expression: str,
    root: Node,
    checked: CheckResult,
    *,
    selector: bool,
    validate_regex: bool = True,
    mode: str = FUNCTION,
    report_cost: bool = False,
) -> GeneratedCode:
    """Return the source of ``def _cel(device, _vars)`` evaluating ``root``.

    ``report_cost`` (FUNCTION only) meters every expression and returns ``(result, cost)``:
    the cost this engine charges one evaluation against the limit, which the Kubernetes
    vectors compare with cel-go's worst-case estimate.

    With ``mode`` SWEEP or SELECT (selectors only), ``_cel(devices)`` loops over a sequence
    of devices with the evaluation inlined in the loop body (no call per device; helpers and
    constants bound once): SWEEP returns one result per device, True/False or the
    ``CelRuntimeError`` the FUNCTION form would raise; SELECT returns the indexes that
    matched and ``(index, error)`` pairs. Any other exception propagates, as from FUNCTION.

    ROWS gives SWEEP's results for ``_cel(rows)``: the value keys of a row's positions are
    ``GeneratedCode.row_keys``. A device error is the caller's to report (no row is
    built for such a device). Raises ``NotRowwise`` when the expression reads the device
    otherwise (its driver, a whole map, a key that is not a literal).
    """
    if mode not in (FUNCTION, SWEEP, SELECT, ROWS) or (mode != FUNCTION and not selector):
        raise ValueError(f"cannot generate {mode!r} code for this expression")
    if report_cost and mode != FUNCTION:
        raise ValueError("report_cost is for FUNCTION code")
    batch = mode != FUNCTION
    gen = _Gen(expression, checked, selector=selector, validate_regex=validate_regex, mode=mode)
    gen.metered = report_cost or _has_comprehension(root)
    gen.report_cost = report_cost
    gen.root = root
    base = 3 if batch else 1
    gen.depth = base
    body_expr = gen.gen(root, {})
    if gen.metered:
        gen.emit(f"if _cost > {COST_LIMIT}: raise _CostExceeded()")
    root_type = checked.type_of(root)
    if not gen.returned:
        gen.ret(f"_to_bool({body_expr})" if selector and root_type != BOOL else body_expr)
    body = gen.lines
    namespace = dict(BASE_NAMESPACE)
    namespace.update(gen.consts)
    namespace["_EMPTY_VARS"] = _EMPTY_VARS
    indent = "    " * base
    prologue = []
    if mode == ROWS:
        if re.search(r"\bdevice\b", "\n".join(body)):
            raise NotRowwise(expression)
    elif selector:
        # An attribute Kubernetes cannot convert fails every selector on the device.
        prologue.append(f"{indent}if device.error is not None: raise _RtErr(device.error)")
    if gen.positions and mode != ROWS:
        # Devices of one model share a shape: look the keys up again only when it changes.
        prologue += [f"{indent}_shape = device.shape", f"{indent}if _shape is not _last_shape:"]
        prologue.append(f"{indent}    _last_shape = _shape")
        prologue += [f"{indent}    {var} = _shape.get({key})" for key, var in gen.positions.items()]
    if gen.metered:
        prologue.append(f"{indent}_cost = {_static_cost(root)}")
    # Bind the helpers the code uses as parameter defaults: locals are cheaper than globals.
    text = (
        "\n".join(prologue + body)
        + " _RtErr _to_bool _CostExceeded"
        + (" _detach" if batch else "")
    )
    used = sorted(n for n in set(_NAME_RE.findall(text)) if n in namespace)
    params = "".join(f", {n}={n}" for n in used)
    if not batch:
        lines = [f"def _cel(device, _vars=_EMPTY_VARS{params}):", *prologue, *body]
    elif mode == ROWS:
        lines = [
            f"def _cel(rows, _vars=_EMPTY_VARS{params}):",
            "    _out = []",
            "    _ap = _out.append",
            "    for _row in rows:",
            "        try:",
            *prologue,
            *body,
            "        except _RtErr as _x:",
            "            _ap(_detach(_x))",
            "    return _out",
        ]
    elif mode == SWEEP:
        lines = [
            f"def _cel(devices, _vars=_EMPTY_VARS{params}):",
            "    _out = []",
            "    _ap = _out.append",
            "    _last_shape = None",
            "    for device in devices:",
            "        try:",
            *prologue,
            *body,
            "        except _RtErr as _x:",
            "            _ap(_detach(_x))",
            "    return _out",
        ]
    else:
        lines = [
            f"def _cel(devices, _vars=_EMPTY_VARS{params}):",
            "    _out = []",
            "    _errors = []",
            "    _ap = _out.append",
            "    _last_shape = None",
            "    for _i, device in enumerate(devices):",
            "        try:",
            *prologue,
            *body,
            "        except _RtErr as _x:",
            "            _errors.append((_i, _detach(_x)))",
            "    return _out, _errors",
        ]
    code = GeneratedCode("\n".join(lines) + "\n", namespace, gen.metered)
    code.row_keys = tuple(gen.row_keys)
    return code
