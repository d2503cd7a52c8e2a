"""Implementations of CEL's standard functions and the cel-go extension libraries Kubernetes loads.

Standard: ``size``, ``contains``/``startsWith``/``endsWith``, conversions (``int``, ``uint``,
``double``, ``string``, ``bytes``, ``bool``, ``type``, ``dyn``). ext.Strings v2:
``charAt``, ``indexOf``, ``lastIndexOf``, ``lowerAscii``, ``upperAscii``, ``replace``,
``split``, ``substring``, ``trim``, ``join``, ``format``, ``strings.quote``. Kubernetes
``library.Lists`` (``isSorted``, ``sum``, ``min``, ``max``, ``indexOf``, ``lastIndexOf``)
and ext.Lists (``slice``, ``flatten``, ``distinct``, ``reverse``, ``sort``, ``first``,
``last``, ``lists.range``), ext.Sets and the optional library. Each function takes its
receiver first and raises ``no such overload`` on operand types it does not accept; string
indexes count code points, as Go's ``[]rune`` does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from .errors import CelRuntimeError
from .quantity import Quantity
from .runtime import (
    INT64_MAX,
    INT64_MIN,
    LIST_TYPES,
    NONE,
    UINT64_MAX,
    CelType,
    OptionalValue,
    Uint,
    compare,
    equals,
    raise_no_such_overload,
    type_of,
)
from .semver import Semver

_NO = raise_no_such_overload


def _is_str(v: Any) -> bool:
    return v.__class__ is str


def _is_int(v: Any) -> bool:
    return v.__class__ is int


def _is_list(v: Any) -> bool:
    return v.__class__ in LIST_TYPES


# --------------------------------------------------------------------------------------
# Standard string predicates
# --------------------------------------------------------------------------------------
def str_contains(s: Any, sub: Any) -> bool:
    if s.__class__ is str and sub.__class__ is str:
        return sub in s
    _NO()


def starts_with(s: Any, prefix: Any) -> bool:
    if s.__class__ is str and prefix.__class__ is str:
        return s.startswith(prefix)
    _NO()


def ends_with(s: Any, suffix: Any) -> bool:
    if s.__class__ is str and suffix.__class__ is str:
        return s.endswith(suffix)
    _NO()


# --------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------
def to_int(v: Any) -> int:
    cls = v.__class__
    if cls is int:
        return v
    if cls is Uint:
        if v > INT64_MAX:
            raise CelRuntimeError("integer overflow")
        return int(v)
    if cls is float:
        if math.isnan(v) or math.isinf(v) or not (-(2.0**63) < v < 2.0**63):
            raise CelRuntimeError("integer overflow")
        r = int(v)
        if r == INT64_MAX + 1 or r < INT64_MIN:
            raise CelRuntimeError("integer overflow")
        return r
    if cls is str:
        try:
            r = _go_parse_int(v)
        except ValueError:
            raise CelRuntimeError(f"cannot convert string '{v}' to int") from None
        if r < INT64_MIN or r > INT64_MAX:
            raise CelRuntimeError("integer overflow")
        return r
    if cls is Quantity:
        _NO()
    _NO()


def _go_parse_int(s: str) -> int:
    # strconv.ParseInt(s, 10, 64): optional sign, decimal digits only.
    body = s[1:] if s[:1] in "+-" else s
    if not body or not body.isascii() or not body.isdigit():
        raise ValueError(s)
    return int(s)


def to_uint(v: Any) -> Uint:
    cls = v.__class__
    if cls is Uint:
        return v
    if cls is int:
        if v < 0:
            raise CelRuntimeError("unsigned integer overflow")
        return Uint(v)
    if cls is float:
        if math.isnan(v) or math.isinf(v) or not (-1.0 < v < 2.0**64):
            raise CelRuntimeError("unsigned integer overflow")
        return Uint(int(v))
    if cls is str:
        if not v or not v.isascii() or not v.isdigit():
            raise CelRuntimeError(f"cannot convert string '{v}' to uint")
        r = int(v)
        if r > UINT64_MAX:
            raise CelRuntimeError("unsigned integer overflow")
        return Uint(r)
    _NO()


def to_double(v: Any) -> float:
    cls = v.__class__
    if cls is float:
        return v
    if cls is int or cls is Uint:
        return float(v)
    if cls is str:
        try:
            return _go_parse_float(v)
        except ValueError:
            raise CelRuntimeError(f"cannot convert string '{v}' to double") from None
    _NO()


def _go_parse_float(s: str) -> float:
    lower = s.lower()
    if lower in ("inf", "+inf", "infinity", "+infinity"):
        return math.inf
    if lower in ("-inf", "-infinity"):
        return -math.inf
    if lower == "nan":
        return math.nan
    if "_" in s or not s.isascii() or s.strip() != s or "n" in lower:
        raise ValueError(s)
    return float(s)


def format_double(d: float) -> str:
    """Go ``strconv.FormatFloat(d, 'g', -1, 64)``, as cel-go's ``string(double)``."""
    if math.isnan(d):
        return "NaN"
    if math.isinf(d):
        return "+Inf" if d > 0 else "-Inf"
    if d == 0:
        return "-0" if math.copysign(1.0, d) < 0 else "0"
    r = repr(d)
    sign = ""
    if r[0] == "-":
        sign, r = "-", r[1:]
    mantissa, _, exp_text = r.partition("e")
    exp = int(exp_text) if exp_text else 0
    int_part, _, frac_part = mantissa.partition(".")
    if frac_part == "0":
        frac_part = ""
    digits = (int_part + frac_part).lstrip("0")
    # decimal point position relative to the start of `digits`
    point = (
        len(int_part) + exp - (len(int_part + frac_part) - len((int_part + frac_part).lstrip("0")))
    )
    digits = digits.rstrip("0") or "0"
    x = point - 1  # exponent in d.ddd form
    if x < -4 or x >= 21:
        m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{m}e{'+' if x >= 0 else '-'}{abs(x):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * (-point)}{digits}"
    if point >= len(digits):
        return f"{sign}{digits}{'0' * (point - len(digits))}"
    return f"{sign}{digits[:point]}.{digits[point:]}"


