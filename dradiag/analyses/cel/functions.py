"""The function table of the Kubernetes DRA CEL environment: declarations for the checker, implementations for the runtime.

One row per function: its overload signatures (``recv.(args)->result`` for a receiver call,
``(args)->result`` for a global one) and the Python implementation, which takes the
receiver first and dispatches on runtime types itself. Operators are declared here too so
that the checker reports cel-go's ``found no matching overload for '_>_' applied to
'(kubernetes.Quantity, kubernetes.Quantity)'``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from . import k8slib, regex, runtime, stdlib
from .typesys import T, parse_type

__all__ = ["Overload", "DECLARATIONS", "GLOBAL_IMPLS", "RECEIVER_IMPLS", "NAMESPACED", "declare"]


@dataclass(frozen=True, slots=True)
class Overload:
    receiver: bool
    params: tuple[T, ...]
    result: T


DECLARATIONS: dict[str, list[Overload]] = {}
GLOBAL_IMPLS: dict[str, Callable[..., Any]] = {}
RECEIVER_IMPLS: dict[str, Callable[..., Any]] = {}

# Functions spelled `ns.name(...)`; the parser reads them as receiver calls on an identifier.
NAMESPACED = frozenset({"sets", "strings", "lists", "optional", "ip"})


def _split_args(text: str) -> list[str]:
    out: list[str] = []
    depth = 0
    start = 0
    for i, ch in enumerate(text):
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        elif ch == "," and depth == 0:
            out.append(text[start:i])
            start = i + 1
    tail = text[start:]
    if tail.strip():
        out.append(tail)
    return out


def _parse_signature(sig: str) -> Overload:
    params_text, _, result_text = sig.rpartition("->")
    receiver = not params_text.startswith("(")
    if receiver:
        recv_text, _, args_text = params_text.partition(".(")
        params = [recv_text, *_split_args(args_text[:-1])]
    else:
        params = _split_args(params_text[1:-1])
    return Overload(receiver, tuple(parse_type(p) for p in params), parse_type(result_text))


def declare(name: str, signatures: str, impl: Callable[..., Any] | None = None) -> None:
    overloads = [_parse_signature(s) for s in signatures.split()]
    DECLARATIONS.setdefault(name, []).extend(overloads)
    if impl is not None:
        if any(o.receiver for o in overloads):
            RECEIVER_IMPLS[name] = impl
        if any(not o.receiver for o in overloads):
            GLOBAL_IMPLS[name] = impl


_NUM = ("int", "uint", "double")
_ORDERED = ("int", "uint", "double", "string", "bytes", "bool")
_CROSS = [(a, b) for a in _NUM for b in _NUM if a != b]

# Operators (implemented inline by the code generator; declared for the checker).
declare("_+_", "(int,int)->int (uint,uint)->uint (double,double)->double (string,string)->string "
        "(bytes,bytes)->bytes (list(A),list(A))->list(A)")  # fmt: skip
for _op in ("_-_", "_*_", "_/_"):
    declare(_op, "(int,int)->int (uint,uint)->uint (double,double)->double")
declare("_%_", "(int,int)->int (uint,uint)->uint")
declare("-_", "(int)->int (double)->double")
declare("!_", "(bool)->bool")
declare("_==_", "(A,A)->bool")
declare("_!=_", "(A,A)->bool")
for _op in ("_<_", "_<=_", "_>_", "_>=_"):
    declare(_op, " ".join(f"({t},{t})->bool" for t in _ORDERED))
    # CrossTypeNumericComparisons (Kubernetes base environment since 1.28).
    declare(_op, " ".join(f"({a},{b})->bool" for a, b in _CROSS))
declare("@in", "(A,list(A))->bool (K,map(K,V))->bool")
declare("_&&_", "(bool,bool)->bool")
declare("_||_", "(bool,bool)->bool")
declare("_?_:_", "(bool,A,A)->A")

# Standard functions.
declare("size", "(string)->int (bytes)->int (list(A))->int (map(K,V))->int "
        "string.()->int bytes.()->int list(A).()->int map(K,V).()->int", stdlib.size)  # fmt: skip
declare("contains", "string.(string)->bool", stdlib.str_contains)
declare("startsWith", "string.(string)->bool", stdlib.starts_with)
declare("endsWith", "string.(string)->bool", stdlib.ends_with)
declare("matches", "string.(string)->bool (string,string)->bool", regex.matches)
declare("int", "(int)->int (uint)->int (double)->int (string)->int", stdlib.to_int)
declare("uint", "(uint)->uint (int)->uint (double)->uint (string)->uint", stdlib.to_uint)
declare(
    "double", "(double)->double (int)->double (uint)->double (string)->double", stdlib.to_double
)
declare("string", "(string)->string (int)->string (uint)->string (double)->string (bytes)->string "
        "(bool)->string (ip)->string (cidr)->string (url)->string", stdlib.to_string)  # fmt: skip
declare("bytes", "(bytes)->bytes (string)->bytes", stdlib.to_bytes)
declare("bool", "(bool)->bool (string)->bool", stdlib.to_bool)
declare("type", "(A)->type(A)", stdlib.to_type)
declare("dyn", "(A)->dyn", stdlib.to_dyn)

# ext.Strings v2.
declare("charAt", "string.(int)->string", stdlib.char_at)
declare(
    "indexOf", "string.(string)->int string.(string,int)->int list(A).(A)->int", stdlib.index_of
)
declare(
    "lastIndexOf",
    "string.(string)->int string.(string,int)->int list(A).(A)->int",
    stdlib.last_index_of,
)
declare("lowerAscii", "string.()->string", stdlib.lower_ascii)
declare("upperAscii", "string.()->string", stdlib.upper_ascii)
declare(
    "replace", "string.(string,string)->string string.(string,string,int)->string", stdlib.replace
)
declare("split", "string.(string)->list(string) string.(string,int)->list(string)", stdlib.split)
declare("substring", "string.(int)->string string.(int,int)->string", stdlib.substring)
declare("trim", "string.()->string", stdlib.trim)
declare("join", "list(string).()->string list(string).(string)->string", stdlib.join)
declare("format", "string.(list(dyn))->string", stdlib.string_format)
declare("strings.quote", "(string)->string", stdlib.quote)

# Regex (library.Regex).
declare("find", "string.(string)->string", regex.find)
declare(
    "findAll", "string.(string)->list(string) string.(string,int)->list(string)", regex.find_all
)

# Lists: library.Lists and ext.Lists.
declare("isSorted", "list(A).()->bool", stdlib.is_sorted)
declare("sum", "list(A).()->A", stdlib.list_sum)
declare("min", "list(A).()->A", stdlib.list_min)
declare("max", "list(A).()->A", stdlib.list_max)
declare("slice", "list(A).(int,int)->list(A)", stdlib.list_slice)
declare("flatten", "list(A).()->list(dyn) list(A).(int)->list(dyn)", stdlib.flatten)
declare("distinct", "list(A).()->list(A)", stdlib.distinct)
declare("reverse", "list(A).()->list(A) string.()->string", stdlib.reverse)
declare("sort", "list(A).()->list(A)", stdlib.list_sort)
declare("first", "list(A).()->opt(A)", stdlib.list_first)
declare("last", "list(A).()->opt(A)", stdlib.list_last)
declare("lists.range", "(int)->list(int)", stdlib.lists_range)

# ext.Sets.
declare("sets.contains", "(list(A),list(A))->bool", stdlib.sets_contains)
declare("sets.equivalent", "(list(A),list(A))->bool", stdlib.sets_equivalent)
declare("sets.intersects", "(list(A),list(A))->bool", stdlib.sets_intersects)

# Optionals.
declare("optional.of", "(A)->opt(A)", stdlib.optional_of)
declare("optional.ofNonZeroValue", "(A)->opt(A)", stdlib.optional_of_non_zero)
declare("optional.none", "()->opt(dyn)", stdlib.optional_none)
declare("hasValue", "opt(A).()->bool", stdlib.opt_has_value)
declare("value", "opt(A).()->A", stdlib.opt_value)
declare("orValue", "opt(A).(A)->A", stdlib.opt_or_value)
declare("or", "opt(A).(opt(A))->opt(A)", stdlib.opt_or)

# Kubernetes Quantity.
declare("quantity", "(string)->Q", k8slib.quantity)
declare("isQuantity", "(string)->bool", k8slib.is_quantity)
declare("sign", "Q.()->int", k8slib.q_sign)
declare("isInteger", "Q.()->bool", k8slib.q_is_integer)
declare("asInteger", "Q.()->int", k8slib.q_as_integer)
declare("asApproximateFloat", "Q.()->double", k8slib.q_as_approximate_float)
declare("add", "Q.(Q)->Q Q.(int)->Q", k8slib.q_add)
declare("sub", "Q.(Q)->Q Q.(int)->Q", k8slib.q_sub)
declare("isGreaterThan", "Q.(Q)->bool S.(S)->bool", k8slib.is_greater_than)
declare("isLessThan", "Q.(Q)->bool S.(S)->bool", k8slib.is_less_than)
declare("compareTo", "Q.(Q)->int S.(S)->int", k8slib.compare_to)

# Kubernetes Semver (SemverLib v1: with the normalize argument).
declare("semver", "(string)->S (string,bool)->S", k8slib.semver)
declare("isSemver", "(string)->bool (string,bool)->bool", k8slib.is_semver)
declare("major", "S.()->int", k8slib.sv_major)
declare("minor", "S.()->int", k8slib.sv_minor)
declare("patch", "S.()->int", k8slib.sv_patch)

# DRA includes (dra_includes_dyn_dyn).
declare("includes", "dyn.(dyn)->bool", k8slib.includes)

# URLs.
declare("url", "(string)->url", k8slib.url)
declare("isURL", "(string)->bool", k8slib.is_url)
declare("getScheme", "url.()->string", k8slib.url_scheme)
declare("getHost", "url.()->string", k8slib.url_host)
declare("getHostname", "url.()->string", k8slib.url_hostname)
declare("getPort", "url.()->string", k8slib.url_port)
declare("getEscapedPath", "url.()->string", k8slib.url_escaped_path)
declare("getQuery", "url.()->map(string,list(string))", k8slib.url_query)

# IP and CIDR.
declare("ip", "(string)->ip cidr.()->ip", k8slib.ip)
declare("isIP", "(string)->bool", k8slib.is_ip)
declare("ip.isCanonical", "(string)->bool", k8slib.ip_is_canonical)
declare("family", "ip.()->int", k8slib.ip_family)
declare("isUnspecified", "ip.()->bool", k8slib.ip_is_unspecified)
declare("isLoopback", "ip.()->bool", k8slib.ip_is_loopback)
declare("isLinkLocalMulticast", "ip.()->bool", k8slib.ip_is_link_local_multicast)
declare("isLinkLocalUnicast", "ip.()->bool", k8slib.ip_is_link_local_unicast)
declare("isGlobalUnicast", "ip.()->bool", k8slib.ip_is_global_unicast)
declare("cidr", "(string)->cidr", k8slib.cidr)
declare("isCIDR", "(string)->bool", k8slib.is_cidr)
declare("containsIP", "cidr.(ip)->bool cidr.(string)->bool", k8slib.cidr_contains_ip)
declare("containsCIDR", "cidr.(cidr)->bool cidr.(string)->bool", k8slib.cidr_contains_cidr)
declare("masked", "cidr.()->cidr", k8slib.cidr_masked)
declare("prefixLength", "cidr.()->int", k8slib.cidr_prefix_length)

# Operators used by generated code for dynamic operands.
OPERATOR_IMPLS: dict[str, Callable[..., Any]] = {
    "_+_": runtime.add,
    "_-_": runtime.sub,
    "_*_": runtime.mul,
    "_/_": runtime.div,
    "_%_": runtime.mod,
    "-_": runtime.neg,
    "!_": runtime.logical_not,
    "_==_": runtime.equals,
    "_!=_": runtime.not_equals,
    "_<_": runtime.less,
    "_<=_": runtime.less_equals,
    "_>_": runtime.greater,
    "_>=_": runtime.greater_equals,
    "@in": runtime.contains,
}
