"""A --from cluster for the scan narrowing tests: rows in two namespaces, on two nodes."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def _builders() -> Any:
    path = REPO / "tests" / "diagnosis" / "k8s_objects.py"
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects_scan_scope", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k8s = _builders()


def _labelled(obj: dict[str, Any], **labels: str) -> dict[str, Any]:
    obj["metadata"].setdefault("labels", {}).update(labels)
    return obj


def scan_cluster(directory: Path) -> Path:
    """Rows: Node gpu-node-2 (publication), research/pending and ml/waiting (selection).

    ``research/p-0`` (app=batch) waits on ``pending``; ``ml/w-0`` (app=trainer, on no
    node) waits on ``waiting``, which itself carries team=vision.
    """
    healthy = k8s.healthy_objects()
    pending = k8s.claim(
        name="pending", uid="u-p", namespace="research", class_name="gpu.example.com"
    )
    pending_pod = _labelled(
        k8s.pod(
            name="p-0",
            uid="pod-p",
            namespace="research",
            claim_name="pending",
            node=None,
            state="pending",
        ),
        app="batch",
    )
    waiting = _labelled(
        k8s.claim(name="waiting", uid="u-w", namespace="ml", class_name="gpu.example.com"),
        team="vision",
    )
    waiting_pod = _labelled(
        k8s.pod(
            name="w-0",
            uid="pod-w",
            namespace="ml",
            claim_name="waiting",
            node=None,
            state="pending",
        ),
        app="trainer",
    )
    crashing = k8s.plugin_pod("gpu-node-2", gpus_state="crashloop", restarts=12)
    crashing["metadata"]["name"] += "-node2"  # one name per pod, as an API server has it
    return k8s.write_input(
        directory,
        objects={
            "resourceslices": [*healthy["slices"], k8s.resource_slice(node="gpu-node-2")],
            "deviceclasses": healthy["classes"],
            "resourceclaims": [*healthy["claims"], pending, waiting],
            "pods": [
                *healthy["pods"],
                pending_pod,
                waiting_pod,
                crashing,
            ],
        },
    )
