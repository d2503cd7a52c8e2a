"""SARIF 2.1.0 output: one result per problem, located at the expression in the file.

Drawn from the canonical JSON document (STYLE: renderers read the dict, not the
analyses), so SARIF and ``-o json`` cannot disagree. Rule metadata (``tool.driver.rules``)
comes from the rule catalogue (``rules/*.yaml`` through ``dradiag.rulebook``) when it
loads, else from the titles and next steps the document itself carries. Rule ids are
the stable ``DRA-*`` ids, so code-scanning UIs track a problem across runs.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

logger = logging.getLogger(__name__)

SARIF_VERSION = "2.1.0"
SARIF_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
INFORMATION_URI = "https://github.com/dradiag/dradiag"
HELP_URI = INFORMATION_URI + "/blob/main/docs/rules.md#{anchor}"

_LEVELS = {"error": "error", "warning": "warning", "info": "note"}


def _catalogue() -> Mapping[str, Any]:
    """Rule id → catalogue entry, or empty when the rulebook cannot be loaded."""
    try:
        from dradiag.rulebook.loader import load_rulebook

        book = load_rulebook()
    except Exception as exc:  # noqa: BLE001 - SARIF must not fail for want of docs
        logger.debug("rule catalogue unavailable for SARIF: %s", exc)
        return {}
    rules = getattr(book, "rules", None)
    if isinstance(rules, Mapping):
        return rules
    if isinstance(rules, Sequence):
        return {r.id: r for r in rules}
    return {}


def _uri(path: str) -> str:
    from pathlib import PurePath

    if path in ("<stdin>", "-"):
        return "stdin"
    return PurePath(path).as_posix()


def _rule_descriptor(rule_id: str, finding: Mapping[str, Any], entry: Any) -> dict[str, Any]:
    title = getattr(entry, "title", None) or finding.get("title") or rule_id
    next_steps = list(getattr(entry, "next", ()) or finding.get("next") or ())
    from dradiag.rulebook.docs import docs_sections, plain_docs

    docs = (getattr(entry, "docs", "") or "").strip()
    steps = "\n".join(f"- {n}" for n in next_steps)
    # The explain text is a template filled from evidence; a descriptor has none, so it
    # says what the rule detects, and its help is the docs without markdown headings.
    full = docs_sections(docs).get("What it detects") or title
    descriptor: dict[str, Any] = {
        "id": rule_id,
        "name": "".join(part.capitalize() for part in rule_id.split("-")[2:]) or rule_id,
        "shortDescription": {"text": title},
        "fullDescription": {"text": full},
        "help": {"text": plain_docs(docs) or steps or title, "markdown": docs or steps or title},
        "helpUri": HELP_URI.format(anchor=rule_id.lower()),
        "defaultConfiguration": {
            "level": _LEVELS.get(
                str(getattr(entry, "severity", finding.get("severity"))), "warning"
            )
        },
        "properties": {"tags": ["dra", "selection"]},
    }
    return descriptor


def _result(finding: Mapping[str, Any], rule_index: int) -> dict[str, Any]:
    message = finding["detail"] or finding["title"]
    if finding.get("next"):
        message += " Next: " + finding["next"][0]
    result: dict[str, Any] = {
        "ruleId": finding["rule"],
        "ruleIndex": rule_index,
        "level": _LEVELS.get(finding["severity"], "warning"),
        "message": {"text": message},
    }
    loc = finding.get("location")
    if loc and loc.get("path"):
        region: dict[str, Any] = {}
        if loc.get("line"):
            region["startLine"] = int(loc["line"])
            if loc.get("column"):
                region["startColumn"] = int(loc["column"])
        physical: dict[str, Any] = {"artifactLocation": {"uri": _uri(loc["path"])}}
        if region:
            physical["region"] = region
        location: dict[str, Any] = {"physicalLocation": physical}
        if finding.get("subject"):
            name = finding["subject"] + (
                f", request {finding['request']}" if finding.get("request") else ""
            )
            location["logicalLocations"] = [{"name": name, "kind": "object"}]
        result["locations"] = [location]
    # Stable across runs: the same problem on the same object and request.
    key = "/".join(str(finding.get(k) or "") for k in ("rule", "subject", "request"))
    result["partialFingerprints"] = {"dradiagProblem/v1": key}
    return result


def findings_sarif(findings: Sequence[Mapping[str, Any]], *, tool_version: str) -> dict[str, Any]:
    """A SARIF log of document-form findings (``rule``, ``severity``, ``detail``, ``location``)."""
    catalogue = _catalogue()
    rule_ids: list[str] = []
    descriptors: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for finding in findings:
        rule_id = finding["rule"]
        if rule_id not in rule_ids:
            rule_ids.append(rule_id)
            descriptors.append(_rule_descriptor(rule_id, finding, catalogue.get(rule_id)))
        results.append(_result(finding, rule_ids.index(rule_id)))
    return {
        "$schema": SARIF_SCHEMA,
        "version": SARIF_VERSION,
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dradiag",
                        "version": tool_version,
                        "semanticVersion": tool_version,
                        "informationUri": INFORMATION_URI,
                        "rules": descriptors,
                    }
                },
                "results": results,
                "columnKind": "unicodeCodePoints",
            }
        ],
    }


def selector_check_sarif(doc: Mapping[str, Any]) -> dict[str, Any]:
    """SARIF for a ``selector-check`` document (either form)."""
    version = str((doc.get("tool") or {}).get("version") or "0")
    if doc.get("mode") == "expression":
        findings = [
            {
                "rule": "DRA-SEL-CEL-RUNTIME-ERROR",
                "severity": "error",
                "title": "a CEL selector errors on a device: kube-scheduler would abort scheduling",
                "detail": f"--expr errors on device {row['device']}: {row['error']}",
                "subject": row["device"],
                "request": None,
                "location": None,
                "next": [],
            }
            for row in doc.get("deviceErrors") or ()
        ]
        if not doc["summary"]["matched"]:
            findings.append(
                {
                    "rule": "DRA-SEL-NO-MATCH",
                    "severity": "error",
                    "title": "no device matches the request's selectors",
                    "detail": f"--expr matches none of {doc['summary']['devices']} device(s)",
                    "subject": None,
                    "request": None,
                    "location": None,
                    "next": [],
                }
            )
        return findings_sarif(findings, tool_version=version)
    return findings_sarif(doc.get("findings") or (), tool_version=version)


def _subject(target: Mapping[str, Any]) -> str:
    """``ResourceClaim ml/train`` / ``Node gpu-1``: the object a scan row is about."""
    ns = target.get("namespace")
    return f"{target.get('kind')} {ns + '/' if ns else ''}{target.get('name')}"


def diagnoses_sarif(
    doc: Mapping[str, Any], *, keep: Callable[[Mapping[str, Any]], bool] | None = None
) -> dict[str, Any]:
    """SARIF for a ``scan`` document: every finding of every row as a result with its
    rule (as kube-linter reports each check on each object), located logically at the
    row's object, since a cluster object has no file. ``keep``: which findings to list
    (``scan --rule``/``--min-severity``); all by default."""
    version = str((doc.get("tool") or {}).get("version") or "")
    findings: list[dict[str, Any]] = []
    subjects: list[tuple[str, str]] = []
    for item in doc.get("items") or ():
        version = version or str((item.get("tool") or {}).get("version") or "")
        subject = _subject(item.get("target") or {})
        for phase in item.get("phases") or ():
            for finding in phase.get("findings") or ():
                if keep is not None and not keep(finding):
                    continue
                findings.append(
                    {
                        "rule": finding["rule"],
                        "severity": finding["severity"],
                        "title": finding.get("title") or finding["rule"],
                        "detail": finding.get("detail") or "",
                        "subject": subject,
                        "request": None,
                        "location": None,
                        "next": list(finding.get("next") or ()),
                    }
                )
                subjects.append((subject, str(phase.get("id") or "")))
    log = findings_sarif(findings, tool_version=version or "0")
    (run,) = log["runs"]
    for result, (subject, phase) in zip(run["results"], subjects, strict=True):
        result["locations"] = [{"logicalLocations": [{"name": subject, "kind": "object"}]}]
        result["partialFingerprints"]["dradiagProblem/v1"] = f"{result['ruleId']}/{subject}"
        result["properties"] = {"phase": phase}
    for descriptor in run["tool"]["driver"]["rules"]:
        descriptor["properties"]["tags"] = ["dra", "scan"]
    return log
