"""CustomResourceDefinitions with the real kubectl and the official client: a CRD
written is served (discovery, CRUD, watch), its schema validates, prunes and defaults,
its status and scale subresources and printer columns work, and deleting it deletes
its objects."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lab.testenv import Environment

KUBECTL = str(Path(sys.executable).parent / "kubectl")


def kubectl(env: Environment, *args: str, stdin: str = "", check: bool = True) -> str:
    done = subprocess.run(
        [KUBECTL, f"--kubeconfig={env.kubeconfig}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
    )
    if check and done.returncode != 0:
        raise AssertionError(f"kubectl {' '.join(args)} failed: {done.stderr}")
    return done.stdout if check else done.stdout + done.stderr


def crd_manifest(group: str, scope: str = "Namespaced") -> dict[str, Any]:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "required": ["size"],
                "properties": {
                    "size": {"type": "integer", "minimum": 1, "maximum": 10},
                    "color": {"type": "string", "enum": ["red", "blue"], "default": "red"},
                    "replicas": {"type": "integer", "default": 1},
                    "scaling": {
                        "type": "object",
                        "properties": {"count": {"type": "integer"}},
                    },
                    "extra": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                },
            },
            "status": {
                "type": "object",
                "properties": {"phase": {"type": "string"}, "replicas": {"type": "integer"}},
            },
        },
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": scope,
            "names": {
                "plural": "widgets",
                "singular": "widget",
                "kind": "Widget",
                "shortNames": ["wdg"],
                "categories": ["all"],
            },
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {
                        "status": {},
                        "scale": {
                            "specReplicasPath": ".spec.scaling.count",
                            "statusReplicasPath": ".status.replicas",
                        },
                    },
                    "additionalPrinterColumns": [
                        {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
                        {"name": "Color", "type": "string", "jsonPath": ".spec.color"},
                        {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
                    ],
                },
                {
                    "name": "v1beta1",
                    "served": True,
                    "storage": False,
                    "schema": {"openAPIV3Schema": schema},
                    "subresources": {"status": {}},
                },
            ],
        },
    }


def schemaless_crd(group: str, plural: str, kind: str) -> dict[str, Any]:
    """A namespaced CRD of one version that keeps any field: its objects can take the
    shape of a core kind's."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": True,
                        }
                    },
                }
            ],
        },
    }


def wait_established(env: Environment, name: str) -> None:
    kubectl(env, "wait", "--for=condition=Established", f"crd/{name}", "--timeout=20s")


@pytest.fixture
def group(apiserver: Environment) -> Iterator[str]:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(crd_manifest(group)))
    wait_established(apiserver, f"widgets.{group}")
    yield group
    kubectl(apiserver, "delete", "crd", f"widgets.{group}", "--wait=false", check=False)


def widget(name: str, group: str, **spec: Any) -> str:
    return json.dumps(
        {"apiVersion": f"{group}/v1", "kind": "Widget", "metadata": {"name": name}, "spec": spec}
    )


def test_crd_is_served_and_established(apiserver: Environment, group: str) -> None:
    resources = kubectl(apiserver, "api-resources", f"--api-group={group}", "-o", "wide")
    assert "widgets" in resources and "wdg" in resources and "Widget" in resources
    crd = json.loads(kubectl(apiserver, "get", "crd", f"widgets.{group}", "-o", "json"))
    conditions = {c["type"]: c["status"] for c in crd["status"]["conditions"]}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}
    assert crd["status"]["acceptedNames"]["kind"] == "Widget"
    # Applied again with a change (kubectl sends a strategic merge patch): served anew.
    changed = crd_manifest(group)
    changed["spec"]["names"]["shortNames"] = ["wdg", "wg"]
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(changed))
    deadline = time.monotonic() + 10
    while "wg" not in kubectl(apiserver, "api-resources", f"--api-group={group}"):
        assert time.monotonic() < deadline, "the changed CRD was not served"
        time.sleep(0.2)


