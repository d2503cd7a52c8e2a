"""Next steps made concrete: the values a diagnosis knows put into the commands it suggests.

Rule files and phase code write next steps once for every claim, so they name what varies
in words (``<node>``, ``<plugin pod on the node>``, "on the node") or with placeholders the
matcher fills from one piece of evidence (``{pod}`` as ``ns/name``). By the end of a walk
the diagnosis knows most of those values: the claim's namespace, name and UID, its node,
the kubelet-plugin pod there (its namespace and name), the CDI spec file the driver writes
for it, where the snapshot came from. :func:`concrete_steps` puts them in, so a step can be
pasted as it stands, and fixes what a template cannot know is wrong in context:

- ``kubectl <verb> pod ns/name`` is not a kubectl form (``ns/name`` reads as TYPE/NAME):
  it becomes ``kubectl <verb> pod -n ns name``;
- ``dradiag node`` runs on the node: from a live cluster it is shown as the ``kubectl
  debug node/NODE`` line the README gives; offline, with the node's saved state in the
  input, as ``dradiag node --node NODE --from PATH``;
- other ``dradiag`` commands of an offline diagnosis read the same ``--from`` input;
- ``dradiag claim`` of the claim being diagnosed (or ``dradiag pod`` of its pod) is what
  the user has just read, so it is dropped.

A value the diagnosis does not have is said in words the user can act on (``<the
kubelet-plugin pod on gpu-node-8>``); a bare placeholder stays only when nothing is known.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, cast

from dradiag.diagnosis.next_context import (
    HOST_ROOT,
    IMAGE_PLACEHOLDER,
    NextContext,
    cdi_device_ids,
)
from dradiag.vocabulary import Finding

if TYPE_CHECKING:
    from dradiag.diagnosis.model import Diagnosis, PhaseResult

# -- splitting a step -------------------------------------------------------------------

_ANNOTATION = re.compile(r"\s{2,}\(")
"""A step's command ends where two spaces and a parenthesis start its comment."""


_WORD = re.compile(r"(?:'[^']*'|\"[^\"]*\"|<[^<>]*>|[^\s'\"<]|['\"<])+")
"""A shell word: quoted parts, ``<…>`` placeholders and plain characters, up to a blank
outside them (an unmatched quote is taken as a character)."""


def split_words(command: str) -> list[str]:
    """``command`` split on blanks outside quotes and outside ``<…>`` placeholders.

    Quotes stay on the words (so joining them gives the command back); a ``<…>``
    placeholder is one word however many blanks it holds, as a shell user would read it.
    """
    return _WORD.findall(command)


def command_segments(step: str) -> list[str]:
    """The shell commands a step holds: its own text before any ``  (comment)``, split at
    pipes and ``;``, plus every `backticked` command of a prose step."""
    quoted = re.findall(r"`([^`]+)`", step)
    body = quoted or [_ANNOTATION.split(step, 1)[0]]
    out: list[str] = []
    for text in body:
        out += [s.strip() for s in _split_pipeline(text) if s.strip()]
    return out


def _pipeline_pieces(text: str) -> list[str]:
    """``text`` cut at each ``|`` and ``;`` outside quotes and ``<placeholders>``: the
    commands at even indexes, the separators between them at odd ones."""
    pieces: list[str] = []
    cur: list[str] = []
    quote = ""
    angle = 0
    for ch in text:
        if quote:
            if ch == quote:
                quote = ""
        elif ch == "<":
            angle += 1
        elif ch == ">" and angle:
            angle -= 1
        elif ch in "'\"" and not angle:
            quote = ch
        elif ch in "|;" and not angle:
            pieces += ["".join(cur), ch]
            cur = []
            continue
        cur.append(ch)
    pieces.append("".join(cur))
    return pieces


def _split_pipeline(text: str) -> list[str]:
    return [p.replace("&&", " ").strip() for p in _pipeline_pieces(text)[::2]]


# -- filling in -------------------------------------------------------------------------

_PLACEHOLDER = re.compile(r"<([^<>]+)>")
_PLUGIN_POD = re.compile(
    r"(?:the )?(?:kubelet-)?plugin pod(?: on (?:the node|\{node\}|[\w.-]+))?", re.I
)
_SNAPSHOT = re.compile(r"\s*--from <snapshot>")
_ON_THE_NODE = re.compile(r"\b(on|\(on) the node\b")

