"""DefaultStorageClass admission on the real apiserver: a claim without a class gets the
default one (the newest of several), an explicit "" stays without, and a cluster without
a default class leaves claims as they are."""

from __future__ import annotations

import itertools

from kubelab.api import claims
from kubelab.client import RestClient, resource_for
from lab.testenv import Environment
from tests.waiting import until

CLAIMS = resource_for("v1", "PersistentVolumeClaim")
CLASSES = resource_for("storage.k8s.io/v1", "StorageClass")


def storage_class(admin: RestClient, name: str, default: bool) -> None:
    annotations = {claims.DEFAULT_CLASS: "true"} if default else {}
    body = {
        "metadata": {"name": name, "annotations": annotations},
        "provisioner": "rancher.io/local-path",
    }
    admin.create(CLASSES, body)


def class_of(admin: RestClient, name: str, **spec: object) -> object:
    body = {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            **spec,
        },
    }
    return admin.create(CLAIMS, body, "default")["spec"].get("storageClassName")


def test_claims_without_a_class_get_the_default() -> None:
    with Environment.start() as env, RestClient(env.client_config(), qps=None) as admin:
        assert class_of(admin, "before") is None
        storage_class(admin, "slow", default=False)
        storage_class(admin, "standard", default=True)
        # Admission reads the classes from the watch cache, which may lag the create.
        probes = itertools.count()
        until(lambda: class_of(admin, f"probe-{next(probes)}") == "standard", "the default")
        assert class_of(admin, "plain") == "standard"
        assert class_of(admin, "none", storageClassName="") == ""
        assert class_of(admin, "chosen", storageClassName="slow") == "slow"
