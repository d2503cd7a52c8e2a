"""``dradiag rules list|show``: output forms, filters, exit codes, and a cheap start-up."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import yaml

from dradiag.cli.app import run
from dradiag.rulebook import load_rulebook


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    capsys.readouterr()
    code = run(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_has_every_rule_in_catalogue_order(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "rules", "list", "-o", "json")
    assert code == 0 and err == ""
    doc = json.loads(out)
    book = load_rulebook()
    assert doc["count"] == len(book) == len(doc["rules"])
    assert [r["id"] for r in doc["rules"]] == list(book.ids)
    first = doc["rules"][0]
    assert set(first) == {"id", "phase", "severity", "title", "evidence", "aliases"}


@pytest.mark.parametrize("phase", ["prepare", "PREP", "Prepare"])
def test_list_filters_by_phase_name_or_code(capsys: pytest.CaptureFixture[str], phase: str) -> None:
    code, out, _ = _run(capsys, "rules", "list", "--phase", phase, "-o", "yaml")
    assert code == 0
    rows = yaml.safe_load(out)["rules"]
    assert rows and {r["phase"] for r in rows} == {"prepare"}
    assert "DRA-PREP-MIG-CREATE-FAILED" in {r["id"] for r in rows}


def test_list_text_is_a_table_without_colour_codes(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "rules", "list", "--phase", "injection", "--no-color")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["ID", "PHASE", "SEVERITY", "EVIDENCE"]
    assert any(line.startswith("DRA-INJ-CDI-UNRESOLVABLE ") for line in lines)
    assert "\x1b[" not in out


def test_list_unknown_phase_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "rules", "list", "--phase", "scheduling")
    assert code == 2 and out == ""
    assert "unknown phase 'scheduling'" in err and "allocation" in err
    assert len(err.strip().splitlines()) == 1


def test_show_text_has_the_docs_sections(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "rules", "show", "DRA-PREP-MIG-CREATE-FAILED")
    assert code == 0
    assert out.startswith("DRA-PREP-MIG-CREATE-FAILED: ")
    for heading in ("## What it detects", "## Why it breaks the claim", "## Next observations"):
        assert heading in out
    assert "Insufficient Resources" in out


def test_show_json_round_trips_the_rule(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = _run(capsys, "rules", "show", "DRA-PUB-FIELDS-DROPPED", "-o", "json")
    assert code == 0
    rule = json.loads(out)["rule"]
    assert rule["id"] == "DRA-PUB-FIELDS-DROPPED" and rule["phase"] == "publication"
    assert rule["match"]["log"]["pattern"][0].startswith("pool ")
    assert rule["source"].startswith(str(load_rulebook().location))


def test_show_resolves_an_alias_and_says_so(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "rules", "show", "dra-prep-timeout")
    assert code == 0
    assert out.startswith("DRA-PREP-GRPC-DEADLINE: ")
    assert "DRA-PREP-TIMEOUT is now DRA-PREP-GRPC-DEADLINE" in err


def test_show_unknown_id_exits_2_naming_the_closest(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = _run(capsys, "rules", "show", "DRA-PREP-MIG-CREATE-FAIL")
    assert code == 2 and out == ""
    assert "unknown rule id 'DRA-PREP-MIG-CREATE-FAIL'" in err
    assert "DRA-PREP-MIG-CREATE-FAILED" in err


def test_sarif_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "rules", "list", "-o", "sarif")
    assert code == 2 and "Invalid value for '-o' / '--output': 'sarif' is not one of" in err


def test_rules_list_imports_neither_kubernetes_nor_a_cel_engine() -> None:
    probe = (
        "import contextlib, io, json, sys\n"
        "from dradiag.cli.app import run\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    code = run(['rules', 'list'])\n"
        "print(json.dumps({'code': code, 'modules': sorted(sys.modules)}))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["code"] == 0
    loaded = {m.split(".")[0] for m in result["modules"]}
    assert not loaded & {"kubernetes", "celpy", "cel_expr_python"}
    assert "dradiag.analyses.cel" not in result["modules"]


def test_show_a_known_issue_cites_versions_fix_and_upstream(
    capsys: pytest.CaptureFixture[str],
) -> None:
    code, out, _ = _run(capsys, "rules", "show", "DRA-PREP-KI-SCHED-DOUBLE-ALLOCATION")
    assert code == 0
    assert "evidence:  version, event" in out
    assert "- known_issue.affected: >=1.34.0 <1.34.4" in out
    assert "- known_issue.fixed_in: 1.35.1" in out
    assert "- known_issue.upstream: https://github.com/kubernetes/kubernetes/pull/136269" in out
    code, out, _ = _run(capsys, "rules", "show", "DRA-PREP-KI-NVIDIA-MPS-OPENSHIFT", "-o", "json")
    match = json.loads(out)["rule"]["match"]
    assert match["known_issue"]["affected"] == [">=25.8.0 <0.4.1"]
    assert [
        match[k]["kind"] for k in ("symptom object", "symptom object#2", "symptom object#3")
    ] == [
        "ResourceClaim",
        "Node",
        "Pod",
    ]


@pytest.mark.parametrize("width", [80, 100])
def test_list_on_a_narrow_terminal_folds_titles_as_blocks(width, capsys):
    import re

    from dradiag.render.console import forced_terminal

    with forced_terminal(width):
        assert run(["rules", "list"]) == 0
    lines = re.sub(r"\x1b\[[0-9;]*m", "", capsys.readouterr().out).splitlines()
    assert all(len(line) <= width for line in lines)
    header = lines[0]
    title_at = header.index("TITLE")
    assert width - title_at >= 24  # room for a few words a line
    book = load_rulebook()
    ids = [line.split()[0] for line in lines[2:] if line[:1].strip()]
    assert [i for i in ids if i.startswith("DRA-")] == list(book.ids)  # every id whole
    blocks: list[list[str]] = []
    for line in lines[2:]:
        if line.startswith("("):  # the line saying which columns gave way
            break
        if line[:title_at].strip():
            blocks.append([])
        blocks[-1].append(line[title_at:])
    assert any(len(b) > 1 for b in blocks)  # titles do fold here
    column = width - title_at
    for block in blocks:  # as a block: a line holds one word only when two would not fit
        for part, after in zip(block, block[1:], strict=False):
            if len(part.split()) == 1:
                assert len(part.strip()) + 1 + len(after.split()[0]) > column, block
