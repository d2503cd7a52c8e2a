"""The Kubernetes CEL libraries: Quantity, Semver, DRA ``includes``, URLs, IP and CIDR.

Sources: kubernetes/apiserver ``pkg/cel/library/{quantity,semverlib,lists,urls,ip,cidr}.go``
(k8s-dra-semantics.md §1.4). Quantity and Semver are real types: equality with another
type is an error, and they have no ``<``/``>`` operators (use ``compareTo``,
``isGreaterThan``, ``isLessThan``).
"""

from __future__ import annotations

from typing import Any

from .errors import CelRuntimeError
from .quantity import Quantity, parse_quantity
from .runtime import INT64_MAX, INT64_MIN, LIST_TYPES, equals, raise_no_such_overload
from .semver import Semver, normalize_semver, parse_semver

_NO = raise_no_such_overload

# DRA ``includes`` refuses longer lists (k8s-dra-semantics.md §1.4).
INCLUDES_MAX_LIST = 48


# Quantity ------------------------------------------------------------------------------
def quantity(s: Any) -> Quantity:
    if s.__class__ is not str:
        _NO()
    try:
        return parse_quantity(s)
    except ValueError as exc:
        raise CelRuntimeError(str(exc)) from None


def is_quantity(s: Any) -> bool:
    if s.__class__ is not str:
        _NO()
    try:
        parse_quantity(s)
    except ValueError:
        return False
    return True


def _q(v: Any) -> Quantity:
    if v.__class__ is not Quantity:
        _NO()
    return v  # type: ignore[no-any-return]


def q_sign(q: Any) -> int:
    return _q(q).sign()


def q_is_integer(q: Any) -> bool:
    return _q(q).is_integer()


def q_as_integer(q: Any) -> int:
    try:
        return _q(q).as_integer()
    except ValueError as exc:
        raise CelRuntimeError(str(exc)) from None


def q_as_approximate_float(q: Any) -> float:
    return _q(q).as_approximate_float()


def _q_operand(v: Any) -> Quantity | int:
    if v.__class__ is Quantity:
        return v  # type: ignore[no-any-return]
    if v.__class__ is int:
        return v  # type: ignore[no-any-return]
    _NO()


def q_add(q: Any, other: Any) -> Quantity:
    result = _q(q).add(_q_operand(other))
    _check_quantity_range(result)
    return result


def q_sub(q: Any, other: Any) -> Quantity:
    result = _q(q).sub(_q_operand(other))
    _check_quantity_range(result)
    return result


def _check_quantity_range(q: Quantity) -> None:
    # inf.Dec has no overflow; the CEL library only errors converting back to int64.
    del q


# Semver --------------------------------------------------------------------------------
def semver(s: Any, normalize: Any = False) -> Semver:
    if s.__class__ is not str or normalize.__class__ is not bool:
        _NO()
    text = normalize_semver(s) if normalize else s
    try:
        return parse_semver(text)
    except ValueError as exc:
        raise CelRuntimeError(str(exc)) from None


def is_semver(s: Any, normalize: Any = False) -> bool:
    if s.__class__ is not str or normalize.__class__ is not bool:
        _NO()
    try:
        parse_semver(normalize_semver(s) if normalize else s)
    except ValueError:
        return False
    return True


def _s(v: Any) -> Semver:
    if v.__class__ is not Semver:
        _NO()
    return v  # type: ignore[no-any-return]


def sv_major(v: Any) -> int:
    return _int64(_s(v).major)


def sv_minor(v: Any) -> int:
    return _int64(_s(v).minor)


def sv_patch(v: Any) -> int:
    return _int64(_s(v).patch)


def _int64(n: int) -> int:
    if n < INT64_MIN or n > INT64_MAX:
        raise CelRuntimeError("integer overflow")
    return n


# Shared comparison methods -------------------------------------------------------------
def compare_to(a: Any, b: Any) -> int:
    cls = a.__class__
    if cls is Quantity and b.__class__ is Quantity:
        return a.compare(b)  # type: ignore[no-any-return]
    if cls is Semver and b.__class__ is Semver:
        return a.compare(b)  # type: ignore[no-any-return]
    _NO()


