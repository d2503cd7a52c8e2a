"""Reading node state: CDI specs and checkpoints of every driver version, NVML through the
stand-in, a host root (sysfs, boot ID, device nodes), and the saved form round trip."""

from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from dradiag.sources.node_state import (
    collect_node_state,
    load_saved_node_states,
    save_node_state,
)
from dradiag.sources.node_state_files import parse_cdi_spec, parse_checkpoint
from dradiag.sources.node_state_nvml import INSTALL_HINT, normalize_pci_bus_id, read_nvml

NODE_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "node"
SAMPLES = NODE_FIXTURES / "samples"
U_CAPS = "6f04a69a-96a1-4662-9d32-d0881d43397e"
U_VM = "dab5ab50-d59a-42a6-af16-cfd4628c0f7a"
U_SERVER = "8ad83846-768e-579c-afeb-0c56ca776968"
U_START = "1f2e3d4c-5b6a-4798-8a7b-6c5d4e3f2a1b"


def standin() -> Any:
    spec = importlib.util.spec_from_file_location("nvml_standin", NODE_FIXTURES / "nvml_standin.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["nvml_standin"] = module
    spec.loader.exec_module(module)
    return module


def _spec(name: str) -> Any:
    path = SAMPLES / "cdi" / name
    return parse_cdi_spec(path.read_bytes(), f"/var/run/cdi/{name}")


def test_claim_spec_yaml_v25_12() -> None:
    spec = _spec(f"k8s.gpu.nvidia.com-claim_{U_CAPS}.yaml")
    assert spec.error is None
    assert (spec.cdi_version, spec.kind, spec.scheme, spec.claim_uid) == (
        "0.6.0",
        "k8s.gpu.nvidia.com/claim",
        "claim",
        U_CAPS,
    )
    assert spec.cdi_device_ids == (f"k8s.gpu.nvidia.com/claim={U_CAPS}-gpu-1-mig-2g47gb-14-0",)
    assert [n.path for n in spec.devices[0].device_nodes] == [
        "/dev/nvidia1",
        "/dev/nvidia-caps/nvidia-cap30",
        "/dev/nvidia-caps/nvidia-cap31",
    ]
    assert [n.path for n in spec.spec_device_nodes] == ["/dev/nvidiactl", "/dev/nvidia-uvm"]


def test_claim_spec_json() -> None:
    spec = _spec(f"k8s.gpu.nvidia.com-claim_{U_VM}.json")
    assert spec.error is None and spec.cdi_version == "0.5.0" and spec.claim_uid == U_VM


def test_base_spec_of_v25_8_uses_the_device_class_ids() -> None:
    spec = _spec("k8s.gpu.nvidia.com-device_base.yaml")
    assert spec.scheme == "device-base" and spec.claim_uid is None
    assert "k8s.gpu.nvidia.com/device=gpu-0" in spec.cdi_device_ids
    assert "k8s.gpu.nvidia.com/device=gpu-0-mig-19-0-1" in spec.cdi_device_ids


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b"cdiVersion: 0.6.0\ndevices: [\n", "not valid YAML/JSON"),
        (b"- a list\n", "not a mapping"),
        (b"kind: k8s.gpu.nvidia.com/claim\ndevices: []\n", "cdiVersion is missing"),
        (b"cdiVersion: 0.6.0\nkind: claim\ndevices: []\n", "is not <vendor>/<class>"),
        (b"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: {}\n", "devices is not a list"),
        (b"cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{}]\n", "devices[0] has no name"),
        (b"\xff\xfe", "not valid YAML/JSON"),
    ],
)
def test_malformed_specs_are_values_with_an_error(text: bytes, fragment: str) -> None:
    spec = parse_cdi_spec(text, f"/var/run/cdi/k8s.gpu.nvidia.com-claim_{U_CAPS}.yaml")
    assert spec.error is not None and fragment in spec.error
    assert spec.claim_uid == U_CAPS  # the file name still names the claim
    assert spec.devices == ()


def _checkpoint(name: str) -> Any:
    return parse_checkpoint((SAMPLES / "checkpoints" / name).read_bytes(), "/ckpt.json")


def test_checkpoint_v25_3_v1_only_entries_are_completed() -> None:
    cp = _checkpoint("v25.3-v1-only.json")
    assert cp.error is None and cp.versions == ("v1",) and cp.node_boot_id is None
    (claim,) = cp.claims
    assert (claim.claim_uid, claim.state, claim.name) == (U_SERVER, "PrepareCompleted", None)
    assert claim.devices[0].type == "gpu" and claim.devices[0].slice_device_name == "gpu-0"
    assert claim.allocated == (("gpu.nvidia.com", "gpu-node-1", "gpu-0"),)


