"""Semantic versions as Kubernetes' CEL ``Semver`` type: blang/semver v4 strict parsing and ordering.

Strict means ``MAJOR.MINOR.PATCH[-PRERELEASE][+BUILD]`` with no leading ``v``, no leading
zeros in numeric parts and no empty identifiers; ``semver("1.0")`` is an error unless the
``normalize`` argument (SemverLib v1, Kubernetes 1.33+) is true. Ordering is blang's
``Version.Compare``: pre-releases sort before the release, numeric identifiers before
alphanumeric ones, build metadata is ignored.
"""

from __future__ import annotations

__all__ = ["Semver", "parse_semver", "normalize_semver"]

_ALNUM = frozenset("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ-")
_DIGITS = frozenset("0123456789")


class Semver:
    """A parsed semantic version; equality and ordering ignore build metadata."""

    __slots__ = ("major", "minor", "patch", "pre", "build", "_key", "_hash")

    def __init__(
        self,
        major: int,
        minor: int,
        patch: int,
        pre: tuple[str | int, ...] = (),
        build: tuple[str, ...] = (),
    ) -> None:
        self.major = major
        self.minor = minor
        self.patch = patch
        self.pre = pre
        self.build = build
        self._key = (major, minor, patch)
        self._hash = hash(("Semver", major, minor, patch, pre))

    def compare(self, other: Semver) -> int:
        if self._key != other._key:
            return -1 if self._key < other._key else 1
        a, b = self.pre, other.pre
        if a == b:
            return 0
        if not a:
            return 1
        if not b:
            return -1
        for x, y in zip(a, b, strict=False):
            if x == y:
                continue
            x_num, y_num = isinstance(x, int), isinstance(y, int)
            if x_num and y_num:
                return -1 if x < y else 1  # type: ignore[operator]
            if x_num:
                return -1
            if y_num:
                return 1
            return -1 if x < y else 1  # type: ignore[operator]
        return (len(a) > len(b)) - (len(a) < len(b))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Semver) and self.compare(other) == 0

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __lt__(self, other: Semver) -> bool:
        return self.compare(other) < 0

    def __gt__(self, other: Semver) -> bool:
        return self.compare(other) > 0

    def __le__(self, other: Semver) -> bool:
        return self.compare(other) <= 0

    def __ge__(self, other: Semver) -> bool:
        return self.compare(other) >= 0

    def __hash__(self) -> int:
        return self._hash

    def __str__(self) -> str:
        text = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            text += "-" + ".".join(str(p) for p in self.pre)
        if self.build:
            text += "+" + ".".join(self.build)
        return text

    def __repr__(self) -> str:
        return f"Semver({str(self)!r})"


def _parse_number(text: str, what: str) -> int:
    if not text or not set(text) <= _DIGITS:
        raise ValueError(f"Invalid character(s) found in {what} number {text!r}".replace("'", '"'))
    if len(text) > 1 and text[0] == "0":
        raise ValueError(
            f"{what.capitalize()} number must not contain leading zeroes {text!r}".replace("'", '"')
        )
    value = int(text)
    if value >= 2**64:
        raise ValueError(f"Invalid {what} number {text!r}".replace("'", '"'))
    return value


def parse_semver(text: str) -> Semver:
    """Parse strictly as blang ``semver.Parse``; raise ``ValueError`` with blang's wording."""
    if not isinstance(text, str) or len(text) == 0:
        raise ValueError("Version string empty")
    parts = text.split(".", 2)
    if len(parts) != 3:
        raise ValueError("No Major.Minor.Patch elements found")
    major = _parse_number(parts[0], "major")
    minor = _parse_number(parts[1], "minor")
    rest = parts[2]
    build: tuple[str, ...] = ()
    pre: tuple[str | int, ...] = ()
    if "+" in rest:
        rest, build_text = rest.split("+", 1)
        build_ids = build_text.split(".")
        for ident in build_ids:
            if not ident:
                raise ValueError("Build meta data is empty")
            if not set(ident) <= _ALNUM:
                raise ValueError(
                    f"Invalid character(s) found in build meta data {ident!r}".replace("'", '"')
                )
        build = tuple(build_ids)
    if "-" in rest:
        rest, pre_text = rest.split("-", 1)
        pre_items: list[str | int] = []
        for ident in pre_text.split("."):
            if not ident:
                raise ValueError("Prerelease is empty")
            if set(ident) <= _DIGITS:
                if len(ident) > 1 and ident[0] == "0":
                    raise ValueError(f"Version has leading zeroes: {ident!r}".replace("'", '"'))
                pre_items.append(int(ident))
            elif set(ident) <= _ALNUM:
                pre_items.append(ident)
            else:
                raise ValueError(
                    f"Invalid character(s) found in prerelease {ident!r}".replace("'", '"')
                )
        pre = tuple(pre_items)
    patch = _parse_number(rest, "patch")
    return Semver(major, minor, patch, pre, build)


def normalize_semver(text: str) -> str:
    """SemverLib v1 ``normalize``: drop a leading ``v``, add missing ``.0`` parts, strip leading zeros."""
    if text.startswith("v"):
        text = text[1:]
    core, extra = text, ""
    for i, ch in enumerate(text):
        if ch in "-+":
            core, extra = text[:i], text[i:]
            break
    parts = core.split(".")
    if len(parts) < 3:
        parts += ["0"] * (3 - len(parts))
    normalized = []
    for part in parts:
        if len(part) > 1:
            part = part.lstrip("0") or "0"
        normalized.append(part)
    return ".".join(normalized) + extra
