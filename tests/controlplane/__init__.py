"""A real kube-apiserver + etcd for the integration tests, started on 127.0.0.1.

Why: the autoscaler's correctness depends on the real API server's behaviour (RBAC, the
``/scale`` subresource, watch semantics, server-side apply, errors and restarts), which fakes
get subtly wrong. Docker/kind and release downloads are unavailable here, so the binaries are
built from Go modules by ``build.sh`` (pinned in ``go/go.mod``) and cached under
``<repo>/.cache``; a warm start takes a few seconds.

There is no scheduler, controller-manager or kubelet: workload objects and their ``/scale``
subresources work, but no Pods appear, namespaces never finish deleting and no default
ServiceAccount is created. Use a fresh namespace per test and do not delete namespaces.

Identities (see :meth:`ControlPlane.kubeconfig_for`): static bearer tokens registered with
``--token-auth-file`` at apiserver start (admin and the kube-dns-autoscaler ServiceAccount
identity are pre-registered), TokenRequest tokens for other ServiceAccounts, and, for any
other user, a token-file rewrite followed by an apiserver restart.

The harness, by module: :mod:`~tests.controlplane.binaries` (where the binaries are, built
once), :mod:`~tests.controlplane.plane` (:class:`ControlPlane`: start, stop, identities),
:mod:`~tests.controlplane.client` (:class:`AdminClient`, the tests' own client) and
:mod:`~tests.controlplane.processes` (helpers for the processes it starts).
"""

from __future__ import annotations

from tests.controlplane.binaries import (
    BIN_DIR_ENV,
    ETCD_VERSION,
    K8S_VERSION,
    UPSTREAM_BIN_ENV,
    UPSTREAM_CPA_VERSION,
    UPSTREAM_HOWTO,
    ensure_binaries,
    find_binaries,
    go_available,
    upstream_autoscaler_binary,
)
from tests.controlplane.client import AdminClient, ApiError, resource_path
from tests.controlplane.plane import ADMIN_USER, AUTOSCALER_GROUPS, AUTOSCALER_USER, ControlPlane
from tests.controlplane.processes import Started, die_with_parent, pid_alive, tail, terminate

__all__ = [
    "ADMIN_USER",
    "AUTOSCALER_GROUPS",
    "AUTOSCALER_USER",
    "BIN_DIR_ENV",
    "ETCD_VERSION",
    "K8S_VERSION",
    "UPSTREAM_BIN_ENV",
    "UPSTREAM_CPA_VERSION",
    "UPSTREAM_HOWTO",
    "AdminClient",
    "ApiError",
    "ControlPlane",
    "Started",
    "die_with_parent",
    "ensure_binaries",
    "find_binaries",
    "go_available",
    "pid_alive",
    "resource_path",
    "tail",
    "terminate",
    "upstream_autoscaler_binary",
]
