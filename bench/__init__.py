"""Benchmarks: the autoscaler (ours, and upstream v1.10.3 when a binary exists) against a
real local kube-apiserver + etcd holding 1,000 to 65,000 GKE-style Nodes.

``python -m bench.run`` (``make bench``) or ``python -m bench.run --quick``
(``make bench-quick``); results go to ``bench/results/latest.{json,md,png}``.
Not part of ``make test``.
"""
