"""``dradiag selector-check``: will these manifests' claims find devices, and if not, why not.

Two forms. ``selector-check FILE...`` checks every ResourceClaim, ResourceClaimTemplate
and pod template (of any workload kind) in the files against the devices of the cluster,
``--from`` or ``--slices``; ``selector-check --expr EXPR`` evaluates one expression on
every device (the CEL engine's ad-hoc face, issue #3). Output: text, json (schema in
``docs/schema/selector-check.schema.json``), yaml, or sarif (one result per problem,
located at the expression in the file). Exit 1 when a request can match no device or a
selector errors, 2 on unreadable input or an expression that does not compile.
"""

from __future__ import annotations

from collections import Counter
from itertools import compress, islice, repeat
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.options import (
    Context,
    ExitZero,
    FromPath,
    Kubeconfig,
    Namespace,
    NoColor,
    OutputFormat,
    RequestTimeout,
)

if TYPE_CHECKING:
    from dradiag.analyses.selection import ClaimSelection, DeviceInventory, SelectionProblem
    from dradiag.cli.options import CommonOptions
    from dradiag.snapshot.model import Snapshot
    from dradiag.sources.workloads import ClaimManifest, ManifestSet, SourceLocation

SCHEMA_VERSION = "dradiag.selector-check/v1"
MAX_EXPRESSION_BYTES = 10 * 1024
"""CELSelectorExpressionMaxLength (k8s-dra-semantics §1.5)."""

Files = Annotated[
    list[str] | None,
    typer.Argument(
        metavar="FILE...",
        help="Manifests to check: ResourceClaim(Template)s, Pods, or any workload with a pod "
        "template (files, directories, or '-' for stdin).",
        show_default=False,
    ),
]
Expr = Annotated[
    str | None,
    typer.Option("--expr", metavar="EXPR", help="Evaluate one CEL selector on every device."),
]
PerDevice = Annotated[
    bool, typer.Option("--per-device", help="With --expr: list the result for every device.")
]
Slices = Annotated[
    str | None,
    typer.Option(
        "--slices",
        metavar="PATH",
        help="Read devices (ResourceSlices, and DeviceClasses if present) from PATH.",
    ),
]
Nodes = Annotated[
    list[str] | None,
    typer.Option("--node", metavar="NODE", help="Only devices visible from NODE (repeatable)."),
]
Now = Annotated[
    bool,
    typer.Option(
        "--now",
        help="Also account for current allocations (allocation simulator): how many matching "
        "devices are free now.",
    ),
]
SelectorOutput = Annotated[
    OutputFormat,
    typer.Option(
        "-o", "--output", case_sensitive=False, help="Output format: text, json, yaml or sarif."
    ),
]