def test_custom_objects_crud_with_kubectl(
    apiserver: Environment, group: str, namespace: str
) -> None:
    ns = f"--namespace={namespace}"
    kubectl(apiserver, ns, "apply", "-f", "-", stdin=widget("one", group, size=3))
    got = json.loads(kubectl(apiserver, ns, "get", f"widgets.{group}", "one", "-o", "json"))
    assert got["spec"] == {"size": 3, "color": "red", "replicas": 1}  # defaulted
    kubectl(apiserver, ns, "apply", "-f", "-", stdin=widget("one", group, size=4))
    table = kubectl(apiserver, ns, "get", "wdg")
    assert table.split("\n")[0].split() == ["NAME", "SIZE", "COLOR", "PHASE"]
    assert table.split("\n")[1].split() == ["one", "4", "red", "<none>"]
    assert f"widget.{group}/one" in kubectl(apiserver, ns, "get", "all")  # its category
    listed = json.loads(kubectl(apiserver, ns, "get", "widgets", "-o", "json"))
    assert [w["metadata"]["name"] for w in listed["items"]] == ["one"]
    kubectl(apiserver, ns, "delete", "widget", "one")
    assert "No resources found" in kubectl(apiserver, ns, "get", "widgets", check=False)


def test_schema_validates_and_prunes(apiserver: Environment, group: str, namespace: str) -> None:
    ns = f"--namespace={namespace}"
    out = kubectl(
        apiserver, ns, "create", "-f", "-", stdin=widget("big", group, size=11), check=False
    )
    assert "spec.size" in out and "less than or equal to 10" in out
    out = kubectl(
        apiserver,
        ns,
        "create",
        "-f",
        "-",
        stdin=widget("pink", group, size=1, color="pink"),
        check=False,
    )
    assert 'spec.color: Unsupported value: "pink"' in out
    out = kubectl(apiserver, ns, "create", "-f", "-", stdin=widget("none", group), check=False)
    assert "spec.size: Required value" in out
    out = kubectl(
        apiserver,
        ns,
        "create",
        "-f",
        "-",
        stdin=widget("typo", group, size=1, colour="red"),
        check=False,
    )
    assert 'unknown field "spec.colour"' in out
    kubectl(
        apiserver,
        ns,
        "create",
        "--validate=false",
        "-f",
        "-",
        stdin=widget("kept", group, size=1, colour="red", extra={"any": {"thing": 1}}),
    )
    got = json.loads(kubectl(apiserver, ns, "get", f"widgets.{group}", "kept", "-o", "json"))
    assert "colour" not in got["spec"]  # pruned
    assert got["spec"]["extra"] == {"any": {"thing": 1}}  # preserved


def test_status_and_scale_subresources(apiserver: Environment, group: str, namespace: str) -> None:
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(str(apiserver.kubeconfig)))
    body = json.loads(widget("w", group, size=2))
    body["status"] = {"phase": "Ignored"}
    created = api.create_namespaced_custom_object(group, "v1", namespace, "widgets", body)
    assert "status" not in created  # a new object's status is the controller's to write
    api.patch_namespaced_custom_object_status(
        group, "v1", namespace, "widgets", "w", {"status": {"phase": "Ready", "replicas": 1}}
    )
    kubectl(apiserver, f"--namespace={namespace}", "scale", f"widgets.{group}/w", "--replicas=3")
    got = api.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")
    assert got["spec"]["scaling"] == {"count": 3} and got["status"]["phase"] == "Ready"
    # A main-resource write cannot change the status.
    got["status"]["phase"] = "Changed"
    api.replace_namespaced_custom_object(group, "v1", namespace, "widgets", "w", got)
    again = api.get_namespaced_custom_object(group, "v1", namespace, "widgets", "w")
    assert again["status"]["phase"] == "Ready"
    scale = api.get_namespaced_custom_object_scale(group, "v1", namespace, "widgets", "w")
    assert scale["spec"]["replicas"] == 3 and scale["status"]["replicas"] == 1


def test_other_served_version_changes_only_api_version(
    apiserver: Environment, group: str, namespace: str
) -> None:
    from kubernetes import client, config

    api = client.CustomObjectsApi(config.new_client_from_config(str(apiserver.kubeconfig)))
    body = json.loads(widget("old", group, size=5))
    body["apiVersion"] = f"{group}/v1beta1"
    created = api.create_namespaced_custom_object(group, "v1beta1", namespace, "widgets", body)
    assert created["apiVersion"] == f"{group}/v1beta1"
    stored = api.get_namespaced_custom_object(group, "v1", namespace, "widgets", "old")
    assert stored["apiVersion"] == f"{group}/v1" and stored["spec"]["size"] == 5
    api.patch_namespaced_custom_object_status(
        group, "v1beta1", namespace, "widgets", "old", {"status": {"phase": "Old"}}
    )
    stored = api.get_namespaced_custom_object(group, "v1", namespace, "widgets", "old")
    assert stored["apiVersion"] == f"{group}/v1" and stored["status"] == {"phase": "Old"}


