"""The ``selector-check`` document (json/yaml, read by ``render.sarif``) and its text form.

The document is drawn from the results of ``analyses.selector_check``; its schema is
``docs/schema/selector-check.schema.json``. The text form reads the document only, so
text, json and sarif cannot disagree.
"""

from __future__ import annotations

from itertools import compress, islice, repeat
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.analyses.selection import DeviceInventory, SelectionProblem
    from dradiag.analyses.selector_check import ExpressionSweep, ManifestCheck
    from dradiag.snapshot.model import Snapshot
    from dradiag.sources.workloads import ClaimManifest, SourceLocation

SCHEMA_VERSION = "dradiag.selector-check/v1"


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


def expression_document(
    snapshot: Snapshot, sweep: ExpressionSweep, expression: str, *, per_device: bool
) -> dict[str, Any]:
    """The ``--expr`` document: the expression's result on every device."""
    from dradiag.analyses.selector_check import inventory_notes

    inventory, outcomes = sweep.inventory, sweep.outcomes
    failed = compress(range(len(outcomes)), map(isinstance, outcomes, repeat(str)))
    rows: list[dict[str, Any]] = []
    error_rows = [_device_row(inventory, index, outcomes[index]) for index in islice(failed, 20)]
    if per_device:
        rows = [_device_row(inventory, index, ok) for index, ok in enumerate(outcomes)]
    doc = _header(snapshot, inventory)
    doc["mode"] = "expression"
    # Classes play no part in an ad-hoc expression: only the device notes apply.
    doc["notes"] = [n for n in inventory_notes(snapshot, inventory) if "DeviceClass" not in n]
    doc["expression"] = expression
    doc["summary"] = {
        "devices": len(inventory),
        "matched": sweep.matched,
        "nomatch": sweep.nomatch,
        "errors": sweep.errors,
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


def manifests_document(snapshot: Snapshot, check: ManifestCheck) -> dict[str, Any]:
    """The FILE form's document: every claim, request and problem, grouped by file."""
    manifests, inventory = check.manifests, check.inventory
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
    requests_total = requests_broken = 0
    for checked in check.claims:
        claim, result = checked.claim, checked.selection
        for problem in checked.problems:
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
    missing = {id(use): finding for use, finding in check.missing_claims}
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
            if id(use) in missing:
                findings.append(_finding_doc(missing[id(use)], use.location, subject=workload.ref))
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
    if check.builtin_classes is not None:
        findings.append(_finding_doc(check.builtin_classes, None, subject=None))
    doc = _header(snapshot, inventory)
    doc["mode"] = "manifests"
    doc["notes"] = check.notes
    doc["manifests"] = [
        by_file[p] for p in manifests.files if by_file[p]["claims"] or by_file[p]["workloads"]
    ]
    doc["findings"] = findings
    doc["summary"] = {
        "claims": len(check.claims),
        "brokenClaims": sum(c.selection.broken for c in check.claims),
        "requests": requests_total,
        "brokenRequests": requests_broken,
        "errors": sum(1 for f in findings if f["severity"] == "error"),
        "warnings": sum(1 for f in findings if f["severity"] == "warning"),
    }
    return doc


# -- text -----------------------------------------------------------------------------


def render_text(doc: dict[str, Any], no_color: bool) -> None:
    """Print the document as text (colour unless no_color or NO_COLOR)."""
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