def selector_check(
    files: Files = None,
    expr: Expr = None,
    per_device: PerDevice = False,
    from_path: FromPath = None,
    slices: Slices = None,
    node: Nodes = None,
    now: Now = False,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = None,
    request_timeout: RequestTimeout = 10.0,
    output: SelectorOutput = OutputFormat.TEXT,
    no_color: NoColor = False,
    exit_zero: ExitZero = False,
) -> int:
    """Check CEL selectors of claims, templates and workloads against the devices."""
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.cli.options import CommonOptions
    from dradiag.errors import UsageError

    files = list(files or [])
    if expr is None and not files:
        raise UsageError("give manifests to check (FILE...) or an expression (--expr)")
    if expr is not None and files:
        raise UsageError("--expr and FILE arguments cannot be combined")
    if from_path and slices:
        raise UsageError("--from and --slices name the same thing; give one")
    if per_device and expr is None:
        raise UsageError("--per-device goes with --expr")
    device_path = slices or from_path
    if device_path == "-" and "-" in files:
        raise UsageError("stdin cannot hold both the manifests and the devices")
    options = CommonOptions(
        from_path=device_path,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        request_timeout=request_timeout,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    if expr is not None:
        compiled = _compile_expression(expr)
        if compiled is None:
            return ExitCode.USAGE
        snapshot = _device_snapshot(options, node)
        doc = expression_document(snapshot, expr, nodes=node, per_device=per_device)
        broken = doc["summary"]["matched"] == 0 or doc["summary"]["errors"] > 0
    else:
        snapshot = _device_snapshot(options, node)
        doc = manifests_document(
            snapshot, files, nodes=node, namespace=namespace or "default", now=now
        )
        broken = any(f["severity"] == "error" for f in doc["findings"])
    _emit(doc, output, no_color)
    if exit_zero:
        return ExitCode.OK
    return ExitCode.BROKEN if broken else ExitCode.OK


# -- inputs ---------------------------------------------------------------------------


def _compile_expression(expr: str) -> Any:
    """The compiled expression, or None after printing the caret error (exit 2)."""
    import sys

    from dradiag.analyses.cel import CelCompileError, compile_selector

    size = len(expr.encode("utf-8"))
    if size > MAX_EXPRESSION_BYTES:
        sys.stderr.write(
            f"dradiag: error: --expr: expression is {size} bytes, longer than the limit of "
            f"{MAX_EXPRESSION_BYTES} (CELSelectorExpressionMaxLength)\n"
        )
        return None
    try:
        return compile_selector(expr)
    except CelCompileError as exc:
        where = f":{exc.line}:{exc.column}" if exc.line is not None else ""
        sys.stderr.write(f"dradiag: error: --expr{where}: CEL compile error: {exc.reason}\n")
        caret = exc.render_caret().split("\n")
        sys.stderr.write("\n".join(caret[:-1] if exc.line is not None else caret[:1]) + "\n")
        return None


def _device_snapshot(options: CommonOptions, nodes: list[str] | None) -> Snapshot:
    """The devices, loaded with the cyclic GC paused and then frozen.

    A fleet is millions of small acyclic objects: a collection after loading would walk
    them all (about 0.4 s at 160k devices) for nothing. Frozen into the permanent
    generation, later collections skip them; a CLI process is short-lived (as
    ``claim.load_snapshot_fast``).
    """
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        if options.from_path:
            from dradiag.sources.workloads import load_device_snapshot

            return load_device_snapshot(options.from_path)
        from dradiag.cli.inputs import Target, obtain_snapshot

        return obtain_snapshot(options, Target(kind="cluster", nodes=tuple(nodes or ())))
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


# -- documents ------------------------------------------------------------------------


def _header(snapshot: Snapshot, inventory: DeviceInventory) -> dict[str, Any]:
    from dradiag import __version__

    src = snapshot.source
    return {
        "schemaVersion": SCHEMA_VERSION,
        "tool": {"name": "dradiag", "version": __version__},
        "source": {
            "kind": src.kind,
            "location": src.location,
            "context": src.context,
            "collectedAt": src.collected_at,
        },
        "inventory": {
            "devices": len(inventory),
            "nodes": len(inventory.nodes),
            "restrictedTo": list(inventory.restricted_to)
            if inventory.restricted_to is not None
            else None,
            "deviceClasses": inventory.classes_source,
        },
    }


def _notes(snapshot: Snapshot, inventory: DeviceInventory) -> list[str]:
    from dradiag.snapshot.model import Kind

    notes = []
    if inventory.classes_source == "builtin":
        notes.append(
            "the device source holds no DeviceClass objects: the NVIDIA driver's built-in "
            "classes gpu.nvidia.com, mig.nvidia.com and vfio.gpu.nvidia.com are used "
            "(nvidia-driver-facts §2)"
        )
    if not len(inventory):
        if snapshot.is_collected(Kind.RESOURCE_SLICE):
            notes.append("the device source holds no devices in scope")
        else:
            notes.append("ResourceSlices were not read from the device source")
    return notes


def expression_document(
    snapshot: Snapshot, expression: str, *, nodes: list[str] | None, per_device: bool
) -> dict[str, Any]:
    """The ``--expr`` document: the expression's result on every device."""
    from dradiag.analyses.cel import compile_selector
    from dradiag.analyses.selection import build_inventory, device_outcomes

    inventory = build_inventory(snapshot, nodes=nodes)
    outcomes = device_outcomes(inventory, compile_selector(expression))
    tally = Counter(outcomes)
    matched, nomatch = tally.pop(True, 0), tally.pop(False, 0)
    errors = sum(tally.values())
    failed = compress(range(len(outcomes)), map(isinstance, outcomes, repeat(str)))
    rows: list[dict[str, Any]] = []
    error_rows = [_device_row(inventory, index, outcomes[index]) for index in islice(failed, 20)]
    if per_device:
        rows = [_device_row(inventory, index, ok) for index, ok in enumerate(outcomes)]
    doc = _header(snapshot, inventory)
    doc["mode"] = "expression"
    # Classes play no part in an ad-hoc expression: only the device notes apply.
    doc["notes"] = [n for n in _notes(snapshot, inventory) if "DeviceClass" not in n]
    doc["expression"] = expression
    doc["summary"] = {
        "devices": len(inventory),
        "matched": matched,
        "nomatch": nomatch,
        "errors": errors,
    }
    if per_device:
        doc["devices"] = rows
    doc["deviceErrors"] = error_rows
    return doc


def _device_row(inventory: DeviceInventory, index: int, outcome: bool | str) -> dict[str, Any]:
    row: dict[str, Any] = {"device": inventory.ref(index), "node": inventory.node_label(index)}
    if outcome is True:
        row["result"] = "match"
    elif outcome is False:
        row["result"] = "nomatch"
    else:
        row["result"] = "error"
        row["error"] = outcome
    return row


def _location_dict(location: SourceLocation | None) -> dict[str, Any] | None:
    if location is None:
        return None
    return {"path": location.path, "line": location.line, "column": location.column}


def _tally(t: Any) -> dict[str, int]:
    return dict(t.as_dict())


def _stage(stage: Any) -> dict[str, Any]:
    return {
        "evaluated": stage.evaluated,
        "total": _tally(stage.total),
        "byNode": {k: _tally(v) for k, v in stage.by_node.items()},
        "byType": {k: _tally(v) for k, v in stage.by_type.items()},
        "byProfile": {k: _tally(v) for k, v in stage.by_profile.items()},
    }


def _selector_doc(sel: Any, claim: ClaimManifest | None, alt: Any) -> dict[str, Any]:
    site = None
    if claim is not None and sel.origin == "request":
        site = claim.selector_sites.get((alt.request, alt.subrequest, sel.index))
    compile_error = None
    if sel.compile_error is not None:
        ce = sel.compile_error
        compile_error = {
            "reason": ce.reason,
            "line": ce.line,
            "column": ce.column,
            "caret": ce.caret,
            "location": _location_dict(site.position_of(ce.position)) if site else None,
        }
    return {
        "index": sel.index,
        "expression": sel.expression,
        "location": _location_dict(site.location) if site else None,
        "compileError": compile_error,
        "evaluated": sel.evaluated,
        "true": sel.true,
        "false": sel.false,
        "errors": sel.error_count,
        "errorSamples": [
            {"device": e.device, "node": e.node, "message": e.message} for e in sel.errors
        ],
    }


def _alternative_doc(alt: Any, claim: ClaimManifest | None, result: Any) -> dict[str, Any]:
    free = result.free_now.get(alt.label) if result.free_now is not None else None
    return {
        "request": alt.request,
        "subrequest": alt.subrequest,
        "deviceClass": alt.device_class,
        "classFound": alt.class_found,
        "allocationMode": alt.allocation_mode,
        "count": alt.count,
        "status": alt.status.value,
        "matched": alt.matched,
        "bestNode": {"node": alt.best_node, "count": alt.best_node_count}
        if alt.best_node
        else None,
        "freeNow": free,
        "classSelectors": [_selector_doc(s, claim, alt) for s in alt.class_selectors],
        "requestSelectors": [_selector_doc(s, claim, alt) for s in alt.request_selectors],
        "classStage": _stage(alt.class_stage),
        "requestStage": _stage(alt.request_stage),
    }


def _problem_location(problem: SelectionProblem, claim: ClaimManifest) -> SourceLocation:
    """Where in the file a problem is: the selector's expression, else the request's first."""
    sites = claim.selector_sites
    if problem.origin == "request" and problem.selector_index is not None:
        site = sites.get((problem.request or "", problem.subrequest, problem.selector_index))
        if site is not None:
            return site.position_of(problem.offset)
    if problem.request is not None:
        for (request, sub, _), site in sorted(
            sites.items(), key=lambda kv: (kv[0][0], kv[0][1] or "", kv[0][2])
        ):
            if request == problem.request and (
                problem.subrequest is None or sub == problem.subrequest
            ):
                return site.location
    return claim.location


def _finding_doc(
    finding: Any,
    location: SourceLocation | None,
    *,
    subject: str | None,
    request: str | None = None,
) -> dict[str, Any]:
    return {
        "rule": finding.rule,
        "severity": finding.severity.value,
        "title": finding.title,
        "detail": finding.detail,
        "subject": subject,
        "request": request,
        "location": _location_dict(location),
        "next": list(finding.next),
        "evidence": [
            {"source": e.source.value, "ref": e.ref, "excerpt": e.excerpt} for e in finding.evidence
        ],
    }


def _free_now(snapshot: Snapshot, claim: ClaimManifest, nodes: list[str] | None) -> dict[str, int]:
    """Matching devices free now per request label, from the allocation simulator.

    The simulator's funnel counts devices per node through selectors, "free" (not held by
    another claim) and counters; the last of those stages is what could be allocated now.
    """
    from dradiag.analyses.allocation import explain_across_nodes
    from dradiag.analyses.selection import builtin_device_classes
    from dradiag.snapshot.model import Kind
    from dradiag.snapshot.model import Snapshot as SnapshotType

    if not snapshot.device_classes:
        # The simulator reads classes from the Snapshot: give it the built-in ones the
        # selection analysis used (the document's notes say so).
        objects: dict[Kind, Any] = {kind: [] for kind in Kind if kind is not Kind.LOG}
        for kind, obj in snapshot.objects():
            objects[kind].append(obj)
        objects[Kind.DEVICE_CLASS] = list(builtin_device_classes())
        snapshot = SnapshotType(
            objects=objects,
            logs=snapshot.logs,
            coverage=snapshot.coverage,
            errors=snapshot.errors,
            source=snapshot.source,
        )
    synthetic = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"namespace": claim.namespace, "name": f"{claim.name}-selector-check"},
        "spec": dict(claim.spec),
    }
    explanation = explain_across_nodes(snapshot, [synthetic], nodes=nodes)
    free: dict[str, int] = {}
    for outcome in explanation.nodes:
        for funnel in outcome.simulation.explanation:
            usable = [s for s in funnel.stages if s.stage in ("free", "counters", "tolerated")]
            if usable:
                free[funnel.request] = free.get(funnel.request, 0) + usable[-1].count
    return free


