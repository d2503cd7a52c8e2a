"""Compile a selector once: parse, check, generate Python, and expose what the rest of dradiag needs.

``compile_selector`` is cached by (expression, options), so the same class or request
selector is compiled once per run. ``CompiledSelector`` evaluates one ``CelDevice``
(``matches``), breaks the top-level ``&&``/``||`` into clauses for near-miss explanations
(``evaluate_clauses``), names the attribute and capacity keys the expression reads
(``read_keys``) and memoizes on their values (``memoized``): a fleet of identical GPUs that
differ only in ``uuid`` costs one evaluation per distinct tuple of read values.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .checker import CheckOptions, CheckResult, check
from .codegen import generate
from .environment import CelDevice
from .errors import CelCompileError, CelError, CelRuntimeError
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
    parse,
)
from .runtime import MISSING
from .typesys import BOOL, DEVICE, T
from .unparse import unparse

__all__ = [
    "compile_selector",
    "CompiledSelector",
    "Clause",
    "compile_expression",
    "CompiledExpression",
    "ReadKey",
]

ReadKey = tuple[str, str | None, str | None]

STORED_EXPRESSIONS = "StoredExpressions"
NEW_EXPRESSIONS = "NewExpressions"


@dataclass(frozen=True, slots=True)
class Clause:
    """One operand of the top-level ``&&``/``||`` structure and what it evaluated to.

    ``operator`` is ``"&&"`` or ``"||"`` for an inner node (whose ``children`` are its
    operands) and None for a leaf; exactly one of ``value``/``error`` is set.
    """

    text: str
    value: Any = None
    error: str | None = None
    operator: str | None = None
    children: tuple[Clause, ...] = ()


def _compile_function(source: str, namespace: dict[str, Any], label: str) -> Callable[..., Any]:
    code = compile(source, f"<cel {label[:60]!r}>", "exec")
    ns = dict(namespace)
    exec(code, ns)  # noqa: S102 - our own generated source
    fn: Callable[..., Any] = ns["_cel"]
    return fn


_EMPTY_VARS: Mapping[str, Any] = {}


class CompiledSelector:
    """A compiled DRA device selector."""

    def __init__(
        self,
        expression: str,
        root: Node,
        checked: CheckResult,
        result_type: T,
        options: CheckOptions,
    ) -> None:
        self.expression = expression
        self._root = root
        self._checked = checked
        self.result_type = "bool" if result_type == BOOL else "dyn"
        self._options = options
        generated = generate(expression, root, checked, selector=True)
        self.source = generated.source
        self._fn = _compile_function(generated.source, generated.namespace, expression)
        # The generated function is the hot path itself: no wrapper frame per device.
        self.matches = self._fn  # type: ignore[method-assign]
        reads = _analyze_reads(root, checked)
        self.read_keys: frozenset[ReadKey] = frozenset(reads.keys)
        self.reads_driver = reads.driver
        self.reads_allow_multiple_allocations = reads.allow_multiple
        self._reads_whole_device = reads.whole

    def matches(self, device: CelDevice) -> bool:
        """True/False as kube-scheduler's ``DeviceMatches``; raise ``CelRuntimeError`` on an error."""
        result: bool = self._fn(device)
        return result

    def evaluate_clauses(self, device: CelDevice) -> Clause:
        """Evaluate each operand of the top-level ``&&``/``||`` tree separately (no short-circuit)."""
        return self._clause(self._root, device)

    def _clause(self, node: Node, device: CelDevice) -> Clause:
        text = unparse(node)
        if isinstance(node, Call) and node.function in ("_&&_", "_||_") and node.target is None:
            op = "&&" if node.function == "_&&_" else "||"
            children = tuple(self._clause(c, device) for c in _flatten(node, node.function))
            value, error = self._eval_node(node, device)
            return Clause(text, value, error, op, children)
        value, error = self._eval_node(node, device)
        return Clause(text, value, error)

    def _eval_node(self, node: Node, device: CelDevice) -> tuple[Any, str | None]:
        generated = generate(self.expression, node, self._checked, selector=False)
        fn = _compile_function(generated.source, generated.namespace, self.expression)
        try:
            if device.error is not None:
                raise CelRuntimeError(device.error)
            return fn(device, _EMPTY_VARS), None
        except CelError as exc:
            return None, str(exc)

    def memoized(self) -> Callable[[CelDevice], bool]:
        """A ``device -> bool`` that evaluates once per distinct tuple of the values read.

        The key extraction is generated source too, so a cache hit costs about as much as
        a cheap evaluation; ``.cache`` on the returned function exposes the cache.
        """
        cache: dict[Any, Any] = {}
        whole = self._reads_whole_device or any(d is None or n is None for _, d, n in self.read_keys)
        lines = [
            "def _memo(device, _cache=_cache, _fn=_fn, _M=_M, _RtErr=_RtErr, _tag=_tag, _fp=_fp):",
            "    if device.error is not None: raise _RtErr(device.error)",
        ]
        if whole:
            lines.append("    _key = _fp(device)")
        else:
            parts: list[str] = []
            if self.reads_driver:
                parts.append("device.driver")
            if self.reads_allow_multiple_allocations:
                parts.append("device.allow_multiple_allocations")
            keys = sorted(self.read_keys, key=lambda k: (k[0], k[1] or "", k[2] or ""))
            for i, (kind, domain, name) in enumerate(keys):
                field = "attributes" if kind == "attribute" else "capacity"
                lines.append(f"    _v{i} = device.{field}[{domain!r}].get({name!r}, _M)")
                # 1, 1.0 and True hash alike in Python; CEL tells them apart.
                parts.append(f"(_v{i} if _v{i}.__class__ is not tuple else _tag(_v{i}))")
                parts.append(f"_v{i}.__class__")
            lines.append(f"    _key = ({', '.join(parts)}{',' if len(parts) == 1 else ''})")
        lines += [
            "    _hit = _cache.get(_key, _M)",
            "    if _hit is _M:",
            "        try:",
            "            _hit = _fn(device)",
            "        except _RtErr as _x:",
            "            _hit = _x",
            "        _cache[_key] = _hit",
            "    if _hit is True or _hit is False: return _hit",
            "    raise _hit",
        ]
        namespace: dict[str, Any] = {
            "_cache": cache,
            "_fn": self._fn,
            "_M": MISSING,
            "_RtErr": CelRuntimeError,
            "_tag": _tagged,
            "_fp": _fingerprint,
        }
        exec(compile("\n".join(lines) + "\n", f"<cel memo {self.expression[:60]!r}>", "exec"), namespace)  # noqa: S102
        evaluate: Callable[[CelDevice], bool] = namespace["_memo"]
        evaluate.cache = cache  # type: ignore[attr-defined]
        return evaluate

    def __repr__(self) -> str:
        return f"CompiledSelector({self.expression!r})"