_PLACEHOLDER_VALUE: Mapping[str, Callable[[NextContext], str]] = {
    **dict.fromkeys(
        ("driver-ns", "driver namespace", "driver ns"), lambda c: c.driver_namespace_words
    ),
    **dict.fromkeys(
        (
            "release",
            "dra-driver release",
            "the dra driver's release",
            "the dra driver's helm release",
        ),
        lambda c: c.helm_release or "<the DRA driver's Helm release>",
    ),
    "claim uid": lambda c: c.claim_uid,
    **dict.fromkeys(("claim", "claim name"), lambda c: c.claim_name),
    **dict.fromkeys(("ns", "namespace"), lambda c: c.namespace),
    "node": lambda c: c.node or f"<{c.node_words}>",
    **dict.fromkeys(("pod", "consumer pod"), lambda c: c.pod_name),
    "pci bus id": lambda c: c.pci_bus_id,
    "gpu": lambda c: c.gpu_uuid,
    "class": lambda c: c.device_class,
    "plugin service account": lambda c: c.plugin_service_account,
    **dict.fromkeys(
        ("cdi spec", "cdi spec file", "the claim's cdi spec", "the claim's cdi spec file"),
        lambda c: c.cdi_spec_files[0] if c.cdi_spec_files else "",
    ),
}
"""``<name>`` placeholders of rule and code templates, and the value each stands for; ""
(not known) leaves the placeholder as written, except a CDI spec file, which then reads
as the directory."""


def _fill_words(step: str, ctx: NextContext) -> str:
    """Angle-bracket placeholders and "the node" replaced by what ``ctx`` knows."""
    if "<" in step:

        def fill(m: re.Match[str]) -> str:
            key = m.group(1).lower()
            value_of = _PLACEHOLDER_VALUE.get(key)
            if value_of is not None:
                value = value_of(ctx)
                return value if value or key.startswith(("cdi", "the claim's cdi")) else m.group(0)
            if _PLUGIN_POD.fullmatch(key):
                return ctx.plugin_pod_words
            return m.group(0)

        step = _PLACEHOLDER.sub(fill, step)
    if ctx.node and "the node" in step:
        step = _ON_THE_NODE.sub(lambda m: f"{m.group(1)} {ctx.node}", step)
    return step


def _fill_braces(step: str, ctx: NextContext) -> str:
    """``{name}`` placeholders the matcher had no value for, where the diagnosis has one."""
    if "{" not in step:
        return step
    from dradiag.rulebook.schema import render_template

    values = {
        "claim": ctx.claim_key,
        "claim_name": ctx.claim_name,
        "claim_uid": ctx.claim_uid,
        "node": ctx.node,
        "device_class": ctx.device_class,
    }
    return render_template(step, {k: v for k, v in values.items() if v}, missing=None)


# -- kubectl ----------------------------------------------------------------------------

KUBECTL_TYPES_WITH_SLASH_FORM: frozenset[str] = frozenset(
    {
        "pod",
        "pods",
        "po",
        "node",
        "nodes",
        "no",
        "deployment",
        "deployments",
        "deploy",
        "daemonset",
        "daemonsets",
        "ds",
        "service",
        "svc",
        "resourceclaim",
        "resourceclaims",
        "resourceclaimtemplate",
        "resourceclaimtemplates",
        "resourceslice",
        "resourceslices",
        "deviceclass",
        "deviceclasses",
        "job",
        "jobs",
        "statefulset",
        "sts",
    }
)
"""Resource names that may prefix ``TYPE/NAME``; any other ``a/b`` word is ``ns/name``."""

KUBECTL_FLAGS_WITH_VALUE: frozenset[str] = frozenset(
    {
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
        "--context",
        "--kubeconfig",
    }
)
"""kubectl flags whose value is the next word (so that word is not an object name)."""

_NAMESPACED_NAME = re.compile(
    r"^(?P<ns>[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)/(?P<name>[a-z0-9][-a-z0-9.]*)$"
)


