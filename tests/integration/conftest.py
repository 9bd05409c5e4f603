"""Fixtures shared by the integration scenarios."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.support import AutoscalerProcess, delete_all_nodes


@pytest.fixture
def no_nodes(controlplane: ControlPlane) -> Iterator[None]:
    """Nodes are cluster-wide: each scenario starts from none and leaves none."""
    delete_all_nodes(controlplane.admin())
    yield
    delete_all_nodes(controlplane.admin())


@pytest.fixture
def start(controlplane: ControlPlane, tmp_path: Path
          ) -> Iterator[Any]:
    """Start autoscaler processes; each is stopped by PID when the test ends."""
    procs: list[AutoscalerProcess] = []

    def _start(*args: str, poll_period: int = 1,
               kubeconfig: Path | None = None) -> AutoscalerProcess:
        proc = AutoscalerProcess(kubeconfig or controlplane.autoscaler_kubeconfig, list(args),
                                 tmp_path / f"autoscaler-{len(procs)}.log", poll_period)
        procs.append(proc)
        return proc

    yield _start
    for proc in procs:
        proc.stop()


