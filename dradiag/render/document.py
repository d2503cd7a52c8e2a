"""Serialising output documents (JSON, YAML) for stdout; the canonical forms of every result."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any


def dump_document(doc: Mapping[str, Any], output: str) -> str:
    """``doc`` as JSON (indented, stable key order as built) or YAML, newline-terminated."""
    if str(output) == "yaml":
        import yaml

        return str(yaml.safe_dump(dict(doc), sort_keys=False, allow_unicode=True, width=120))
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
