"""Bootstrap tokens and the public `cluster-info` (seeds: a worker joining with kubeadm).

A bootstrap token `<id>.<secret>` is a Secret `kube-system/bootstrap-token-<id>` of type
`bootstrap.kubernetes.io/token`; the apiserver authenticates it as
`system:bootstrap:<id>` in `system:bootstrappers` (and the extra groups it names) until
its `expiration`, after which the controller-manager's token cleaner deletes it. What a
joining node may do with it is RBAC's: post a CertificateSigningRequest
(`system:node-bootstrapper`) and have it approved automatically (`nodeclient`), which
`allow_node_bootstrap` binds as kubeadm does. `cluster-info` in `kube-public` holds the
CA and the endpoint in a kubeconfig anyone may read: the joining node trusts it once its
CA's public key matches the hash it was given.
"""

from __future__ import annotations

import base64
import datetime
import re
import secrets
import string
from collections.abc import Mapping
from typing import Any

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from kubelab.api.resources import Resource
from kubelab.client import Object, RestClient, StatusError, resource_for, rfc3339

SECRETS = resource_for("v1", "Secret")
CONFIG_MAPS = resource_for("v1", "ConfigMap")
ROLES = resource_for("rbac.authorization.k8s.io/v1", "Role")
ROLE_BINDINGS = resource_for("rbac.authorization.k8s.io/v1", "RoleBinding")
CLUSTER_ROLE_BINDINGS = resource_for("rbac.authorization.k8s.io/v1", "ClusterRoleBinding")
TOKEN_TYPE = "bootstrap.kubernetes.io/token"
DEFAULT_GROUP = "system:bootstrappers:kubeadm:default-node-token"
DEFAULT_TTL = datetime.timedelta(hours=24)
TOKEN_RE = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
_ALPHABET = string.ascii_lowercase + string.digits


class TokenError(ValueError):
    """A token that is not `[a-z0-9]{6}.[a-z0-9]{16}`."""


def _pick(count: int) -> str:
    return "".join(secrets.choice(_ALPHABET) for _ in range(count))


def generate() -> str:
    return f"{_pick(6)}.{_pick(16)}"


def parse(token: str) -> tuple[str, str]:
    found = TOKEN_RE.match(token)
    if found is None:
        raise TokenError(
            f"token {token!r} is not of the form [a-z0-9]{{6}}.[a-z0-9]{{16}}; "
            "`labadm token create` makes one"
        )
    return found.group(1), found.group(2)


def create_or_keep(client: RestClient, resource: Resource, body: Mapping[str, Any]) -> None:
    """Create `body`, leaving an existing object of that name as it is (re-runs)."""
    try:
        client.create(resource, body)
    except StatusError as exc:
        if exc.code != 409:
            raise


def create(
    client: RestClient,
    *,
    token: str | None = None,
    ttl: datetime.timedelta = DEFAULT_TTL,
    description: str = "",
    now: datetime.datetime | None = None,
    usages: tuple[str, ...] = ("authentication", "signing"),
) -> str:
    """Store a bootstrap token for joining nodes (a new one unless `token` is given).
    Without usages it authenticates nobody and signs nothing: it only carries an
    expiry (the uploaded certs' Secret is owned by such a token, as kubeadm does)."""
    token = token or generate()
    token_id, secret = parse(token)
    data = {"token-id": token_id, "token-secret": secret}
    data.update({f"usage-bootstrap-{usage}": "true" for usage in usages})
    if "authentication" in usages:
        data["auth-extra-groups"] = DEFAULT_GROUP
    if description:
        data["description"] = description
    if ttl.total_seconds() > 0:
        expires = (now or datetime.datetime.now(datetime.UTC)) + ttl
        data["expiration"] = rfc3339(expires)
    client.create(
        SECRETS,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "type": TOKEN_TYPE,
            "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
            "stringData": data,
        },
    )
    return token


def listed(client: RestClient) -> list[Object]:
    """The bootstrap tokens' Secrets."""
    items = client.list(SECRETS, "kube-system")["items"]
    return [s for s in items if s.get("type") == TOKEN_TYPE]


def delete(client: RestClient, token_or_id: str) -> str:
    """Delete a token by its id or the whole token; its id."""
    token_id = token_or_id.partition(".")[0]
    try:
        client.delete(SECRETS, f"bootstrap-token-{token_id}", "kube-system")
    except StatusError as exc:
        if exc.code == 404:
            raise TokenError(
                f"bootstrap token {token_id!r} not found; `labadm token list` shows them"
            ) from None
        raise
    return token_id


