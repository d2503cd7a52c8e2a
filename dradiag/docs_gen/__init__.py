"""The docs generator: fills the marked blocks of README.md and docs/*.md, and draws the SVG.

``python -m dradiag.docs_gen --write`` runs every ``<!-- run: ... -->`` command on the
extracted samples, answers every ``<!-- explain: ... -->`` message with the rulebook, fills
the generated tables, and writes ``docs/img/claim.svg``; ``--check`` exits 1 when any of
them is stale (what ``python -m dradiag.rulebook.docs`` does for docs/rules.md, which this
generator leaves to it); ``--svg`` writes the picture only. After a change to a command's
output, options or the rules, run ``--write`` and commit the result.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

from dradiag.docs_gen.blocks import Block, fill
from dradiag.docs_gen.runner import SampleWorkspace, parse_line

REPO = Path(__file__).resolve().parents[2]
"""The checkout the generator writes into (like ``dradiag.rulebook.docs``)."""
DOCS = REPO / "docs"
SVG_PATH = DOCS / "img" / "claim.svg"
SKIPPED_PAGES = {"rules.md"}
"""Pages another generator owns."""


def pages() -> Iterator[Path]:
    """README.md and every docs page with generated blocks in it."""
    yield REPO / "README.md"
    for path in sorted(DOCS.rglob("*.md")):
        if path.name not in SKIPPED_PAGES:
            yield path


def _relative(target: Path, page: Path) -> str:
    """The relative link from ``page`` to ``target``."""
    import os

    return Path(os.path.relpath(target, page.parent)).as_posix()


def _rules_page(page: Path) -> str:
    """The relative link from ``page`` to docs/rules.md."""
    return _relative(DOCS / "rules.md", page)


def run_block(workspace: SampleWorkspace, command_text: str) -> str:
    """A ``run`` block: the command as typed, its output, its exit status if not 0."""
    command = parse_line(command_text)
    ran = workspace.run(command)
    status = f"  # exit {ran.code}" if ran.code else ""
    out = ran.stdout + ran.stderr
    body = f"$ {command.text}{status}\n{out}"
    if not body.endswith("\n"):
        body += "\n"
    return f"```console\n{body}```\n"


def render_page(workspace: SampleWorkspace, page: Path, text: str) -> str:
    """``text`` of ``page`` with every block regenerated."""
    from dradiag.docs_gen.messages import explain_block, message_index
    from dradiag.docs_gen.tables import phase_rules, schema_index

    rules_page = _rules_page(page)

    def make(block: Block) -> str:
        if block.kind == "run":
            return run_block(workspace, block.arg)
        if block.kind == "explain":
            return explain_block(workspace, block.arg, rules_page=rules_page)
        if block.arg == "message-index":
            return message_index(workspace, rules_page=rules_page)
        if block.arg == "schema-index":
            return schema_index(schema_dir=_relative(DOCS / "schema", page))
        if block.arg.startswith("phase-rules:"):
            return phase_rules(block.arg.partition(":")[2], rules_page=rules_page)
        raise ValueError(f"{page}: unknown generated block {block.arg!r}")

    return fill(text, make)


def generate() -> dict[Path, str]:
    """Every generated file's expected content, by path (pages whose text would change and
    the SVG; pages without blocks are left out)."""
    from dradiag.docs_gen.svg import claim_svg

    out: dict[Path, str] = {}
    with SampleWorkspace() as workspace:
        for page in pages():
            text = page.read_text(encoding="utf-8")
            if "<!-- " in text:
                out[page] = render_page(workspace, page, text)
    out[SVG_PATH] = claim_svg()
    return out


def stale(expected: dict[Path, str]) -> list[Path]:
    """The paths whose content on disk differs from ``expected``."""
    return [
        p for p, text in expected.items() if not p.exists() or p.read_text(encoding="utf-8") != text
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m dradiag.docs_gen [--write | --check | --svg]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if "--svg" in args:
        from dradiag.docs_gen.svg import claim_svg

        SVG_PATH.parent.mkdir(parents=True, exist_ok=True)
        SVG_PATH.write_text(claim_svg(), encoding="utf-8")
        return 0
    expected = generate()
    if "--write" in args:
        for path in stale(expected):
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(expected[path], encoding="utf-8")
            sys.stderr.write(f"wrote {path.relative_to(REPO)}\n")
        return 0
    old = stale(expected)
    for path in old:
        sys.stderr.write(
            f"{path.relative_to(REPO)} is stale: run python -m dradiag.docs_gen --write\n"
        )
    return 1 if old else 0
