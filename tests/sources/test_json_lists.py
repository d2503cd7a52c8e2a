"""sources.json_lists: large JSON lists split undecoded, and the Snapshot fed from them.

``split_json_list`` must accept exactly the plain ``<Kind>List``/``List`` files and leave
everything else to the normal loader; its stores must decode to what the loader would
have read (``_expand``: items without a kind take the list's), and ``candidates`` must
never miss an item that holds the looked-up string. Through ``load_snapshot(defer=True)``
every Snapshot look-up must answer what the eager load answers, with one object per
item whichever way it is reached.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
import pytest
import yaml

from dradiag.snapshot.model import Coverage, Kind, Snapshot
from dradiag.sources import json_lists
from dradiag.sources.json_lists import DeferredJsonItems, SplitList, split_json_list
from dradiag.sources.manifests import load_documents, load_snapshot

DRIVER = "gpu.nvidia.com"
NODES = [f"gpu-node-{i}" for i in range(4)]
T0 = 1_772_445_600  # 2026-03-02T10:00:00Z


def _uid(*parts: object) -> str:
    return str(uuid.uuid5(uuid.NAMESPACE_URL, "/".join(map(str, parts))))


def _time(offset: int) -> str:
    return datetime.fromtimestamp(T0 + offset, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture
def defer_all(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every JSON list file is split when the caller defers (the 4 MiB floor dropped)."""
    monkeypatch.setattr(json_lists, "DEFER_MIN_BYTES", 0)


# -- reference helpers ------------------------------------------------------------------


def _expanded(text: bytes | str) -> list[dict[str, Any]]:
    """The list's items as ``sources.manifests._expand`` yields them, from orjson."""
    doc = orjson.loads(text.removeprefix(b"\xef\xbb\xbf") if isinstance(text, bytes) else text)
    list_api, item_kind = doc.get("apiVersion"), doc["kind"][: -len("List")]
    return [
        item if "kind" in item else {"apiVersion": list_api, "kind": item_kind, **item}
        for item in doc["items"]
    ]