def binding(kind: str, name: str, role: str, group: str, namespace: str = "") -> Object:
    meta: dict[str, Any] = {"name": name}
    if namespace:
        meta["namespace"] = namespace
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": kind,
        "metadata": meta,
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole" if kind == "ClusterRoleBinding" else "Role",
            "name": role,
        },
        "subjects": [subject(group)],
    }


def subject(group: str) -> Object:
    """An RBAC subject: the group, or the anonymous user (which is a user)."""
    kind = "User" if group == "system:anonymous" else "Group"
    return {"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": group}


def allow_get(
    client: RestClient, name: str, namespace: str, resource: str, object_name: str,
    *groups: str,
) -> None:  # fmt: skip
    """A Role `name` allowing `get` of one object, bound to `groups`: how kubeadm lets
    joining nodes (or anonymous) read exactly what they need before they are nodes."""
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "Role",
        "metadata": {"name": name, "namespace": namespace},
        "rules": [
            {
                "apiGroups": [""],
                "resources": [resource],
                "resourceNames": [object_name],
                "verbs": ["get"],
            }
        ],
    }
    create_or_keep(client, ROLES, role)
    readers = binding("RoleBinding", name, name, groups[0], namespace)
    readers["subjects"] += [subject(g) for g in groups[1:]]
    create_or_keep(client, ROLE_BINDINGS, readers)


def allow_node_bootstrap(client: RestClient) -> None:
    """kubeadm's bindings: bootstrappers post CSRs, which are approved automatically, and
    nodes have their renewals approved too."""
    for name, role, group in (
        ("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", DEFAULT_GROUP),
        (
            "kubeadm:node-autoapprove-bootstrap",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
            DEFAULT_GROUP,
        ),
        (
            "kubeadm:node-autoapprove-certificate-rotation",
            "system:certificates.k8s.io:certificatesigningrequests:selfnodeclient",
            "system:nodes",
        ),
    ):
        create_or_keep(
            client, CLUSTER_ROLE_BINDINGS, binding("ClusterRoleBinding", name, role, group)
        )


def publish_cluster_info(client: RestClient, server: str, ca: x509.Certificate) -> None:
    """`kube-public/cluster-info` (a kubeconfig with the CA and endpoint, no user), and
    the Role letting the anonymous user read it."""
    ca_pem = ca.public_bytes(serialization.Encoding.PEM)
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {
                    "server": server,
                    "certificate-authority-data": base64.b64encode(ca_pem).decode(),
                },
            }
        ],
        "contexts": [],
        "users": [],
    }
    create_or_keep(
        client,
        CONFIG_MAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "cluster-info", "namespace": "kube-public"},
            "data": {"kubeconfig": yaml.safe_dump(kubeconfig)},
        },
    )
    allow_get(
        client,
        "kubeadm:bootstrap-signer-clusterinfo",
        "kube-public",
        "configmaps",
        "cluster-info",
        "system:anonymous",
    )


def decode(value: str) -> str:
    """A Secret's data value as text."""
    return base64.b64decode(value).decode()


CLUSTER_CONFIG = "kubelab-config"
"""kube-system's ConfigMap with the cluster's settings (kubeadm's `kubeadm-config`)."""


def upload_cluster_config(client: RestClient, settings: Mapping[str, str]) -> None:
    """`kube-system/kubelab-config`, readable by joining nodes (their token) and by
    nodes, as kubeadm lets them read `kubeadm-config`."""
    create_or_keep(
        client,
        CONFIG_MAPS,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": CLUSTER_CONFIG, "namespace": "kube-system"},
            "data": {"ClusterConfiguration": yaml.safe_dump(dict(settings))},
        },
    )
    allow_get(
        client,
        "kubeadm:nodes-kubelab-config",
        "kube-system",
        "configmaps",
        CLUSTER_CONFIG,
        DEFAULT_GROUP,
        "system:nodes",
    )


def read_cluster_config(client: RestClient) -> dict[str, str]:
    found = client.get(CONFIG_MAPS, CLUSTER_CONFIG, "kube-system")
    settings = yaml.safe_load(found["data"]["ClusterConfiguration"])
    return {str(k): str(v) for k, v in settings.items()}
