"""Redaction patterns, one by one: what is replaced, what evidence survives, what is counted."""

from __future__ import annotations

import pytest

from dradiag.sources.redact import REDACTED, Redactor

CASES = {
    "BearerToken": (
        "GET /apis Authorization: Bearer abcDEF0123456789xyz",
        "GET /apis Authorization: Bearer ***REDACTED***",
    ),
    "TokenAssignment": ("flag --token=abcDEF0123456789 set", "flag --token=***REDACTED*** set"),
    "JWT": (
        "id eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiJrOHMifQ.c2lnbmF0dXJl end",
        "id ***REDACTED*** end",
    ),
    "URLCredentials": (
        "pull https://robot:s3cr3tpass@registry.example.com/v2/",
        "pull https://robot:***REDACTED***@registry.example.com/v2/",
    ),
    "AWSKey": ("aws key AKIAIOSFODNN7EXAMPLE used", "aws key ***REDACTED*** used"),
    "GitHubToken": ("gh ghp_abcdefghijklmnopqrstuvwxyz0123456789 x", "gh ***REDACTED*** x"),
    "Slack": ("hook xoxb-123456789012-abcdefghij done", "hook ***REDACTED*** done"),
    "AzureStorageKey": ("AccountKey=" + "A" * 86 + "==;", "***REDACTED***;"),
    "Keyword": ('db password="hunter2hunter2" ok', 'db password="***REDACTED***" ok'),
}


@pytest.mark.parametrize("rule", sorted(CASES))
def test_pattern(rule):
    text, expected = CASES[rule]
    redactor = Redactor()
    assert redactor.text(text, "where") == expected
    assert redactor.report()["byPlace"] == {"where": {rule: 1}}


def test_private_key_block_whole():
    text = (
        "before\n-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAA\nAAAA\n"
        "-----END OPENSSH PRIVATE KEY-----\nafter\n"
    )
    redactor = Redactor()
    assert redactor.text(text, "k") == f"before\n{REDACTED}\nafter\n"
    assert redactor.report()["byRule"] == {"PrivateKey": 1}


@pytest.mark.parametrize(
    "line",
    [
        "I0722 02:41:14.000000 1 driver.go:10] Prepared GPU-1234abcd-0001-4000-8000-000000000001",
        'E0722 prepare failed: key "gpu.nvidia.com/uuid": no such key',
        "token refreshed successfully for node gpu-node-7",
        "pod ml/train-0 uid 6f1c2d3e-0000-4000-8000-00000000a0a1 on 10.0.0.12",
        'I0722 main.go:245] Feature gates: map[string]bool{"MPSSupport":false}',
    ],
)
def test_evidence_survives(line):
    redactor = Redactor()
    assert redactor.text(line, "x") == line
    assert redactor.report()["total"] == 0


def test_env_by_name_secret_ref_and_commands():
    pod = {
        "metadata": {"name": "p", "annotations": {"note": "plain", "a": "Bearer abcdefgh12345678"}},
        "spec": {
            "initContainers": [{"name": "i", "env": [{"name": "API_KEY", "value": "k-1"}]}],
            "containers": [
                {
                    "name": "c",
                    "command": ["run", "--password=pa55word123"],
                    "env": [
                        {"name": "AWS_SECRET_ACCESS_KEY", "value": "whatever"},
                        {"name": "GITHUB_TOKEN", "value": "t"},
                        {"name": "X", "value": "v", "valueFrom": {"secretKeyRef": {"name": "s"}}},
                        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"},
                        {"name": "MONKEY", "value": "banana"},
                        {"name": "REF", "valueFrom": {"secretKeyRef": {"name": "s", "key": "k"}}},
                    ],
                }
            ],
        },
    }
    redactor = Redactor()
    redactor.pod(pod, "Pod ns/p")
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env == {
        "AWS_SECRET_ACCESS_KEY": REDACTED,
        "GITHUB_TOKEN": REDACTED,
        "X": REDACTED,
        "NVIDIA_VISIBLE_DEVICES": "void",
        "MONKEY": "banana",
        "REF": None,
    }
    assert pod["spec"]["initContainers"][0]["env"][0]["value"] == REDACTED
    assert pod["spec"]["containers"][0]["command"] == ["run", f"--password={REDACTED}"]
    assert pod["metadata"]["annotations"] == {"note": "plain", "a": f"Bearer {REDACTED}"}
    report = redactor.report()
    assert report["byPlace"] == {
        "Pod ns/p annotations": {"BearerToken": 1},
        "Pod ns/p container c": {"CredentialEnvName": 2, "Keyword": 1, "SecretRefValue": 1},
        "Pod ns/p container i": {"CredentialEnvName": 1},
    }
    assert report["total"] == 6
    assert "pa55word123" not in str(report) and "whatever" not in str(report)


def test_disabled_redactor_changes_nothing():
    redactor = Redactor(enabled=False)
    text = "Authorization: Bearer abcdefgh12345678"
    assert redactor.text(text, "x") == text
    assert redactor.report() == {
        "schemaVersion": "dradiag.redactions/v1",
        "enabled": False,
        "library": None,
        "replacement": REDACTED,
        "total": 0,
        "byRule": {},
        "byPlace": {},
    }


def test_large_log_is_fast():
    import time

    line = "I1201 10:00:00.123456 1 driver.go:123] Prepared claim ml/train-1 device gpu-1 uuid GPU-1234abcd-0001\n"
    text = line * 100_000
    redactor = Redactor()
    started = time.perf_counter()
    assert redactor.text(text, "x") == text
    assert time.perf_counter() - started < 2.0


def test_pod_status_messages():
    pod = {
        "metadata": {"name": "p"},
        "spec": {"containers": [{"name": "c"}]},
        "status": {
            "message": "plain",
            "containerStatuses": [
                {
                    "name": "c",
                    "state": {
                        "waiting": {
                            "reason": "ErrImagePull",
                            "message": "pull https://u:pw0rdpw0rd@registry.example.com/x failed",
                        }
                    },
                }
            ],
        },
    }
    redactor = Redactor()
    redactor.pod(pod, "Pod ns/p")
    waiting = pod["status"]["containerStatuses"][0]["state"]["waiting"]
    assert waiting["message"] == f"pull https://u:{REDACTED}@registry.example.com/x failed"
    assert waiting["reason"] == "ErrImagePull"
    assert redactor.report()["byPlace"] == {"Pod ns/p status": {"URLCredentials": 1}}
