"""Static CEL types used by the checker: primitives, list/map/optional/type, Kubernetes types, type parameters.

Spelled as cel-go prints them in compile errors (``map(string, map(string, any))``,
``kubernetes.Quantity``, ``optional_type(int)``).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "T",
    "parse_type",
    "DYN",
    "ANY",
    "BOOL",
    "INT",
    "UINT",
    "DOUBLE",
    "STRING",
    "BYTES",
    "NULL",
]


@dataclass(frozen=True, slots=True)
class T:
    kind: str
    params: tuple[T, ...] = ()

    def __str__(self) -> str:
        if self.kind == "list":
            return f"list({self.params[0]})"
        if self.kind == "map":
            return f"map({self.params[0]}, {self.params[1]})"
        if self.kind == "optional":
            return f"optional_type({self.params[0]})"
        if self.kind == "type":
            return f"type({self.params[0]})" if self.params else "type"
        return self.kind

    @property
    def is_dyn(self) -> bool:
        return self.kind in ("dyn", "any", "error")

    @property
    def is_param(self) -> bool:
        return len(self.kind) == 1 and self.kind.isupper()


DYN = T("dyn")
ANY = T("any")
BOOL = T("bool")
INT = T("int")
UINT = T("uint")
DOUBLE = T("double")
STRING = T("string")
BYTES = T("bytes")
NULL = T("null_type")
QUANTITY = T("kubernetes.Quantity")
SEMVER = T("kubernetes.Semver")
DEVICE = T("kubernetes.DRADevice")
ERROR = T("error")

_ALIASES = {
    "Q": QUANTITY,
    "S": SEMVER,
    "null": NULL,
    "url": T("kubernetes.URL"),
    "ip": T("net.IP"),
    "cidr": T("net.CIDR"),
}


def parse_type(text: str) -> T:
    """Parse the compact spelling used in the function table, e.g. ``map(K,V)`` or ``list(A)``."""
    text = text.strip()
    if text in _ALIASES:
        return _ALIASES[text]
    if "(" not in text:
        return T(text)
    head, _, rest = text.partition("(")
    inner = rest[:-1]
    params: list[T] = []
    depth = 0
    start = 0
    for i, ch in enumerate(inner):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            params.append(parse_type(inner[start:i]))
            start = i + 1
    params.append(parse_type(inner[start:]))
    kind = {"opt": "optional"}.get(head, head)
    return T(kind, tuple(params))


def list_of(elem: T) -> T:
    return T("list", (elem,))


def map_of(key: T, value: T) -> T:
    return T("map", (key, value))


def optional_of(elem: T) -> T:
    return T("optional", (elem,))
