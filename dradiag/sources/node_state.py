"""Collecting one node's state (NVML, CDI specs, checkpoint, PCI binding), saving and loading it.

Read-only. Every host path is taken under ``host_root`` so the command runs from a
debug pod with the host's filesystem mounted (``kubectl debug node/N`` mounts it at
``/host``). The saved form (``--save DIR``) is ``DIR/node/<node>/``: ``node.json`` (NVML,
PCI binding, boot ID, which device nodes exist, and the host paths read) and, under
``files/``, verbatim copies of the CDI specs and the checkpoint at their host paths — so
the saved copy is itself a host root, read back by the same parsers, and its files are
the evidence a support engineer quotes.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any, Protocol

from dradiag.errors import InputError
from dradiag.snapshot.node_state import (
    CdiDeviceNode,
    CdiSpec,
    MigInstance,
    NodeState,
    NvmlGpu,
    NvmlProcess,
    NvmlState,
    PciFunction,
)
from dradiag.sources.node_state_files import (
    CDI_SUFFIXES,
    MAX_FILE_BYTES,
    parse_cdi_spec,
    parse_checkpoint,
    read_bounded,
    read_cdi_file,
    unreadable_spec,
)

logger = logging.getLogger(__name__)

DEFAULT_CDI_DIRS = ("/var/run/cdi", "/etc/cdi")
DEFAULT_CHECKPOINT = "/var/lib/kubelet/plugins/gpu.nvidia.com/checkpoint.json"
BOOT_ID = "/proc/sys/kernel/random/boot_id"
PCI_DEVICES = "/sys/bus/pci/devices"
NVIDIA_VENDOR = "0x10de"
SAVED_DIR = "node"
SAVED_META = "node.json"
SAVED_FILES = "files"
SAVED_FORMAT = "dradiag.node-state/v1"


def under(root: str, host_path: str) -> Path:
    """``host_path`` as seen from a process whose view of the host is at ``root``."""
    return Path(root) / host_path.lstrip("/")


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _cdi_specs(root: str, dirs: Iterable[str]) -> tuple[list[CdiSpec], dict[str, bytes]]:
    specs: list[CdiSpec] = []
    raw: dict[str, bytes] = {}
    for host_dir in dirs:
        local = under(root, host_dir)
        if not local.is_dir():
            continue
        for path in sorted(local.iterdir()):
            if path.suffix not in CDI_SUFFIXES or not path.is_file():
                continue
            label = f"{host_dir.rstrip('/')}/{path.name}"
            spec = read_cdi_file(path, label)
            specs.append(spec)
            if spec.error is None or not spec.error.startswith("cannot read"):
                try:
                    raw[label] = read_bounded(path)
                except (OSError, ValueError):
                    pass
    return specs, raw


def _with_node_checks(
    specs: Iterable[CdiSpec], exists: Mapping[str, bool] | None, root: str
) -> tuple[CdiSpec, ...]:
    """Each device node marked with whether it exists (live: under ``root``; saved: the map)."""

    def mark(node: CdiDeviceNode) -> CdiDeviceNode:
        host = node.host_path or node.path
        if exists is not None:
            return replace(node, exists=exists.get(host))
        return replace(node, exists=under(root, host).exists())

    out = []
    for spec in specs:
        devices = tuple(
            replace(d, device_nodes=tuple(mark(n) for n in d.device_nodes)) for d in spec.devices
        )
        out.append(
            replace(
                spec,
                devices=devices,
                spec_device_nodes=tuple(mark(n) for n in spec.spec_device_nodes),
            )
        )
    return tuple(out)


def _pci(root: str) -> tuple[tuple[PciFunction, ...] | None, str | None]:
    base = under(root, PCI_DEVICES)
    if not base.is_dir():
        return None, f"{base} is not readable (mount the host's /sys)"
    found = []
    for dev in sorted(base.iterdir()):
        if _read_text(dev / "vendor") != NVIDIA_VENDOR:
            continue
        cls = _read_text(dev / "class") or ""
        if not cls.startswith(("0x0300", "0x0302")):
            continue  # audio and USB functions of the same card are not GPUs
        driver = dev / "driver"
        bound = os.path.basename(os.readlink(driver)) if driver.is_symlink() else None
        found.append(
            PciFunction(pci_bus_id=dev.name, driver=bound, device_id=_read_text(dev / "device"))
        )
    return tuple(found), None


def collect_node_state(
    node: str,
    *,
    host_root: str = "/",
    cdi_dirs: Iterable[str] = DEFAULT_CDI_DIRS,
    checkpoint_path: str = DEFAULT_CHECKPOINT,
    use_nvml: bool = True,
    nvml: Any = None,
    collected_at: str | None = None,
) -> tuple[NodeState, dict[str, bytes]]:
    """Read the node now; also the verbatim bytes of the files read, by host path."""
    from dradiag.sources.node_state_nvml import read_nvml

    dirs = tuple(cdi_dirs)
    specs, raw = _cdi_specs(host_root, dirs)
    checkpoint = None
    local = under(host_root, checkpoint_path)
    if local.exists():
        try:
            data = read_bounded(local)
        except (OSError, ValueError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            from dradiag.snapshot.node_state import Checkpoint

            checkpoint = Checkpoint(path=checkpoint_path, error=f"cannot read: {reason}")
        else:
            raw[checkpoint_path] = data
            checkpoint = parse_checkpoint(data, checkpoint_path)
    nvml_state, nvml_reason = read_nvml(nvml) if use_nvml else (None, "not read (--no-nvml)")
    pci, pci_reason = _pci(host_root)
    boot = _read_text(under(host_root, BOOT_ID))
    return (
        NodeState(
            node=node,
            collected_at=collected_at,
            host_root=host_root,
            source="live",
            boot_id=boot,
            nvml=nvml_state,
            nvml_unavailable=nvml_reason,
            cdi_dirs=dirs,
            cdi_specs=_with_node_checks(specs, None, host_root),
            checkpoint_path=checkpoint_path,
            checkpoint=checkpoint,
            pci=pci,
            pci_unavailable=pci_reason,
        ),
        raw,
    )


# -- the saved form --------------------------------------------------------------------


def save_node_state(state: NodeState, raw: Mapping[str, bytes], directory: str) -> Path:
    """Write ``directory/node/<node>/`` (see the module docstring); returns that folder."""
    if "/" in state.node or state.node in ("", ".", ".."):
        raise InputError(f"node name {state.node!r} cannot name a folder", path=directory)
    folder = Path(directory) / SAVED_DIR / state.node
    try:
        for host_path, data in raw.items():
            target = folder / SAVED_FILES / host_path.lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        exists = {
            n.host_path or n.path: n.exists
            for spec in state.cdi_specs
            for n in (*spec.spec_device_nodes, *(x for d in spec.devices for x in d.device_nodes))
            if n.exists is not None
        }
        meta = {
            "format": SAVED_FORMAT,
            "node": state.node,
            "collectedAt": state.collected_at,
            "hostRoot": state.host_root,
            "bootID": state.boot_id,
            "nvml": asdict(state.nvml) if state.nvml is not None else None,
            "nvmlUnavailable": state.nvml_unavailable,
            "cdiDirs": list(state.cdi_dirs),
            "checkpointPath": state.checkpoint_path,
            "pci": [asdict(p) for p in state.pci] if state.pci is not None else None,
            "pciUnavailable": state.pci_unavailable,
            "deviceNodesExist": exists,
            "unreadable": {s.path: s.error for s in state.cdi_specs if s.path not in raw},
        }
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SAVED_META).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    except OSError as exc:
        raise InputError(f"cannot write the node state: {exc.strerror}", path=str(folder)) from None
    return folder


def _nvml_from(data: Any) -> NvmlState | None:
    if not isinstance(data, Mapping):
        return None
    gpus = []
    for g in data.get("gpus") or ():
        gpus.append(
            NvmlGpu(
                **{
                    k: g.get(k)
                    for k in NvmlGpu.__dataclass_fields__
                    if k not in ("mig", "processes")
                },
                mig=tuple(MigInstance(**m) for m in g.get("mig") or ()),
                processes=tuple(NvmlProcess(**p) for p in g.get("processes") or ()),
            )
        )
    return NvmlState(
        driver_version=data.get("driver_version"),
        cuda_driver_version=data.get("cuda_driver_version"),
        gpus=tuple(gpus),
    )


class SavedTree(Protocol):
    """Read access to one saved ``node/<node>/`` folder: on disk or in a bundle's memory."""

    label: str
    """What the folder is called in messages and in ``NodeState.source``."""

    def read(self, rel: str) -> bytes | None:
        """A regular file's bytes (``rel`` is relative to the folder); None when absent."""

    def files_in(self, rel: str) -> list[str]:
        """The names of the regular files directly in folder ``rel``, sorted."""


