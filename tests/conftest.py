"""Shared pytest fixtures: a real kube-apiserver + etcd for the integration tests.

Why session-scoped: starting the control plane costs seconds, building it (once, cached)
minutes; tests isolate themselves with a fresh namespace each instead (see ``namespace``).
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.controlplane import (
    ControlPlane,
    ensure_binaries,
    find_binaries,
    go_available,
)

REPO = Path(__file__).resolve().parents[1]
AUTOSCALER_MANIFEST = REPO / "manifests" / "kube-dns-autoscaler.yaml"


def rbac_documents(path: Path = AUTOSCALER_MANIFEST) -> list[dict[str, Any]]:
    """The manifest's ServiceAccount and RBAC objects, without its Deployment.

    There is no scheduler or controller-manager, so the Deployment would only sit there; the
    tests start the autoscaler themselves, as the ServiceAccount identity these objects bind.
    """
    docs = [doc for doc in yaml.safe_load_all(path.read_text()) if doc]
    return [doc for doc in docs if doc.get("kind") != "Deployment"]


@pytest.fixture(scope="session")
def controlplane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    """A running control plane with the autoscaler's ServiceAccount + RBAC applied.

    Skips (with one reason) only when the binaries are not cached and Go is absent to build
    them; a failing build or start is an error, not a skip.
    """
    if find_binaries() is None and not go_available():
        pytest.skip(
            "integration: kube-apiserver/etcd not cached and no Go toolchain to build them "
            "(see tests/controlplane/build.sh)"
        )
    # Show build progress on the terminal even though pytest captures output.
    capman = request.config.pluginmanager.getplugin("capturemanager")
    if capman is not None and find_binaries() is None:
        with capman.global_and_fixture_disabled():
            bin_dir = ensure_binaries()
    else:
        bin_dir = ensure_binaries()
    plane = ControlPlane(bin_dir=bin_dir)
    try:
        plane.start()
        admin = plane.admin()
        for doc in rbac_documents():
            admin.apply(doc)
        yield plane
    finally:
        plane.stop()


@pytest.fixture
def namespace(controlplane: ControlPlane, request: pytest.FixtureRequest) -> str:
    """A fresh namespace per test (never deleted: without a controller-manager it would hang
    in Terminating forever, and the control plane is thrown away at session end anyway)."""
    base = re.sub(r"[^a-z0-9-]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{base or 't'}-{secrets.token_hex(3)}"
    controlplane.admin().post(
        "/api/v1/namespaces",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
    )
    return name