def _kubectl_namespaced(command: str, own: Mapping[tuple[str, str], str] | None = None) -> str:
    """``kubectl <verb> [type] ns/name …`` as ``kubectl <verb> [type] -n ns name …``.

    kubectl reads a slash in a name as TYPE/NAME, so the ``ns/name`` a matcher fills in
    for ``{pod}`` or ``{claim}`` cannot stand in a kubectl line; its namespace wins over a
    ``-n`` written beside it (a template's ``-n <driver-ns>`` guess included). A line
    naming the claim or its pod (``own``: (kind, name) → namespace) without a namespace
    gets theirs.
    """
    if "/" not in command and not any(name in command for _kind, name in (own or {})):
        return command  # no ns/name to split, no name of the claim's to qualify
    words = split_words(command)
    if len(words) < 2 or words[0] != "kubectl":
        return command
    for i, word in enumerate(words[2:], 2):
        m = _NAMESPACED_NAME.match(word)
        if m is None or m.group("ns") in KUBECTL_TYPES_WITH_SLASH_FORM:
            continue
        if words[i - 1] in KUBECTL_FLAGS_WITH_VALUE:
            continue  # a flag's value, not the object
        ns, name = m.group("ns"), m.group("name")
        words[i] = name
        for j, w in enumerate(words):
            if w in ("-n", "--namespace") and j + 1 < len(words):
                del words[j : j + 2]
                if j < i:
                    i -= 2
                break
            if w.startswith(("--namespace=", "-n=")):
                del words[j]
                if j < i:
                    i -= 1
                break
        words[i:i] = ["-n", ns]
        return " ".join(words)
    return " ".join(_with_namespace(words, own or {}))


def _qualifies_nothing(command: str) -> bool:
    """Whether ``_kubectl_namespaced`` returns ``command`` (one with no slash) unchanged
    whatever the claim and pod are: it is already in joined form and names its namespace
    (``-n``, ``-A``) or names no pod or claim that ``_with_namespace`` could qualify."""
    words = split_words(command)
    if " ".join(words) != command:
        return False
    return _namespace_given(words) or not any(w in _KIND_OF for w in words[2:-1])


def _namespace_given(words: list[str]) -> bool:
    return any(w in ("-n", "--namespace", "-A", "--all-namespaces") for w in words) or any(
        w.startswith(("--namespace=", "-n=")) for w in words
    )


def _with_namespace(words: list[str], own: Mapping[tuple[str, str], str]) -> list[str]:
    """``-n NS`` added to a namespaced kubectl line about the claim or its pod that has none."""
    if _namespace_given(words):
        return words
    for i in range(2, len(words) - 1):
        kind = _KIND_OF.get(words[i])
        ns = own.get((kind, words[i + 1])) if kind else None
        if ns:
            return [*words[: i + 1], "-n", ns, *words[i + 1 :]]
    return words


_KIND_OF: Mapping[str, str] = {
    **dict.fromkeys(("pod", "pods", "po"), "pod"),
    **dict.fromkeys(("resourceclaim", "resourceclaims"), "claim"),
}


# -- dradiag ----------------------------------------------------------------------------

_TAKES_FROM = frozenset({"claim", "pod", "scan", "inventory", "simulate", "selector-check", "node"})


def _dradiag_node(ctx: NextContext, command: str) -> str:
    """Where ``dradiag node`` can run for this diagnosis (README "On a GPU node")."""
    if ctx.offline_input and ctx.node_state_saved and ctx.node:
        return f"dradiag node --node {ctx.node} --from {ctx.offline_input}"
    extra = [w for w in split_words(command)[2:] if w != "--host-root"]
    extra = _without_option(extra, "--node")
    extra = _without_option(extra, "--from")
    tail = " ".join(["--host-root", HOST_ROOT, *extra])
    node = ctx.node or f"<{ctx.node_words}>"
    return (
        f"kubectl debug node/{node} -it --profile=sysadmin "
        f"--image={IMAGE_PLACEHOLDER} -- dradiag node {tail}"
    )


def _without_option(words: list[str], option: str) -> list[str]:
    out: list[str] = []
    skip = False
    for w in words:
        if skip:
            skip = False
            continue
        if w == option:
            skip = True
            continue
        if w.startswith(option + "="):
            continue
        out.append(w)
    return out


