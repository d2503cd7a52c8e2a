"""Node-local state of one GPU node: NVML, CDI specs, the plugin checkpoint, PCI binding.

``dradiag node`` reads it on the node (``sources.node_state``) or from a saved copy
(``node/<node>/`` under a ``--from`` root), and both end here, in the Snapshot's
``extras`` (DESIGN §1: every source ends in the Snapshot), so the cross-checks
(``analyses.node_checks``) and the claim walk read the same values either way.
Identifiers are named by layer (DESIGN §2): ``slice_device_name``, ``claim_uid``,
``cdi_device_id``, ``pci_bus_id``, ``gpu_uuid``, ``mig_uuid``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

NODE_STATES_KEY = "node_states"
"""The key of ``Snapshot.extras`` holding ``{node name: NodeState}``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MigInstance:
    """One MIG GPU instance (and its compute instance) as NVML reports it."""

    gi_id: int
    ci_id: int | None
    profile: str | None
    """``1g.10gb``: built from the GI profile's slice count and memory, as go-nvlib does."""
    gi_profile_id: int | None
    placement_start: int | None
    placement_size: int | None
    mig_uuid: str | None
    memory_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmlProcess:
    """A process holding a device (``nvidia-smi``'s process table)."""

    pid: int
    used_memory_bytes: int | None
    on_uuid: str
    """The GPU or MIG UUID the process runs on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmlGpu:
    """One physical GPU: identity, memory, MIG mode and layout, processes."""

    index: int
    minor: int | None
    gpu_uuid: str
    pci_bus_id: str | None
    """Normalized to sysfs' form: lowercase, 4-digit domain (``0000:65:00.0``)."""
    product: str | None
    memory_bytes: int | None
    mig_current: bool | None
    mig_pending: bool | None
    mig: tuple[MigInstance, ...] = ()
    processes: tuple[NvmlProcess, ...] = ()

    @property
    def slice_device_name(self) -> str | None:
        """``gpu-<minor>``: the driver names a full GPU by its minor (facts §1.3)."""
        return None if self.minor is None else f"gpu-{self.minor}"


@dataclass(frozen=True, slots=True, kw_only=True)
class NvmlState:
    """What NVML said about the node."""

    driver_version: str | None
    cuda_driver_version: str | None
    """``12.4``, from NVML's ``M*1000+m*10`` integer."""
    gpus: tuple[NvmlGpu, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CdiDeviceNode:
    """A device node a CDI spec injects, and whether it exists on the node."""

    path: str
    host_path: str | None = None
    exists: bool | None = None
    """None when not checked (a saved state without the check)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class CdiDevice:
    """One device of a CDI spec."""

    name: str
    device_nodes: tuple[CdiDeviceNode, ...] = ()
    mounts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CdiSpec:
    """One CDI spec file; ``error`` set (and the rest empty) when it could not be read."""

    path: str
    cdi_version: str | None = None
    kind: str | None = None
    """``k8s.gpu.nvidia.com/claim`` (v25.12+) or ``k8s.gpu.nvidia.com/device`` (older)."""
    scheme: str = "other"
    """``claim`` (``k8s.gpu.nvidia.com-claim_<uid>.yaml``), ``device-base``
    (``k8s.gpu.nvidia.com-device_base.yaml``, v25.3–v25.8) or ``other`` (not the driver's)."""
    claim_uid: str | None = None
    devices: tuple[CdiDevice, ...] = ()
    spec_device_nodes: tuple[CdiDeviceNode, ...] = ()
    """Spec-level ``containerEdits.deviceNodes`` (control devices, injected with any device)."""
    error: str | None = None

    @property
    def cdi_device_ids(self) -> tuple[str, ...]:
        """The fully qualified IDs (``<kind>=<device name>``) the spec resolves."""
        if not self.kind:
            return ()
        return tuple(f"{self.kind}={d.name}" for d in self.devices)


@dataclass(frozen=True, slots=True, kw_only=True)
class PreparedDevice:
    """One device of a checkpoint entry (``preparedDevices[].devices[]``)."""

    slice_device_name: str | None
    pool: str | None
    type: str
    """``gpu``, ``mig``, ``vfio`` or ``unknown``."""
    gpu_uuid: str | None = None
    mig_uuid: str | None = None
    pci_bus_id: str | None = None
    cdi_device_ids: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class CheckpointClaim:
    """One claim in the plugin checkpoint."""

    claim_uid: str
    state: str
    """``PrepareStarted``, ``PrepareCompleted``, or ``""`` (v1 entries: completed)."""
    namespace: str | None = None
    name: str | None = None
    devices: tuple[PreparedDevice, ...] = ()
    allocated: tuple[tuple[str, str, str], ...] = ()
    """(driver, pool, slice device name) from the ``status`` recorded at Prepare."""

    @property
    def label(self) -> str:
        """``ns/name:uid`` as the driver logs a claim, or the bare UID."""
        if self.namespace and self.name:
            return f"{self.namespace}/{self.name}:{self.claim_uid}"
        return self.claim_uid


@dataclass(frozen=True, slots=True, kw_only=True)
class Checkpoint:
    """The plugin checkpoint file; ``error`` set when it could not be read."""

    path: str
    versions: tuple[str, ...] = ()
    """The format sections present (``v1``, ``v2``)."""
    node_boot_id: str | None = None
    claims: tuple[CheckpointClaim, ...] = ()
    error: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class PciFunction:
    """One NVIDIA PCI function and the kernel driver bound to it."""

    pci_bus_id: str
    driver: str | None
    device_id: str | None = None

    @property
    def vfio(self) -> bool:
        """Bound to vfio-pci or one of its variants (``nvgrace_gpu_vfio_pci``)."""
        return bool(self.driver) and "vfio" in str(self.driver)


@dataclass(frozen=True, slots=True, kw_only=True)
class NodeState:
    """Everything read on one node, and what could not be read (with the reason)."""

    node: str
    collected_at: str | None = None
    host_root: str = "/"
    source: str = "live"
    """``live`` (read on the node now) or the saved directory it was loaded from."""
    boot_id: str | None = None
    nvml: NvmlState | None = None
    nvml_unavailable: str | None = None
    cdi_dirs: tuple[str, ...] = ()
    cdi_specs: tuple[CdiSpec, ...] = ()
    checkpoint_path: str = ""
    checkpoint: Checkpoint | None = None
    """None when there is no checkpoint file (no claim was ever prepared, or no plugin)."""
    pci: tuple[PciFunction, ...] | None = None
    """None when sysfs could not be read (``pci_unavailable`` says why)."""
    pci_unavailable: str | None = None
    notes: tuple[str, ...] = field(default=())


def node_states(extras: Mapping[str, Any]) -> dict[str, NodeState]:
    """The node states a Snapshot's ``extras`` carries, by node name."""
    found = extras.get(NODE_STATES_KEY) or {}
    return {k: v for k, v in found.items() if isinstance(v, NodeState)}
