"""One image name everywhere: what `make image` labels, the manifests, the kustomization's
``images:`` entry, the chart's default and the README all name the image the project
publishes under (image/name.txt), at the package's version."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
NAME = (REPO / "image" / "name.txt").read_text().strip()
VERSION = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]


def test_the_name_is_a_real_looking_reference() -> None:
    assert re.fullmatch(r"[a-z0-9.-]+\.[a-z]+/[a-z0-9-]+/[a-z0-9-]+", NAME), NAME
    assert "example" not in NAME


def test_manifests_and_kustomization_default_to_it() -> None:
    kustomization = yaml.safe_load((REPO / "manifests" / "kustomization.yaml").read_text())
    assert kustomization["images"] == [{"name": NAME, "newTag": VERSION}]
    images = set()
    for path in sorted([*(REPO / "manifests").rglob("*.yaml"),
                        *(REPO / "migrations").rglob("*.yaml")]):
        images |= set(re.findall(r"^\s*image: (\S+)$", path.read_text(), re.M))
    assert images == {f"{NAME}:{VERSION}"}, images
    helm = yaml.safe_load((REPO / "migrations" / "upstream-helm" / "values.yaml").read_text())
    assert helm == {"image": {"repository": NAME, "tag": VERSION}}


def test_chart_defaults_to_it() -> None:
    chart = REPO / "charts" / "cluster-proportional-autoscaler"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert values["image"]["repository"] == NAME
    assert yaml.safe_load((chart / "Chart.yaml").read_text())["appVersion"] == VERSION


def test_readme_states_it() -> None:
    assert f"`{NAME}`" in (REPO / "README.md").read_text()
