"""Feature gates that change what the DRA allocator does, and which allocator variant runs.

The scheduler picks the first of the ``stable``, ``incubating`` and ``experimental``
allocators whose supported features cover every enabled one (k8s-dra-semantics §3.1), and
several behaviours depend on the Kubernetes version rather than a gate: pool completeness
and invalid pools changed in 1.35 (§3.2), and pools/slices are visited in a defined
order only from 1.36 (§3.1). A :class:`FeatureGates` value carries both, so the simulator
never reads a version string itself.

Defaults per version follow the gate timeline in k8s-dra-semantics §4.3; an explicit
``--feature-gates`` list overrides them, as on the scheduler's command line.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dradiag.snapshot.model import Snapshot

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Final

from dradiag.errors import UsageError

__all__ = ["FeatureGates", "KNOWN_GATES", "LATEST_KNOWN_VERSION"]

KNOWN_GATES: Final = (
    "DRAAdminAccess",
    "DRAPrioritizedList",
    "DRAPartitionableDevices",
    "DRADeviceTaints",
    "DRADeviceTaintRules",
    "DRADeviceBindingConditions",
    "DRAResourceClaimDeviceStatus",
    "DRAConsumableCapacity",
    "DRAListTypeAttributes",
)
"""Gates dradiag understands; any other name in ``--feature-gates`` is a usage error."""

# (gate, first minor where it is on by default); None = never on by default yet.
_DEFAULT_ON_SINCE: Final[dict[str, int | None]] = {
    "DRAAdminAccess": 34,
    "DRAPrioritizedList": 34,
    "DRAPartitionableDevices": 36,
    "DRADeviceTaints": 36,
    "DRADeviceTaintRules": 37,
    "DRADeviceBindingConditions": 36,
    "DRAResourceClaimDeviceStatus": 33,
    "DRAConsumableCapacity": 36,
    "DRAListTypeAttributes": None,
}

LATEST_KNOWN_VERSION: Final = (1, 36)
"""Assumed when the cluster's version is unknown: the newest release the reference covers."""

_VARIANT_FEATURES: Final = (
    (
        "stable",
        frozenset({"AdminAccess", "PrioritizedList", "PartitionableDevices", "DeviceTaints"}),
    ),
    (
        "incubating",
        frozenset(
            {
                "AdminAccess",
                "PrioritizedList",
                "PartitionableDevices",
                "DeviceTaints",
                "DeviceBindingAndStatus",
                "ConsumableCapacity",
            }
        ),
    ),
    (
        "experimental",
        frozenset(
            {
                "AdminAccess",
                "PrioritizedList",
                "PartitionableDevices",
                "DeviceTaints",
                "DeviceBindingAndStatus",
                "ConsumableCapacity",
                "ListTypeAttributes",
            }
        ),
    ),
)

_VERSION_RE = re.compile(r"^v?(\d+)\.(\d+)")


def parse_version(text: str | None) -> tuple[int, int] | None:
    """``"1.34"``, ``"v1.35.2"``, ``"1.36+"`` → (1, 34) …; None when unreadable."""
    if not text:
        return None
    match = _VERSION_RE.match(text.strip())
    if match is None:
        return None
    return int(match.group(1)), int(match.group(2))


GATED_SLICE_FIELDS = (
    "sharedCounters",
    "perDeviceNodeSelection",
    "taints",
    "consumesCounters",
    "bindingConditions",
    "allowMultipleAllocations",
)
"""The slice fields whose presence ``with_evidence`` reads as a gate turned on."""


