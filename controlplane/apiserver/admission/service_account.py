"""ServiceAccount: a pod runs as ``default`` unless it names an account, the account must
exist, and the pod gets the projected service-account token volume
(``kube-api-access-<5 chars>``) mounted at /var/run/secrets/kubernetes.io/serviceaccount
(the token the kubelet writes there is how a pod talks to the API)."""

from __future__ import annotations

from kubelab.api import errors

from ..registry import Attributes
from ..strategies.generic import generate_name
from .interfaces import MutationInterface, Object, created_pod

TOKEN_PATH = "/var/run/secrets/kubernetes.io/serviceaccount"


class ServiceAccount(MutationInterface):
    NAME = "ServiceAccount"
    OPERATIONS = frozenset({"CREATE"})

    def admit(self, attrs: Attributes) -> None:
        pod = created_pod(attrs)
        if pod is None:
            return
        namespace = attrs.namespace
        spec = pod.setdefault("spec", {})
        name = spec.get("serviceAccountName") or spec.get("serviceAccount") or "default"
        spec["serviceAccountName"] = name
        spec.pop("serviceAccount", None)
        if pod.get("metadata", {}).get("annotations", {}).get("kubernetes.io/config.mirror"):
            return  # mirror pods of static pods are the kubelet's, not the API's
        if self.lookup.find("serviceaccounts", namespace, name) is None:
            raise errors.StatusError(
                403,
                "Forbidden",
                f'pods "{pod.get("metadata", {}).get("name", "")}" is forbidden: error looking '
                f'up service account {namespace}/{name}: serviceaccount "{name}" not found',
            )
        if spec.get("automountServiceAccountToken") is False:
            return
        volumes = spec.setdefault("volumes", [])
        if any(v.get("name", "").startswith("kube-api-access-") for v in volumes):
            return
        volume = generate_name("kube-api-access-")
        volumes.append({"name": volume, "projected": _token_projection()})
        for c in spec.get("containers", []) + spec.get("initContainers", []):
            mounts = c.setdefault("volumeMounts", [])
            if not any(m.get("mountPath") == TOKEN_PATH for m in mounts):
                mounts.append({"name": volume, "readOnly": True, "mountPath": TOKEN_PATH})


def _token_projection() -> Object:
    """The token, the cluster's CA and the pod's namespace, as kube-apiserver projects
    them."""
    return {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {
                            "path": "namespace",
                            "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"},
                        }
                    ]
                }
            },
        ],
    }
