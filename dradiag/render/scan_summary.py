"""The closing line of ``scan``'s text view: rows per phase, and what was silenced.

Apart from ``render/text.py``'s table so the counts the document's ``summary`` block
carries read the same in text; drawn from that block, never from the diagnoses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def render_scan_summary(summary: Mapping[str, Any], *, silence_file: str | None = None) -> str:
    """``by phase: allocation 2, prepare 1; 3 silenced (.dradiag-silence.yaml)``, or ""
    when there is nothing to add to the table's own count line."""
    parts: list[str] = []
    by_phase: Mapping[str, int] = summary.get("byPhase") or {}
    if by_phase:
        parts.append("by phase: " + ", ".join(f"{phase} {n}" for phase, n in by_phase.items()))
    silenced = int(summary.get("silenced") or 0)
    if silenced or silence_file:
        where = f" ({silence_file})" if silence_file else ""
        parts.append(f"{silenced} silenced{where}")
    filtered = int(summary.get("filteredOut") or 0)
    if filtered:
        parts.append(f"{filtered} outside the selection")
    return "; ".join(parts) + "\n" if parts else ""