def _strings(value: Any) -> Iterator[str]:
    """Every string in a decoded JSON value: dict keys, values, array elements."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, inner in value.items():
            yield key
            yield from _strings(inner)
    elif isinstance(value, list):
        for inner in value:
            yield from _strings(inner)


def _holding(items: list[dict[str, Any]], value: str) -> list[int]:
    """Brute force: indexes of the items whose decoded form holds ``value`` as a string."""
    return [i for i, item in enumerate(items) if any(s == value for s in _strings(item))]


def _split(text: bytes | str, path: str = "items.json") -> SplitList:
    data = text.encode() if isinstance(text, str) else text
    found = split_json_list(data, path)
    assert found is not None, "a plain JSON list was not split"
    return found


def _only_store(text: bytes | str) -> DeferredJsonItems:
    found = _split(text)
    assert len(found.stores) == 1 and not found.skipped
    return found.stores[0]


def _store_of(found: SplitList, kind: Kind) -> DeferredJsonItems:
    stores = [s for s in found.stores if s.kind is kind]
    assert len(stores) == 1, f"{len(stores)} stores of {kind}"
    return stores[0]


# -- realistic objects ------------------------------------------------------------------


def _pod(
    ns: str,
    name: str,
    *,
    uid: str,
    node: str | None,
    claim: str | None = None,
    template: str | None = None,
    generated: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/cuda:12.4.0-base-ubuntu22.04",
                "resources": {"claims": [{"name": "gpu"}]} if claim or template else {},
            }
        ],
        "restartPolicy": "Never",
    }
    if node:
        spec["nodeName"] = node
    if claim:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimName": claim}]
    if template:
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    status: dict[str, Any] = {"phase": "Running" if node else "Pending"}
    if generated:
        status["resourceClaimStatuses"] = [{"name": "gpu", "resourceClaimName": generated}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "namespace": ns,
            "uid": uid,
            "labels": {"app.kubernetes.io/name": name.split("-")[0]},
        },
        "spec": spec,
        "status": status,
    }


def _claim(
    ns: str,
    name: str,
    *,
    version: str,
    node: str | None,
    device: str,
    reserved_by: tuple[str, str] | None,
    owner: tuple[str, str] | None = None,
) -> dict[str, Any]:
    request: dict[str, Any] = {"name": "gpu"}
    if version == "v1":
        request["exactly"] = {"deviceClassName": DRIVER, "allocationMode": "ExactCount"}
    else:  # v1beta1: the request's fields at its top level
        request.update(deviceClassName=DRIVER, allocationMode="ExactCount", count=1)
    meta: dict[str, Any] = {"name": name, "namespace": ns, "uid": _uid("claim", ns, name)}
    if owner:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Pod", "name": owner[0], "uid": owner[1]}
        ]
    obj: dict[str, Any] = {
        "apiVersion": f"resource.k8s.io/{version}",
        "kind": "ResourceClaim",
        "metadata": meta,
        "spec": {"devices": {"requests": [request]}},
    }
    if node:
        obj["status"] = {
            "allocation": {
                "devices": {
                    "results": [
                        {"request": "gpu", "driver": DRIVER, "pool": node, "device": device}
                    ]
                },
                "nodeSelector": {
                    "nodeSelectorTerms": [
                        {
                            "matchFields": [
                                {"key": "metadata.name", "operator": "In", "values": [node]}
                            ]
                        }
                    ]
                },
            },
            "reservedFor": (
                [{"resource": "pods", "name": reserved_by[0], "uid": reserved_by[1]}]
                if reserved_by
                else []
            ),
        }
    return obj


def _core_event(kind: str, ns: str, name: str, uid: str | None, at: int, n: int) -> dict[str, Any]:
    involved = {"apiVersion": "v1", "kind": kind, "namespace": ns, "name": name}
    if uid:
        involved["uid"] = uid
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{n:016x}", "namespace": ns, "uid": _uid("ev", n)},
        "involvedObject": involved,
        "reason": "Scheduled" if kind == "Pod" else "ClaimPending",
        "message": f"Successfully assigned {ns}/{name} to a node",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": _time(at),
        "lastTimestamp": _time(at),
        "source": {"component": "default-scheduler"},
    }


def _new_event(kind: str, ns: str, name: str, uid: str, at: int, n: int) -> dict[str, Any]:
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{n:016x}", "namespace": ns, "uid": _uid("ev", n)},
        "regarding": {
            "apiVersion": "resource.k8s.io/v1",
            "kind": kind,
            "namespace": ns,
            "name": name,
            "uid": uid,
        },
        "reason": "Allocated",
        "note": f"allocated {DRIVER} device for {name}",
        "type": "Normal",
        "eventTime": _time(at),
        "reportingController": "resource-claim-controller",
        "reportingInstance": "kube-controller-manager-cp-0",
    }


class Cluster:
    """A small DRA cluster written as the files ``--from`` reads, and what to ask of it."""

    def __init__(self) -> None:
        self.pods_before: list[dict[str, Any]] = []  # a-pods.yaml (decoded eagerly)
        self.claims: list[dict[str, Any]] = []  # claims.json: kubectl `List`, indent 4
        self.mixed: list[dict[str, Any]] = []  # mixed.json: several kinds in one `List`
        self.raw_pods: list[dict[str, Any]] = []  # pods.json: compact raw PodList
        self.pods_after: list[dict[str, Any]] = []  # z-pods.yaml (decoded eagerly)
        events: list[dict[str, Any]] = []
        pods_a: list[dict[str, Any]] = []
        pods_b: list[dict[str, Any]] = []
        for ns, pods in (("team-a", pods_a), ("team-b", pods_b)):
            for i in range(10):
                claim_name, pod_name = f"train-{i}", f"train-{i}-worker"
                pod_uid = _uid("pod", ns, pod_name)
                node = NODES[i % 4] if i % 5 != 4 else None
                self.claims.append(
                    _claim(
                        ns,
                        claim_name,
                        version="v1beta1" if i % 2 == 0 else "v1",
                        node=node,
                        device=f"gpu-{i % 3}",
                        reserved_by=(pod_name, pod_uid) if node else None,
                    )
                )
                pods.append(_pod(ns, pod_name, uid=pod_uid, node=node, claim=claim_name))
        for i in range(3):  # pods whose claims were generated from a template
            pod_name, claim_name = f"infer-{i}", f"infer-{i}-gpu-x7k2q"
            pod_uid = _uid("pod", "team-a", pod_name)
            node = NODES[(i + 1) % 4]
            self.claims.append(
                _claim(
                    "team-a",
                    claim_name,
                    version="v1beta1",
                    node=node,
                    device="gpu-3",
                    reserved_by=None,
                    owner=(pod_name, pod_uid),
                )
            )
            pods_a.append(
                _pod(
                    "team-a",
                    pod_name,
                    uid=pod_uid,
                    node=node,
                    template="gpu-template",
                    generated=claim_name,
                )
            )
        # Duplicates (the later object wins a name look-up): an older incarnation of
        # train-1-worker earlier in the same deferred file, ...
        old = _pod("team-a", "train-1-worker", uid=_uid("old", 1), node=NODES[2], claim="train-1")
        self.raw_pods = [old, *pods_a]
        # ... one of train-2-worker in a YAML file before its deferred one, ...
        self.pods_before = [
            _pod("team-b", "train-2-worker", uid=_uid("old", 2), node=NODES[3], claim="train-2"),
            _pod("team-a", "debug-shell", uid=_uid("pod", "debug"), node=NODES[0]),
        ]
        # ... and a newer train-5-worker in a YAML file after its deferred one.
        self.pods_after = [
            _pod("team-a", "train-5-worker", uid=_uid("new", 5), node=NODES[3], claim="train-5")
        ]
        every_pod = self.pods_before + self.raw_pods + pods_b + self.pods_after
        for n, pod in enumerate(every_pod):
            meta = pod["metadata"]
            at = (n * 37) % 600  # not in input order: events_for sorts by time
            events.append(_core_event("Pod", meta["namespace"], meta["name"], meta["uid"], at, n))
        for n, claim in enumerate(self.claims, start=len(every_pod)):
            meta = claim["metadata"]
            at = (n * 53) % 900
            events.append(
                _new_event("ResourceClaim", meta["namespace"], meta["name"], meta["uid"], at, n)
            )
            if n % 3 == 0:  # an event that names the claim without its UID
                events.append(
                    _core_event(
                        "ResourceClaim", meta["namespace"], meta["name"], None, at + 1, n + 1000
                    )
                )
        nodes = [
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": node,
                    "uid": _uid("node", node),
                    "labels": {"kubernetes.io/hostname": node, "nvidia.com/gpu.present": "true"},
                },
                "status": {"conditions": [{"type": "Ready", "status": "True"}]},
            }
            for node in NODES
        ]
        classes = [
            {
                "apiVersion": "resource.k8s.io/v1",
                "kind": "DeviceClass",
                "metadata": {"name": DRIVER},
                "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
            },
            {
                "apiVersion": "resource.k8s.io/v1beta1",
                "kind": "DeviceClass",
                "metadata": {"name": "mig.nvidia.com"},
                "spec": {
                    "selectors": [
                        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].type == 'mig'"}}
                    ]
                },
            },
        ]
        slices = [
            {
                "apiVersion": "resource.k8s.io/v1beta1",
                "kind": "ResourceSlice",
                "metadata": {"name": f"{node}-{DRIVER}-x7k2q"},
                "spec": {
                    "driver": DRIVER,
                    "nodeName": node,
                    "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                    "devices": [
                        {"name": f"gpu-{d}", "basic": {"attributes": {"type": {"string": "gpu"}}}}
                        for d in range(4)
                    ],
                },
            }
            for node in NODES
        ]
        unread = [
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "train-0", "namespace": "team-a"},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "namespace": "team-a"},
            },
            {
                "apiVersion": "apps/v1",
                "kind": "StatefulSet",
                "metadata": {"name": "infer", "namespace": "team-a"},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "kube-root-ca.crt", "namespace": "team-b"},
            },
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "gpu-config", "namespace": "team-b"},
            },
        ]
        # Interleaved so that every kind's order inside the file matters.
        pieces: list[list[dict[str, Any]]] = [
            events[0::2],
            pods_b,
            nodes,
            classes,
            slices,
            unread,
            events[1::2],
        ]
        longest = max(map(len, pieces))
        self.mixed = [p[i] for i in range(longest) for p in pieces if i < len(p)]
        self.events = events
        self.every_pod = every_pod

    def write(self, root: Path) -> Path:
        root.mkdir(parents=True, exist_ok=True)
        (root / "a-pods.yaml").write_text(yaml.safe_dump_all(self.pods_before))
        body = {
            "apiVersion": "v1",
            "items": self.claims,
            "kind": "List",
            "metadata": {"resourceVersion": ""},
        }
        (root / "claims.json").write_text(json.dumps(body, indent=4))
        (root / "mixed.json").write_text(
            json.dumps({"apiVersion": "v1", "items": self.mixed, "kind": "List"}, indent=2)
        )
        bare = [
            {k: v for k, v in p.items() if k not in ("apiVersion", "kind")} for p in self.raw_pods
        ]
        raw = {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": "48213"},
            "items": bare,
        }
        (root / "pods.json").write_text(json.dumps(raw, separators=(",", ":")))
        (root / "z-pods.yaml").write_text(yaml.safe_dump_all(self.pods_after))
        return root

    # What to ask: every key present, plus some that are not.

    def claim_keys(self) -> list[tuple[str, str]]:
        keys = [(c["metadata"]["namespace"], c["metadata"]["name"]) for c in self.claims]
        return keys + [("team-a", "missing"), ("team-c", "train-0")]

    def claim_uids(self) -> list[str]:
        return [c["metadata"]["uid"] for c in self.claims] + [_uid("nope")]

    def pod_keys(self) -> list[tuple[str, str]]:
        keys = [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in self.every_pod]
        return keys + [("team-a", "missing"), ("team-b", "infer-0")]

    def pod_uids(self) -> list[str]:
        return [p["metadata"]["uid"] for p in self.every_pod] + [_uid("nope")]

    def pod_identities(self) -> list[tuple[tuple[str, str], str]]:
        """(namespace, name) with its own UID, and with a UID that is not its own."""
        own = [
            ((p["metadata"]["namespace"], p["metadata"]["name"]), p["metadata"]["uid"])
            for p in self.every_pod
        ]
        return own + [(key, _uid("nope")) for key, _ in own[:5]]

    def claim_identities(self) -> list[tuple[tuple[str, str], str]]:
        own = [
            ((c["metadata"]["namespace"], c["metadata"]["name"]), c["metadata"]["uid"])
            for c in self.claims
        ]
        return own + [(key, _uid("nope")) for key, _ in own[:5]]

    def devices(self) -> list[tuple[str, str, str]]:
        return [(DRIVER, node, f"gpu-{d}") for node in NODES for d in range(5)]


Question = Callable[[Cluster, Snapshot], list[Any]]


def _pods_for_claims(c: Cluster, s: Snapshot) -> list[Any]:
    out: list[Any] = []
    for key in c.claim_keys():
        claim = s.claim(*key)
        out.append(None if claim is None else s.pods_for_claim(claim))
    return out


QUESTIONS: dict[str, tuple[Question, tuple[Kind, ...]]] = {
    "claim": (lambda c, s: [s.claim(*k) for k in c.claim_keys()], (Kind.RESOURCE_CLAIM,)),
    "claim_by_uid": (
        lambda c, s: [s.claim_by_uid(u) for u in c.claim_uids()],
        (Kind.RESOURCE_CLAIM,),
    ),
    "pod": (lambda c, s: [s.pod(*k) for k in c.pod_keys()], (Kind.POD,)),
    "pod_by_uid": (lambda c, s: [s.pod_by_uid(u) for u in c.pod_uids()], (Kind.POD,)),
    "pods_on_node": (lambda c, s: [s.pods_on_node(n) for n in [*NODES, "gpu-node-9"]], (Kind.POD,)),
    "pods_for_claim": (_pods_for_claims, (Kind.POD, Kind.RESOURCE_CLAIM)),
    "events_for": (
        lambda c, s: (
            [s.events_for("Pod", *k) for k in c.pod_keys()]
            + [s.events_for("ResourceClaim", *k) for k in c.claim_keys()]
        ),
        (Kind.EVENT,),
    ),
    "events_for_uid": (
        lambda c, s: (
            [s.events_for("Pod", *k, uid=u) for k, u in c.pod_identities()]
            + [s.events_for("ResourceClaim", *k, uid=u) for k, u in c.claim_identities()]
        ),
        (Kind.EVENT,),
    ),
    "claims_reserving_device": (
        lambda c, s: [s.claims_reserving_device(*d) for d in c.devices()],
        (Kind.RESOURCE_CLAIM,),
    ),
    "node": (lambda c, s: [s.node(n) for n in [*NODES, "gpu-node-9"]], (Kind.NODE,)),
    "device_class": (
        lambda c, s: [s.device_class(n) for n in (DRIVER, "mig.nvidia.com", "nic.example.com")],
        (Kind.DEVICE_CLASS,),
    ),
    "slices": (
        lambda c, s: (
            [s.slices_for(node=n) for n in NODES] + [s.pool_slices(DRIVER, n) for n in NODES]
        ),
        (Kind.RESOURCE_SLICE,),
    ),
}


# -- split_json_list: what is split, into what ------------------------------------------


def _generated_pods(n: int) -> list[dict[str, Any]]:
    """``n`` pods (no kind/apiVersion) naming each other, nodes and UIDs in many places:
    values, dict keys, array elements, and inside longer strings (which do not count)."""
    items = []
    for i in range(n):
        node = f"node-{i % 7}"
        item: dict[str, Any] = {
            "metadata": {
                "name": f"pod-{i}",
                "namespace": ("team-a", "team-b", "ml-infra")[i % 3],
                "uid": _uid("pod", i),
                "labels": {f"node-{i % 5}": "true", "app": f"pod-{i // 10}"},
                "annotations": {
                    "note": f"scheduled pod-{i} on {node}",
                    "previous": f"pod-{i}0",
                    "ref": f"{_uid('pod', i + 1)}-x",
                },
            },
            "spec": {
                "containers": [
                    {
                        "name": "main",
                        "image": "registry.k8s.io/pause:3.9",
                        "env": [{"name": "PEER", "value": f"pod-{(i * 7) % n}"}],
                        "args": [f"--node={node}0", "--peer", f"pod-{(i * 13) % n}"],
                    }
                ]
            },
        }
        if i % 4:
            item["spec"]["nodeName"] = node
        if i % 9 == 0:
            item["spec"]["nodeSelector"] = {"kubernetes.io/hostname": f"node-{(i + 1) % 7}"}
        if i % 11 == 0:
            item["metadata"]["ownerReferences"] = [
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": f"pod-{i + 1}",
                    "uid": _uid("pod", i + 1),
                }
            ]
        items.append(item)
    return items


def _with_kind(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"apiVersion": "v1", "kind": "Pod", **item} for item in items]


def _raw_pod_list(items: list[dict[str, Any]]) -> str:
    """``kubectl get --raw /api/v1/pods``: compact, items without kind/apiVersion."""
    doc = {
        "kind": "PodList",
        "apiVersion": "v1",
        "metadata": {"resourceVersion": "48213"},
        "items": items,
    }
    return json.dumps(doc, separators=(",", ":"))


def _kubectl_list(items: list[dict[str, Any]], indent: int = 4) -> str:
    """``kubectl get pods -o json``: an indented ``List`` whose items carry their kind."""
    doc = {"apiVersion": "v1", "items": items, "kind": "List", "metadata": {"resourceVersion": ""}}
    return json.dumps(doc, indent=indent)


def _separated(items: list[dict[str, Any]], separators: Iterator[str]) -> str:
    """A ``List`` whose items are separated by whatever ``separators`` yields, in turn."""
    texts = [json.dumps(item) for item in items]
    body = texts[0] + "".join(next(separators) + text for text in texts[1:])
    return '{"apiVersion": "v1", "items": [\n  ' + body + '\n], "kind": "List", "metadata": {}}'


def _alternating(*seps: str) -> Iterator[str]:
    while True:
        yield from seps


def _gaps(first: list[int], then: list[int]) -> Iterator[str]:
    """Separators of these byte lengths: ``first`` once, then ``then`` over and over."""
    for n in first:
        yield ",\n" + " " * (n - 2)
    while True:
        for n in then:
            yield ",\n" + " " * (n - 2)


def _mixed_list(items: list[dict[str, Any]]) -> str:
    """Pods interleaved with Events about them and a Node: the pods' store is a copy."""
    mixed: list[dict[str, Any]] = []
    for i, pod in enumerate(items):
        mixed.append(pod)
        if i % 3 == 0:
            meta = pod["metadata"]
            mixed.append(_core_event("Pod", meta["namespace"], meta["name"], meta["uid"], i, i))
    mixed.insert(5, {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-3"}})
    return json.dumps({"apiVersion": "v1", "kind": "List", "items": mixed}, indent=2)


N = 400
LAYOUTS: dict[str, Callable[[list[dict[str, Any]]], str]] = {
    "raw-compact-PodList": _raw_pod_list,
    "kubectl-indented-List": lambda items: _kubectl_list(_with_kind(items)),
    # ",\n  " then ", " alternately: the last item is not where the first gap says.
    "irregular-whitespace": lambda items: _separated(
        _with_kind(items), _alternating(",\n  ", ", ")
    ),
    # Gaps of 301, 600, 2, then 2, 2, 899 in turn: every third item (the last one too)
    # is where a 301-byte gap predicts; the two between lie 299 and 598 bytes earlier,
    # so the start of one (its name, its UID) is where the layout puts the one before.
    "compensating-whitespace": lambda items: _separated(
        _with_kind(items), _gaps([301, 600, 2], [2, 2, 899])
    ),
    "several-kinds": lambda items: _mixed_list(_with_kind(items)),
}


def _pods_store(
    layout: str, items: list[dict[str, Any]]
) -> tuple[DeferredJsonItems, list[dict[str, Any]]]:
    """The Pod store of ``items`` written in ``layout``, and the pods as orjson reads them."""
    text = LAYOUTS[layout](items)
    store = _store_of(_split(text), Kind.POD)
    pods = [item for item in _expanded(text) if item["kind"] == "Pod"]
    assert len(store) == len(pods) == len(items)
    return store, pods


def test_raw_pod_list_without_item_kinds_is_one_store_with_the_lists_kind() -> None:
    items = _generated_pods(5)
    text = _raw_pod_list(items)
    found = _split(text)
    assert [s.kind for s in found.stores] == [Kind.POD] and found.skipped == {}
    store = found.stores[0]
    expected = [{"apiVersion": "v1", "kind": "Pod", **item} for item in items]
    assert [store.decode(i) for i in range(len(store))] == expected
    assert store.decode_all() == expected
    # Inserted first, as the loader does: key order is part of what a user sees (-o yaml).
    assert [list(store.decode(i)) for i in range(len(store))] == [list(e) for e in expected]
    assert [list(o) for o in store.decode_all()] == [list(e) for e in expected]


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_decode_and_decode_all_equal_orjson_of_the_whole_file(layout: str) -> None:
    store, pods = _pods_store(layout, _generated_pods(60))
    assert store.decode_all() == pods
    assert [store.decode(i) for i in range(len(store))] == pods
    assert [store.decode(i) for i in reversed(range(len(store)))] == pods[::-1]
    assert store.decode_all() == pods  # unchanged by the single decodes before


def test_decoded_items_equal_what_the_loader_reads(tmp_path: Path) -> None:
    """``sources.manifests._expand`` is the reference: an item with its own apiVersion but
    no kind keeps its apiVersion and takes the list's kind; one with a kind is as it is."""
    v1beta1 = _claim("ml", "a", version="v1beta1", node=NODES[0], device="gpu-0", reserved_by=None)
    v1 = _claim("ml", "b", version="v1", node=NODES[1], device="gpu-1", reserved_by=None)
    own_api = {k: v for k, v in v1beta1.items() if k != "kind"}  # apiVersion, no kind
    bare = {k: v for k, v in v1.items() if k not in ("apiVersion", "kind")}
    doc = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimList",
        "items": [own_api, bare, v1beta1],
    }
    path = tmp_path / "claims.json"
    path.write_text(json.dumps(doc))
    reference = [d.obj for d in load_documents(str(path))]
    assert reference[0]["apiVersion"] == "resource.k8s.io/v1beta1"  # the premise
    store = _only_store(path.read_bytes())
    assert store.kind is Kind.RESOURCE_CLAIM
    assert store.decode_all() == reference == _expanded(path.read_bytes())
    assert [store.decode(i) for i in range(3)] == reference
    assert [list(store.decode(i)) for i in range(3)] == [list(r) for r in reference]
    assert list(store.decode(0))[:2] == ["apiVersion", "kind"]


def test_kubectl_indented_list_with_item_kinds() -> None:
    items = _with_kind(_generated_pods(7))
    text = _kubectl_list(items)
    store = _only_store(text)
    assert store.kind is Kind.POD and len(store) == 7
    assert store.decode_all() == items
    assert [store.decode(i) for i in range(7)] == items
    assert store.candidates("pod-3") == _holding(items, "pod-3") != []


def test_several_kinds_in_one_list_give_one_store_per_kind_in_input_order() -> None:
    def pod(i: int) -> dict[str, Any]:
        return _pod("ml", f"p-{i}", uid=_uid("p", i), node=NODES[i % 4], claim=f"c-{i}")

    def claim(i: int, version: str) -> dict[str, Any]:
        return _claim(
            "ml", f"c-{i}", version=version, node=NODES[i % 4], device="gpu-0", reserved_by=None
        )

    def event(i: int) -> dict[str, Any]:
        return _core_event("Pod", "ml", f"p-{i}", _uid("p", i), i, i)

    items = [
        pod(0), event(0), claim(0, "v1beta1"), pod(1), claim(1, "v1"), event(1),
        claim(2, "v1beta1"), pod(2), event(2), claim(3, "v1"), pod(3),
    ]  # fmt: skip
    found = _split(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}, indent=4))
    assert sorted(s.kind for s in found.stores) == sorted(
        [Kind.POD, Kind.EVENT, Kind.RESOURCE_CLAIM]
    )
    assert found.skipped == {}
    for kind in (Kind.POD, Kind.EVENT, Kind.RESOURCE_CLAIM):
        expected = [item for item in items if item["kind"] == kind.value]
        store = _store_of(found, kind)
        assert store.decode_all() == expected
        assert [store.decode(i) for i in range(len(store))] == expected
    claims = _store_of(found, Kind.RESOURCE_CLAIM).decode_all()
    assert [c["apiVersion"].rpartition("/")[2] for c in claims] == [
        "v1beta1",
        "v1",
        "v1beta1",
        "v1",
    ]
    assert _store_of(found, Kind.POD).candidates("c-2") == [2]
    assert _store_of(found, Kind.EVENT).candidates("p-1") == [1]