def _tagged(value: Any) -> Any:
    # 1, 1.0 and True hash alike in Python; CEL tells them apart.
    if value.__class__ is tuple:
        return (tuple, tuple((v.__class__, v) for v in value))
    return (value.__class__, value)


def _fingerprint(device: CelDevice) -> Any:
    return (
        device.driver,
        device.allow_multiple_allocations,
        tuple(sorted((d, tuple(sorted((k, _tagged(v)) for k, v in m.items()))) for d, m in device.attributes.items())),
        tuple(sorted((d, tuple(sorted((k, _tagged(v)) for k, v in m.items()))) for d, m in device.capacity.items())),
    )


def _flatten(node: Node, fn: str) -> list[Node]:
    if isinstance(node, Call) and node.function == fn and node.target is None:
        return [t for a in node.args for t in _flatten(a, fn)]
    return [node]


# --------------------------------------------------------------------------------------
# Which attribute/capacity keys an expression reads
# --------------------------------------------------------------------------------------
@dataclass
class _Reads:
    keys: set[ReadKey]
    driver: bool = False
    allow_multiple: bool = False
    whole: bool = False


def _analyze_reads(root: Node, checked: CheckResult) -> _Reads:
    reads = _Reads(set())
    kinds = {"attributes": "attribute", "capacity": "capacity"}

    def use(desc: tuple[Any, ...] | None) -> None:
        if desc is None:
            return
        tag = desc[0]
        if tag == "device":
            reads.whole = True
        elif tag == "domains":
            reads.keys.add((desc[1], None, None))
        elif tag == "domain":
            reads.keys.add((desc[1], desc[2], None))
        elif tag == "value":
            reads.keys.add((desc[1], desc[2], desc[3]))

    def const_str(node: Node) -> str | None:
        if isinstance(node, Literal) and node.kind == "string":
            return str(node.value)
        return None

    def visit_all(nodes: Iterable[Node], env: dict[str, Any]) -> None:
        for n in nodes:
            use(path(n, env))

    def path(node: Node, env: dict[str, Any]) -> tuple[Any, ...] | None:
        if isinstance(node, Ident):
            if node.name in env:
                return env[node.name]  # type: ignore[no-any-return]
            if node.name == "device" and checked.type_of(node) == DEVICE:
                return ("device",)
            return None
        if isinstance(node, Select):
            d = path(node.operand, env)
            if d is None:
                return None
            if d[0] == "device":
                if node.field == "driver":
                    reads.driver = True
                    return None
                if node.field == "allowMultipleAllocations":
                    reads.allow_multiple = True
                    return None
                if node.field in kinds and not node.test_only and not node.optional:
                    return ("domains", kinds[node.field])
                return None
            if d[0] == "domains":
                if node.test_only:
                    reads.keys.add((d[1], node.field, None))
                    return None
                desc = ("domain", d[1], node.field)
                if node.optional:
                    use(desc)
                    return None
                return desc
            if d[0] == "domain":
                reads.keys.add((d[1], d[2], node.field))
                if node.test_only or node.optional:
                    return None
                return ("value", d[1], d[2], node.field)
            use(d)
            return None
        if isinstance(node, Index):
            d = path(node.operand, env)
            key = const_str(node.index)
            if key is None:
                use(path(node.index, env))
            if d is None:
                return None
            if d[0] == "domains" and not node.optional:
                return ("domain", d[1], key)
            if d[0] == "domain":
                reads.keys.add((d[1], d[2], key))
                return None if node.optional else ("value", d[1], d[2], key)
            use(d)
            return None
        if isinstance(node, Bind):
            init = path(node.init, env)
            return path(node.body, {**env, node.var: init})
        if isinstance(node, Call) and node.function == "@in" and node.target is None:
            lhs, rhs = node.args
            d = path(rhs, env)
            key = const_str(lhs)
            if key is None:
                use(path(lhs, env))
            if d is not None and d[0] == "domain":
                reads.keys.add((d[1], d[2], key))
            elif d is not None and d[0] == "domains":
                reads.keys.add((d[1], key, None))
            else:
                use(d)
            return None
        if isinstance(node, Call):
            visit_all(([node.target] if node.target is not None else []) + list(node.args), env)
            return None
        if isinstance(node, CreateList):
            visit_all(node.elements, env)
            return None
        if isinstance(node, CreateMap):
            for e in node.entries:
                visit_all([e.key, e.value], env)
            return None
        if isinstance(node, Comprehension):
            use(path(node.range, env))
            inner = {k: v for k, v in env.items() if k not in (node.var, node.var2)}
            visit_all(node.args, inner)
            return None
        if isinstance(node, OptMap):
            use(path(node.target, env))
            visit_all([node.body], {k: v for k, v in env.items() if k != node.var})
            return None
        if isinstance(node, CreateStruct):
            visit_all([v for _, v, _ in node.fields], env)
        return None

    use(path(root, {}))
    return reads