def to_string(v: Any) -> str:
    cls = v.__class__
    if cls is str:
        return v
    if cls is bool:
        return "true" if v else "false"
    if cls is int or cls is Uint:
        return str(int(v))
    if cls is float:
        return format_double(v)
    if cls is bytes:
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            raise CelRuntimeError("invalid UTF-8 in bytes, cannot convert to string") from None
    to_cel_string = getattr(v, "cel_string", None)
    if to_cel_string is not None:
        return str(to_cel_string())
    _NO()


def to_bytes(v: Any) -> bytes:
    if v.__class__ is bytes:
        return v
    if v.__class__ is str:
        return v.encode("utf-8")
    _NO()


_BOOL_STRINGS = {
    "1": True, "t": True, "T": True, "TRUE": True, "true": True, "True": True,
    "0": False, "f": False, "F": False, "FALSE": False, "false": False, "False": False,
}  # fmt: skip


def to_bool(v: Any) -> bool:
    if v.__class__ is bool:
        return v
    if v.__class__ is str:
        r = _BOOL_STRINGS.get(v)
        if r is None:
            raise CelRuntimeError(f"Type conversion error from 'string' to 'bool': {v}")
        return r
    _NO()


def to_type(v: Any) -> CelType:
    return type_of(v)


def to_dyn(v: Any) -> Any:
    return v


def size(v: Any) -> int:
    cls = v.__class__
    if cls is str or cls is bytes or cls in LIST_TYPES or isinstance(v, Mapping):
        return len(v)
    _NO()


# --------------------------------------------------------------------------------------
# ext.Strings (v2)
# --------------------------------------------------------------------------------------
def char_at(s: Any, i: Any) -> str:
    if not (_is_str(s) and _is_int(i)):
        _NO()
    if i < 0 or i > len(s):
        raise CelRuntimeError(f"index out of range: {i}")
    return s[i] if i < len(s) else ""


def index_of(s: Any, sub: Any, offset: Any = 0) -> int:
    if _is_list(s):
        if offset != 0:
            _NO()
        return list_index_of(s, sub)
    if not (_is_str(s) and _is_str(sub) and _is_int(offset)):
        _NO()
    if offset < 0 or offset > len(s):
        raise CelRuntimeError(f"index out of range: {offset}")
    return s.find(sub, offset)


