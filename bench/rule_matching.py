"""Rule-matching figures, run by hand: ``python bench/rule_matching.py [MB]``.

Target (issue #6): scanning 50 MB of kubelet-plugin log against every log rule takes
at most 1 s. Also prints the cost of loading and compiling the rulebook and of matching
a large batch of events.
"""

from __future__ import annotations

import sys
import time

from dradiag.analyses.rule_matching import match_events, match_log
from dradiag.rulebook.loader import default_rules_dir, load_rulebook_from
from dradiag.snapshot.model import ContainerLog

ORDINARY = [
    'I0601 10:00:03.118227       1 driver.go:412] "About to announce device" device="gpu-{i}-mig-1g10gb-19-0"\n',
    "I0601 10:00:03.118300       1 device_state.go:301] Prepare called for: [ml/train-{i}:6f04a69a-96a1-4662-9d32-d0881d43397e]\n",
    'I0601 10:00:03.119000       1 nonblockinggrpcserver.go:150] "handling request succeeded" requestID={i} response="&NodePrepareResourcesResponse{{...}}"\n',
    "I0601 10:00:03.120000       1 cdi.go:301] Writing CDI spec '/var/run/cdi/k8s.gpu.nvidia.com-claim_{i}.yaml' for claim 'ml/train-{i}'\n",
]
NEEDLES = [
    "W0601 10:05:00.000000       1 device_state.go:702] Error deleting MIG device gpu-0-mig-1g10gb-19-0: error destroying GPU Instance: In use by another client\n",
    'E0601 10:05:01.000000       1 resourceslicecontroller.go:541] "create ResourceSlice" err="pool \\"gpu-node-1\\", slice #0: some fields were dropped by the apiserver, probably because these features are disabled: DRAPartitionableDevices"\n',
]


def build_log(megabytes: float) -> str:
    parts: list[str] = []
    size, i = 0, 0
    target = int(megabytes * 1_000_000)
    while size < target:
        line = ORDINARY[i % len(ORDINARY)].format(i=i)
        if i % 100_000 == 50_000:
            line += NEEDLES[(i // 100_000) % len(NEEDLES)]
        parts.append(line)
        size += len(line)
        i += 1
    return "".join(parts)


def main() -> None:
    megabytes = float(sys.argv[1]) if len(sys.argv) > 1 else 50.0
    t0 = time.perf_counter()
    book = load_rulebook_from(default_rules_dir())
    t_load = time.perf_counter() - t0
    log_rules = sum(1 for r in book.rules if r.match is not None and r.match.log is not None)
    print(
        f"rulebook: {len(book)} rules ({log_rules} with log patterns) loaded+compiled in {t_load * 1000:.1f} ms"
    )

    text = build_log(megabytes)
    lines = text.count("\n")
    for container in ("gpus", "trainer"):
        log = ContainerLog(namespace="d", pod="p", container=container, text=text)
        best = float("inf")
        for _ in range(3):
            t0 = time.perf_counter()
            hits = match_log(book, log)
            best = min(best, time.perf_counter() - t0)
        found = sorted({(h.rule.id, h.count) for h in hits})
        print(
            f"log scan [{container}]: {len(text) / 1e6:.1f} MB, {lines:,} lines in {best:.3f} s "
            f"({len(text) / 1e6 / best:.0f} MB/s); hits: {found}"
        )

    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "e", "namespace": "ml"},
        "involvedObject": {"kind": "Pod", "namespace": "ml", "name": "p"},
        "reason": "FailedPrepareDynamicResources",
        "type": "Warning",
        "count": 1,
        "lastTimestamp": "2026-06-01T10:00:00Z",
    }
    messages = [
        "Failed to prepare dynamic resources: prepare dynamic resources: DRA driver gpu.nvidia.com is not registered",
        "Failed to prepare dynamic resources: prepare dynamic resources: NodePrepareResources skipped 1 ResourceClaims",
    ]
    events = [
        {
            **event,
            "metadata": {"name": f"e{i}", "namespace": "ml"},
            "message": messages[i % 2],
            "involvedObject": {"kind": "Pod", "namespace": "ml", "name": f"p{i % 500}"},
        }
        for i in range(10_000)
    ]
    events += [
        {**event, "reason": "Pulled", "type": "Normal", "message": "Successfully pulled image"}
    ] * 10_000
    t0 = time.perf_counter()
    hits = match_events(book, events)
    dt = time.perf_counter() - t0
    print(
        f"events: {len(events):,} matched in {dt * 1000:.0f} ms ({len(events) / dt:,.0f}/s), {len(hits)} hits"
    )


if __name__ == "__main__":
    main()