def test_unread_kinds_are_counted_by_api_version_and_kind() -> None:
    pod = _pod("ml", "p", uid=_uid("p"), node=NODES[0])
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": {"name": "d", "namespace": "ml"},
    }
    config = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ml"}}
    foreign = {"apiVersion": "example.com/v1", "kind": "DeviceClass", "metadata": {"name": "x"}}
    items = [deployment, pod, config, config, deployment, foreign, config, pod]
    found = _split(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    assert found.skipped == {
        "apps/v1/StatefulSet": 2,
        "v1/ConfigMap": 3,
        "example.com/v1/DeviceClass": 1,
    }
    assert [s.kind for s in found.stores] == [Kind.POD]
    assert found.stores[0].decode_all() == [pod, pod]


def test_a_list_of_unread_kinds_only_has_no_store() -> None:
    bare = [
        {"metadata": {"name": f"d-{i}", "namespace": "ml"}, "spec": {"replicas": 1}}
        for i in range(3)
    ]
    doc = {"apiVersion": "apps/v1", "kind": "StatefulSetList", "items": bare}
    found = _split(json.dumps(doc, separators=(",", ":")))
    assert found.stores == [] and found.skipped == {"apps/v1/StatefulSet": 3}


def test_utf8_byte_order_mark_is_ignored() -> None:
    items = _generated_pods(20)
    data = b"\xef\xbb\xbf" + _raw_pod_list(items).encode()
    store = _only_store(data)
    assert store.decode_all() == _expanded(data) == _with_kind(items)
    assert store.candidates("pod-7") == _holding(_with_kind(items), "pod-7") != []


POD = _pod("ml", "p", uid=_uid("p"), node=NODES[0])
BARE_POD = {k: v for k, v in POD.items() if k not in ("apiVersion", "kind")}
NOT_SPLIT: dict[str, str] = {
    "single object": json.dumps(POD),
    "top-level array": json.dumps([POD, POD]),
    "empty List": json.dumps({"apiVersion": "v1", "kind": "List", "items": []}),
    "empty PodList": json.dumps({"apiVersion": "v1", "kind": "PodList", "items": []}),
    "List without items": json.dumps({"apiVersion": "v1", "kind": "List"}),
    "items null": json.dumps({"apiVersion": "v1", "kind": "PodList", "items": None}),
    "kind not a list kind": json.dumps({"apiVersion": "v1", "kind": "Pod", "items": [POD]}),
    "item is a number": json.dumps({"apiVersion": "v1", "kind": "List", "items": [POD, 5]}),
    "item is a string": json.dumps({"apiVersion": "v1", "kind": "PodList", "items": ["p"]}),
    "item is an array": json.dumps({"apiVersion": "v1", "kind": "List", "items": [[POD]]}),
    "bare List item without kind": json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [POD, BARE_POD]}
    ),
    "item with kind but no apiVersion": json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [POD, {"kind": "Pod", "metadata": {"name": "q"}}],
        }
    ),
    "item kind not a string": json.dumps(
        {"apiVersion": "v1", "kind": "List", "items": [POD, {**POD, "kind": 7}]}
    ),
    "item kind null": json.dumps(
        {"apiVersion": "v1", "kind": "PodList", "items": [{**BARE_POD, "kind": None}]}
    ),
    "raw item without a list apiVersion": json.dumps({"kind": "PodList", "items": [BARE_POD]}),
    "nested List item": json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [POD, {"apiVersion": "v1", "kind": "PodList", "items": [POD]}],
        }
    ),
    "only a nested List": json.dumps(
        {
            "apiVersion": "v1",
            "kind": "List",
            "items": [{"apiVersion": "v1", "kind": "List", "items": [POD]}],
        }
    ),
    "truncated JSON": json.dumps({"apiVersion": "v1", "kind": "List", "items": [POD, POD]})[:-30],
    "trailing comma": '{"apiVersion": "v1", "kind": "List", "items": [' + json.dumps(POD) + ",]}",
    "YAML": "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Pod\n  metadata: {name: p}\n",
    "YAML flow style": "{apiVersion: v1, kind: PodList, items: [{metadata: {name: p}}]}",
}