# --------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=4096)
def _compile_selector_cached(
    expression: str,
    list_type_attributes: bool,
    consumable_capacity: bool,
    environment: str,
) -> CompiledSelector:
    if environment not in (STORED_EXPRESSIONS, NEW_EXPRESSIONS):
        raise ValueError(f"unknown CEL environment {environment!r}")
    new = environment == NEW_EXPRESSIONS
    options = CheckOptions(
        # StoredExpressions ignores feature gates (k8s-dra-semantics.md §1.1).
        list_type_attributes=list_type_attributes or not new,
        consumable_capacity=consumable_capacity or not new,
    )
    root = parse(expression)
    result_type, checked = check(expression, root, options)
    if not (result_type == BOOL or result_type.is_dyn):
        raise CelCompileError(
            expression, None, f"must evaluate to bool or the unknown type, not {result_type}"
        )
    return CompiledSelector(expression, root, checked, result_type, options)


def compile_selector(
    expression: str,
    *,
    list_type_attributes: bool = True,
    consumable_capacity: bool = True,
    environment: str = STORED_EXPRESSIONS,
) -> CompiledSelector:
    """Compile a DRA ``CELDeviceSelector`` expression; raise ``CelCompileError`` when cel-go would.

    ``environment`` is ``"StoredExpressions"`` (what kube-scheduler uses; every feature) or
    ``"NewExpressions"`` (apiserver validation of new objects), where the two feature gates
    ``list_type_attributes`` (DRAListTypeAttributes) and ``consumable_capacity``
    (DRAConsumableCapacity) decide whether ``includes``, comprehensions over attribute
    values and ``device.allowMultipleAllocations`` are declared.
    """
    return _compile_selector_cached(expression, list_type_attributes, consumable_capacity, environment)


class CompiledExpression:
    """A general CEL expression over named variables (used by the conformance suite and tools)."""

    def __init__(self, expression: str, source: str, fn: Callable[..., Any], result_type: T) -> None:
        self.expression = expression
        self.source = source
        self._fn = fn
        self.result_type = result_type

    def evaluate(self, variables: Mapping[str, Any] | None = None, device: CelDevice | None = None) -> Any:
        return self._fn(device, variables or _EMPTY_VARS)


def compile_expression(
    expression: str,
    *,
    variables: Mapping[str, T] | None = None,
    check_types: bool = True,
    macros: bool = True,
    kubernetes_validators: bool = False,
) -> CompiledExpression:
    """Compile any CEL expression over ``variables`` (name -> static type); no result-type rule."""
    declared = dict(variables or {})
    options = CheckOptions(
        variables=tuple(declared.items()),
        kubernetes_validators=kubernetes_validators,
        strict=check_types,
    )
    root = parse(expression, macros=macros)
    result_type, checked = check(expression, root, options)
    generated = generate(expression, root, checked, selector=False, validate_regex=kubernetes_validators)
    fn = _compile_function(generated.source, generated.namespace, expression)
    return CompiledExpression(expression, generated.source, fn, result_type)