def _dradiag(command: str, ctx: NextContext) -> str | None:
    """A ``dradiag`` line as it runs for this diagnosis; None for one it already answers."""
    words = split_words(command)
    if len(words) < 2 or words[0] != "dradiag":
        return command
    sub = words[1]
    if sub in ("claim", "pod") and len(words) > 2 and f"{sub} {words[2]}" in ctx.own_commands:
        return None
    if sub == "node":
        return None if "node" in ctx.own_commands else _dradiag_node(ctx, command)
    if sub == "selector-check" and len(words) > 2 and words[2].startswith("<"):
        if not ctx.offline_input and ctx.claim_name:
            return (
                f"kubectl get resourceclaim -n {ctx.namespace} {ctx.claim_name} -o yaml | "
                f"dradiag selector-check -"
            )
        # A directory or file of manifests holds the claim (or its template) itself; an
        # archive is not a manifest selector-check reads.
        readable = ctx.offline_input and not ctx.offline_input.startswith("<")
        if readable and not ctx.offline_input.endswith((".tar.gz", ".tgz", ".tar")):
            words[2] = ctx.offline_input
        else:
            words[2] = "<the claim's or its template's manifest>"
    if (
        sub == "simulate"
        and ctx.claim_key
        and not {"--claim", "--pod", "--claim-file"} & set(words)
    ):
        words += ["--claim", ctx.claim_key]
    if sub in _TAKES_FROM and ctx.offline_input and "--from" not in words:
        words += ["--from", ctx.offline_input]
    return " ".join(words)


# -- one step ---------------------------------------------------------------------------


def concrete_step(step: str, ctx: NextContext) -> str | None:
    """``step`` with what ``ctx`` knows filled in; None when it should not be shown."""
    step = _fill_words(_fill_braces(step, ctx), ctx)
    if not ctx.offline_input:
        step = _SNAPSHOT.sub("", step)
    else:
        step = step.replace("--from <snapshot>", f"--from {ctx.offline_input}")
    dropped = False

    def rewrite(command: str) -> str:
        nonlocal dropped
        if command.startswith("kubectl "):
            if "/" not in command and _qualifies_nothing(command):
                return command  # not reading own_objects lets a scan's StepMemo hit
            return _kubectl_namespaced(command, ctx.own_objects)
        if command.startswith("dradiag "):
            done = _dradiag(command, ctx)
            if done is None:
                dropped = True
                return command
            return done
        return command

    step = _rewrite_commands(step, rewrite)
    return None if dropped else step


def _rewrite_commands(step: str, rewrite: Callable[[str], str]) -> str:
    """``step`` with each of its shell commands (pipeline parts, backticked ones) rewritten."""
    if "`" in step:
        return re.sub(r"`([^`]+)`", lambda m: f"`{_rewrite_pipeline(m.group(1), rewrite)}`", step)
    parts = _ANNOTATION.split(step, 1)
    head = _rewrite_pipeline(parts[0], rewrite)
    return head if len(parts) == 1 else f"{head}  ({parts[1]}"


def _rewrite_pipeline(text: str, rewrite: Callable[[str], str]) -> str:
    if "|" not in text and ";" not in text:
        body = text.strip()
        if not body:
            return text
        return text[: len(text) - len(text.lstrip())] + rewrite(body) + text[len(text.rstrip()) :]
    out: list[str] = []
    for n, piece in enumerate(_pipeline_pieces(text)):
        body = piece.strip()
        if n % 2 or not body:
            out.append(piece)
            continue
        lead = piece[: len(piece) - len(piece.lstrip())]
        trail = piece[len(piece.rstrip()) :]
        out.append(f"{lead}{rewrite(body)}{trail}")
    return "".join(out)


class _Reads:
    """A NextContext stand-in that notes which of its attributes a step read."""

    __slots__ = ("_ctx", "names")

    def __init__(self, ctx: NextContext) -> None:
        self._ctx = ctx
        self.names: dict[str, None] = {}

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._ctx, name)
        self.names[name] = None
        return value


def _hashable(value: Any) -> Any:
    """``value`` as a dict key part: ``own_objects`` is the one dict a step reads."""
    return tuple(sorted(value.items())) if isinstance(value, dict) else value


