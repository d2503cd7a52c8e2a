"""Kubernetes' own structured-allocator test table, replayed through ``dradiag simulate``.

Each vector (``k8s/dra-allocator-vectors.yaml`` beside this file, vendored with its
provenance and license) becomes a ``--from``
directory: its slices, classes and Node as manifests, and every device already in use as
a ResourceClaim whose ``status.allocation`` holds it (shared devices and consumed
capacity as results with ``shareID``/``consumedCapacity``, as a cluster records them).
The claims to allocate go in a ``--claim-file`` in the vector's order. The vector's
feature set is passed as an explicit, complete ``--feature-gates`` list; the vectors
come from the 1.37-dev allocators, so ``--kubernetes-version 1.37``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dradiag.cli.app import run

VECTORS_FILE = Path(__file__).with_name("data") / "k8s" / "dra-allocator-vectors.yaml"

GATES = {
    "AdminAccess": ("DRAAdminAccess",),
    "PrioritizedList": ("DRAPrioritizedList",),
    "PartitionableDevices": ("DRAPartitionableDevices",),
    "DeviceTaints": ("DRADeviceTaints",),
    "ConsumableCapacity": ("DRAConsumableCapacity",),
    "ListTypeAttributes": ("DRAListTypeAttributes",),
    "DeviceBindingAndStatus": ("DRADeviceBindingConditions", "DRAResourceClaimDeviceStatus"),
}


def _load() -> list[dict[str, Any]]:
    return list(yaml.safe_load(VECTORS_FILE.read_text()))


VECTORS = _load()


def _as(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    api = "v1" if kind == "Node" else "resource.k8s.io/v1"
    return {"apiVersion": api, "kind": kind, **obj}


def _in_use_claims(vector: dict[str, Any]) -> list[dict[str, Any]]:
    claims = []
    for i, dev in enumerate(vector.get("allocated_devices") or []):
        claims.append(_holder(f"in-use-{i}", {"request": "r", **dev}))
    shared: dict[tuple[str, str, str], dict[str, Any]] = {}
    for dev in vector.get("allocated_shared_device_ids") or []:
        key = (dev["driver"], dev["pool"], dev["device"])
        shared[key] = {"request": "r", **dev}
    for i, dev in enumerate(vector.get("allocated_capacity") or []):
        key = (dev["driver"], dev["pool"], dev["device"])
        result = shared.setdefault(
            key,
            {
                "request": "r",
                "driver": dev["driver"],
                "pool": dev["pool"],
                "device": dev["device"],
                "shareID": f"bbbbbbbb-0000-0000-0000-{i:012d}",
            },
        )
        result["consumedCapacity"] = dev["consumedCapacity"]
    for i, result in enumerate(shared.values()):
        claims.append(_holder(f"shared-{i}", result))
    return claims


def _holder(name: str, result: dict[str, Any]) -> dict[str, Any]:
    return _as(
        "ResourceClaim",
        {
            "metadata": {"name": name, "namespace": "holders"},
            "spec": {"devices": {"requests": []}},
            "status": {"allocation": {"devices": {"results": [result]}}},
        },
    )


def write_vector(vector: dict[str, Any], root: Path) -> tuple[Path, Path]:
    """The vector as a --from directory and a claims file."""
    cluster = root / "cluster"
    cluster.mkdir()
    items = [_as("Node", {"metadata": vector["node"]})]
    items += [_as("DeviceClass", c) for c in vector["classes"]]
    items += [_as("ResourceSlice", s) for s in vector["slices"]]
    items += _in_use_claims(vector)
    (cluster / "objects.yaml").write_text(
        yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items})
    )
    claims = root / "claims.yaml"
    claims.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "List",
                "items": [_as("ResourceClaim", c) for c in vector["claims_to_allocate"]],
            }
        )
    )
    return cluster, claims


def gates_flag(vector: dict[str, Any]) -> str:
    return ",".join(
        f"{gate}={'true' if feature in vector['features'] else 'false'}"
        for feature, gates in GATES.items()
        for gate in gates
    )


def _canon_results(results: list[dict[str, Any]], ordered: bool) -> list[str]:
    from dradiag.analyses.pools import quantity_nanos

    out = []
    for r in results:
        r = dict(r)
        if "shareID" in r:
            r["shareID"] = "generated"
        if "consumedCapacity" in r:
            r["consumedCapacity"] = {
                k: quantity_nanos(str(v)) for k, v in r["consumedCapacity"].items()
            }
        out.append(json.dumps(r, sort_keys=True))
    return out if ordered else sorted(out)


def _canon_selector(selector: dict[str, Any] | None) -> Any:
    if selector is None:
        return None
    return sorted(
        json.dumps(
            {
                key: sorted(
                    json.dumps({**req, "values": sorted(req.get("values") or [])}, sort_keys=True)
                    for req in term.get(key) or []
                )
                for key in ("matchFields", "matchExpressions")
            },
            sort_keys=True,
        )
        for term in selector["nodeSelectorTerms"]
    )


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_vector_through_simulate(
    vector: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster, claims = write_vector(vector, tmp_path)
    code = run(
        [
            "simulate",
            "--from",
            str(cluster),
            "--node",
            vector["node"]["name"],
            "--claim-file",
            str(claims),
            "--feature-gates",
            gates_flag(vector),
            "--kubernetes-version",
            "1.37",
            "-o",
            "json",
        ]
    )
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    expect = vector["expect"]
    if "error" in expect:
        assert code == 1
        assert doc["outcome"] == "error", doc
        assert expect["error"]["contains"] in doc["error"]
        assert doc["results"] == []
        return
    if expect.get("unschedulable"):
        assert code == 1
        assert doc["outcome"] == "unschedulable", doc["error"]
        assert doc["results"] == []
        return
    assert code == 0, doc["error"]
    assert doc["outcome"] == "allocated"
    assert len(doc["results"]) == len(expect["results"])
    for item in expect["results"]:
        got = doc["results"][item["claim_index"]]["allocation"]
        want = item["allocation"]
        exact = item["match"] == "exact"
        assert _canon_results(got["devices"]["results"], exact) == _canon_results(
            want["devices"]["results"], exact
        )
        assert (got["devices"].get("config") or []) == (want["devices"].get("config") or [])
        assert _canon_selector(got.get("nodeSelector")) == _canon_selector(want.get("nodeSelector"))


def test_every_vector_is_replayed() -> None:
    """The file holds the 159 vectors this suite was written against; none may go missing."""
    assert len(VECTORS) == 159
    assert len({v["name"] for v in VECTORS}) == len(VECTORS)
