"""Static type checking: the compile errors cel-go raises, and the types the code generator specialises on.

Types flow bottom-up; ``dyn`` (attribute values) matches every overload, so most type errors
on device data are runtime errors, while capacity values are statically ``Quantity``:
``device.capacity[d].memory > quantity("1Gi")`` fails here, as in the apiserver
(k8s-dra-semantics.md §7 item 4). Overload resolution follows cel-go: a call is an error
when no declared overload accepts the argument types; its type is the common result type
of the overloads that do, or ``dyn``.

In lenient mode (``strict=False``, the conformance suite's ``disable_check``) no error is
raised; unresolvable nodes are typed ``dyn`` and fail at runtime instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .errors import CelCompileError
from .functions import DECLARATIONS, NAMESPACED, Overload
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
from .runtime import TYPE_IDENTS
from .typesys import (
    ANY,
    BOOL,
    DEVICE,
    DYN,
    INT,
    QUANTITY,
    STRING,
    T,
    list_of,
    map_of,
    optional_of,
)

__all__ = ["CheckOptions", "check", "CheckResult"]

_LITERAL_TYPES = {
    "int": INT,
    "uint": T("uint"),
    "double": T("double"),
    "string": STRING,
    "bytes": T("bytes"),
    "bool": BOOL,
    "null": T("null_type"),
}


@dataclass(frozen=True)
class CheckOptions:
    """The environment the expression is checked in."""

    variables: tuple[tuple[str, T], ...] = (("device", DEVICE),)
    # NewExpressions without DRAListTypeAttributes types attribute values as `any` (not a
    # comprehension range) and does not declare `includes`.
    list_type_attributes: bool = True
    consumable_capacity: bool = True
    # HomogeneousAggregateLiterals and the regex-literal validator of the Kubernetes base env.
    kubernetes_validators: bool = True
    strict: bool = True


@dataclass
class CheckResult:
    types: dict[int, T] = field(default_factory=dict)
    namespaced_calls: set[int] = field(default_factory=set)

    def type_of(self, node: Node) -> T:
        return self.types.get(id(node), DYN)


class _Checker:
    def __init__(self, expression: str, options: CheckOptions) -> None:
        self.expression = expression
        self.options = options
        self.variables = dict(options.variables)
        self.result = CheckResult()
        self.exempt: set[int] = set()
        attr_value = DYN if options.list_type_attributes else ANY
        self.device_fields = {
            "driver": STRING,
            "attributes": map_of(STRING, map_of(STRING, attr_value)),
            "capacity": map_of(STRING, map_of(STRING, QUANTITY)),
        }
        if options.consumable_capacity:
            self.device_fields["allowMultipleAllocations"] = BOOL

    def fail(self, pos: int, msg: str) -> T:
        if self.options.strict:
            raise CelCompileError(self.expression, pos, msg)
        return DYN

    def check(self, node: Node, scope: dict[str, T]) -> T:
        t = self._check(node, scope)
        self.result.types[id(node)] = t
        return t

    # ------------------------------------------------------------------------------------
    def _check(self, node: Node, scope: dict[str, T]) -> T:
        if isinstance(node, Literal):
            return _LITERAL_TYPES[node.kind]
        if isinstance(node, Ident):
            return self._ident(node, scope)
        if isinstance(node, Select):
            return self._select(node, scope)
        if isinstance(node, Index):
            return self._index(node, scope)
        if isinstance(node, Call):
            return self._call(node, scope)
        if isinstance(node, CreateList):
            return self._list(node, scope)
        if isinstance(node, CreateMap):
            return self._map(node, scope)
        if isinstance(node, Comprehension):
            return self._comprehension(node, scope)
        if isinstance(node, Bind):
            init = self.check(node.init, scope)
            return self.check(node.body, {**scope, node.var: init})
        if isinstance(node, OptMap):
            target = self.check(node.target, scope)
            inner = target.params[0] if target.kind == "optional" else DYN
            body = self.check(node.body, {**scope, node.var: inner})
            if node.flat:
                return body if body.kind == "optional" else optional_of(DYN)
            return optional_of(body)
        if isinstance(node, CreateStruct):
            for _, value, _opt in node.fields:
                self.check(value, scope)
            return self.fail(
                node.pos, f"undeclared reference to '{node.type_name}' (in container '')"
            )
        raise AssertionError(f"unknown node {node!r}")

    def _ident(self, node: Ident, scope: dict[str, T]) -> T:
        if node.name in scope:
            return scope[node.name]
        if node.name in self.variables:
            return self.variables[node.name]
        if node.name in TYPE_IDENTS:
            return T("type", (T(node.name),))
        return self.fail(node.pos, f"undeclared reference to '{node.name}' (in container '')")

    def _select(self, node: Select, scope: dict[str, T]) -> T:
        operand = self.check(node.operand, scope)
        if node.optional:
            if operand.kind == "optional":
                operand = operand.params[0]
            field_type = self._field_type(node, operand)
            return optional_of(field_type)
        if operand.kind == "optional":
            inner = self._field_type(node, operand.params[0])
            return BOOL if node.test_only else optional_of(inner)
        field_type = self._field_type(node, operand)
        return BOOL if node.test_only else field_type

    def _field_type(self, node: Select, operand: T) -> T:
        if operand == DEVICE:
            if node.field in self.device_fields:
                return self.device_fields[node.field]
            return self.fail(node.pos, f"undefined field '{node.field}'")
        if operand.kind == "map":
            if not operand.params[0].is_dyn and operand.params[0] != STRING:
                return self.fail(node.pos, f"type '{operand}' does not support field selection")
            return operand.params[1]
        if operand.is_dyn or operand.is_param:
            return DYN
        return self.fail(node.pos, f"type '{operand}' does not support field selection")

    def _index(self, node: Index, scope: dict[str, T]) -> T:
        operand = self.check(node.operand, scope)
        key = self.check(node.index, scope)
        wrap = node.optional or operand.kind == "optional"
        if operand.kind == "optional":
            operand = operand.params[0]
        if operand.kind == "list":
            if not (key.is_dyn or key.kind in ("int", "uint")):
                return self._no_overload(node.pos, "_[_]", [operand, key], False)
            elem = operand.params[0]
        elif operand.kind == "map":
            if not _assignable(operand.params[0], key, {}):
                return self._no_overload(node.pos, "_[_]", [operand, key], False)
            elem = operand.params[1]
        elif operand.is_dyn or operand.is_param:
            elem = DYN
        else:
            return self._no_overload(node.pos, "_[_]", [operand, key], False)
        return optional_of(elem) if wrap else elem

    def _no_overload(self, pos: int, name: str, args: list[T], receiver: bool) -> T:
        if receiver:
            sig = f"{args[0]}.({', '.join(str(a) for a in args[1:])})"
        else:
            sig = f"({', '.join(str(a) for a in args)})"
        return self.fail(pos, f"found no matching overload for '{name}' applied to '{sig}'")

    def _call(self, node: Call, scope: dict[str, T]) -> T:
        name = node.function
        # `sets.contains(a, b)`: a namespaced global function, not a method on `sets`.
        if (
            isinstance(node.target, Ident)
            and node.target.name in NAMESPACED
            and node.target.name not in scope
            and node.target.name not in self.variables
            and f"{node.target.name}.{name}" in DECLARATIONS
        ):
            name = f"{node.target.name}.{name}"
            node.function = name
            node.target = None
        if name in ("_&&_", "_||_"):
            types = [self.check(a, scope) for a in node.args]
            for t in types:
                if not (t.is_dyn or t == BOOL):
                    return self._no_overload(node.pos, name, types, False)
            return BOOL
        if name == "_?_:_":
            cond, a, b = (self.check(x, scope) for x in node.args)
            if not (cond.is_dyn or cond == BOOL):
                return self._no_overload(node.pos, name, [cond, a, b], False)
            if a == b:
                return a
            if a.is_dyn or b.is_dyn:
                return DYN
            if _assignable(a, b, {}) and _assignable(b, a, {}):
                return _join(a, b)
            return self._no_overload(node.pos, name, [cond, a, b], False)
        if name == "format":
            # cel-go exempts format()'s argument list from HomogeneousAggregateLiterals.
            self.exempt.update(id(a) for a in node.args)
        arg_types = [self.check(a, scope) for a in node.args]
        if node.target is not None:
            arg_types.insert(0, self.check(node.target, scope))
        receiver = node.target is not None
        overloads = DECLARATIONS.get(name)
        if name == "includes" and not self.options.list_type_attributes:
            overloads = None
        if overloads is None:
            return self.fail(node.pos, f"undeclared reference to '{name}' (in container '')")
        candidates = [
            o for o in overloads if o.receiver == receiver and len(o.params) == len(arg_types)
        ]
        if not candidates:
            if not any(o.receiver == receiver for o in overloads):
                return self.fail(node.pos, f"undeclared reference to '{name}' (in container '')")
            return self._no_overload(node.pos, name, arg_types, receiver)
        results: list[T] = []
        for o in candidates:
            r = _match(o, arg_types)
            if r is not None:
                results.append(r)
        if not results:
            return self._no_overload(node.pos, name, arg_types, receiver)
        if name == "_==_" or name == "_!=_" or name == "@in":
            return BOOL
        first = results[0]
        if all(r == first for r in results):
            return first
        return DYN

    def _list(self, node: CreateList, scope: dict[str, T]) -> T:
        types = []
        for i, e in enumerate(node.elements):
            t = self.check(e, scope)
            if i in node.optional_indices:
                t = t.params[0] if t.kind == "optional" else DYN
            types.append(t)
        if id(node) in self.exempt:
            return list_of(DYN)
        return list_of(self._homogeneous(types, [e.pos for e in node.elements]))

    def _map(self, node: CreateMap, scope: dict[str, T]) -> T:
        keys, values = [], []
        for entry in node.entries:
            k = self.check(entry.key, scope)
            v = self.check(entry.value, scope)
            if entry.optional:
                v = v.params[0] if v.kind == "optional" else DYN
            if k.kind not in ("int", "uint", "bool", "string") and not k.is_dyn:
                self.fail(entry.key.pos, f"unsupported map key type: {k}")
            keys.append(k)
            values.append(v)
        key_type = self._homogeneous(keys, [e.key.pos for e in node.entries])
        value_type = self._homogeneous(values, [e.value.pos for e in node.entries])
        return map_of(key_type, value_type)

    def _homogeneous(self, types: list[T], positions: list[int]) -> T:
        if not types:
            return DYN
        first = types[0]
        for t, pos in zip(types[1:], positions[1:], strict=True):
            if t == first:
                continue
            if self.options.kubernetes_validators and not t.is_dyn and not first.is_dyn:
                # HomogeneousAggregateLiterals (Kubernetes base environment).
                return self.fail(pos, f"expected type '{first}' but found '{t}'")
            return DYN
        return first

    def _comprehension(self, node: Comprehension, scope: dict[str, T]) -> T:
        range_type = self.check(node.range, scope)
        if range_type.kind == "list":
            v1, v2 = (INT, range_type.params[0]) if node.var2 else (range_type.params[0], DYN)
        elif range_type.kind == "map":
            v1, v2 = range_type.params[0], range_type.params[1]
        elif range_type.kind == "dyn" or range_type.is_param or range_type.kind == "error":
            v1, v2 = DYN, DYN
        else:
            self.fail(
                node.range.pos,
                f"expression of type '{range_type}' cannot be the range of a comprehension "
                "(must be list, map, or dynamic)",
            )
            v1, v2 = DYN, DYN
        inner = {**scope, node.var: v1}
        if node.var2 is not None:
            inner[node.var2] = v2
        arg_types = [self.check(a, inner) for a in node.args]
        kind = node.kind
        if kind in ("all", "exists", "exists_one", "filter"):
            t = arg_types[0]
            if not (t.is_dyn or t == BOOL):
                op = "_&&_" if kind == "all" else "_||_" if kind == "exists" else "_?_:_"
                self._no_overload(node.args[0].pos, op, [BOOL, t], False)
            if kind == "filter":
                return range_type if range_type.kind == "list" else list_of(DYN)
            return BOOL
        if len(arg_types) == 2:  # with a filter
            f = arg_types[0]
            if not (f.is_dyn or f == BOOL):
                self._no_overload(node.args[0].pos, "_?_:_", [f, DYN, DYN], False)
        out = arg_types[-1]
        if kind in ("map", "transformList"):
            return list_of(out)
        if kind == "transformMap":
            return map_of(v1 if range_type.kind == "map" else INT, out)
        return out if out.kind == "map" else map_of(DYN, DYN)


def _substitute(t: T, bindings: dict[str, T]) -> T:
    if t.is_param:
        return bindings.get(t.kind, DYN)
    if t.params:
        return T(t.kind, tuple(_substitute(p, bindings) for p in t.params))
    return t


def _assignable(param: T, arg: T, bindings: dict[str, T]) -> bool:
    if param.is_param:
        bound = bindings.get(param.kind)
        if bound is None:
            bindings[param.kind] = arg
            return True
        if bound.is_dyn:
            return True
        if arg.is_dyn:
            return True
        if _assignable(bound, arg, {}) and _assignable(arg, bound, {}):
            bindings[param.kind] = _join(bound, arg)
            return True
        return False
    if param.is_dyn or arg.is_dyn or arg.is_param:
        return True
    if param.kind == "type" and arg.kind == "type":
        return True
    if param.kind != arg.kind or len(param.params) != len(arg.params):
        return False
    return all(_assignable(p, a, bindings) for p, a in zip(param.params, arg.params, strict=True))


def _join(a: T, b: T) -> T:
    """The more specific of two mutually assignable types (dyn loses)."""
    if a.is_dyn:
        return b
    if b.is_dyn:
        return a
    if a.params and b.params and a.kind == b.kind:
        return T(a.kind, tuple(_join(x, y) for x, y in zip(a.params, b.params, strict=True)))
    return a


def _match(overload: Overload, args: list[T]) -> T | None:
    bindings: dict[str, T] = {}
    for p, a in zip(overload.params, args, strict=True):
        if not _assignable(p, a, bindings):
            return None
    return _substitute(overload.result, bindings)


def check(expression: str, root: Node, options: CheckOptions) -> tuple[T, CheckResult]:
    """Type-check ``root``; return its type and the per-node types."""
    checker = _Checker(expression, options)
    t = checker.check(root, {})
    return t, checker.result
