"""What a diagnosis knows that its next steps may name: :class:`NextContext`, built from a
claim's walk (:func:`walk_context`) or a node (:func:`node_context`), and the CDI spec file
names a claim's device IDs imply.

``diagnosis/next_steps.py`` puts these values into the steps; this module only gathers
them, once per diagnosis, reading no more of the snapshot than the steps ask for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from dradiag.diagnosis.context import ClaimWalk
    from dradiag.diagnosis.model import PhaseResult
    from dradiag.snapshot.model import K8sObject, Snapshot

NVIDIA = "gpu.nvidia.com"

IMAGE_PLACEHOLDER = "<image with dradiag>"
"""The one value no snapshot holds: which image the user built dradiag into."""

HOST_ROOT = "/host"
"""Where ``kubectl debug node/N`` mounts the node's filesystem (README, ``dradiag node``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class NextContext:
    """What a diagnosis knows that its next steps may name; "" where it is not known."""

    namespace: str = ""
    claim_name: str = ""
    claim_uid: str = ""
    node: str = ""
    pod_namespace: str = ""
    pod_name: str = ""
    plugin_namespace: str = ""
    plugin_pod: str = ""
    plugin_service_account: str = ""
    helm_release: str = ""
    device_class: str = ""
    pci_bus_id: str = ""
    gpu_uuid: str = ""
    """The (parent) GPU of the claim's device, as ``nvidia-smi -i`` takes it."""
    cdi_device_ids: tuple[str, ...] = ()
    nvidia: bool = True
    """The claim's devices are the NVIDIA GPU driver's (``gpu.nvidia.com``)."""
    allocated: bool = True
    offline_input: str = ""
    """The ``--from`` argument that reproduces this diagnosis, "" for a live one."""
    node_state_saved: bool = False
    """The offline input holds the node's ``dradiag node --save`` state."""
    own_commands: frozenset[str] = frozenset()
    """``claim X`` / ``pod Y`` (``dradiag`` lines this diagnosis already answers), and
    ``scan`` or ``node`` when it is a row of ``dradiag scan`` or ``dradiag node``'s output."""

    @property
    def own_objects(self) -> dict[tuple[str, str], str]:
        """(kind, name) → namespace of the claim and its pod, for kubectl lines naming them."""
        out = {("claim", self.claim_name): self.namespace} if self.claim_name else {}
        if self.pod_name:
            out[("pod", self.pod_name)] = self.pod_namespace
        return out

    @property
    def claim_key(self) -> str:
        return f"{self.namespace}/{self.claim_name}" if self.claim_name else ""

    @property
    def node_words(self) -> str:
        if self.node:
            return self.node
        return "the claim's node" if self.allocated else "a node publishing the claim's devices"

    @property
    def plugin_pod_words(self) -> str:
        return self.plugin_pod or f"<the kubelet-plugin pod on {self.node_words}>"

    @property
    def driver_namespace_words(self) -> str:
        return self.plugin_namespace or "<the DRA driver's namespace>"

    @property
    def cdi_spec_files(self) -> tuple[str, ...]:
        return cdi_spec_files(self.cdi_device_ids, self.claim_uid, nvidia=self.nvidia)


_CDI_ID = re.compile(
    r"(?<![\w.-])(?P<vendor>[a-z0-9][a-z0-9.-]*\.[a-z]+)/(?P<cls>[a-z0-9][\w.-]*)=(?P<name>[\w.:-]+)"
)
"""A qualified CDI device ID, ``vendor/class=name``: the NVIDIA driver's
``k8s.gpu.nvidia.com/claim=<uid>-<dev>`` (v25.12+) or ``k8s.gpu.nvidia.com/device=gpu-N``
(v25.3 / v25.8), nvidia-driver-facts §6; other drivers' in the same shape."""

NVIDIA_BASE_SPEC = "k8s.gpu.nvidia.com-device_base.yaml"


def cdi_device_ids(texts: Iterable[str]) -> tuple[str, ...]:
    """The CDI device IDs quoted in ``texts``, first seen first."""
    seen: dict[str, None] = {}
    for text in texts:
        for m in _CDI_ID.finditer(text):
            # DRA drivers name their CDI vendor k8s.<driver>; anything else with a slash
            # and an equals sign (a label selector) is not a device ID.
            if m.group("vendor").startswith("k8s."):
                seen.setdefault(m.group(0), None)
    return tuple(seen)


