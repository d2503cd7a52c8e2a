"""Next steps are commands that run: every ``dradiag`` line parses with the CLI's own
parser, every ``kubectl`` line uses real verbs, resource types, flags and field selectors,
values the diagnosis has are filled in, and no diagnosis suggests re-running itself.

Checked over every rule's ``next`` templates (filled as the matcher and the diagnosis fill
them, with a realistic context) and over every next step the samples and the field corpus
produce.
"""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import typer
import yaml

from dradiag.cli.app import app, run
from dradiag.diagnosis.findings import _context_placeholders
from dradiag.diagnosis.next_context import NextContext, cdi_device_ids, cdi_spec_files
from dradiag.diagnosis.next_steps import (
    command_segments,
    concrete_step,
    concrete_steps,
    split_words,
)
from dradiag.rulebook import load_rulebook
from dradiag.rulebook.schema import explain_placeholders

REPO = Path(__file__).resolve().parents[2]
SAMPLES = REPO / "dradiag" / "samples"
FIELD = REPO / "tests" / "field"


def _corpus() -> Any:
    spec = importlib.util.spec_from_file_location("dradiag_field_corpus_next", FIELD / "corpus.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


# -- what kubectl accepts ---------------------------------------------------------------

KUBECTL_GLOBAL = {"-n", "--namespace", "--context", "--kubeconfig", "--as", "--request-timeout"}
KUBECTL_VERBS: dict[str, set[str]] = {
    "get": {
        "-o",
        "--output",
        "-l",
        "--selector",
        "--field-selector",
        "--show-labels",
        "--show-managed-fields",
        "-A",
        "--all-namespaces",
        "--raw",
        "--no-headers",
        "-w",
        "--watch",
    },
    "describe": {"-l", "--selector", "-A", "--all-namespaces"},
    "logs": {
        "-c",
        "--container",
        "-p",
        "--previous",
        "--since",
        "--tail",
        "-l",
        "--selector",
        "--timestamps",
        "--all-containers",
    },
    "exec": {"-c", "--container", "-i", "-t", "-it", "--stdin", "--tty"},
    "debug": {"-it", "-i", "-t", "--image", "--profile"},
    "auth": {"--as"},
    "api-versions": set(),
}
"""Verbs a read-only diagnosis may suggest, and the flags of each it uses (kubectl ref)."""
KUBECTL_FLAGS_WITH_VALUE = {
    "-n",
    "--namespace",
    "-o",
    "--output",
    "-l",
    "--selector",
    "--field-selector",
    "-c",
    "--container",
    "--since",
    "--tail",
    "--image",
    "--profile",
    "--as",
    "--raw",
    "--context",
    "--kubeconfig",
    "--request-timeout",
}
KUBECTL_TYPES = {
    "pod",
    "pods",
    "node",
    "nodes",
    "events",
    "event",
    "resourceclaim",
    "resourceclaims",
    "resourceclaimtemplate",
    "resourceclaimtemplates",
    "resourceslice",
    "resourceslices",
    "deviceclass",
    "deviceclasses",
    "devicetaintrules",
    "ds",
    "daemonset",
    "daemonsets",
    "deploy",
    "deployment",
    "deployments",
    "validatingadmissionpolicy",
    # The NVIDIA driver's ComputeDomain CRD (group resource.nvidia.com).
    "computedomains",
    "computedomains.resource.nvidia.com",
    # Gang scheduling's Workload (scheduling.k8s.io, Kubernetes 1.35+).
    "workloads.scheduling.k8s.io",
}
FIELD_SELECTORS = {
    "events": {
        "involvedObject.name",
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.uid",
        "reason",
        "type",
    },
    "pods": {"spec.nodeName", "status.phase", "metadata.name", "spec.schedulerName"},
    # ResourceSlices are selectable by these two fields only (their API docs).
    "resourceslices": {"spec.nodeName", "spec.driver"},
}
OUTPUTS = re.compile(r"^(yaml|json|wide|name|jsonpath=.+|custom-columns=.+)$")
DEBUG_PROFILES = {"legacy", "general", "baseline", "netadmin", "restricted", "sysadmin"}


def _unquote(word: str) -> str:
    return word[1:-1] if len(word) > 1 and word[0] == word[-1] and word[0] in "'\"" else word


def kubectl_problems(command: str) -> list[str]:
    """What is wrong with one kubectl command line, as kubectl would see it."""
    words = split_words(command)
    assert words[0] == "kubectl"
    if "--" in words:
        words = words[: words.index("--")]  # the command run in the container / on the node
    args = words[1:]
    # kubectl takes -n before the verb too.
    while args and args[0] in ("-n", "--namespace"):
        args = args[2:]
    if not args:
        return ["no verb"]
    verb, rest = args[0], args[1:]
    if verb not in KUBECTL_VERBS:
        return [f"unknown verb {verb!r}"]
    allowed = KUBECTL_VERBS[verb] | KUBECTL_GLOBAL
    problems: list[str] = []
    positionals: list[str] = []
    i = 0
    while i < len(rest):
        word = rest[i]
        if word.startswith("-") and not word.startswith("<"):
            flag, _, inline = word.partition("=")
            if flag not in allowed:
                problems.append(f"{verb}: unknown flag {flag!r}")
            value = inline
            if flag in KUBECTL_FLAGS_WITH_VALUE and not inline:
                i += 1
                value = rest[i] if i < len(rest) else ""
                if not value:
                    problems.append(f"{flag} without a value")
            value = _unquote(value)
            if flag in ("-o", "--output") and not OUTPUTS.match(value):
                problems.append(f"bad output {value!r}")
            if flag == "--profile" and value not in DEBUG_PROFILES:
                problems.append(f"bad debug profile {value!r}")
            if flag == "--field-selector":
                kind = positionals[0] if positionals else ""
                known = FIELD_SELECTORS.get(kind if kind.endswith("s") else kind + "s")
                for term in value.split(","):
                    key = re.split(r"!?=", term, maxsplit=1)[0]
                    if known is not None and key not in known:
                        problems.append(f"{kind}: field selector {key!r} is not supported")
        else:
            positionals.append(word)
        i += 1
    if verb in ("get", "describe") and "--raw" not in rest:
        if not positionals:
            problems.append(f"{verb} without a resource type")
        else:
            kinds = positionals[0].split("/")[0].split(",")
            unknown = [k for k in kinds if k not in KUBECTL_TYPES]
            if unknown:
                problems.append(f"unknown resource type(s) {unknown}")
            if "/" not in positionals[0] and len(positionals) > 1:
                for name in positionals[1:]:
                    if "/" in name and not name.startswith("<"):
                        problems.append(f"{name!r}: a TYPE/NAME or ns/name after a type")
    if verb in ("logs", "exec"):
        names = [p for p in positionals if not p.startswith("<")]
        for name in names:
            if "/" in name and name.split("/")[0] not in ("pod", "pods", "deploy", "deployment"):
                problems.append(f"{verb}: {name!r} is not POD or TYPE/NAME")
    if verb == "debug" and not any(p.startswith("node/") for p in positionals):
        problems.append("debug without node/NAME")
    for word in words:
        if re.search(r"\{[a-z_]+\}", _unquote(word)) and "jsonpath" not in word:
            problems.append(f"unfilled placeholder in {word!r}")
    return problems


_DRADIAG = typer.main.get_command(app)


def dradiag_problems(command: str) -> list[str]:
    """What the dradiag CLI's own parser (click's ``make_context``) says of one command line."""
    words = [_unquote(w) for w in split_words(command)][1:]
    node: Any = _DRADIAG
    path: list[str] = []
    while getattr(node, "commands", None) and words:
        sub = node.commands.get(words[0])
        if sub is None:
            return [f"no such command {' '.join([*path, words[0]])!r}"]
        node, path, words = sub, [*path, words[0]], words[1:]
    if getattr(node, "commands", None):
        return [f"{' '.join(path) or 'dradiag'} needs a subcommand"]
    try:
        node.make_context(" ".join(path), list(words))
    except Exception as exc:  # typer's vendored click: UsageError, BadParameter, ...
        message = getattr(exc, "format_message", None)
        if message is None:
            raise
        return [f"dradiag {' '.join(path)}: {message()}"]
    return []


def step_problems(step: str) -> list[str]:
    problems: list[str] = []
    for segment in command_segments(step):
        if segment.startswith("kubectl "):
            problems += kubectl_problems(segment)
        elif segment.startswith("dradiag "):
            problems += dradiag_problems(segment)
    return problems


# -- the checkers themselves ------------------------------------------------------------


@pytest.mark.parametrize(
    "step",
    [
        "kubectl describe pod ml/trainer-0",
        "kubectl get resourceslices --field-selector spec.pool.name=gpu-node-1",
        "kubectl frobnicate pods",
        "kubectl get deviceclasses resourceslices/x -o yaml --bogus",
        "kubectl logs -n ns ns2/plugin-x -c gpus",
        "kubectl get pod {pod} -o yaml",
        "dradiag node --host-root",
        "dradiag claim",
        "dradiag frobnicate",
        "dradiag inventory --no-such-flag",
    ],
)
def test_the_checkers_reject_commands_that_do_not_run(step: str) -> None:
    assert step_problems(step)


@pytest.mark.parametrize(
    "step",
    [
        "kubectl describe pod -n ml trainer-0  (Events)",
        "kubectl get resourceslices --field-selector spec.nodeName=gpu-node-1,spec.driver=gpu.nvidia.com",
        "kubectl logs -n nvidia-dra-driver-gpu plugin-x -c gpus --previous | tail -n 20",
        "kubectl debug node/gpu-node-8 -it --profile=sysadmin --image=<image with dradiag> -- "
        "dradiag node --host-root /host",
        "dradiag simulate --node gpu-node-1 --claim ml/x --from bundle.tar.gz",
        "see `dradiag inventory -o json --from <sample x>` (fits)",
    ],
)
def test_the_checkers_accept_commands_that_run(step: str) -> None:
    assert step_problems(step) == []


# -- filling in ---------------------------------------------------------------------------

CTX = NextContext(
    namespace="ml",
    claim_name="trainer-gpu",
    claim_uid="aba842ca-8ecb-53a4-bf58-f5c36ef7d605",
    node="gpu-node-8",
    pod_namespace="ml",
    pod_name="trainer-0",
    plugin_namespace="nvidia-dra-driver-gpu",
    plugin_pod="nvidia-dra-driver-gpu-kubelet-plugin-x7k2q",
    plugin_service_account="nvidia-dra-driver-gpu-service-account-kubeletplugin",
    helm_release="nvidia-dra-driver-gpu",
    device_class="gpu.nvidia.com",
    pci_bus_id="0000:3b:00.0",
    own_commands=frozenset({"claim ml/trainer-gpu", "pod ml/trainer-0"}),
)
"""A live diagnosis of a prepared claim on one node, as the walk builds it."""

OFFLINE = NextContext(
    namespace="ml",
    claim_name="trainer-gpu",
    claim_uid="aba842ca-8ecb-53a4-bf58-f5c36ef7d605",
    node="gpu-node-8",
    offline_input="bundle.tar.gz",
    own_commands=frozenset({"claim ml/trainer-gpu"}),
)


def test_the_cdi_step_names_the_node_and_the_claims_spec_file() -> None:
    step = concrete_step("ls -l /var/run/cdi/<CDI spec file> on the node", CTX)
    assert step == (
        "ls -l /var/run/cdi/k8s.gpu.nvidia.com-claim_aba842ca-8ecb-53a4-bf58-f5c36ef7d605.yaml"
        " on gpu-node-8"
    )


@pytest.mark.parametrize(
    ("ids", "expected"),
    [
        # v25.12+: one transient spec per claim (nvidia-driver-facts §6).
        (
            ["k8s.gpu.nvidia.com/claim=aba842ca-8ecb-53a4-bf58-f5c36ef7d605-gpu-0"],
            ("k8s.gpu.nvidia.com-claim_aba842ca-8ecb-53a4-bf58-f5c36ef7d605.yaml",),
        ),
        # v25.3 / v25.8: device IDs live in the static base spec.
        (["k8s.gpu.nvidia.com/device=gpu-1"], ("k8s.gpu.nvidia.com-device_base.yaml",)),
        # Another driver's transient spec: <vendor>-<class>_<uid>.yaml.
        (
            ["k8s.gpu.example.com/gpu=aba842ca-8ecb-53a4-bf58-f5c36ef7d605-gpu-0"],
            ("k8s.gpu.example.com-gpu_aba842ca-8ecb-53a4-bf58-f5c36ef7d605.yaml",),
        ),
        ([], ("k8s.gpu.nvidia.com-claim_aba842ca-8ecb-53a4-bf58-f5c36ef7d605.yaml",)),
    ],
)
def test_cdi_spec_file_per_driver_version(ids: list[str], expected: tuple[str, ...]) -> None:
    assert cdi_spec_files(ids, "aba842ca-8ecb-53a4-bf58-f5c36ef7d605") == expected


def test_cdi_ids_are_read_from_messages_not_from_label_selectors() -> None:
    text = (
        "CDI device injection failed: unresolvable CDI devices k8s.gpu.nvidia.com/device=gpu-1;"
        " node label nvidia.com/gpu.present=true"
    )
    assert cdi_device_ids([text]) == ("k8s.gpu.nvidia.com/device=gpu-1",)


def test_dradiag_node_from_a_live_diagnosis_runs_through_kubectl_debug() -> None:
    step = concrete_step("dradiag node  (checkpoint vs CDI specs, run on the node)", CTX)
    assert step is not None
    assert step.startswith(
        "kubectl debug node/gpu-node-8 -it --profile=sysadmin --image=<image with dradiag> -- "
        "dradiag node --host-root /host"
    )
    assert step_problems(step) == []


def test_dradiag_node_offline_reads_the_saved_node_state() -> None:
    saved = NextContext(**{**_fields(OFFLINE), "node_state_saved": True})
    assert concrete_step("dradiag node --node <node>", saved) == (
        "dradiag node --node gpu-node-8 --from bundle.tar.gz"
    )
    # Without the node's saved state, --from would read the laptop it runs on: the node it is.
    assert concrete_step("dradiag node --node <node>", OFFLINE).startswith(  # type: ignore[union-attr]
        "kubectl debug node/gpu-node-8 "
    )


def _fields(ctx: NextContext) -> dict[str, Any]:
    return {name: getattr(ctx, name) for name in ctx.__slots__}  # type: ignore[attr-defined]


def test_plugin_pod_and_namespace_are_filled_in() -> None:
    step = concrete_step(
        "kubectl logs -n <driver-ns> <plugin pod on the node> -c gpus --since=10m", CTX
    )
    assert step == (
        "kubectl logs -n nvidia-dra-driver-gpu nvidia-dra-driver-gpu-kubelet-plugin-x7k2q -c gpus"
        " --since=10m"
    )


def test_an_unknown_plugin_pod_is_said_in_words() -> None:
    ctx = NextContext(**{**_fields(CTX), "plugin_pod": "", "plugin_namespace": ""})
    step = concrete_step("kubectl logs -n <driver-ns> <plugin pod on the node> -c gpus", ctx)
    assert step == (
        "kubectl logs -n <the DRA driver's namespace> <the kubelet-plugin pod on gpu-node-8> -c gpus"
    )


def test_a_namespaced_name_becomes_namespace_and_name() -> None:
    # {pod} of a log hit is ns/name; the plugin pod's namespace wins over the template's guess.
    step = concrete_step(
        "kubectl logs -n <driver-ns> gpu-operator/nvidia-dra-driver-gpu-kubelet-plugin-wq7m2 "
        "-c init-container | tail -n 20",
        CTX,
    )
    assert step == (
        "kubectl logs -n gpu-operator nvidia-dra-driver-gpu-kubelet-plugin-wq7m2 -c init-container"
        " | tail -n 20"
    )
    assert concrete_step("kubectl describe pod ml/trainer-0  (the full event text)", CTX) == (
        "kubectl describe pod -n ml trainer-0  (the full event text)"
    )
    assert concrete_step("kubectl logs --previous ml/trainer-0 -c cuda", CTX) == (
        "kubectl logs --previous -n ml trainer-0 -c cuda"
    )
    # TYPE/NAME and flag values are left alone.
    assert concrete_step("kubectl get node/gpu-node-8 -o yaml", CTX) == (
        "kubectl get node/gpu-node-8 -o yaml"
    )


def test_the_claims_own_kubectl_lines_get_its_namespace() -> None:
    step = concrete_step(
        "kubectl get resourceclaim <claim> -o jsonpath='{.spec.devices.config}'", CTX
    )
    assert (
        step == "kubectl get resourceclaim -n ml trainer-gpu -o jsonpath='{.spec.devices.config}'"
    )


def test_the_command_just_run_is_not_a_next_step() -> None:
    steps = ["dradiag claim <ns>/<claim>  (selection explained)", "dradiag pod ml/trainer-0"]
    assert concrete_steps(steps, CTX) == ()
    # Another claim's diagnosis is a next step.
    assert concrete_steps(["dradiag claim ml/other-gpu"], CTX) == ("dradiag claim ml/other-gpu",)


def test_offline_dradiag_steps_read_the_same_input() -> None:
    assert concrete_step("dradiag inventory  (free devices per node)", OFFLINE) == (
        "dradiag inventory --from bundle.tar.gz  (free devices per node)"
    )
    assert concrete_step("dradiag simulate --node <node> --from <snapshot>", OFFLINE) == (
        "dradiag simulate --node gpu-node-8 --from bundle.tar.gz --claim ml/trainer-gpu"
    )
    # Live, a snapshot placeholder has no meaning: it goes.
    assert concrete_step("dradiag simulate --node <node> --from <snapshot>", CTX) == (
        "dradiag simulate --node gpu-node-8 --claim ml/trainer-gpu"
    )


def test_selector_check_of_a_live_claim_reads_it_from_the_cluster() -> None:
    assert concrete_step("dradiag selector-check <file>", CTX) == (
        "kubectl get resourceclaim -n ml trainer-gpu -o yaml | dradiag selector-check -"
    )
    # Offline, a directory of manifests holds the claim; a bundle archive is not read as one.
    in_dir = NextContext(**{**_fields(OFFLINE), "offline_input": "case/input"})
    assert concrete_step("dradiag selector-check <file>", in_dir) == (
        "dradiag selector-check case/input --from case/input"
    )
    assert concrete_step("dradiag selector-check <file>", OFFLINE) == (
        "dradiag selector-check <the claim's or its template's manifest> --from bundle.tar.gz"
    )


# -- every rule's next templates ------------------------------------------------------------

_CAPTURE_VALUES = {
    "claim_uid": "aba842ca-8ecb-53a4-bf58-f5c36ef7d605",
    "other_claim_uid": "3c8337ad-f366-4541-883d-30b9e99fd6be",
    "slice_device_name": "gpu-0",
    "driver": "gpu.nvidia.com",
    "device_class": "gpu.nvidia.com",
    "field": "consumesCounters",
    "claim_name": "trainer-gpu",
    "container": "cuda",
}


def _values(rule: Any) -> dict[str, str]:
    """What the matcher fills a rule's templates with, for its kind of evidence."""
    values = {
        name: _CAPTURE_VALUES.get(name, f"value-of-{name.replace('_', '-')}")
        for name in explain_placeholders(" ".join(rule.next))
    }
    match = rule.match
    if match is None:
        return {}
    if match.log is not None:
        values |= {
            "namespace": "nvidia-dra-driver-gpu",
            "pod": "nvidia-dra-driver-gpu/nvidia-dra-driver-gpu-kubelet-plugin-x7k2q",
            "container": "gpus",
            "node": "gpu-node-8",
        }
    else:
        values |= {
            "namespace": "ml",
            "name": "trainer-0",
            "kind": "Pod",
            "pod": "ml/trainer-0",
            "claim": "ml/trainer-gpu",
            "node": "gpu-node-8",
        }
    return values


def _rule_steps() -> Iterator[Any]:
    for rule in load_rulebook().rules:
        rendered = rule.render_next(_values(rule))
        if rule.match is None:
            # Code-backed findings keep only the catalogue lines without evidence slots
            # (diagnosis/findings.py _enrich).
            rendered = tuple(n for n in rendered if not _context_placeholders(n))
        for ctx in (CTX, OFFLINE):
            for step in concrete_steps(rendered, ctx):
                yield pytest.param(step, id=f"{rule.id}:{step[:40]}")


@pytest.mark.parametrize("step", list(_rule_steps()))
def test_every_rule_next_step_runs(step: str) -> None:
    assert step_problems(step) == []


# -- every next step of the samples and the field corpus ----------------------------------

MACHINE_PLACEHOLDERS = re.compile(
    r"<(?:ns|namespace|claim|claim uid|node|driver-ns|driver namespace|pod|consumer pod|"
    r"plugin pod|plugin pod on the node|kubelet-plugin pod on the node|snapshot|file|"
    r"claim or template|claim or template file)>",
    re.I,
)
"""Placeholders for values every claim diagnosis has (or says in words)."""


def _diagnoses() -> Iterator[tuple[str, dict[str, Any]]]:
    import contextlib
    import io

    def cli(argv: list[str]) -> dict[str, Any]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            run(argv)
        return json.loads(out.getvalue())

    for sample in sorted(p for p in SAMPLES.iterdir() if (p / "sample.yaml").is_file()):
        claim = yaml.safe_load((sample / "sample.yaml").read_text())["claim"]
        doc = cli(["claim", claim, "--from", str(sample), "-o", "json"])
        yield f"sample {sample.name}: claim {claim}", doc
    for case in _corpus().all_cases():
        yield f"field {case.name}: {case.spec['command']} {case.spec['target']}", cli(case.argv())
        # scan's claims and nodes, whose contexts the walk and the node diagnosis build.
        yield f"field {case.name}: scan", cli(["scan", "--from", str(case.input), "-o", "json"])
        if case.name.startswith("sel-"):
            source = ["--from", str(case.input)]
            yield (
                f"field {case.name}: selector-check",
                cli(["selector-check", str(case.input), *source, "-o", "json"]),
            )


def _produced() -> Iterator[Any]:
    for label, doc in _diagnoses():
        command = label.split(": ", 1)[1]
        for item in doc.get("items") or [doc]:
            steps = list(_next_lists(item))
            target = item.get("target") or {}
            own = {f"claim {target.get('namespace')}/{target.get('name')}", command}
            own |= {f"pod {p}" for p in target.get("pods") or []}
            for step in dict.fromkeys(steps):
                yield pytest.param(step, own, id=f"{label[:60]}:{step[:40]}")


def _next_lists(node: Any) -> Iterator[str]:
    """Every string under a ``next`` key of a document, at any depth."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "next" and isinstance(value, list):
                yield from (str(v) for v in value)
            else:
                yield from _next_lists(value)
    elif isinstance(node, list):
        for value in node:
            yield from _next_lists(value)


PRODUCED = list(_produced())


def test_the_corpus_produces_next_steps() -> None:
    assert len(PRODUCED) > 100


@pytest.mark.parametrize(("step", "own"), PRODUCED)
def test_every_produced_next_step_runs_and_is_concrete(step: str, own: set[str]) -> None:
    assert step_problems(step) == []
    assert not MACHINE_PLACEHOLDERS.search(step), step
    for segment in command_segments(step):
        words = split_words(segment)
        if words[:2] in (["dradiag", "claim"], ["dradiag", "pod"]) and len(words) > 2:
            assert f"{words[1]} {words[2]}" not in own, f"suggests what was just run: {step}"
        if words[:2] == ["dradiag", "scan"]:
            assert "scan" not in own, f"scan suggests a scan: {step}"


def test_explain_names_the_spec_file_of_the_pasted_cdi_id() -> None:
    import contextlib
    import io

    message = (
        "Error: failed to create containerd container: CDI device injection failed: "
        "unresolvable CDI devices k8s.gpu.nvidia.com/claim=aba842ca-8ecb-53a4-bf58-f5c36ef7d605-gpu-0"
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        run(["explain", message, "-o", "json"])
    matches = json.loads(out.getvalue())["matches"]
    steps = [s for m in matches for s in m["next"]]
    assert any(
        "/var/run/cdi/k8s.gpu.nvidia.com-claim_aba842ca-8ecb-53a4-bf58-f5c36ef7d605.yaml" in s
        for s in steps
    ), steps
    assert not any(s.startswith("dradiag node") for s in steps)
    assert all(step_problems(s) == [] for s in steps)


def test_the_walk_knows_the_plugin_pod_gpu_and_spec_of_a_prepared_claim() -> None:
    from dradiag.diagnosis.context import ClaimWalk, WalkOptions, optional_rulebook
    from dradiag.diagnosis.links import claim_links
    from dradiag.diagnosis.model import PhaseResult
    from dradiag.diagnosis.next_context import walk_context
    from dradiag.sources.manifests import load_snapshot
    from dradiag.vocabulary import Finding, Phase, PhaseStatus, Severity

    snapshot = load_snapshot(str(SAMPLES / "mig-create-failed-at-prepare"), exclude={"sample.yaml"})
    claim = snapshot.claim("default", "pod-memsat-0004-mig-070gb-8g9dwhd-gpu-tpghv")
    assert claim is not None
    links = claim_links(snapshot, claim)
    walk = ClaimWalk(
        snapshot=snapshot,
        claim=claim,
        options=WalkOptions(),
        pods=links.pod_objects(),
        rulebook=optional_rulebook(),
        links=links,
    )
    asks = Finding(
        rule="DRA-PREP-MIG-CREATE-FAILED",
        phase=Phase.PREPARE,
        severity=Severity.ERROR,
        title="t",
        next=(
            "nvidia-smi -i <gpu> --query-gpu=mig.mode.current --format=csv on the node",
            "kubectl logs -n <driver-ns> <plugin pod on the node> -c gpus",
            "ls -l /var/run/cdi/<CDI spec file> on the node",
        ),
    )
    phase = PhaseResult(phase=Phase.PREPARE, status=PhaseStatus.BROKEN, findings=(asks,))
    ctx = walk_context(walk, [phase])
    # gpu-2-mig-4g95gb-5-0's parentUUID is gpu-2's uuid in the sample's slice.
    assert concrete_steps(asks.next, ctx) == (
        "nvidia-smi -i GPU-819e63c1-7230-5e24-ae95-c7b0988e7b5e --query-gpu=mig.mode.current "
        "--format=csv on gb-nvl-027-compute09",
        "kubectl logs -n nvidia-dra-driver-gpu nvidia-dra-driver-gpu-kubelet-plugin-x7k2q -c gpus",
        "ls -l /var/run/cdi/k8s.gpu.nvidia.com-claim_3c8337ad-f366-4541-883d-30b9e99fd6be.yaml"
        " on gb-nvl-027-compute09",
    )
