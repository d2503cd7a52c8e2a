"""Component versions as the rulebook compares them: parsing, ranges, and ``affected()``.

Known-issue rules (``match.known_issue``) name the versions a bug affects as ranges,
one per release branch, because Kubernetes backports fixes to patch releases: the
double-allocation race is fixed in 1.34.4 and in 1.35.1, so 1.34.5 is fixed and 1.35.0
is not. This module is the shared vocabulary of the rule loader (which checks the ranges
once) and of ``analyses/component_versions.py`` (which reads what a cluster runs).

Versions in the wild are semver-ish, not semver: ``v1.33.2-eks-4096722``,
``1.34.0+k3s1``, ``v1.32.3-gke.1785003``, ``containerd://1.7.27``, ``v25.3.0-rc.1``. A
vendor suffix after ``-`` is a build of that release, not a pre-release; only
``alpha``, ``beta`` and ``rc`` mark one (Kubernetes' own tags). Text that holds no
``major.minor`` is junk and parses to None: no match, never an exception.

The NVIDIA DRA driver changed from calendar versions to ``0.x`` when it moved to
kubernetes-sigs; ``pkg/featuregates/featuregates.go`` maps ``~25.3 -> 0.1``,
``~25.8 -> 0.2``, ``~25.12 -> 0.3`` (nvidia-driver-facts "Tags"). Both spellings are
normalized to the ``0.x`` line so that one range can span the rename.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_VERSION = re.compile(
    r"(?<![\d.])v?(?P<major>\d{1,9})\.(?P<minor>\d{1,9})(?:\.(?P<patch>\d{1,9}))?"
    r"(?P<suffix>[-+~][0-9A-Za-z.+~-]*)?"
)
_PRERELEASE = re.compile(r"^-(?P<kind>alpha|beta|rc)(?:[.-]?(?P<n>\d{1,9}))?(?![A-Za-z])")
_PRE_ORDER = {"alpha": 0, "beta": 1, "rc": 2}

NVIDIA_CALENDAR_LINES: dict[tuple[int, int], tuple[int, int]] = {
    (25, 3): (0, 1),
    (25, 8): (0, 2),
    (25, 12): (0, 3),
    (26, 4): (0, 4),
}
"""Calendar release line of the NVIDIA DRA driver -> its ``0.x`` line (featuregates.go)."""

NVIDIA_DRIVER_COMPONENT = "nvidia-dra-driver"


@dataclass(frozen=True, slots=True, order=False)
class Version:
    """``major.minor[.patch][-pre]``; ``patch`` None when the text gave only ``major.minor``."""

    major: int
    minor: int
    patch: int | None = None
    pre: tuple[int, int] | None = None
    """(alpha=0 | beta=1 | rc=2, number) for a pre-release; None for a release."""
    text: str = ""
    """The text it was read from, as shown to the user."""

    def key(self, patch: int | None = None) -> tuple[int, int, int, int, int]:
        """Sort key; a pre-release sorts before its release (1.34.2-rc.1 < 1.34.2)."""
        pre = self.pre if self.pre is not None else (9, 0)
        p = self.patch if self.patch is not None else (patch if patch is not None else 0)
        return (self.major, self.minor, p, pre[0], pre[1])

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}"
        if self.patch is not None:
            base += f".{self.patch}"
        if self.pre is not None:
            kind = {v: k for k, v in _PRE_ORDER.items()}[self.pre[0]]
            base += f"-{kind}.{self.pre[1]}"
        return base


def parse_version(text: object) -> Version | None:
    """The first ``major.minor[.patch]`` in ``text`` with its pre-release, or None (junk)."""
    if not isinstance(text, str) or len(text) > 256:
        return None
    m = _VERSION.search(text)
    if m is None:
        return None
    suffix = m.group("suffix") or ""
    pre: tuple[int, int] | None = None
    if suffix.startswith("-"):
        p = _PRERELEASE.match(suffix)
        if p is not None:
            pre = (_PRE_ORDER[p.group("kind")], int(p.group("n") or 0))
    patch = m.group("patch")
    return Version(
        major=int(m.group("major")),
        minor=int(m.group("minor")),
        patch=int(patch) if patch is not None else None,
        pre=pre,
        text=text.strip(),
    )


def normalize_version(component: str, version: Version) -> Version | None:
    """The version on the line the rule ranges use; None when the component's scheme has
    no place for it (an NVIDIA calendar line dradiag does not know)."""
    if component != NVIDIA_DRIVER_COMPONENT or version.major < 24:
        return version
    line = NVIDIA_CALENDAR_LINES.get((version.major, version.minor))
    if line is None:
        return None
    return Version(
        major=line[0], minor=line[1], patch=version.patch, pre=version.pre, text=version.text
    )


def parse_component_version(component: str, text: object) -> Version | None:
    """``parse_version`` then ``normalize_version``: what a range is compared with."""
    version = parse_version(text)
    return normalize_version(component, version) if version is not None else None


@dataclass(frozen=True, slots=True)
class VersionRange:
    """``introduced <= v < fixed`` on one release branch; either bound may be open."""

    introduced: Version | None = None
    fixed: Version | None = None

    def contains(self, version: Version) -> bool | None:
        """True / False, or None when ``version`` lacks the patch level that decides it.

        ``1.34`` (the API server's ``major.minor``) stands for every 1.34 patch: inside
        ``[1.34.0, 1.34.2)`` it cannot be placed, inside ``[1.33.0, 1.35.0)`` it can.
        """
        if version.patch is not None:
            low_ok = self.introduced is None or version.key() >= self.introduced.key()
            high_ok = self.fixed is None or version.key() < self.fixed.key()
            return low_ok and high_ok
        first = Version(version.major, version.minor, 0)
        after = Version(version.major, version.minor + 1, 0)
        if (self.fixed is not None and self.fixed.key() <= first.key(0)) or (
            self.introduced is not None and self.introduced.key() >= after.key(0)
        ):
            return False
        low_all = self.introduced is None or self.introduced.key() <= first.key(0)
        high_all = self.fixed is None or self.fixed.key() >= after.key(0)
        return True if low_all and high_all else None

    def __str__(self) -> str:
        parts = []
        if self.introduced is not None:
            parts.append(f">={self.introduced.text or self.introduced}")
        if self.fixed is not None:
            parts.append(f"<{self.fixed.text or self.fixed}")
        return " ".join(parts) or "all versions"


def affected(version: Version, ranges: Iterable[VersionRange]) -> bool | None:
    """Whether ``version`` falls in any range: True, False, or None (cannot tell)."""
    unknown = False
    for r in ranges:
        inside = r.contains(version)
        if inside:
            return True
        if inside is None:
            unknown = True
    return None if unknown else False
