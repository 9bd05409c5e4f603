"""CoreDNS as the cluster tests run it: the real server (scripts/build-coredns.sh), with a
Corefile that answers a test zone itself (the node has no upstream to forward to), its
probes on kubeadm's ports and paths, and its ``prometheus`` plugin on :9153.

It listens on 1053 inside its Pod: the image runs as 65534 with every capability dropped
(as the autoscaler's manifest does), and a port below 1024 needs one. The ``kube-dns``
Service maps 53 to it, as a cluster's DNS Service would.
"""

from __future__ import annotations

from typing import Any

NS = "kube-system"
LABELS = {"k8s-app": "kube-dns"}
ZONE = "e2e.test"
DNS_PORT = 1053
METRICS_PORT = 9153
CLUSTER_DNS_IP = "10.0.0.10"

COREFILE = f"""\
.:{DNS_PORT} {{
    errors
    health :8080
    ready :8181
    prometheus :{METRICS_PORT}
    template IN A {ZONE} {{
        answer "{{{{ .Name }}}} 60 IN A 192.0.2.53"
    }}
    template ANY ANY {{
        rcode NXDOMAIN
    }}
}}
"""


def corefile_configmap() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "coredns", "namespace": NS},
            "data": {"Corefile": COREFILE}}


def coredns_deployment(image: str, replicas: int = 2) -> dict[str, Any]:
    """CoreDNS as kubeadm deploys it (2 replicas, its probe ports), with our Corefile."""
    return {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "coredns", "namespace": NS, "labels": dict(LABELS)},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": dict(LABELS)},
            "template": {
                "metadata": {"labels": dict(LABELS)},
                "spec": {
                    "priorityClassName": "system-cluster-critical",
                    "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                    "nodeSelector": {"kubernetes.io/os": "linux"},
                    "terminationGracePeriodSeconds": 5,
                    "containers": [{
                        "name": "coredns", "image": image, "imagePullPolicy": "IfNotPresent",
                        "args": ["-conf", "/etc/coredns/Corefile"],
                        "ports": [{"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
                                  {"name": "metrics", "containerPort": METRICS_PORT}],
                        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns",
                                          "readOnly": True}],
                        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181},
                                           "periodSeconds": 2},
                        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080},
                                          "periodSeconds": 10},
                        "resources": {"limits": {"memory": "170Mi"},
                                      "requests": {"cpu": "100m", "memory": "70Mi"}},
                        "securityContext": {"readOnlyRootFilesystem": True,
                                            "allowPrivilegeEscalation": False,
                                            "capabilities": {"drop": ["ALL"]}},
                    }],
                    "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                },
            },
        },
    }


def dns_service() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": "kube-dns", "namespace": NS, "labels": dict(LABELS)},
            "spec": {"selector": dict(LABELS), "clusterIP": CLUSTER_DNS_IP,
                     "ports": [{"name": "dns", "port": 53, "targetPort": DNS_PORT,
                                "protocol": "UDP"}]}}


def coredns_objects(image: str, replicas: int = 2) -> dict[str, Any]:
    """The Corefile, the Deployment and the Service, as one List for ``kubectl apply``."""
    return {"apiVersion": "v1", "kind": "List",
            "items": [corefile_configmap(), coredns_deployment(image, replicas),
                      dns_service()]}
