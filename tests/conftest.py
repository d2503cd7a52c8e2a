"""Suite-wide set-up: the local Kubernetes API server's fixtures (tests/kube_api).

``tests/`` goes on sys.path so test modules can import the server (``from
kube_api.server import KubeAPIServer``); test directories have no ``__init__.py``
(importlib import mode), so this is how a shared test helper is reached.
"""

from __future__ import annotations

import sys
from pathlib import Path

_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from kube_api.plugin import kube_api, kube_api_factory, kubeconfig  # noqa: E402

__all__ = ["kube_api", "kube_api_factory", "kubeconfig"]
