"""The real kubectl against kubelab's apiserver: what the seeds show a user typing."""

from __future__ import annotations

import json
import subprocess
import time

import yaml

from tests.integration.controlplane_fixture import KUBECTL, Lab, lab, namespace

__all__ = ["lab", "namespace"]  # pytest fixtures used below

DEPLOYMENT = """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.25
        ports:
        - containerPort: 80
"""

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: box
  labels: {app: box, tier: backend}
spec:
  containers:
  - name: main
    image: busybox:1.36
    command: ["sleep", "3600"]
"""


def test_kubectl_talks_to_the_apiserver_and_its_health_checks(lab: Lab) -> None:
    assert KUBECTL is not None
    version = json.loads(lab.kubectl("version", "-o", "json").stdout)
    assert version["serverVersion"]["gitVersion"].startswith("v1.")
    assert lab.kubectl("get", "--raw", "/healthz").stdout == "ok"
    readyz = lab.kubectl("get", "--raw", "/readyz?verbose").stdout
    assert "[+]etcd ok" in readyz and "readyz check passed" in readyz


def test_get_namespaces_lists_the_system_ones_as_a_table(lab: Lab) -> None:
    out = lab.kubectl("get", "namespaces").stdout
    assert out.splitlines()[0].split() == ["NAME", "STATUS", "AGE"]
    names = {line.split()[0] for line in out.splitlines()[1:]}
    assert {"default", "kube-system", "kube-public", "kube-node-lease"} <= names


def test_create_get_in_every_output_format_and_delete(lab: Lab, namespace: str) -> None:
    out = lab.kubectl("create", "-n", namespace, "-f", "-", input=POD).stdout
    assert out.strip() == "pod/box created"
    table = lab.kubectl("get", "pods", "-n", namespace).stdout.splitlines()
    assert table[0].split() == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    assert table[1].split()[:3] == ["box", "0/1", "Pending"]
    wide = lab.kubectl("get", "pod", "box", "-n", namespace, "-o", "wide").stdout
    assert wide.splitlines()[0].split()[:6] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP"]
    as_yaml = yaml.safe_load(lab.kubectl("get", "po", "box", "-n", namespace, "-o", "yaml").stdout)
    assert as_yaml["metadata"]["uid"] and as_yaml["status"]["phase"] == "Pending"
    as_json = lab.kubectl_json("get", "pod/box", "-n", namespace)
    assert as_json["spec"]["containers"][0]["image"] == "busybox:1.36"
    deleted = lab.kubectl("delete", "pod", "box", "-n", namespace).stdout.strip()
    assert deleted.startswith('pod "box" deleted')
    gone = lab.kubectl("get", "pod", "box", "-n", namespace, check=False)
    assert gone.returncode == 1
    assert 'pods "box" not found' in gone.stderr


def test_apply_twice_with_a_change_updates_in_place(lab: Lab, namespace: str) -> None:
    first = lab.kubectl("apply", "-n", namespace, "-f", "-", input=DEPLOYMENT).stdout
    assert first.strip() == "deployment.apps/web created"
    before = lab.kubectl_json("get", "deploy", "web", "-n", namespace)
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 3").replace("nginx:1.25", "nginx:1.26")
    second = lab.kubectl("apply", "-n", namespace, "-f", "-", input=changed).stdout
    assert second.strip() == "deployment.apps/web configured"
    after = lab.kubectl_json("get", "deploy", "web", "-n", namespace)
    assert after["metadata"]["uid"] == before["metadata"]["uid"]
    assert after["spec"]["replicas"] == 3
    assert after["spec"]["template"]["spec"]["containers"][0]["image"] == "nginx:1.26"
    assert after["metadata"]["generation"] == before["metadata"]["generation"] + 1
    assert "kubectl.kubernetes.io/last-applied-configuration" in after["metadata"]["annotations"]
    third = lab.kubectl("apply", "-n", namespace, "-f", "-", input=changed).stdout
    assert third.strip() == "deployment.apps/web unchanged"


def test_label_annotate_and_patch(lab: Lab, namespace: str) -> None:
    lab.kubectl("create", "-n", namespace, "-f", "-", input=POD)
    lab.kubectl("label", "pod", "box", "-n", namespace, "env=prod")
    lab.kubectl("annotate", "pod", "box", "-n", namespace, "owner=team-a")
    shown = lab.kubectl("get", "pods", "-n", namespace, "-l", "env=prod,tier in (backend)")
    assert "box" in shown.stdout
    lab.kubectl(
        "patch",
        "pod",
        "box",
        "-n",
        namespace,
        "-p",
        '{"spec":{"containers":[{"name":"main","image":"busybox:1.37"}]}}',
    )
    lab.kubectl(
        "patch",
        "pod",
        "box",
        "-n",
        namespace,
        "--type=json",
        "-p",
        '[{"op":"remove","path":"/metadata/labels/tier"}]',
    )
    pod = lab.kubectl_json("get", "pod", "box", "-n", namespace)
    assert pod["metadata"]["labels"] == {"app": "box", "env": "prod"}
    assert pod["metadata"]["annotations"]["owner"] == "team-a"
    assert pod["spec"]["containers"][0]["image"] == "busybox:1.37"
    lab.kubectl("label", "pod", "box", "-n", namespace, "env-")
    assert "env" not in lab.kubectl_json("get", "pod", "box", "-n", namespace)["metadata"]["labels"]


def test_an_invalid_object_is_refused_with_every_bad_field(lab: Lab, namespace: str) -> None:
    bad = POD.replace("name: box", "name: Box_1").replace("image: busybox:1.36", "image: ''")
    done = lab.kubectl("create", "-n", namespace, "-f", "-", input=bad, check=False)
    assert done.returncode == 1
    assert "is invalid" in done.stderr
    assert "metadata.name" in done.stderr and "spec.containers[0].image" in done.stderr


def test_get_watch_prints_changes_as_they_happen(lab: Lab, namespace: str) -> None:
    assert KUBECTL is not None
    watch = subprocess.Popen(
        [
            KUBECTL,
            "--kubeconfig",
            str(lab.plane.kubeconfig),
            "get",
            "pods",
            "-n",
            namespace,
            "-w",
            "--output-watch-events",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)
        lab.kubectl("create", "-n", namespace, "-f", "-", input=POD)
        lab.kubectl("label", "pod", "box", "-n", namespace, "seen=yes")
        lab.kubectl("delete", "pod", "box", "-n", namespace)
        time.sleep(1.5)
    finally:
        watch.terminate()
        out, err = watch.communicate(timeout=10)
    events = [line.split()[0] for line in out.splitlines()[1:] if line.strip()]
    assert events[:2] == ["ADDED", "MODIFIED"], out + err
    assert "DELETED" in events, out + err


def test_describe_shows_the_object(lab: Lab, namespace: str) -> None:
    lab.kubectl("create", "-n", namespace, "-f", "-", input=POD)
    out = lab.kubectl("describe", "pod", "box", "-n", namespace).stdout
    assert "Name:" in out and "box" in out and "busybox:1.36" in out


def test_api_resources_lists_the_served_resources(lab: Lab) -> None:
    out = lab.kubectl("api-resources").stdout
    rows = [line.split() for line in out.splitlines()[1:]]
    assert ["pods", "po", "v1", "true", "Pod"] in rows
    assert ["deployments", "deploy", "apps/v1", "true", "Deployment"] in rows
    assert ["nodes", "no", "v1", "false", "Node"] in rows
    assert ["pods", "metrics.k8s.io/v1beta1", "true", "PodMetrics"] in rows
    names = {row[0] for row in rows}
    assert {"clusterroles", "leases", "endpointslices", "cronjobs"} <= names


def test_explain_reads_the_openapi_schema(lab: Lab) -> None:
    out = lab.kubectl("explain", "pods.spec.containers").stdout
    assert "image" in out and "FIELDS:" in out


def test_auth_can_i_and_create_token(lab: Lab, namespace: str) -> None:
    assert lab.kubectl("auth", "can-i", "create", "pods").stdout.strip() == "yes"
    lab.kubectl("create", "serviceaccount", "robot", "-n", namespace)
    token = lab.kubectl("create", "token", "robot", "-n", namespace).stdout.strip()
    assert token.count(".") == 2
    as_robot = [
        "--token",
        token,
        "--server",
        lab.server,
        "--certificate-authority",
        str(lab.plane.pki / "ca.crt"),
    ]
    assert KUBECTL is not None
    done = subprocess.run(
        [
            KUBECTL,
            "--kubeconfig",
            "/dev/null",
            *as_robot,
            "auth",
            "can-i",
            "list",
            "pods",
            "-n",
            namespace,
        ],
        capture_output=True,
        text=True,
    )
    assert done.stdout.strip() == "no"
    lab.kubectl(
        "create",
        "rolebinding",
        "robot-view",
        "-n",
        namespace,
        "--clusterrole=view",
        f"--serviceaccount={namespace}:robot",
    )
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", "/dev/null", *as_robot, "get", "pods", "-n", namespace],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def test_verbose_kubectl_shows_the_api_calls(lab: Lab, namespace: str) -> None:
    done = lab.kubectl("get", "pods", "-n", namespace, "-v=8")
    assert f'verb="GET" url="{lab.server}/api/v1/namespaces/{namespace}/pods' in done.stderr
    assert '"Response" status="200 OK"' in done.stderr


def test_events_are_one_object_in_both_event_apis(lab: Lab, namespace: str) -> None:
    core = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "box.1", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": "box", "namespace": namespace},
        "reason": "Pulled",
        "message": "image pulled",
        "type": "Normal",
        "count": 1,
        "source": {"component": "kubelet"},
    }
    r = lab.api("POST", f"/api/v1/namespaces/{namespace}/events", json=core)
    assert r.status_code == 201, r.text
    path = f"/apis/events.k8s.io/v1/namespaces/{namespace}/events"
    seen = lab.api("GET", f"{path}/box.1").json()
    assert seen["apiVersion"] == "events.k8s.io/v1"
    assert seen["note"] == "image pulled" and seen["regarding"]["name"] == "box"
    assert seen["deprecatedCount"] == 1 and "message" not in seen
    dry = lab.api(
        "PATCH",
        f"{path}/box.1?dryRun=All",
        data='{"note":"not stored"}',
        headers={"Content-Type": "application/merge-patch+json"},
    )
    assert dry.status_code == 200 and dry.json()["note"] == "not stored"
    assert lab.api("GET", f"{path}/box.1").json()["note"] == "image pulled"
    selected = lab.api("GET", f"{path}?fieldSelector=regarding.name%3Dbox").json()
    assert [e["metadata"]["name"] for e in selected["items"]] == ["box.1"]
    out = lab.kubectl("events", "-n", namespace).stdout
    assert "Pulled" in out and "image pulled" in out
    described = lab.kubectl("get", "events", "-n", namespace).stdout
    assert "Pulled" in described


def test_server_side_apply_creates_then_merges(lab: Lab, namespace: str) -> None:
    first = lab.kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=DEPLOYMENT)
    assert first.stdout.strip() == "deployment.apps/web serverside-applied"
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 4")
    lab.kubectl("apply", "--server-side", "-n", namespace, "-f", "-", input=changed)
    dep = lab.kubectl_json("get", "deploy", "web", "-n", namespace)
    assert dep["spec"]["replicas"] == 4
    assert [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]] == ["nginx"]


def test_server_side_apply_removes_what_the_applier_no_longer_applies(
    lab: Lab, namespace: str
) -> None:
    ns = ["-n", namespace]
    with_tier = DEPLOYMENT.replace(
        "labels: {app: web}\nspec:", "labels: {app: web, tier: a}\nspec:"
    )
    with_sidecar = with_tier.replace(
        "        - containerPort: 80\n",
        "        - containerPort: 80\n      - name: sidecar\n        image: busybox:1.36\n",
    )
    lab.kubectl("apply", "--server-side", *ns, "-f", "-", input=with_sidecar)
    lab.kubectl("label", "deploy", "web", "extra=1", *ns)  # not an applier's: stays
    lab.kubectl("apply", "--server-side", *ns, "-f", "-", input=DEPLOYMENT)
    dep = lab.kubectl_json("get", "deploy", "web", *ns, "--show-managed-fields")
    assert dep["metadata"]["labels"] == {"app": "web", "extra": "1"}
    assert [c["name"] for c in dep["spec"]["template"]["spec"]["containers"]] == ["nginx"]
    [entry] = [e for e in dep["metadata"]["managedFields"] if e["operation"] == "Apply"]
    assert entry["manager"] == "kubectl" and entry["fieldsType"] == "FieldsV1"
    assert "f:replicas" in entry["fieldsV1"]["f:spec"]
    assert "f:tier" not in entry["fieldsV1"]["f:metadata"]["f:labels"]
    # Fields another applier applies are kept when this one drops them.
    lab.kubectl("apply", "--server-side", "--field-manager=team-b", *ns, "-f", "-", input=with_tier)
    lab.kubectl("apply", "--server-side", *ns, "-f", "-", input=DEPLOYMENT)
    labels = lab.kubectl_json("get", "deploy", "web", *ns)["metadata"]["labels"]
    assert labels["tier"] == "a"


def test_server_side_apply_conflicts_with_another_managers_field(lab: Lab, namespace: str) -> None:
    ns = ["-n", namespace]
    lab.kubectl("apply", "--server-side", *ns, "-f", "-", input=DEPLOYMENT)
    lab.kubectl("scale", "deploy", "web", "--replicas=5", *ns)
    changed = DEPLOYMENT.replace("replicas: 2", "replicas: 3")
    refused = lab.kubectl("apply", "--server-side", *ns, "-f", "-", input=changed, check=False)
    assert refused.returncode != 0
    assert "Apply failed with 1 conflict" in refused.stderr, refused.stderr
    # kubectl scale names no field manager: it is its User-Agent's, "kubectl" (Update).
    assert 'conflict with "kubectl" using apps/v1: .spec.replicas' in refused.stderr
    assert lab.kubectl_json("get", "deploy", "web", *ns)["spec"]["replicas"] == 5
    # Applying the value the other manager set is no conflict: both own it.
    lab.kubectl("apply", "--server-side", *ns, "-f", "-", input=DEPLOYMENT.replace("2", "5", 1))
    lab.kubectl("apply", "--server-side", "--force-conflicts", *ns, "-f", "-", input=changed)
    dep = lab.kubectl_json("get", "deploy", "web", *ns, "--show-managed-fields")
    assert dep["spec"]["replicas"] == 3
    owners = {(e["manager"], e["operation"]) for e in dep["metadata"]["managedFields"]}
    assert ("kubectl", "Apply") in owners
    updates = [e for e in dep["metadata"]["managedFields"] if e["operation"] == "Update"]
    assert all("f:replicas" not in e["fieldsV1"].get("f:spec", {}) for e in updates)


def test_a_resource_quota_refuses_what_would_exceed_it(lab: Lab, namespace: str) -> None:
    ns = ["-n", namespace]
    lab.kubectl("create", "quota", "q", "--hard=pods=2,count/deployments.apps=1", *ns)
    lab.wait_for(f"/api/v1/namespaces/{namespace}/resourcequotas/q")
    lab.kubectl("create", "deployment", "d1", "--image=busybox:1.36", *ns)
    refused = lab.kubectl("create", "deployment", "d2", "--image=busybox:1.36", *ns, check=False)
    assert refused.returncode != 0
    assert "exceeded quota: q" in refused.stderr, refused.stderr
    assert "count/deployments.apps=1" in refused.stderr
    # d1's pod, made by the controllers, takes one of the two pods the quota allows.
    lab.until(
        lambda: len(lab.api("GET", f"/api/v1/namespaces/{namespace}/pods").json()["items"]) == 1,
        "the deployment's pod",
    )
    lab.kubectl("run", "p1", "--image=busybox:1.36", *ns)
    refused = lab.kubectl("run", "p2", "--image=busybox:1.36", *ns, check=False)
    assert "exceeded quota: q" in refused.stderr and "pods=2" in refused.stderr, refused.stderr
