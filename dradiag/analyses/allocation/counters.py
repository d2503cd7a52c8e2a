"""Shared counters (partitionable devices) and consumable capacity, in exact nano-units.

Counters (k8s-dra-semantics §3.9): a device's ``consumesCounters`` must fit in what its
pool's counter sets have left: capacity minus what every already-allocated device of
that pool consumes (anywhere in the cluster) minus what this attempt has picked. As
upstream, the bookkeeping is keyed by pool *name*, and a check fails when any counter
of the pool is over-committed, not only the ones the device consumes.

Consumable capacity (§3.10): a device with ``allowMultipleAllocations`` is shared; each
allocation consumes the requested amount rounded up by the capacity's
``requestPolicy`` (or its default, or the whole capacity when nothing was asked).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from dradiag.analyses.allocation.candidates import DeviceEntry, DeviceRef
from dradiag.analyses.pools import Pool, quantity_nanos
from dradiag.snapshot.model import name_of

__all__ = [
    "CounterState",
    "capacity_fits",
    "consumed_capacity",
    "format_nanos",
]

NANO = 1_000_000_000


def format_nanos(nanos: int, fmt: str = "BinarySI") -> str:
    """Canonical Kubernetes quantity text of a nano-unit value."""
    from dradiag.analyses.cel.quantity import Quantity

    return str(Quantity(nanos, fmt))


class CounterState:
    """Counters available per pool and consumed by the current attempt.

    ``is_allocated`` says whether a device counts as allocated in the cluster;
    ``pool_devices`` yields every device of a pool (node-targeting and not) once.
    """

    def __init__(
        self,
        is_allocated: Callable[[DeviceRef], bool],
        pool_devices: Callable[[Pool], Iterable[DeviceEntry]],
    ) -> None:
        self._is_allocated = is_allocated
        self._pool_devices = pool_devices
        self.available: dict[str, dict[str, dict[str, int]]] = {}
        self.consumed: dict[str, dict[str, dict[str, int]]] = {}
        self.holders: dict[str, dict[str, dict[str, list[DeviceRef]]]] = {}
        self.overcommitted: set[str] = set()
        """Scopes where allocated devices already consume more than a counter holds."""
        """pool → counter set → counter → allocated devices consuming it (for explanations)."""

    @staticmethod
    def scope(entry: DeviceEntry) -> str:
        """Where the device's counters live: its pool (≥1.35) or, ≤1.34, its slice."""
        if entry.pool.slice_counter_sets is not None:
            return "slice:" + name_of(entry.slice)
        return entry.pool.name

    def _members(self, device: DeviceEntry) -> tuple[Any, Iterable[DeviceEntry]]:
        """The scope's counter sets and the devices that draw on them."""
        pool = device.pool
        if pool.slice_counter_sets is not None:
            sets = pool.slice_counter_sets.get(name_of(device.slice), {})
            members: Iterable[DeviceEntry] = (
                e for e in self._pool_devices(pool) if e.slice is device.slice
            )
            return sets, members
        return pool.counter_sets, self._pool_devices(pool)

    def available_for(self, device: DeviceEntry) -> dict[str, dict[str, int]]:
        """Counters left where ``device`` draws from, after the cluster's allocations."""
        key = self.scope(device)
        found = self.available.get(key)
        if found is not None:
            return found
        sets, members = self._members(device)
        available = {name: dict(counters) for name, counters in sets.items()}
        is_allocated = self._is_allocated
        for entry in members:
            if not entry.has_counters or not is_allocated(entry.ref):
                continue
            for set_name, counters in entry.consumes:
                have = available.get(set_name)
                if have is None:
                    continue
                for counter, value in counters:
                    if counter in have:
                        have[counter] -= value
        self.available[key] = available
        if any(left < 0 for counters in available.values() for left in counters.values()):
            self.overcommitted.add(key)
        return available

    def holders_for(self, device: DeviceEntry) -> dict[str, dict[str, list[DeviceRef]]]:
        """Counter set → counter → allocated devices consuming it, where ``device`` draws
        from (only explanations ask, so it is worked out on demand)."""
        key = self.scope(device)
        found = self.holders.get(key)
        if found is not None:
            return found
        sets, members = self._members(device)
        holders: dict[str, dict[str, list[DeviceRef]]] = {}
        for entry in members:
            if not entry.has_counters or not self._is_allocated(entry.ref):
                continue
            for set_name, counters in entry.consumes:
                have = sets.get(set_name)
                if have is None:
                    continue
                for counter, _value in counters:
                    if counter in have:
                        holders.setdefault(set_name, {}).setdefault(counter, []).append(entry.ref)
        self.holders[key] = holders
        return holders

    def check_and_consume(self, entry: DeviceEntry) -> bool:
        """``checkAvailableCounters``: consume the device's counters if they all fit.

        Upstream re-checks every counter of the pool after adding the device; only the
        device's own counters can newly go short, and an already over-committed counter
        fails every device (negative balances count as none available), so checking
        those two is equivalent.
        """
        available = self.available_for(entry)
        key = self.scope(entry)
        consumed = self.consumed.setdefault(key, {})
        for set_name, counters in entry.consumes:
            used = consumed.setdefault(set_name, {})
            for counter, value in counters:
                used[counter] = used.get(counter, 0) + value
        fits = key not in self.overcommitted
        if fits:
            for set_name, counters in entry.consumes:
                have = available.get(set_name)
                if have is None:
                    continue
                used = consumed[set_name]
                for counter, _value in counters:
                    left = have.get(counter)
                    if left is not None and left < used[counter]:
                        fits = False
                        break
                if not fits:
                    break
        if not fits:
            self.release(entry)
        return fits

    def release(self, entry: DeviceEntry) -> None:
        """Give back what :meth:`check_and_consume` took for ``entry``."""
        consumed = self.consumed.get(self.scope(entry), {})
        for set_name, counters in entry.consumes:
            used = consumed.setdefault(set_name, {})
            for counter, value in counters:
                used[counter] = used.get(counter, 0) - value

    def fits_now(self, entry: DeviceEntry) -> bool:
        """Whether the device's counters fit given only the cluster's allocations."""
        available = self.available_for(entry)
        for set_name, counters in entry.consumes:
            have = available.get(set_name, {})
            for counter, value in counters:
                if have.get(counter, 0) < value:
                    return False
        # available_for records the scopes with a negative balance; ``available`` itself
        # is never changed afterwards (the attempt's use is kept in ``consumed``).
        return self.scope(entry) not in self.overcommitted

    def short_counters(self, entry: DeviceEntry) -> list[tuple[str, str, list[DeviceRef]]]:
        """(counter set, counter, allocated devices consuming it) for each counter that is short."""
        available = self.available_for(entry)
        holders = self.holders_for(entry)
        out = []
        for set_name, counters in entry.consumes:
            have = available.get(set_name, {})
            for counter, value in counters:
                if have.get(counter, 0) < value:
                    out.append((set_name, counter, holders.get(set_name, {}).get(counter, [])))
        return out