@pytest.mark.parametrize("case", sorted(NOT_SPLIT))
def test_anything_but_a_plain_list_of_objects_is_left_to_the_loader(case: str) -> None:
    assert split_json_list(NOT_SPLIT[case].encode(), "input.json") is None


@pytest.mark.parametrize(
    "item",
    [{**POD, "kind": {"name": "Pod"}}, {**POD, "apiVersion": ["v1"]}],
    ids=["kind-object", "apiVersion-array"],
)
def test_an_item_with_an_object_or_array_kind_is_left_to_the_loader(item: dict[str, Any]) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": [POD, item]}
    assert split_json_list(json.dumps(doc).encode(), "input.json") is None


# -- candidates ---------------------------------------------------------------------------

VALUES = [
    "pod-1",  # a name; also a prefix of pod-1x and inside "scheduled pod-1 on ..."
    "pod-12",
    "pod-120",
    "pod-399",
    "pod-3",  # also a label value (app: pod-3) and an env/args peer
    "node-3",  # nodeName, a label key, nodeSelector value, and inside "node-30"
    "node-30",  # only ever inside a longer string ("--node=node-30")
    "node-6",
    "team-b",
    "ml-infra",
    "PEER",  # in every item: more than max(256, N // 8), so None
    _uid("pod", 5),  # a UID; also inside "<uid>-x" of pod 4 (does not count)
    _uid("pod", 12),  # also pod 11's ownerReference
    "gpu-node-0",  # in no item
]