def test_checkpoint_v25_8_reads_v2_states_without_names() -> None:
    cp = _checkpoint("v25.8-v1-v2.json")
    assert cp.versions == ("v1", "v2")
    states = {c.claim_uid: (c.state, c.namespace, c.name, c.devices) for c in cp.claims}
    assert states[U_START] == ("PrepareStarted", None, None, ())
    assert states[U_SERVER][0] == "PrepareCompleted"
    assert states[U_SERVER][3][0].cdi_device_ids == (f"k8s.gpu.nvidia.com/claim={U_SERVER}-gpu-0",)


def test_checkpoint_v25_12_names_started_claims() -> None:
    cp = _checkpoint("v25.12-named-started.json")
    started = next(c for c in cp.claims if c.claim_uid == U_START)
    assert started.label == f"ml/mig-starter:{U_START}"


def test_checkpoint_v0_4_carries_the_boot_id() -> None:
    cp = _checkpoint("v0.4-boot-id.json")
    assert cp.node_boot_id == "0c1f6a2e-7d55-4c1b-9a0e-3f2b8d9e4a11"


def test_checkpoint_with_every_device_kind() -> None:
    data = (
        NODE_FIXTURES
        / "leaky/node/gpu-node-1/files/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json"
    ).read_bytes()
    cp = parse_checkpoint(data, "/ckpt.json")
    kinds = {d.type: d for c in cp.claims for d in c.devices}
    assert set(kinds) == {"gpu", "mig", "vfio"}
    assert kinds["mig"].mig_uuid == "MIG-4f3a7b1c-8d2e-5f60-9a1b-2c3d4e5f6a7b"
    assert kinds["mig"].gpu_uuid == "GPU-2fa81118-5a5f-aa66-7660-471eed407181"
    assert kinds["vfio"].pci_bus_id == "0000:5e:00.0"


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        (b'{"v2": {"preparedClaims": {"x', "not valid JSON"),
        (b"[]", "not a JSON object"),
        (b'{"checksum": 1}', "neither a v1 nor a v2 section"),
        (b'{"v2": {"preparedClaims": []}}', "preparedClaims is not an object"),
        (b'{"v2": {"preparedClaims": {"u": 3}}}', "preparedClaims[u] is not an object"),
    ],
)
def test_malformed_checkpoints_are_values_with_an_error(text: bytes, fragment: str) -> None:
    cp = parse_checkpoint(text, "/ckpt.json")
    assert cp.error is not None and fragment in cp.error and cp.claims == ()


# -- NVML --------------------------------------------------------------------------------


def test_nvml_a100_h100_gb200() -> None:
    s = standin()
    state, reason = read_nvml(
        s.FakeNvml([s.a100_static_mig(), s.h100_mig_pending_off(), s.gb200_full()])
    )
    assert reason is None and state is not None
    assert (state.driver_version, state.cuda_driver_version) == ("570.170.01", "12.8")
    a100, h100, gb200 = state.gpus
    assert a100.pci_bus_id == "0000:07:00.0" and a100.slice_device_name == "gpu-0"
    assert [
        (m.profile, m.gi_profile_id, m.placement_start, m.placement_size) for m in a100.mig
    ] == [
        ("3g.20gb", 9, 4, 4),
        ("1g.5gb", 19, 0, 1),
    ]
    assert a100.processes[0].on_uuid == "MIG-a1b2c3d4-e5f6-5a7b-8c9d-0e1f2a3b4c5d"
    assert (h100.mig_current, h100.mig_pending, h100.pci_bus_id) == (True, False, "0000:1b:00.0")
    assert h100.mig[0].profile == "3g.40gb"
    assert gb200.mig == () and gb200.mig_current is False and gb200.memory_bytes == 206158430208
    assert gb200.pci_bus_id == "0008:01:00.0" and gb200.processes[0].pid == 31337


def test_nvml_without_a_driver_is_one_reason() -> None:
    s = standin()
    state, reason = read_nvml(s.FakeNvml([], init_error="Driver Not Loaded"))
    assert state is None and reason == "Driver Not Loaded"


def test_nvml_without_the_library_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    assert read_nvml() == (None, INSTALL_HINT)


