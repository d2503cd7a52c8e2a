"""``dradiag simulate``: would these claims fit on that node now? The allocator's answer, explained."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.completion import claim_names, node_names, pod_names
from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_TIMEOUT,
    As,
    AsGroup,
    Context,
    ExitZero,
    FromPath,
    Kubeconfig,
    NoColor,
    Output,
    OutputFormat,
    RequestTimeout,
    Timeout,
)

if TYPE_CHECKING:
    from dradiag.analyses.allocation import Simulation
    from dradiag.snapshot.model import K8sObject, Snapshot

NodeOption = Annotated[
    str,
    typer.Option(
        "--node", metavar="NODE", help="The node to allocate on.", autocompletion=node_names
    ),
]
ClaimOption = Annotated[
    list[str] | None,
    typer.Option(
        "--claim",
        metavar="NS/NAME",
        help="A ResourceClaim from the snapshot; repeat for several (allocated together, in order).",
        autocompletion=claim_names,
    ),
]
ClaimFileOption = Annotated[
    list[str] | None,
    typer.Option(
        "--claim-file",
        metavar="FILE",
        help="ResourceClaims or ResourceClaimTemplates from a file, allocated as if created "
        "now (e.g. a manifest you are about to apply).",
    ),
]
PodOption = Annotated[
    str | None,
    typer.Option(
        "--pod",
        metavar="NS/NAME",
        help="Take this pod's claims (incl. template ones).",
        autocompletion=pod_names,
    ),
]
FeatureGatesOption = Annotated[
    str | None,
    typer.Option(
        "--feature-gates",
        metavar="GATE=BOOL,...",
        help="DRA feature gates as on kube-scheduler (DRAAdminAccess, DRAPrioritizedList, "
        "DRAPartitionableDevices, DRADeviceTaints, DRADeviceTaintRules, "
        "DRADeviceBindingConditions, DRAResourceClaimDeviceStatus, DRAConsumableCapacity, "
        "DRAListTypeAttributes); override the cluster version's defaults.",
    ),
]
VersionOption = Annotated[
    str | None,
    typer.Option(
        "--kubernetes-version",
        metavar="X.Y",
        help="Simulate this Kubernetes version's allocator (default: the cluster's, if known).",
    ),
]


def _claims_from_pod(snapshot: Snapshot, namespace: str, name: str) -> list[K8sObject]:
    from dradiag.errors import UsageError
    from dradiag.snapshot.model import pod_claim_references

    pod = snapshot.pod(namespace, name)
    if pod is None:
        raise UsageError(f"pod {namespace}/{name} not found in the snapshot")
    statuses = {
        str(s.get("name")): s.get("resourceClaimName")
        for s in (pod.get("status") or {}).get("resourceClaimStatuses") or []
    }
    claims: list[K8sObject] = []
    for pod_claim, claim_name, template_name in pod_claim_references(pod):
        generated = claim_name or statuses.get(pod_claim)
        if generated:
            claim = snapshot.claim(namespace, str(generated))
            if claim is None:
                raise UsageError(
                    f"claim {namespace}/{generated} of pod {namespace}/{name} not found"
                )
            claims.append(claim)
            continue
        if template_name:
            template = snapshot.claim_template(namespace, str(template_name))
            if template is None:
                raise UsageError(
                    f"ResourceClaimTemplate {namespace}/{template_name} of pod {namespace}/{name} "
                    "not found"
                )
            # Not generated yet: simulate the claim the controller would create.
            claims.append(
                {
                    "metadata": {"namespace": namespace, "name": f"{name}-{pod_claim}"},
                    "spec": (template.get("spec") or {}).get("spec") or {},
                }
            )
    return claims


def _claims_from_files(paths: list[str]) -> list[K8sObject]:
    from dradiag.errors import UsageError
    from dradiag.snapshot.model import Kind
    from dradiag.snapshot.normalize import kind_of, normalize
    from dradiag.sources.manifests import load_documents

    claims: list[K8sObject] = []
    for path in paths:
        for doc in load_documents(path):
            kind = kind_of(doc.obj)
            if kind is Kind.RESOURCE_CLAIM:
                claims.append(normalize(kind, doc.obj))
            elif kind is Kind.RESOURCE_CLAIM_TEMPLATE:
                tpl = normalize(kind, doc.obj)
                meta = dict(tpl.get("metadata") or {})
                claims.append(
                    {
                        "metadata": {
                            "namespace": meta.get("namespace", ""),
                            "name": meta.get("name", ""),
                        },
                        "spec": (tpl.get("spec") or {}).get("spec") or {},
                    }
                )
            else:
                raise UsageError(
                    f"{doc.path}: --claim-file takes ResourceClaims and ResourceClaimTemplates, "
                    f"not {doc.obj.get('kind')!r}"
                )
    return claims


def _render_text(sim: Simulation, no_color: bool) -> None:
    from dradiag.render.console import write_drawn

    write_drawn(no_color, lambda console: _draw(console, sim))


def _draw(console: Any, sim: Simulation) -> None:
    from rich.text import Text

    from dradiag.render.columns import Column, fitted_table, print_table
    from dradiag.render.console import print_hanging

    style = {"allocated": "green", "unschedulable": "yellow", "error": "red"}[sim.outcome]
    head = Text("node ")
    head.append(sim.node, style="bold")
    head.append(": ")
    head.append(sim.outcome, style=style)
    console.print(head)
    if sim.error and sim.outcome != "allocated":
        print_hanging(console, Text("allocator: "), Text(sim.error), indent=2)
    if sim.results:
        columns = (
            Column("CLAIM"),
            Column("REQUEST"),
            Column("DEVICE"),
            Column("POOL", drop=2),
            Column("DRIVER", drop=1),
        )
        rows = [
            (item["claim"], r["request"], r["device"], r["pool"], r["driver"])
            for item in sim.results
            for r in item["allocation"]["devices"]["results"]
        ]
        console.print()
        console.print(Text("an allocation that fits", style="bold"))
        table, layout = fitted_table(console, columns, rows)
        print_table(console, table, layout)
    stage_columns = (
        Column("STAGE"),
        Column("REMAINING", justify="right"),
        Column("REMOVED (EXAMPLES)", fold="tokens"),
    )
    for funnel in sim.explanation:
        stages: list[tuple[str, str, str]] = []
        for stage in funnel.stages:
            examples = ", ".join(
                str(r["device"]) + (f" ({', '.join(r['claims'])})" if r.get("claims") else "")
                for r in stage.removed
            )
            if stage.removed_total > len(stage.removed):
                examples += f" … +{stage.removed_total - len(stage.removed)}"
            mark = " ◀" if stage.stage == funnel.blocking else ""
            stages.append((stage.stage + mark, str(stage.count), examples))
        needs = funnel.needed if funnel.needed is not None else "all"
        console.print()
        print_hanging(
            console,
            Text(f"{funnel.claim} ", style="bold"),
            Text(f"request {funnel.request}: {funnel.description}, needs {needs}"),
        )
        table, layout = fitted_table(console, stage_columns, stages)
        print_table(console, table, layout)
        print_hanging(console, Text("→ "), Text(funnel.reason), indent=2)
    if sim.combination:
        print_hanging(
            console,
            Text("→ "),
            Text(
                "each request fits on its own, but not all together: they compete for the "
                "same devices or counters, or a constraint spans requests"
            ),
            indent=2,
        )
    for note in sim.notes:
        console.print(Text(note, style="dim"))


def simulate(
    node: NodeOption,
    claim: ClaimOption = None,
    claim_file: ClaimFileOption = None,
    pod: PodOption = None,
    feature_gates: FeatureGatesOption = None,
    kubernetes_version: VersionOption = None,
    from_path: FromPath = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = DEFAULT_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
    exit_zero: ExitZero = False,
) -> int:
    """Would these claims fit on NODE now? Allocate them as the scheduler would, and explain.

    \b
    Examples:
      dradiag simulate --node gpu-node-7 --claim ml/train-mig
      dradiag simulate --node gpu-node-7 --claim ml/train-mig --feature-gates DRAPrioritizedList=true
    """
    from dradiag.analyses.allocation import FeatureGates, simulate_allocation
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.cli.inputs import Target, obtain_snapshot, parse_namespaced_name
    from dradiag.cli.options import CommonOptions
    from dradiag.errors import UsageError

    if not (claim or claim_file or pod):
        raise UsageError(
            "give the claims to allocate: --claim NS/NAME, --claim-file FILE or --pod NS/NAME"
        )
    options = CommonOptions(
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=tuple(as_groups or ()),
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    claim_keys = [parse_namespaced_name(c) for c in claim or []]
    pod_key = parse_namespaced_name(pod) if pod else None
    base = FeatureGates.for_version(kubernetes_version) if kubernetes_version else None
    if kubernetes_version and base is not None and base.assumed:
        raise UsageError(f"--kubernetes-version: expected X.Y, got {kubernetes_version!r}")
    file_claims = _claims_from_files(list(claim_file)) if claim_file else []
    snapshot = obtain_snapshot(options, Target(kind="cluster", nodes=(node,)))
    if base is None:
        base = FeatureGates.for_version(snapshot.source.server_version)
    base = base.with_evidence(snapshot.slices, taint_rules=snapshot.taint_rules)
    gates = FeatureGates.parse(feature_gates, base=base) if feature_gates else base

    claims: list[Any] = []
    if pod_key is not None:
        claims.extend(_claims_from_pod(snapshot, *pod_key))
    for ns, name in claim_keys:
        found = snapshot.claim(ns, name)
        if found is None:
            raise UsageError(f"claim {ns}/{name} not found in the snapshot")
        claims.append(found)
    claims.extend(file_claims)
    if node not in snapshot.node_names():
        import logging

        logging.getLogger(__name__).warning(
            "node %s is not in the snapshot (no Node object, node-local slice or pod names it); "
            "its labels are unknown",
            node,
        )

    sim = simulate_allocation(snapshot, claims, node, features=gates)
    if output is OutputFormat.TEXT:
        _render_text(sim, no_color)
    else:
        from dradiag.render.document import collection_of, dump_document

        doc = sim.to_dict()
        doc["collection"] = collection_of(snapshot)
        typer.echo(dump_document(doc, output), nl=False)
    if exit_zero or sim.allocated:
        return ExitCode.OK
    return ExitCode.BROKEN


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("simulate")(simulate)