def test_watch_sees_custom_objects(apiserver: Environment, group: str, namespace: str) -> None:
    from kubernetes import client, config, watch

    api = client.CustomObjectsApi(config.new_client_from_config(str(apiserver.kubeconfig)))
    api.create_namespaced_custom_object(
        group, "v1", namespace, "widgets", json.loads(widget("seen", group, size=1))
    )
    stream = watch.Watch().stream(
        api.list_namespaced_custom_object,
        group,
        "v1",
        namespace,
        "widgets",
        timeout_seconds=10,
    )
    first = next(stream)
    assert first["type"] == "ADDED" and first["object"]["metadata"]["name"] == "seen"


def test_cluster_scoped_and_deleting_the_crd_deletes_objects(apiserver: Environment) -> None:
    group = f"c{uuid.uuid4().hex[:8]}.example.com"
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(crd_manifest(group, "Cluster")))
    wait_established(apiserver, f"widgets.{group}")
    kubectl(apiserver, "create", "-f", "-", stdin=widget("global", group, size=1))
    assert "global" in kubectl(apiserver, "get", f"widgets.{group}")
    kubectl(apiserver, "delete", "crd", f"widgets.{group}", "--timeout=30s")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        out = kubectl(apiserver, "api-resources", f"--api-group={group}", check=False)
        if "widgets" not in out:
            break
        time.sleep(0.5)
    assert "widgets" not in out
    # Created again, it starts empty: the objects went with the CRD.
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(crd_manifest(group, "Cluster")))
    wait_established(apiserver, f"widgets.{group}")
    assert "No resources found" in kubectl(apiserver, "get", f"widgets.{group}", check=False)
    kubectl(apiserver, "delete", "crd", f"widgets.{group}", "--timeout=30s")


def test_kubectl_explain_reads_the_crd_schema(apiserver: Environment, group: str) -> None:
    version = f"--api-version={group}/v1"
    out = kubectl(apiserver, "explain", "widgets.spec", version)
    assert "size" in out and "<integer>" in out and "-required-" in out
    out = kubectl(apiserver, "explain", "widgets.spec.color", version)
    assert "red" in out and "blue" in out


def test_a_kind_already_served_in_the_group_is_not_accepted(
    apiserver: Environment, group: str
) -> None:
    clash = crd_manifest(group)
    clash["metadata"]["name"] = f"gadgets.{group}"
    clash["spec"]["names"] = {"plural": "gadgets", "kind": "Widget"}
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(clash))
    try:
        kubectl(
            apiserver,
            "wait",
            "--for=condition=NamesAccepted=false",
            f"crd/gadgets.{group}",
            "--timeout=20s",
        )
        crd = json.loads(kubectl(apiserver, "get", "crd", f"gadgets.{group}", "-o", "json"))
        accepted = next(c for c in crd["status"]["conditions"] if c["type"] == "NamesAccepted")
        assert accepted["message"] == '"Widget" is already in use'
        assert "gadgets" not in kubectl(apiserver, "api-resources", f"--api-group={group}")
    finally:
        kubectl(apiserver, "delete", "crd", f"gadgets.{group}", "--timeout=30s")