def _expected(pods: list[dict[str, Any]], value: str) -> list[int] | None:
    """The brute-force answer, None where more items hold it than are worth narrowing to."""
    holding = _holding(pods, value)
    return None if len(holding) > max(256, len(pods) // 8) else holding


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_candidates_are_exactly_the_items_holding_the_string(layout: str) -> None:
    items = _generated_pods(N)
    store, pods = _pods_store(layout, items)
    for value in VALUES:  # each the first question to a store, then all to one store
        assert _pods_store(layout, items)[0].candidates(value) == _expected(pods, value), value
        assert store.candidates(value) == _expected(pods, value), value
    assert _expected(pods, "PEER") is None and _expected(pods, "team-b") is not None
    assert _holding(pods, "node-30") == [] and len(_holding(pods, "pod-3")) > 2  # the premise
    assert store.decode_all() == pods


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_candidates_for_every_name_uid_and_node_cover_the_items_holding_it(layout: str) -> None:
    store, pods = _pods_store(layout, _generated_pods(N))
    holding: dict[str, list[int]] = {}
    for i, pod in enumerate(pods):
        for value in set(_strings(pod)):
            holding.setdefault(value, []).append(i)
    # Not the strings every decoded item of a raw list inherits (its kind, apiVersion and
    # those keys): see test_candidates_cover_the_kind_and_api_version_an_item_inherits.
    inherited = {"Pod", "v1", "kind", "apiVersion"}
    values = sorted(v for v in holding if json_lists._PLAIN.match(v) and v not in inherited)
    assert len(values) > 1000  # names, UIDs, nodes, keys: the premise
    limit = max(256, N // 8)
    for value in values:
        expected = holding[value] if len(holding[value]) <= limit else None
        assert store.candidates(value) == expected, value


@pytest.mark.parametrize(
    ("layout", "accepted"), [("irregular-whitespace", False), ("compensating-whitespace", True)]
)
def test_a_misleading_in_file_layout_falls_back_to_a_copy(layout: str, accepted: bool) -> None:
    store, pods = _pods_store(layout, _generated_pods(N))
    # The premise: the compensating layout passes the first/last item check.
    assert store._where().copied is not accepted
    # Pod 5's item is not where the first gap predicts (in either layout), and its UID
    # is in no other item.
    uid = _uid("pod", 5)
    assert store.candidates(uid) == _holding(pods, uid) == [5]
    assert store._layout is not None and store._layout.copied


def test_the_in_file_layout_is_kept_for_regular_kubectl_output() -> None:
    store, pods = _pods_store("kubectl-indented-List", _generated_pods(N))
    assert store.candidates("pod-5") == _holding(pods, "pod-5") != []
    assert store._layout is not None and not store._layout.copied


@pytest.mark.parametrize(
    "value", ["team-a/pod-1", "pod 1", "pöd-1", "", "pod-1\n", 'pod-"1', "pod,1"]
)
def test_candidates_cannot_tell_for_a_value_that_is_not_plain(value: str) -> None:
    store, _ = _pods_store("raw-compact-PodList", _generated_pods(20))
    assert store.candidates(value) is None


def _escaped(text: str, escape: str) -> str:
    """``text`` with the annotation value "marker" spelt with ``escape`` (as JSON text)."""
    assert text.count('"MARKER"') == 1
    return text.replace('"MARKER"', '"' + escape + '"')


def _marked_pods(n: int) -> list[dict[str, Any]]:
    items = _generated_pods(n)
    items[n // 2]["metadata"]["annotations"]["marker"] = "MARKER"
    return items


@pytest.mark.parametrize(
    "escape", [r"n\u0061me", r"pod-\u0031", r"\u004Eode", r"a\u002db", r"x\u005fy", r"\u003a"]
)
def test_candidates_cannot_tell_when_an_escape_spells_a_plain_character(escape: str) -> None:
    text = _escaped(_raw_pod_list(_marked_pods(40)), escape)
    store = _only_store(text)
    assert store.candidates("pod-1") is None
    assert store.candidates("node-3") is None


@pytest.mark.parametrize(
    "escape", [r"limit \u003c 4", r"\u003e", r"a \u0026 b", r"caf\u00e9", r"\u2028", r"tab\there"]
)
def test_escapes_of_other_characters_do_not_stop_narrowing(escape: str) -> None:
    """Go's encoding/json escapes <, > and & as \\u003c, \\u003e, \\u0026 in every string."""
    text = _escaped(_raw_pod_list(_marked_pods(40)), escape)
    store = _only_store(text)
    pods = _expanded(text)
    assert store.candidates("pod-1") == _holding(pods, "pod-1") != []
    assert store.candidates("node-3") == _holding(pods, "node-3") != []


def test_an_escape_in_another_kinds_items_does_not_stop_narrowing() -> None:
    items = _with_kind(_generated_pods(30))
    event = _core_event("Pod", "ml", "pod-1", None, 0, 0)
    event["message"] = "MARKER"
    text = _escaped(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": [*items, event]}), r"n\u0061me"
    )
    found = _split(text)
    assert _store_of(found, Kind.POD).candidates("pod-1") == _holding(items, "pod-1")
    assert _store_of(found, Kind.EVENT).candidates("pod-1") is None


def _hits(n: int, hits: int) -> str:
    """A raw PodList of ``n`` pods, the first ``hits`` of them labelled ``hit``."""
    items = [
        {
            "metadata": {
                "name": f"p-{i}",
                "namespace": "ml",
                "labels": {"hit": "yes"} if i < hits else {},
            }
        }
        for i in range(n)
    ]
    return _raw_pod_list(items)


@pytest.mark.parametrize(
    ("n", "hits", "narrowed"),
    [
        (300, 256, True),  # max(256, 300 // 8) = 256
        (300, 257, False),
        (4000, 500, True),  # max(256, 4000 // 8) = 500
        (4000, 501, False),
        (4000, 0, True),
    ],
)
def test_candidates_give_up_past_max_256_or_an_eighth_of_the_items(
    n: int, hits: int, narrowed: bool
) -> None:
    store = _only_store(_hits(n, hits))
    assert store.candidates("hit") == (list(range(hits)) if narrowed else None)
    assert store.candidates("p-7") == [7]  # one value's answer does not change another's


def test_candidates_map_matches_in_the_list_header_to_no_item() -> None:
    """ "PodList" and "List" occur outside the items only."""
    items = _generated_pods(30)
    store = _only_store(_raw_pod_list(items))
    assert store.candidates("PodList") == []
    # The list's resourceVersion: a number's spelling (an unquoted name would read so).
    assert store.candidates("48213") is None
    indented = _only_store(_kubectl_list(_with_kind(items)))
    assert indented.candidates("List") == [] and indented.candidates("resourceVersion") == []
    assert indented.candidates("pod-4") == _holding(_with_kind(items), "pod-4") != []


def test_candidates_cover_the_kind_and_api_version_an_item_inherits() -> None:
    items = _generated_pods(10)
    store = _only_store(_raw_pod_list(items))
    pods = [store.decode(i) for i in range(len(store))]
    assert _holding(pods, "Pod") == list(range(10))  # every decoded item holds "Pod"
    assert set(_holding(pods, "Pod")) <= set(store.candidates("Pod") or range(10))
    assert set(_holding(pods, "v1")) <= set(store.candidates("v1") or range(10))


# -- through load_snapshot(defer=True) ----------------------------------------------------


@pytest.fixture
def cluster() -> Cluster:
    return Cluster()


@pytest.fixture
def cluster_dir(cluster: Cluster, tmp_path: Path) -> str:
    return str(cluster.write(tmp_path / "cluster"))


def _deferred(path: str) -> Snapshot:
    snap = load_snapshot(path, defer=True)
    assert snap.undecoded, "nothing was deferred"
    return snap


DEFERRED_KINDS = {
    Kind.RESOURCE_CLAIM,
    Kind.POD,
    Kind.EVENT,
    Kind.NODE,
    Kind.DEVICE_CLASS,
    Kind.RESOURCE_SLICE,
}


def test_every_json_list_of_the_cluster_is_deferred(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    snap = _deferred(cluster_dir)
    n_pods = len(cluster.raw_pods) + sum(1 for o in cluster.mixed if o["kind"] == "Pod")
    assert snap.undecoded == {
        Kind.RESOURCE_CLAIM: (0, len(cluster.claims)),
        Kind.POD: (0, n_pods),
        Kind.EVENT: (0, len(cluster.events)),
        Kind.NODE: (0, len(NODES)),
        Kind.DEVICE_CLASS: (0, 2),
        Kind.RESOURCE_SLICE: (0, len(NODES)),
    }


@pytest.mark.parametrize("question", sorted(QUESTIONS))
def test_look_ups_answer_as_the_eager_load(
    defer_all: None, cluster: Cluster, cluster_dir: str, question: str
) -> None:
    ask, kinds = QUESTIONS[question]
    expected = ask(cluster, load_snapshot(cluster_dir))
    assert any(a not in (None, []) for a in expected)  # the questions have answers
    snap = _deferred(cluster_dir)
    answers = ask(cluster, snap)
    assert len(answers) == len(expected)
    for n, (got, want) in enumerate(zip(answers, expected, strict=True)):
        assert got == want, f"{question} #{n}"
    for kind in kinds:  # answered from the candidates, never by reading the whole kind
        assert kind in snap.undecoded, f"{question} read every {kind}"
        assert snap.undecoded[kind][0] > 0, f"{question} decoded no {kind}"


def _deferred_items(cluster: Cluster, kind: Kind) -> list[dict[str, Any]]:
    """The items of ``kind`` in the cluster's JSON files, in load order."""
    listed = cluster.claims + (cluster.raw_pods if kind is Kind.POD else []) + cluster.mixed
    return [item for item in listed if item["kind"] == kind.value]


ONE_LOOK_UP: dict[str, tuple[Callable[[Snapshot], object], Kind, str]] = {
    "claim": (lambda s: s.claim("team-a", "train-6"), Kind.RESOURCE_CLAIM, "train-6"),
    "claim_by_uid": (
        lambda s: s.claim_by_uid(_uid("claim", "team-b", "train-2")),
        Kind.RESOURCE_CLAIM,
        _uid("claim", "team-b", "train-2"),
    ),
    "pod": (lambda s: s.pod("team-b", "train-7-worker"), Kind.POD, "train-7-worker"),
    "pod_by_uid": (
        lambda s: s.pod_by_uid(_uid("pod", "team-a", "infer-1")),
        Kind.POD,
        _uid("pod", "team-a", "infer-1"),
    ),
    "pods_on_node": (lambda s: s.pods_on_node(NODES[1]), Kind.POD, NODES[1]),
    "events_for": (lambda s: s.events_for("Pod", "team-a", "infer-1"), Kind.EVENT, "infer-1"),
    "claims_reserving_device": (
        lambda s: s.claims_reserving_device(DRIVER, NODES[3], "gpu-0"),
        Kind.RESOURCE_CLAIM,
        NODES[3],
    ),
    "node": (lambda s: s.node(NODES[1]), Kind.NODE, NODES[1]),
    "device_class": (
        lambda s: s.device_class("mig.nvidia.com"),
        Kind.DEVICE_CLASS,
        "mig.nvidia.com",
    ),
}


@pytest.mark.parametrize("look_up", sorted(ONE_LOOK_UP))
def test_one_look_up_decodes_the_items_holding_its_value_only(
    defer_all: None, cluster: Cluster, cluster_dir: str, look_up: str
) -> None:
    ask, kind, value = ONE_LOOK_UP[look_up]
    items = _deferred_items(cluster, kind)
    holding = len(_holding(items, value))
    assert 0 < holding < len(items)  # the premise: some, not all
    snap = _deferred(cluster_dir)
    assert ask(snap) not in (None, [])
    assert snap.undecoded[kind] == (holding, len(items))
    others = {k: v for k, v in snap.undecoded.items() if k is not kind}
    assert all(decoded == 0 for decoded, _ in others.values())


def test_look_ups_in_sequence_and_after_materializing_answer_as_the_eager_load(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    names = sorted(QUESTIONS)
    for name in names + names[::-1]:  # scoped indexes reused for the same values
        assert QUESTIONS[name][0](cluster, snap) == QUESTIONS[name][0](cluster, eager), name
    assert snap.claims == eager.claims and snap.pods == eager.pods
    for name in names:  # half materialized: whole indexes for those kinds
        assert QUESTIONS[name][0](cluster, snap) == QUESTIONS[name][0](cluster, eager), name
    assert list(snap.objects()) == list(eager.objects())
    for name in names:
        assert QUESTIONS[name][0](cluster, snap) == QUESTIONS[name][0](cluster, eager), name


def test_kinds_keep_their_order_across_files_and_stores(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    snap.pod("team-a", "train-3-worker")  # some decoded before, some not
    snap.events_for("Pod", "team-b", "train-7-worker")
    for attr in ("slices", "device_classes", "claims", "pods", "nodes", "events", "taint_rules"):
        assert getattr(snap, attr) == getattr(eager, attr), attr
    # The premise: pods come from a YAML file, two deferred stores, and a YAML file.
    names = [p["metadata"]["name"] for p in snap.pods]
    assert names[:2] == ["train-2-worker", "debug-shell"] and names[-1] == "train-5-worker"
    assert len(snap.pods) == len(cluster.every_pod)


def test_one_object_per_item_whichever_look_up_reaches_it(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    snap = _deferred(cluster_dir)
    claim = snap.claim("team-a", "train-6")
    assert claim is not None and claim["metadata"]["uid"] == _uid("claim", "team-a", "train-6")
    assert snap.claim_by_uid(claim["metadata"]["uid"]) is claim
    reserving = snap.claims_reserving_device(DRIVER, NODES[2], "gpu-0")
    assert any(c is claim for c in reserving)
    pod = snap.pod("team-a", "train-6-worker")
    assert pod is not None
    assert snap.pod_by_uid(pod["metadata"]["uid"]) is pod
    assert any(p is pod for p in snap.pods_on_node(NODES[2]))
    users = snap.pods_for_claim(claim)
    assert len(users) == 1 and users[0] is pod
    events = snap.events_for("Pod", "team-a", "train-6-worker")
    by_uid = snap.events_for("Pod", "team-a", "train-6-worker", uid=pod["metadata"]["uid"])
    assert len(events) == 1 and len(by_uid) == 1 and by_uid[0] is events[0]
    node = snap.node(NODES[2])
    gpu = snap.device_class(DRIVER)
    # Materializing every kind keeps the objects already handed out.
    assert any(c is claim for c in snap.claims)
    assert any(p is pod for p in snap.pods)
    assert any(e is events[0] for e in snap.events)
    assert any(n is node for n in snap.nodes) and any(c is gpu for c in snap.device_classes)
    assert (
        snap.claim("team-a", "train-6") is claim and snap.pod_by_uid(pod["metadata"]["uid"]) is pod
    )
    assert snap.events_for("Pod", "team-a", "train-6-worker")[0] is events[0]
    # and every object is one object: no item was decoded twice.
    assert len({id(o) for _, o in snap.objects()}) == sum(1 for _ in snap.objects())


def test_undecoded_shrinks_as_look_ups_decode_and_empties_once_every_kind_is_read(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    snap = _deferred(cluster_dir)
    before = snap.undecoded
    assert set(before) == DEFERRED_KINDS and all(d == 0 for d, _ in before.values())
    snap.claim("team-b", "train-1")
    after_claim = snap.undecoded
    assert 0 < after_claim[Kind.RESOURCE_CLAIM][0] < before[Kind.RESOURCE_CLAIM][1]
    assert {k: v for k, v in after_claim.items() if k is not Kind.RESOURCE_CLAIM} == {
        k: v for k, v in before.items() if k is not Kind.RESOURCE_CLAIM
    }
    snap.claim_by_uid(_uid("claim", "team-b", "train-3"))
    assert snap.undecoded[Kind.RESOURCE_CLAIM][0] > after_claim[Kind.RESOURCE_CLAIM][0]
    remaining = set(DEFERRED_KINDS)
    for attr, kind in (
        ("claims", Kind.RESOURCE_CLAIM),
        ("pods", Kind.POD),
        ("events", Kind.EVENT),
        ("nodes", Kind.NODE),
        ("device_classes", Kind.DEVICE_CLASS),
        ("slices", Kind.RESOURCE_SLICE),
    ):
        getattr(snap, attr)
        remaining.discard(kind)
        assert set(snap.undecoded) == remaining, attr
    assert snap.undecoded == {}


def test_a_look_up_that_cannot_narrow_decodes_the_whole_kind_once(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    assert snap.pod("team-a", "train 1") is None  # not plain: every pod is decoded
    assert Kind.POD not in snap.undecoded and Kind.RESOURCE_CLAIM in snap.undecoded
    assert snap.pods == eager.pods
    assert snap.pod("team-a", "train-1-worker") == eager.pod("team-a", "train-1-worker")


def test_duplicates_last_one_wins_as_in_the_eager_load(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    for ns, name, uid in (
        ("team-a", "train-1-worker", _uid("pod", "team-a", "train-1-worker")),  # same file
        (
            "team-b",
            "train-2-worker",
            _uid("pod", "team-b", "train-2-worker"),
        ),  # YAML, then deferred
        ("team-a", "train-5-worker", _uid("new", 5)),  # deferred, then YAML
    ):
        pod = snap.pod(ns, name)
        assert pod is not None and pod["metadata"]["uid"] == uid, name
        assert pod == eager.pod(ns, name)
    for old in (_uid("old", 1), _uid("old", 2), _uid("pod", "team-a", "train-5-worker")):
        found = snap.pod_by_uid(old)  # the earlier incarnations stay reachable by UID
        assert found is not None and found == eager.pod_by_uid(old)
    assert snap.pods_on_node(NODES[2]) == eager.pods_on_node(NODES[2])
    claim = snap.claim("team-a", "train-1")
    eager_claim = eager.claim("team-a", "train-1")
    assert claim is not None and eager_claim is not None
    assert snap.pods_for_claim(claim) == eager.pods_for_claim(eager_claim)
    assert [p["metadata"]["uid"] for p in snap.pods_for_claim(claim)] == [
        _uid("pod", "team-a", "train-1-worker")
    ]


def _same_name_claims(tmp_path: Path) -> tuple[str, list[dict[str, Any]]]:
    """Two v1beta1 claims ml/dup (different UIDs and devices) around another claim."""
    claims = [
        _claim("ml", "dup", version="v1beta1", node=NODES[0], device="gpu-0", reserved_by=None),
        _claim("ml", "other", version="v1beta1", node=NODES[1], device="gpu-0", reserved_by=None),
        _claim("ml", "dup", version="v1beta1", node=NODES[2], device="gpu-1", reserved_by=None),
    ]
    claims[2]["metadata"]["uid"] = _uid("dup", 2)
    path = tmp_path / "claims.json"
    path.write_text(_kubectl_list(claims))
    return str(path), claims


def test_duplicate_claims_last_one_wins_as_in_the_eager_load(
    defer_all: None, tmp_path: Path
) -> None:
    path, claims = _same_name_claims(tmp_path)
    eager = load_snapshot(path)
    snap = _deferred(path)
    claim = snap.claim("ml", "dup")
    assert claim is not None and claim["metadata"]["uid"] == _uid("dup", 2)
    assert claim == eager.claim("ml", "dup")
    first = snap.claim_by_uid(claims[0]["metadata"]["uid"])
    assert first is not None and first == eager.claim_by_uid(claims[0]["metadata"]["uid"])
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "ml", "dup") == claims[2]
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "ml", "dup") == eager.raw_object(
        Kind.RESOURCE_CLAIM, "ml", "dup"
    )
    assert snap.claims == eager.claims


def test_raw_object_of_a_duplicate_is_the_last_ones_after_materializing(
    defer_all: None, tmp_path: Path
) -> None:
    path, claims = _same_name_claims(tmp_path)
    eager = load_snapshot(path)
    snap = _deferred(path)
    assert snap.claim_by_uid(_uid("dup", 2)) is not None  # decodes the later ml/dup only
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "ml", "dup") == claims[2]
    assert len(snap.claims) == 3  # decodes the rest, the earlier ml/dup too
    assert eager.raw_object(Kind.RESOURCE_CLAIM, "ml", "dup") == claims[2]
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "ml", "dup") == claims[2]


def test_raw_object_is_the_v1beta1_original_of_a_looked_up_deferred_claim(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    original = next(
        c
        for c in cluster.claims
        if c["metadata"]["name"] == "train-4" and c["metadata"]["namespace"] == "team-a"
    )
    assert original["apiVersion"] == "resource.k8s.io/v1beta1"  # the premise
    claim = snap.claim("team-a", "train-4")
    assert claim is not None and claim["apiVersion"] == "resource.k8s.io/v1"
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == DRIVER
    raw = snap.raw_object(Kind.RESOURCE_CLAIM, "team-a", "train-4")
    assert raw == original == eager.raw_object(Kind.RESOURCE_CLAIM, "team-a", "train-4")
    assert Kind.RESOURCE_CLAIM in snap.undecoded  # answered without decoding every claim
    # A v1 claim is its own raw form.
    v1 = snap.claim("team-a", "train-3")
    assert v1 is not None and snap.raw_object(Kind.RESOURCE_CLAIM, "team-a", "train-3") is v1


def test_raw_object_is_the_v1beta1_original_without_a_look_up_first(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    want = eager.raw_object(Kind.RESOURCE_CLAIM, "team-a", "train-4")
    assert want is not None and want["apiVersion"] == "resource.k8s.io/v1beta1"
    assert snap.raw_object(Kind.RESOURCE_CLAIM, "team-a", "train-4") == want


def test_coverage_of_a_deferred_kind_is_collected(
    defer_all: None, cluster: Cluster, tmp_path: Path
) -> None:
    root = cluster.write(tmp_path / "cluster")
    for name in ("a-pods.yaml", "z-pods.yaml", "claims.json", "mixed.json"):
        (root / name).unlink()  # pods.json only
    eager = load_snapshot(str(root))
    snap = _deferred(str(root))
    assert set(snap.undecoded) == {Kind.POD}
    assert snap.coverage[Kind.POD].coverage is Coverage.COLLECTED
    assert snap.coverage[Kind.EVENT].coverage is Coverage.UNKNOWN
    assert snap.coverage == eager.coverage
    assert Kind.POD in snap.undecoded  # reading coverage decoded nothing


def test_unread_kinds_in_a_deferred_file_are_reported(
    defer_all: None, cluster_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING):
        load_snapshot(cluster_dir)
    eager = sorted(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        snap = _deferred(cluster_dir)
    deferred = sorted(r.getMessage() for r in caplog.records if "skipped" in r.getMessage())
    assert deferred == [
        "skipped 2 object(s) of kind apps/v1/StatefulSet: not read by dradiag",
        "skipped 3 object(s) of kind v1/ConfigMap: not read by dradiag",
    ]
    assert deferred == eager
    assert Kind.EVENT in snap.undecoded  # mixed.json, which holds them, was deferred


def test_small_files_and_eager_loads_are_not_deferred(cluster_dir: str) -> None:
    assert load_snapshot(cluster_dir, defer=True).undecoded == {}  # below DEFER_MIN_BYTES
    assert load_snapshot(cluster_dir).undecoded == {}


def test_a_non_string_name_is_skipped_as_in_the_eager_load(defer_all: None, tmp_path: Path) -> None:
    # A number where a name belongs is a shape error (snapshot.shape_check): the object
    # is skipped, with a warning, whether its list was deferred or decoded whole.
    items: list[dict[str, Any]] = [
        {
            "metadata": {"name": "a", "namespace": "ml", "uid": "u-a"},
            "spec": {"nodeName": "gpu-node-0"},
        },
        {"metadata": {"name": 123, "namespace": "ml", "uid": "u-b"}, "spec": {"nodeName": 7}},
    ]
    path = tmp_path / "pods.json"
    path.write_text(_raw_pod_list(items))
    eager = load_snapshot(str(path))
    assert eager.pod("ml", "123") is None and eager.pod("ml", "a") is not None
    assert not eager.is_collected(Kind.POD)
    snap = _deferred(str(path))
    assert snap.pod("ml", "123") is None
    assert snap.pod("ml", "a") == eager.pod("ml", "a")
    assert [p.field for p in snap.shape_problems] == [p.field for p in eager.shape_problems]
    assert snap.pods == eager.pods


def test_a_deferred_load_with_an_object_kind_item_reads_as_the_eager_load(
    defer_all: None, tmp_path: Path
) -> None:
    odd = {**_pod("ml", "odd", uid="u-odd", node=None), "kind": {"name": "Pod"}}
    good = _pod("ml", "p", uid="u-p", node="gpu-node-0")
    path = tmp_path / "pods.json"
    path.write_text(_kubectl_list([good, odd]))
    eager = load_snapshot(str(path))
    assert [p["metadata"]["name"] for p in eager.pods] == ["p"]
    assert load_snapshot(str(path), defer=True).pods == eager.pods


def test_node_names_read_deferred_pods_without_decoding_them(
    defer_all: None, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    assert snap.node_names() == eager.node_names() == NODES
    assert snap.undecoded[Kind.POD][0] == 0


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_field_values_are_the_decoded_items_values(layout: str) -> None:
    store, pods = _pods_store(layout, _generated_pods(50))
    assert store.field_values(("spec", "nodeName")) == [p["spec"].get("nodeName") for p in pods]
    assert store.field_values(("metadata", "name")) == [f"pod-{i}" for i in range(50)]
    assert store.field_values(("status", "phase")) == [None] * 50


def test_mentioning_is_a_superset_in_input_order_that_decodes_only_its_candidates(
    defer_all: None, cluster: Cluster, cluster_dir: str
) -> None:
    eager = load_snapshot(cluster_dir)
    snap = _deferred(cluster_dir)
    pod = next(p for p in eager.pods if p["metadata"].get("uid"))
    uid = pod["metadata"]["uid"]
    for kind in (Kind.POD, Kind.EVENT, Kind.RESOURCE_CLAIM):
        holding = [o for o in getattr(eager, DEFERRED_ATTRS[kind]) if uid in json.dumps(o)]
        found = list(snap.mentioning(kind, uid))
        # Every object holding the UID, in the eager load's order (a superset may hold more).
        assert [o for o in found if uid in json.dumps(o)] == holding
        assert kind in snap.undecoded  # nothing asked for the whole kind
        done, total = snap.undecoded[kind]
        assert done <= len(found) and done < total  # only candidates were decoded
    assert list(snap.mentioning(Kind.LOG, uid)) == []


DEFERRED_ATTRS = {Kind.POD: "pods", Kind.EVENT: "events", Kind.RESOURCE_CLAIM: "claims"}
