"""``claim``/``pod`` targets written as kubectl users write them, and "did you mean"."""

from __future__ import annotations

from pathlib import Path

import pytest

from dradiag.cli.app import run
from dradiag.cli.exit_codes import ExitCode
from dradiag.cli.targets import did_you_mean, parse_target
from dradiag.errors import UsageError

SAMPLE = str(Path(__file__).resolve().parents[2] / "dradiag" / "samples" / "healthy-mig-claim")


@pytest.mark.parametrize(
    ("value", "command", "namespace", "expected"),
    [
        ("ml/x", "claim", None, ("ml", "x")),
        ("x", "claim", None, ("ctx-ns", "x")),
        ("x", "claim", "ml", ("ml", "x")),
        ("resourceclaim/x", "claim", "ml", ("ml", "x")),
        ("resourceclaims/x", "claim", None, ("ctx-ns", "x")),
        ("ResourceClaim.resource.k8s.io/x", "claim", "ml", ("ml", "x")),
        ("pod/p", "pod", "ml", ("ml", "p")),
        ("pods/p", "pod", None, ("ctx-ns", "p")),
        ("po/p", "pod", "ml", ("ml", "p")),
        ("ml/p", "pod", "ml", ("ml", "p")),
    ],
)
def test_parse_target(value, command, namespace, expected):
    assert parse_target(value, command, namespace=namespace, default_namespace="ctx-ns") == (
        expected
    )


@pytest.mark.parametrize(
    ("value", "command", "namespace", "says"),
    [
        ("pod/p", "claim", None, "names a Pod: use 'dradiag pod pod/p'"),
        ("resourceclaim/x", "pod", None, "names a ResourceClaim: use 'dradiag claim"),
        ("rc/x", "claim", None, "ReplicationController"),
        ("resourceclaimtemplate/t", "claim", None, "is not a claim"),
        ("ml/x", "claim", "other", "-n says 'other'"),
        ("a/b/c", "claim", None, "expected NAMESPACE/NAME, TYPE/NAME or NAME"),
        ("/x", "pod", None, "expected"),
        ("", "pod", None, "expected"),
    ],
)
def test_parse_target_refuses_what_names_no_such_object(value, command, namespace, says):
    with pytest.raises(UsageError, match=None) as info:
        parse_target(value, command, namespace=namespace, default_namespace="default")
    assert says in str(info.value)


def test_did_you_mean_prefers_the_namespace_then_the_same_name_elsewhere():
    existing = [("ml", "train-gpu"), ("ml", "infer"), ("prod", "train-mig"), ("dev", "trian-mig")]
    assert did_you_mean("ml", "train-gpus", existing) == ["ml/train-gpu"]
    assert did_you_mean("default", "train-mig", existing) == ["prod/train-mig"]
    assert did_you_mean("default", "trainmig", existing)[:2] == ["prod/train-mig", "dev/trian-mig"]
    assert did_you_mean("ml", "zzz", existing) == []


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["claim", "ml/notebook-mg"], "; did you mean ml/notebook-mig?"),
        (["claim", "notebook-mig"], "ResourceClaim default/notebook-mig not found"),
        (["pod", "-n", "ml", "notebok-0"], "; did you mean ml/notebook-0?"),
    ],
)
def test_offline_not_found_names_the_closest(argv, hint, capsys):
    assert run([*argv, "--from", SAMPLE]) == ExitCode.USAGE
    err = capsys.readouterr().err.splitlines()[-1]
    assert hint in err
    assert err.endswith("?")


@pytest.mark.parametrize(
    "argv",
    [
        ["claim", "-n", "ml", "resourceclaim/notebook-mig"],
        ["claim", "resourceclaims/notebook-mig", "-n", "ml"],
        ["pod", "-n", "ml", "pods/notebook-0"],
        ["pod", "ml/notebook-0"],
    ],
)
def test_type_slash_name_diagnoses_the_same_object(argv, capsys):
    assert run([*argv, "--from", SAMPLE, "-o", "json"]) == ExitCode.OK
    assert '"namespace": "ml"' in capsys.readouterr().out


def test_live_not_found_reads_names_and_suggests(kube_api, kubeconfig, capsys):
    code = run(["claim", "ml/train-gpus", "--kubeconfig", str(kubeconfig)])
    assert code == ExitCode.USAGE
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.endswith("; did you mean ml/train-gpu?"), err
    assert kube_api.methods() == {"GET"}
    listed = kube_api.requests_to(r"/resourceclaims$")
    assert listed and all(r.query.get("limit") for r in listed)


def test_live_pod_in_the_wrong_namespace_is_found_elsewhere(kube_api, kubeconfig, capsys):
    code = run(["pod", "default/infer-0", "--kubeconfig", str(kubeconfig)])
    assert code == ExitCode.USAGE
    assert "did you mean ml/infer-0?" in capsys.readouterr().err