def last_index_of(s: Any, sub: Any, offset: Any = None) -> int:
    if _is_list(s):
        if offset is not None:
            _NO()
        return list_last_index_of(s, sub)
    if not (_is_str(s) and _is_str(sub)) or (offset is not None and not _is_int(offset)):
        _NO()
    if offset is None:
        return s.rfind(sub)
    if offset < 0 or offset > len(s):
        raise CelRuntimeError(f"index out of range: {offset}")
    return s.rfind(sub, 0, offset + len(sub))


_UPPER_TO_LOWER = {c: c + 32 for c in range(65, 91)}
_LOWER_TO_UPPER = {c: c - 32 for c in range(97, 123)}


def lower_ascii(s: Any) -> str:
    if s.__class__ is not str:
        _NO()
    return s.lower() if s.isascii() else s.translate(_UPPER_TO_LOWER)


def upper_ascii(s: Any) -> str:
    if s.__class__ is not str:
        _NO()
    return s.upper() if s.isascii() else s.translate(_LOWER_TO_UPPER)


def replace(s: Any, old: Any, new: Any, n: Any = -1) -> str:
    if not (_is_str(s) and _is_str(old) and _is_str(new) and _is_int(n)):
        _NO()
    if n == 0:
        return s
    if old == "":
        # Go strings.Replace with an empty old string inserts `new` around every rune.
        parts = list(s)
        out = [new]
        count = 1
        for ch in parts:
            out.append(ch)
            if n < 0 or count < n:
                out.append(new)
                count += 1
        return "".join(out)
    return s.replace(old, new, n if n >= 0 else -1)


def split(s: Any, sep: Any, n: Any = -1) -> list[str]:
    if not (_is_str(s) and _is_str(sep) and _is_int(n)):
        _NO()
    if n == 0:
        return []
    if sep == "":
        chars = list(s)
        if 0 < n < len(chars):
            return [*chars[: n - 1], "".join(chars[n - 1 :])]
        return chars
    if n < 0:
        return s.split(sep)
    return s.split(sep, n - 1)


def substring(s: Any, start: Any, end: Any = None) -> str:
    if not (_is_str(s) and _is_int(start)) or (end is not None and not _is_int(end)):
        _NO()
    if end is None:
        end = len(s)
        if start < 0 or start > len(s):
            raise CelRuntimeError(f"index out of range: {start}")
        return s[start:]
    if start < 0 or start > len(s):
        raise CelRuntimeError(f"index out of range: {start}")
    if end < 0 or end > len(s):
        raise CelRuntimeError(f"index out of range: {end}")
    if start > end:
        raise CelRuntimeError(f"invalid substring range. start: {start}, end: {end}")
    return s[start:end]


# Go unicode.IsSpace
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a\u2028\u2029\u202f\u205f\u3000"


def trim(s: Any) -> str:
    if s.__class__ is not str:
        _NO()
    return s.strip(_GO_SPACE)


def join(lst: Any, sep: Any = "") -> str:
    if not _is_list(lst) or not _is_str(sep):
        _NO()
    for item in lst:
        if item.__class__ is not str:
            _NO()
    return sep.join(lst)


