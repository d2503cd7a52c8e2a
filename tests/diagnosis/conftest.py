"""Fixtures of the diagnosis tests: the object builders of ``k8s_objects.py``."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest


def load_builders() -> ModuleType:
    """``k8s_objects.py`` as a module (tests carry no ``__init__.py``)."""
    path = Path(__file__).with_name("k8s_objects.py")
    spec = importlib.util.spec_from_file_location("dradiag_test_k8s_objects", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def k8s() -> ModuleType:
    """The object builders (``k8s.claim(...)``, ``k8s.snapshot(...)``...)."""
    return load_builders()
