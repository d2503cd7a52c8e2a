"""GPUs a driver publishes twice: whole, and as its MIG devices, with nothing tying them.

With static MIG the NVIDIA driver must publish a MIG-enabled GPU only as its MIG devices;
a driver that also lists the whole GPU (NVIDIA/k8s-dra-driver-gpu#719), or an API server
that dropped the counters dynamic MIG relies on, offers the same hardware twice, and the
allocator hands it to two claims. Dynamic MIG publishes both on purpose: the GPU and its
MIG devices then consume one shared counter set, which keeps them exclusive.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from dradiag.snapshot.model import K8sObject


@dataclass(frozen=True, slots=True)
class DoublePublished:
    """One GPU published whole beside MIG devices of it, in one pool."""

    driver: str
    pool: str
    gpu: str
    """Slice device name of the whole GPU."""
    gpu_uuid: str
    migs: tuple[str, ...]
    """Slice device names of its MIG devices."""

    def devices(self) -> tuple[str, ...]:
        return (self.gpu, *self.migs)


def _attr(dev: Mapping[str, Any], name: str) -> str:
    value = (dev.get("attributes") or {}).get(name)
    if isinstance(value, Mapping):
        value = next(iter(value.values()), None)
    return str(value) if value is not None else ""


def _counter_sets(dev: Mapping[str, Any]) -> set[str]:
    return {
        str(c.get("counterSet"))
        for c in dev.get("consumesCounters") or ()
        if isinstance(c, Mapping) and c.get("counterSet")
    }


def double_published(slices: Iterable[K8sObject]) -> list[DoublePublished]:
    """Every GPU of ``slices`` (v1 shape) published whole and as MIG devices, per pool."""
    by_pool: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
    for slc in slices:
        spec = slc.get("spec") or {}
        key = (str(spec.get("driver") or ""), str((spec.get("pool") or {}).get("name") or ""))
        by_pool.setdefault(key, []).extend(
            d for d in spec.get("devices") or () if isinstance(d, Mapping)
        )
    out: list[DoublePublished] = []
    for (driver, pool), devices in sorted(by_pool.items()):
        gpus = {
            _attr(d, "uuid"): d for d in devices if _attr(d, "type") == "gpu" and _attr(d, "uuid")
        }
        if not gpus:
            continue
        for gpu_uuid, gpu in gpus.items():
            migs = tuple(
                str(d.get("name"))
                for d in devices
                if _attr(d, "parentUUID") == gpu_uuid
                and not (_counter_sets(d) & _counter_sets(gpu))
            )
            if migs:
                out.append(
                    DoublePublished(
                        driver=driver,
                        pool=pool,
                        gpu=str(gpu.get("name")),
                        gpu_uuid=gpu_uuid,
                        migs=migs,
                    )
                )
    return out