def cdi_spec_files(ids: Sequence[str], claim_uid: str, *, nvidia: bool = True) -> tuple[str, ...]:
    """The spec files under /var/run/cdi that define ``ids`` (nvidia-driver-facts §6).

    A per-claim spec is a CDI *transient* spec, named ``<vendor>-<class>_<claimUID>.yaml``
    (``GenerateTransientSpecName``): v25.12+ of the NVIDIA driver writes
    ``k8s.gpu.nvidia.com-claim_<claimUID>.yaml``, whose IDs are ``…/claim=<uid>-<dev>``.
    v25.3 and v25.8 name devices ``k8s.gpu.nvidia.com/device=gpu-N``, defined in the static
    base spec ``k8s.gpu.nvidia.com-device_base.yaml``. With no ID quoted, an NVIDIA claim's
    UID gives the current driver's file.
    """
    files: dict[str, None] = {}
    for cdi_id in ids:
        m = _CDI_ID.search(cdi_id)
        if m is None:
            continue
        vendor, cls, name = m.group("vendor"), m.group("cls"), m.group("name")
        if vendor == "k8s.gpu.nvidia.com" and cls == "device":
            files.setdefault(NVIDIA_BASE_SPEC, None)
        elif claim_uid and name.startswith(claim_uid):
            files.setdefault(f"{vendor}-{cls}_{claim_uid}.yaml", None)
    if not files and claim_uid and nvidia:
        files[f"k8s.gpu.nvidia.com-claim_{claim_uid}.yaml"] = None
    return tuple(files)


# -- the walk's context -------------------------------------------------------------------


def walk_context(walk: ClaimWalk, phases: Sequence[PhaseResult] = ()) -> NextContext:
    """What one claim's walk knows that its next steps may name.

    The look-ups over the whole snapshot (which nodes publish the claim's devices, the
    driver's namespace) run only when a step of ``phases`` asks for them, so a scan of
    thousands of claims does not pay for them per claim.
    """
    from dradiag.diagnosis.context import class_names, pod_key
    from dradiag.snapshot.model import name_of, namespace_of

    snapshot = walk.snapshot
    steps = " ".join(n for p in phases for f in p.findings for n in f.next)
    nodes = walk.nodes()
    allocated = walk.allocated
    wants_node = "node" in steps or "dradiag" in steps
    wants_cdi = "<CDI spec" in steps
    drivers = walk.drivers() if wants_cdi or (not nodes and not allocated and wants_node) else []
    if not nodes and not allocated and wants_node:
        # Not allocated yet: when one node publishes the claim's devices, that is the node.
        facts = _facts(snapshot)
        nodes = (
            facts.publishing_nodes(drivers[0])
            if len(drivers) == 1
            else sorted({n for d in drivers for n in facts.publishing_nodes(d)})
        )
    node = nodes[0] if len(nodes) == 1 else ""
    wants_plugin = "<driver" in steps or "plugin" in steps or "<release>" in steps
    plugin = walk.plugin(node).pod if node and wants_plugin else None
    if plugin is None and not node and wants_plugin:
        plugin = _facts(snapshot).only_plugin_pod()
    pod = walk.pods[0] if walk.pods else None
    own = {f"claim {walk.claim_key}"} | {f"pod {pod_key(p)}" for p in walk.pods}
    classes = class_names(walk.claim) if "<class>" in steps else []
    gpu_uuid, pci_bus_id = (
        _allocated_gpu(walk) if "<gpu>" in steps or "<pci bus id>" in steps else ("", "")
    )
    base = (
        walk.shared.node_context(node, plugin, find_driver_namespace=wants_plugin)
        if walk.shared is not None
        else node_context(snapshot, node, plugin, find_driver_namespace=wants_plugin)
    )
    return replace(
        base,
        namespace=namespace_of(walk.claim),
        claim_name=name_of(walk.claim),
        claim_uid=walk.claim_uid,
        pod_namespace=namespace_of(pod) if pod is not None else "",
        pod_name=name_of(pod) if pod is not None else "",
        device_class=classes[0] if len(classes) == 1 else "",
        gpu_uuid=gpu_uuid,
        pci_bus_id=pci_bus_id,
        nvidia=NVIDIA in drivers if wants_cdi else True,
        allocated=allocated,
        own_commands=frozenset(own),
    )


