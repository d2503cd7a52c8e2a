"""How many GPUs a workload's log says it sees: ``nvidia-smi -L``, ``CUDA_VISIBLE_DEVICES``
and device-count lines.

A container given a claim's CDI devices sees exactly the allocated GPUs; a runtime that
ignores CDI (CDI disabled, with the nvidia runtime as default) hands it every GPU of the
node. Comparing what the workload printed with what the claim allocated tells the two
apart without access to the node. Pure: text in, counts out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_SMI_GPU = re.compile(r"^\s*GPU (?P<index>\d+): .*?\(UUID: (?P<uuid>GPU-[0-9a-fA-F-]+)\)", re.M)
"""``nvidia-smi -L``: ``GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-…)`` (MIG lines start with MIG)."""
_SMI_MIG = re.compile(r"^\s*MIG \S+\s+Device\s+\d+: \(UUID: (?P<uuid>MIG-[0-9a-fA-F-]+)\)", re.M)
_CUDA_VISIBLE = re.compile(r"\bCUDA_VISIBLE_DEVICES=(?P<value>[^\s\"']*)")
_DEVICE_COUNT = re.compile(
    r"(?i)\b(?:cuda[ _.]?)?device[ _]?count(?:\(\))?\s*(?:[:=]|is|returned)\s*(?P<n>\d+)"
    r"|\b(?:found|detected)\s+(?P<n2>\d+)\s+(?:CUDA[- ]capable |NVIDIA )?GPUs?\b"
)


@dataclass(frozen=True, slots=True)
class VisibleGPUs:
    """The GPUs one log shows, and the line that shows them."""

    count: int
    line: str
    mig: bool = False


def visible_gpus(text: str) -> VisibleGPUs | None:
    """The number of GPUs the log shows (the largest any one signal says), or None."""
    found: list[VisibleGPUs] = []
    gpus = {m.group("uuid") for m in _SMI_GPU.finditer(text)}
    if gpus:
        first = _SMI_GPU.search(text)
        found.append(VisibleGPUs(len(gpus), first.group(0).strip() if first else ""))
    migs = {m.group("uuid") for m in _SMI_MIG.finditer(text)}
    if migs:
        found.append(VisibleGPUs(len(migs), "", mig=True))
    for m in _CUDA_VISIBLE.finditer(text):
        value = m.group("value").strip(",")
        if value and value not in ("-1", "none", "void", "all"):
            found.append(VisibleGPUs(len([v for v in value.split(",") if v]), m.group(0)))
    for m in _DEVICE_COUNT.finditer(text):
        n = int(m.group("n") or m.group("n2") or 0)
        if n:
            found.append(VisibleGPUs(n, m.group(0)))
    full = [f for f in found if not f.mig]
    if not found:
        return None
    return max(full or found, key=lambda f: f.count)
