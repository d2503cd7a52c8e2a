"""Near-miss explanations: why a selector picks nothing, told in the devices' own values.

"0 devices match" is where a user's debugging starts, not where it should end. For a
request that matches nothing (or errors) this module says:

- for the **closest devices** (those failing the fewest clauses of the top-level
  ``&&``/``||`` tree), which clause failed and the value the device actually has;
- **unknown keys**: an attribute or capacity no device in scope publishes, with the
  closest existing name (``productname`` → ``productName``, v25.3's ``pcieBusID`` →
  ``resource.kubernetes.io/pciBusID``);
- a bare key read under the **wrong domain** (``pciBusID`` lives under
  ``resource.kubernetes.io``, ``productName`` under the driver's domain);
- **type mismatches**: a version or Quantity compared with a string or number, a
  string compared with a number, a version compared as a string (lexicographically);
- **MIG profile strings** that differ from what is published (``1g10gb`` is the device
  name's spelling, ``1g.10gb`` the attribute's);
- **label-vs-capacity pitfalls**: a ``1g.5gb`` profile publishes ``memory: 4864Mi``, less
  than 5Gi, so a memory selector written from the profile name misses it.

Facts: k8s-dra-semantics §1.3, §1.4 (typing and ``no such key``), §7; nvidia-driver-facts
§1.3, §1.4 (names, keys and values per driver version), §10 (renames), §11.

The static hints read the expression's syntax tree from the CEL engine's parser; the
clause breakdown is the engine's ``evaluate_clauses``. Both run on a few representative
devices only, never on the fleet.
"""

from __future__ import annotations

import difflib
import itertools
import re
from collections import deque
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal

from dradiag.analyses.selection.catalogue import AttributeCatalogue
from dradiag.analyses.selection.inventory import DeviceInventory
from dradiag.analyses.selection.results import RequestSelection, SelectorOrigin, SelectorResult

if TYPE_CHECKING:
    from dradiag.analyses.cel import Clause
    from dradiag.analyses.cel.parser import Node

HintKind = Literal[
    "unknown-key",
    "unknown-domain",
    "wrong-domain",
    "type-mismatch",
    "version-as-string",
    "mig-profile",
    "profile-capacity",
    "optional-key",
]

HINT_RULES: Mapping[str, str] = {
    "unknown-key": "DRA-SEL-UNKNOWN-ATTRIBUTE",
    "unknown-domain": "DRA-SEL-UNKNOWN-ATTRIBUTE",
    "wrong-domain": "DRA-SEL-WRONG-DOMAIN",
    "type-mismatch": "DRA-SEL-TYPE-MISMATCH",
    "version-as-string": "DRA-SEL-TYPE-MISMATCH",
    "mig-profile": "DRA-SEL-MIG-PROFILE",
    "profile-capacity": "DRA-SEL-PROFILE-CAPACITY",
    "optional-key": "DRA-SEL-OPTIONAL-ATTRIBUTE",
}
"""The rule id each kind of hint is reported under."""

REPRESENTATIVES = 40
"""Distinct kinds of device whose clauses are evaluated, at most."""

# Renames across driver versions that difflib alone would not explain well
# (nvidia-driver-facts §10).
_KNOWN_RENAMES: Mapping[str, tuple[str, str, str]] = {
    "pcieBusID": ("resource.kubernetes.io", "pciBusID", "renamed in driver v25.12"),
    "numa": ("resource.kubernetes.io", "numaNode", "replaced in driver v0.5"),
    "minor": ("", "", "dropped in driver v25.8; select on uuid or pciBusID instead"),
    "index": ("", "", "dropped in driver v25.8; select on uuid or pciBusID instead"),
    "parentIndex": ("", "", "dropped in driver v25.8; use parentUUID"),
}

_COMPARISONS = {"_==_": "==", "_!=_": "!=", "_<_": "<", "_<=_": "<=", "_>_": ">", "_>=_": ">="}