def test_a_watch_from_a_too_old_version_is_an_error_event(
    apiserver: Environment, group: str, namespace: str
) -> None:
    """A custom resource's history starts when its CRD is served, so resourceVersion 1 is
    older than it. Kubernetes' watch cache answers 200 and then an ERROR event carrying a
    410 Expired Status (not an HTTP 410); every client relists on that event."""
    from kubernetes import client, config, watch
    from kubernetes.client.rest import ApiException

    from kubelab.client import ResourceExpired, RestClient
    from kubelab.client.discovery import discover

    path = f"/apis/{group}/v1/namespaces/{namespace}/widgets?watch=1&resourceVersion=1"
    raw = kubectl(apiserver, "get", "--raw", path)
    event = json.loads(raw)
    assert event["type"] == "ERROR"
    status = event["object"]
    assert (status["kind"], status["code"], status["reason"]) == ("Status", 410, "Expired")
    assert status["message"].startswith("too old resource version: 1 (")

    api = client.CustomObjectsApi(config.new_client_from_config(str(apiserver.kubeconfig)))
    stream = watch.Watch().stream(
        api.list_namespaced_custom_object,
        group,
        "v1",
        namespace,
        "widgets",
        resource_version="1",
        timeout_seconds=10,
    )
    with pytest.raises(ApiException) as expired:
        next(stream)
    assert expired.value.status == 410

    admin = RestClient(apiserver.client_config())
    try:
        # A custom resource is found through discovery, as any client finds one.
        widgets = next(r for r in discover(admin).custom if r.group == group)
        with (
            admin.watch(widgets, namespace, resource_version="1") as events,
            pytest.raises(ResourceExpired),
        ):
            next(iter(events))
    finally:
        admin.close()


def _rules_crd(group: str) -> dict[str, Any]:
    """Gauges: formats on strings, and CEL rules (a plain one, one with a
    messageExpression, a transition rule, one with a fieldPath) on the spec."""
    crd = crd_manifest(group)
    crd["metadata"]["name"] = f"gauges.{group}"
    crd["spec"]["names"] = {"plural": "gauges", "singular": "gauge", "kind": "Gauge"}
    crd["spec"]["versions"] = [crd["spec"]["versions"][0]]
    version = crd["spec"]["versions"][0]
    version.pop("subresources", None)
    version.pop("additionalPrinterColumns", None)
    version["schema"] = {
        "openAPIV3Schema": {
            "type": "object",
            "properties": {
                "spec": {
                    "type": "object",
                    "x-kubernetes-validations": [
                        {"rule": "self.low <= self.high", "message": "low must not exceed high"},
                        {
                            "rule": "self.high <= 100",
                            "messageExpression": "'high is ' + string(self.high) + ', over 100'",
                        },
                        {"rule": "self.unit == oldSelf.unit", "message": "unit is immutable"},
                        {
                            "rule": "!has(self.owner) || self.owner.endsWith('@example.com')",
                            "fieldPath": ".owner",
                        },
                    ],
                    "properties": {
                        "low": {"type": "integer"},
                        "high": {"type": "integer"},
                        "unit": {"type": "string"},
                        "owner": {"type": "string", "format": "email"},
                        "since": {"type": "string", "format": "date-time"},
                        "id": {"type": "string", "format": "uuid"},
                        "count": {"type": "string", "format": "int32"},
                    },
                }
            },
        }
    }
    return crd


def _gauge(name: str, group: str, **spec: Any) -> str:
    body = {"apiVersion": f"{group}/v1", "kind": "Gauge", "metadata": {"name": name}}
    return json.dumps({**body, "spec": {"low": 1, "high": 2, "unit": "m", **spec}})


