"""Static checks of manifests/vertical/: the ``/cpvpa`` examples.

Each Deployment runs CPVA's command line (parsed and validated by ``/cpvpa``'s own
parser), reads its config from the shipped ConfigMap's key (decoded as CPVA decodes it),
and its ServiceAccount is granted exactly CPVA's rules plus watch on nodes, and in
in-place mode exactly the rules that mode needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cpa.vertical import cpvpa_flags as options
from cpa.vertical.decide.cpva_config import decode_config, object_kinds
from tests.repo.test_manifests import granted_to, load, of_kind, one

REPO = Path(__file__).resolve().parents[2]
VERTICAL = REPO / "manifests" / "vertical"
FILES = sorted(VERTICAL.glob("*.yaml"))

CPVA_NODES = {("", "nodes", "list")}  # CPVA's examples/RBAC
WATCH = {("", "nodes", "watch")}  # ours: a watch instead of a list per poll
IN_PLACE = {("", "pods", "list"), ("", "pods/resize", "patch")}


def deployment_flags(docs: list[dict[str, Any]]) -> tuple[dict[str, Any],
                                                           options.VerticalOptions]:
    deployment = one(docs, "Deployment")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[0] == "/cpvpa"
    opts = options.parse(command[1:], environ={})
    assert options.validate(opts) == [], command
    return deployment, opts


def test_there_are_both_examples() -> None:
    assert {p.name for p in FILES} == {"cpvpa.yaml", "cpvpa-in-place.yaml",
                                       "cpvpa-coredns-memory.yaml"}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_each_example_is_a_working_cpva_command_line(path: Path) -> None:
    docs = load(path)
    deployment, opts = deployment_flags(docs)
    pod = deployment["spec"]["template"]["spec"]
    namespace = deployment["metadata"]["namespace"]
    assert opts.namespace == namespace
    # The config is the ConfigMap's key, mounted where --config-file points.
    (container,) = pod["containers"]
    mount = next(m for m in container["volumeMounts"] if opts.config_file.startswith(
        m["mountPath"] + "/"))
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = one(docs, "ConfigMap")
    assert volume["configMap"]["name"] == configmap["metadata"]["name"]
    key = opts.config_file.removeprefix(mount["mountPath"] + "/")
    config = decode_config(configmap["data"][key])
    assert config is not None
    assert opts.patch_target is not None
    assert set(config) == {opts.patch_target.name}  # the target's container, by its name
    # The project's Pod hardening, and probes on the health port the flags open.
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] and not sc["allowPrivilegeEscalation"]
    assert sc["capabilities"]["drop"] == ["ALL"]
    assert opts.health_port == 8080
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": 8080}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_rbac_is_cpvas_plus_what_the_flags_need(path: Path) -> None:
    docs = load(path)
    deployment, opts = deployment_flags(docs)
    assert opts.patch_target is not None
    plural = f"{opts.patch_target.kind.lower()}s"
    want = CPVA_NODES | WATCH | {("apps", plural, "patch")}
    if opts.resize_mode == "in-place":
        want |= IN_PLACE | {("apps", plural, "get")}
    configmap = one(docs, "ConfigMap")
    counted = object_kinds(decode_config(next(iter(configmap["data"].values()))))
    want |= {("", kind, verb) for kind in counted for verb in ("list", "watch")}
    sa = deployment["spec"]["template"]["spec"]["serviceAccountName"]
    assert granted_to(docs, deployment["metadata"]["namespace"], sa) == want
    # The target's rights are namespaced and name the one object.
    for role in of_kind(docs, "Role"):
        for rule in role["rules"]:
            if rule["apiGroups"] == ["apps"]:
                assert rule["resourceNames"] == [opts.patch_target.name]
    assert not [r for r in of_kind(docs, "ClusterRole") for rule in r["rules"]
                if rule["resources"] not in (["nodes"], sorted(counted))]