def manifests_document(
    snapshot: Snapshot,
    files: list[str],
    *,
    nodes: list[str] | None,
    namespace: str,
    now: bool = False,
) -> dict[str, Any]:
    """The FILE form's document: every claim, request and problem, grouped by file."""
    from dradiag.analyses.selection import (
        RULES,
        analyze_claim_selection,
        build_inventory,
        claim_selectors,
        selection_problems,
        with_free_now,
    )
    from dradiag.diagnosis.model import Finding, Phase, Severity
    from dradiag.errors import InputError
    from dradiag.snapshot.model import Kind
    from dradiag.sources.workloads import load_manifests

    manifests: ManifestSet = load_manifests(files, snapshot=snapshot, default_namespace=namespace)
    if not manifests.claims and not manifests.workloads:
        raise InputError(
            "nothing to check: no ResourceClaim, ResourceClaimTemplate or pod spec with "
            "resourceClaims",
            path=", ".join(files),
        )
    inventory = build_inventory(snapshot, nodes=nodes)
    findings: list[dict[str, Any]] = []
    by_file: dict[str, dict[str, Any]] = {
        path: {"path": path, "claims": [], "workloads": []} for path in manifests.files
    }
    used_by: dict[tuple[str, str, str], list[str]] = {}
    for workload in manifests.workloads:
        for use in workload.claim_uses:
            if use.resolved is not None:
                key = (use.resolved.kind, use.resolved.namespace, use.resolved.name)
                used_by.setdefault(key, []).append(workload.ref)
    claims_status: list[bool] = []
    requests_total = requests_broken = 0
    checked = list(manifests.claims) + list(manifests.cluster_claims)
    # One grouping of the devices by everything any selector reads, for all requests.
    inventory.prepare(
        selector for claim in checked for selector in claim_selectors(inventory, claim.spec)
    )
    for claim in checked:
        result: ClaimSelection = analyze_claim_selection(
            snapshot,
            claim.spec,
            namespace=claim.namespace,
            claim_name=claim.name,
            nodes=nodes,
            inventory=inventory,
        )
        if now:
            result = with_free_now(result, _free_now(snapshot, claim, nodes))
        problems = selection_problems(result)
        for problem in problems:
            findings.append(
                _finding_doc(
                    problem.finding,
                    _problem_location(problem, claim),
                    subject=claim.ref,
                    request=problem.request
                    if problem.subrequest is None
                    else f"{problem.request}/{problem.subrequest}",
                )
            )
        requests_total += len(result.requests)
        requests_broken += sum(1 for g in result.requests if g.status.value != "ok")
        claims_status.append(result.broken)
        claim_doc = {
            "kind": claim.kind,
            "namespace": claim.namespace,
            "name": claim.name,
            "apiVersion": claim.api_version,
            "origin": claim.origin,
            "location": _location_dict(claim.location),
            "status": "broken" if result.broken else "ok",
            "usedBy": used_by.get((claim.kind, claim.namespace, claim.name), []),
            "requests": [
                {
                    "name": group.name,
                    "firstAvailable": group.first_available,
                    "status": group.status.value,
                    "chosen": (group.chosen.subrequest if group.chosen else None)
                    if group.first_available
                    else None,
                    "alternatives": [
                        _alternative_doc(a, claim, result) for a in group.alternatives
                    ],
                }
                for group in result.requests
            ],
            "constraints": [
                {
                    "index": c.index,
                    "matchAttribute": c.attribute,
                    "requests": list(c.requests),
                    "feasible": c.feasible,
                    "feasibleNodes": c.feasible_nodes,
                    "detail": c.detail,
                }
                for c in result.constraints
            ],
        }
        if claim.origin == "cluster":
            # Resolved from the device source: listed with the first workload using it.
            owner = next(
                (w for w in manifests.workloads if any(u.resolved is claim for u in w.claim_uses)),
                None,
            )
            if owner is not None:
                by_file[owner.location.path]["claims"].append(claim_doc)
        else:
            by_file[claim.location.path]["claims"].append(claim_doc)
    for workload in manifests.workloads:
        uses = []
        for use in workload.claim_uses:
            uses.append(
                {
                    "podClaimName": use.pod_claim_name,
                    "resourceClaimName": use.resource_claim_name,
                    "resourceClaimTemplateName": use.resource_claim_template_name,
                    "resolved": use.resolved.ref if use.resolved is not None else None,
                    "resolvedFrom": use.resolved.origin if use.resolved is not None else None,
                    "problem": use.problem,
                    "location": _location_dict(use.location),
                }
            )
            if use.problem is not None:
                kind = (
                    Kind.RESOURCE_CLAIM if use.resource_claim_name else Kind.RESOURCE_CLAIM_TEMPLATE
                )
                definite = snapshot.is_collected(kind)
                info = RULES["DRA-SEL-CLAIM-NOT-FOUND"]
                finding = Finding(
                    rule="DRA-SEL-CLAIM-NOT-FOUND",
                    phase=Phase.SELECTION,
                    severity=Severity.ERROR if definite else Severity.WARNING,
                    title=info.title,
                    detail=f"{workload.ref}, pod claim {use.pod_claim_name}: {use.problem}",
                    next=info.next,
                )
                findings.append(_finding_doc(finding, use.location, subject=workload.ref))
        by_file[workload.location.path]["workloads"].append(
            {
                "kind": workload.kind,
                "apiVersion": workload.api_version,
                "namespace": workload.namespace,
                "name": workload.name,
                "location": _location_dict(workload.location),
                "podSpecs": list(workload.pod_spec_paths),
                "claims": uses,
            }
        )
    notes = _notes(snapshot, inventory)
    if inventory.classes_source == "builtin":
        info = RULES["DRA-SEL-BUILTIN-CLASSES"]
        findings.append(
            _finding_doc(
                Finding(
                    rule="DRA-SEL-BUILTIN-CLASSES",
                    phase=Phase.SELECTION,
                    severity=Severity.INFO,
                    title=info.title,
                    detail=notes[0],
                    next=info.next,
                ),
                None,
                subject=None,
            )
        )
    doc = _header(snapshot, inventory)
    doc["mode"] = "manifests"
    doc["notes"] = notes
    doc["manifests"] = [
        by_file[p] for p in manifests.files if by_file[p]["claims"] or by_file[p]["workloads"]
    ]
    doc["findings"] = findings
    doc["summary"] = {
        "claims": len(checked),
        "brokenClaims": sum(claims_status),
        "requests": requests_total,
        "brokenRequests": requests_broken,
        "errors": sum(1 for f in findings if f["severity"] == "error"),
        "warnings": sum(1 for f in findings if f["severity"] == "warning"),
    }
    return doc


