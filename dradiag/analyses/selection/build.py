"""From a Snapshot to a :class:`DeviceInventory`: the devices in scope, the classes to use.

Only each pool's newest generation counts (older ones are obsolete, §7.10). When the
source holds no DeviceClass at all, the NVIDIA driver's built-in classes (shipped in
``dradiag/data``) stand in unless the caller opts out, and the caller says so. When
the streaming loader (``sources.fleet``) read the Snapshot, what it noted while
decoding the devices becomes the inventory's columns, so building one costs no second
pass over the devices.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import TYPE_CHECKING, Any, Literal

from dradiag.analyses.selection.devices import ANY_NODE, _attribute, _scalar_of
from dradiag.analyses.selection.grouping import LEAF_IDS_MAX
from dradiag.analyses.selection.inventory import DeviceInventory
from dradiag.snapshot.model import K8sObject, Kind, Snapshot, name_of

if TYPE_CHECKING:
    from dradiag.sources.fleet import FleetIndex


BUILTIN_CLASSES_RESOURCE = "nvidia_device_classes.yaml"


def _latest_generation_slices(snapshot: Snapshot) -> tuple[list[K8sObject], set[str]]:
    """Slices of each pool's highest generation (older ones are obsolete, §7.10), and the
    ``spec.nodeName`` of every slice (for ``Snapshot.node_names``), in one pass."""
    slices = snapshot.slices
    keys: list[tuple[str, str]] = []
    generations: list[int] = []
    slice_nodes: set[str] = set()
    newest: dict[tuple[str, str], int] = {}
    for sl in slices:
        spec = sl.get("spec") or {}
        pool = spec.get("pool") or {}
        key = (str(spec.get("driver") or ""), str(pool.get("name") or ""))
        generation = int(pool.get("generation") or 0)
        # No sentinel: the shape check admits any integer, a negative one included.
        if key not in newest or generation > newest[key]:
            newest[key] = generation
        keys.append(key)
        generations.append(generation)
        node = spec.get("nodeName")
        if node:
            slice_nodes.add(str(node))
    latest = map(operator.eq, generations, map(newest.__getitem__, keys))
    return list(itertools.compress(slices, latest)), slice_nodes


def builtin_device_classes() -> tuple[K8sObject, ...]:
    """The NVIDIA driver's DeviceClasses (nvidia-driver-facts §2), as shipped in ``data/``."""
    return _builtin_classes()


@functools.cache
def _builtin_classes() -> tuple[K8sObject, ...]:
    import yaml

    data = resources.files("dradiag").joinpath("data", BUILTIN_CLASSES_RESOURCE)
    text = data.read_text("utf-8")
    doc = yaml.safe_load(text)
    return tuple(item for item in doc.get("items") or () if isinstance(item, Mapping))


_MISSING = object()


