"""DefaultIngressClass admission on the real apiserver: an Ingress without a class gets
the default one (the newest of several), one naming a class or carrying the old
annotation keeps what it says, and a cluster without a default class leaves it as it
is."""

from __future__ import annotations

import time
from typing import Any

from kubelab.client import RestClient, resource_for
from lab.testenv import Environment

INGRESSES = resource_for("networking.k8s.io/v1", "Ingress")
CLASSES = resource_for("networking.k8s.io/v1", "IngressClass")
DEFAULT = "ingressclass.kubernetes.io/is-default-class"


def ingress_class(admin: RestClient, name: str, default: bool) -> None:
    annotations = {DEFAULT: "true"} if default else {}
    body = {
        "metadata": {"name": name, "annotations": annotations},
        "spec": {"controller": "k8s.io/ingress-nginx"},
    }
    admin.create(CLASSES, body)


def class_of(
    admin: RestClient, name: str, annotations: dict[str, str] | None = None, **spec: Any
) -> object:
    backend = {"service": {"name": "web", "port": {"number": 80}}}
    body = {
        "metadata": {"name": name, "annotations": annotations or {}},
        "spec": {"defaultBackend": backend, **spec},
    }
    return admin.create(INGRESSES, body, "default")["spec"].get("ingressClassName")


def test_ingresses_without_a_class_get_the_default() -> None:
    with Environment.start() as env, RestClient(env.client_config(), qps=None) as admin:
        assert class_of(admin, "before") is None
        ingress_class(admin, "other", default=False)
        ingress_class(admin, "nginx", default=True)
        assert class_of(admin, "plain") == "nginx"
        assert class_of(admin, "chosen", ingressClassName="other") == "other"
        old_style = {"kubernetes.io/ingress.class": "other"}
        assert class_of(admin, "annotated", annotations=old_style) is None
        time.sleep(1.1)  # creationTimestamp has a resolution of seconds
        ingress_class(admin, "newer", default=True)
        assert class_of(admin, "after") == "newer"
