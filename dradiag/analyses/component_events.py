"""Lines of a component's log read as the Events the component records for them.

The kubelet logs the error it also puts in a ``FailedPrepareDynamicResources`` event, and
kube-scheduler the message of its ``FailedScheduling``; a user who pastes ``kubelet.log``
has the event's evidence without the event. Each matching line becomes the event it
stands for (``dradiag/data/component_logs.yaml`` says which), so the event rules apply to
it unchanged, and the finding quotes the log line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any

from dradiag.snapshot.component_logs import component_specs
from dradiag.snapshot.model import ContainerLog

_KLOG_MESSAGE = re.compile(r'\]\s+"(?P<msg>(?:[^"\\]|\\.)*)"')
_KLOG_FIELD = re.compile(
    r'\b(?P<key>err|error|pod|claim|resourceClaim)="(?P<value>(?:[^"\\]|\\.)*)"'
)


@dataclass(frozen=True, slots=True)
class LineEvent:
    """One log line and the event it stands for."""

    line_number: int
    line: str
    event: dict[str, Any]
    pod: str
    """``ns/name`` from the line's ``pod=`` field, or ""."""


@cache
def _patterns(component: str) -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple(
        (reason, re.compile(pattern))
        for spec in component_specs()
        if spec.component == component
        for reason, pattern in spec.events
    )


def klog_message(line: str) -> tuple[str, dict[str, str]]:
    """The message a klog line carries (its quoted message and ``err=``), and its fields."""
    fields = {
        m.group("key"): m.group("value").replace('\\"', '"') for m in _KLOG_FIELD.finditer(line)
    }
    head = _KLOG_MESSAGE.search(line)
    if head is None:
        return line.strip(), fields
    message = head.group("msg").replace('\\"', '"')
    err = fields.get("err") or fields.get("error")
    return (f"{message}: {err}" if err else message), fields


def line_events(log: ContainerLog) -> Iterator[LineEvent]:
    """Every line of a component log that stands for an event, as that event."""
    if not log.component:
        return
    patterns = _patterns(log.component)
    if not patterns:
        return
    for number, line in enumerate(log.text.splitlines(), 1):
        for reason, pattern in patterns:
            if pattern.search(line) is None:
                continue
            message, fields = klog_message(line)
            pod = fields.get("pod", "")
            ns, _, name = pod.rpartition("/")
            event: dict[str, Any] = {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"name": f"{log.component}.log:{number}", "namespace": ns},
                "reason": reason,
                "type": "Warning",
                "message": message,
                "source": {"component": log.component},
            }
            if name:
                event["involvedObject"] = {"kind": "Pod", "namespace": ns, "name": name}
            yield LineEvent(line_number=number, line=line, event=event, pod=pod)
            break