# -- output ---------------------------------------------------------------------------


def _emit(doc: dict[str, Any], output: OutputFormat, no_color: bool) -> None:
    if output is OutputFormat.SARIF:
        import json

        from dradiag.render.sarif import selector_check_sarif

        typer.echo(json.dumps(selector_check_sarif(doc), indent=2, ensure_ascii=False))
        return
    if output in (OutputFormat.JSON, OutputFormat.YAML):
        from dradiag.render.document import dump_document

        typer.echo(dump_document(doc, output.value), nl=False)
        return
    _render_text(doc, no_color)


def _render_text(doc: dict[str, Any], no_color: bool) -> None:
    import os

    from rich.console import Console

    console = Console(
        no_color=no_color or bool(os.environ.get("NO_COLOR")),
        highlight=False,
        soft_wrap=True,
    )

    def say(text: str, style: str | None = None) -> None:
        console.print(text, style=style, markup=False, highlight=False)

    inv = doc["inventory"]
    src = doc["source"]
    where = src.get("location") or src.get("context") or src.get("kind")
    scope = f" (restricted to {', '.join(inv['restrictedTo'])})" if inv["restrictedTo"] else ""
    say(f"devices: {inv['devices']} on {inv['nodes']} node(s) from {where}{scope}", "bold")
    for note in doc.get("notes") or ():
        say(f"note: {note}", "yellow")
    if doc["mode"] == "expression":
        s = doc["summary"]
        say(f"expression: {doc['expression']}")
        for row in doc.get("devices") or ():
            style = {"match": "green", "nomatch": None, "error": "red"}[row["result"]]
            extra = f": {row['error']}" if row.get("error") else ""
            say(f"  {row['result']:<7} {row['device']} (node {row['node']}){extra}", style)
        if not doc.get("devices"):
            for row in doc.get("deviceErrors") or ():
                say(f"  error   {row['device']} (node {row['node']}): {row['error']}", "red")
        say(
            f"summary: {s['matched']} matched, {s['nomatch']} not matched, {s['errors']} "
            f"errored of {s['devices']} device(s)",
            "bold",
        )
        return
    by_subject: dict[tuple[str | None, str | None], list[dict[str, Any]]] = {}
    for f in doc["findings"]:
        by_subject.setdefault((f["subject"], f["request"]), []).append(f)
    icons = {"error": "✗", "warning": "!", "info": "i"}
    styles = {"error": "red", "warning": "yellow", "info": "cyan"}

    def show_findings(items: list[dict[str, Any]], indent: str) -> None:
        for f in items:
            loc = f["location"]
            at = ""
            if loc:
                at = f" {loc['path']}" + (f":{loc['line']}:{loc['column']}" if loc["line"] else "")
            say(
                f"{indent}{icons[f['severity']]} {f['rule']}{at}: {f['detail']}",
                styles[f["severity"]],
            )
            for ev in f["evidence"]:
                excerpt = ev["excerpt"].replace("\n", "\n" + indent + "      ")
                say(f"{indent}    {ev['ref']}: {excerpt}")
            if f["severity"] != "info" and f["next"]:
                say(f"{indent}    next: {f['next'][0]}", "dim")

    for manifest in doc["manifests"]:
        say("")
        say(manifest["path"], "bold underline")
        for claim in manifest["claims"]:
            ref = f"{claim['kind']} {claim['namespace']}/{claim['name']}"
            status = "ok" if claim["status"] == "ok" else "broken"
            origin = " (from the device source)" if claim["origin"] == "cluster" else ""
            used = f"; used by {', '.join(claim['usedBy'])}" if claim["usedBy"] else ""
            say(f"  {ref}{origin}: {status}{used}", "green" if status == "ok" else "red")
            for group in claim["requests"]:
                for alt in group["alternatives"]:
                    label = alt["request"] + (f"/{alt['subrequest']}" if alt["subrequest"] else "")
                    mode = "All" if alt["allocationMode"] == "All" else f"count {alt['count']}"
                    best = alt["bestNode"]
                    most = f", most on one node: {best['count']} ({best['node']})" if best else ""
                    free = f", {alt['freeNow']} free now" if alt["freeNow"] is not None else ""
                    say(
                        f"    request {label} [{alt['deviceClass']}, {mode}]: {alt['status']} — "
                        f"matches {alt['matched']} device(s){most}{free}",
                        "green" if alt["status"] == "ok" else "red",
                    )
                    for stage_name, key in (("class", "classStage"), ("request", "requestStage")):
                        stage = alt[key]
                        if not stage["evaluated"]:
                            continue
                        t = stage["total"]
                        say(
                            f"      {stage_name} selectors: {t['matched']} matched, "
                            f"{t['notMatched']} not matched, {t['errored']} errored"
                        )
                        for dim, title in (("byType", "type"), ("byProfile", "profile")):
                            parts = [
                                f"{k or '-'} {v['matched']}/{v['matched'] + v['notMatched'] + v['errored']}"
                                for k, v in stage[dim].items()
                            ]
                            if parts and len(parts) <= 12:
                                say(f"        by {title}: " + ", ".join(parts), "dim")
                        nodes = list(stage["byNode"].items())
                        if nodes:
                            shown = ", ".join(
                                f"{k} {v['matched']}/{v['matched'] + v['notMatched'] + v['errored']}"
                                for k, v in nodes[:6]
                            )
                            more = f" (+{len(nodes) - 6} more)" if len(nodes) > 6 else ""
                            say(f"        by node: {shown}{more}", "dim")
                    show_findings(by_subject.pop((ref, label), []), "      ")
            show_findings(by_subject.pop((ref, None), []), "    ")
            for c in claim["constraints"]:
                say(
                    f"    constraint #{c['index']} matchAttribute {c['matchAttribute']}: "
                    + ("feasible" if c["feasible"] else "infeasible")
                    + f" — {c['detail']}",
                    "green" if c["feasible"] else "red",
                )
        for workload in manifest["workloads"]:
            ref = f"{workload['kind']} {workload['namespace']}/{workload['name']}"
            say(f"  {ref} ({', '.join(workload['podSpecs'])})")
            for use in workload["claims"]:
                target = use["resolved"] or use["problem"]
                say(
                    f"    pod claim {use['podClaimName']} → {target}",
                    "red" if use["problem"] else None,
                )
            show_findings(by_subject.pop((ref, None), []), "    ")
    leftovers = [f for items in by_subject.values() for f in items]
    if leftovers:
        say("")
        show_findings(leftovers, "")
    s = doc["summary"]
    say("")
    say(
        f"summary: {s['claims']} claim(s), {s['requests']} request(s), "
        f"{s['brokenRequests']} broken; {s['errors']} error(s), {s['warnings']} warning(s)",
        "bold",
    )


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("selector-check")(selector_check)