def build_inventory(
    snapshot: Snapshot,
    *,
    nodes: Sequence[str] | None = None,
    builtin_classes_fallback: bool = True,
    grouped: bool = True,
) -> DeviceInventory:
    """Every device visible from ``nodes`` (all when None), and the DeviceClasses to use.

    Only each pool's newest generation counts. When the source holds no DeviceClass at
    all and ``builtin_classes_fallback`` is set, the NVIDIA driver's built-in classes are
    used (the caller reports that as a note). ``grouped``: see :class:`DeviceInventory`.
    """
    wanted = set(nodes) if nodes is not None else None
    raws: list[Mapping[str, Any]] = []
    drivers: list[str] = []
    pools: list[str] = []
    device_nodes: list[str | None] = []
    names: list[str] = []
    types: list[str] = []
    profiles: list[str | None] = []
    # The type/profile of a shared value object, by identity (bounded; pinned in `seen`).
    scalars: dict[int, Any] = {}
    seen: list[Any] = []

    def scalar(leaf: Any) -> Any:
        value = scalars.get(id(leaf), _MISSING)
        if value is _MISSING:
            value = _scalar_of(leaf)
            if len(scalars) < LEAF_IDS_MAX:
                scalars[id(leaf)] = value
                seen.append(leaf)
        return value

    latest, slice_nodes = _latest_generation_slices(snapshot)
    node_names: set[str] = set(snapshot.node_names(slice_nodes=slice_nodes))
    index = _fleet_index(snapshot)
    noted_all = index is not None
    in_order = True
    last: tuple[str, str, str, str] | None = None
    noted_attributes: list[dict[str, Any]] = []
    noted_capacities: list[dict[str, Any]] = []
    for sl in latest:
        spec = sl.get("spec") or {}
        driver = str(spec.get("driver") or "")
        pool = str((spec.get("pool") or {}).get("name") or "")
        slice_node = spec.get("nodeName")
        slice_node = str(slice_node) if slice_node else None
        qualified_type = f"{driver}/type"
        qualified_profile = f"{driver}/profile"
        before = len(raws)
        devices = spec.get("devices") or ()
        if not devices:
            continue
        noted = index.slices.get(id(devices)) if index is not None else None
        if noted is not None and noted.devices is devices and len(noted.names) == len(devices):
            # The streaming loader read these while decoding them (sources.fleet).
            own = noted.node_names
            if own is None:
                labels: list[str | None] = [slice_node] * len(devices)
            else:
                labels = [node or slice_node for node in own]
            if wanted is None:
                raws.extend(devices)
                noted_attributes.extend(noted.attributes)
                noted_capacities.extend(noted.capacities)
                names.extend(noted.names)
                device_nodes.extend(labels)
                types.extend(noted.types)
                profiles.extend(noted.profiles)
                if in_order:
                    # Still sorted by (node, driver, pool, name)? Then no sort is needed.
                    label = slice_node or ANY_NODE
                    first = (label, driver, pool, noted.names[0])
                    in_order = (
                        own is None
                        and (last is None or last <= first)
                        and all(
                            map(operator.le, noted.names, itertools.islice(noted.names, 1, None))
                        )
                    )
                    last = (label, driver, pool, noted.names[-1])
            else:
                in_order = False  # (sorted below, as any restricted inventory)
                for i, node in enumerate(labels):
                    if node is None or node in wanted:
                        raws.append(devices[i])
                        noted_attributes.append(noted.attributes[i])
                        noted_capacities.append(noted.capacities[i])
                        names.append(noted.names[i])
                        device_nodes.append(node)
                        types.append(noted.types[i])
                        profiles.append(noted.profiles[i])
            added = len(raws) - before
            drivers.extend([driver] * added)
            pools.extend([pool] * added)
            continue
        noted_all = in_order = False
        for raw in devices:
            if raw.__class__ is not dict and not isinstance(raw, Mapping):
                continue
            node = raw.get("nodeName")
            node = str(node) if node else slice_node
            if wanted is not None and node is not None and node not in wanted:
                continue
            attrs = raw.get("attributes") or {}
            if attrs.__class__ is dict:
                leaf = attrs.get("type")
                device_type = scalar(attrs.get(qualified_type) if leaf is None else leaf)
                leaf = attrs.get("profile")
                profile = scalar(attrs.get(qualified_profile) if leaf is None else leaf)
            else:
                device_type = _attribute(raw, driver, "type")
                profile = _attribute(raw, driver, "profile")
            raws.append(raw)
            names.append(str(raw.get("name") or ""))
            device_nodes.append(node)
            types.append(device_type if device_type.__class__ is str else str(device_type or ""))
            profiles.append(str(profile) if profile is not None else None)
        added = len(raws) - before
        drivers.extend([driver] * added)
        pools.extend([pool] * added)
    classes = {name_of(c): c for c in snapshot.device_classes}
    source: Literal["source", "builtin", "none"] = "source"
    if not classes:
        if builtin_classes_fallback:
            classes = {name_of(c): c for c in builtin_device_classes()}
            source = "builtin"
        else:
            source = "none"
    scope = sorted(wanted) if wanted is not None else sorted(node_names)
    columns: list[list[Any]] = [raws, drivers, pools, device_nodes, names, types, profiles]
    if not in_order:
        keys = list(zip([n or ANY_NODE for n in device_nodes], drivers, pools, names, strict=True))
        order = sorted(range(len(keys)), key=keys.__getitem__)  # stable, as before
        if order != list(range(len(keys))):
            columns = [[column[i] for i in order] for column in columns]
    inventory = DeviceInventory(
        (),
        classes=classes,
        classes_source=source,
        nodes=scope,
        restricted_to=sorted(wanted) if wanted is not None else None,
        grouped=grouped,
    )
    inventory._set_columns(*columns)  # type: ignore[arg-type]
    if noted_all and index is not None and index.complete:
        inventory._index = index
        if in_order:
            # The loader's per-device maps, in inventory order already.
            inventory._holders = {"attributes": noted_attributes, "capacity": noted_capacities}
    return inventory


def _fleet_index(snapshot: Snapshot) -> FleetIndex | None:
    """What the streaming loader noted about ``snapshot``'s devices, if it loaded it."""
    from dradiag.sources.fleet import fleet_index

    return fleet_index(snapshot)


def inventory_kinds_read(snapshot: Snapshot) -> dict[str, bool]:
    """Whether slices and classes were collected (an empty source proves nothing otherwise)."""
    return {
        "ResourceSlice": snapshot.is_collected(Kind.RESOURCE_SLICE),
        "DeviceClass": snapshot.is_collected(Kind.DEVICE_CLASS),
    }