class _DirTree:
    """A saved folder on disk; links are passed over (they could point anywhere)."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.label = str(folder)

    def read(self, rel: str) -> bytes | None:
        path = self.folder / rel
        if not path.is_file() or path.is_symlink():
            return None
        return read_bounded(path)

    def files_in(self, rel: str) -> list[str]:
        path = self.folder / rel
        if not path.is_dir():
            return []
        return sorted(p.name for p in path.iterdir() if p.is_file() and not p.is_symlink())


class MemberTree:
    """A saved folder inside a bundle read into memory (``bundle_read.read_archive``),
    whose reader has already refused links, ``..`` and oversized members."""

    def __init__(self, members: Mapping[str, bytes], prefix: str, label: str) -> None:
        self.members = members
        self.prefix = prefix.rstrip("/") + "/"
        self.label = label

    def read(self, rel: str) -> bytes | None:
        data = self.members.get(self.prefix + rel.strip("/"))
        if data is not None and len(data) > MAX_FILE_BYTES:
            raise ValueError(f"{len(data)} bytes, more than the {MAX_FILE_BYTES} a driver file has")
        return data

    def files_in(self, rel: str) -> list[str]:
        base = self.prefix + rel.strip("/") + "/"
        return sorted(
            name[len(base) :]
            for name in self.members
            if name.startswith(base) and "/" not in name[len(base) :]
        )


def _saved_cdi_specs(tree: SavedTree, dirs: Iterable[str]) -> list[CdiSpec]:
    specs = []
    for host_dir in dirs:
        rel_dir = f"{SAVED_FILES}/{host_dir.strip('/')}"
        for name in tree.files_in(rel_dir):
            if Path(name).suffix not in CDI_SUFFIXES:
                continue
            label = f"{host_dir.rstrip('/')}/{name}"
            try:
                data = tree.read(f"{rel_dir}/{name}")
            except (OSError, ValueError) as exc:
                reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
                specs.append(unreadable_spec(label, reason))
                continue
            if data is not None:
                specs.append(parse_cdi_spec(data, label))
    return specs


def load_saved_node_state(folder: Path) -> NodeState:
    """A ``node/<node>/`` folder back into a NodeState; InputError when it is malformed."""
    return load_saved_tree(_DirTree(folder), folder.name)


def load_saved_tree(tree: SavedTree, folder_name: str) -> NodeState:
    """A saved node state from either kind of tree (the same parsers for a directory and
    a bundle archive, so both give the same evidence); InputError when it is malformed."""
    meta_label = f"{tree.label}/{SAVED_META}"
    try:
        raw_meta = tree.read(SAVED_META)
        if raw_meta is None:
            raise ValueError(f"{SAVED_META} is missing")
        meta = json.loads(raw_meta.decode("utf-8"))
        if not isinstance(meta, dict) or meta.get("format") != SAVED_FORMAT:
            raise ValueError(f"not a {SAVED_FORMAT} record")
        dirs = tuple(str(d) for d in meta.get("cdiDirs") or ())
        checkpoint_path = str(meta.get("checkpointPath") or "")
        for host_path in (*dirs, checkpoint_path):
            # Reading a saved copy never leaves its folder (DESIGN §8, bundles).
            if ".." in Path(host_path).parts:
                raise ValueError(f"host path {host_path!r} leaves the saved folder")
        specs = _saved_cdi_specs(tree, dirs)
        unreadable = meta.get("unreadable") or {}
        specs += [
            CdiSpec(path=p, scheme="other", error=e) for p, e in sorted(unreadable.items()) if e
        ]
        checkpoint = None
        data = (
            tree.read(f"{SAVED_FILES}/{checkpoint_path.lstrip('/')}") if checkpoint_path else None
        )
        if data is not None:
            checkpoint = parse_checkpoint(data, checkpoint_path)
        pci = meta.get("pci")
        state = NodeState(
            node=str(meta.get("node") or folder_name),
            collected_at=meta.get("collectedAt"),
            host_root=str(meta.get("hostRoot") or "/"),
            source=tree.label,
            boot_id=meta.get("bootID"),
            nvml=_nvml_from(meta.get("nvml")),
            nvml_unavailable=meta.get("nvmlUnavailable"),
            cdi_dirs=dirs,
            cdi_specs=_with_node_checks(specs, meta.get("deviceNodesExist") or {}, ""),
            checkpoint_path=checkpoint_path,
            checkpoint=checkpoint,
            pci=tuple(PciFunction(**p) for p in pci) if isinstance(pci, list) else None,
            pci_unavailable=meta.get("pciUnavailable"),
        )
    except (OSError, ValueError, TypeError, AttributeError, UnicodeDecodeError) as exc:
        raise InputError(f"saved node state is malformed: {exc}", path=meta_label) from None
    return state


def saved_node_folders(root: Path) -> list[Path]:
    """The ``node/<node>/`` folders (with a ``node.json``) directly under ``root``."""
    base = root / SAVED_DIR
    if not base.is_dir():
        return []
    return sorted(p for p in base.iterdir() if (p / SAVED_META).is_file())


def load_saved_node_states(root: str) -> dict[str, NodeState]:
    """Every saved node state under a ``--from`` directory, by node name."""
    path = Path(root)
    if not path.is_dir():
        return {}
    states = [load_saved_node_state(folder) for folder in saved_node_folders(path)]
    return {s.node: s for s in states}


def saved_member_prefixes(members: Mapping[str, bytes]) -> list[str]:
    """The ``node/<node>`` prefixes of a bundle's members that hold a ``node.json``."""
    return sorted(
        name[: -len(SAVED_META) - 1]
        for name in members
        if name.startswith(f"{SAVED_DIR}/")
        and name.count("/") == 2
        and name.endswith(f"/{SAVED_META}")
    )


def load_saved_node_members(members: Mapping[str, bytes], label: str) -> dict[str, NodeState]:
    """Every saved node state inside a bundle held in memory, by node name: what
    ``--from DIR`` gives for the same files unpacked."""
    states = [
        load_saved_tree(MemberTree(members, prefix, f"{label}/{prefix}"), prefix.split("/")[1])
        for prefix in saved_member_prefixes(members)
    ]
    return {s.node: s for s in states}