def test_formats_and_validation_rules(apiserver: Environment, namespace: str) -> None:
    group = f"g{uuid.uuid4().hex[:8]}.example.com"
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(_rules_crd(group)))
    wait_established(apiserver, f"gauges.{group}")
    ns = f"--namespace={namespace}"
    try:

        def create(name: str, **spec: Any) -> str:
            return kubectl(
                apiserver, ns, "create", "-f", "-", stdin=_gauge(name, group, **spec), check=False
            )

        out = create("when", since="tomorrow", id="not-a-uuid", owner="nobody")
        assert (
            'spec.since: Invalid value: "tomorrow": spec.since in body must be of type '
            'date-time: "tomorrow"'
        ) in out, out
        assert 'spec.id in body must be of type uuid: "not-a-uuid"' in out, out
        assert 'spec.owner in body must be of type email: "nobody"' in out, out

        out = create("ok", since="2024-05-01T10:00:00Z", count="not checked", owner="a@example.com")
        assert "created" in out, out

        out = create("inverted", low=5, high=3)
        assert 'spec: Invalid value: "object": low must not exceed high' in out, out
        out = create("huge", high=200)
        assert 'spec: Invalid value: "object": high is 200, over 100' in out, out
        out = create("stranger", owner="a@elsewhere.org")
        # The error goes to the fieldPath; the value named is the rule's node's type.
        assert (
            'spec.owner: Invalid value: "object": failed rule: '
            "!has(self.owner) || self.owner.endsWith('@example.com')"
        ) in out, out

        # The transition rule: only on updates, against the object before.
        out = kubectl(
            apiserver,
            ns,
            "patch",
            f"gauges.{group}",
            "ok",
            "--type=merge",
            "-p",
            '{"spec": {"unit": "km"}}',
            check=False,
        )
        assert 'spec: Invalid value: "object": unit is immutable' in out, out
        kubectl(
            apiserver, ns, "patch", f"gauges.{group}", "ok", "--type=merge", "-p",
            '{"spec": {"high": 50}}',
        )  # fmt: skip

        broken = _rules_crd(f"h{uuid.uuid4().hex[:8]}.example.com")
        spec_schema = broken["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        spec_schema["properties"]["spec"]["x-kubernetes-validations"] = [{"rule": "self.("}]
        out = kubectl(apiserver, "create", "-f", "-", stdin=json.dumps(broken), check=False)
        assert (
            "spec.versions[0].schema.openAPIV3Schema.properties[spec]"
            ".x-kubernetes-validations[0].rule: Invalid value"
        ) in out, out
        assert "compilation failed" in out, out
    finally:
        kubectl(apiserver, "delete", "crd", f"gauges.{group}", "--wait=false", check=False)


def test_a_custom_service_gets_its_crds_rules_not_the_core_services(
    apiserver: Environment, namespace: str
) -> None:
    """Knative's serving.knative.dev has a kind Service: its objects have no spec.ports and
    must get neither the core Service's validation nor its defaults (rules are the
    resource's, never the kind name's)."""
    group = "serving.knative.dev"
    crd = schemaless_crd(group, "services", "Service")
    kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(crd))
    try:
        wait_established(apiserver, f"services.{group}")
        spec = {"template": {"spec": {"containers": [{"image": "ghcr.io/knative/hello"}]}}}
        service = {
            "apiVersion": f"{group}/v1",
            "kind": "Service",
            "metadata": {"name": "hello"},
            "spec": spec,
        }
        kubectl(
            apiserver, f"--namespace={namespace}", "create", "-f", "-", stdin=json.dumps(service)
        )
        got = json.loads(
            kubectl(
                apiserver,
                f"--namespace={namespace}",
                "get",
                f"services.{group}",
                "hello",
                "-o",
                "json",
            )
        )
        assert got["spec"] == spec, "no core Service defaults (type, ports, sessionAffinity...)"
        # No core Service patch metadata either: a strategic merge patch is refused, as
        # for every custom resource; a merge patch goes through.
        ns, knative = f"--namespace={namespace}", f"services.{group}"
        change = json.dumps({"spec": {"traffic": [{"percent": 100}]}})
        refused = kubectl(
            apiserver, ns, "patch", knative, "hello", "--type=strategic", "-p", change, check=False
        )
        assert "strategic merge patch is not supported" in refused
        kubectl(apiserver, ns, "patch", knative, "hello", "--type=merge", "-p", change)
        core = json.loads(
            kubectl(apiserver, f"--namespace={namespace}", "get", "services", "-o", "json")
        )
        assert all(s["metadata"]["name"] != "hello" for s in core["items"])
    finally:
        kubectl(apiserver, "delete", "crd", f"services.{group}", "--timeout=30s", check=False)


@pytest.fixture
def core_kinds(apiserver: Environment) -> Iterator[str]:
    """A group of example.com with custom resources whose kinds are Pod and Role."""
    group = f"core{uuid.uuid4().hex[:8]}.example.com"
    for plural, kind in (("pods", "Pod"), ("roles", "Role")):
        crd = schemaless_crd(group, plural, kind)
        kubectl(apiserver, "apply", "-f", "-", stdin=json.dumps(crd))
    for plural in ("pods", "roles"):
        wait_established(apiserver, f"{plural}.{group}")
    yield group
    for plural in ("pods", "roles"):
        kubectl(apiserver, "delete", "crd", f"{plural}.{group}", "--wait=false", check=False)


def test_a_custom_pod_gets_none_of_the_pod_admission_plugins(
    apiserver: Environment, core_kinds: str, namespace: str
) -> None:
    """Admission plugins decide by group and resource, as Kubernetes' do: a custom Pod
    (pods.<group>) naming a PriorityClass that does not exist is created as it was sent,
    without containers: Priority does not resolve its class, ServiceAccount adds no
    account or token volume, DefaultTolerationSeconds no tolerations. A core pod with the
    same class is refused."""
    ns = f"--namespace={namespace}"
    spec = {"priorityClassName": "no-such-class"}
    custom = {"apiVersion": f"{core_kinds}/v1", "kind": "Pod", "metadata": {"name": "p"}}
    kubectl(apiserver, ns, "create", "-f", "-", stdin=json.dumps({**custom, "spec": spec}))
    got = json.loads(kubectl(apiserver, ns, "get", f"pods.{core_kinds}", "p", "-o", "json"))
    assert got["spec"] == spec
    containers = [{"name": "c", "image": "busybox"}]
    core = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    refused = kubectl(
        apiserver,
        ns,
        "create",
        "-f",
        "-",
        stdin=json.dumps({**core, "spec": {**spec, "containers": containers}}),
        check=False,
    )
    assert "no PriorityClass with name no-such-class was found" in refused


def test_a_custom_role_is_not_checked_for_rbac_escalation(
    apiserver: Environment, core_kinds: str, namespace: str
) -> None:
    """A user who may create Roles, of RBAC and of the custom group, and holds no other
    permission: a custom Role (roles.<group>) with wildcard rules is created, since it
    grants nothing; the same rules in an RBAC Role are refused as an escalation."""
    ns, user = f"--namespace={namespace}", f"author-{uuid.uuid4().hex[:6]}"
    groups = f"--resource=roles.{core_kinds},roles.rbac.authorization.k8s.io"
    kubectl(apiserver, ns, "create", "role", "role-author", "--verb=create", groups)
    kubectl(
        apiserver,
        ns,
        "create",
        "rolebinding",
        "role-author",
        "--role=role-author",
        f"--user={user}",
    )
    rules = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]
    role = {"metadata": {"name": "everything"}, "rules": rules}
    custom = {"apiVersion": f"{core_kinds}/v1", "kind": "Role", **role}
    kubectl(apiserver, ns, f"--as={user}", "create", "-f", "-", stdin=json.dumps(custom))
    core = {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role", **role}
    refused = kubectl(
        apiserver, ns, f"--as={user}", "create", "-f", "-", stdin=json.dumps(core), check=False
    )
    assert "is attempting to grant RBAC permissions not currently held" in refused


def _served_by(env: Environment, group: str) -> dict[str, bool]:
    """Where `env` shows the custom resources of `group`: routing, discovery, OpenAPI."""
    listed = kubectl(env, "get", "--raw", f"/apis/{group}/v1/widgets", check=False)
    groups = json.loads(kubectl(env, "get", "--raw", "/apis"))["groups"]
    index = json.loads(kubectl(env, "get", "--raw", "/openapi/v3"))["paths"]
    return {
        "routing": '"kind":"WidgetList"' in listed,
        "discovery": any(g["name"] == group for g in groups),
        "openapi": f"apis/{group}/v1" in index,
    }


def test_a_crd_is_served_by_its_own_apiserver_only(apiserver: Environment) -> None:
    """State belongs to an apiserver, not to the process: a CRD created on one in-process
    apiserver is served neither by another running beside it nor by a fresh one started
    after it stopped."""
    group = f"own{uuid.uuid4().hex[:8]}.example.com"
    everywhere = {"routing": True, "discovery": True, "openapi": True}
    nowhere = dict.fromkeys(everywhere, False)
    with Environment.start() as first:
        kubectl(first, "apply", "-f", "-", stdin=json.dumps(crd_manifest(group)))
        wait_established(first, f"widgets.{group}")
        assert _served_by(first, group) == everywhere
        assert _served_by(apiserver, group) == nowhere, "the apiserver running beside it"
    with Environment.start() as second:
        assert _served_by(second, group) == nowhere, "a fresh apiserver after it stopped"
        crd = kubectl(second, "get", "crd", f"widgets.{group}", check=False)
        assert "NotFound" in crd
