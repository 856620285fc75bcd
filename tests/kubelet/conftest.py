"""Fixtures of the kubelet's tests on the in-process apiserver (`lab.testenv`).

No controller-manager runs there, so `namespace` also does the root-CA publisher's job:
every pod's service-account volume projects the `kube-root-ca.crt` ConfigMap, and
without it the kubelet (rightly) reports FailedMount.
"""

from __future__ import annotations

import pytest

from kubelab.client import resource_for
from lab.testenv import Environment
from tests.conftest import new_namespace
from tests.kubelet.kubelet_fixture import Cluster


@pytest.fixture
def cluster(apiserver: Environment) -> Cluster:
    return Cluster.of(apiserver)


@pytest.fixture
def namespace(apiserver: Environment, cluster: Cluster, request: pytest.FixtureRequest) -> str:
    name = new_namespace(apiserver, request.node.name)
    root_ca = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "kube-root-ca.crt"},
        "data": {"ca.crt": cluster.ca_file.read_text()},
    }
    cluster.admin.create(resource_for("v1", "ConfigMap"), root_ca, name)
    return name
