"""Reading the GPUs through NVML (nvidia-ml-py, module ``pynvml``), imported lazily.

nvidia-ml-py is the optional extra ``dradiag[node]``: without it, without a driver, or in
a container without the devices, the read is one reason ("NVML unavailable: …") and the
rest of ``dradiag node`` runs. Each per-device call may be unsupported on some GPU or
driver (MIG calls on a GPU without MIG, process lists without permission), so one failed
call leaves that value empty instead of losing the GPU.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, TypeVar

from dradiag.snapshot.node_state import MigInstance, NvmlGpu, NvmlProcess, NvmlState

T = TypeVar("T")

INSTALL_HINT = "nvidia-ml-py is not installed (pip install 'dradiag[node]')"
_PROFILE_SCAN = 16
"""GI profile indexes to ask about (NVML defines fewer; unknown ones fail and are skipped)."""


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def normalize_pci_bus_id(bus_id: str) -> str:
    """NVML's ``00000000:65:00.0`` as sysfs writes it: ``0000:65:00.0``, lowercase."""
    bus_id = bus_id.strip().lower()
    domain, sep, rest = bus_id.partition(":")
    if sep and len(domain) == 8:
        domain = domain[4:]
    return f"{domain}{sep}{rest}"


def _call(fn: Callable[..., T], *args: Any) -> T | None:
    try:
        return fn(*args)
    except Exception:  # pynvml.NVMLError: NOT_SUPPORTED, NO_PERMISSION, ...
        return None


def _profiles(nvml: Any, handle: Any) -> dict[int, str]:
    """GI profile id → go-nvlib's profile string ``<slices>g.<GB>gb`` (facts §1.3)."""
    out: dict[int, str] = {}
    for index in range(_PROFILE_SCAN):
        info = _call(nvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, index)
        if info is None:
            continue
        gb = math.ceil(int(info.memorySizeMB) / 1024)
        out.setdefault(int(info.id), f"{int(info.sliceCount)}g.{gb}gb")
    return out


def _mig_instances(nvml: Any, handle: Any) -> tuple[MigInstance, ...]:
    count = _call(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
    profiles = _profiles(nvml, handle)
    out = []
    for i in range(int(count)):
        mig = _call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
        if mig is None:
            continue
        gi_id = _call(nvml.nvmlDeviceGetGpuInstanceId, mig)
        if gi_id is None:
            continue
        gi = _call(nvml.nvmlDeviceGetGpuInstanceById, handle, gi_id)
        info = _call(nvml.nvmlGpuInstanceGetInfo, gi) if gi is not None else None
        profile_id = int(info.profileId) if info is not None else None
        placement = getattr(info, "placement", None)
        uuid = _call(nvml.nvmlDeviceGetUUID, mig)
        memory = _call(nvml.nvmlDeviceGetMemoryInfo, mig)
        out.append(
            MigInstance(
                gi_id=int(gi_id),
                ci_id=_call(nvml.nvmlDeviceGetComputeInstanceId, mig),
                profile=profiles.get(profile_id) if profile_id is not None else None,
                gi_profile_id=profile_id,
                placement_start=int(placement.start) if placement is not None else None,
                placement_size=int(placement.size) if placement is not None else None,
                mig_uuid=_text(uuid) if uuid is not None else None,
                memory_bytes=int(memory.total) if memory is not None else None,
            )
        )
    return tuple(sorted(out, key=lambda m: (m.gi_id, m.ci_id or 0)))


def _processes(nvml: Any, handle: Any, on_uuid: str) -> list[NvmlProcess]:
    found = _call(nvml.nvmlDeviceGetComputeRunningProcesses, handle) or []
    return [
        NvmlProcess(
            pid=int(p.pid),
            used_memory_bytes=getattr(p, "usedGpuMemory", None),
            on_uuid=on_uuid,
        )
        for p in found
    ]


def _gpu(nvml: Any, index: int) -> NvmlGpu:
    handle = nvml.nvmlDeviceGetHandleByIndex(index)
    uuid = _text(nvml.nvmlDeviceGetUUID(handle))
    pci = _call(nvml.nvmlDeviceGetPciInfo, handle)
    name = _call(nvml.nvmlDeviceGetName, handle)
    memory = _call(nvml.nvmlDeviceGetMemoryInfo, handle)
    mode = _call(nvml.nvmlDeviceGetMigMode, handle)
    current = bool(mode[0]) if mode is not None else None
    mig = _mig_instances(nvml, handle) if current else ()
    processes = _processes(nvml, handle, uuid)
    for m in mig:
        mig_handle = _mig_handle(nvml, handle, m.mig_uuid)
        if mig_handle is not None and m.mig_uuid:
            processes += _processes(nvml, mig_handle, m.mig_uuid)
    return NvmlGpu(
        index=index,
        minor=_call(nvml.nvmlDeviceGetMinorNumber, handle),
        gpu_uuid=uuid,
        pci_bus_id=normalize_pci_bus_id(_text(pci.busId)) if pci is not None else None,
        product=_text(name) if name is not None else None,
        memory_bytes=int(memory.total) if memory is not None else None,
        mig_current=current,
        mig_pending=bool(mode[1]) if mode is not None else None,
        mig=mig,
        processes=tuple(processes),
    )


def _mig_handle(nvml: Any, handle: Any, mig_uuid: str | None) -> Any:
    if not mig_uuid:
        return None
    count = _call(nvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0
    for i in range(int(count)):
        mig = _call(nvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
        if mig is not None and _text(_call(nvml.nvmlDeviceGetUUID, mig) or "") == mig_uuid:
            return mig
    return None


def _cuda_version(value: int | None) -> str | None:
    if value is None:
        return None
    return f"{int(value) // 1000}.{int(value) % 1000 // 10}"


def read_nvml(nvml: Any = None) -> tuple[NvmlState | None, str | None]:
    """(the NVML state, None), or (None, the reason NVML is unavailable).

    ``nvml`` is the ``pynvml`` module, or a stand-in with the same functions (tests)."""
    if nvml is None:
        import importlib

        try:
            nvml = importlib.import_module("pynvml")
        except ImportError:
            return None, INSTALL_HINT
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound, _DriverNotLoaded, OSError
        return None, _text(exc) or type(exc).__name__
    try:
        count = int(nvml.nvmlDeviceGetCount())
        gpus = tuple(_gpu(nvml, i) for i in range(count))
        driver = _call(nvml.nvmlSystemGetDriverVersion)
        state = NvmlState(
            driver_version=_text(driver) if driver is not None else None,
            cuda_driver_version=_cuda_version(_call(nvml.nvmlSystemGetCudaDriverVersion)),
            gpus=gpus,
        )
    except Exception as exc:
        return None, f"reading the GPUs failed: {_text(exc) or type(exc).__name__}"
    finally:
        _call(nvml.nvmlShutdown)
    return state, None
