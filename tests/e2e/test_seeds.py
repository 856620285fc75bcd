"""The seeds' flows on the Docker lab with the real kubectl, its context as `labctl up`
merged it into the (temporary) user kubeconfig: `kubectl create deployment nginx
--image=nginx:1.21 --replicas=3` pulls through the lab's registry mirror and spreads
over the workers, a deleted pod is replaced; apply with a change and a rollout; get,
logs, exec, top, `get -w`, delete; a Service reaches nginx by DNS name (the cluster DNS
add-on) from a pod on another node; `kubectl expose --type=LoadBalancer` reaches it from
this machine, and so does an Ingress through the ingress add-on."""

from __future__ import annotations

import ipaddress
import json
import os
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from controlplane.controllers.servicelb import AddressRange
from lab.cluster import Lab
from lab.kubeconfigs import context_name
from tests.e2e.test_lab import KUBECTL
from tests.waiting import until

NGINX_LABEL = "app=nginx"


def kubectl(*args: str, stdin: str | None = None, check: bool = True) -> str:
    """The real kubectl as a user runs it: no --kubeconfig, the merged context."""
    done = subprocess.run(
        [KUBECTL, *args], input=stdin, capture_output=True, text=True, timeout=60, check=False
    )
    assert not check or done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def pods(selector: str) -> list[dict[str, object]]:
    items: list[dict[str, object]] = json.loads(
        kubectl("get", "pods", "-l", selector, "-o", "json")
    )["items"]
    return items


def running(selector: str) -> dict[str, str]:
    """Running pods' names and their nodes."""
    found = {}
    for pod in pods(selector):
        status, spec, meta = pod["status"], pod["spec"], pod["metadata"]
        assert isinstance(status, dict) and isinstance(spec, dict) and isinstance(meta, dict)
        if status.get("phase") == "Running" and not meta.get("deletionTimestamp"):
            found[meta["name"]] = spec.get("nodeName", "")
    return found


@pytest.fixture(scope="module")
def nginx(lab: Lab) -> dict[str, str]:
    """The seeds' Deployment, three replicas Running; their names and nodes."""
    kubectl("create", "deployment", "nginx", "--image=nginx:1.21", "--replicas=3")
    until(lambda: len(running(NGINX_LABEL)) == 3, "3 nginx pods Running", timeout=180)
    return running(NGINX_LABEL)


def test_kubectl_uses_the_merged_context(lab: Lab, user_home: Path) -> None:
    assert Path(os.environ["KUBECONFIG"]).is_relative_to(user_home)
    assert kubectl("config", "current-context").strip() == context_name(lab.config.name)
    assert "cp1" in kubectl("get", "nodes")


def test_nginx_spreads_over_the_workers_through_the_mirror(lab: Lab, nginx: dict[str, str]) -> None:
    assert set(nginx.values()) == {"worker1", "worker2"}
    assert lab.nodes is not None and lab.registry is not None
    worker = next(n for n in lab.nodes.nodes if n.name == "worker1")
    info = worker.exec("docker", "info", "-f", "{{json .RegistryConfig.Mirrors}}")
    assert json.loads(info.stdout) == [f"{lab.registry.url}/"]
    # The image came from the registry: its repo digest is what the mirror served.
    digests = worker.sh("docker image inspect -f '{{json .RepoDigests}}' nginx:1.21")
    assert "nginx@sha256:" in digests


def test_a_deleted_pod_is_replaced(nginx: dict[str, str]) -> None:
    victim = sorted(nginx)[0]
    kubectl("delete", "pod", victim, "--wait=false")
    until(
        lambda: len(running(NGINX_LABEL)) == 3 and victim not in running(NGINX_LABEL),
        "a new third nginx pod",
        timeout=120,
    )


def test_get_logs_exec_top(nginx: dict[str, str]) -> None:
    name = sorted(running(NGINX_LABEL))[0]
    out = kubectl("exec", name, "--", "sh", "-c", "echo exec-ok; ls /etc/nginx")
    assert "exec-ok" in out and "nginx.conf" in out
    assert "deployment.apps/nginx" in kubectl("get", "deployments,pods", "-o", "name")
    kubectl("logs", name)  # nginx logs to the container's stdout; it may be empty yet
    until(
        lambda: name in kubectl("top", "pod", check=False),
        "kubectl top pod listing nginx",
        timeout=120,
    )
    until(lambda: "worker1" in kubectl("top", "node", check=False), "kubectl top node")


