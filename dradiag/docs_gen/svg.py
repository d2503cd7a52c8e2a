"""The README's picture: one ``dradiag claim`` on a sample, drawn by rich and saved as SVG.

Generated, never drawn by hand: the text view is rendered in colour as on a terminal
into a recording Console, and rich writes the SVG. The same sample and width give the
same file, so a stale picture fails the docs test like a stale page.
"""

from __future__ import annotations

SVG_SAMPLE = "mig-create-failed-at-prepare"
"""A broken claim whose picture shows every phase, the verdict and the next steps."""
SVG_WIDTH = 110


def claim_svg() -> str:
    """The SVG of ``dradiag claim`` on :data:`SVG_SAMPLE`, as a terminal shows it."""
    from rich.console import Console
    from rich.text import Text

    from dradiag.cli.commands.demo import list_samples, load_sample, samples_root
    from dradiag.diagnosis.build import diagnose_claim
    from dradiag.render.document import collection_of, diagnosis_document
    from dradiag.render.text import render_diagnosis

    sample = next(s for s in list_samples() if s["name"] == SVG_SAMPLE)
    snapshot = load_sample(samples_root() / SVG_SAMPLE)
    ns, _, name = sample["claim"].partition("/")
    doc = diagnosis_document(
        diagnose_claim(snapshot, ns, name), snapshot.source, collection_of(snapshot)
    )
    doc["source"] = dict(doc.get("source") or {}, location=f"samples/{SVG_SAMPLE}")
    import io

    console = Console(
        record=True,
        width=SVG_WIDTH,
        force_terminal=True,
        color_system="truecolor",
        file=io.StringIO(),  # only the recording is wanted
    )
    command = f"$ dradiag claim {sample['claim']} --from samples/{SVG_SAMPLE}"
    console.print(Text(command, style="bold"))
    console.print(Text.from_ansi(render_diagnosis(doc, color=True, width=SVG_WIDTH)))
    return console.export_svg(title="dradiag claim")
