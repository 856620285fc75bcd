"""The ingress controller add-on `labadm init` installs, as ingress-nginx is installed
on kind and k3s ships Traefik: namespace `ingress-nginx`, the default IngressClass
`nginx`, and the Deployment `ingress-nginx-controller` behind a LoadBalancer Service of
the same name (docs/architecture.md, "Ingress").

Its pod has two containers sharing an emptyDir at /etc/nginx/ingress: `controller`
runs `python -m agents.ingress` from the node image (as the control plane's static pods
and the DNS add-on do), writing nginx.conf and the TLS key pairs there; `nginx` runs the
lab's nginx image on that file, and reloads it whenever the controller writes a line to
the FIFO `reload` (the kubelet shares no process namespace between containers, so the
controller cannot signal nginx itself). The pod goes on a control-plane node, which
holds the node image already.
"""

from __future__ import annotations

from typing import Any

from agents.ingress.controller import CLASS_NAME, CONTROLLER_NAME
from kubelab.api.resources import Resource
from kubelab.client import RestClient, resource_for
from lab.images import NGINX_IMAGE
from lab.labadm import addon
from lab.labadm.addon import CLUSTER_ROLES, NAMESPACES, SERVICE_ACCOUNTS, SERVICES
from lab.labadm.layout import NODE_IMAGE_PYTHON, tracing_flags
from lab.labadm.workflow import say

NAMESPACE = "ingress-nginx"
NAME = "ingress-nginx-controller"
ACCOUNT = "ingress-nginx"
ROLE = "kubelab:ingress-nginx"
LABELS = {"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/component": "controller"}
CONF_DIR = "/etc/nginx/ingress"
DEFAULT_CLASS = "ingressclass.kubernetes.io/is-default-class"

INGRESS_CLASSES = resource_for("networking.k8s.io/v1", "IngressClass")

# The nginx container: nginx in the foreground of a shell that waits for the first
# nginx.conf, then reloads nginx at each line the controller writes to the FIFO.
NGINX_SCRIPT = f"""
D={CONF_DIR}
rm -f $D/reload && mkfifo $D/reload
until [ -s $D/nginx.conf ]; do sleep 0.2; done
nginx -c $D/nginx.conf -g 'daemon off;' &
trap 'nginx -c $D/nginx.conf -s quit; exit 0' TERM INT
while kill -0 $! 2>/dev/null; do
  read line < $D/reload && nginx -c $D/nginx.conf -s reload
done
""".strip()


def _rules() -> list[dict[str, Any]]:
    watch = ["list", "watch"]
    return [
        {"apiGroups": [""], "resources": ["services", "secrets"], "verbs": watch},
        {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": watch},
        {"apiGroups": ["networking.k8s.io"], "resources": ["ingresses"], "verbs": watch},
        {
            "apiGroups": ["networking.k8s.io"],
            "resources": ["ingresses/status"],
            "verbs": ["patch", "update"],
        },
        {"apiGroups": [""], "resources": ["events"], "verbs": ["create", "patch", "update"]},
    ]


def objects(image: str, tracing_endpoint: str = "") -> list[tuple[Resource, dict[str, Any]]]:
    """The add-on's objects in the order they are created (`image`: the node image)."""
    meta = {"name": NAME, "namespace": NAMESPACE, "labels": LABELS}
    volume = [{"name": "conf", "mountPath": CONF_DIR}]
    pod = {
        "serviceAccountName": ACCOUNT,
        **addon.on_control_plane(),
        "terminationGracePeriodSeconds": 5,
        "volumes": [{"name": "conf", "emptyDir": {}}],
        "containers": [
            {
                "name": "controller",
                "image": image,
                "imagePullPolicy": "IfNotPresent",
                "command": [
                    *(NODE_IMAGE_PYTHON, "-m", "agents.ingress", f"--conf-dir={CONF_DIR}"),
                    f"--publish-service={NAMESPACE}/{NAME}",
                    *tracing_flags(tracing_endpoint),
                ],
                "volumeMounts": volume,
                "resources": {"requests": {"cpu": "50m", "memory": "60Mi"}},
            },
            {
                "name": "nginx",
                "image": NGINX_IMAGE,
                "imagePullPolicy": "IfNotPresent",
                "command": ["sh", "-c", NGINX_SCRIPT],
                "ports": [
                    {"name": "http", "containerPort": 80, "protocol": "TCP"},
                    {"name": "https", "containerPort": 443, "protocol": "TCP"},
                ],
                "volumeMounts": volume,
                "resources": {"requests": {"cpu": "50m", "memory": "20Mi"}},
            },
        ],
    }
    return [
        (NAMESPACES, {"metadata": {"name": NAMESPACE}}),
        (SERVICE_ACCOUNTS, {"metadata": {"name": ACCOUNT, "namespace": NAMESPACE}}),
        (CLUSTER_ROLES, {"metadata": {"name": ROLE}, "rules": _rules()}),
        addon.role_binding(ROLE, ACCOUNT, NAMESPACE),
        (
            INGRESS_CLASSES,
            {
                "metadata": {"name": CLASS_NAME, "annotations": {DEFAULT_CLASS: "true"}},
                "spec": {"controller": CONTROLLER_NAME},
            },
        ),
        addon.deployment(meta, pod),
        (
            SERVICES,
            {
                "metadata": meta,
                "spec": {
                    "type": "LoadBalancer",
                    "selector": LABELS,
                    "ports": [
                        {"name": "http", "port": 80, "protocol": "TCP", "targetPort": "http"},
                        {"name": "https", "port": 443, "protocol": "TCP", "targetPort": "https"},
                    ],
                },
            },
        ),
    ]


def deploy(client: RestClient | None, image: str, tracing_endpoint: str = "") -> None:
    """Create the add-on's objects, leaving those that exist (a re-run of the phase);
    a None client is a dry run."""
    addon.create(client, objects(image, tracing_endpoint), "ingress")
    say("addons", f"Applied addon: ingress-nginx, IngressClass {CLASS_NAME} (default)")
