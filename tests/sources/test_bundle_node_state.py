"""``dradiag bundle --node-state DIR`` and reading ``node/<node>/`` back from an archive.

The saved node state travels verbatim (not redacted: it holds no credentials), is checked
as an archive reader checks members (links, names, sizes) before any cluster read, and is
recorded in the manifest as one collector per node.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from pathlib import Path

import jsonschema
import pytest

from dradiag.cli.app import run
from dradiag.errors import InputError
from dradiag.snapshot.node_state import NODE_STATES_KEY
from dradiag.sources.bundle_node_state import gather
from dradiag.sources.manifests import load_snapshot
from dradiag.sources.node_state import load_saved_node_members, load_saved_node_states
from dradiag.sources.node_state_files import MAX_FILE_BYTES

ROOT = Path(__file__).resolve().parents[2]
NODE_FIXTURES = ROOT / "tests" / "fixtures" / "node"
SCHEMA = ROOT / "docs" / "schema" / "bundle-manifest.schema.json"
LEAKY = NODE_FIXTURES / "leaky"


def _members(archive: Path) -> dict[str, bytes]:
    with tarfile.open(archive, "r:gz") as tar:
        return {m.name: tar.extractfile(m).read() for m in tar if m.isfile()}  # type: ignore[union-attr]


def _pack(directory: Path, archive: Path) -> Path:
    with tarfile.open(archive, "w:gz") as tar:
        for path in sorted(directory.rglob("*")):
            if path.is_file():
                tar.add(path, arcname=path.relative_to(directory).as_posix())
    return archive


def _saved_copy(tmp_path: Path) -> Path:
    saved = tmp_path / "saved"
    shutil.copytree(LEAKY / "node", saved / "node")
    return saved


def test_gather_takes_every_file_verbatim_with_one_collector_per_node() -> None:
    got = gather([str(LEAKY)])
    on_disk = {
        p.relative_to(LEAKY).as_posix(): p.read_bytes()
        for p in (LEAKY / "node").rglob("*")
        if p.is_file()
    }
    assert got.members == on_disk
    (entry,) = got.collectors
    assert entry["name"] == "node/gpu-node-1" and entry["kind"] == "NodeState"
    assert entry["status"] == "collected" and entry["objects"] == len(on_disk)
    assert entry["bytes"] == sum(map(len, on_disk.values()))
    assert "not redacted" in entry["reason"]


@pytest.mark.parametrize(
    "hostile", ["symlink", "dirlink", "fifo", "hardlink", "large", "kubelet.log"]
)
def test_gather_refuses_what_a_bundle_reader_refuses(tmp_path: Path, hostile: str) -> None:
    saved = _saved_copy(tmp_path)
    files = saved / "node" / "gpu-node-1" / "files"
    if hostile == "symlink":
        (files / "leak.yaml").symlink_to("/etc/passwd")
    elif hostile == "dirlink":
        (files / "etc-link").symlink_to("/etc", target_is_directory=True)
    elif hostile == "fifo":
        os.mkfifo(files / "pipe")
    elif hostile == "hardlink":
        outside = tmp_path / "outside.txt"
        outside.write_text("not node state")
        os.link(outside, files / "linked.json")
    elif hostile == "large":
        (files / "huge.json").write_bytes(b" " * (MAX_FILE_BYTES + 1))
    else:  # the name the bundle's own --kubelet-logs member has
        (files.parent / "kubelet.log").write_text("I0101 not saved node state\n")
    with pytest.raises(InputError, match="refused"):
        gather([str(saved)])


def test_gather_refuses_missing_malformed_and_twice_saved_nodes(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no saved node state"):
        gather([str(tmp_path)])
    saved = _saved_copy(tmp_path)
    other = tmp_path / "other"
    shutil.copytree(saved, other)
    with pytest.raises(InputError, match="two --node-state folders"):
        gather([str(saved), str(other)])
    (saved / "node" / "gpu-node-1" / "node.json").write_text("{not json")
    with pytest.raises(InputError, match="malformed"):
        gather([str(saved)])


def test_bundle_cli_adds_node_state_and_the_manifest_validates(
    kube_api_factory, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("KUBECONFIG", raising=False)
    server = kube_api_factory(LEAKY, server_version="1.34")
    kubeconfig = str(server.write_kubeconfig(tmp_path / "kubeconfig"))
    archive = tmp_path / "b.tar.gz"
    argv = ["bundle", "-A", "-o", str(archive), "--kubeconfig", kubeconfig]
    assert run([*argv, "--node-state", str(LEAKY)]) == 0
    members = _members(archive)
    node_json = "node/gpu-node-1/node.json"
    assert members[node_json] == (LEAKY / node_json).read_bytes()
    manifest = json.loads(members["manifest.json"])
    jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text())).validate(manifest)
    assert [c["name"] for c in manifest["collectors"] if c["kind"] == "NodeState"] == [
        "node/gpu-node-1"
    ]
    # the bundle's own analysis saw the node evidence
    assert b"DRA-UNPREP-LEAKED-STATE" in members["analysis.json"]
    # a hostile folder: one line, exit 2, nothing read from the cluster, nothing written
    saved = _saved_copy(tmp_path)
    (saved / "node" / "gpu-node-1" / "files" / "x.yaml").symlink_to("/etc/passwd")
    before = len(server.requests)
    capsys.readouterr()
    out = tmp_path / "refused.tar.gz"
    code = run(
        ["bundle", "-A", "-o", str(out), "--kubeconfig", kubeconfig, "--node-state", str(saved)]
    )
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err and "Traceback" not in err
    assert not out.exists()
    assert len(server.requests) == before


def test_archive_members_load_as_the_directory_does(tmp_path: Path) -> None:
    archive = _pack(LEAKY, tmp_path / "leaky.tar.gz")
    members = _members(archive)
    from_members = load_saved_node_members(members, str(archive))
    from_dir = load_saved_node_states(str(LEAKY))
    assert from_members.keys() == from_dir.keys() == {"gpu-node-1"}
    a, b = from_members["gpu-node-1"], from_dir["gpu-node-1"]
    assert a.source == f"{archive}/node/gpu-node-1"
    from dataclasses import replace

    assert replace(a, source=b.source) == b


def test_a_bare_archive_of_a_node_fixture_carries_its_node_state(tmp_path: Path) -> None:
    """No manifest: node/ is still node state, never read as Kubernetes objects."""
    for name in ("leaky", "healthy", "stale-mig", "corrupt-checkpoint"):
        archive = _pack(NODE_FIXTURES / name, tmp_path / f"{name}.tar.gz")
        states = load_snapshot(str(archive)).extras.get(NODE_STATES_KEY) or {}
        assert states.keys() == load_saved_node_states(str(NODE_FIXTURES / name)).keys()
        assert states


def test_oversized_member_in_an_archive_is_an_unreadable_spec(tmp_path: Path) -> None:
    members = {
        "node/n1/node.json": json.dumps(
            {"format": "dradiag.node-state/v1", "node": "n1", "cdiDirs": ["/var/run/cdi"]}
        ).encode(),
        "node/n1/files/var/run/cdi/big.yaml": b"#" * (MAX_FILE_BYTES + 1),
    }
    state = load_saved_node_members(members, "b.tar.gz")["n1"]
    (spec,) = state.cdi_specs
    assert spec.error and spec.error.startswith("cannot read")
