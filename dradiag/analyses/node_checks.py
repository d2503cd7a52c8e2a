"""Cross-checks of one node's state (NVML, CDI, checkpoint, PCI) with itself and the cluster.

Pure: a NodeState and, when there is one, the cluster Snapshot in; Findings with rule ids
out (their catalogue entries are in ``rules/*.yaml``, code-backed). Prepare, injection
and unprepare often leave their only evidence on the node (nvidia-driver-facts §6, §7):
a checkpoint entry stuck in ``PrepareStarted`` (a Prepare that never finished), a
checkpoint entry or CDI spec of a claim that is gone or no longer allocated here (an
unprepare leak, which later fails another claim's Prepare), a prepared claim without its
CDI spec (the runtime then fails with ``unresolvable CDI devices``), MIG instances the
slices do not match, a GPU left bound to vfio-pci. Checks that need the cluster are
skipped without it, and a kind the snapshot did not collect is never read as "gone".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

from dradiag.snapshot.model import K8sObject, Kind, Snapshot, key_of
from dradiag.snapshot.node_state import (
    CdiSpec,
    CheckpointClaim,
    MigInstance,
    NodeState,
    PreparedDevice,
)
from dradiag.vocabulary import Evidence, EvidenceSource, Finding, Phase, Severity

DRIVER = "gpu.nvidia.com"

PUB_CHECKPOINT_UNREADABLE = "DRA-PUB-NODE-CHECKPOINT-UNREADABLE"
PUB_MIG_NOT_PUBLISHED = "DRA-PUB-NODE-MIG-NOT-PUBLISHED"
PUB_MIG_STALE = "DRA-PUB-NODE-MIG-STALE"
PREP_PREPARE_STARTED = "DRA-PREP-CHECKPOINT-PREPARE-STARTED"
PREP_BOOT_MISMATCH = "DRA-PREP-CHECKPOINT-BOOT-MISMATCH"
PREP_VFIO_NOT_BOUND = "DRA-PREP-VFIO-NOT-BOUND"
INJ_CDI_SPEC_ABSENT = "DRA-INJ-NODE-CDI-SPEC-MISSING"
INJ_DEVICE_NODE_MISSING = "DRA-INJ-CDI-DEVICE-NODE-MISSING"
INJ_CDI_SPEC_MALFORMED = "DRA-INJ-CDI-SPEC-MALFORMED"
UNPREP_CHECKPOINT_LEAK = "DRA-UNPREP-CHECKPOINT-LEAK"
UNPREP_CDI_SPEC_LEAK = "DRA-UNPREP-CDI-SPEC-LEAK"
UNPREP_MIG_LEAK = "DRA-UNPREP-MIG-LEAK"
UNPREP_VFIO_LEFT_BOUND = "DRA-UNPREP-VFIO-LEFT-BOUND"

NODE_RULES: tuple[str, ...] = (
    PUB_CHECKPOINT_UNREADABLE,
    PUB_MIG_NOT_PUBLISHED,
    PUB_MIG_STALE,
    PREP_PREPARE_STARTED,
    PREP_BOOT_MISMATCH,
    PREP_VFIO_NOT_BOUND,
    INJ_CDI_SPEC_ABSENT,
    INJ_DEVICE_NODE_MISSING,
    INJ_CDI_SPEC_MALFORMED,
    UNPREP_CHECKPOINT_LEAK,
    UNPREP_CDI_SPEC_LEAK,
    UNPREP_MIG_LEAK,
    UNPREP_VFIO_LEFT_BOUND,
)

_PHASE = {
    "PUB": Phase.PUBLICATION,
    "PREP": Phase.PREPARE,
    "INJ": Phase.INJECTION,
    "UNPREP": Phase.UNPREPARE,
}

_CHECKPOINT_CMD = (
    "kubectl exec -n <driver-ns> <plugin pod on {node}> -c gpus -- "
    "cat /var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json"
)


def _finding(
    rule: str,
    severity: Severity,
    title: str,
    detail: str,
    *,
    evidence: Iterable[Evidence] = (),
    next_steps: Iterable[str] = (),
    ids: Iterable[tuple[str, str]] = (),
) -> Finding:
    return Finding(
        rule=rule,
        phase=_PHASE[rule.split("-")[1]],
        severity=severity,
        title=title,
        detail=detail,
        evidence=tuple(evidence),
        next=tuple(next_steps),
        identifiers=tuple(dict.fromkeys(ids)),
    )


def _node_ev(ref: str, excerpt: str = "") -> Evidence:
    return Evidence(source=EvidenceSource.NODE, ref=ref, excerpt=excerpt)


def _entry_ev(state: NodeState, c: CheckpointClaim) -> Evidence:
    devices = ", ".join(d.slice_device_name or d.type for d in c.devices) or "no devices"
    return _node_ev(
        f"{state.checkpoint_path} preparedClaims[{c.claim_uid}]",
        f"checkpointState {c.state or '(unset)'}; {devices}",
    )


# -- the cluster side -------------------------------------------------------------------


def claim_nodes(claim: K8sObject) -> set[str]:
    """Nodes the claim's allocation ties it to: the node selector's ``metadata.name`` and
    the gpu.nvidia.com pools (the driver names its pool after the node, facts §1.1)."""
    alloc = (claim.get("status") or {}).get("allocation") or {}
    out: set[str] = set()
    selector = alloc.get("nodeSelector") or {}
    for term in selector.get("nodeSelectorTerms") or ():
        for req in (*(term.get("matchFields") or ()), *(term.get("matchExpressions") or ())):
            if req.get("key") in ("metadata.name", "kubernetes.io/hostname"):
                out.update(str(v) for v in req.get("values") or ())
    for result in (alloc.get("devices") or {}).get("results") or ():
        if result.get("driver") == DRIVER and result.get("pool"):
            out.add(str(result["pool"]))
    return out


def allocated_device_names(claim: K8sObject, node: str) -> set[str]:
    alloc = (claim.get("status") or {}).get("allocation") or {}
    return {
        str(r.get("device"))
        for r in (alloc.get("devices") or {}).get("results") or ()
        if r.get("driver") == DRIVER and r.get("pool") == node
    }


def _attr(device: Mapping[str, Any], key: str) -> Any:
    value = (device.get("attributes") or {}).get(key)
    if isinstance(value, Mapping):
        return next(iter(value.values()), None)
    return value


def _slice_devices(snapshot: Snapshot, node: str) -> list[Mapping[str, Any]]:
    out: list[Mapping[str, Any]] = []
    for slc in snapshot.slices_for(driver=DRIVER, node=node):
        out += [d for d in (slc.get("spec") or {}).get("devices") or () if isinstance(d, Mapping)]
    return out


def _claim_state(snapshot: Snapshot | None, uid: str, node: str) -> tuple[str, K8sObject | None]:
    """``here``, ``elsewhere``, ``unallocated``, ``gone`` or ``unknown`` (no cluster view)."""
    if snapshot is None or not snapshot.is_collected(Kind.RESOURCE_CLAIM):
        return "unknown", None
    claim = snapshot.claim_by_uid(uid)
    if claim is None:
        return "gone", None
    if not (claim.get("status") or {}).get("allocation"):
        return "unallocated", claim
    nodes = claim_nodes(claim)
    if nodes and node not in nodes:
        return "elsewhere", claim
    return "here", claim


_WHY_LEAK = {
    "gone": "no longer exists",
    "unallocated": "is no longer allocated",
    "elsewhere": "is allocated to another node",
}


# -- the checks -----------------------------------------------------------------------


def check_node(state: NodeState, snapshot: Snapshot | None = None) -> list[Finding]:
    """Every finding about ``state``; with ``snapshot``, also its cross-checks with the cluster."""
    findings: list[Finding] = []
    findings += _checkpoint_findings(state, snapshot)
    findings += _cdi_findings(state, snapshot)
    findings += _mig_findings(state, snapshot)
    findings += _vfio_findings(state, snapshot)
    order = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.INFO: 2}
    return sorted(findings, key=lambda f: (order[f.severity], f.rule, f.detail))


def _checkpoint_findings(state: NodeState, snapshot: Snapshot | None) -> list[Finding]:
    cp = state.checkpoint
    node = state.node
    if cp is None:
        return []
    if cp.error is not None:
        return [
            _finding(
                PUB_CHECKPOINT_UNREADABLE,
                Severity.ERROR,
                "the plugin checkpoint on the node cannot be read",
                f"{cp.path}: {cp.error}. The kubelet plugin refuses to start on a checkpoint "
                "it cannot verify (checkpoint is corrupted), so the node publishes nothing.",
                evidence=[_node_ev(cp.path, cp.error)],
                next_steps=[_CHECKPOINT_CMD.format(node=node)],
                ids=[("file", cp.path)],
            )
        ]
    out: list[Finding] = []
    if cp.node_boot_id and state.boot_id and cp.node_boot_id != state.boot_id:
        out.append(
            _finding(
                PREP_BOOT_MISMATCH,
                Severity.WARNING,
                "the checkpoint was written before the node's last boot",
                f"{cp.path} has nodeBootID {cp.node_boot_id}, the node boots as {state.boot_id}: "
                "its prepared devices and CDI specs (on tmpfs) are gone; a plugin from v0.4 on "
                "discards it at start-up, an older one keeps the stale entries.",
                evidence=[_node_ev(cp.path, f"nodeBootID {cp.node_boot_id}")],
                next_steps=[
                    f"kubectl logs -n <driver-ns> <plugin pod on {node}> -c gpus | grep -i checkpoint"
                ],
                ids=[("file", cp.path)],
            )
        )
    for c in cp.claims:
        where, claim = _claim_state(snapshot, c.claim_uid, node)
        label = key_of(claim) if claim is not None else (c.label)
        ids = [("claim UID", c.claim_uid), ("file", cp.path)]
        ids += [
            ("slice device name", d.slice_device_name) for d in c.devices if d.slice_device_name
        ]
        if where in _WHY_LEAK:
            out.append(
                _finding(
                    UNPREP_CHECKPOINT_LEAK,
                    Severity.ERROR,
                    "the checkpoint still holds a claim that is gone from this node",
                    f"checkpoint entry {c.label} ({c.state or 'completed'}) on {node}: the claim "
                    f"{_WHY_LEAK[where]}, yet Unprepare never removed it; its devices "
                    f"({_devices(c.devices, c.allocated)}) stay held and a later claim's Prepare "
                    "on them fails.",
                    evidence=[_entry_ev(state, c)],
                    next_steps=[
                        _CHECKPOINT_CMD.format(node=node),
                        f"kubectl logs -n <driver-ns> <plugin pod on {node}> -c gpus | grep {c.claim_uid}",
                    ],
                    ids=ids,
                )
            )
        elif c.state == "PrepareStarted":
            out.append(
                _finding(
                    PREP_PREPARE_STARTED,
                    Severity.ERROR,
                    "a Prepare on the node never finished",
                    f"checkpoint entry {label}:{c.claim_uid} is PrepareStarted on {node}: "
                    "NodePrepareResources began but never completed (it failed, timed out or "
                    "the plugin restarted mid-way); partial state such as MIG instances may "
                    "remain.",
                    evidence=[_entry_ev(state, c)],
                    next_steps=[
                        f"kubectl get events -A --field-selector reason=FailedPrepareDynamicResources | grep {c.claim_uid[:8]}",
                        _CHECKPOINT_CMD.format(node=node),
                    ],
                    ids=ids,
                )
            )
    return out


def _devices(devices: Iterable[PreparedDevice], allocated: Iterable[tuple[str, str, str]]) -> str:
    names = [d.slice_device_name for d in devices if d.slice_device_name]
    names = names or [dev for _, _, dev in allocated]
    return ", ".join(names) or "none recorded"


def _spec_for(specs: Iterable[CdiSpec], cdi_device_id: str) -> CdiSpec | None:
    return next((s for s in specs if cdi_device_id in s.cdi_device_ids), None)


def _cdi_findings(state: NodeState, snapshot: Snapshot | None) -> list[Finding]:
    node = state.node
    specs = [s for s in state.cdi_specs if s.error is None]
    out: list[Finding] = []
    for bad in (s for s in state.cdi_specs if s.error is not None):
        ids = [("file", bad.path)] + ([("claim UID", bad.claim_uid)] if bad.claim_uid else [])
        out.append(
            _finding(
                INJ_CDI_SPEC_MALFORMED,
                Severity.ERROR,
                "a CDI spec on the node is malformed",
                f"{bad.path}: {bad.error}. The runtime refuses the whole spec, so none of its "
                "devices resolve.",
                evidence=[_node_ev(bad.path, bad.error or "")],
                next_steps=[f"cat {bad.path}  (on {node})"],
                ids=ids,
            )
        )
    cp = state.checkpoint
    completed = [
        c for c in (cp.claims if cp and cp.error is None else ()) if c.state != "PrepareStarted"
    ]
    for c in completed:
        where, claim = _claim_state(snapshot, c.claim_uid, node)
        if where in _WHY_LEAK:
            continue  # the leak finding says it; the spec is not wanted any more
        wanted = [i for d in c.devices for i in d.cdi_device_ids]
        missing = [i for i in wanted if _spec_for(specs, i) is None]
        if not missing:
            continue
        spec_name = f"k8s.gpu.nvidia.com-claim_{c.claim_uid}.yaml"
        label = key_of(claim) if claim is not None else c.label
        out.append(
            _finding(
                INJ_CDI_SPEC_ABSENT,
                Severity.ERROR,
                "a prepared claim has no CDI spec on the node",
                f"claim {label} is prepared on {node} (checkpoint PrepareCompleted) but no CDI "
                f"spec in {', '.join(state.cdi_dirs)} defines {', '.join(missing)} "
                f"(expected {spec_name}): container creation fails with 'unresolvable CDI "
                "devices' and Prepare will not rewrite it.",
                evidence=[_entry_ev(state, c)]
                + [_node_ev(d, "no spec for the claim") for d in state.cdi_dirs],
                next_steps=[
                    f"ls -l {' '.join(state.cdi_dirs)}  (on {node})",
                    "compare the checkpoint's nodeBootID with /proc/sys/kernel/random/boot_id",
                ],
                ids=[("claim UID", c.claim_uid)] + [("CDI device ID", i) for i in missing],
            )
        )
    for spec in specs:
        if spec.scheme == "claim" and spec.claim_uid:
            where, _ = _claim_state(snapshot, spec.claim_uid, node)
            held = cp is not None and any(c.claim_uid == spec.claim_uid for c in cp.claims)
            if where in _WHY_LEAK and not held:
                out.append(
                    _finding(
                        UNPREP_CDI_SPEC_LEAK,
                        Severity.WARNING,
                        "a CDI spec is left for a claim that is gone from this node",
                        f"{spec.path}: the claim {spec.claim_uid} {_WHY_LEAK[where]}; Unprepare "
                        "did not delete its spec (a deletion error is only logged).",
                        evidence=[_node_ev(spec.path, ", ".join(spec.cdi_device_ids))],
                        next_steps=[
                            f"kubectl logs -n <driver-ns> <plugin pod on {node}> -c gpus | grep 'unable to delete CDI spec'"
                        ],
                        ids=[("claim UID", spec.claim_uid), ("file", spec.path)],
                    )
                )
        for dev_name, n in [
            *((d.name, n) for d in spec.devices for n in d.device_nodes),
            *(("(spec-level)", n) for n in spec.spec_device_nodes),
        ]:
            if n.exists is False:
                host = n.host_path or n.path
                ids = [("file", spec.path), ("device node", host)]
                ids += [("claim UID", spec.claim_uid)] if spec.claim_uid else []
                out.append(
                    _finding(
                        INJ_DEVICE_NODE_MISSING,
                        Severity.ERROR,
                        "a device node a CDI spec injects does not exist",
                        f"{spec.path} device {dev_name} injects {host}, which does not exist on "
                        f"{node}: container creation fails when the runtime applies the spec "
                        "(a MIG instance or GPU gone since the spec was written, or a driver "
                        "reload).",
                        evidence=[_node_ev(spec.path, f"deviceNodes: {n.path}")],
                        next_steps=[f"ls -l {host}  (on {node})", "nvidia-smi -L"],
                        ids=ids,
                    )
                )
    return out


def _mig_findings(state: NodeState, snapshot: Snapshot | None) -> list[Finding]:
    if state.nvml is None or snapshot is None or not snapshot.is_collected(Kind.RESOURCE_SLICE):
        return []
    node = state.node
    devices = _slice_devices(snapshot, node)
    migs = [d for d in devices if _attr(d, "type") == "mig"]
    if not devices:
        return []  # no slices for the node: publication's own checks say so
    static = {str(_attr(d, "uuid")): str(d.get("name")) for d in migs if _attr(d, "uuid")}
    dynamic = bool(migs) and not static
    instances = {
        m.mig_uuid: (gpu, m) for gpu in state.nvml.gpus for m in gpu.mig if m.mig_uuid is not None
    }
    out: list[Finding] = []
    if static or not dynamic:
        for uuid, (gpu, m) in sorted(instances.items()):
            if uuid in static:
                continue
            out.append(
                _finding(
                    PUB_MIG_NOT_PUBLISHED,
                    Severity.WARNING,
                    "a MIG instance on the node is not in the node's ResourceSlices",
                    f"NVML GPU {gpu.index} ({gpu.gpu_uuid}) has MIG instance {m.profile or '?'} "
                    f"GI {m.gi_id} ({uuid}) that no gpu.nvidia.com slice of {node} publishes: it "
                    "was created after the plugin started, or outside it (nvidia-smi, "
                    "mig-parted); the plugin publishes its MIG devices only at start-up.",
                    evidence=[_node_ev(f"NVML GPU {gpu.index} MIG GI {m.gi_id}", uuid)],
                    next_steps=[
                        "nvidia-smi mig -lgi  (on the node)",
                        f"kubectl get resourceslices --field-selector spec.nodeName={node} -o yaml",
                    ],
                    ids=[("MIG UUID", uuid), ("GPU UUID", gpu.gpu_uuid)],
                )
            )
        for uuid, name in sorted(static.items()):
            if uuid in instances:
                continue
            out.append(
                _finding(
                    PUB_MIG_STALE,
                    Severity.ERROR,
                    "a published MIG device no longer exists on the node",
                    f"slice device {name} ({uuid}) of {node} is not among NVML's MIG instances: "
                    "the MIG layout changed after the plugin published it, so a claim allocated "
                    "this device fails at Prepare.",
                    evidence=[_node_ev("NVML MIG instances", f"no {uuid}")],
                    next_steps=[
                        "nvidia-smi -L  (on the node)",
                        f"kubectl delete pod -n <driver-ns> <plugin pod on {node}>  (remediation: republish)",
                    ],
                    ids=[("slice device name", name), ("MIG UUID", uuid)],
                )
            )
        return out
    # DynamicMIG: instances exist only for prepared claims (facts §1.5, §5.4 E).
    cp = state.checkpoint
    holders: dict[str, CheckpointClaim] = {}
    for c in cp.claims if cp is not None and cp.error is None else ():
        for d in c.devices:
            if d.mig_uuid:
                holders[d.mig_uuid] = c
    for uuid, (gpu, m) in sorted(instances.items()):
        holder = holders.get(uuid)
        where = _claim_state(snapshot, holder.claim_uid, node)[0] if holder else "none"
        if where in ("here", "unknown"):
            continue
        whose = (
            f"held by checkpoint entry {holder.label}, whose claim {_WHY_LEAK[where]}"
            if holder is not None
            else "held by no checkpoint entry"
        )
        ids: list[tuple[str, str]] = [("MIG UUID", uuid), ("GPU UUID", gpu.gpu_uuid)]
        if (mig_name := mig_device_name(gpu.minor, m)) is not None:
            ids.append(("slice device name", mig_name))
        ids += [("claim UID", holder.claim_uid)] if holder else []
        out.append(
            _finding(
                UNPREP_MIG_LEAK,
                Severity.ERROR,
                "a MIG instance on the node belongs to no live claim",
                f"NVML GPU {gpu.index} has MIG instance {m.profile or '?'} GI {m.gi_id} "
                f"(placement {m.placement_start}) {uuid}, {whose}: with DynamicMIG it should "
                "have been torn down at Unprepare; it occupies the placement and the next "
                "Prepare on this GPU fails with 'Insufficient Resources'.",
                evidence=[_node_ev(f"NVML GPU {gpu.index} MIG GI {m.gi_id}", uuid)],
                next_steps=[
                    "nvidia-smi mig -lgi; nvidia-smi mig -lci  (on the node)",
                    _CHECKPOINT_CMD.format(node=node),
                ],
                ids=ids,
            )
        )
    return out


def mig_device_name(minor: int | None, m: MigInstance) -> str | None:
    """The driver's name for a MIG device: ``gpu-<minor>-mig-<profile without dots>-<GI
    profile id>-<placement start>`` (facts §1.3), when NVML gave all the parts."""
    if minor is None or not m.profile or m.gi_profile_id is None or m.placement_start is None:
        return None
    profile = re.sub(r"[^a-z0-9-.]", "-", m.profile.replace(".", "").lower()).strip("-")
    return f"gpu-{minor}-mig-{profile}-{m.gi_profile_id}-{m.placement_start}"


def _vfio_findings(state: NodeState, snapshot: Snapshot | None) -> list[Finding]:
    if state.pci is None:
        return []
    node = state.node
    cp = state.checkpoint
    entries = cp.claims if cp is not None and cp.error is None else ()
    prepared = {
        d.pci_bus_id: c for c in entries for d in c.devices if d.type == "vfio" and d.pci_bus_id
    }
    by_bus = {p.pci_bus_id: p for p in state.pci}
    out: list[Finding] = []
    for bus, c in sorted(prepared.items()):
        fn = by_bus.get(bus)
        if fn is None or fn.vfio or _claim_state(snapshot, c.claim_uid, node)[0] in _WHY_LEAK:
            continue
        out.append(
            _finding(
                PREP_VFIO_NOT_BOUND,
                Severity.ERROR,
                "a GPU prepared for VFIO passthrough is not bound to vfio-pci",
                f"checkpoint entry {c.label} prepared {bus} for passthrough, but the function "
                f"is bound to {fn.driver or 'no driver'}: the VM gets no device.",
                evidence=[
                    _entry_ev(state, c),
                    _node_ev(f"/sys/bus/pci/devices/{bus}/driver", str(fn.driver)),
                ],
                next_steps=[f"readlink /sys/bus/pci/devices/{bus}/driver  (on {node})"],
                ids=[("claim UID", c.claim_uid), ("PCI bus ID", bus)],
            )
        )
    published: dict[str, str] = {}
    if snapshot is not None:
        for d in _slice_devices(snapshot, node):
            bus = _attr(d, "resource.kubernetes.io/pciBusID") or _attr(d, "pcieBusID")
            if bus and _attr(d, "type") == "gpu":
                published[str(bus).lower()] = str(d.get("name"))
    for fn in state.pci:
        live = (
            fn.pci_bus_id in prepared
            and _claim_state(snapshot, prepared[fn.pci_bus_id].claim_uid, node)[0] not in _WHY_LEAK
        )
        if not fn.vfio or live:
            continue
        as_gpu = published.get(fn.pci_bus_id)
        also = f"; the slices still publish it as GPU device {as_gpu}" if as_gpu else ""
        ids = [("PCI bus ID", fn.pci_bus_id)] + ([("slice device name", as_gpu)] if as_gpu else [])
        out.append(
            _finding(
                UNPREP_VFIO_LEFT_BOUND,
                Severity.WARNING,
                "a GPU is bound to vfio-pci with no live passthrough claim",
                f"{fn.pci_bus_id} is bound to {fn.driver} but no live claim holds it for "
                f"passthrough{also}: Unprepare did not rebind it to nvidia, so NVML and "
                "GPU claims cannot use it.",
                evidence=[_node_ev(f"/sys/bus/pci/devices/{fn.pci_bus_id}/driver", str(fn.driver))],
                next_steps=[f"readlink /sys/bus/pci/devices/{fn.pci_bus_id}/driver  (on {node})"],
                ids=ids,
            )
        )
    return out
