"""The node cross-checks: each fires on the leaky node and stays quiet on a near miss.

The near miss changes the one detail a check is about (a state, a binding, a file, the
cluster having the claim); everything else of the leaky node stays as it is.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import pytest
import yaml

from dradiag.analyses import node_checks as nc
from dradiag.snapshot.model import Coverage, Kind, KindRecord, Snapshot
from dradiag.snapshot.node_state import CdiDevice, CdiSpec, NodeState, node_states
from dradiag.sources.manifests import load_snapshot

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "node"
U_START = "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b"
U_SERVER = "8ad83846-768e-579c-afeb-0c56ca776968"
U_GONE = "3c8337ad-f366-4541-883d-30b9e99fd6be"
U_GONE_SPEC = "0d4e5f6a-7b8c-4d9e-8f0a-1b2c3d4e5f6a"


def _world(name: str) -> tuple[NodeState, Snapshot]:
    snapshot = load_snapshot(str(FIXTURES / name))
    return node_states(snapshot.extras)["gpu-node-1"], snapshot


LEAKY = _world("leaky")


def _rules(state: NodeState, snapshot: Snapshot | None) -> set[str]:
    return {f.rule for f in nc.check_node(state, snapshot)}


def _with_claim(tmp_path: Path, uid: str, device: str) -> Snapshot:
    """The leaky cluster plus a live claim ``uid`` allocated ``device`` on the node."""
    root = tmp_path / "leaky"
    shutil.copytree(FIXTURES / "leaky", root)
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "back", "namespace": "ml", "uid": uid},
        "spec": {
            "devices": {
                "requests": [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]
            }
        },
        "status": {
            "allocation": {
                "devices": {
                    "results": [
                        {
                            "request": "gpu",
                            "driver": "gpu.nvidia.com",
                            "pool": "gpu-node-1",
                            "device": device,
                        }
                    ]
                }
            }
        },
    }
    (root / "extra-claim.yaml").write_text(yaml.safe_dump(claim))
    return load_snapshot(str(root))


def _entry_state(state: NodeState, uid: str, new: str) -> NodeState:
    assert state.checkpoint is not None
    claims = tuple(
        replace(c, state=new) if c.claim_uid == uid else c for c in state.checkpoint.claims
    )
    return replace(state, checkpoint=replace(state.checkpoint, claims=claims))


def _bind(state: NodeState, bus: str, driver: str) -> NodeState:
    return replace(
        state,
        pci=tuple(replace(p, driver=driver) if p.pci_bus_id == bus else p for p in state.pci or ()),
    )


def _all_nodes_exist(state: NodeState) -> NodeState:
    specs = tuple(
        replace(
            s,
            devices=tuple(
                replace(d, device_nodes=tuple(replace(n, exists=True) for n in d.device_nodes))
                for d in s.devices
            ),
        )
        for s in state.cdi_specs
    )
    return replace(state, cdi_specs=specs)


def _server_spec(state: NodeState) -> NodeState:
    spec = CdiSpec(
        path=f"/var/run/cdi/k8s.gpu.nvidia.com-claim_{U_SERVER}.yaml",
        cdi_version="0.6.0",
        kind="k8s.gpu.nvidia.com/claim",
        scheme="claim",
        claim_uid=U_SERVER,
        devices=(CdiDevice(name=f"{U_SERVER}-gpu-1"),),
    )
    return replace(state, cdi_specs=(*state.cdi_specs, spec))


NearMiss = Callable[[NodeState, Snapshot, Path], tuple[NodeState, Snapshot | None]]

NEAR_MISSES: dict[str, NearMiss] = {
    nc.PREP_PREPARE_STARTED: lambda s, c, _: (_entry_state(s, U_START, "PrepareCompleted"), c),
    nc.PREP_BOOT_MISMATCH: lambda s, c, _: (replace(s, boot_id=s.checkpoint.node_boot_id), c),  # type: ignore[union-attr]
    nc.PREP_VFIO_NOT_BOUND: lambda s, c, _: (_bind(s, "0000:5e:00.0", "vfio-pci"), c),
    nc.INJ_CDI_SPEC_ABSENT: lambda s, c, _: (_server_spec(s), c),
    nc.INJ_DEVICE_NODE_MISSING: lambda s, c, _: (_all_nodes_exist(s), c),
    nc.INJ_CDI_SPEC_MALFORMED: lambda s, c, _: (
        replace(s, cdi_specs=tuple(x for x in s.cdi_specs if x.error is None)),
        c,
    ),
    nc.UNPREP_CHECKPOINT_LEAK: lambda s, c, tmp: (
        s,
        _with_claim(tmp, U_GONE, "gpu-0-mig-3g20gb-9-4"),
    ),
    nc.UNPREP_CDI_SPEC_LEAK: lambda s, c, tmp: (s, _with_claim(tmp, U_GONE_SPEC, "gpu-2")),
    nc.UNPREP_MIG_LEAK: lambda s, c, tmp: (s, _with_claim(tmp, U_GONE, "gpu-0-mig-3g20gb-9-4")),
    nc.UNPREP_VFIO_LEFT_BOUND: lambda s, c, _: (_bind(s, "0000:3b:00.0", "nvidia"), c),
}


@pytest.mark.parametrize("rule", list(NEAR_MISSES))
def test_fires_on_the_leaky_node_and_not_on_its_near_miss(rule: str, tmp_path: Path) -> None:
    state, snapshot = LEAKY
    assert rule in _rules(state, snapshot)
    quiet_state, quiet_snapshot = NEAR_MISSES[rule](state, snapshot, tmp_path)
    assert rule not in _rules(quiet_state, quiet_snapshot)


def test_static_mig_mismatch_both_ways() -> None:
    state, snapshot = _world("stale-mig")
    findings = {f.rule: f for f in nc.check_node(state, snapshot)}
    assert ("MIG UUID", "MIG-4f3a7b1c-8d2e-5f60-9a1b-2c3d4e5f6a7b") in findings[
        nc.PUB_MIG_NOT_PUBLISHED
    ].identifiers
    assert ("slice device name", "gpu-0-mig-3g20gb-9-0") in findings[nc.PUB_MIG_STALE].identifiers
    healthy_state, healthy_snapshot = _world("healthy")
    assert not {nc.PUB_MIG_NOT_PUBLISHED, nc.PUB_MIG_STALE} & _rules(
        healthy_state, healthy_snapshot
    )


def test_unreadable_checkpoint() -> None:
    state, snapshot = _world("corrupt-checkpoint")
    assert nc.PUB_CHECKPOINT_UNREADABLE in _rules(state, snapshot)
    assert nc.PUB_CHECKPOINT_UNREADABLE not in _rules(*_world("healthy"))


def test_the_healthy_node_has_no_findings() -> None:
    assert nc.check_node(*_world("healthy")) == []


def test_without_the_cluster_only_node_local_checks_run() -> None:
    state, _ = LEAKY
    assert _rules(state, None) == {
        nc.PREP_PREPARE_STARTED,
        nc.PREP_BOOT_MISMATCH,
        nc.PREP_VFIO_NOT_BOUND,
        nc.INJ_CDI_SPEC_ABSENT,
        nc.INJ_DEVICE_NODE_MISSING,
        nc.INJ_CDI_SPEC_MALFORMED,
        nc.UNPREP_VFIO_LEFT_BOUND,
    }


def test_claims_not_collected_are_never_read_as_gone() -> None:
    state, snapshot = LEAKY
    coverage = dict(snapshot.coverage)
    coverage[Kind.RESOURCE_CLAIM] = KindRecord(
        kind=Kind.RESOURCE_CLAIM, coverage=Coverage.UNKNOWN, reason="forbidden"
    )
    blind = Snapshot(
        objects={
            k: getattr(snapshot, a)
            for k, a in ((Kind.RESOURCE_SLICE, "slices"), (Kind.POD, "pods"))
        },
        coverage=coverage,
    )
    rules = _rules(state, blind)
    assert not {nc.UNPREP_CHECKPOINT_LEAK, nc.UNPREP_CDI_SPEC_LEAK, nc.UNPREP_MIG_LEAK} & rules


def test_findings_are_labelled_by_layer_and_sorted() -> None:
    findings = nc.check_node(*LEAKY)
    leak = next(f for f in findings if f.rule == nc.UNPREP_CHECKPOINT_LEAK)
    layers = dict(leak.identifiers)
    assert layers["claim UID"] == U_GONE and layers["file"].endswith("checkpoint.json")
    assert layers["slice device name"] == "gpu-0-mig-3g20gb-9-4"
    mig = next(f for f in findings if f.rule == nc.UNPREP_MIG_LEAK)
    assert ("slice device name", "gpu-0-mig-3g20gb-9-4") in mig.identifiers
    severities = [f.severity.value for f in findings]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert all(f.evidence and f.next for f in findings)


def test_a_claim_allocated_elsewhere_is_a_leak_here(tmp_path: Path) -> None:
    root = tmp_path / "leaky"
    shutil.copytree(FIXTURES / "leaky", root)
    text = (root / "claims.yaml").read_text().replace("gpu-node-1", "gpu-node-2")
    (root / "claims.yaml").write_text(text)
    snapshot = load_snapshot(str(root))
    state = node_states(snapshot.extras)["gpu-node-1"]
    leaks = [f for f in nc.check_node(state, snapshot) if f.rule == nc.UNPREP_CHECKPOINT_LEAK]
    assert any("is allocated to another node" in f.detail and U_SERVER in f.detail for f in leaks)
