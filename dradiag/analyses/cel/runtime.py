"""CEL value semantics for generated code: equality, ordering, arithmetic, indexing, conversions.

CEL values are plain Python values: int, ``Uint`` (an int subclass), float, str, bytes,
bool, None (null), list or tuple (list), dict (map), ``Quantity``, ``Semver``,
``OptionalValue``, ``CelType``, and the network types from ``netlib``. Errors are raised as
``CelRuntimeError``; ``&&``, ``||``, ``?:`` and the ``all``/``exists`` macros catch them where
CEL absorbs errors.

The rules are CEL's, written out rather than inherited from Python (cel-engines.md §6.2):
``true == 1`` is false, ``1 == 1.0`` is true, ``[1] == [1.0]`` is true, ``1 < 'a'`` is an
error, int64/uint64 overflow is an error, ``/`` and ``%`` truncate, negative indexes are out
of range. Kubernetes enables CrossTypeNumericComparisons, so ``1 < 1.5`` is true.
``Quantity == x`` and ``Semver == x`` with ``x`` of another type are errors (the
apiserver types' ``Equal``), while ``x == quantity`` for a built-in ``x`` is false: cel-go
calls the left operand's ``Equal``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final, NoReturn

from .errors import CelRuntimeError
from .quantity import Quantity
from .semver import Semver

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
UINT64_MAX: Final = 2**64 - 1


class Uint(int):
    """A CEL ``uint`` value (plain ``int`` is CEL ``int``)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"{int(self)}u"


