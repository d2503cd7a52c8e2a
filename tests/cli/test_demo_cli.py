"""``dradiag demo``: runs ``claim`` on the packaged samples; exit 0 when each gave its verdict."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import yaml

from dradiag.cli.app import run
from dradiag.cli.commands import demo as demo_module

REPO = Path(__file__).resolve().parents[2]


def _builders():
    path = REPO / "tests" / "diagnosis" / "k8s_objects.py"
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects_demo", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


k8s = _builders()


def write_index(root: Path, entries: dict) -> None:
    (root / demo_module.INDEX_FILE).write_text(yaml.safe_dump({"samples": entries}))


@pytest.fixture
def samples(tmp_path, monkeypatch):
    """Two samples: a healthy claim and one whose container does not list it."""
    root = tmp_path / "samples"
    k8s.healthy_input(root / "healthy-gpu")
    objs = k8s.healthy_objects()
    objs["pods"][0] = k8s.pod(container_lists_claim=False)
    k8s.write_input(
        root / "unwired",
        objects={
            "resourceslices": objs["slices"],
            "deviceclasses": objs["classes"],
            "resourceclaims": objs["claims"],
            "pods": objs["pods"],
        },
    )
    write_index(
        root,
        {
            "healthy-gpu": {
                "claim": "ml/train-gpu",
                "description": "a running full-GPU claim",
                "expected": {"status": "ok"},
            },
            "unwired": {
                "claim": "ml/train-gpu",
                "description": "the container forgot the claim",
                "expected": {
                    "status": "broken",
                    "phase": "workload",
                    "rule": "DRA-WORK-CLAIM-NOT-REFERENCED",
                },
            },
        },
    )
    monkeypatch.setattr(demo_module, "samples_root", lambda: root)
    return root


def test_demo_list(samples, capsys):
    assert run(["demo", "--list"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == [
        "healthy-gpu  a running full-GPU claim",
        "unwired      the container forgot the claim",
    ]


def test_demo_runs_every_sample_and_exits_0_even_when_one_is_broken(samples, capsys):
    assert run(["demo"]) == 0
    captured = capsys.readouterr()
    assert "sample healthy-gpu" in captured.out and "sample unwired" in captured.out
    assert "BROKEN  ResourceClaim ml/train-gpu is broken at workload" in captured.out
    assert "skipped" not in captured.err  # the index is not inside a sample folder


def test_demo_one_sample_json(samples, capsys):
    assert run(["demo", "unwired", "-o", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [i["verdict"]["rule"] for i in doc["items"]] == ["DRA-WORK-CLAIM-NOT-REFERENCED"]


def test_demo_unexpected_verdict_is_reported(samples, capsys):
    write_index(
        samples,
        {
            "healthy-gpu": {
                "claim": "ml/train-gpu",
                "description": "x",
                "expected": {"status": "broken"},
            }
        },
    )
    assert run(["demo", "healthy-gpu"]) == 3
    assert "expected status 'broken', got 'ok'" in capsys.readouterr().err


def test_demo_unknown_sample(samples, capsys):
    assert run(["demo", "nope"]) == 2
    assert "no sample named 'nope'" in capsys.readouterr().err


def test_shipped_samples_give_their_verdicts(capsys):
    shipped = demo_module.list_samples()
    assert shipped, "dradiag/samples ships no sample"
    assert run(["demo", "-o", "json"]) == 0, capsys.readouterr().err
    doc = json.loads(capsys.readouterr().out)
    assert len(doc["items"]) == len(shipped)


EXPECTED_EXIT = {"ok": 0, "broken": 1, "inconclusive": 4}


def _printed_commands(text: str) -> list[list[str]]:
    """The ``$ dradiag ...`` lines of the demo's output, split as a shell would."""
    import shlex

    lines = [line.strip() for line in text.splitlines()]
    return [shlex.split(line[2:]) for line in lines if line.startswith("$ dradiag ")]


def _run_printed(commands: list[list[str]], capsys) -> dict[str, int]:
    codes = {}
    for argv in commands:
        assert not any("<" in a for a in argv), argv  # runnable, never a placeholder
        assert argv[0] == "dradiag"
        code = run(argv[1:])
        captured = capsys.readouterr()
        assert "skipped" not in captured.err, (argv, captured.err)
        assert code in (0, 1), (argv, code, captured.err)
        codes[" ".join(argv[1:3])] = code
        if argv[1] == "claim":
            assert "ResourceClaim " + argv[2] in captured.out
    return codes


def test_every_command_the_demo_prints_runs_on_the_shipped_samples(capsys):
    assert run(["demo", "--no-color"]) == 0
    out = capsys.readouterr().out
    commands = _printed_commands(out)
    shipped = demo_module.list_samples()
    claims = [c for c in commands if c[1] == "claim"]
    assert len(claims) == len(shipped)
    assert {c[1] for c in commands} == {"claim", "scan", "inventory", "simulate"}
    codes = _run_printed(commands, capsys)
    for sample in shipped:
        assert codes[f"claim {sample['claim']}"] == EXPECTED_EXIT[sample["status"]]


def test_extract_writes_the_samples_and_prints_commands_that_run_on_them(tmp_path, capsys):
    target = tmp_path / "out"
    assert run(["demo", "--extract", str(target)]) == 0
    out = capsys.readouterr().out
    shipped = demo_module.list_samples()
    assert sorted(p.name for p in target.iterdir()) == [s["name"] for s in shipped]
    assert not list(target.rglob(demo_module.INDEX_FILE))
    commands = _printed_commands(out)
    assert len(commands) == 4 * len(shipped)
    assert all(c[-2:] == ["--from", str(target / c[-1].rsplit("/", 1)[-1])] for c in commands)
    _run_printed(commands, capsys)


def test_extract_one_sample_and_refuse_to_overwrite(tmp_path, capsys):
    assert run(["demo", "healthy-mig-claim", "--extract", str(tmp_path)]) == 0
    assert [p.name for p in tmp_path.iterdir()] == ["healthy-mig-claim"]
    capsys.readouterr()
    assert run(["demo", "healthy-mig-claim", "--extract", str(tmp_path)]) == 2
    assert "exists" in capsys.readouterr().err


def test_a_sample_folder_reads_without_warnings(caplog):
    import logging

    for sample in demo_module.list_samples():
        with caplog.at_level(logging.WARNING, logger="dradiag"):
            demo_module.load_sample(demo_module.samples_root() / sample["name"])
    assert [r.getMessage() for r in caplog.records] == []
