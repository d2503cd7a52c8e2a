"""The ``dradiag node`` document (``dradiag.node/v1``) and its text view.

The dict is the canonical form (``docs/schema/node.schema.json``); the text view is drawn
from it: the GPUs and their MIG layout as a tree, CDI specs and checkpoint claims as
tables, findings last.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict
from typing import Any

from dradiag.render.document import _finding, tool_block
from dradiag.snapshot.node_state import NodeState
from dradiag.vocabulary import Finding, Severity

NODE_SCHEMA_VERSION = "dradiag.node/v1"


def _camel(d: Mapping[str, Any]) -> dict[str, Any]:
    def key(k: str) -> str:
        head, *rest = k.split("_")
        word = head + "".join(p[:1].upper() + p[1:] for p in rest)
        return (
            word.replace("Uuid", "UUID")
            .replace("Uid", "UID")
            .replace("BusId", "BusID")
            .replace("Id", "ID")
        )

    out: dict[str, Any] = {}
    for k, v in d.items():
        if isinstance(v, Mapping):
            v = _camel(v)
        elif isinstance(v, list | tuple):
            v = [_camel(x) if isinstance(x, Mapping) else x for x in v]
        out[key(k)] = v
    return out


def node_document(
    state: NodeState, findings: Sequence[Finding], *, cluster: Mapping[str, Any]
) -> dict[str, Any]:
    """The versioned document of one node's state and its findings."""
    nvml: dict[str, Any] = {"available": state.nvml is not None, "reason": state.nvml_unavailable}
    if state.nvml is not None:
        nvml.update(_camel(asdict(state.nvml)))
    specs = []
    for spec in state.cdi_specs:
        entry = _camel(asdict(spec))
        entry["cdiDeviceIDs"] = list(spec.cdi_device_ids)
        specs.append(entry)
    cp = state.checkpoint
    checkpoint: dict[str, Any] = {
        "path": state.checkpoint_path,
        "present": cp is not None,
        "bootID": state.boot_id,
    }
    if cp is not None:
        checkpoint.update(
            {
                "error": cp.error,
                "versions": list(cp.versions),
                "nodeBootID": cp.node_boot_id,
                "claims": [
                    {
                        **_camel(asdict(c)),
                        "allocated": [
                            {"driver": d, "pool": p, "device": n} for d, p, n in c.allocated
                        ],
                    }
                    for c in cp.claims
                ],
            }
        )
    pci: dict[str, Any] = {"read": state.pci is not None, "reason": state.pci_unavailable}
    pci["functions"] = [{**_camel(asdict(p)), "vfio": p.vfio} for p in state.pci or ()]
    errors = sum(f.severity is Severity.ERROR for f in findings)
    warnings = sum(f.severity is Severity.WARNING for f in findings)
    return {
        "schemaVersion": NODE_SCHEMA_VERSION,
        "tool": tool_block(),
        "node": state.node,
        "source": {
            "node": "live" if state.source == "live" else "saved",
            "location": state.source,
            "hostRoot": state.host_root,
            "collectedAt": state.collected_at,
            "cluster": dict(cluster),
        },
        "nvml": nvml,
        "cdi": {"dirs": list(state.cdi_dirs), "specs": specs},
        "checkpoint": checkpoint,
        "pci": pci,
        "findings": [{**_finding(f), "phase": f.phase.value} for f in findings],
        "summary": {"errors": errors, "warnings": warnings},
    }


def _gib(value: Any) -> str:
    return f"{int(value) / 2**30:.0f} GiB" if isinstance(value, int) else "?"


