"""Version parsing and ranges: vendor suffixes tolerated, pre-releases ordered, junk inert."""

from __future__ import annotations

import pytest

from dradiag.rulebook.versions import (
    Version,
    VersionRange,
    affected,
    parse_component_version,
    parse_version,
)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("v1.33.2-eks-4096722", (1, 33, 2, None)),
        ("1.34.0+k3s1", (1, 34, 0, None)),
        ("v1.32.3-gke.1785003", (1, 32, 3, None)),
        ("v25.3.0-rc.1", (25, 3, 0, (2, 1))),
        ("v1.35.0-beta.0", (1, 35, 0, (1, 0))),
        ("v1.36.0-alpha.2", (1, 36, 0, (0, 2))),
        ("1.34", (1, 34, None, None)),
        ("containerd://1.7.27", (1, 7, 27, None)),
        ("  v1.34.1  ", (1, 34, 1, None)),
    ],
)
def test_semverish_texts_parse(text: str, expected: tuple[object, ...]) -> None:
    v = parse_version(text)
    assert v is not None
    assert (v.major, v.minor, v.patch, v.pre) == expected


@pytest.mark.parametrize(
    "junk", ["", "latest", "unknown-build", "v1", "sha256:5b0b0c2d", None, 42, ["1.2.3"], "x" * 300]
)
def test_junk_parses_to_none(junk: object) -> None:
    assert parse_version(junk) is None


def test_a_prerelease_sorts_before_its_release_and_a_vendor_build_does_not() -> None:
    rc, release, eks = (parse_version(t) for t in ("v1.34.2-rc.1", "v1.34.2", "v1.34.2-eks-1"))
    assert rc is not None and release is not None and eks is not None
    assert rc.key() < release.key() == eks.key()
    fixed = VersionRange(introduced=parse_version("1.34.0"), fixed=parse_version("1.34.2"))
    assert fixed.contains(rc) is True
    assert fixed.contains(release) is False and fixed.contains(eks) is False


def test_ranges_per_branch_follow_backports() -> None:
    ranges = [
        VersionRange(introduced=parse_version("1.34.0"), fixed=parse_version("1.34.4")),
        VersionRange(introduced=parse_version("1.35.0"), fixed=parse_version("1.35.1")),
    ]

    def check(text: str) -> bool | None:
        v = parse_version(text)
        assert v is not None
        return affected(v, ranges)

    assert check("v1.34.3") is True and check("v1.35.0") is True
    assert check("v1.34.4") is False and check("v1.34.9") is False
    assert check("v1.35.1") is False and check("v1.36.0") is False
    assert check("v1.33.9") is False  # not listed: dradiag claims nothing
    # major.minor alone cannot be placed inside a patch-level range...
    assert check("1.34") is None
    # ...but is decided when the whole minor is on one side.
    assert check("1.36") is False
    assert affected(Version(1, 34), [VersionRange(fixed=parse_version("1.35.0"))]) is True


def test_nvidia_calendar_versions_map_to_the_0x_line() -> None:
    def driver(text: str) -> tuple[int, int, int | None] | None:
        v = parse_component_version("nvidia-dra-driver", text)
        return None if v is None else (v.major, v.minor, v.patch)

    assert driver("v25.3.2") == (0, 1, 2)
    assert driver("25.8.1") == (0, 2, 1)
    assert driver("v25.12.0") == (0, 3, 0)
    assert driver("v0.4.1") == (0, 4, 1)
    assert driver("v25.5.0") is None  # a calendar line the driver never shipped
    assert parse_component_version("kubelet", "v25.3.0") == parse_version("v25.3.0")
    span = VersionRange(
        introduced=parse_component_version("nvidia-dra-driver", "25.12.0"),
        fixed=parse_component_version("nvidia-dra-driver", "0.4.1"),
    )
    for text, inside in (
        ("v25.12.0", True),
        ("v0.4.0", True),
        ("v0.4.1", False),
        ("v25.8.1", False),
    ):
        v = parse_component_version("nvidia-dra-driver", text)
        assert v is not None and span.contains(v) is inside, text
    assert str(span) == ">=25.12.0 <0.4.1"
