"""``dradiag demo [NAME]``: ``claim`` on the sample clusters shipped in the package.

Each sample is a directory ``dradiag/samples/<name>/`` of Kubernetes objects and logs
(a ``--from`` input) with a ``sample.yaml`` naming the claim to diagnose, a one-line
description and, optionally, the verdict it is expected to give. The demo is a
showcase, not a health check: it exits 0 when every sample gave its expected verdict,
whatever that verdict is.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.options import NoColor, Output, OutputFormat

if TYPE_CHECKING:
    from pathlib import Path

    from dradiag.snapshot.model import CollectionError, Snapshot

SAMPLE_FILE = "sample.yaml"

ListOption = Annotated[bool, typer.Option("--list", help="List the samples and exit.")]


def samples_root() -> Path:
    """Where the samples are: inside the installed package (``dradiag/samples``)."""
    from importlib import resources
    from pathlib import Path

    return Path(str(resources.files("dradiag").joinpath("samples")))


def read_sample(directory: Path) -> dict[str, Any]:
    """``sample.yaml`` of one sample: ``claim`` (NS/NAME), ``description``, expectations."""
    import yaml

    from dradiag.errors import InputError

    path = directory / SAMPLE_FILE
    try:
        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read sample description: {exc}", path=str(path)) from None
    if not isinstance(data, dict) or not isinstance(data.get("claim"), str):
        raise InputError(
            "sample.yaml must name the claim to diagnose (claim: NS/NAME)", path=str(path)
        )
    nested = data.get("expected")
    expected: dict[str, Any] = nested if isinstance(nested, dict) else data
    return {
        "name": directory.name,
        "claim": data["claim"],
        "description": str(data.get("description") or ""),
        "status": expected.get("status"),
        "phase": expected.get("phase"),
        "rule": expected.get("rule"),
    }


def list_samples() -> list[dict[str, Any]]:
    """Every sample with its description, sorted by name."""
    root = samples_root()
    if not root.is_dir():
        return []
    return [
        read_sample(d) for d in sorted(root.iterdir()) if d.is_dir() and (d / SAMPLE_FILE).is_file()
    ]


def load_sample(directory: Path) -> Snapshot:
    """The sample's Snapshot, read like ``--from`` but without the sample's own description."""
    from dradiag.sources.manifests import load_snapshot

    return load_snapshot(str(directory), exclude={SAMPLE_FILE}, location=f"sample {directory.name}")


def demo(
    name: Annotated[
        str | None, typer.Argument(metavar="[NAME]", help="One sample; all of them if omitted.")
    ] = None,
    list_only: ListOption = False,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
) -> int:
    """Diagnose the sample clusters shipped with dradiag (no cluster needed).

    \b
    Examples:
      dradiag demo
      dradiag demo --list

    Runs `dradiag claim` on each embedded sample (a healthy MIG claim, a selector that
    matches nothing, exhausted MIG counters, a MIG creation failure at Prepare, an
    unresolvable CDI device) and shows each diagnosis. This is a showcase, not a health
    check: it exits 0 when every sample gave the verdict it was built to show.
    """
    import logging
    import sys

    from dradiag.cli.diagnosis_run import emit, use_color
    from dradiag.cli.exit_codes import ExitCode
    from dradiag.diagnosis.build import diagnose_claim
    from dradiag.errors import UsageError
    from dradiag.render.document import (
        collection_block,
        collection_of,
        diagnoses_document,
        diagnosis_document,
    )
    from dradiag.render.text import render_diagnosis

    samples = list_samples()
    if list_only:
        width = max((len(s["name"]) for s in samples), default=0)
        for s in samples:
            sys.stdout.write(f"{s['name']:<{width}}  {s['description']}\n")
        return ExitCode.OK
    if name is not None:
        samples = [s for s in samples if s["name"] == name]
        if not samples:
            known = ", ".join(s["name"] for s in list_samples()) or "none"
            raise UsageError(f"no sample named {name!r} (samples: {known})")
    if not samples:
        raise UsageError("this build of dradiag ships no samples")
    log = logging.getLogger("dradiag.cli.demo")
    color = use_color(no_color)
    docs = []
    texts = []
    unexpected = []
    errors: list[CollectionError] = []
    for sample in samples:
        snapshot = load_sample(samples_root() / sample["name"])
        errors += snapshot.errors
        ns, _, claim_name = sample["claim"].partition("/")
        diagnosis = diagnose_claim(snapshot, ns, claim_name)
        doc = diagnosis_document(diagnosis, snapshot.source, collection_of(snapshot))
        docs.append(doc)
        verdict = doc["verdict"]
        for key in ("status", "phase", "rule"):
            if sample[key] is not None and verdict[key] != sample[key]:
                unexpected.append(
                    f"sample {sample['name']}: expected {key} {sample[key]!r}, got {verdict[key]!r}"
                )
        if output is OutputFormat.TEXT:
            header = f"━━ sample {sample['name']}: {sample['description']}\n"
            header += f"   $ dradiag claim {sample['claim']} --from <sample {sample['name']}>\n\n"
            texts.append(header + render_diagnosis(doc, color=color))
    for problem in unexpected:
        log.warning("%s", problem)
    if output is OutputFormat.TEXT:
        emit({}, output, "\n".join(texts))
    else:
        emit(diagnoses_document(docs, collection_block(errors)), output, None)
    return ExitCode.RUNTIME if unexpected else ExitCode.OK


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("demo")(demo)