def test_pci_bus_ids_take_the_sysfs_form() -> None:
    assert normalize_pci_bus_id("00000000:3B:00.0") == "0000:3b:00.0"
    assert normalize_pci_bus_id("0000:3b:00.0") == "0000:3b:00.0"


# -- a host root and the saved form --------------------------------------------------------


def _collect(tmp_path: Path) -> Any:
    s = standin()
    root = tmp_path / "host"
    shutil.copytree(NODE_FIXTURES / "hostroot-leaky", root, symlinks=True)
    return collect_node_state(
        "gpu-node-1", host_root=str(root), nvml=s.FakeNvml([s.a100_static_mig()]), collected_at="t"
    )


def test_host_root_reads_sysfs_boot_id_and_device_nodes(tmp_path: Path) -> None:
    state, raw = _collect(tmp_path)
    drivers = {p.pci_bus_id: p.driver for p in state.pci}
    assert drivers["0000:3b:00.0"] == "vfio-pci" and drivers["0000:07:00.0"] == "nvidia"
    assert "0000:07:00.1" not in drivers  # the card's audio function is not a GPU
    assert state.boot_id == "5e7a9c3d-1b2f-4e6a-8c0d-9f1e2a3b4c5d"
    exists = {n.path: n.exists for s in state.cdi_specs for d in s.devices for n in d.device_nodes}
    assert exists["/dev/nvidia-caps/nvidia-cap99"] is False and exists["/dev/nvidia3"] is True
    assert sorted(s.path for s in state.cdi_specs)[0].startswith("/var/run/cdi/")
    assert state.checkpoint is not None and len(state.checkpoint.claims) == 5
    assert "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json" in raw


def test_missing_sysfs_is_a_reason_not_a_crash(tmp_path: Path) -> None:
    state, _ = collect_node_state("n", host_root=str(tmp_path), use_nvml=False)
    assert state.pci is None and "not readable" in str(state.pci_unavailable)
    assert state.checkpoint is None and state.cdi_specs == ()
    assert state.nvml_unavailable == "not read (--no-nvml)"


def test_saved_state_reads_back_equal(tmp_path: Path) -> None:
    state, raw = _collect(tmp_path)
    folder = save_node_state(state, raw, str(tmp_path / "out"))
    assert folder == tmp_path / "out" / "node" / "gpu-node-1"
    json.loads((folder / "node.json").read_text())
    back = load_saved_node_states(str(tmp_path / "out"))["gpu-node-1"]
    assert replace(back, source="live") == state


def test_a_malformed_saved_state_is_an_input_error(tmp_path: Path) -> None:
    from dradiag.errors import InputError

    folder = tmp_path / "node" / "n1"
    folder.mkdir(parents=True)
    (folder / "node.json").write_text('{"format": "something else"}')
    with pytest.raises(InputError, match="saved node state is malformed"):
        load_saved_node_states(str(tmp_path))


def test_from_directory_keeps_node_files_out_of_the_objects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from dradiag.snapshot.node_state import node_states
    from dradiag.sources.manifests import load_snapshot

    snapshot = load_snapshot(str(NODE_FIXTURES / "leaky"))
    assert len(snapshot.claims) == 5
    assert list(node_states(snapshot.extras)) == ["gpu-node-1"]
    assert not [r for r in caplog.records if "skipped" in r.getMessage()]


def test_a_saved_state_never_reads_outside_its_folder(tmp_path: Path) -> None:
    from dradiag.errors import InputError

    folder = tmp_path / "node" / "n1"
    (folder / "files").mkdir(parents=True)
    meta = {"format": "dradiag.node-state/v1", "node": "n1", "cdiDirs": ["/var/run/cdi"]}
    meta["checkpointPath"] = "/../../../etc/passwd"
    (folder / "node.json").write_text(json.dumps(meta))
    with pytest.raises(InputError, match="leaves the saved folder"):
        load_saved_node_states(str(tmp_path))
    meta["checkpointPath"] = "/ckpt.json"
    (folder / "node.json").write_text(json.dumps(meta))
    outside = tmp_path / "secret.yaml"
    outside.write_text("cdiVersion: 0.6.0\nkind: a.b/c\ndevices: [{name: x}]\n")
    cdi = folder / "files" / "var" / "run" / "cdi"
    cdi.mkdir(parents=True)
    (cdi / "link.yaml").symlink_to(outside)
    (folder / "files" / "ckpt.json").symlink_to(outside)
    state = load_saved_node_states(str(tmp_path))["n1"]
    assert state.cdi_specs == () and state.checkpoint is None
