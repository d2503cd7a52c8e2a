"""pytest fixtures for the local Kubernetes API server (registered by tests/conftest.py).

``kube_api``: the sample cluster of ``tests/kube_api/fixtures/cluster`` behind the RBAC
of ``docs/rbac.yaml``, with a kubeconfig written for it. ``kube_api_factory``: servers
on any fixture, versions, RBAC or faults a test asks for. Servers stop at teardown.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kube_api.server import KubeAPIServer

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLUSTER_FIXTURE = FIXTURES / "cluster"


@pytest.fixture
def kube_api_factory() -> Iterator[Callable[..., KubeAPIServer]]:
    """Start servers: ``factory(path_or_None, **KubeAPIServer kwargs)``."""
    started: list[KubeAPIServer] = []

    def make(source: str | Path | None = CLUSTER_FIXTURE, **kwargs: Any) -> KubeAPIServer:
        objects = kwargs.pop("objects", None)
        if objects is not None:
            server = KubeAPIServer(objects, **kwargs)
        else:
            server = KubeAPIServer.from_path(source or CLUSTER_FIXTURE, **kwargs)
        started.append(server.start())
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def kube_api(kube_api_factory: Callable[..., KubeAPIServer]) -> KubeAPIServer:
    """The sample cluster, v1 only, under docs/rbac.yaml."""
    return kube_api_factory()


@pytest.fixture
def kubeconfig(kube_api: KubeAPIServer, tmp_path: Path) -> Path:
    """A kubeconfig for ``kube_api`` (pass it with --kubeconfig or KUBECONFIG)."""
    return kube_api.write_kubeconfig(tmp_path / "kubeconfig")
