"""The Docker lab's cluster config (kind-like YAML): defaults, and errors that say what
is wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from lab.cluster import ClusterConfig, LabError


def test_default_is_one_control_plane_and_two_workers() -> None:
    config = ClusterConfig.load(None)
    assert (config.name, config.roles) == ("kubelab", ("control-plane", "worker", "worker"))


def test_file(tmp_path: Path) -> None:
    path = tmp_path / "cluster.yaml"
    path.write_text("kind: Cluster\nname: small\nnodes:\n- role: control-plane\n")
    assert ClusterConfig.load(path) == ClusterConfig("small", ("control-plane",))


@pytest.mark.parametrize(
    ("doc", "message"),
    [
        ({"kind": "Pod"}, "kind: Cluster"),
        ({"name": "Big_Lab"}, "lowercase"),
        ({"nodes": [{"role": "master"}]}, "role of control-plane, worker"),
        ({"nodes": [{"role": "worker"}]}, "exactly one control-plane node"),
    ],
)
def test_bad_configs_say_what_to_fix(doc: object, message: str) -> None:
    with pytest.raises(LabError, match=message):
        ClusterConfig.parse(doc)
