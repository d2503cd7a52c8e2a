"""The one reading of which nodes an allocation (or any NodeSelector) pins a claim to."""

from __future__ import annotations

from dradiag.snapshot.model import allocation_nodes, node_selector_names


def _claim(selector: object) -> dict[str, object]:
    return {"status": {"allocation": {"nodeSelector": selector}}}


def test_match_fields_and_hostname_label_name_nodes_first_seen_first() -> None:
    selector = {
        "nodeSelectorTerms": [
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n-2"]}]},
            {
                "matchExpressions": [
                    {"key": "kubernetes.io/hostname", "operator": "In", "values": ["n-1", "n-2"]},
                    {"key": "zone", "operator": "In", "values": ["z-1"]},
                    {"key": "metadata.name", "operator": "NotIn", "values": ["n-9"]},
                ]
            },
        ]
    }
    assert node_selector_names(selector) == ["n-2", "n-1"]
    assert allocation_nodes(_claim(selector)) == ["n-2", "n-1"]


def test_malformed_or_missing_selectors_name_no_node() -> None:
    for selector in (None, "x", [], {"nodeSelectorTerms": ["x", {"matchFields": ["y"]}]}):
        assert node_selector_names(selector) == []
    assert allocation_nodes({}) == []
    assert allocation_nodes({"status": {"allocation": "junk"}}) == []
