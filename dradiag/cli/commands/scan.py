"""``dradiag scan [-n NS | -A]``: every claim and node that is not healthy, in one table.

Narrowing (selectors, node, phase, rule, severity) and silences are
``diagnosis.scan_scope``'s; this module turns the flags into a ScanScope.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.options import (
    DEFAULT_REQUEST_TIMEOUT,
    DEFAULT_STUCK_AFTER,
    DEFAULT_TIMEOUT,
    AllNamespaces,
    As,
    AsGroup,
    Context,
    ExitZero,
    FromPath,
    Kubeconfig,
    Namespace,
    NoColor,
    Now,
    OutputFormat,
    RequestTimeout,
    StuckAfter,
    Timeout,
    one_of,
    output_option,
)
from dradiag.vocabulary import Phase, Severity

NoHeaders = Annotated[
    bool,
    typer.Option("--no-headers", help="Text table without its header row and summary line."),
]

if TYPE_CHECKING:
    from dradiag.diagnosis.model import Diagnosis
    from dradiag.diagnosis.scan_scope import ScanScope

ScanOutput = Annotated[
    OutputFormat,
    output_option(
        OutputFormat.TEXT,
        OutputFormat.WIDE,
        OutputFormat.NAME,
        OutputFormat.JSON,
        OutputFormat.YAML,
        OutputFormat.SARIF,
    ),
]
Selector = Annotated[
    str | None,
    typer.Option(
        "-l",
        "--selector",
        metavar="SELECTOR",
        help="Label selector on pods and claims, as kubectl's (a=b,c!=d,'e in (x,y)',!f): a "
        "claim is kept when it or a pod using it matches.",
    ),
]
FieldSelectorOption = Annotated[
    str | None,
    typer.Option(
        "--field-selector",
        metavar="SELECTOR",
        help="Field selector on pods, as kubectl's (metadata.name, metadata.namespace, "
        "spec.nodeName, status.phase, ...; = == !=); claims match through their pods.",
    ),
]
NodeOption = Annotated[
    list[str] | None,
    typer.Option(
        "--node",
        metavar="NODE",
        help="Only claims allocated to or used by pods on NODE, its pods, and its own rows "
        "(repeatable).",
    ),
]
PhaseOption = Annotated[
    list[str] | None,
    typer.Option(
        "--phase",
        metavar="PHASE",
        parser=one_of([p.value for p in Phase]),
        help="Only rows broken or unsure at PHASE (publication, selection, allocation, "
        "prepare, injection, workload, unprepare; repeatable).",
    ),
]
RuleOption = Annotated[
    list[str] | None,
    typer.Option(
        "--rule",
        metavar="ID",
        help="Only rows with a finding of rule ID (globs like DRA-PREP-*; repeatable).",
    ),
]
MinSeverityOption = Annotated[
    str | None,
    typer.Option(
        "--min-severity",
        metavar="info|warning|error",
        parser=one_of([s.value for s in reversed(Severity)]),
        help="Only rows with a finding of at least this severity.",
    ),
]
SilenceOption = Annotated[
    str | None,
    typer.Option(
        "--silence",
        metavar="FILE",
        help="YAML list of accepted findings (rule glob, optional namespace/claim/node, "
        "reason): left out and not counted for the exit code. Default: "
        ".dradiag-silence.yaml in the working directory, if there is one.",
    ),
]


def scan(
    from_path: FromPath = None,
    kubeconfig: Kubeconfig = None,
    context: Context = None,
    namespace: Namespace = None,
    all_namespaces: AllNamespaces = False,
    selector: Selector = None,
    field_selector: FieldSelectorOption = None,
    node: NodeOption = None,
    phase: PhaseOption = None,
    rule: RuleOption = None,
    min_severity: MinSeverityOption = None,
    silence: SilenceOption = None,
    request_timeout: RequestTimeout = DEFAULT_REQUEST_TIMEOUT,
    timeout: Timeout = DEFAULT_TIMEOUT,
    as_user: As = None,
    as_groups: AsGroup = None,
    output: ScanOutput = OutputFormat.TEXT,
    no_color: NoColor = False,
    exit_zero: ExitZero = False,
    now: Now = None,
    stuck_after: StuckAfter = DEFAULT_STUCK_AFTER,
    no_headers: NoHeaders = False,
) -> int:
    """Diagnose every claim that is not healthy, plus node-level publication problems.

    \b
    Examples:
      dradiag scan -A
      dradiag scan -n ml -l app=trainer --min-severity error --from bundle.tar.gz -o sarif

    One row per unhealthy claim (or pod whose claim is not created yet) and per node
    with a problem that belongs to no claim (a GPU node publishing nothing, a
    crash-looping kubelet plugin, an incomplete or invalid pool), sorted by phase.
    Without -n, every namespace in the snapshot is scanned. -l and --field-selector
    keep a claim when it or a pod using it matches, and drop node rows (--node keeps
    its own); every kept row is judged on the whole snapshot. Exit 0 nothing broken,
    1 something broken, 2 usage/input error, 3 runtime error, 4 inconclusive; silenced
    rows do not count.

    -o wide: every column, nothing folded. -o name: one line per row, NS/NAME for a
    claim or pod (as `dradiag claim` and `dradiag pod` take it), NAME for a node.
    """
    import os

    from dradiag.cli.diagnosis_run import (
        diagnoses_document,
        final_code,
        read_snapshot,
        report,
        stream_diagnoses_json,
        walk_options,
    )
    from dradiag.cli.inputs import Target
    from dradiag.diagnosis.build import scan as scan_snapshot
    from dradiag.diagnosis.next_steps import without_command
    from dradiag.diagnosis.scan_scope import ScanScope, Silence, select_rows
    from dradiag.errors import UsageError
    from dradiag.snapshot import coverage
    from dradiag.snapshot.selectors import parse_field_selector, parse_label_selector
    from dradiag.sources.silences import DEFAULT_SILENCE_FILE, load_silences

    if namespace and all_namespaces:
        raise UsageError("-n/--namespace and -A/--all-namespaces are mutually exclusive")
    options = walk_options(now, stuck_after)
    scope = ScanScope(
        labels=parse_label_selector(selector),
        fields=parse_field_selector(field_selector),
        nodes=tuple(dict.fromkeys(node or ())),
        phases=frozenset(phase or ()),
        rules=tuple(rule or ()),
        min_severity=Severity(min_severity) if min_severity else None,
    )
    silence_file = silence or (
        DEFAULT_SILENCE_FILE if os.path.isfile(DEFAULT_SILENCE_FILE) else None
    )
    silences = (
        tuple(Silence(**entry) for entry in load_silences(silence_file)) if silence_file else ()
    )
    if silence_file and not silence:
        logging.getLogger("dradiag.scan").info("silences read from %s", silence_file)
    snapshot = read_snapshot(
        Target(
            kind="cluster",
            namespace=namespace,
            nodes=scope.nodes,
            label_selector=scope.labels.text(),
            field_selector=scope.fields.text(),
        ),
        from_path=from_path,
        kubeconfig=kubeconfig,
        context=context,
        namespace=namespace,
        all_namespaces=all_namespaces or not namespace,
        request_timeout=request_timeout,
        timeout=timeout,
        as_user=as_user,
        as_groups=as_groups,
        output=output,
        no_color=no_color,
        exit_zero=exit_zero,
    )
    diagnoses = without_command(
        scan_snapshot(snapshot, namespace=namespace or None, options=options), "scan"
    )
    selection = select_rows(snapshot, diagnoses, scope, silences)
    unread = coverage.unread(snapshot, coverage.SCAN_NEEDS)
    if unread:
        logging.getLogger("dradiag.scan").warning(
            "could not read: %s; scan will not call the cluster healthy", coverage.describe(unread)
        )
    if output is OutputFormat.JSON:
        # Streamed: 60,000 rows never exist as one document (or one string) in memory.
        summary = selection.summary()
        code = final_code(selection.rows, exit_zero=exit_zero, inconclusive=bool(unread))
        rows = list(selection.rows)
        del diagnoses, selection  # each row is freed once written
        stream_diagnoses_json(snapshot, rows, unread, {"summary": summary})
        return code
    doc = diagnoses_document(snapshot, selection.rows, unread)
    doc["summary"] = selection.summary()
    if output is OutputFormat.SARIF:
        return _report_sarif(doc, selection.rows, scope, exit_zero=exit_zero, unread=bool(unread))
    return report(
        doc,
        selection.rows,
        render=lambda d, color: _render_text(
            d,
            color=color,
            silence_file=silence_file,
            output=output,
            headers=not no_headers,
        ),
        output=OutputFormat.TEXT if output in (OutputFormat.WIDE, OutputFormat.NAME) else output,
        no_color=no_color,
        exit_zero=exit_zero,
        inconclusive=bool(unread),
    )


def _render_text(
    doc: Mapping[str, Any],
    *,
    color: bool,
    silence_file: str | None,
    output: OutputFormat,
    headers: bool,
) -> str:
    """The scan table (``-o wide``: every column; ``-o name``: one name per row), then,
    unless ``--no-headers``, the counts per phase and what was silenced."""
    from dradiag.render.scan_summary import render_scan_summary
    from dradiag.render.text import render_names, render_scan

    if output is OutputFormat.NAME:
        return render_names(doc, color=color)
    table = render_scan(doc, color=color, wide=output is OutputFormat.WIDE, headers=headers)
    if not headers:
        return table
    return table + render_scan_summary(doc.get("summary") or {}, silence_file=silence_file)


def _report_sarif(
    doc: dict[str, Any],
    rows: Sequence[Diagnosis],
    scope: ScanScope,
    *,
    exit_zero: bool,
    unread: bool,
) -> int:
    """``-o sarif``: the rows' findings (those --rule/--min-severity ask for) as results."""
    import json
    import sys

    from dradiag.cli.diagnosis_run import final_code
    from dradiag.render.sarif import diagnoses_sarif

    def keep(finding: Mapping[str, Any]) -> bool:
        return scope.wants(str(finding.get("rule") or ""), Severity(str(finding["severity"])))

    sys.stdout.write(json.dumps(diagnoses_sarif(doc, keep=keep), indent=2, ensure_ascii=False))
    sys.stdout.write("\n")
    sys.stdout.flush()
    return final_code(rows, exit_zero=exit_zero, inconclusive=unread)


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("scan")(scan)