class StepMemo:
    """Concrete steps already worked out in one scan, keyed by the step and the values
    of only the context attributes it read.

    A scan's rows share a handful of templates (every pending claim's "kubectl get
    resourceclaims -A …"), but each row's context names its own claim, so a memo keyed
    by the whole context never hits. concrete_step is a function of the step and the
    attributes it reads: the first run records which ones (``_Reads``); a later context
    with the same values there gets the same answer without the rewrite (it would read
    the same attributes, take the same branches, and build the same text).
    """

    __slots__ = ("_known",)

    def __init__(self) -> None:
        self._known: dict[str, list[tuple[tuple[str, ...], dict[tuple[Any, ...], str | None]]]] = {}

    def step(self, step: str, ctx: NextContext) -> str | None:
        """``concrete_step(step, ctx)``, from the memo when it has the answer."""
        entries = self._known.setdefault(step, [])
        for names, answers in entries:
            values = tuple(_hashable(getattr(ctx, n)) for n in names)
            if values in answers:
                return answers[values]
        reads = _Reads(ctx)
        done = concrete_step(step, cast("NextContext", reads))
        names = tuple(reads.names)
        values = tuple(_hashable(getattr(ctx, n)) for n in names)
        for known, answers in entries:
            if known == names:
                answers[values] = done
                break
        else:
            entries.append((names, {values: done}))
        return done


def concrete_steps(
    steps: Iterable[str], ctx: NextContext, memo: StepMemo | None = None
) -> tuple[str, ...]:
    """Every step made concrete, the dropped ones left out, duplicates once."""
    out: dict[str, None] = {}
    for step in steps:
        done = concrete_step(step, ctx) if memo is None else memo.step(step, ctx)
        if done:
            out.setdefault(done, None)
    return tuple(out)


def with_concrete_next(finding: Finding, ctx: NextContext, memo: StepMemo | None = None) -> Finding:
    """``finding`` with its next steps made concrete for ``ctx``."""
    if not finding.next:
        return finding
    wanted = " ".join(finding.next)
    if "<CDI spec" in wanted or "<pci bus id>" in wanted.lower():
        ctx = _with_identifiers(ctx, finding)
    steps = concrete_steps(finding.next, ctx, memo)
    return finding if steps == finding.next else replace(finding, next=steps)


def _with_identifiers(ctx: NextContext, finding: Finding) -> NextContext:
    """The context, plus what this finding's own identifiers and evidence name."""
    ids: Mapping[str, str] = dict(finding.identifiers)
    texts = [v for k, v in finding.identifiers if k == "CDI device ID"]
    texts += [e.excerpt for e in finding.evidence]
    quoted = cdi_device_ids(texts)
    pci = ids.get("PCI bus ID", "")
    if not quoted and not pci:
        return ctx
    return replace(
        ctx,
        cdi_device_ids=quoted or ctx.cdi_device_ids,
        pci_bus_id=pci or ctx.pci_bus_id,
    )


def with_concrete_phases(
    phases: Sequence[PhaseResult], ctx: NextContext, memo: StepMemo | None = None
) -> tuple[PhaseResult, ...]:
    """Every finding of ``phases`` with concrete next steps (``memo``: a scan's)."""
    out: list[PhaseResult] = []
    for phase in phases:
        if not phase.findings:
            out.append(phase)
            continue
        findings = tuple(with_concrete_next(f, ctx, memo) for f in phase.findings)
        same = all(a is b for a, b in zip(findings, phase.findings, strict=True))
        out.append(phase if same else replace(phase, findings=findings))
    return tuple(out)


def without_command(diagnoses: Sequence[Diagnosis], command: str) -> list[Diagnosis]:
    """``diagnoses`` without next steps that run ``dradiag <command>``: the rows of a
    ``scan`` never suggest a scan. A claim's walk does not know it is a scan row (the
    scan's shared facts must not change what a walk says), so the scan drops them."""
    prefix = f"dradiag {command}"

    # The command at the start of the step, of a pipeline part or of a `backticked` one.
    runs = re.compile(r"(?:^|`|[|;]\s*)" + re.escape(prefix) + r"(?=\s|`|$)")

    def keep(step: str) -> bool:
        return runs.search(step) is None

    def pruned(steps: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(n for n in steps if prefix not in n or keep(n))

    def finding(f: Finding) -> Finding:
        return f if not any(prefix in n for n in f.next) else replace(f, next=pruned(f.next))

    out: list[Diagnosis] = []
    for d in diagnoses:
        if not any(prefix in n for n in d.verdict.next) and not any(
            prefix in n for p in d.phases for f in p.findings for n in f.next
        ):
            out.append(d)
            continue
        phases = tuple(
            p
            if not any(prefix in n for f in p.findings for n in f.next)
            else replace(p, findings=tuple(finding(f) for f in p.findings))
            for p in d.phases
        )
        out.append(
            replace(d, phases=phases, verdict=replace(d.verdict, next=pruned(d.verdict.next)))
        )
    return out