def _allocated_gpu(walk: ClaimWalk) -> tuple[str, str]:
    """(GPU UUID, PCI bus ID) of the claim's one allocated device, from its slice: a MIG
    device's ``parentUUID``, a GPU's ``uuid``; ("", "") when not one device or not published."""
    from dradiag.diagnosis.context import claim_devices

    devices = claim_devices(walk.claim)
    if len(devices) != 1:
        return "", ""
    _request, driver, pool, name = devices[0]
    for slc in walk.snapshot.pool_slices(driver, pool):
        for device in (slc.get("spec") or {}).get("devices") or ():
            if not isinstance(device, Mapping) or device.get("name") != name:
                continue
            attrs = device.get("attributes") or {}
            return (
                _string_attribute(attrs, driver, "parentUUID", "uuid"),
                _string_attribute(attrs, driver, "pciBusID", "pcieBusID"),
            )
    return "", ""


def _string_attribute(attrs: Mapping[str, Any], driver: str, *keys: str) -> str:
    """The first of ``keys`` a device publishes as a string, bare or domain-qualified."""
    for key in keys:
        for qualified in (key, f"{driver}/{key}", f"resource.kubernetes.io/{key}"):
            value = attrs.get(qualified)
            if isinstance(value, Mapping) and value.get("string"):
                return str(value["string"])
    return ""


def node_context(
    snapshot: Snapshot,
    node: str,
    plugin: K8sObject | None,
    *,
    find_driver_namespace: bool = True,
) -> NextContext:
    """What a diagnosis of ``node`` knows: the node, its plugin pod, where the input is."""
    from dradiag.snapshot.model import name_of, namespace_of
    from dradiag.snapshot.node_state import node_states

    labels = ((plugin or {}).get("metadata") or {}).get("labels") or {}
    source = snapshot.source
    offline = ""
    if source.kind != "live" and source.location:
        location = str(source.location)
        offline = f"<{location}>" if location.startswith("sample ") else location
    if offline in ("-", "<stdin>"):
        offline = "<the same input>"
    return NextContext(
        node=node,
        plugin_namespace=namespace_of(plugin)
        if plugin is not None
        else (_driver_namespace(snapshot) if find_driver_namespace else ""),
        plugin_pod=name_of(plugin) if plugin is not None else "",
        plugin_service_account=str(
            ((plugin or {}).get("spec") or {}).get("serviceAccountName") or ""
        ),
        helm_release=str(labels.get("app.kubernetes.io/instance") or ""),
        offline_input=offline,
        node_state_saved=bool(node) and node in node_states(snapshot.extras),
    )


def _driver_namespace(snapshot: Snapshot) -> str:
    """The namespace of the cluster's kubelet-plugin pods, when they all share one."""
    return _facts(snapshot).driver_namespace()


class _SnapshotFacts:
    """Whole-snapshot look-ups a next step may need, computed once per snapshot: a scan
    walks thousands of claims of one snapshot, and each pass over every pod or slice
    per claim would make it quadratic."""

    __slots__ = ("snapshot", "_plugins", "_nodes")

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._plugins: list[K8sObject] | None = None
        self._nodes: dict[str, list[str]] = {}

    def _plugin_pods(self) -> list[K8sObject]:
        from dradiag.analyses import plugin_health as ph

        if self._plugins is None:
            self._plugins = [p for p in self.snapshot.pods if ph.is_plugin_pod(p)]
        return self._plugins

    def only_plugin_pod(self) -> K8sObject | None:
        plugins = self._plugin_pods()
        return plugins[0] if len(plugins) == 1 else None

    def driver_namespace(self) -> str:
        from dradiag.snapshot.model import namespace_of

        found = {namespace_of(p) for p in self._plugin_pods()}
        return found.pop() if len(found) == 1 else ""

    def publishing_nodes(self, driver: str) -> list[str]:
        if driver not in self._nodes:
            self._nodes[driver] = sorted(
                {
                    str((s.get("spec") or {}).get("nodeName"))
                    for s in self.snapshot.slices_for(driver=driver)
                    if (s.get("spec") or {}).get("nodeName")
                }
            )
        return self._nodes[driver]


_FACTS: dict[int, _SnapshotFacts] = {}


def _facts(snapshot: Snapshot) -> _SnapshotFacts:
    found = _FACTS.get(id(snapshot))
    if found is None or found.snapshot is not snapshot:
        if len(_FACTS) >= 4:
            _FACTS.clear()  # a few snapshots at a time (tests, demo); none held for long
        found = _FACTS[id(snapshot)] = _SnapshotFacts(snapshot)
    return found