def test_apply_with_a_change_rolls_out(lab: Lab) -> None:
    manifest = """
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: busybox
        command: ["sh", "-c", "echo version=VERSION; exec sleep 3600"]
"""
    kubectl("apply", "-f", "-", stdin=manifest.replace("VERSION", "1"))
    kubectl("rollout", "status", "deployment/web", "--timeout=150s")
    kubectl("apply", "-f", "-", stdin=manifest.replace("VERSION", "2"))
    kubectl("rollout", "status", "deployment/web", "--timeout=150s")
    until(
        lambda: (
            all("version=2" in kubectl("logs", name, check=False) for name in running("app=web"))
            and len(running("app=web")) == 2
        ),
        "two web pods of the new version",
        timeout=120,
    )
    assert "2" in kubectl("rollout", "history", "deployment/web")
    kubectl("delete", "deployment", "web")
    until(lambda: not pods("app=web"), "web's pods gone", timeout=120)


def test_get_watch_sees_a_new_pod(lab: Lab) -> None:
    watch = subprocess.Popen(
        [KUBECTL, "get", "pods", "-w", "--output-watch-events"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1)  # the watch's list arrives first; the ADDED below is the test's
        kubectl("run", "watched", "--image=busybox", "--restart=Never", "--", "true")
        assert watch.stdout is not None
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = watch.stdout.readline()
            if "watched" in line:
                assert "ADDED" in line
                break
        else:
            pytest.fail("kubectl get -w printed no line for the new pod")
    finally:
        watch.terminate()
        watch.wait(10)
        kubectl("delete", "pod", "watched", "--wait=false", check=False)


PAGE = """
apiVersion: v1
kind: ConfigMap
metadata: {name: page}
data:
  index.html: "<h1>served from a ConfigMap</h1>"
---
apiVersion: v1
kind: Pod
metadata: {name: page}
spec:
  containers:
  - name: nginx
    image: nginx:1.21
    volumeMounts:
    - {name: page, mountPath: /usr/share/nginx/html}
  volumes:
  - name: page
    configMap: {name: page}
"""

GET_PERL = (
    r'my $s = IO::Socket::INET->new("127.0.0.1:80") or die "$!\n";'
    r' print $s "GET / HTTP/1.0\r\n\r\n"; print while <$s>;'
)


def test_nginx_serves_a_configmap_mounted_at_its_document_root(lab: Lab) -> None:
    """The nginx image keeps the official image's layout: what is mounted at
    /usr/share/nginx/html is what it serves (fetched inside the pod with the image's
    perl: it has no wget or curl, and the apiserver does not proxy to pods)."""
    kubectl("apply", "-f", "-", stdin=PAGE)
    fetch = ("exec", "page", "--", "perl", "-MIO::Socket::INET", "-e", GET_PERL)
    try:
        until(
            lambda: "served from a ConfigMap" in kubectl(*fetch, check=False),
            "nginx serving the ConfigMap's index.html",
            timeout=120,
        )
    finally:
        kubectl("delete", "pod,configmap", "page", "--wait=false", check=False)


CLIENT = """
apiVersion: v1
kind: Pod
metadata: {name: dns-client}
spec:
  nodeName: NODE
  containers:
  - name: sh
    image: busybox
    command: ["sleep", "3600"]
"""


def test_a_service_reaches_nginx_by_dns_name_from_another_node(nginx: dict[str, str]) -> None:
    kubectl("expose", "deployment", "nginx", "--port=80")
    nodes = set(running(NGINX_LABEL).values())
    # A client on a node without nginx if there is one, else on another worker.
    others = sorted({"worker1", "worker2"} - nodes) or ["worker2"]
    kubectl("apply", "-f", "-", stdin=CLIENT.replace("NODE", others[0]))
    until(_client_running, "the client pod Running", timeout=120)
    fetch = ("exec", "dns-client", "--", "timeout", "5", "wget", "-qO-", "http://nginx/")
    until(
        lambda: "Welcome to nginx" in kubectl(*fetch, check=False),
        "nginx through its Service by DNS name",
        timeout=120,
    )
    full = kubectl("exec", "dns-client", "--", "nslookup", "nginx.default.svc.cluster.local")
    cluster_ip = kubectl("get", "service", "nginx", "-o", "jsonpath={.spec.clusterIP}")
    assert cluster_ip in full


def _client_running() -> bool:
    phase = kubectl("get", "pod", "dns-client", "-o", "jsonpath={.status.phase}", check=False)
    return phase == "Running"


def test_a_loadbalancer_service_is_reached_from_this_machine(
    lab: Lab, nginx: dict[str, str]
) -> None:
    """`kubectl expose --type=LoadBalancer` gets an EXTERNAL-IP of the lab's pool, which
    answers from this machine (the lab network's host side) on the Service's port; the
    address goes with the Service."""
    assert lab.nodes is not None and lab.nodes.addressing is not None
    pool = AddressRange.parse(lab.config.pool(lab.nodes.addressing))
    kubectl("expose", "deployment", "nginx", "--type=LoadBalancer", "--port=80", "--name=web-lb")
    jsonpath = "jsonpath={.status.loadBalancer.ingress[0].ip}"
    until(lambda: kubectl("get", "service", "web-lb", "-o", jsonpath), "an EXTERNAL-IP")
    address = kubectl("get", "service", "web-lb", "-o", jsonpath)
    assert ipaddress.IPv4Address(address) in pool
    assert address in kubectl("get", "service", "web-lb")  # the EXTERNAL-IP column
    until(lambda: "Welcome to nginx" in _fetch(address), f"nginx at http://{address}/")
    kubectl("delete", "service", "web-lb")
    until(
        lambda: not any(address in n.sh("ip -4 -o addr show") for n in lab.nodes.nodes),
        f"{address} released by every node",
    )


INGRESS = """
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: web}
spec:
  rules:
  - host: web.example
    http:
      paths:
      - {path: /, pathType: Prefix, backend: {service: {name: web-ing, port: {number: 80}}}}
      - {path: /gone, pathType: Exact, backend: {service: {name: nothere, port: {number: 80}}}}
"""


def test_an_ingress_routes_a_host_from_this_machine(nginx: dict[str, str]) -> None:
    """The ingress add-on: an Ingress (of the default class `nginx`) shows the address of
    ingress-nginx's LoadBalancer Service, where nginx answers for its host with the
    Service's pods; a path to a missing Service answers 503 and has an Event."""
    kubectl("expose", "deployment", "nginx", "--port=80", "--name=web-ing")
    kubectl("get", "ingressclass", "nginx")
    kubectl("apply", "-f", "-", stdin=INGRESS)
    # DefaultIngressClass admission gave it the default class.
    assert kubectl("get", "ingress", "web", "-o", "jsonpath={.spec.ingressClassName}") == "nginx"
    jsonpath = "jsonpath={.status.loadBalancer.ingress[0].ip}"
    # The controller's pod may be moving still (test_lab_ha resets a control-plane node).
    until(
        lambda: kubectl("get", "ingress", "web", "-o", jsonpath),
        "the Ingress's ADDRESS",
        timeout=120,
    )
    address = kubectl("get", "ingress", "web", "-o", jsonpath)
    lb = ("service", "-n", "ingress-nginx", "ingress-nginx-controller", "-o", jsonpath)
    assert address == kubectl("get", *lb)
    until(
        lambda: "Welcome to nginx" in _fetch(address, host="web.example"),
        f"nginx at http://{address}/ for Host web.example",
    )
    assert _status(address, "/gone", "web.example") == 503
    assert _status(address, "/", "other.example") == 404
    until(
        lambda: (
            "ServiceNotFound"
            in kubectl("get", "events", "--field-selector=involvedObject.name=web")
        ),
        "the Ingress's ServiceNotFound Event",
    )
    kubectl("delete", "ingress", "web")
    kubectl("delete", "service", "web-ing")


def _status(address: str, path: str, host: str) -> int:
    request = urllib.request.Request(f"http://{address}{path}", headers={"Host": host})
    try:
        with urllib.request.urlopen(request, timeout=3) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def _fetch(address: str, host: str = "") -> str:
    request = urllib.request.Request(f"http://{address}/", headers={"Host": host} if host else {})
    try:
        with urllib.request.urlopen(request, timeout=3) as answer:
            return str(answer.read().decode(errors="replace"))
    except OSError:
        return ""
