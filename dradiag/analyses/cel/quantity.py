"""Kubernetes ``resource.Quantity``: parsing, exact arithmetic, comparison, canonical form.

A quantity is held as an exact integer count of nano-units: Kubernetes rounds any value
more precise than ``n`` up (away from zero) to nano precision when it parses it, so every
comparison the scheduler makes is an integer comparison here. The allocator uses the same
type for capacity arithmetic.

Grammar (apimachinery ``resource.ParseQuantity``)::

    <quantity> ::= <signedNumber><suffix>
    <suffix>   ::= Ki | Mi | Gi | Ti | Pi | Ei | n | u | m | "" | k | M | G | T | P | E
                 | e<signedNumber> | E<signedNumber>

``K`` is not a suffix (``200K`` is invalid), ``k`` is.
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

__all__ = ["Quantity", "parse_quantity", "QUANTITY_FORMAT_ERROR"]

NANO: Final = 10**9

QUANTITY_FORMAT_ERROR: Final = (
    "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
)

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL.items()}
_BINARY_SUFFIX = {v: k for k, v in _BINARY.items()}

_NUMBER_RE = re.compile(r"([+-]?)([0-9]*)(?:\.([0-9]*))?")
_EXPONENT_RE = re.compile(r"[eE]([+-]?[0-9]+)")

BINARY_SI: Final = "BinarySI"
DECIMAL_SI: Final = "DecimalSI"
DECIMAL_EXPONENT: Final = "DecimalExponent"

# apimachinery refuses numbers with more digits than this before it even scales them.
_MAX_EXPONENT: Final = 10**6


class Quantity:
    """An exact Kubernetes quantity (integer nano-units plus the suffix family it was written in)."""

    __slots__ = ("nanos", "format", "_hash")

    def __init__(self, nanos: int, fmt: str = DECIMAL_SI) -> None:
        self.nanos = nanos
        self.format = fmt
        self._hash = hash(("Quantity", nanos))

    # Comparison --------------------------------------------------------------------------
    def compare(self, other: Quantity) -> int:
        """Return -1, 0 or 1, like ``Quantity.Cmp``."""
        return (self.nanos > other.nanos) - (self.nanos < other.nanos)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.nanos == other.nanos

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: Quantity) -> bool:
        return self.nanos < other.nanos

    def __le__(self, other: Quantity) -> bool:
        return self.nanos <= other.nanos

    def __gt__(self, other: Quantity) -> bool:
        return self.nanos > other.nanos

    def __ge__(self, other: Quantity) -> bool:
        return self.nanos >= other.nanos

    def __hash__(self) -> int:
        return self._hash

    # Arithmetic --------------------------------------------------------------------------
    def add(self, other: Quantity | int) -> Quantity:
        delta = other.nanos if isinstance(other, Quantity) else other * NANO
        return Quantity(self.nanos + delta, self._sum_format(other))

    def sub(self, other: Quantity | int) -> Quantity:
        delta = other.nanos if isinstance(other, Quantity) else other * NANO
        return Quantity(self.nanos - delta, self._sum_format(other))

    def _sum_format(self, other: Quantity | int) -> str:
        # apimachinery: adding to a zero quantity adopts the other operand's format.
        if self.nanos == 0 and isinstance(other, Quantity):
            return other.format
        return self.format

    __add__ = add
    __sub__ = sub

    def __neg__(self) -> Quantity:
        return Quantity(-self.nanos, self.format)

    def sign(self) -> int:
        return (self.nanos > 0) - (self.nanos < 0)

    def is_integer(self) -> bool:
        """True when the value is a whole number that fits int64 (``AsInt64`` succeeds)."""
        if self.nanos % NANO:
            return False
        return -(2**63) <= self.nanos // NANO < 2**63

    def as_integer(self) -> int:
        if not self.is_integer():
            raise ValueError("cannot convert value to integer")
        return self.nanos // NANO

    def as_approximate_float(self) -> float:
        return self.nanos / NANO

    def as_fraction(self) -> Fraction:
        return Fraction(self.nanos, NANO)

    def value(self) -> int:
        """``Quantity.Value()``: the value rounded up to an integer (ceil)."""
        return -((-self.nanos) // NANO)

    def milli_value(self) -> int:
        return -((-self.nanos) // 10**6)

    # Formatting --------------------------------------------------------------------------
    def __str__(self) -> str:
        return _canonical(self.nanos, self.format)

    def __repr__(self) -> str:
        return f"Quantity({str(self)!r})"


def _canonical(nanos: int, fmt: str) -> str:
    """``Quantity.String()``: the canonical spelling in the quantity's suffix family."""
    if nanos == 0:
        return "0"
    sign = "-" if nanos < 0 else ""
    mag = abs(nanos)
    if fmt == BINARY_SI and mag % NANO == 0 and mag // NANO >= 1024:
        value = mag // NANO
        power = 0
        while power < 6 and value % 1024 == 0:
            value //= 1024
            power += 1
        return f"{sign}{value}{_BINARY_SUFFIX.get(power, '')}"
    # Decimal: the largest exponent (a multiple of 3, -9..18) that keeps the mantissa whole.
    exponent = -9
    mantissa = mag
    while exponent < 18 and mantissa % 1000 == 0:
        mantissa //= 1000
        exponent += 3
    if fmt == DECIMAL_EXPONENT:
        suffix = "" if exponent == 0 else f"e{exponent}"
    else:
        suffix = _DECIMAL_SUFFIX[exponent]
    return f"{sign}{mantissa}{suffix}"


def parse_quantity(text: str) -> Quantity:
    """Parse a Kubernetes quantity string; raise ``ValueError`` on anything apimachinery rejects."""
    if not isinstance(text, str) or not text:
        raise ValueError(QUANTITY_FORMAT_ERROR)
    match = _NUMBER_RE.match(text)
    if match is None:
        raise ValueError(QUANTITY_FORMAT_ERROR)
    sign_text, whole, frac = match.group(1), match.group(2), match.group(3)
    frac = frac or ""
    if not whole and not frac:
        raise ValueError(QUANTITY_FORMAT_ERROR)
    suffix = text[match.end() :]
    if suffix in _BINARY:
        fmt = BINARY_SI
        multiplier = Fraction(1024 ** _BINARY[suffix])
    elif suffix in _DECIMAL:
        fmt = DECIMAL_SI
        multiplier = Fraction(10) ** _DECIMAL[suffix]
    else:
        exp_match = _EXPONENT_RE.fullmatch(suffix)
        if exp_match is None:
            raise ValueError(QUANTITY_FORMAT_ERROR)
        exponent = int(exp_match.group(1))
        if abs(exponent) > _MAX_EXPONENT:
            raise ValueError(QUANTITY_FORMAT_ERROR)
        fmt = DECIMAL_EXPONENT
        multiplier = Fraction(10) ** exponent
    number = Fraction(int(whole or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
    value = number * multiplier * NANO
    # Round away from zero to nano precision (inf.RoundUp), as ParseQuantity does.
    nanos = math.ceil(value)
    if sign_text == "-":
        nanos = -nanos
    return Quantity(nanos, fmt)