KeyRef = tuple[str, str, str]
"""(``attribute`` or ``capacity``, domain, name)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Hint:
    """One statically found problem of a selector, with the fix."""

    kind: HintKind
    message: str
    origin: SelectorOrigin
    selector_index: int
    offset: int | None = None
    """Character offset in the expression the hint is about, when known."""

    @property
    def rule(self) -> str:
        """The rule id the hint is reported under."""
        return HINT_RULES[self.kind]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClauseFailure:
    """One leaf clause that did not hold on a device, and what the device has."""

    clause: str
    outcome: Literal["false", "error"]
    message: str = ""
    actual: tuple[tuple[str, str], ...] = ()
    """(key as written in CEL, the device's value or ``(absent)``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class DeviceNearMiss:
    """A device close to matching: the clauses it fails."""

    device: str
    node: str
    device_type: str
    mig_profile: str | None
    selector_origin: SelectorOrigin
    selector_index: int
    failed: tuple[ClauseFailure, ...]
    clauses: int
    """Leaf clauses in that selector."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NearMissReport:
    """Near misses and hints for one request (or subrequest)."""

    request: str
    closest: tuple[DeviceNearMiss, ...]
    hints: tuple[Hint, ...]


# -- the expression's syntax tree -----------------------------------------------------


def _parse(expression: str) -> Node | None:
    from dradiag.analyses.cel import CelCompileError
    from dradiag.analyses.cel.parser import parse

    try:
        return parse(expression)
    except CelCompileError:
        return None


def _children(node: Any) -> Iterator[Any]:
    for name in getattr(node, "__dataclass_fields__", {}):
        value = getattr(node, name)
        if isinstance(value, list):
            for item in value:
                if hasattr(item, "__dataclass_fields__"):
                    yield item
        elif hasattr(value, "__dataclass_fields__"):
            yield value


def _walk(node: Any) -> Iterator[Any]:
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(reversed(list(_children(current))))


def _key_of(node: Any) -> KeyRef | None:
    """The (kind, domain, name) a node reads, for ``device.<kind>[domain].name`` shapes."""
    from dradiag.analyses.cel.parser import Call, Ident, Index, Literal, Select

    if isinstance(node, Call) and node.function == "orValue" and node.target is not None:
        node = node.target
    if isinstance(node, Select) and not node.test_only:
        holder, name = node.operand, node.field
    elif isinstance(node, Index) and isinstance(node.index, Literal):
        holder, name = node.operand, node.index.value
    else:
        return None
    if not (isinstance(holder, Index) and isinstance(holder.index, Literal)):
        return None
    base = holder.operand
    if not (
        isinstance(base, Select)
        and base.field in ("attributes", "capacity")
        and isinstance(base.operand, Ident)
        and base.operand.name == "device"
    ):
        return None
    kind = "attribute" if base.field == "attributes" else "capacity"
    return kind, str(holder.index.value), str(name)


def _literal(node: Any) -> tuple[str, Any] | None:
    """(kind, value) of a literal, or of ``quantity('…')``/``semver('…')`` of one."""
    from dradiag.analyses.cel.parser import Call, Literal

    if isinstance(node, Literal):
        return node.kind, node.value
    if (
        isinstance(node, Call)
        and node.target is None
        and node.function in ("quantity", "semver")
        and node.args
        and isinstance(node.args[0], Literal)
    ):
        return node.function, node.args[0].value
    return None


def _cel_key(key: KeyRef) -> str:
    kind, domain, name = key
    holder = "attributes" if kind == "attribute" else "capacity"
    return f"device.{holder}['{domain}'].{name}"


# -- static hints ---------------------------------------------------------------------


def _types_of(catalogue: AttributeCatalogue, key: KeyRef) -> frozenset[str]:
    kind, domain, name = key
    if kind == "capacity":
        return frozenset({"quantity"}) if (domain, name) in catalogue.capacities else frozenset()
    return catalogue.attribute_types.get((domain, name), frozenset())


def _key_hints(
    catalogue: AttributeCatalogue, keys: Iterable[KeyRef], origin: SelectorOrigin, index: int
) -> list[Hint]:
    hints: list[Hint] = []
    all_domains = {d for d, _ in catalogue.attribute_types} | {d for d, _ in catalogue.capacities}
    for key in sorted(keys):
        kind, domain, name = key
        table = catalogue.attribute_types if kind == "attribute" else catalogue.capacities
        if (domain, name) in table:
            continue
        elsewhere = catalogue.domains_of(name, kind)
        other_kind = "capacity" if kind == "attribute" else "attribute"
        if elsewhere:
            where = elsewhere[0]
            hints.append(
                Hint(
                    kind="wrong-domain",
                    message=(
                        f"{_cel_key(key)}: no device publishes {name} under {domain}; it is "
                        f"published under {', '.join(elsewhere)}: use "
                        f"{_cel_key((kind, where, name))}"
                        + (
                            " (a bare key in a ResourceSlice belongs to the driver's domain)"
                            if where not in ("resource.kubernetes.io",)
                            else ""
                        )
                    ),
                    origin=origin,
                    selector_index=index,
                )
            )
            continue
        if catalogue.domains_of(name, other_kind):
            where = catalogue.domains_of(name, other_kind)[0]
            hints.append(
                Hint(
                    kind="wrong-domain",
                    message=(
                        f"{_cel_key(key)}: {name} is published as a {other_kind}, not an "
                        f"{kind}: use {_cel_key((other_kind, where, name))}"
                    ),
                    origin=origin,
                    selector_index=index,
                )
            )
            continue
        if domain not in all_domains:
            hints.append(
                Hint(
                    kind="unknown-domain",
                    message=(
                        f"{_cel_key(key)}: no device publishes anything under domain {domain} "
                        f"(published: {', '.join(sorted(all_domains)) or 'none'}); an unknown "
                        "domain reads as an empty map, so any key under it is 'no such key'"
                    ),
                    origin=origin,
                    selector_index=index,
                )
            )
            continue
        hints.append(
            Hint(
                kind="unknown-key",
                message=_unknown_key_message(catalogue, key),
                origin=origin,
                selector_index=index,
            )
        )
    return hints


def _unknown_key_message(catalogue: AttributeCatalogue, key: KeyRef) -> str:
    kind, domain, name = key
    table = catalogue.attribute_types if kind == "attribute" else catalogue.capacities
    message = f"{_cel_key(key)}: no device in scope publishes {kind} {name}"
    renamed = _KNOWN_RENAMES.get(name)
    if renamed is not None:
        new_domain, new_name, why = renamed
        if new_name:
            return message + f" ({why}): did you mean {_cel_key((kind, new_domain, new_name))}?"
        return message + f" ({why})"
    same_domain = sorted(n for d, n in table if d == domain)
    lower = {n.lower(): n for n in same_domain}
    suggestion = lower.get(name.lower())
    if suggestion is None:
        close = difflib.get_close_matches(name, same_domain, n=1, cutoff=0.6)
        if not close:
            everywhere = sorted({n for _, n in table})
            close = difflib.get_close_matches(name, everywhere, n=1, cutoff=0.6)
            if close:
                where = catalogue.domains_of(close[0], kind)[0]
                return message + f": did you mean {_cel_key((kind, where, close[0]))}?"
        suggestion = close[0] if close else None
    if suggestion is not None:
        return message + f": did you mean {suggestion}?"
    if same_domain:
        return message + f" (published under {domain}: {', '.join(same_domain)})"
    return message


def _type_hints(
    catalogue: AttributeCatalogue, root: Any, origin: SelectorOrigin, index: int
) -> list[Hint]:
    from dradiag.analyses.cel.parser import Call

    hints: list[Hint] = []
    for node in _walk(root):
        if not (isinstance(node, Call) and node.target is None and node.function in _COMPARISONS):
            continue
        if len(node.args) != 2:
            continue
        op = _COMPARISONS[node.function]
        for this, other in ((node.args[0], node.args[1]), (node.args[1], node.args[0])):
            hint = _comparison_hint(catalogue, this, other, op, node.pos)
            if hint is not None:
                hints.append(
                    Hint(
                        kind=hint[0],
                        message=hint[1],
                        origin=origin,
                        selector_index=index,
                        offset=node.pos,
                    )
                )
                break
    return hints


def _comparison_hint(
    catalogue: AttributeCatalogue, this: Any, other: Any, op: str, pos: int
) -> tuple[HintKind, str] | None:
    from dradiag.analyses.cel.parser import Call

    literal = _literal(other)
    if literal is None:
        return None
    lit_kind, lit_value = literal
    # string(device.attributes[d].version) < 'x': a version compared as a string.
    if (
        isinstance(this, Call)
        and this.function == "string"
        and this.target is None
        and len(this.args) == 1
    ):
        inner = _key_of(this.args[0])
        if inner is not None and "version" in _types_of(catalogue, inner) and op in "<<=>>=":
            return (
                "version-as-string",
                f"{_cel_key(inner)} is a version, but string(...) {op} {lit_value!r} compares "
                "text: '10.0.0' < '9.0.0' as strings. Compare versions: "
                f"{_cel_key(inner)}.compareTo(semver('{lit_value}')) {op} 0",
            )
        return None
    key = _key_of(this)
    if key is None:
        return None
    types = _types_of(catalogue, key)
    if not types:
        return None
    shown = repr(lit_value)
    if "quantity" in types and lit_kind in ("int", "uint", "double", "string"):
        return (
            "type-mismatch",
            f"{_cel_key(key)} is a Quantity; {op} {shown} compares it with a {lit_kind}, which "
            "is an error (Quantity has no ==/</> with other types). Use "
            f"{_cel_key(key)}.compareTo(quantity('{_as_quantity_text(lit_value)}')) {op} 0",
        )
    if "version" in types and lit_kind in ("string", "int", "uint", "double"):
        text = str(lit_value)
        normalized = _normalized_version(text)
        extra = ""
        if normalized != text:
            extra = (
                f"; the driver publishes versions normalized (leading zeros dropped): {normalized}"
            )
        return (
            "type-mismatch",
            f"{_cel_key(key)} is a version (semver); {op} {shown} compares it with a "
            f"{lit_kind}, which is a runtime error (no such overload). Use "
            f"{_cel_key(key)}.compareTo(semver('{normalized}')) {op} 0" + extra,
        )
    if types == {"string"} and lit_kind in ("int", "uint", "double"):
        consequence = "never true" if op in ("==",) else "an error" if op != "!=" else "always true"
        return (
            "type-mismatch",
            f"{_cel_key(key)} is a string; {op} {shown} compares it with a number, which is "
            f"{consequence}. Compare with a string: {op} '{lit_value}'",
        )
    if types == {"int"} and lit_kind == "string":
        consequence = "never true" if op == "==" else "an error" if op != "!=" else "always true"
        return (
            "type-mismatch",
            f"{_cel_key(key)} is an int; {op} {shown} compares it with a string, which is "
            f"{consequence}. Compare with a number",
        )
    if (
        types == {"string"}
        and lit_kind == "string"
        and op in ("<", "<=", ">", ">=")
        and re.fullmatch(r"v?\d+(\.\d+)+", str(lit_value))
    ):
        return (
            "version-as-string",
            f"{_cel_key(key)} {op} {shown} compares text, not versions ('10.0' < '9.0' as "
            f"strings); use semver({_cel_key(key)}, true).compareTo(semver('{lit_value}', true)) "
            f"{op} 0",
        )
    return None


def _as_quantity_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return str(value)


def _normalized_version(text: str) -> str:
    """``580.65.06`` → ``580.65.6``, ``12.4`` → ``12.4.0`` (what the driver publishes)."""
    parts = text.lstrip("v").split("-", 1)[0].split(".")
    if not all(p.isdigit() for p in parts) or not parts:
        return text
    numbers = [str(int(p)) for p in parts] + ["0"] * (3 - len(parts))
    return ".".join(numbers[:3]) if len(parts) <= 3 else text


def _profile_literals(root: Any) -> Iterator[tuple[str, int]]:
    """String literals compared with (or listed for) a ``profile`` attribute."""
    from dradiag.analyses.cel.parser import Call, CreateList, Literal

    for node in _walk(root):
        if not isinstance(node, Call) or node.target is not None or len(node.args) != 2:
            continue
        left, right = node.args
        if node.function in ("_==_", "_!=_"):
            for this, other in ((left, right), (right, left)):
                key = _key_of(this)
                if key is not None and key[2] == "profile" and isinstance(other, Literal):
                    yield str(other.value), other.pos
        elif node.function == "@in":
            key = _key_of(left)
            if key is not None and key[2] == "profile" and isinstance(right, CreateList):
                for element in right.elements:
                    if isinstance(element, Literal):
                        yield str(element.value), element.pos


def _profile_hints(
    catalogue: AttributeCatalogue, root: Any, origin: SelectorOrigin, index: int
) -> list[Hint]:
    published = sorted(
        str(v)
        for (domain, name), values in catalogue.attribute_values.items()
        if name == "profile"
        for v in values
    )
    if not published:
        return []
    hints = []
    for literal, pos in _profile_literals(root):
        if literal in published:
            continue
        message = f"MIG profile {literal!r} is not published by any device in scope"
        dotted = re.sub(r"^(\d+g)(\d+gb)", r"\1.\2", literal)
        if dotted != literal and dotted.replace("-", "+") in published:
            dotted = dotted.replace("-", "+")
        if dotted != literal and dotted in published:
            message += (
                f"; {literal!r} is how the device *name* spells it, the profile attribute is "
                f"{dotted!r}"
            )
        else:
            close = difflib.get_close_matches(literal, published, n=1, cutoff=0.5)
            if close:
                message += f"; closest published profile: {close[0]!r}"
        message += f" (published: {', '.join(published)})"
        hints.append(
            Hint(
                kind="mig-profile", message=message, origin=origin, selector_index=index, offset=pos
            )
        )
    return hints


def _memory_thresholds(root: Any) -> Iterator[tuple[str, int]]:
    """Quantities a ``memory`` capacity is compared against: (text, offset)."""
    from dradiag.analyses.cel.parser import Call

    for node in _walk(root):
        if not isinstance(node, Call):
            continue
        if node.function in ("compareTo", "isGreaterThan", "isLessThan") and node.target:
            key = _key_of(node.target)
            literal = _literal(node.args[0]) if node.args else None
            if key and key[0] == "capacity" and key[2] == "memory" and literal:
                if literal[0] == "quantity":
                    yield str(literal[1]), node.pos


def _profile_capacity_hints(
    catalogue: AttributeCatalogue, root: Any, origin: SelectorOrigin, index: int
) -> list[Hint]:
    from dradiag.analyses.cel import parse_quantity

    hints = []
    for text, pos in _memory_thresholds(root):
        try:
            wanted = parse_quantity(text)
        except ValueError:
            continue
        for profile, memories in sorted(catalogue.mig_profile_memory.items()):
            match = re.match(r"^\d+g\.(\d+)gb", profile)
            if not match:
                continue
            label = parse_quantity(f"{match.group(1)}Gi")
            for memory_text in sorted(memories):
                try:
                    memory = parse_quantity(memory_text)
                except ValueError:
                    continue
                if memory < wanted <= label:
                    hints.append(
                        Hint(
                            kind="profile-capacity",
                            message=(
                                f"MIG profile {profile} publishes memory {memory_text}, less "
                                f"than {text}: the '{match.group(1)}gb' in a profile name is a "
                                "label, not its memory capacity"
                            ),
                            origin=origin,
                            selector_index=index,
                            offset=pos,
                        )
                    )
                    break
    return hints


def selector_hints(
    inventory: DeviceInventory, selector: SelectorResult, *, read_keys: Iterable[KeyRef] = ()
) -> list[Hint]:
    """Static problems of one selector against what the devices in scope publish."""
    from dradiag.analyses.cel import CelCompileError, compile_selector

    if selector.compile_error is not None or not selector.expression:
        return []
    catalogue = inventory.catalogue
    keys = set(read_keys)
    if not keys:
        try:
            compiled = compile_selector(selector.expression)
        except CelCompileError:
            return []
        keys = {k for k in compiled.read_keys if k[1] is not None and k[2] is not None}  # type: ignore[misc]
    hints = _key_hints(catalogue, keys, selector.origin, selector.index)
    root = _parse(selector.expression)
    if root is not None:
        hints += _type_hints(catalogue, root, selector.origin, selector.index)
        hints += _profile_hints(catalogue, root, selector.origin, selector.index)
        hints += _profile_capacity_hints(catalogue, root, selector.origin, selector.index)
    return hints


# -- clause breakdown on the closest devices ------------------------------------------


def _leaves(clause: Clause) -> Iterator[Clause]:
    if clause.operator is None:
        yield clause
        return
    for child in clause.children:
        yield from _leaves(child)


def _failing_leaves(clause: Clause) -> list[Clause]:
    """Leaves that make the clause fail: every failing operand of an ``&&``, all of an ``||``."""
    if clause.operator is None:
        return [] if clause.error is None and clause.value is True else [clause]
    if clause.error is None and clause.value is True:
        return []
    out: list[Clause] = []
    for child in clause.children:
        out.extend(_failing_leaves(child))
    return out


def _format_value(value: Any) -> str:
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_format_value(v) for v in value) + "]"
    return str(value)


def _actual_values(clause_text: str, cel_device: Any) -> tuple[tuple[str, str], ...]:
    from dradiag.analyses.cel import CelCompileError, compile_selector

    try:
        compiled = compile_selector(clause_text)
    except CelCompileError:
        return ()
    out = []
    for kind, domain, name in sorted(compiled.read_keys, key=lambda k: tuple(map(str, k))):
        if domain is None or name is None:
            continue
        maps = cel_device.attributes if kind == "attribute" else cel_device.capacity
        values = maps[domain] if domain in maps else {}
        shown = _format_value(values[name]) if name in values else "(absent)"
        out.append((_cel_key((kind, domain, name)), shown))
    return tuple(out)


def _signature(device: Any) -> tuple[Any, ...]:
    attrs = device.raw.get("attributes") or {}
    product = attrs.get("productName") or attrs.get(f"{device.driver}/productName") or {}
    return (
        device.driver,
        device.device_type,
        device.mig_profile,
        str(product.get("string")) if isinstance(product, Mapping) else "",
        tuple(sorted(attrs)),
    )


def _representatives(
    inventory: DeviceInventory, alt: RequestSelection, gates: Sequence[Any]
) -> dict[tuple[Any, ...], int]:
    """The first device (in order) of each :func:`_signature` that is not matched and
    passes the ``gates`` (class selectors), up to :data:`REPRESENTATIVES` signatures."""
    matched = set(alt.matched_indices)
    representatives: dict[tuple[Any, ...], int] = {}
    passing = inventory.indices_passing(gates)
    if not inventory.grouped:
        for index in passing:
            if index in matched:
                continue
            sig = _signature(inventory.device(index))
            if sig not in representatives:
                representatives[sig] = index
                if len(representatives) >= REPRESENTATIVES:
                    break
        return representatives
    # The same, by columns: signatures of every candidate, then their first appearances.
    indices = [index for index in passing if index not in matched] if matched else list(passing)
    attributes = inventory._entries("attributes")
    owned = list(map(attributes.__getitem__, indices))
    drivers = list(map(inventory._driver.__getitem__, indices))
    products: list[Any] = list(map(dict.get, owned, repeat("productName")))
    for i, product in enumerate(products):
        if not product:
            products[i] = owned[i].get(f"{drivers[i]}/productName") or {}
    names: dict[int, str] = {}
    for product in dict(zip(map(id, products), products, strict=True)).values():
        names[id(product)] = str(product.get("string")) if isinstance(product, Mapping) else ""
    layouts: dict[tuple[str, ...], tuple[str, ...]] = {}
    for layout in dict.fromkeys(map(tuple, owned)):
        layouts[layout] = tuple(sorted(layout))
    signatures = zip(
        drivers,
        map(inventory._type.__getitem__, indices),
        map(inventory._profile.__getitem__, indices),
        map(names.__getitem__, map(id, products)),
        map(layouts.__getitem__, map(tuple, owned)),
        strict=True,
    )
    first: dict[tuple[Any, ...], int] = {}
    deque(map(first.setdefault, signatures, indices), 0)
    for sig, index in itertools.islice(first.items(), REPRESENTATIVES):
        representatives[sig] = index
    return representatives


def closest_devices(
    inventory: DeviceInventory,
    alt: RequestSelection,
    *,
    limit: int = 3,
) -> list[DeviceNearMiss]:
    """The devices failing the fewest clauses of the selector that rejected them.

    Only devices that passed the class selectors are considered when some did (the
    request's own selectors are then what the user can change); otherwise the class
    selectors are explained. One representative per kind of device is evaluated.
    """
    from dradiag.analyses.cel import CelCompileError, compile_selector

    if alt.request_stage.evaluated and alt.class_stage.total.matched:
        selectors, gates = alt.request_selectors, alt.class_selectors
    elif alt.class_stage.evaluated:
        selectors, gates = alt.class_selectors, ()
    else:
        return []
    try:
        compiled = [compile_selector(sel.expression) for sel in selectors]
        gate_selectors = [compile_selector(sel.expression) for sel in gates]
    except CelCompileError:
        return []
    representatives = _representatives(inventory, alt, gate_selectors)
    candidates: list[tuple[int, str, DeviceNearMiss]] = []
    for index in representatives.values():
        device = inventory.devices[index]
        cel_dev = inventory.cel(index)
        for sel, comp in zip(selectors, compiled, strict=True):
            tree = comp.evaluate_clauses(cel_dev)
            failing = _failing_leaves(tree)
            if not failing:
                continue
            failures = tuple(
                ClauseFailure(
                    clause=leaf.text,
                    outcome="error" if leaf.error is not None else "false",
                    message=leaf.error or "",
                    actual=_actual_values(leaf.text, cel_dev),
                )
                for leaf in failing
            )
            near = DeviceNearMiss(
                device=device.ref,
                node=device.node_label,
                device_type=device.device_type,
                mig_profile=device.mig_profile,
                selector_origin=sel.origin,
                selector_index=sel.index,
                failed=failures,
                clauses=sum(1 for _ in _leaves(tree)),
            )
            candidates.append((len(failures), device.ref, near))
            break
    candidates.sort(key=lambda c: (c[0], c[1]))
    return [c[2] for c in candidates[:limit]]


def explain_request(inventory: DeviceInventory, alt: RequestSelection) -> NearMissReport:
    """Near misses and hints for one request alternative."""
    hints: list[Hint] = []
    for sel in alt.selectors():
        hints.extend(selector_hints(inventory, sel))
        for error in sel.errors[:1]:
            hint = _optional_key_hint(inventory, sel, error.message)
            if hint is not None:
                hints.append(hint)
    closest: list[DeviceNearMiss] = []
    if not alt.matched_indices and (alt.class_stage.evaluated or alt.request_stage.evaluated):
        closest = closest_devices(inventory, alt)
    return NearMissReport(request=alt.label, closest=tuple(closest), hints=_dedupe(hints))


def _optional_key_hint(
    inventory: DeviceInventory, sel: SelectorResult, message: str
) -> Hint | None:
    """``no such key: x`` where some devices do publish x: the key is optional."""
    match = re.search(r"no such key: (\S+)", message)
    if not match:
        return None
    name = match.group(1).rstrip(".,")
    from dradiag.analyses.cel import CelCompileError, compile_selector

    try:
        read = compile_selector(sel.expression).read_keys
    except CelCompileError:
        return None
    published = set(inventory.catalogue.domains_of(name))
    domains = sorted(
        str(d) for kind, d, n in read if kind == "attribute" and n == name and d in published
    )
    if not domains:
        return None
    domain = domains[0]
    key = _cel_key(("attribute", domain, name))
    return Hint(
        kind="optional-key",
        message=(
            f"{name} is published by some devices in scope but not all (e.g. DynamicMIG "
            f"devices have no uuid, pcieRoot and addressingMode are optional): guard it with "
            f"has({key}) && ..., or use device.attributes['{domain}'].?{name}.orValue(...), "
            f"or '{name}' in device.attributes['{domain}']"
        ),
        origin=sel.origin,
        selector_index=sel.index,
    )


def _dedupe(hints: Sequence[Hint]) -> tuple[Hint, ...]:
    seen: set[tuple[str, str]] = set()
    out = []
    for hint in hints:
        key = (hint.kind, hint.message)
        if key not in seen:
            seen.add(key)
            out.append(hint)
    return tuple(out)