def is_greater_than(a: Any, b: Any) -> bool:
    return compare_to(a, b) > 0


def is_less_than(a: Any, b: Any) -> bool:
    return compare_to(a, b) < 0


# DRA includes --------------------------------------------------------------------------
def includes(receiver: Any, value: Any) -> bool:
    if receiver.__class__ in LIST_TYPES:
        if len(receiver) > INCLUDES_MAX_LIST:
            raise CelRuntimeError(
                f"'includes' function cannot be applied to lists longer than {INCLUDES_MAX_LIST} values"
            )
        for item in receiver:
            try:
                if equals(value, item):
                    return True
            except CelRuntimeError:
                continue
        return False
    return equals(receiver, value)


# URLs (library.URLs) -------------------------------------------------------------------
class URL:
    """A parsed URL (Go ``url.ParseRequestURI``)."""

    __slots__ = ("text", "scheme", "host", "path", "query")
    cel_type_name = "kubernetes.URL"

    def __init__(self, text: str, scheme: str, host: str, path: str, query: str) -> None:
        self.text, self.scheme, self.host, self.path, self.query = text, scheme, host, path, query

    def __eq__(self, other: object) -> bool:
        return isinstance(other, URL) and other.text == self.text

    def __hash__(self) -> int:
        return hash(("URL", self.text))

    def cel_string(self) -> str:
        return self.text


def _parse_url(s: str) -> URL:
    from urllib.parse import urlsplit

    if not s or (not s.startswith("/") and "://" not in s and ":" not in s):
        raise ValueError(f"parse {s!r}: invalid URI for request")
    if " " in s or any(ord(c) < 0x20 for c in s):
        raise ValueError(f"parse {s!r}: invalid character in URL")
    parts = urlsplit(s)
    if not parts.scheme and not s.startswith("/"):
        raise ValueError(f"parse {s!r}: invalid URI for request")
    return URL(s, parts.scheme, parts.netloc.rpartition("@")[2], parts.path, parts.query)


def url(s: Any) -> URL:
    if s.__class__ is not str:
        _NO()
    try:
        return _parse_url(s)
    except ValueError as exc:
        raise CelRuntimeError(f"URL parse error during conversion from string: {exc}") from None


def is_url(s: Any) -> bool:
    if s.__class__ is not str:
        _NO()
    try:
        _parse_url(s)
    except ValueError:
        return False
    return True


def _u(v: Any) -> URL:
    if v.__class__ is not URL:
        _NO()
    return v  # type: ignore[no-any-return]


def url_scheme(u: Any) -> str:
    return _u(u).scheme


def url_host(u: Any) -> str:
    return _u(u).host


def url_hostname(u: Any) -> str:
    host = _u(u).host
    if host.startswith("["):
        return host[1 : host.find("]")]
    return host.rsplit(":", 1)[0] if ":" in host else host


def url_port(u: Any) -> str:
    host = _u(u).host
    if host.startswith("["):
        rest = host[host.find("]") + 1 :]
        return rest[1:] if rest.startswith(":") else ""
    return host.rsplit(":", 1)[1] if ":" in host else ""


def url_escaped_path(u: Any) -> str:
    return _u(u).path


def url_query(u: Any) -> dict[str, list[str]]:
    from urllib.parse import parse_qs

    return {k: list(v) for k, v in parse_qs(_u(u).query, keep_blank_values=True).items()}


# IP and CIDR (library.IP, library.CIDR) ------------------------------------------------
class IP:
    """An IP address; IPv4-mapped IPv6 addresses and zones are rejected, as in Kubernetes."""

    __slots__ = ("addr",)
    cel_type_name = "net.IP"

    def __init__(self, addr: Any) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and other.addr == self.addr

    def __hash__(self) -> int:
        return hash(("IP", self.addr))

    def cel_string(self) -> str:
        return str(self.addr)


