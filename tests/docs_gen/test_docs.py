"""The docs are executed: generated blocks are fresh, every example command runs (or, for
the live cluster, parses) as documented, and every troubleshooting mapping is what
``dradiag explain`` says.

A page's ``<!-- run: ... -->`` blocks are checked by regenerating them (a stale block is
a diff); the hand-written ``$ dradiag ...`` lines outside those blocks are run on the
extracted samples when they read ``--from samples/...`` or need no cluster, with the
exit status their ``# exit N`` comment documents (0 without one), and otherwise parsed
against the CLI's own options.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import typer
import yaml

from dradiag.cli.app import app, split_global_flags
from dradiag.docs_gen import SVG_PATH, generate, pages, stale
from dradiag.docs_gen.blocks import FENCE, blocks, documented_commands, outside_blocks
from dradiag.docs_gen.messages import explain
from dradiag.docs_gen.runner import SAMPLES_DIR, SampleWorkspace, parse_line

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
COMMAND_PAGES = {
    "claim",
    "pod",
    "scan",
    "selector-check",
    "inventory",
    "simulate",
    "bundle",
    "node",
    "explain",
    "demo",
    "rbac",
    "completion",
}
OFFLINE = {"explain", "rules", "rbac", "completion", "version", "demo"}
"""Commands that read no cluster: their documented lines are run, not only parsed."""


@pytest.fixture(scope="module")
def workspace():
    with SampleWorkspace() as ws:
        yield ws


def _page_commands() -> list[tuple[str, str]]:
    out = []
    for page in pages():
        text = outside_blocks(page.read_text(encoding="utf-8"))
        out += [(page.relative_to(REPO).as_posix(), line) for line in documented_commands(text)]
    return out


PAGE_COMMANDS = _page_commands()


def test_the_generated_blocks_and_picture_are_fresh():
    import difflib

    expected = generate()
    assert SVG_PATH in expected
    old = stale(expected)
    diff = "".join(
        line
        for path in old[:1]
        for line in difflib.unified_diff(
            path.read_text(encoding="utf-8").splitlines(keepends=True) if path.exists() else [],
            expected[path].splitlines(keepends=True),
            str(path),
            "generated",
        )
    )
    assert old == [], f"run: python -m dradiag.docs_gen --write\n{diff[:4000]}"


def test_a_stale_block_is_found(tmp_path, workspace):
    from dradiag.docs_gen import render_page

    page = tmp_path / "page.md"
    text = "<!-- run: dradiag rbac -->\nold output\n<!-- /run -->\n"
    fresh = render_page(workspace, page, text)
    assert fresh != text and "kind: ClusterRole" in fresh
    assert render_page(workspace, page, fresh) == fresh  # regenerating changes nothing


def test_every_command_has_a_page_and_the_pages_exist():
    names = {p.stem for p in (DOCS / "commands").glob("*.md")}
    assert names >= COMMAND_PAGES
    for name in ("phases", "ci", "support-bundle", "rbac", "json", "troubleshooting", "rules"):
        assert (DOCS / f"{name}.md").is_file(), name


def test_the_pages_document_commands():
    assert len(PAGE_COMMANDS) >= 30
    run_blocks = [b for p in pages() for b in blocks(p.read_text()) if b.kind == "run"]
    assert len(run_blocks) >= 30


def _parse_against_the_cli(args: list[str]) -> None:
    """Resolve ``args`` to a command and parse its options and arguments, without running it."""
    args, _ = split_global_flags(args)
    command = typer.main.get_command(app)
    ctx = command.make_context("dradiag", list(args))
    while hasattr(ctx.command, "resolve_command"):
        # click keeps the words from the subcommand's name on apart from the group's args.
        protected = getattr(ctx, "_protected_args", None) or getattr(ctx, "protected_args", None)
        rest = [*(protected or []), *ctx.args]
        name, sub, rest = ctx.command.resolve_command(ctx, rest)
        ctx = sub.make_context(name, rest, parent=ctx)


@pytest.mark.parametrize(
    ("page", "line"), PAGE_COMMANDS, ids=[f"{p}: {c}" for p, c in PAGE_COMMANDS]
)
def test_documented_command_runs_or_parses(page, line, workspace):
    command = parse_line(line)
    args = list(command.args)
    if command.prog == "kubectl_complete-dra_diag":
        return  # the completion executable has no options of its own; run blocks show it
    name = args[0] if args else ""
    from_path = args[args.index("--from") + 1] if "--from" in args else None
    if (from_path and from_path.startswith(f"{SAMPLES_DIR}/")) or name in OFFLINE:
        if from_path:
            assert (workspace.path / from_path).exists(), f"{page}: no such sample: {from_path}"
        ran = workspace.run(command)
        assert ran.code == command.exit, f"{page}: {line}\n{ran.stderr}"
    else:
        _parse_against_the_cli(args)


def test_the_parser_check_catches_a_wrong_option():
    from typer._click.exceptions import UsageError

    with pytest.raises(UsageError):
        _parse_against_the_cli(["claim", "ml/x", "--no-such-flag"])
    with pytest.raises(UsageError):
        _parse_against_the_cli(["simulate", "--claim", "ml/x"])  # --node is required
    _parse_against_the_cli(["scan", "-A", "-o", "json"])


def test_a_documented_exit_status_is_checked(workspace):
    broken = parse_line("dradiag scan --from samples/cdi-device-unresolvable  # exit 1")
    assert broken.exit == 1 and workspace.run(broken).code == 1
    assert parse_line("dradiag rbac | kubectl apply -f -").args == ("rbac",)


def _explain_blocks() -> list[tuple[str, str, str]]:
    text = (DOCS / "troubleshooting.md").read_text()
    return [(b.arg, b.body, "troubleshooting.md") for b in blocks(text) if b.kind == "explain"]


EXPLAIN_BLOCKS = _explain_blocks()


@pytest.mark.parametrize(
    ("message", "body", "_page"), EXPLAIN_BLOCKS, ids=[m[:60] for m, _b, _p in EXPLAIN_BLOCKS]
)
def test_troubleshooting_mapping_is_what_explain_says(message, body, _page, workspace):
    matches = explain(workspace, message)
    assert matches, message
    documented = re.findall(r"\*\*\[(DRA-[A-Z0-9-]+)\]", body)
    assert documented == [m["rule"] for m in matches]
    for m in matches:
        assert f"phase `{m['phase']}`" in body


def test_the_troubleshooting_page_covers_the_messages_users_paste():
    messages = " ".join(m for m, _b, _p in EXPLAIN_BLOCKS)
    for text in (
        "cannot allocate all claims",
        "Failed to prepare dynamic resources",
        "unresolvable CDI devices",
        "not allocated",
        "NVML",
        "is not registered",
    ):
        assert text in messages, text
    assert len(EXPLAIN_BLOCKS) >= 10


def test_every_row_of_the_message_index_is_explained_by_its_rule(workspace):
    text = (DOCS / "troubleshooting.md").read_text()
    index = next(b.body for b in blocks(text) if b.arg == "message-index")
    rows = re.findall(r"^\| `(.+)` \| \[(DRA-[A-Z0-9-]+)\]", index, re.MULTILINE)
    assert len(rows) >= 40
    for message, rule in rows:
        found = {m["rule"] for m in explain(workspace, message.replace("\\|", "|"))}
        assert rule in found, (message, found)


def test_the_ci_workflow_uploads_sarif_and_its_commands_parse():
    text = (DOCS / "ci.md").read_text()
    workflows = [
        yaml.safe_load(f.group(2)) for f in FENCE.finditer(text) if f.group(0).startswith("```yaml")
    ]
    assert workflows, "ci.md shows no workflow"
    steps = [s for job in workflows[0]["jobs"].values() for s in job["steps"]]
    assert any(s.get("uses", "").startswith("github/codeql-action/upload-sarif@") for s in steps)
    runs = [s["run"] for s in steps if str(s.get("run", "")).startswith("dradiag ")]
    assert any("selector-check" in r and "-o sarif" in r for r in runs)
    assert any("scan" in r and "-o json" in r and "--exit-zero" in r for r in runs)
    for run_line in runs:
        _parse_against_the_cli(list(parse_line(run_line).args))


def test_the_readme_shows_the_generated_picture_and_links_the_docs():
    readme = (REPO / "README.md").read_text()
    assert "docs/img/claim.svg" in readme
    for link in re.findall(r"\]\((docs/[^)#]+)", readme):
        assert (REPO / link).exists(), link
    assert "python -m pip install '.[test]' && python -m pytest -n auto -q" in readme


@pytest.mark.parametrize("page", [p for p in pages()], ids=lambda p: p.name)
def test_relative_links_resolve(page):
    text = page.read_text()
    for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", text):
        assert (page.parent / target).exists(), f"{page.name}: {target}"