@dataclass(frozen=True, slots=True)
class FeatureGates:
    """Enabled DRA gates plus the Kubernetes version the allocator behaves like.

    ``version`` decides the behaviours that have no gate (pool completeness, invalid
    pools); ``assumed`` is True when neither the cluster nor the user told us.
    """

    enabled: frozenset[str] = field(default_factory=frozenset)
    version: tuple[int, int] = LATEST_KNOWN_VERSION
    assumed: bool = False
    overridden: frozenset[str] = field(default_factory=frozenset)
    """Gates set explicitly (``--feature-gates``) rather than by the version's defaults."""
    inferred: frozenset[str] = field(default_factory=frozenset)
    """Gates turned on because stored objects prove them on (see :meth:`with_evidence`)."""

    # -- construction -------------------------------------------------------------

    @classmethod
    def for_version(cls, version: str | tuple[int, int] | None) -> FeatureGates:
        """The default gates of a Kubernetes version (``"1.34"``); latest known when None."""
        parsed = version if isinstance(version, tuple) else parse_version(version)
        assumed = parsed is None
        major_minor = parsed or LATEST_KNOWN_VERSION
        minor = major_minor[1] if major_minor[0] == 1 else 99
        enabled = frozenset(
            gate
            for gate, since in _DEFAULT_ON_SINCE.items()
            if since is not None and minor >= since
        )
        return cls(enabled=enabled, version=major_minor, assumed=assumed)

    @classmethod
    def parse(cls, text: str, *, base: FeatureGates | None = None) -> FeatureGates:
        """Apply ``"DRAAdminAccess=true,DRADeviceTaints=false"`` on top of ``base``.

        Raises UsageError for unknown gates or values that are not true/false, naming
        the offending entry.
        """
        start = base if base is not None else cls.for_version(None)
        enabled = set(start.enabled)
        overridden = set(start.overridden)
        for raw in text.split(","):
            entry = raw.strip()
            if not entry:
                continue
            name, sep, value = entry.partition("=")
            name, value = name.strip(), value.strip().lower()
            if not sep or value not in ("true", "false"):
                raise UsageError(f"--feature-gates: expected NAME=true|false, got {entry!r}")
            if name not in KNOWN_GATES:
                raise UsageError(
                    f"--feature-gates: unknown gate {name!r} (known: {', '.join(KNOWN_GATES)})"
                )
            overridden.add(name)
            if value == "true":
                enabled.add(name)
            else:
                enabled.discard(name)
        return replace(start, enabled=frozenset(enabled), overridden=frozenset(overridden))

    def with_evidence(
        self,
        slices: Iterable[Mapping[str, Any]],
        *,
        taint_rules: Iterable[Mapping[str, Any]] = (),
    ) -> FeatureGates:
        """Turn on gates whose fields or objects are present in what the cluster stored.

        The apiserver drops a gated field when its gate is off, so a stored device taint
        proves DRADeviceTaints on, stored counters prove DRAPartitionableDevices on, and
        so on (nvidia-driver-facts §1.5–1.6); a stored DeviceTaintRule proves its API is
        served, hence DRADeviceTaintRules (and DRADeviceTaints) on. Explicitly set gates
        are left alone.
        """
        proven: set[str] = set()
        if any(True for _ in taint_rules):
            proven |= {"DRADeviceTaintRules", "DRADeviceTaints"}
        for slc in slices:
            spec = slc.get("spec") or {}
            if spec.get("sharedCounters") or spec.get("perDeviceNodeSelection") is not None:
                proven.add("DRAPartitionableDevices")
            for dev in spec.get("devices") or []:
                if dev.get("taints"):
                    proven.add("DRADeviceTaints")
                if dev.get("consumesCounters"):
                    proven.add("DRAPartitionableDevices")
                if dev.get("bindingConditions"):
                    proven |= {"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"}
                if dev.get("allowMultipleAllocations"):
                    proven.add("DRAConsumableCapacity")
        added = frozenset(proven - self.enabled - self.overridden)
        if not added:
            return self
        return replace(self, enabled=self.enabled | added, inferred=self.inferred | added)

    @classmethod
    def for_snapshot(cls, snapshot: Snapshot) -> FeatureGates:
        """The gates of the snapshot's server version, corrected by what it stored.

        Only slices that can hold a gated field are read: on a large input whose slices
        are not decoded yet, the look-up for those field names decodes just them.
        """
        from dradiag.snapshot.model import Kind

        seen: dict[int, Mapping[str, Any]] = {}
        for key in GATED_SLICE_FIELDS:
            for slc in snapshot.mentioning(Kind.RESOURCE_SLICE, key):
                seen.setdefault(id(slc), slc)
        return cls.for_version(snapshot.source.server_version).with_evidence(
            seen.values(), taint_rules=snapshot.taint_rules
        )

    # -- allocator features (k8s.io/dynamic-resource-allocation internal.Features) ----

    def is_enabled(self, gate: str) -> bool:
        """Whether ``gate`` is on."""
        return gate in self.enabled

    @property
    def admin_access(self) -> bool:
        return "DRAAdminAccess" in self.enabled

    @property
    def prioritized_list(self) -> bool:
        return "DRAPrioritizedList" in self.enabled

    @property
    def partitionable_devices(self) -> bool:
        return "DRAPartitionableDevices" in self.enabled

    @property
    def device_taints(self) -> bool:
        return "DRADeviceTaints" in self.enabled

    @property
    def device_taint_rules(self) -> bool:
        """DeviceTaintRules are merged into slices (needs DRADeviceTaints too)."""
        return "DRADeviceTaintRules" in self.enabled and self.device_taints

    @property
    def binding_conditions(self) -> bool:
        """The allocator's DeviceBindingAndStatus: both gates must be on."""
        return {"DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"} <= self.enabled

    @property
    def consumable_capacity(self) -> bool:
        return "DRAConsumableCapacity" in self.enabled

    @property
    def list_type_attributes(self) -> bool:
        return "DRAListTypeAttributes" in self.enabled

    def allocator_features(self) -> frozenset[str]:
        """The enabled features under the allocator's own names (``internal.Features``)."""
        out = set()
        if self.admin_access:
            out.add("AdminAccess")
        if self.prioritized_list:
            out.add("PrioritizedList")
        if self.partitionable_devices:
            out.add("PartitionableDevices")
        if self.device_taints:
            out.add("DeviceTaints")
        if self.binding_conditions:
            out.add("DeviceBindingAndStatus")
        if self.consumable_capacity:
            out.add("ConsumableCapacity")
        if self.list_type_attributes:
            out.add("ListTypeAttributes")
        return frozenset(out)

    @property
    def variant(self) -> str:
        """``stable``, ``incubating`` or ``experimental``: what NewAllocator would pick."""
        features = self.allocator_features()
        for name, supported in _VARIANT_FEATURES:
            if features <= supported:
                return name
        return "experimental"

    # -- version-dependent behaviour ------------------------------------------------

    @property
    def legacy_pools(self) -> bool:
        """≤1.34: completeness counted node-visible slices; incomplete pools still served
        ExactCount; an invalid pool met in the search was a hard error (§3.2)."""
        return self.version < (1, 35)

    @property
    def deterministic_order(self) -> bool:
        """Whether the real scheduler visits pools/slices in sorted order (≥1.36, not stable)."""
        return self.version >= (1, 36) and self.variant != "stable"

    def to_dict(self) -> dict[str, object]:
        """The ``allocator`` block of the simulation document."""
        return {
            "variant": self.variant,
            "kubernetesVersion": f"{self.version[0]}.{self.version[1]}",
            "versionAssumed": self.assumed,
            "featureGates": {gate: gate in self.enabled for gate in KNOWN_GATES},
            "inferredFromSlices": sorted(self.inferred),
        }
