"""The closing line of ``scan``'s text view: what was silenced or left outside the selection.

Apart from ``render/text.py``'s table so the counts the document's ``summary`` block
carries read the same in text; drawn from that block, never from the diagnoses.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def render_scan_summary(summary: Mapping[str, Any], *, silence_file: str | None = None) -> str:
    """``3 silenced (.dradiag-silence.yaml); 2 outside the selection``, or "" when there
    is nothing to add to the table's own count line."""
    # The rows per phase close the table's own count line (render_scan); this line adds
    # only what the table cannot show: what was silenced or left outside the selection.
    parts: list[str] = []
    silenced = int(summary.get("silenced") or 0)
    if silenced or silence_file:
        where = f" ({silence_file})" if silence_file else ""
        parts.append(f"{silenced} silenced{where}")
    filtered = int(summary.get("filteredOut") or 0)
    if filtered:
        parts.append(f"{filtered} outside the selection")
    return "; ".join(parts) + "\n" if parts else ""
