"""``dradiag demo [NAME]``: ``claim`` on the sample clusters shipped in the package.

Each sample is a directory ``dradiag/samples/<name>/`` holding only a ``--from`` input
(Kubernetes objects, logs, ``collection.json``). What the demo needs to know about it —
the claim to diagnose, its node, a one-line description and the verdict it was built to
show — lives beside the folders in ``dradiag/samples/index.yaml``, so ``--from`` on a
sample folder reads nothing that is not cluster state (no "skipped" warning).

The demo is a showcase, not a health check: it exits 0 when every sample gave its
expected verdict, whatever that verdict is. The commands it prints are real: they name
the installed package's sample folders, or the copies ``--extract DIR`` wrote, and a
test runs every one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from dradiag.cli.options import NoColor, Output, OutputFormat

if TYPE_CHECKING:
    from pathlib import Path

    from dradiag.snapshot.model import CollectionError, Snapshot

INDEX_FILE = "index.yaml"

ListOption = Annotated[bool, typer.Option("--list", help="List the samples and exit.")]
ExtractOption = Annotated[
    str | None,
    typer.Option(
        "--extract",
        metavar="DIR",
        help="Copy the samples (or NAME) to DIR/<name>/ and print the commands to run on them.",
    ),
]


def samples_root() -> Path:
    """Where the samples are: inside the installed package (``dradiag/samples``)."""
    from importlib import resources
    from pathlib import Path

    return Path(str(resources.files("dradiag").joinpath("samples")))


def _sample_entry(name: str, data: Any, path: str) -> dict[str, Any]:
    from dradiag.errors import InputError

    if not isinstance(data, dict) or not isinstance(data.get("claim"), str):
        raise InputError(
            f"sample {name} must name the claim to diagnose (claim: NS/NAME)", path=path
        )
    nested = data.get("expected")
    expected: dict[str, Any] = nested if isinstance(nested, dict) else {}
    node = data.get("node")
    return {
        "name": name,
        "claim": data["claim"],
        "node": node if isinstance(node, str) else None,
        "description": str(data.get("description") or ""),
        "status": expected.get("status"),
        "phase": expected.get("phase"),
        "rule": expected.get("rule"),
    }


def list_samples(root: Path | None = None) -> list[dict[str, Any]]:
    """Every sample of ``index.yaml`` whose folder exists, sorted by name."""
    import yaml

    from dradiag.errors import InputError

    root = samples_root() if root is None else root
    path = root / INDEX_FILE
    if not path.is_file():
        return []
    try:
        data = yaml.safe_load(path.read_text("utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the sample index: {exc}", path=str(path)) from None
    entries = data.get("samples") if isinstance(data, dict) else None
    if not isinstance(entries, dict):
        raise InputError("the sample index must map sample names to entries", path=str(path))
    return [
        _sample_entry(str(name), entry, str(path))
        for name, entry in sorted(entries.items())
        if (root / str(name)).is_dir()
    ]


def load_sample(directory: Path) -> Snapshot:
    """The sample's Snapshot, read exactly as ``--from DIR`` reads it."""
    from dradiag.sources.manifests import load_snapshot

    return load_snapshot(str(directory), location=f"sample {directory.name}")


def sample_commands(sample: dict[str, Any], directory: str) -> list[str]:
    """The commands to try on one sample folder, as a user would type them."""
    import shlex

    where = shlex.quote(directory)
    commands = [
        f"dradiag claim {sample['claim']} --from {where}",
        f"dradiag scan --from {where}",
        f"dradiag inventory --from {where}",
    ]
    if sample["node"]:
        commands.append(
            f"dradiag simulate --node {sample['node']} --claim {sample['claim']} --from {where}"
        )
    return commands


def extract(samples: list[dict[str, Any]], target: Path) -> list[Path]:
    """Copy each sample folder to ``target/<name>/``; refuses to write over an existing one."""
    import shutil

    from dradiag.errors import UsageError

    existing = [target / s["name"] for s in samples if (target / s["name"]).exists()]
    if existing:
        raise UsageError(f"{existing[0]} exists; extract into an empty or new directory")
    written = []
    for sample in samples:
        destination = target / sample["name"]
        shutil.copytree(samples_root() / sample["name"], destination)
        written.append(destination)
    return written


def demo(
    name: Annotated[
        str | None, typer.Argument(metavar="[NAME]", help="One sample; all of them if omitted.")
    ] = None,
    list_only: ListOption = False,
    extract_to: ExtractOption = None,
    output: Output = OutputFormat.TEXT,
    no_color: NoColor = False,
) -> int:
    """Diagnose the sample clusters shipped with dradiag (no cluster needed).

    \b
    Examples:
      dradiag demo
      dradiag demo --list
      dradiag demo healthy-mig-claim --extract ./samples

    Runs `dradiag claim` on each embedded sample (a healthy MIG claim, a selector that
    matches nothing, exhausted MIG counters, a MIG creation failure at Prepare, an
    unresolvable CDI device) and shows each diagnosis with the command that gives it.
    This is a showcase, not a health check: it exits 0 when every sample gave the verdict
    it was built to show. --extract DIR copies the samples to DIR and prints the claim,
    scan, inventory and simulate commands to run on the copies.
    """
    import logging
    import sys
    from pathlib import Path

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
    if extract_to is not None:
        written = extract(samples, Path(extract_to))
        lines = []
        for sample, directory in zip(samples, written, strict=True):
            lines.append(f"# {sample['name']}: {sample['description']}")
            lines += [f"$ {c}" for c in sample_commands(sample, str(directory))]
            lines.append("")
        sys.stdout.write("\n".join(lines))
        return ExitCode.OK
    log = logging.getLogger("dradiag.cli.demo")
    color = use_color(no_color)
    docs = []
    texts = []
    unexpected = []
    errors: list[CollectionError] = []
    for sample in samples:
        directory = samples_root() / sample["name"]
        snapshot = load_sample(directory)
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
            claim_command = sample_commands(sample, str(directory))[0]
            header = f"━━ sample {sample['name']}: {sample['description']}\n"
            header += f"   $ {claim_command}\n\n"
            texts.append(header + render_diagnosis(doc, color=color))
    for problem in unexpected:
        log.warning("%s", problem)
    if output is OutputFormat.TEXT:
        more = [
            f"   $ {c}"
            for c in sample_commands(samples[0], str(samples_root() / samples[0]["name"]))[1:]
        ]
        texts.append(
            "━━ try the other commands on a sample, or copy them all with "
            "`dradiag demo --extract DIR`:\n" + "\n".join(more) + "\n"
        )
        emit({}, output, "\n".join(texts))
    else:
        emit(diagnoses_document(docs, collection_block(errors)), output, None)
    return ExitCode.RUNTIME if unexpected else ExitCode.OK


def register(app: typer.Typer) -> None:
    """Add the command to ``app``."""
    app.command("demo")(demo)