# -- consumable capacity -----------------------------------------------------------------


def _q(raw: Any) -> int:
    return quantity_nanos(str(raw))


def _go_mod(a: int, b: int) -> int:
    """Go's truncated ``%``."""
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def _ceil_units(nanos: int) -> int:
    """``Quantity.Value()``: whole units, rounded up."""
    return -((-nanos) // NANO)


def _consumed_one(requested: str | None, capacity: Mapping[str, Any]) -> tuple[int, str]:
    policy = capacity.get("requestPolicy")
    if requested is None:
        if isinstance(policy, Mapping) and policy.get("default") is not None:
            return _q(policy["default"]), str(policy["default"])
        return _q(capacity.get("value", "0")), str(capacity.get("value", "0"))
    req = _q(requested)
    if not isinstance(policy, Mapping):
        return req, str(requested)
    valid_range = policy.get("validRange")
    if isinstance(valid_range, Mapping) and valid_range.get("min") is not None:
        low = _q(valid_range["min"])
        if req < low:
            return low, str(valid_range["min"])
        if valid_range.get("step") is None:
            return req, str(requested)
        step = _ceil_units(_q(valid_range["step"]))
        base = _ceil_units(low)
        added = _ceil_units(req) - base
        n = int(added / step) if step else 0
        if step and _go_mod(added, step) != 0:
            n += 1
        value = (base + step * n) * NANO
        return value, format_nanos(value)
    valid_values = policy.get("validValues")
    if valid_values:
        for candidate in valid_values:
            if req <= _q(candidate):
                return _q(candidate), str(candidate)
    return req, str(requested)


def _violates(value: int, policy: Any) -> bool:
    if not isinstance(policy, Mapping):
        return False
    if policy.get("default") is not None and value == _q(policy["default"]):
        return False
    valid_range = policy.get("validRange")
    if isinstance(valid_range, Mapping):
        if valid_range.get("max") is not None and value > _q(valid_range["max"]):
            return True
        if valid_range.get("step") is not None:
            step = _ceil_units(_q(valid_range["step"]))
            low = _ceil_units(_q(valid_range.get("min") or "0"))
            if step and _go_mod(_ceil_units(value) - low, step) != 0:
                return True
        return False
    values = policy.get("validValues") or []
    if values:
        return all(value != _q(v) for v in values)
    return False


def _requests_of(capacity_requests: Mapping[str, Any] | None) -> Mapping[str, Any]:
    if not isinstance(capacity_requests, Mapping):
        return {}
    return capacity_requests.get("requests") or {}


def capacity_fits(
    entry: DeviceEntry,
    capacity_requests: Mapping[str, Any] | None,
    already: Mapping[str, int],
    allocating: Mapping[str, int],
) -> bool | None:
    """``CmpRequestOverCapacity``: None when a requested capacity is not defined on the
    device (the device is skipped silently), else whether this allocation fits."""
    requests = _requests_of(capacity_requests)
    capacity = entry.capacity
    if any(name not in capacity for name in requests):
        return None
    try:
        return _capacity_fits(capacity, requests, already, allocating)
    except ValueError:
        # A quantity that does not parse (a junk request, policy or capacity value):
        # the device cannot be shown to fit, and the allocation is explained as such.
        return False


def _capacity_fits(
    capacity: Mapping[str, Any],
    requests: Mapping[str, Any],
    already: Mapping[str, int],
    allocating: Mapping[str, int],
) -> bool:
    for name, cap in capacity.items():
        if not isinstance(cap, Mapping):
            continue
        requested = requests.get(name)
        value, _text = _consumed_one(None if requested is None else str(requested), cap)
        if _violates(value, cap.get("requestPolicy")):
            return False
        total = already.get(name, 0) + value + allocating.get(name, 0)
        if total > _q(cap.get("value", "0")):
            return False
    return True


def consumed_capacity(
    entry: DeviceEntry, capacity_requests: Mapping[str, Any] | None
) -> dict[str, tuple[int, str]]:
    """``GetConsumedCapacityFromRequest``: per capacity name, (nanos, quantity text)."""
    requests = _requests_of(capacity_requests)
    out: dict[str, tuple[int, str]] = {}
    for name, cap in entry.capacity.items():
        if not isinstance(cap, Mapping):
            continue
        requested = requests.get(name)
        try:
            out[str(name)] = _consumed_one(None if requested is None else str(requested), cap)
        except ValueError:
            continue  # an unreadable quantity consumes nothing that can be counted
    return out
