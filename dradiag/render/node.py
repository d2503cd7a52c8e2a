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
    """Draw the document on stdout, in the one console and table policy of every
    command (``render/console.py``, ``render/columns.py``): plain when piped, tables
    fitted to a terminal without cutting a path or UID, no padding at line ends."""
    from dradiag.render.console import write_drawn

    write_drawn(no_color, lambda console: _draw(console, doc))


def _draw(console: Any, doc: Mapping[str, Any]) -> None:
    import textwrap

    from rich.markup import escape
    from rich.padding import Padding
    from rich.text import Text
    from rich.tree import Tree

    from dradiag.render.columns import Column, fitted_table, hidden_note, print_table

    nvml = doc["nvml"]
    cluster = doc["source"]["cluster"]
    title = f"[bold]node {escape(doc['node'])}[/]  (node state: {doc['source']['node']}"
    title += f", cluster: {cluster.get('kind', 'none')})"
    tree = Tree(title, guide_style="dim") if not console.no_color else None
    lines: list[str] = []

    def add(parent: Any, text: str, depth: int) -> Any:
        if tree is None:
            lines.append("  " * depth + Text.from_markup(text).plain)
            return None
        return (parent or tree).add(text)

    if tree is None:
        lines.append(Text.from_markup(title).plain)
    if not nvml["available"]:
        add(None, f"[yellow]NVML unavailable: {escape(str(nvml['reason']))}[/]", 1)
    else:
        gpus = add(
            None,
            f"driver {nvml.get('driverVersion') or '?'}, "
            f"CUDA {nvml.get('cudaDriverVersion') or '?'}",
            1,
        )
        for g in nvml.get("gpus") or ():
            mig = "MIG off"
            if g.get("migCurrent"):
                mig = "MIG on"
            if g.get("migPending") is not None and g.get("migPending") != g.get("migCurrent"):
                mig += f" (pending {'on' if g['migPending'] else 'off'})"
            node = add(
                gpus,
                f"GPU {g['index']} (minor {g.get('minor')}) {escape(str(g.get('product')))} "
                f"{_gib(g.get('memoryBytes'))}  {g['gpuUUID']}  {g.get('pciBusID')}  {mig}",
                2,
            )
            for m in g.get("mig") or ():
                add(
                    node,
                    f"MIG {m.get('profile') or '?'} GI {m['giID']} CI {m.get('ciID')} "
                    f"placement {m.get('placementStart')}+{m.get('placementSize')}  "
                    f"{m.get('migUUID')}",
                    3,
                )
            for proc in g.get("processes") or ():
                add(node, f"pid {proc['pid']} on {proc['onUUID']}", 3)
    if tree is None:
        console.print("\n".join(lines), markup=False)
    else:
        console.print(tree)

    def table(title: str, columns: list[Column], rows: list[list[str]]) -> None:
        console.print()
        console.print(Text(title, style="bold"))
        cells = [[Text(cell) for cell in row] for row in rows]
        drawn, layout = fitted_table(console, columns, cells)
        print_table(console, drawn, layout)
        if (note := hidden_note(layout, console.width)) is not None:
            console.print(note)

    spec_rows: list[list[str]] = []
    for s in doc["cdi"]["specs"]:
        missing = [
            n["hostPath"] or n["path"]
            for d in s.get("devices") or ()
            for n in d.get("deviceNodes") or ()
            if n.get("exists") is False
        ]
        problem = s.get("error") or (f"missing {', '.join(missing)}" if missing else "")
        cells = (s["path"], s.get("cdiVersion"), s.get("kind"), s.get("claimUID"))
        spec_rows.append(
            [*(str(c or "") for c in cells), str(len(s.get("devices") or ())), problem]
        )
    if not doc["cdi"]["specs"]:
        spec_rows.append([f"(none in {', '.join(doc['cdi']['dirs'])})", "", "", "", "", ""])
    table(
        "CDI specs",
        [
            Column("CDI SPEC"),
            Column("CDIVERSION", drop=2),
            Column("KIND", fold="tokens", drop=3),
            Column("CLAIM UID"),
            Column("DEVICES", justify="right", drop=1),
            Column("PROBLEM", fold="words"),
        ],
        spec_rows,
    )
    cp = doc["checkpoint"]
    claim_rows: list[list[str]] = []
    if not cp["present"]:
        claim_rows.append(["(no checkpoint file)", "", "", ""])
    elif cp.get("error"):
        claim_rows.append([f"unreadable: {cp['error']}", "", "", ""])
    for c in cp.get("claims") or ():
        who = f"{c['namespace']}/{c['name']}" if c.get("namespace") and c.get("name") else ""
        devices = ", ".join(d.get("sliceDeviceName") or d["type"] for d in c.get("devices") or ())
        claim_rows.append([c["claimUID"], c.get("state") or "(unset)", who, devices])
    table(
        f"checkpoint {cp['path']}",
        [
            Column("CLAIM UID"),
            Column("STATE"),
            Column("CLAIM", drop=1),
            Column("DEVICES", fold="tokens"),
        ],
        claim_rows,
    )
    vfio = [f for f in doc["pci"]["functions"] if f["vfio"]]
    if vfio:
        console.print("VFIO-bound: " + ", ".join(f"{f['pciBusID']} ({f['driver']})" for f in vfio))
    findings = doc["findings"]
    console.print()
    if not findings:
        console.print("[green]no findings[/]")
    colour = {"error": "red", "warning": "yellow", "info": "blue"}
    for f in findings:
        head = f"{f['severity']} {f['rule']} ({f['phase']}): {f['title']}"
        if not console.no_color:
            # Hang the title's continuation under the finding's body, not at column 0.
            head = textwrap.fill(
                head,
                width=max(40, console.width),
                subsequent_indent="  ",
                break_long_words=False,
                break_on_hyphens=False,
            )
        line = Text(head)
        line.stylize(colour[f["severity"]], 0, len(f["severity"]))
        console.print(line)
        # Continuation lines hang under their own text, never back at column 0.
        console.print(Padding(Text(f["detail"]), (0, 0, 0, 2), expand=False))
        for n in f.get("next") or ():
            console.print(Padding(Text(f"next: {n}"), (0, 0, 0, 2), expand=False))
