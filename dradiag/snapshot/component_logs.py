"""Which component a log file without a pod is: ``kubelet.log``, ``kube-scheduler.log``,
``kubelet-plugin.log`` … (``dradiag/data/component_logs.yaml``).

Users paste component logs as files named after the component, and a node's journal is
saved the same way; such a file is that component's evidence, not an unattributable log.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cache
from typing import Any

DATA_RESOURCE = "component_logs.yaml"


@dataclass(frozen=True, slots=True)
class ComponentSpec:
    """One component as the data file names it."""

    component: str
    container: str
    """What log rules see as the container name."""
    names: tuple[str, ...]
    events: tuple[tuple[str, str], ...]
    """(event reason, line pattern): lines that carry what the component also records as
    an Event of that reason."""


@cache
def component_specs() -> tuple[ComponentSpec, ...]:
    """The components of the data file, longest name first (``kubelet-plugin`` before
    ``kubelet``)."""
    from importlib import resources

    import yaml

    text = resources.files("dradiag").joinpath("data", DATA_RESOURCE).read_text("utf-8")
    data: dict[str, Any] = yaml.safe_load(text) or {}
    specs = [
        ComponentSpec(
            component=str(entry["component"]),
            container=str(entry["container"]),
            names=tuple(str(n) for n in entry.get("names") or ()),
            events=tuple((str(e["reason"]), str(e["pattern"])) for e in entry.get("events") or ()),
        )
        for entry in data.get("components") or ()
    ]
    return tuple(specs)


@cache
def _name_pattern() -> tuple[re.Pattern[str], dict[str, ComponentSpec]]:
    by_name = {name: spec for spec in component_specs() for name in spec.names}
    names = sorted(by_name, key=len, reverse=True)
    pattern = re.compile(
        r"^(?:\d+[-_.])?(?P<name>" + "|".join(re.escape(n) for n in names) + r")(?:[-.].*)?$"
    )
    return pattern, by_name


def component_of(stem: str) -> ComponentSpec | None:
    """The component a log file's stem (name without ``.log``) names, or None."""
    pattern, by_name = _name_pattern()
    found = pattern.match(stem.lower())
    return by_name[found.group("name")] if found else None
