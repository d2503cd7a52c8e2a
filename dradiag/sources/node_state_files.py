"""Reading CDI spec files and the plugin checkpoint into ``snapshot.node_state`` values.

The formats are the driver's (nvidia-driver-facts §6, §7): CDI specs in YAML or JSON, the
driver's per-claim specs (``k8s.gpu.nvidia.com-claim_<uid>.yaml``, v25.12+, and the MPS
ones before) and the v25.3–v25.8 base spec (``k8s.gpu.nvidia.com-device_base.yaml``);
checkpoints with a ``v1`` section only (v25.3), ``v1`` + ``v2`` with states (v25.8),
``name``/``namespace`` on ``PrepareStarted`` entries (v25.12) and ``nodeBootID`` (v0.4).
A file that does not parse becomes a value with ``error`` set — a finding, never a crash.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from dradiag.snapshot.node_state import (
    CdiDevice,
    CdiDeviceNode,
    CdiSpec,
    Checkpoint,
    CheckpointClaim,
    PreparedDevice,
)

CDI_SUFFIXES = (".yaml", ".yml", ".json")
CDI_VENDOR = "k8s.gpu.nvidia.com"
_CLAIM_SPEC = re.compile(r"^k8s\.gpu\.nvidia\.com-claim_(?P<uid>[0-9a-fA-F-]{8,})\.(?:ya?ml|json)$")
_BASE_SPEC = re.compile(r"^k8s\.gpu\.nvidia\.com-device_base\.(?:ya?ml|json)$")
_UID_PREFIX = re.compile(r"^(?P<uid>[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})-")
MAX_FILE_BYTES = 8 * 1024 * 1024
"""A CDI spec or checkpoint larger than this is not what the driver writes."""


def _load(data: bytes, path: str) -> Any:
    import yaml

    text = data.decode("utf-8")
    if path.endswith(".json"):
        return json.loads(text)
    return yaml.safe_load(text)


def _nodes(edits: Any) -> tuple[CdiDeviceNode, ...]:
    if not isinstance(edits, Mapping):
        return ()
    out = []
    for node in edits.get("deviceNodes") or ():
        if isinstance(node, Mapping) and isinstance(node.get("path"), str):
            host = node.get("hostPath")
            out.append(CdiDeviceNode(path=node["path"], host_path=host if host else None))
    return tuple(out)


def _mounts(edits: Any) -> tuple[str, ...]:
    if not isinstance(edits, Mapping):
        return ()
    return tuple(
        str(m.get("hostPath"))
        for m in edits.get("mounts") or ()
        if isinstance(m, Mapping) and m.get("hostPath")
    )


def parse_cdi_spec(data: bytes, path: str) -> CdiSpec:
    """One CDI spec file; a malformed one has ``error`` set."""
    name = Path(path).name
    claim = _CLAIM_SPEC.match(name)
    scheme = "claim" if claim else "device-base" if _BASE_SPEC.match(name) else "other"
    base = CdiSpec(path=path, scheme=scheme, claim_uid=claim.group("uid") if claim else None)
    try:
        doc = _load(data, path)
    except (ValueError, UnicodeDecodeError) as exc:
        return _with_error(base, f"not valid YAML/JSON: {_one_line(exc)}")
    except Exception as exc:  # yaml.YAMLError and its subclasses
        return _with_error(base, f"not valid YAML/JSON: {_one_line(exc)}")
    if not isinstance(doc, Mapping):
        return _with_error(base, "not a CDI spec (the document is not a mapping)")
    version, kind, devices = doc.get("cdiVersion"), doc.get("kind"), doc.get("devices")
    if not isinstance(version, str) or not version:
        return _with_error(base, "cdiVersion is missing")
    if not isinstance(kind, str) or "/" not in kind:
        return _with_error(base, f"kind {kind!r} is not <vendor>/<class>")
    if not isinstance(devices, list):
        return _with_error(base, "devices is not a list")
    parsed = []
    for i, dev in enumerate(devices):
        if not isinstance(dev, Mapping) or not isinstance(dev.get("name"), str):
            return _with_error(base, f"devices[{i}] has no name")
        edits = dev.get("containerEdits")
        parsed.append(
            CdiDevice(name=dev["name"], device_nodes=_nodes(edits), mounts=_mounts(edits))
        )
    uid = base.claim_uid
    if uid is None and kind == f"{CDI_VENDOR}/claim" and parsed:
        m = _UID_PREFIX.match(parsed[0].name)
        uid = m.group("uid") if m else None
    return CdiSpec(
        path=path,
        cdi_version=version,
        kind=kind,
        scheme=scheme,
        claim_uid=uid,
        devices=tuple(parsed),
        spec_device_nodes=_nodes(doc.get("containerEdits")),
    )


def _with_error(spec: CdiSpec, error: str) -> CdiSpec:
    return CdiSpec(path=spec.path, scheme=spec.scheme, claim_uid=spec.claim_uid, error=error)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:200]


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _prepared_device(entry: Mapping[str, Any]) -> PreparedDevice:
    for kind in ("gpu", "mig", "vfio"):
        body = entry.get(kind)
        if not isinstance(body, Mapping):
            continue
        device, info, concrete = (_mapping(body.get(k)) for k in ("device", "info", "concrete"))
        return PreparedDevice(
            slice_device_name=device.get("DeviceName"),
            pool=device.get("PoolName"),
            type=kind,
            gpu_uuid=info.get("uuid") if kind == "gpu" else concrete.get("parentUUID"),
            mig_uuid=concrete.get("migUUID") if kind == "mig" else None,
            pci_bus_id=info.get("pciBusID") if kind == "vfio" else None,
            cdi_device_ids=tuple(str(i) for i in device.get("CDIDeviceIDs") or ()),
        )
    return PreparedDevice(slice_device_name=None, pool=None, type="unknown")


def _devices(groups: Any) -> tuple[PreparedDevice, ...]:
    out: list[PreparedDevice] = []
    for group in groups or ():
        if isinstance(group, Mapping):
            out += [
                _prepared_device(d) for d in group.get("devices") or () if isinstance(d, Mapping)
            ]
    return tuple(out)


def _allocated(status: Any) -> tuple[tuple[str, str, str], ...]:
    if not isinstance(status, Mapping):
        return ()
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or ()
    return tuple(
        (str(r.get("driver")), str(r.get("pool")), str(r.get("device")))
        for r in results
        if isinstance(r, Mapping)
    )


def _claims(section: Mapping[str, Any], *, v1: bool) -> list[CheckpointClaim]:
    claims = section.get("preparedClaims")
    claims = {} if claims is None else claims  # an empty checkpoint writes null
    if not isinstance(claims, Mapping):
        raise ValueError("preparedClaims is not an object")
    out = []
    for uid, entry in claims.items():
        if isinstance(entry, list):  # the oldest v1: the device groups themselves
            entry = {"preparedDevices": entry}
        if not isinstance(entry, Mapping):
            raise ValueError(f"preparedClaims[{uid}] is not an object")
        state = "PrepareCompleted" if v1 else str(entry.get("checkpointState") or "")
        out.append(
            CheckpointClaim(
                claim_uid=str(uid),
                state=state,
                namespace=entry.get("namespace") or None,
                name=entry.get("name") or None,
                devices=_devices(entry.get("preparedDevices")),
                allocated=_allocated(entry.get("status")),
            )
        )
    return out


def parse_checkpoint(data: bytes, path: str) -> Checkpoint:
    """The checkpoint file in any format version; ``error`` set when it does not parse.

    V2 is authoritative when present (the v1 section is the downgrade copy of the
    completed claims, facts §7)."""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        return Checkpoint(path=path, error=f"not valid JSON: {_one_line(exc)}")
    if not isinstance(doc, Mapping):
        return Checkpoint(path=path, error="not a checkpoint (not a JSON object)")
    versions = tuple(v for v in ("v1", "v2") if isinstance(doc.get(v), Mapping))
    if not versions:
        return Checkpoint(path=path, error="neither a v1 nor a v2 section")
    try:
        if "v2" in versions:
            claims = _claims(doc["v2"], v1=False)
            boot = doc["v2"].get("nodeBootID") or None
        else:
            claims, boot = _claims(doc["v1"], v1=True), None
    except (ValueError, AttributeError, TypeError) as exc:
        return Checkpoint(path=path, versions=versions, error=_one_line(exc))
    return Checkpoint(
        path=path,
        versions=versions,
        node_boot_id=str(boot) if boot else None,
        claims=tuple(sorted(claims, key=lambda c: c.claim_uid)),
    )


def read_bounded(path: Path) -> bytes:
    """A node file's bytes; OSError when unreadable, ValueError when implausibly large."""
    size = path.stat().st_size
    if size > MAX_FILE_BYTES:
        raise ValueError(f"{size} bytes, more than the {MAX_FILE_BYTES} a driver file has")
    return path.read_bytes()


def read_cdi_file(path: Path, label: str) -> CdiSpec:
    """``path`` parsed, ``label`` (the host path) as its name; unreadable is an error."""
    try:
        data = read_bounded(path)
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        return unreadable_spec(label, reason)
    return parse_cdi_spec(data, label)


def unreadable_spec(label: str, reason: str) -> CdiSpec:
    """A CDI spec file that could not be read: named, with ``error`` saying why."""
    claim = _CLAIM_SPEC.match(Path(label).name)
    return CdiSpec(
        path=label,
        scheme="claim" if claim else "other",
        claim_uid=claim.group("uid") if claim else None,
        error=f"cannot read: {reason}",
    )
