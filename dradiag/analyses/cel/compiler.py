"""Compile a selector once: parse, check, generate Python, and expose what the rest of dradiag needs.

``compile_selector`` is cached by (expression, options), so the same class or request
selector is compiled once per run. ``CompiledSelector`` evaluates one ``CelDevice``
(``matches``) or a sequence of them in one generated loop (``sweep``, ``select``), breaks the
top-level ``&&``/``||`` into clauses for near-miss explanations (``evaluate_clauses``), names
the attribute and capacity keys the expression reads (``read_keys``) and memoizes on their
values (``memoized``, ``sweep(..., memoize=True)``): a fleet of identical GPUs that differ
only in ``uuid`` costs one evaluation per distinct tuple of read values.

Memoization classifies each device once per set of read keys: the tuple of values it reads
is interned in that key set's table (``_KeySet``) and the resulting small integer is kept on
the device (``CelDevice.memo_keyset``/``memo_class``), so a later sweep with any selector
reading the same keys costs one slot read and one dict lookup per device, whatever the
values are.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .checker import CheckOptions, CheckResult, check
from .codegen import ROWS, SELECT, SWEEP, NotRowwise, detach, generate
from .environment import CelDevice, value_key
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
    recursion_headroom,
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
    "MAX_SELECTOR_BYTES",
]

ReadKey = tuple[str, str | None, str | None]

# The API server's limit on a DRA selector: CELSelectorExpressionMaxLength = 10 * 1024
# (kubernetes staging/src/k8s.io/api/resource/v1/types.go). validateCELSelector
# (pkg/apis/resource/validation/validation.go) rejects a longer expression before compiling
# it, with field.TooLong's text.
MAX_SELECTOR_BYTES = 10 * 1024
SELECTOR_TOO_LONG = f"Too long: may not be more than {MAX_SELECTOR_BYTES} bytes"

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
    try:
        code = compile(source, f"<cel {label[:60]!r}>", "exec")
    except (SyntaxError, RecursionError, MemoryError) as exc:
        # Python's compiler bounds what cel-go does not: at most 20 nested blocks (each
        # comprehension or error-absorbing &&/|| level opens one) and 100 indentation levels.
        reason = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        raise CelCompileError(
            label, None, f"expression too complex for dradiag's CEL engine (Python: {reason})"
        ) from None
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
        self._sweep_fn: Callable[..., Any] | None = None
        self._select_fn: Callable[..., Any] | None = None
        self._rows: tuple[Callable[..., Any], tuple[tuple[str, str, str], ...]] | None | bool = (
            False
        )
        self._memo_results: tuple[_KeySet, dict[int, Any]] | None = None

    def matches(self, device: CelDevice) -> bool:
        """True/False as kube-scheduler's ``DeviceMatches``; raise ``CelRuntimeError`` on an error."""
        result: bool = self._fn(device)
        return result

    # Batch evaluation -------------------------------------------------------------------
    def _batch(self, mode: str) -> Callable[..., Any]:
        with recursion_headroom():
            generated = generate(
                self.expression, self._root, self._checked, selector=True, mode=mode
            )
            return _compile_function(generated.source, generated.namespace, self.expression)

    def sweep(
        self, devices: Sequence[CelDevice], *, memoize: bool = False
    ) -> list[bool | CelRuntimeError]:
        """``matches`` on every device, in one generated loop: True, False or the ``CelRuntimeError``.

        Result ``i`` is exactly what ``matches(devices[i])`` returns or raises (a runtime error
        stays an error, never a non-match; same message, same cost limit). Any other exception
        propagates, as from ``matches``. With ``memoize``, devices with the same values for
        every key the expression reads share one evaluation (see ``memoized``); results are
        kept on the selector for later sweeps.
        """
        if memoize:
            return self._memo_sweep(devices)
        fn = self._sweep_fn
        if fn is None:
            fn = self._sweep_fn = self._batch(SWEEP)
        result: list[bool | CelRuntimeError] = fn(devices)
        return result

    def rows(self) -> tuple[Callable[..., Any], tuple[tuple[str, str, str], ...]] | None:
        """``(sweep, keys)`` for devices kept as columns, or None when the expression cannot.

        ``sweep(rows)`` gives ``sweep``'s result for each row: a tuple whose position ``i``
        holds the CEL value of ``keys[i]`` (``(kind, domain, name)``, as in ``read_keys``)
        for one device, or ``runtime.MISSING`` where the device publishes none. Rows are
        for devices that convert (``CelDevice.error`` None); an error is the caller's.
        None when the expression reads more than values at literal keys (the driver, a
        whole map, ``device`` itself).
        """
        if self._rows is False:
            self._rows = None
            if not self._reads_whole_device and not self.reads_driver:
                by_key = {
                    value_key(kind, domain, name): (kind, domain, name)
                    for kind, domain, name in self.read_keys
                    if domain is not None and name is not None
                }
                try:
                    with recursion_headroom():
                        generated = generate(
                            self.expression, self._root, self._checked, selector=True, mode=ROWS
                        )
                        fn = _compile_function(
                            generated.source, generated.namespace, self.expression
                        )
                except NotRowwise:
                    pass
                else:
                    if all(key in by_key for key in generated.row_keys):
                        self._rows = (fn, tuple(by_key[key] for key in generated.row_keys))
        return self._rows  # type: ignore[return-value]

    def select(
        self, devices: Sequence[CelDevice], *, memoize: bool = False
    ) -> tuple[list[int], list[tuple[int, CelRuntimeError]]]:
        """The indexes of the devices that match, and ``(index, error)`` for those that fail.

        The same outcome per device as ``sweep``/``matches``; indexes are positions in
        ``devices``, in order.
        """
        if memoize:
            matched: list[int] = []
            errors: list[tuple[int, CelRuntimeError]] = []
            for i, r in enumerate(self._memo_sweep(devices)):
                if r is True:
                    matched.append(i)
                elif r is not False:
                    errors.append((i, r))
            return matched, errors
        fn = self._select_fn
        if fn is None:
            fn = self._select_fn = self._batch(SELECT)
        result: tuple[list[int], list[tuple[int, CelRuntimeError]]] = fn(devices)
        return result

    def _memo_spec(self) -> tuple[Any, ...]:
        if self._reads_whole_device or any(d is None or n is None for _, d, n in self.read_keys):
            return ("whole",)
        keys = sorted(self.read_keys, key=lambda k: (k[0], k[1] or "", k[2] or ""))
        return (self.reads_driver, self.reads_allow_multiple_allocations, tuple(keys))

    def _memo_sweep(self, devices: Sequence[CelDevice]) -> list[bool | CelRuntimeError]:
        keyset = _keyset(self._memo_spec())
        state = self._memo_results
        if state is None or state[0] is not keyset:
            state = self._memo_results = (keyset, {})
        results = state[1]
        classify = keyset.classify
        fn = self._fn
        missing = MISSING
        out: list[bool | CelRuntimeError] = []
        append = out.append
        for device in devices:
            if device.error is not None:
                append(CelRuntimeError(device.error))
                continue
            c = device.memo_class if device.memo_keyset is keyset else classify(device)
            r = results.get(c, missing)
            if r is missing:
                try:
                    r = fn(device)
                except CelRuntimeError as exc:
                    r = detach(exc)
                results[c] = r
            append(r)
        return out

    def metered_cost(self, device: CelDevice) -> int:
        """The cost one evaluation on ``device`` is charged against the 1,000,000 limit.

        Generated on demand (metering every expression); a runtime error propagates.
        """
        with recursion_headroom():
            generated = generate(
                self.expression, self._root, self._checked, selector=True, report_cost=True
            )
            fn = _compile_function(generated.source, generated.namespace, self.expression)
        cost: int = fn(device)[1]
        return cost

    def evaluate_clauses(self, device: CelDevice) -> Clause:
        """Evaluate each operand of the top-level ``&&``/``||`` tree separately (no short-circuit)."""
        with recursion_headroom():
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

        A device is classified once per set of read keys (see the module docstring), so a
        cache hit costs a slot read and a dict lookup; ``.cache`` on the returned function
        maps each distinct tuple's class to its result (its length is the number of
        evaluations made). A runtime error is cached and raised again for the same values.
        """
        keyset = _keyset(self._memo_spec())
        cache: dict[int, Any] = {}

        def evaluate(
            device: CelDevice,
            _ks: _KeySet = keyset,
            _cache: dict[int, Any] = cache,
            _fn: Callable[[CelDevice], bool] = self._fn,
            _classify: Callable[[CelDevice], int] = keyset.classify,
            _M: Any = MISSING,
            _RtErr: type[CelRuntimeError] = CelRuntimeError,
        ) -> bool:
            if device.error is not None:
                raise _RtErr(device.error)
            c = device.memo_class if device.memo_keyset is _ks else _classify(device)
            hit = _cache.get(c, _M)
            if hit is _M:
                try:
                    hit = _fn(device)
                except _RtErr as exc:
                    hit = detach(exc)
                _cache[c] = hit
            if hit is True or hit is False:
                return hit  # type: ignore[no-any-return]
            raise hit.with_traceback(None)

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
        tuple(
            sorted(
                (d, tuple(sorted((k, _tagged(v)) for k, v in m.items())))
                for d, m in device.attributes.items()
            )
        ),
        tuple(
            sorted(
                (d, tuple(sorted((k, _tagged(v)) for k, v in m.items())))
                for d, m in device.capacity.items()
            )
        ),
    )


class _KeySet:
    """Interns the tuples of values one set of read keys yields: device -> small integer.

    ``classify(device)`` (generated) computes the tuple, looks it up in ``table`` and
    records the class on the device, keeping the class of the key set used before in
    ``memo_more``. The object itself is the token a device holds in ``memo_keyset``.
    """

    __slots__ = ("spec", "table", "classify")

    def __init__(self, spec: tuple[Any, ...]) -> None:
        self.spec = spec
        self.table: dict[Any, int] = {}
        self.classify: Callable[[CelDevice], int] = _classifier(self, spec)


# A key set is replaced (devices then classify again) once it holds this many tuples.
_KEYSET_MAX = 1 << 16
_KEYSETS: dict[tuple[Any, ...], _KeySet] = {}


def _keyset(spec: tuple[Any, ...]) -> _KeySet:
    keyset = _KEYSETS.get(spec)
    if keyset is None or len(keyset.table) > _KEYSET_MAX:
        if len(_KEYSETS) > 4096:
            _KEYSETS.clear()
        keyset = _KEYSETS[spec] = _KeySet(spec)
    return keyset


def _classifier(keyset: _KeySet, spec: tuple[Any, ...]) -> Callable[[CelDevice], int]:
    lines = [
        "def _classify(device, _ks=_ks, _table=_table, _M=_M, _tag=_tag, _fp=_fp):",
        "    _more = device.memo_more",
        "    if _more is not None and _ks in _more:",
        "        _c = _more.pop(_ks)",
        "    else:",
    ]
    if spec == ("whole",):
        lines.append("        _key = _fp(device)")
    else:
        reads_driver, reads_allow_multiple, keys = spec
        parts: list[str] = []
        if reads_driver:
            parts.append("device.driver")
        if reads_allow_multiple:
            parts.append("device.allow_multiple_allocations")
        lines.append("        _shape = device.shape")
        lines.append("        _vals = device.vals")
        for i, (kind, domain, name) in enumerate(keys):
            lines.append(f"        _v{i} = _shape.get({value_key(kind, domain, name)!r})")
            lines.append(f"        _v{i} = _M if _v{i} is None else _vals[_v{i}]")
            # 1, 1.0 and True hash alike in Python; CEL tells them apart.
            parts.append(f"(_v{i} if _v{i}.__class__ is not tuple else _tag(_v{i}))")
            parts.append(f"_v{i}.__class__")
        lines.append(f"        _key = ({', '.join(parts)}{',' if len(parts) == 1 else ''})")
    lines += [
        "        _c = _table.get(_key)",
        "        if _c is None:",
        "            _c = _table[_key] = len(_table)",
        "    _old = device.memo_keyset",
        "    if _old is not None and _old is not _ks:",
        "        if _more is None:",
        "            _more = device.memo_more = {}",
        "        _more[_old] = device.memo_class",
        "    device.memo_keyset = _ks",
        "    device.memo_class = _c",
        "    return _c",
    ]
    namespace: dict[str, Any] = {
        "_ks": keyset,
        "_table": keyset.table,
        "_M": MISSING,
        "_tag": _tagged,
        "_fp": _fingerprint,
    }
    source = "\n".join(lines) + "\n"
    exec(compile(source, f"<cel memo key {spec!r:.60}>", "exec"), namespace)  # noqa: S102 - our own generated source
    classify: Callable[[CelDevice], int] = namespace["_classify"]
    return classify


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
    if len(expression.encode("utf-8")) > MAX_SELECTOR_BYTES:
        raise CelCompileError(expression, None, SELECTOR_TOO_LONG)
    new = environment == NEW_EXPRESSIONS
    options = CheckOptions(
        # StoredExpressions ignores feature gates (k8s-dra-semantics.md §1.1).
        list_type_attributes=list_type_attributes or not new,
        consumable_capacity=consumable_capacity or not new,
    )
    root = parse(expression)
    with recursion_headroom():
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
    return _compile_selector_cached(
        expression, list_type_attributes, consumable_capacity, environment
    )


class CompiledExpression:
    """A general CEL expression over named variables (used by the conformance suite and tools)."""

    def __init__(
        self, expression: str, source: str, fn: Callable[..., Any], result_type: T
    ) -> None:
        self.expression = expression
        self.source = source
        self._fn = fn
        self.result_type = result_type

    def evaluate(
        self, variables: Mapping[str, Any] | None = None, device: CelDevice | None = None
    ) -> Any:
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
    with recursion_headroom():
        result_type, checked = check(expression, root, options)
        generated = generate(
            expression, root, checked, selector=False, validate_regex=kubernetes_validators
        )
        fn = _compile_function(generated.source, generated.namespace, expression)
    return CompiledExpression(expression, generated.source, fn, result_type)
