"""The ServiceAccount `default` and the ConfigMap `kube-root-ca.crt` in every active
namespace: created, recreated when deleted, put back when edited, and never added to a
namespace that is being deleted."""

from __future__ import annotations

from controlplane.controllers.serviceaccounts import (
    DESCRIPTION_ANNOTATION,
    RootCACertPublisher,
    ServiceAccountsController,
)
from kubelab.api import errors
from kubelab.client import resource_for
from tests.unit.client.conftest import eventually
from tests.unit.controllers.conftest import Cluster, Harness, new_object

NAMESPACES = resource_for("v1", "Namespace")
SERVICE_ACCOUNTS = resource_for("v1", "ServiceAccount")
CONFIGMAPS = resource_for("v1", "ConfigMap")

CA = "--- the cluster CA ---\n"  # what the harness passes as --root-ca-file's content


def namespaces(cluster: Cluster) -> None:
    """Two active namespaces and one being deleted."""
    new_object(cluster, NAMESPACES, "a")
    new_object(cluster, NAMESPACES, "b", status={"phase": "Active"})
    new_object(cluster, NAMESPACES, "leaving", spec={"finalizers": ["kubernetes"]})
    cluster.delete(NAMESPACES, "", "leaving")


def test_every_active_namespace_gets_a_default_service_account(
    cluster: Cluster, harness: Harness
) -> None:
    namespaces(cluster)
    harness.run(ServiceAccountsController(harness.ctx))
    eventually(lambda: cluster.exists(SERVICE_ACCOUNTS, "a", "default"))
    eventually(lambda: cluster.exists(SERVICE_ACCOUNTS, "b", "default"))
    new_object(cluster, NAMESPACES, "c")
    eventually(lambda: cluster.exists(SERVICE_ACCOUNTS, "c", "default"))
    assert not cluster.exists(SERVICE_ACCOUNTS, "leaving", "default")

    first_uid = cluster.get(SERVICE_ACCOUNTS, "a", "default")["metadata"]["uid"]
    cluster.delete(SERVICE_ACCOUNTS, "a", "default")

    def recreated() -> bool:
        return (
            cluster.exists(SERVICE_ACCOUNTS, "a", "default")
            and cluster.get(SERVICE_ACCOUNTS, "a", "default")["metadata"]["uid"] != first_uid
        )

    eventually(recreated)


def test_every_active_namespace_gets_the_root_ca_kept_as_the_file_says(
    cluster: Cluster, harness: Harness
) -> None:
    namespaces(cluster)
    harness.run(RootCACertPublisher(harness.ctx))
    eventually(lambda: cluster.exists(CONFIGMAPS, "a", "kube-root-ca.crt"))
    published = cluster.get(CONFIGMAPS, "a", "kube-root-ca.crt")
    assert published["data"] == {"ca.crt": CA}
    assert published["metadata"]["annotations"][DESCRIPTION_ANNOTATION]
    eventually(lambda: cluster.exists(CONFIGMAPS, "b", "kube-root-ca.crt"))
    assert not cluster.exists(CONFIGMAPS, "leaving", "kube-root-ca.crt")

    edited = cluster.get(CONFIGMAPS, "a", "kube-root-ca.crt")
    edited["data"] = {"ca.crt": "something else", "extra": "x"}
    cluster.update(CONFIGMAPS, edited)
    eventually(lambda: cluster.get(CONFIGMAPS, "a", "kube-root-ca.crt")["data"] == {"ca.crt": CA})

    cluster.delete(CONFIGMAPS, "b", "kube-root-ca.crt")
    eventually(lambda: cluster.exists(CONFIGMAPS, "b", "kube-root-ca.crt"))
    new_object(cluster, CONFIGMAPS, "unrelated", "a", data={"k": "v"})
    assert cluster.get(CONFIGMAPS, "a", "unrelated")["data"] == {"k": "v"}


def test_an_object_created_meanwhile_by_someone_else_is_not_an_error(
    cluster: Cluster, harness: Harness
) -> None:
    new_object(cluster, NAMESPACES, "a")
    publisher = RootCACertPublisher(harness.ctx)
    harness.sync_caches()
    # Someone else created it after the publisher's cache was filled.
    exists = errors.already_exists("configmaps", "kube-root-ca.crt")
    cluster.faults.status(exists, method="POST", path="/namespaces/a/configmaps")
    assert publisher.sync("a") is None, "the object's own event will bring the namespace back"
    assert len(cluster.calls("POST", "/configmaps")) == 1