def quote(s: Any) -> str:
    if s.__class__ is not str:
        _NO()
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch in "\a\b\f\n\r\t\v":
            out.append(
                {
                    "\a": "\\a",
                    "\b": "\\b",
                    "\f": "\\f",
                    "\n": "\\n",
                    "\r": "\\r",
                    "\t": "\\t",
                    "\v": "\\v",
                }[ch]
            )
        elif o < 0x20 or o == 0x7F:
            out.append(f"\\x{o:02x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _format_value(v: Any, nested: bool = False) -> str:
    cls = v.__class__
    if cls is str:
        return v
    if cls is bool:
        return "true" if v else "false"
    if cls is int or cls is Uint:
        return str(int(v))
    if cls is float:
        if math.isinf(v):
            return "Infinity" if v > 0 else "-Infinity"
        return format_double(v)
    if v is None:
        return "null"
    if cls is bytes:
        return v.decode("utf-8", "replace")
    if cls in LIST_TYPES:
        return "[" + ", ".join(_format_value(x, True) for x in v) + "]"
    if isinstance(v, Mapping):
        items = sorted(((_format_value(k, True), _format_value(x, True)) for k, x in v.items()))
        return "{" + ", ".join(f"{k}: {x}" for k, x in items) + "}"
    if cls is CelType:
        return v.name
    if cls is Quantity or cls is Semver:
        return str(v)
    return str(v)


def string_format(fmt: Any, args: Any) -> str:
    if not _is_str(fmt) or not _is_list(args):
        _NO()
    out: list[str] = []
    i, argi, n = 0, 0, len(fmt)
    while i < n:
        ch = fmt[i]
        if ch != "%":
            out.append(ch)
            i += 1
            continue
        i += 1
        if i >= n:
            raise CelRuntimeError("unexpected end of format string")
        if fmt[i] == "%":
            out.append("%")
            i += 1
            continue
        precision: int | None = None
        if fmt[i] == ".":
            j = i + 1
            while j < n and fmt[j].isdigit():
                j += 1
            precision = int(fmt[i + 1 : j] or "0")
            i = j
        if i >= n:
            raise CelRuntimeError("unexpected end of format string")
        verb = fmt[i]
        i += 1
        if argi >= len(args):
            raise CelRuntimeError(f"index {argi} out of range")
        arg = args[argi]
        argi += 1
        out.append(_format_verb(verb, arg, precision))
    return "".join(out)


def _format_verb(verb: str, arg: Any, precision: int | None) -> str:
    cls = arg.__class__
    if verb == "s":
        return _format_value(arg)
    if verb == "d":
        if cls is int or cls is Uint:
            return str(int(arg))
        if cls is float and (math.isnan(arg) or math.isinf(arg)):
            return format_double(arg).replace("+Inf", "Infinity").replace("-Inf", "-Infinity")
        raise CelRuntimeError(
            f"error during formatting: decimal clause can only be used on integers, was given {type_of(arg).name}"
        )
    if verb in "fe":
        if cls is int or cls is Uint or cls is float:
            d = float(arg)
            if math.isnan(d):
                return "NaN"
            if math.isinf(d):
                return "Infinity" if d > 0 else "-Infinity"
            p = 6 if precision is None else precision
            return f"{d:.{p}{verb}}"
        raise CelRuntimeError(
            f"error during formatting: fixed-point clause can only be used on doubles, was given {type_of(arg).name}"
        )
    if verb == "b":
        if cls is int or cls is Uint:
            return format(int(arg), "b")
        if cls is bool:
            return "1" if arg else "0"
        raise CelRuntimeError(
            f"error during formatting: only integers and bools can be formatted as binary, was given {type_of(arg).name}"
        )
    if verb == "o":
        if cls is int or cls is Uint:
            return format(int(arg), "o")
        raise CelRuntimeError(
            f"error during formatting: octal clause can only be used on integers, was given {type_of(arg).name}"
        )
    if verb in "xX":
        if cls is int or cls is Uint:
            r = format(int(arg), "x")
        elif cls is str:
            r = arg.encode("utf-8").hex()
        elif cls is bytes:
            r = arg.hex()
        else:
            raise CelRuntimeError(
                f"error during formatting: only integers, byte buffers, and strings can be formatted as hex, was given {type_of(arg).name}"
            )
        return r.upper() if verb == "X" else r
    raise CelRuntimeError(
        f'could not parse formatting clause: unrecognized formatting clause "{verb}"'
    )


# --------------------------------------------------------------------------------------
# Lists: Kubernetes library.Lists and cel-go ext.Lists
# --------------------------------------------------------------------------------------
def list_index_of(lst: Any, v: Any) -> int:
    for i, x in enumerate(lst):
        if equals(x, v):
            return i
    return -1


def list_last_index_of(lst: Any, v: Any) -> int:
    for i in range(len(lst) - 1, -1, -1):
        if equals(lst[i], v):
            return i
    return -1


def is_sorted(lst: Any) -> bool:
    if not _is_list(lst):
        _NO()
    return all(compare(lst[i], lst[i + 1]) <= 0 for i in range(len(lst) - 1))


def list_sum(lst: Any) -> Any:
    if not _is_list(lst):
        _NO()
    if not lst:
        return 0
    from .runtime import add

    total = lst[0]
    if total.__class__ not in (int, Uint, float):
        _NO()
    for x in lst[1:]:
        total = add(total, x)
    return total


def list_min(lst: Any) -> Any:
    if not _is_list(lst):
        _NO()
    if not lst:
        raise CelRuntimeError("min called on empty list")
    best = lst[0]
    for x in lst[1:]:
        if compare(x, best) < 0:
            best = x
    return best


def list_max(lst: Any) -> Any:
    if not _is_list(lst):
        _NO()
    if not lst:
        raise CelRuntimeError("max called on empty list")
    best = lst[0]
    for x in lst[1:]:
        if compare(x, best) > 0:
            best = x
    return best


def list_slice(lst: Any, start: Any, end: Any) -> list[Any]:
    if not (_is_list(lst) and _is_int(start) and _is_int(end)):
        _NO()
    if start < 0 or end < 0:
        raise CelRuntimeError(
            f"cannot slice(start={start}, end={end}), negative indexes not supported"
        )
    if start > end:
        raise CelRuntimeError(
            f"cannot slice(start={start}, end={end}), start must be less than or equal to end"
        )
    if end > len(lst):
        raise CelRuntimeError(f"cannot slice(start={start}, end={end}), list is length {len(lst)}")
    return list(lst[start:end])


def flatten(lst: Any, depth: Any = 1) -> list[Any]:
    if not (_is_list(lst) and _is_int(depth)):
        _NO()
    if depth < 0:
        raise CelRuntimeError("level must be non-negative")
    out: list[Any] = []
    for x in lst:
        if _is_list(x) and depth > 0:
            out.extend(flatten(x, depth - 1))
        else:
            out.append(x)
    return out


def distinct(lst: Any) -> list[Any]:
    if not _is_list(lst):
        _NO()
    out: list[Any] = []
    for x in lst:
        if not any(equals(x, y) for y in out):
            out.append(x)
    return out


def reverse(v: Any) -> Any:
    if _is_list(v):
        return list(reversed(v))
    if v.__class__ is str:
        return v[::-1]
    _NO()


def list_sort(lst: Any) -> list[Any]:
    if not _is_list(lst):
        _NO()
    import functools

    if lst:
        first = lst[0].__class__
        for x in lst:
            if x.__class__ is not first and not (
                x.__class__ in (int, Uint, float) and first in (int, Uint, float)
            ):
                raise CelRuntimeError("list elements must have the same type")
    return sorted(lst, key=functools.cmp_to_key(compare))


def lists_range(n: Any) -> list[int]:
    if not _is_int(n):
        _NO()
    return list(range(n))


def list_first(lst: Any) -> OptionalValue:
    if not _is_list(lst):
        _NO()
    return OptionalValue(lst[0]) if lst else NONE


def list_last(lst: Any) -> OptionalValue:
    if not _is_list(lst):
        _NO()
    return OptionalValue(lst[-1]) if lst else NONE


# ext.Sets
def _in_list(x: Any, lst: Any) -> bool:
    for y in lst:
        try:
            if equals(x, y):
                return True
        except CelRuntimeError:
            continue
    return False


def sets_contains(a: Any, b: Any) -> bool:
    if not (_is_list(a) and _is_list(b)):
        _NO()
    return all(_in_list(x, a) for x in b)


def sets_equivalent(a: Any, b: Any) -> bool:
    return sets_contains(a, b) and sets_contains(b, a)


def sets_intersects(a: Any, b: Any) -> bool:
    if not (_is_list(a) and _is_list(b)):
        _NO()
    return any(_in_list(x, b) for x in a)


# --------------------------------------------------------------------------------------
# Optionals
# --------------------------------------------------------------------------------------
def optional_of(v: Any) -> OptionalValue:
    return OptionalValue(v)


def optional_none() -> OptionalValue:
    return NONE


def _is_zero(v: Any) -> bool:
    cls = v.__class__
    if v is None:
        return True
    if cls is bool:
        return v is False
    if cls in (int, Uint, float):
        return bool(v == 0)
    if cls in (str, bytes) or cls in LIST_TYPES or isinstance(v, Mapping):
        return len(v) == 0
    return False


def optional_of_non_zero(v: Any) -> OptionalValue:
    return NONE if _is_zero(v) else OptionalValue(v)


def opt_has_value(o: Any) -> bool:
    if o.__class__ is not OptionalValue:
        _NO()
    return bool(o.present)


def opt_value(o: Any) -> Any:
    if o.__class__ is not OptionalValue:
        _NO()
    if not o.present:
        raise CelRuntimeError("optional.none() dereference")
    return o.value


def opt_or_value(o: Any, default: Any) -> Any:
    if o.__class__ is not OptionalValue:
        _NO()
    return o.value if o.present else default


def opt_or(o: Any, other: Any) -> Any:
    if o.__class__ is not OptionalValue or other.__class__ is not OptionalValue:
        _NO()
    return o if o.present else other
