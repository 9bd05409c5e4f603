"""Fixtures shared by the integration scenarios."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.controlplane import ControlPlane
from tests.integration.httpproxy import HttpFaultProxy
from tests.integration.scheduling import Scheduling
from tests.integration.support import (
    AutoscalerProcess,
    cpvpa_command,
    delete_all_nodes,
    via_address,
)


@pytest.fixture
def no_nodes(controlplane: ControlPlane) -> Iterator[None]:
    """Nodes are cluster-wide: each scenario starts from none and leaves none."""
    delete_all_nodes(controlplane.admin())
    yield
    delete_all_nodes(controlplane.admin())


@pytest.fixture
def start(controlplane: ControlPlane, tmp_path: Path) -> Iterator[Any]:
    """Start autoscaler processes; each is stopped by PID when the test ends."""
    procs: list[AutoscalerProcess] = []

    def _start(*args: str, poll_period: int = 1, kubeconfig: Path | None = None,
               nofile: tuple[int, int] | None = None, verbosity: int = 2,
               stderr_pipe: bool = False, env: dict[str, str] | None = None,
               command: list[str] | None = None, prefix: str = "cpa") -> AutoscalerProcess:
        proc = AutoscalerProcess(kubeconfig or controlplane.autoscaler_kubeconfig, list(args),
                                 tmp_path / f"{prefix}-{len(procs)}.log", poll_period,
                                 verbosity=verbosity, nofile=nofile, stderr_pipe=stderr_pipe,
                                 extra_env=env, command=command, prefix=prefix)
        procs.append(proc)
        return proc

    yield _start
    for proc in procs:
        proc.stop()


@pytest.fixture
def cpvpa(start: Any, controlplane: ControlPlane) -> Callable[..., AutoscalerProcess]:
    """Start ``cpvpa`` processes (admin's rights unless given a kubeconfig); as ``start``,
    each is stopped by PID when the test ends."""

    def _start(*args: str, poll_period: int = 1, kubeconfig: Path | None = None,
               nofile: tuple[int, int] | None = None) -> AutoscalerProcess:
        proc: AutoscalerProcess = start(
            *args, poll_period=poll_period, nofile=nofile, command=cpvpa_command(),
            prefix="cpvpa", kubeconfig=kubeconfig or controlplane.admin_kubeconfig)
        return proc

    return _start


@pytest.fixture
def http_proxy(controlplane: ControlPlane, tmp_path: Path
               ) -> Iterator[Callable[..., tuple[HttpFaultProxy, Path]]]:
    """Make HTTPS fault proxies in front of the API server: each call gives a proxy and a
    kubeconfig (the autoscaler's, or the one given) pointed at it. All are closed when the
    test ends."""
    proxies: list[HttpFaultProxy] = []

    def make(kubeconfig: Path | None = None) -> tuple[HttpFaultProxy, Path]:
        proxy = HttpFaultProxy(controlplane.port, controlplane.cert_dir / "apiserver.crt",
                               controlplane.cert_dir / "apiserver.key", controlplane.ca_file)
        proxies.append(proxy)
        moved = via_address(proxy.address, kubeconfig or controlplane.autoscaler_kubeconfig,
                            tmp_path / f"via-proxy-{len(proxies)}.kubeconfig")
        return proxy, moved

    yield make
    for proxy in proxies:
        proxy.close()


@pytest.fixture
def scheduling(controlplane: ControlPlane, tmp_path: Path) -> Iterator[Scheduling]:
    """A real kube-scheduler and kube-controller-manager (deployments and replica sets
    only) against the control plane while the test runs; both stopped by PID after it."""
    procs = Scheduling(controlplane, tmp_path)
    try:
        procs.start()
        yield procs
    finally:
        procs.stop()