class CelType:
    """A CEL type value, e.g. the result of ``type(1)`` or the identifier ``int``."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CelType) and other.name == self.name

    def __hash__(self) -> int:
        return hash(("CelType", self.name))

    def __repr__(self) -> str:
        return f"CelType({self.name})"


class OptionalValue:
    """A CEL ``optional_type`` value; ``NONE`` is the empty optional."""

    __slots__ = ("value", "present")

    def __init__(self, value: Any = None, present: bool = True) -> None:
        self.value = value
        self.present = present

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, OptionalValue):
            return False
        if not self.present or not other.present:
            return self.present == other.present
        return equals(self.value, other.value)

    def __hash__(self) -> int:
        return hash(("OptionalValue", self.present))

    def __repr__(self) -> str:
        return f"optional.of({self.value!r})" if self.present else "optional.none()"


NONE: Final = OptionalValue(None, False)


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<missing>"


MISSING: Final = _Missing()

TYPE_INT: Final = CelType("int")
TYPE_UINT: Final = CelType("uint")
TYPE_DOUBLE: Final = CelType("double")
TYPE_BOOL: Final = CelType("bool")
TYPE_STRING: Final = CelType("string")
TYPE_BYTES: Final = CelType("bytes")
TYPE_LIST: Final = CelType("list")
TYPE_MAP: Final = CelType("map")
TYPE_NULL: Final = CelType("null_type")
TYPE_TYPE: Final = CelType("type")
TYPE_OPTIONAL: Final = CelType("optional_type")
TYPE_QUANTITY: Final = CelType("kubernetes.Quantity")
TYPE_SEMVER: Final = CelType("kubernetes.Semver")

TYPE_IDENTS: Final = {
    "int": TYPE_INT,
    "uint": TYPE_UINT,
    "double": TYPE_DOUBLE,
    "bool": TYPE_BOOL,
    "string": TYPE_STRING,
    "bytes": TYPE_BYTES,
    "list": TYPE_LIST,
    "map": TYPE_MAP,
    "null_type": TYPE_NULL,
    "type": TYPE_TYPE,
    "optional_type": TYPE_OPTIONAL,
}

LIST_TYPES: Final = (list, tuple)


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------
def no_such_overload(*_: Any) -> CelRuntimeError:
    return CelRuntimeError("no such overload")


def raise_no_such_overload(*_: Any) -> NoReturn:
    raise CelRuntimeError("no such overload")


def no_such_key(key: Any) -> CelRuntimeError:
    return CelRuntimeError(f"no such key: {format_key(key)}")


def raise_no_such_key(key: Any) -> NoReturn:
    raise no_such_key(key)


def format_key(key: Any) -> str:
    if isinstance(key, bool):
        return "true" if key else "false"
    if isinstance(key, Uint):
        return f"{int(key)}u"
    return str(key)


def overflow() -> CelRuntimeError:
    return CelRuntimeError("integer overflow")


def uint_overflow() -> CelRuntimeError:
    return CelRuntimeError("unsigned integer overflow")


# --------------------------------------------------------------------------------------
# Type names
# --------------------------------------------------------------------------------------
def type_of(value: Any) -> CelType:
    cls = value.__class__
    if cls is bool:
        return TYPE_BOOL
    if cls is int:
        return TYPE_INT
    if cls is Uint:
        return TYPE_UINT
    if cls is float:
        return TYPE_DOUBLE
    if cls is str:
        return TYPE_STRING
    if cls is bytes:
        return TYPE_BYTES
    if value is None:
        return TYPE_NULL
    if cls in LIST_TYPES:
        return TYPE_LIST
    if isinstance(value, Mapping):
        return TYPE_MAP
    if cls is CelType:
        return TYPE_TYPE
    if cls is OptionalValue:
        return TYPE_OPTIONAL
    if cls is Quantity:
        return TYPE_QUANTITY
    if cls is Semver:
        return TYPE_SEMVER
    name = getattr(value, "cel_type_name", None)
    if name is not None:
        return CelType(name)
    raise CelRuntimeError(f"unsupported value type {cls.__name__}")


_GO_TYPE_NAMES: Final = {
    "bool": "types.Bool",
    "int": "types.Int",
    "uint": "types.Uint",
    "double": "types.Double",
    "string": "types.String",
    "bytes": "types.Bytes",
    "null_type": "types.Null",
    "type": "*types.Type",
    "optional_type": "*types.Optional",
    "kubernetes.Quantity": "cel.Quantity",
    "kubernetes.Semver": "cel.Semver",
    "net.IP": "cel.IP",
    "net.CIDR": "cel.CIDR",
    "kubernetes.URL": "cel.URL",
}


def go_type_name(value: Any) -> str:
    """The Go ``%T`` cel-go prints in ``got '%T', expected iterable type``."""
    return _GO_TYPE_NAMES.get(type_of(value).name, type_of(value).name)


# --------------------------------------------------------------------------------------
# Equality and ordering
# --------------------------------------------------------------------------------------
def equals(a: Any, b: Any) -> bool:
    """CEL ``_==_`` with heterogeneous equality (raises for Quantity/Semver vs other types)."""
    ca, cb = a.__class__, b.__class__
    if ca is cb and (ca is str or ca is int or ca is bool or ca is bytes or ca is float):
        return bool(a == b)
    if a is None or b is None:
        return a is None and b is None
    if ca is bool or cb is bool:
        return ca is cb and a == b
    if ca in _NUMERIC and cb in _NUMERIC:
        if ca is float or cb is float:
            return float(a) == float(b)
        return bool(a == b)
    if ca in LIST_TYPES:
        if cb not in LIST_TYPES or len(a) != len(b):
            return False
        for x, y in zip(a, b, strict=True):
            # cel-go baseList.Equal: only an explicit False makes the lists unequal.
            try:
                if equals(x, y) is False:
                    return False
            except CelRuntimeError:
                continue
        return True
    if ca is Quantity or ca is Semver:
        if cb is not ca:
            raise CelRuntimeError("no such overload")
        return bool(a == b)
    if isinstance(a, Mapping):
        if not isinstance(b, Mapping) or len(a) != len(b):
            return False
        for k, v in a.items():
            found, w = map_lookup(b, k)
            if not found:
                return False
            try:
                if equals(v, w) is False:
                    return False
            except CelRuntimeError:
                continue
        return True
    if ca is cb:
        return bool(a == b)
    return False


def not_equals(a: Any, b: Any) -> bool:
    return not equals(a, b)


_NUMERIC: Final = (int, Uint, float)


def compare(a: Any, b: Any) -> int:
    """Three-way comparison for ``< <= > >=``: 2 when a NaN makes the pair unordered
    (every relation is then false); raises ``no such overload`` for unordered types."""
    ca, cb = a.__class__, b.__class__
    if ca is cb:
        if ca is float:
            if math.isnan(a) or math.isnan(b):
                return 2
            return (a > b) - (a < b)
        if ca is int or ca is str or ca is Uint or ca is bytes or ca is bool:
            return (a > b) - (a < b)
        cmp = getattr(a, "cel_compare", None)
        if cmp is not None:
            return int(cmp(b))
    elif ca in _NUMERIC and cb in _NUMERIC:
        if ca is float or cb is float:
            # cel-go compares int/uint with double after converting to double.
            a, b = float(a), float(b)
            if math.isnan(a) or math.isnan(b):
                return 2
        return (a > b) - (a < b)
    raise CelRuntimeError("no such overload")


def less(a: Any, b: Any) -> bool:
    c = compare(a, b)
    return c != 2 and c < 0


def less_equals(a: Any, b: Any) -> bool:
    c = compare(a, b)
    return c != 2 and c <= 0


def greater(a: Any, b: Any) -> bool:
    c = compare(a, b)
    return c != 2 and c > 0


def greater_equals(a: Any, b: Any) -> bool:
    c = compare(a, b)
    return c != 2 and c >= 0


# --------------------------------------------------------------------------------------
# Arithmetic
# --------------------------------------------------------------------------------------
def check_int(v: int) -> int:
    if v < INT64_MIN or v > INT64_MAX:
        raise overflow()
    return v


def check_uint(v: int) -> Uint:
    if v < 0 or v > UINT64_MAX:
        raise uint_overflow()
    return Uint(v)


def add(a: Any, b: Any) -> Any:
    ca, cb = a.__class__, b.__class__
    if ca is cb:
        if ca is int:
            v = a + b
            if INT64_MIN <= v <= INT64_MAX:
                return v
            raise overflow()
        if ca is str or ca is float or ca is bytes:
            return a + b
        if ca is Uint:
            return check_uint(a + b)
        if ca is list or ca is tuple:
            return [*a, *b]
    elif ca in LIST_TYPES and cb in LIST_TYPES:
        return [*a, *b]
    raise CelRuntimeError("no such overload")


def sub(a: Any, b: Any) -> Any:
    ca, cb = a.__class__, b.__class__
    if ca is cb:
        if ca is int:
            return check_int(a - b)
        if ca is float:
            return a - b
        if ca is Uint:
            return check_uint(a - b)
    raise CelRuntimeError("no such overload")


def mul(a: Any, b: Any) -> Any:
    ca, cb = a.__class__, b.__class__
    if ca is cb:
        if ca is int:
            return check_int(a * b)
        if ca is float:
            return a * b
        if ca is Uint:
            return check_uint(a * b)
    raise CelRuntimeError("no such overload")


def div(a: Any, b: Any) -> Any:
    ca, cb = a.__class__, b.__class__
    if ca is cb:
        if ca is int or ca is Uint:
            if b == 0:
                raise CelRuntimeError("division by zero")
            q = abs(a) // abs(b)
            if (a < 0) != (b < 0):
                q = -q
            return check_int(q) if ca is int else Uint(q)
        if ca is float:
            if b == 0.0:
                if a == 0.0 or math.isnan(a):
                    return math.nan
                return math.copysign(math.inf, a) * math.copysign(1.0, b)
            return a / b
    raise CelRuntimeError("no such overload")


def mod(a: Any, b: Any) -> Any:
    ca, cb = a.__class__, b.__class__
    if ca is cb and (ca is int or ca is Uint):
        if b == 0:
            raise CelRuntimeError("modulus by zero")
        if ca is int and a == INT64_MIN and b == -1:
            raise overflow()
        r = abs(a) % abs(b)
        if a < 0:
            r = -r
        return r if ca is int else Uint(r)
    raise CelRuntimeError("no such overload")


def neg(a: Any) -> Any:
    ca = a.__class__
    if ca is int:
        return check_int(-a)
    if ca is float:
        return -a
    raise CelRuntimeError("no such overload")


def logical_not(a: Any) -> bool:
    if a is True:
        return False
    if a is False:
        return True
    raise CelRuntimeError("no such overload")


# --------------------------------------------------------------------------------------
# Maps, lists, selection
# --------------------------------------------------------------------------------------
def map_key(key: Any) -> Any:
    """Validate a key for a map literal (int, uint, bool, string only)."""
    cls = key.__class__
    if cls is str or cls is int or cls is bool or cls is Uint:
        return key
    raise CelRuntimeError(f"unsupported key type: {type_of(key).name}")


def map_lookup(m: Mapping[Any, Any], key: Any) -> tuple[bool, Any]:
    """Look ``key`` up with CEL's numeric key equivalence (``{1: 'x'}[1.0]`` finds 'x').

    A map with a default (the device's domain maps) answers every string key.
    """
    cls = key.__class__
    if cls is str:
        v = m.get(key, MISSING)
        if v is MISSING:
            if hasattr(m, "__missing__"):
                return True, m[key]
            return False, None
        return True, v
    if cls is bool:
        for k, v in m.items():
            if k.__class__ is bool and k == key:
                return True, v
        return False, None
    if cls is int or cls is Uint or cls is float:
        if cls is float and (math.isnan(key) or math.isinf(key) or key != int(key)):
            return False, None
        ikey = int(key)
        for k, v in m.items():
            if (k.__class__ is int or k.__class__ is Uint) and k == ikey:
                return True, v
        return False, None
    raise CelRuntimeError(f"unsupported key type: {type_of(key).name}")


def index(container: Any, key: Any) -> Any:
    """CEL ``_[_]``."""
    cls = container.__class__
    if cls in LIST_TYPES:
        kcls = key.__class__
        if kcls is int or kcls is Uint:
            i = int(key)
        elif kcls is float:
            if key != int(key) if not (math.isnan(key) or math.isinf(key)) else True:
                raise CelRuntimeError("unsupported index value")
            i = int(key)
        else:
            raise CelRuntimeError("no such overload")
        if i < 0 or i >= len(container):
            raise CelRuntimeError(f"index out of bounds: {i}")
        return container[i]
    if isinstance(container, Mapping):
        found, v = map_lookup(container, key)
        if not found:
            raise no_such_key(key)
        return v
    if cls is OptionalValue:
        return optional_index(container, key)
    raise CelRuntimeError("no such overload")


def select(container: Any, name: str) -> Any:
    """Field selection ``x.name`` on a dynamic value (maps only: there are no messages)."""
    if isinstance(container, Mapping):
        v = container.get(name, MISSING)
        if v is MISSING:
            if hasattr(container, "__missing__"):
                return container[name]
            raise no_such_key(name)
        return v
    if container.__class__ is OptionalValue:
        return optional_select(container, name)
    raise CelRuntimeError(f"type '{type_of(container).name}' does not support field selection")


def has_field(container: Any, name: str) -> bool:
    """``has(x.name)``."""
    if isinstance(container, Mapping):
        return name in container
    if container.__class__ is OptionalValue:
        return container.present and has_field(container.value, name)
    raise CelRuntimeError(f"invalid type for field selection: {type_of(container).name}")


def contains(elem: Any, container: Any) -> bool:
    """CEL ``@in``."""
    cls = container.__class__
    if cls in LIST_TYPES:
        ecls = elem.__class__
        if ecls is str:
            for v in container:
                if v.__class__ is str and v == elem:
                    return True
            return False
        for v in container:
            try:
                if equals(elem, v):
                    return True
            except CelRuntimeError:
                continue
        return False
    if isinstance(container, Mapping):
        if elem.__class__ is str:
            return elem in container
        try:
            found, _ = map_lookup(container, elem)
        except CelRuntimeError:
            return False
        return found
    raise CelRuntimeError("no such overload")


def optional_select(opt: OptionalValue, name: str) -> OptionalValue:
    """``opt.field`` / ``x.?field`` chaining on an optional."""
    if not opt.present:
        return NONE
    return optional_select_value(opt.value, name)


def optional_select_value(container: Any, name: str) -> OptionalValue:
    """``x.?name``: optional.of(x.name) if present, else optional.none()."""
    if container.__class__ is OptionalValue:
        return optional_select(container, name)
    if isinstance(container, Mapping):
        v = container.get(name, MISSING)
        if v is MISSING:
            return NONE
        return OptionalValue(v)
    raise CelRuntimeError(f"type '{type_of(container).name}' does not support field selection")


def optional_index(opt: Any, key: Any) -> OptionalValue:
    """``x[?key]``."""
    if opt.__class__ is OptionalValue:
        if not opt.present:
            return NONE
        opt = opt.value
    cls = opt.__class__
    if cls in LIST_TYPES:
        kcls = key.__class__
        if kcls is not int and kcls is not Uint and kcls is not float:
            raise CelRuntimeError("no such overload")
        if kcls is float and key != int(key):
            raise CelRuntimeError("unsupported index value")
        i = int(key)
        if 0 <= i < len(opt):
            return OptionalValue(opt[i])
        return NONE
    if isinstance(opt, Mapping):
        found, v = map_lookup(opt, key)
        return OptionalValue(v) if found else NONE
    raise CelRuntimeError("no such overload")


def size(value: Any) -> int:
    cls = value.__class__
    if cls is str or cls is bytes or cls in LIST_TYPES or isinstance(value, Mapping):
        return len(value)
    raise CelRuntimeError("no such overload")


def to_bool_result(value: Any) -> bool:
    """The selector result rule (``DeviceMatches``): a non-bool result is a runtime error."""
    if value is True or value is False:
        return value
    raise CelRuntimeError(
        f"CEL result of type {type_of(value).name} could not be converted to bool"
    )


def iter_range(value: Any) -> Any:
    """Comprehension range: a list's elements or a map's keys."""
    cls = value.__class__
    if cls in LIST_TYPES:
        return value
    if isinstance(value, Mapping):
        return list(value.keys())
    raise CelRuntimeError(f"got '{go_type_name(value)}', expected iterable type")


def iter_pairs(value: Any) -> Any:
    """Two-variable comprehension range: (index, element) or (key, value)."""
    cls = value.__class__
    if cls in LIST_TYPES:
        return list(enumerate(value))
    if isinstance(value, Mapping):
        return list(value.items())
    raise CelRuntimeError(f"got '{go_type_name(value)}', expected iterable type")


def make_map(entries: list[tuple[Any, Any]]) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    for k, v in entries:
        map_key(k)
        found, _ = map_lookup(out, k) if out else (False, None)
        if found:
            raise CelRuntimeError(f"Failed with repeated key: {format_key(k)}")
        out[k] = v
    return out


def not_strictly_false(value: Any) -> bool:
    return value is not False