class CIDR:
    """An IP prefix as written (the address part is kept, ``masked()`` clears host bits)."""

    __slots__ = ("iface",)
    cel_type_name = "net.CIDR"

    def __init__(self, iface: Any) -> None:
        self.iface = iface

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and other.iface == self.iface

    def __hash__(self) -> int:
        return hash(("CIDR", self.iface))

    def cel_string(self) -> str:
        return str(self.iface)


def _parse_ip(s: str) -> Any:
    import ipaddress

    if "%" in s:
        raise ValueError("IP address with zone value is not allowed")
    addr = ipaddress.ip_address(s)
    if addr.version == 6 and addr.ipv4_mapped is not None:
        raise ValueError("IPv4-mapped IPv6 address is not allowed")
    return addr


def ip(s: Any) -> IP:
    if s.__class__ is CIDR:
        return IP(s.iface.ip)
    if s.__class__ is not str:
        _NO()
    try:
        return IP(_parse_ip(s))
    except ValueError as exc:
        raise CelRuntimeError(
            f"IP Address {s!r} parse error during conversion from string: {exc}"
        ) from None


def is_ip(s: Any) -> bool:
    if s.__class__ is not str:
        _NO()
    try:
        _parse_ip(s)
    except ValueError:
        return False
    return True


def ip_is_canonical(s: Any) -> bool:
    if s.__class__ is not str:
        _NO()
    try:
        return str(_parse_ip(s)) == s
    except ValueError as exc:
        raise CelRuntimeError(
            f"IP Address {s!r} parse error during conversion from string: {exc}"
        ) from None


def _ip(v: Any) -> Any:
    if v.__class__ is not IP:
        _NO()
    return v.addr


def ip_family(v: Any) -> int:
    return int(_ip(v).version)


def ip_is_unspecified(v: Any) -> bool:
    return bool(_ip(v).is_unspecified)


def ip_is_loopback(v: Any) -> bool:
    return bool(_ip(v).is_loopback)


def ip_is_link_local_multicast(v: Any) -> bool:
    a = _ip(v)
    if a.version == 4:
        return a.packed[:3] == b"\xe0\x00\x00"
    return a.packed[0] == 0xFF and (a.packed[1] & 0x0F) == 0x02


def ip_is_link_local_unicast(v: Any) -> bool:
    return bool(_ip(v).is_link_local)


def ip_is_global_unicast(v: Any) -> bool:
    a = _ip(v)
    if a.version == 4 and a.packed == b"\xff\xff\xff\xff":
        return False
    return not (a.is_unspecified or a.is_loopback or a.is_multicast or a.is_link_local)


def _parse_cidr(s: str) -> Any:
    import ipaddress

    if "/" not in s or "%" in s:
        raise ValueError("network address parse error")
    iface = ipaddress.ip_interface(s)
    if iface.version == 6 and iface.ip.ipv4_mapped is not None:
        raise ValueError("IPv4-mapped IPv6 address is not allowed")
    return iface


def cidr(s: Any) -> CIDR:
    if s.__class__ is not str:
        _NO()
    try:
        return CIDR(_parse_cidr(s))
    except ValueError as exc:
        raise CelRuntimeError(
            f"network address parse error during conversion from string: {exc}"
        ) from None


def is_cidr(s: Any) -> bool:
    if s.__class__ is not str:
        _NO()
    try:
        _parse_cidr(s)
    except ValueError:
        return False
    return True


def _c(v: Any) -> Any:
    if v.__class__ is not CIDR:
        _NO()
    return v.iface


def cidr_contains_ip(c: Any, addr: Any) -> bool:
    network = _c(c).network
    a = ip(addr).addr if addr.__class__ is str else _ip(addr)
    return a.version == network.version and a in network


def cidr_contains_cidr(c: Any, other: Any) -> bool:
    network = _c(c).network
    o = cidr(other).iface if other.__class__ is str else _c(other)
    return bool(o.version == network.version and o.network.subnet_of(network))


def cidr_masked(c: Any) -> CIDR:
    import ipaddress

    return CIDR(ipaddress.ip_interface(str(_c(c).network)))


def cidr_prefix_length(c: Any) -> int:
    return int(_c(c).network.prefixlen)
