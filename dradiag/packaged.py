"""Files that ship inside the wheel beside the code: the docs pages, JSON Schemas and RBAC.

The repository keeps them at the top (``docs/``), where readers of the source look for
them; the wheel carries the same folder as ``dradiag/_docs`` (pyproject
``force-include``, as ``rules/`` becomes ``dradiag/_rules``). Both are read through
``importlib.resources``, so an installed dradiag answers ``dradiag rbac`` with no
checkout; a source or editable checkout falls back to the repository's ``docs/``.
"""

from __future__ import annotations

from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

PACKAGED_DOCS = "_docs"
"""The name of ``docs/`` inside the installed package."""


def docs_dir() -> Traversable:
    """The docs folder: the wheel's ``dradiag/_docs``, else the checkout's ``docs/``."""
    installed = resources.files("dradiag").joinpath(PACKAGED_DOCS)
    if installed.is_dir():
        return installed
    return Path(__file__).resolve().parent.parent / "docs"


def docs_file(*parts: str) -> Traversable:
    """One file under the docs folder, e.g. ``docs_file("schema", "diagnosis.schema.json")``."""
    return docs_dir().joinpath(*parts)