def render_node_text(doc: Mapping[str, Any], *, no_color: bool = False) -> None:
    """Draw the document on stdout with rich."""
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table
    from rich.tree import Tree

    console = Console(no_color=no_color, highlight=False, soft_wrap=True)
    if not console.is_terminal:
        console.width = 200  # piped output: do not squeeze tables to 80 columns
    nvml = doc["nvml"]
    cluster = doc["source"]["cluster"]
    title = f"[bold]node {escape(doc['node'])}[/]  (node state: {doc['source']['node']}"
    title += f", cluster: {cluster.get('kind', 'none')})"
    tree = Tree(title)
    if not nvml["available"]:
        tree.add(f"[yellow]NVML unavailable: {escape(str(nvml['reason']))}[/]")
    else:
        gpus = tree.add(
            f"driver {nvml.get('driverVersion') or '?'}, CUDA {nvml.get('cudaDriverVersion') or '?'}"
        )
        for g in nvml.get("gpus") or ():
            mig = "MIG off"
            if g.get("migCurrent"):
                mig = "MIG on"
            if g.get("migPending") is not None and g.get("migPending") != g.get("migCurrent"):
                mig += f" (pending {'on' if g['migPending'] else 'off'})"
            node = gpus.add(
                f"GPU {g['index']} (minor {g.get('minor')}) {escape(str(g.get('product')))} "
                f"{_gib(g.get('memoryBytes'))}  {g['gpuUUID']}  {g.get('pciBusID')}  {mig}"
            )
            for m in g.get("mig") or ():
                node.add(
                    f"MIG {m.get('profile') or '?'} GI {m['giID']} CI {m.get('ciID')} "
                    f"placement {m.get('placementStart')}+{m.get('placementSize')}  "
                    f"{m.get('migUUID')}"
                )
            for p in g.get("processes") or ():
                node.add(f"pid {p['pid']} on {p['onUUID']}")
    console.print(tree)
    specs = Table(
        "CDI spec", "cdiVersion", "kind", "claim UID", "devices", "problem", title="CDI specs"
    )
    for s in doc["cdi"]["specs"]:
        missing = [
            n["hostPath"] or n["path"]
            for d in s.get("devices") or ()
            for n in d.get("deviceNodes") or ()
            if n.get("exists") is False
        ]
        problem = s.get("error") or (f"missing {', '.join(missing)}" if missing else "")
        cells = (s["path"], s.get("cdiVersion"), s.get("kind"), s.get("claimUID"))
        specs.add_row(
            *(escape(str(c or "")) for c in cells),
            str(len(s.get("devices") or ())),
            escape(problem),
        )
    if not doc["cdi"]["specs"]:
        specs.add_row(f"(none in {', '.join(doc['cdi']['dirs'])})", "", "", "", "", "")
    console.print(specs)
    cp = doc["checkpoint"]
    claims = Table("claim UID", "state", "claim", "devices", title=f"checkpoint {cp['path']}")
    if not cp["present"]:
        claims.add_row("(no checkpoint file)", "", "", "")
    elif cp.get("error"):
        claims.add_row(f"[red]unreadable: {escape(cp['error'])}[/]", "", "", "")
    for c in cp.get("claims") or ():
        who = f"{c['namespace']}/{c['name']}" if c.get("namespace") and c.get("name") else ""
        devices = ", ".join(d.get("sliceDeviceName") or d["type"] for d in c.get("devices") or ())
        cells = (c["claimUID"], c.get("state") or "(unset)", who, devices)
        claims.add_row(*(escape(str(x)) for x in cells))
    console.print(claims)
    vfio = [f for f in doc["pci"]["functions"] if f["vfio"]]
    if vfio:
        console.print("VFIO-bound: " + ", ".join(f"{f['pciBusID']} ({f['driver']})" for f in vfio))
    findings = doc["findings"]
    if not findings:
        console.print("[green]no findings[/]")
    colour = {"error": "red", "warning": "yellow", "info": "blue"}
    for f in findings:
        console.print(
            f"[{colour[f['severity']]}]{f['severity']}[/] {f['rule']} ({f['phase']}): "
            f"{escape(f['title'])}"
        )
        console.print(f"  {escape(f['detail'])}")
        for n in f.get("next") or ():
            console.print(f"  next: {escape(n)}")
