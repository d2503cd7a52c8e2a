"""Validate a command's JSON document against its published schema under docs/schema/.

The schemas share one ``collection`` block (``diagnosis.schema.json#/properties/
collection``) by ``$ref``, so a validator needs the other schema files as a registry.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
from referencing import Registry, Resource

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schema"


def load(name: str) -> dict[str, Any]:
    """The schema ``docs/schema/<name>.schema.json``."""
    return dict(json.loads((SCHEMAS / f"{name}.schema.json").read_text()))


def _registry() -> Registry:
    registry: Registry = Registry()
    for path in sorted(SCHEMAS.glob("*.schema.json")):
        schema = json.loads(path.read_text())
        resource = Resource.from_contents(schema)
        registry = registry.with_resource(schema["$id"], resource)
    return registry


def validate(doc: Any, name: str) -> None:
    """Raise jsonschema.ValidationError unless ``doc`` fits ``docs/schema/<name>``."""
    jsonschema.Draft202012Validator(load(name), registry=_registry()).validate(doc)
