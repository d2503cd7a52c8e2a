"""StepMemo: a scan's memo of concrete next steps answers exactly what concrete_step does.

The memo keys a step by the values of only the context attributes it read, so a wrong
record of what was read would hand one claim's step to another: these tests run every
shipped rule's steps through one memo over contexts that differ one attribute at a time.
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from dradiag.diagnosis import next_steps
from dradiag.diagnosis.next_context import NextContext
from dradiag.diagnosis.next_steps import StepMemo, concrete_step
from dradiag.rulebook import load_rulebook

BASE = NextContext(
    namespace="ml",
    claim_name="trainer-gpu",
    claim_uid="aba842ca-8ecb-53a4-bf58-f5c36ef7d605",
    node="gpu-node-8",
    pod_namespace="ml",
    pod_name="trainer-0",
    plugin_namespace="nvidia-dra-driver-gpu",
    plugin_pod="nvidia-dra-driver-gpu-kubelet-plugin-x7k2q",
    helm_release="nvidia-dra-driver-gpu",
    device_class="gpu.nvidia.com",
    pci_bus_id="0000:3b:00.0",
    offline_input="bundle.tar.gz",
    own_commands=frozenset({"claim ml/trainer-gpu"}),
)

VARIANTS = [
    BASE,
    replace(BASE, claim_name="other-gpu", claim_uid="0f0f0f0f-0000-4000-8000-000000000000"),
    replace(BASE, namespace="team-7", pod_namespace="team-7"),
    replace(BASE, pod_name="other-0"),
    replace(BASE, node=""),
    replace(BASE, node="", allocated=False),
    replace(BASE, offline_input=""),
    replace(BASE, plugin_pod="", plugin_namespace=""),
    replace(BASE, own_commands=frozenset({"scan"})),
    replace(BASE, node_state_saved=True),
    replace(BASE, cdi_device_ids=("k8s.gpu.nvidia.com/device=gpu-0",)),
]

EXTRA_STEPS = [
    "kubectl describe pod trainer-0",
    "kubectl get resourceclaim trainer-gpu -o yaml",
    "kubectl get resourceclaims -A -o wide  (who holds the devices)",
    "kubectl get pod ml/trainer-0 -o wide",
    "kubectl  get   pod trainer-0",
    "dradiag claim ml/trainer-gpu",
    "dradiag node",
    "dradiag selector-check <claim>",
    "dradiag simulate",
]


def _steps() -> list[str]:
    steps = [n for rule in load_rulebook().rules for n in rule.next]
    return list(dict.fromkeys(steps + EXTRA_STEPS))


def test_the_memo_answers_what_concrete_step_answers_for_every_context() -> None:
    memo = StepMemo()
    steps = _steps()
    assert len(steps) > 50
    # Twice over: the second pass is answered from the memo.
    for _round in range(2):
        for ctx in VARIANTS:
            for step in steps:
                assert memo.step(step, ctx) == concrete_step(step, ctx), (step, ctx)


@pytest.mark.parametrize(
    ("step", "other"),
    [
        ("kubectl describe pod trainer-0", replace(BASE, pod_namespace="team-7")),
        ("kubectl get resourceclaim trainer-gpu -o yaml", replace(BASE, namespace="team-7")),
    ],
)
def test_a_line_naming_the_claim_or_pod_is_not_shared_across_namespaces(
    step: str, other: NextContext
) -> None:
    memo = StepMemo()
    first, second = memo.step(step, BASE), memo.step(step, other)
    assert first is not None and "-n ml" in first
    assert second is not None and "-n team-7" in second


def test_a_step_that_names_no_claim_is_worked_out_once_for_many_claims(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[str] = []

    def counted(step: str, ctx: NextContext) -> str | None:
        calls.append(step)
        return concrete_step(step, ctx)

    monkeypatch.setattr(next_steps, "concrete_step", counted)
    memo = StepMemo()
    step = "kubectl get resourceclaims -A -o wide  (who holds the devices)"
    answers = {
        memo.step(step, replace(BASE, namespace=f"team-{n}", claim_name=f"claim-{n}"))
        for n in range(20)
    }
    assert answers == {step}
    assert len(calls) == 1
