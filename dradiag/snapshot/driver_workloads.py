"""What ties a claim to the driver's per-claim workloads: which claims have one, by name.

With MPS sharing, the gpu.nvidia.com plugin's Prepare creates a Deployment named
``mps-control-daemon-<claim UID>-<first 5 hex of sha256(sorted GPU UUIDs)>`` in the
driver's namespace (nvidia-driver-facts §3.2; ``MpsControlDaemonNameFmt`` in the
driver's ``sharing.go``). Live collection reads those Deployments only for claims that
ask for MPS, and analyses find a claim's daemon by the UID its name carries; both read
these facts from here, the layer both stand on.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from dradiag.snapshot.model import K8sObject, name_of

DAEMON_PREFIX = "mps-control-daemon-"
"""The name prefix of the driver's MPS control-daemon Deployments."""
NVIDIA_DRIVER = "gpu.nvidia.com"


def _opaque_parameters(
    config: Iterable[Any], driver: str
) -> Iterator[tuple[Mapping[str, Any], Mapping[str, Any]]]:
    """(config entry, its opaque parameters) for each entry of ``config`` that gives
    ``driver`` opaque parameters; entries of another shape are passed over."""
    for entry in config:
        if not isinstance(entry, Mapping):
            continue
        opaque = entry.get("opaque") or {}
        if not isinstance(opaque, Mapping) or opaque.get("driver") != driver:
            continue
        params = opaque.get("parameters") or {}
        yield entry, params if isinstance(params, Mapping) else {}


def mps_requests(claim: K8sObject) -> list[str]:
    """Requests of the claim configured with MPS sharing (``[]``: no MPS; ``["*"]``: a
    config entry without ``requests``, for every request). Config given by the
    DeviceClass is not in the claim and is not seen here."""
    out: list[str] = []
    config = ((claim.get("spec") or {}).get("devices") or {}).get("config") or []
    for entry, params in _opaque_parameters(config, NVIDIA_DRIVER):
        sharing = params.get("sharing")
        if isinstance(sharing, Mapping) and sharing.get("strategy") == "MPS":
            for request in entry.get("requests") or ["*"]:
                if str(request) not in out:
                    out.append(str(request))
    return out


def is_mps_daemon(deployment: K8sObject) -> bool:
    """A Deployment named as the driver names its MPS control daemons."""
    return name_of(deployment).startswith(DAEMON_PREFIX)


COMPUTE_DOMAIN_DRIVER = "compute-domain.nvidia.com"
COMPUTE_DOMAIN_LABEL = "resource.nvidia.com/computeDomain"
"""The label the driver puts on a ComputeDomain's daemon pods: the domain's UID."""


def compute_domain_ids(claim: K8sObject) -> list[str]:
    """The ComputeDomains a ``compute-domain.nvidia.com`` claim is for (its opaque
    config's ``domainID``, in the spec or copied into the allocation), first seen first."""
    seen: dict[str, None] = {}
    spec_config = ((claim.get("spec") or {}).get("devices") or {}).get("config") or []
    allocation = (claim.get("status") or {}).get("allocation") or {}
    status_config = (allocation.get("devices") or {}).get("config") or []
    for _entry, parameters in _opaque_parameters(
        (*spec_config, *status_config), COMPUTE_DOMAIN_DRIVER
    ):
        domain = parameters.get("domainID")
        if isinstance(domain, str) and domain:
            seen.setdefault(domain, None)
    return list(seen)


PLUGIN_BINARIES = ("gpu-kubelet-plugin", "compute-domain-kubelet-plugin")
"""What the kubelet-plugin containers run; the driver image's other workloads do not."""
OTHER_BINARIES = ("compute-domain-daemon", "compute-domain-controller", "webhook")
"""What the driver image's other workloads run: the ComputeDomain (IMEX) daemon, itself a
DaemonSet pod that consumes a claim, the controller and the webhook."""


def other_driver_workload(pod: K8sObject, command: str) -> bool:
    """True when a pod running the driver image is not its kubelet plugin: it consumes a
    claim (the ComputeDomain daemon does, no plugin does), or a container's ``command``
    (its command and args, joined) runs another of the image's binaries and no plugin one.

    Live collection and the plugin-health analysis both ask it, so the pods one keeps as
    plugin pods and the other calls plugin pods stay the same.
    """
    if (pod.get("spec") or {}).get("resourceClaims"):
        return True
    runs_plugin = any(binary in command for binary in PLUGIN_BINARIES)
    return not runs_plugin and any(binary in command for binary in OTHER_BINARIES)
