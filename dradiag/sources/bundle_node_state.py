"""``dradiag bundle --node-state DIR``: saved node state added to the bundle.

``dradiag node --save DIR`` writes ``DIR/node/<node>/`` (``sources.node_state``); a
bundle carries it as ``node/<node>/…`` so ``claim --from bundle.tar.gz`` has the node
evidence that ``claim --from DIR`` has. The folder is checked before any cluster read,
with the rules a bundle reader applies to an archive (``sources.bundle_read``): only
``node.json`` and ``files/``, plain files and folders only (no symbolic or hard links, devices, FIFOs), no name that leaves
the folder, each file within what the driver writes, the whole within a cap — and it
must load as saved node state, so a bundle never carries a copy its reader refuses.

It is not redacted: saved node state holds no credentials. ``node.json`` is the NVML
inventory (GPU/MIG UUIDs, process IDs, memory), PCI driver binding, the boot ID and
which device nodes exist; ``files/`` are the driver's CDI specs (device nodes, mounts,
hooks, ``NVIDIA_VISIBLE_DEVICES``-style env) and its checkpoint (claim UIDs, names,
namespaces, device names) — the same identifiers the bundle's ResourceClaims carry.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from dradiag.errors import InputError
from dradiag.sources.node_state import SAVED_DIR, SAVED_FILES, SAVED_META, load_saved_node_state
from dradiag.sources.node_state_files import MAX_FILE_BYTES

MAX_NODE_FILES = 10_000
"""Files in one saved node folder: CDI specs (one per prepared claim) and the checkpoint."""
MAX_NODE_BYTES = 256 * 1024**2
"""Bytes of all saved node state in one bundle."""
COLLECTOR_KIND = "NodeState"
NOT_REDACTED = "from dradiag node --save; not redacted: it holds no credentials"


@dataclass(slots=True)
class NodeStateMembers:
    """Bundle members (``node/<node>/…`` → bytes) and one manifest collector per node."""

    members: dict[str, bytes] = field(default_factory=dict)
    collectors: list[dict[str, Any]] = field(default_factory=list)


def gather(directories: Sequence[str]) -> NodeStateMembers:
    """Every saved node folder under each ``--node-state DIR``, checked; InputError (one
    line, exit 2) for a hostile, oversized, malformed or missing one, or a node twice."""
    out = NodeStateMembers()
    total = 0
    for directory in dict.fromkeys(directories):
        label = f"--node-state {directory}"
        base = Path(directory) / SAVED_DIR
        if not base.is_dir() or base.is_symlink():
            raise InputError(
                f"no saved node state ({SAVED_DIR}/<node>/{SAVED_META}; "
                "write it with dradiag node --save DIR)",
                path=label,
            )
        folders = sorted(p for p in base.iterdir() if (p / SAVED_META).is_file())
        if not folders:
            raise InputError(f"no {SAVED_DIR}/<node>/{SAVED_META} under {directory}", path=label)
        for folder in folders:
            node = folder.name
            prefix = f"{SAVED_DIR}/{node}/"
            if any(name.startswith(prefix) for name in out.members):
                raise InputError(
                    f"node {node!r} is saved under two --node-state folders", path=label
                )
            files = _checked_files(folder, label)
            load_saved_node_state(folder)  # malformed: InputError, before any cluster read
            size = 0
            for rel, data in files.items():
                out.members[prefix + rel] = data
                size += len(data)
            total += size
            if total > MAX_NODE_BYTES:
                raise InputError(
                    f"refused: saved node state is larger than {MAX_NODE_BYTES} bytes", path=label
                )
            out.collectors.append(_collector(node, len(files), size))
    return out


def _checked_files(folder: Path, label: str) -> dict[str, bytes]:
    """``folder``'s files by path relative to it, refusing what a bundle reader refuses."""
    files: dict[str, bytes] = {}
    if folder.is_symlink():
        raise InputError(f"refused: {folder} is a symbolic link", path=label)
    for current, dirs, names in os.walk(folder, followlinks=False):
        for name in sorted(dirs + names):
            path = Path(current) / name
            rel = path.relative_to(folder).as_posix()
            _check_name(rel, path, label)
            if rel not in (SAVED_META, SAVED_FILES) and not rel.startswith(f"{SAVED_FILES}/"):
                # Only what ``node --save`` writes; the bundle's own ``node/<node>/kubelet.log``
                # (``--kubelet-logs``) shares the folder and must not be overwritten.
                raise InputError(
                    f"refused: {path} is not saved node state ({SAVED_META}, {SAVED_FILES}/)",
                    path=label,
                )
            mode = os.lstat(path).st_mode
            if stat.S_ISLNK(mode):
                raise InputError(f"refused: {path} is a symbolic link", path=label)
            if stat.S_ISDIR(mode):
                continue
            if not stat.S_ISREG(mode):
                raise InputError(f"refused: {path} is not a regular file", path=label)
            if os.lstat(path).st_nlink > 1:
                raise InputError(f"refused: {path} is a hard link", path=label)
            if os.lstat(path).st_size > MAX_FILE_BYTES:
                raise InputError(
                    f"refused: {path} is larger than the {MAX_FILE_BYTES} bytes a driver file has",
                    path=label,
                )
            if len(files) >= MAX_NODE_FILES:
                raise InputError(
                    f"refused: {folder} holds more than {MAX_NODE_FILES} files", path=label
                )
            try:
                files[rel] = path.read_bytes()
            except OSError as exc:
                raise InputError(f"cannot read {path}: {exc.strerror}", path=label) from None
    return files


def _check_name(rel: str, path: Path, label: str) -> None:
    """Names an archive reader would refuse (``bundle_read._safe_name``) are refused here."""
    if "\\" in rel or "\x00" in rel or any(part in ("", ".", "..") for part in rel.split("/")):
        raise InputError(f"refused: {path} has an unsafe name", path=label)


def _collector(node: str, files: int, size: int) -> dict[str, Any]:
    return {
        "name": f"{SAVED_DIR}/{node}",
        "kind": COLLECTOR_KIND,
        "status": "collected",
        "coverage": "collected",
        "scope": node,
        "reason": NOT_REDACTED,
        "objects": files,
        "bytes": size,
        "requests": 0,
        "durationMs": 0,
        "error": None,
    }
