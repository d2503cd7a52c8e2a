"""Differential test: the allocator against an exhaustive search written from the spec.

Random small instances (two to five devices, some shared through
``allowMultipleAllocations``, capacities with and without request policies, shared
counters, at most three requests with ``ExactCount``, ``All`` or ``firstAvailable``,
``matchAttribute`` and ``distinctAttribute`` constraints, one or two claims: in one pod,
or one after the other with the first claim's allocation stored). For each, :class:`Oracle` enumerates every
assignment of devices to requests and decides feasibility from k8s-dra-semantics
§3.4–3.10 alone; it shares no code with the allocator (its own rounding, counters,
constraint and capacity arithmetic, on plain integers). The allocator must agree on
every instance, with explanations (whose funnels may prove infeasibility and skip the
search) and without, and each allocation it returns must be valid for the oracle,
shareID and consumedCapacity included.

Where the Go allocator is not exhaustive, the generator stays out of the shape instead of
teaching the oracle the allocator's path (each is documented upstream behaviour, and
tested on its own elsewhere):

- ``distinctAttribute`` covers only requests of count 1: upstream remembers one value per
  request name, so with count > 1 the result depends on the search path (§3.5).
- no constraint covers an ``All`` request: a violation there is an error, raised where the
  search first meets it (§3.5).
- every shared device has a capacity: upstream's in-attempt bookkeeping keeps an empty
  entry for one without, after backtracking too, so its later shares skip the counter
  check (reproduced, not a rule an exhaustive search can state).
- scalar attributes only (with list types the narrowed intersection is kept on removal).
- the oracle decides for Kubernetes 1.37 gates. Before 1.37 the allocator leaks reserved
  state on rejection and on backtracking (kubernetes/kubernetes#140436): there, every
  allocation must still be valid, and every feasible instance it misses must be flagged
  as that upstream bug (``Simulation.upstream_bug``), and only those.

Each run checks ``DRADIAG_DIFF_INSTANCES`` instances (default 3,000, a few seconds) from
``DRADIAG_DIFF_SEED``; set both for a longer sweep (``DRADIAG_DIFF_INSTANCES=100000``).
Instance ``i`` of seed ``s`` comes from ``random.Random(f"{s}/{i}")``, so a disagreement,
printed with its seed, index and the whole instance, replays with :func:`generate`.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from dradiag.analyses.allocation import FeatureGates, simulate_allocation
from dradiag.snapshot.model import Kind, Snapshot

DRIVER = "diff.example.com"
NODE = "node-a"
FEATURES = FeatureGates.for_version("1.37")
LEAKY = FeatureGates.for_version("1.36")
"""Before 1.37 the allocator keeps what it reserved for a rejected or abandoned candidate
(kubernetes/kubernetes#140436); the simulator reproduces that and flags it."""
LEAK = "kubernetes/kubernetes#140436"
DEFAULT_SEED = 20261201
DEFAULT_INSTANCES = 3000

# -- instances -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Cap:
    """One capacity of a device; ``policy`` is ``plain``, ``range`` or ``values``."""

    value: int
    policy: str = "plain"
    minimum: int = 0
    step: int | None = None
    maximum: int | None = None
    values: tuple[int, ...] = ()
    default: int | None = None


@dataclass(frozen=True)
class Dev:
    name: str
    model: str
    numa: int | None
    shared: bool
    caps: dict[str, Cap]
    counters: dict[str, int]


@dataclass(frozen=True)
class Req:
    """A request; with ``subs`` a ``firstAvailable`` list, whose entries have ``parent``."""

    name: str
    mode: str
    count: int
    model: str | None
    capacity: dict[str, int]
    subs: tuple[Req, ...] = ()
    parent: str | None = None

    @property
    def base(self) -> str:
        """The request's name in the claim (what constraints name)."""
        return self.parent or self.name

    @property
    def result_name(self) -> str:
        """The name allocation results carry: ``req`` or ``req/sub``."""
        return f"{self.parent}/{self.name}" if self.parent else self.name

    def leaves(self) -> tuple[Req, ...]:
        return self.subs or (self,)


@dataclass(frozen=True)
class Con:
    kind: str
    attribute: str
    requests: tuple[str, ...]


@dataclass(frozen=True)
class ClaimSpec:
    name: str
    requests: tuple[Req, ...]
    constraints: tuple[Con, ...] = ()


@dataclass(frozen=True)
class Instance:
    devices: tuple[Dev, ...]
    counter_set: dict[str, int]
    claims: tuple[ClaimSpec, ...]
    together: bool
    """Both claims in one pod (one allocation), or the second after the first is stored."""

    def describe(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def _cap(rng: random.Random, shared: bool) -> Cap:
    value = rng.randint(3, 12)
    if rng.random() < (0.35 if shared else 0.8):
        return Cap(value=value)
    if rng.random() < 0.55:
        minimum = rng.randint(1, 3)
        step = rng.choice([None, 1, 2, 3])
        maximum = rng.choice([None, value, rng.randint(minimum, value)])
        return Cap(
            value=value,
            policy="range",
            minimum=minimum,
            step=step,
            maximum=maximum,
            default=None if rng.random() < 0.2 else minimum,
        )
    values = tuple(sorted(rng.sample(range(1, value + 1), rng.randint(1, 3))))
    default = None if rng.random() < 0.2 else values[0]
    return Cap(value=value, policy="values", values=values, default=default)


def _device(rng: random.Random, index: int, with_counters: bool) -> Dev:
    shared = rng.random() < 0.45
    caps: dict[str, Cap] = {}
    if shared or rng.random() < 0.7:
        caps["bw"] = _cap(rng, shared)
    if rng.random() < 0.3:
        caps["mem"] = _cap(rng, shared)
    if shared and not caps:
        caps["bw"] = _cap(rng, shared)
    counters: dict[str, int] = {}
    if with_counters and rng.random() < 0.65:
        counters["slots"] = rng.randint(1, 2)
        if rng.random() < 0.3:
            counters["mem"] = rng.randint(1, 3)
    return Dev(
        name=f"dev-{index}",
        model=rng.choice("xy"),
        numa=None if rng.random() < 0.15 else rng.randint(0, 1),
        shared=shared,
        caps=caps,
        counters=counters,
    )


def _request(rng: random.Random, name: str, parent: str | None = None) -> Req:
    if parent is None and rng.random() < 0.2:
        subs = tuple(_request(rng, f"s{i}", name) for i in range(rng.randint(2, 3)))
        return Req(name=name, mode="", count=0, model=None, capacity={}, subs=subs)
    mode = "All" if rng.random() < 0.15 else "ExactCount"
    count = rng.choice([1, 1, 1, 1, 2, 2, 3]) if mode == "ExactCount" else 0
    capacity: dict[str, int] = {}
    if rng.random() < 0.5:
        capacity["bw"] = rng.randint(1, 6)
    if rng.random() < 0.1:
        capacity["mem"] = rng.randint(1, 5)
    model = rng.choice(["x", "y"]) if rng.random() < 0.3 else None
    return Req(name=name, mode=mode, count=count, model=model, capacity=capacity, parent=parent)


def _constraints(rng: random.Random, requests: Sequence[Req]) -> tuple[Con, ...]:
    out: list[Con] = []
    for _ in range(rng.choice([0, 0, 1, 1, 2])):
        kind = rng.choice(["matchAttribute", "distinctAttribute"])
        attribute = f"{DRIVER}/{rng.choice(['model', 'numa'])}"
        allowed = [
            r.name
            for r in requests
            if all(
                leaf.mode != "All" and (kind == "matchAttribute" or leaf.count == 1)
                for leaf in r.leaves()
            )
        ]
        if not allowed:
            continue
        if len(allowed) == len(requests) and rng.random() < 0.5:
            names: tuple[str, ...] = ()  # every request of the claim
        else:
            names = tuple(sorted(rng.sample(allowed, rng.randint(1, len(allowed)))))
        out.append(Con(kind=kind, attribute=attribute, requests=names))
    return tuple(out)


def generate(rng: random.Random) -> Instance:
    with_counters = rng.random() < 0.5
    devices = tuple(_device(rng, i, with_counters) for i in range(rng.randint(2, 5)))
    counter_set: dict[str, int] = {}
    if with_counters:
        counter_set = {"slots": rng.randint(2, 5), "mem": rng.randint(2, 5)}
    total = rng.randint(1, 3)
    claims: list[ClaimSpec] = []
    n_claims = 2 if total > 1 and rng.random() < 0.6 else 1
    split = [total] if n_claims == 1 else [1, total - 1] if rng.random() < 0.5 else [total - 1, 1]
    for ci, n in enumerate(split):
        requests = tuple(_request(rng, f"r{ci}{ri}") for ri in range(n))
        claims.append(
            ClaimSpec(
                name=f"claim-{ci}", requests=requests, constraints=_constraints(rng, requests)
            )
        )
    return Instance(
        devices=devices,
        counter_set=counter_set,
        claims=tuple(claims),
        together=rng.random() < 0.5,
    )


# -- the oracle: exhaustive search from the spec --------------------------------------------


def consumption(requested: int | None, cap: Cap) -> int:
    """What one allocation consumes of a capacity (§3.10), rounded up by its policy."""
    if requested is None:
        return cap.default if cap.default is not None else cap.value
    if cap.policy == "range":
        if requested <= cap.minimum:
            return cap.minimum
        if cap.step is None:
            return requested
        steps = -(-(requested - cap.minimum) // cap.step)
        return cap.minimum + steps * cap.step
    if cap.policy == "values":
        bigger = [v for v in cap.values if v >= requested]
        return min(bigger) if bigger else requested
    return requested


def violates(amount: int, cap: Cap) -> bool:
    if cap.default is not None and amount == cap.default:
        return False
    if cap.policy == "range":
        if cap.maximum is not None and amount > cap.maximum:
            return True
        return cap.step is not None and (amount - cap.minimum) % cap.step != 0
    if cap.policy == "values":
        return amount not in cap.values
    return False


@dataclass
class Cluster:
    """What earlier claims hold: dedicated devices, and per shared device its consumption."""

    dedicated: set[int] = field(default_factory=set)
    consumed: dict[int, Counter[str]] = field(default_factory=dict)

    def uses(self, index: int) -> bool:
        return index in self.dedicated or index in self.consumed


Pick = tuple[int, Req, int]
"""(claim index, request or chosen subrequest, device index)."""


class Oracle:
    """Feasibility of one pod's claims by enumerating every assignment."""

    def __init__(self, inst: Instance, claims: Sequence[ClaimSpec], cluster: Cluster) -> None:
        self.inst = inst
        self.claims = list(claims)
        self.cluster = cluster

    def eligible(self, req: Req, dev: Dev) -> bool:
        """Selectors, and every requested capacity defined on the device."""
        if req.model is not None and dev.model != req.model:
            return False
        return all(name in dev.caps for name in req.capacity)

    def fits_alone(self, req: Req, index: int) -> bool:
        """The capacity check against earlier claims only (what fixes an ``All`` set)."""
        dev = self.inst.devices[index]
        held = self.cluster.consumed.get(index, Counter())
        for name, cap in dev.caps.items():
            amount = consumption(req.capacity.get(name), cap)
            if violates(amount, cap) or held[name] + amount > cap.value:
                return False
        return True

    def options(self, req: Req) -> list[tuple[Req, tuple[int, ...]]]:
        """Every way to serve ``req``: (the request or one of its subrequests, devices)."""
        return [(leaf, devices) for leaf in req.leaves() for devices in self._devices(leaf)]

    def _devices(self, req: Req) -> list[tuple[int, ...]]:
        candidates = [i for i, dev in enumerate(self.inst.devices) if self.eligible(req, dev)]
        if req.mode == "All":
            fixed = tuple(i for i in candidates if self.fits_alone(req, i))
            return [fixed] if fixed else []
        return list(itertools.combinations(candidates, req.count))

    def assignments(self) -> Iterator[list[Pick]]:
        slots = [(ci, req) for ci, claim in enumerate(self.claims) for req in claim.requests]
        for choice in itertools.product(*(self.options(req) for _ci, req in slots)):
            yield [
                (ci, leaf, index)
                for (ci, _req), (leaf, indexes) in zip(slots, choice, strict=True)
                for index in indexes
            ]

    def feasible(self) -> bool:
        return any(self.valid(picks) is None for picks in self.assignments())

    def valid(self, picks: Sequence[Pick]) -> str | None:
        """None when the assignment satisfies every rule, else the first broken one."""
        devices = self.inst.devices
        dedicated: Counter[int] = Counter()
        consumed = {i: Counter(c) for i, c in self.cluster.consumed.items()}
        for _ci, req, index in picks:
            dev = devices[index]
            if not self.eligible(req, dev):
                return f"{dev.name} not eligible for {req.name}"
            if not dev.shared:
                if self.cluster.uses(index):
                    return f"{dev.name} held by an earlier claim"
                dedicated[index] += 1
                if dedicated[index] > 1:
                    return f"{dev.name} picked twice"
                # A dedicated device is checked like a first share: policy and capacity.
                for name, cap in dev.caps.items():
                    amount = consumption(req.capacity.get(name), cap)
                    if violates(amount, cap) or amount > cap.value:
                        return f"{dev.name} refuses {req.name} on {name}"
                continue
            if index in self.cluster.dedicated:
                return f"{dev.name} held by an earlier claim"
            held = consumed.setdefault(index, Counter())
            for name, cap in dev.caps.items():
                amount = consumption(req.capacity.get(name), cap)
                if violates(amount, cap):
                    return f"{req.name} violates the {name} policy of {dev.name}"
                held[name] += amount
                if held[name] > cap.value:
                    return f"{dev.name} over its {name} capacity"
        for ci in range(len(self.claims)):
            per_request = Counter((req.base, index) for c, req, index in picks if c == ci)
            if any(n > 1 for n in per_request.values()):
                return "a device twice in one request"
        in_use = {i for _c, _r, i in picks} | self.cluster.dedicated | set(self.cluster.consumed)
        for counter, total in self.inst.counter_set.items():
            if sum(devices[i].counters.get(counter, 0) for i in in_use) > total:
                return f"counter {counter} exhausted"
        for ci, claim in enumerate(self.claims):
            for con in claim.constraints:
                covered = [
                    devices[i]
                    for c, req, i in picks
                    if c == ci and (not con.requests or req.base in con.requests)
                ]
                values = [_attribute(dev, con.attribute) for dev in covered]
                if any(v is None for v in values):
                    return f"{con.attribute} missing"
                if con.kind == "matchAttribute" and len(set(values)) > 1:
                    return f"{con.attribute} differs"
                if con.kind == "distinctAttribute" and len(set(values)) < len(values):
                    return f"{con.attribute} repeats"
        return None


def _attribute(dev: Dev, qualified: str) -> tuple[str, Any] | None:
    name = qualified.rpartition("/")[2]
    if name == "model":
        return ("string", dev.model)
    return None if dev.numa is None else ("int", dev.numa)


# -- the same instance as Kubernetes objects ------------------------------------------------


def _cap_object(cap: Cap) -> dict[str, Any]:
    out: dict[str, Any] = {"value": str(cap.value)}
    if cap.policy == "range":
        valid_range: dict[str, str] = {"min": str(cap.minimum)}
        if cap.step is not None:
            valid_range["step"] = str(cap.step)
        if cap.maximum is not None:
            valid_range["max"] = str(cap.maximum)
        out["requestPolicy"] = {"validRange": valid_range}
    elif cap.policy == "values":
        out["requestPolicy"] = {"validValues": [str(v) for v in cap.values]}
    if cap.default is not None:
        out["requestPolicy"]["default"] = str(cap.default)
    return out


def _device_object(dev: Dev) -> dict[str, Any]:
    attributes: dict[str, Any] = {"model": {"string": dev.model}}
    if dev.numa is not None:
        attributes["numa"] = {"int": dev.numa}
    out: dict[str, Any] = {
        "name": dev.name,
        "attributes": attributes,
        "capacity": {name: _cap_object(cap) for name, cap in dev.caps.items()},
    }
    if dev.shared:
        out["allowMultipleAllocations"] = True
    if dev.counters:
        out["consumesCounters"] = [
            {
                "counterSet": "cs",
                "counters": {k: {"value": str(v)} for k, v in dev.counters.items()},
            }
        ]
    return out


def _exactly(req: Req) -> dict[str, Any]:
    spec: dict[str, Any] = {"deviceClassName": "diff", "allocationMode": req.mode}
    if req.mode == "ExactCount":
        spec["count"] = req.count
    if req.model is not None:
        expression = f"device.attributes['{DRIVER}'].model == '{req.model}'"
        spec["selectors"] = [{"cel": {"expression": expression}}]
    if req.capacity:
        spec["capacity"] = {"requests": {k: str(v) for k, v in req.capacity.items()}}
    return spec


def _claim_object(claim: ClaimSpec, allocation: dict[str, Any] | None) -> dict[str, Any]:
    requests: list[dict[str, Any]] = []
    for req in claim.requests:
        if req.subs:
            subs = [{"name": sub.name, **_exactly(sub)} for sub in req.subs]
            requests.append({"name": req.name, "firstAvailable": subs})
        else:
            requests.append({"name": req.name, "exactly": _exactly(req)})
    devices: dict[str, Any] = {"requests": requests}
    if claim.constraints:
        devices["constraints"] = [
            {con.kind: con.attribute, **({"requests": list(con.requests)} if con.requests else {})}
            for con in claim.constraints
        ]
    out: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": claim.name, "namespace": "diff", "uid": f"uid-{claim.name}"},
        "spec": {"devices": devices},
    }
    if allocation is not None:
        out["status"] = {"allocation": allocation}
    return out


def snapshot(inst: Instance, stored: Sequence[dict[str, Any]]) -> Snapshot:
    pool = {"name": NODE, "generation": 1, "resourceSliceCount": 2 if inst.counter_set else 1}
    specs: list[dict[str, Any]] = []
    if inst.counter_set:
        counters = {k: {"value": str(v)} for k, v in inst.counter_set.items()}
        specs.append(
            {
                "driver": DRIVER,
                "nodeName": NODE,
                "pool": dict(pool),
                "sharedCounters": [{"name": "cs", "counters": counters}],
            }
        )
    specs.append(
        {
            "driver": DRIVER,
            "nodeName": NODE,
            "pool": dict(pool),
            "devices": [_device_object(d) for d in inst.devices],
        }
    )
    slices = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceSlice",
            "metadata": {"name": f"{NODE}-diff-{i}"},
            "spec": spec,
        }
        for i, spec in enumerate(specs)
    ]
    device_class = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "diff"},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
    }
    return Snapshot(
        objects={
            Kind.RESOURCE_SLICE: slices,
            Kind.DEVICE_CLASS: [device_class],
            Kind.NODE: [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": NODE}}],
            Kind.RESOURCE_CLAIM: list(stored),
        }
    )


# -- one instance, both ways ------------------------------------------------------------------


def _picks(
    inst: Instance, claims: Sequence[ClaimSpec], allocations: Sequence[dict[str, Any]]
) -> list[Pick]:
    index = {d.name: i for i, d in enumerate(inst.devices)}
    out: list[Pick] = []
    for ci, (claim, allocation) in enumerate(zip(claims, allocations, strict=True)):
        by_name = {leaf.result_name: leaf for r in claim.requests for leaf in r.leaves()}
        for result in allocation["devices"]["results"]:
            out.append((ci, by_name[result["request"]], index[result["device"]]))
    return out


def _record(inst: Instance, picks: Sequence[Pick], cluster: Cluster) -> None:
    """Add a stored allocation to ``cluster``, as the oracle reads the spec."""
    for _ci, req, index in picks:
        dev = inst.devices[index]
        if not dev.shared:
            cluster.dedicated.add(index)
            continue
        held = cluster.consumed.setdefault(index, Counter())
        for name, cap in dev.caps.items():
            held[name] += consumption(req.capacity.get(name), cap)


def _shares_agree(
    inst: Instance, picks: Sequence[Pick], allocations: Sequence[dict[str, Any]]
) -> str | None:
    """shareID and consumedCapacity of each result, as §3.13 and the oracle say."""
    results = [r for a in allocations for r in a["devices"]["results"]]
    for (_ci, req, index), result in zip(picks, results, strict=True):
        dev = inst.devices[index]
        if bool(result.get("shareID")) != dev.shared:
            return f"{dev.name}: shareID {result.get('shareID')!r}"
        want = (
            {n: str(consumption(req.capacity.get(n), c)) for n, c in dev.caps.items()}
            if dev.shared
            else {}
        )
        if (result.get("consumedCapacity") or {}) != want:
            return f"{dev.name}: consumedCapacity {result.get('consumedCapacity')} != {want}"
    return None


def check(inst: Instance) -> list[str]:
    """Disagreements between allocator and oracle on ``inst`` (empty: they agree)."""
    problems: list[str] = []
    steps = [inst.claims] if inst.together else [(c,) for c in inst.claims]
    stored: list[dict[str, Any]] = []
    cluster = Cluster()
    for step, claims in enumerate(steps):
        objects = [_claim_object(c, None) for c in claims]
        cluster_now = snapshot(inst, stored)
        feasible = Oracle(inst, claims, cluster).feasible()
        names = ", ".join(c.name for c in claims)
        # With explanations (what the commands run: funnels may prove infeasibility and
        # skip the search) and without (the search alone decides).
        for explain in (True, False):
            sim = simulate_allocation(
                cluster_now, objects, NODE, features=FEATURES, explain=explain
            )
            mode = "explained" if explain else "search only"
            if sim.outcome == "error":
                problems.append(f"step {step} ({names}, {mode}): allocator error: {sim.error}")
            elif (sim.outcome == "allocated") != feasible:
                problems.append(
                    f"step {step} ({names}, {mode}): allocator {sim.outcome}, oracle "
                    f"{'feasible' if feasible else 'infeasible'}"
                )
        # 1.36 may miss an allocation, but only through the flagged upstream leak.
        leaky = simulate_allocation(cluster_now, objects, NODE, features=LEAKY)
        if leaky.outcome == "allocated":
            allocations = [item["allocation"] for item in leaky.results]
            broken = Oracle(inst, claims, cluster).valid(_picks(inst, claims, allocations))
            if not feasible or broken:
                problems.append(f"step {step} ({names}, 1.36): invalid allocation: {broken}")
        elif leaky.outcome == "error" or (leaky.upstream_bug == LEAK) != feasible:
            problems.append(
                f"step {step} ({names}, 1.36): {leaky.outcome} ({leaky.error}), upstream bug "
                f"{leaky.upstream_bug}, oracle {'feasible' if feasible else 'infeasible'}"
            )
        if problems:
            break
        if sim.outcome != "allocated":
            continue
        allocations = [item["allocation"] for item in sim.results]
        picks = _picks(inst, claims, allocations)
        broken = Oracle(inst, claims, cluster).valid(picks) or _shares_agree(
            inst, picks, allocations
        )
        if broken:
            problems.append(f"step {step} ({names}): allocator's allocation invalid: {broken}")
            break
        _record(inst, picks, cluster)
        stored.extend(_claim_object(c, a) for c, a in zip(claims, allocations, strict=True))
    return problems


def sweep(seed: int, instances: int) -> tuple[list[str], float]:
    """Check ``instances`` instances from ``seed``: failure reports, and seconds taken."""
    failures: list[str] = []
    start = time.perf_counter()
    for i in range(instances):
        inst = generate(random.Random(f"{seed}/{i}"))
        problems = check(inst)
        if problems:
            failures.append(
                f"seed={seed} index={i}: {'; '.join(problems)}\n  instance: {inst.describe()}"
            )
    return failures, time.perf_counter() - start


def test_allocator_agrees_with_exhaustive_search() -> None:
    seed = int(os.environ.get("DRADIAG_DIFF_SEED", DEFAULT_SEED))
    instances = int(os.environ.get("DRADIAG_DIFF_INSTANCES", DEFAULT_INSTANCES))
    failures, seconds = sweep(seed, instances)
    print(f"differential: {instances} instances in {seconds:.1f} s (seed {seed})")
    assert not failures, f"{len(failures)} disagreement(s):\n" + "\n".join(failures[:5])
