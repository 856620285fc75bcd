"""The lab end to end, through the real kubectl: `labctl up` made three control-plane
nodes (labadm init, then labadm join --control-plane: the control plane as static pods
on each, behind the load balancer) and two workers (labadm join: cluster-info's
signature checked, CA pinned, TLS bootstrap), and the seeds' first pod runs on a
worker. The HA checks follow in test_lab_ha.py (store members, a control-plane node
reset and joined again) and, last of the session, test_store_leader_killed.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from lab.cluster import NODES, Lab
from tests.waiting import until

KUBECTL = str(Path(sys.executable).parent / "kubectl")
HELLO = """
apiVersion: v1
kind: Pod
metadata:
  name: hello-world
spec:
  containers:
  - name: hello
    image: busybox
    command: ["echo", "Hello Kubernetes!"]
"""


def kubectl(lab: Lab, *args: str, stdin: str | None = None, check: bool = True) -> str:
    """The real kubectl on the lab's admin kubeconfig; `check` asserts it succeeded."""
    done = subprocess.run(
        [KUBECTL, "--kubeconfig", str(lab.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert not check or done.returncode == 0, f"kubectl {' '.join(args)}: {done.stderr}"
    return done.stdout


def test_nodes_are_ready_with_roles(lab: Lab) -> None:
    nodes = json.loads(kubectl(lab, "get", "nodes", "-o", "json"))["items"]
    ready = {
        n["metadata"]["name"]: any(
            c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"]
        )
        for n in nodes
    }
    assert ready == {"cp1": True, "cp2": True, "cp3": True, "worker1": True, "worker2": True}
    for cp in (n for n in nodes if n["metadata"]["name"].startswith("cp")):
        assert "node-role.kubernetes.io/control-plane" in cp["metadata"]["labels"]
        taint = {"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}
        assert taint in cp["spec"]["taints"]
    worker = next(n for n in nodes if n["metadata"]["name"] == "worker1")
    assert "node-role.kubernetes.io/control-plane" not in worker["metadata"]["labels"]


def test_control_plane_runs_as_static_pods_on_each_control_plane_node(lab: Lab) -> None:
    components = ("kubelab-store", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

    def listed() -> bool:
        out = kubectl(lab, "get", "pods", "-n", "kube-system", check=False)
        return all(
            f"{name}-{node.name}" in out for name in components for node in lab.control_plane_nodes
        )

    until(listed, "the control plane's mirror pods in kube-system", timeout=60)


def test_labadm_and_kubectl_are_on_every_nodes_path(lab: Lab) -> None:
    """As kubeadm and kubectl are on a kubeadm node: in an SSH session (whose PATH is
    not the image's), so that a printed join command runs as pasted; on a control-plane
    node kubectl reads kubeadm's /etc/kubernetes/admin.conf."""
    assert lab.nodes is not None
    both = ["sh", "-c", "labadm version && kubectl version --client"]
    for name, out in lab.ssh().run_many(lab.nodes.nodes, both).items():
        assert "labadm version: v1." in out and "Client Version: v1." in out, (name, out)
    admin = ["kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf", "get", "nodes", "-o", "name"]
    listed = lab.ssh().run(lab.control_plane_nodes[0], admin).split()
    assert {f"node/{n.name}" for n in lab.nodes.nodes} <= set(listed)


def test_hello_world_runs_on_the_worker(lab: Lab) -> None:
    kubectl(lab, "apply", "-f", "-", stdin=HELLO)
    until(
        lambda: "Hello Kubernetes!" in kubectl(lab, "logs", "hello-world", check=False),
        "hello-world's log",
        timeout=120,
    )
    pod = json.loads(kubectl(lab, "get", "pod", "hello-world", "-o", "json"))
    assert pod["spec"]["nodeName"] in ("worker1", "worker2")


def labadm(lab: Lab, *args: str) -> subprocess.CompletedProcess[str]:
    """labadm on the control-plane node (its own files under a scratch root, so that a
    failed join cannot touch the node's)."""
    assert lab.nodes is not None
    argv = ["/opt/kubelab/venv/bin/python", "-m", "lab.labadm", *args]
    done = lab.nodes.nodes[0].exec(*argv, check=False, timeout=120)
    return subprocess.CompletedProcess(
        argv, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def join_flags(lab: Lab) -> dict[str, str]:
    """The endpoint, token and hash of the join command init printed."""
    _, endpoint, *rest = lab.join_command
    return {"endpoint": endpoint, **dict(zip(rest[::2], rest[1::2], strict=True))}


def test_join_refuses_a_ca_whose_hash_does_not_match(lab: Lab) -> None:
    flags = join_flags(lab)
    wrong = "sha256:" + "0" * 64
    done = labadm(
        lab, "--root", "/tmp/scratch-hash", "join", flags["endpoint"],
        "--token", flags["--token"], "--discovery-token-ca-cert-hash", wrong,
        "--node-name", "intruder", "--node-ip", "10.0.0.1",
    )  # fmt: skip
    assert done.returncode == 1
    assert f"not the --discovery-token-ca-cert-hash given ({wrong})" in done.stderr
    assert flags["--discovery-token-ca-cert-hash"] in done.stderr  # the real one, to compare


def test_join_with_an_unknown_token_says_to_create_one(lab: Lab) -> None:
    flags = join_flags(lab)
    done = labadm(
        lab, "--root", "/tmp/scratch-token", "join", flags["endpoint"],
        "--token", "abcdef.0123456789abcdef",
        "--discovery-token-ca-cert-hash", flags["--discovery-token-ca-cert-hash"],
        "--node-name", "intruder", "--node-ip", "10.0.0.1",
    )  # fmt: skip
    assert done.returncode == 1
    assert "labadm token create --print-join-command" in done.stderr, done.stderr


def test_init_again_and_token_commands(lab: Lab) -> None:
    again = labadm(lab, "init")
    assert again.returncode == 1 and "run `labadm reset` first" in again.stderr
    created = labadm(lab, "token", "create", "--print-join-command")
    assert created.returncode == 0, created.stderr
    token = created.stdout.split("--token ")[1].split()[0]
    assert token.split(".")[0] in labadm(lab, "token", "list").stdout
    assert labadm(lab, "token", "delete", token).returncode == 0
    assert token.split(".")[0] not in labadm(lab, "token", "list").stdout


def test_pod_network_routes_between_nodes(lab: Lab) -> None:
    """The network agent (labadm's network add-on) routes each node to the others'
    podCIDRs, which node IPAM gave them."""
    assert lab.nodes is not None
    nodes = {n["metadata"]["name"]: n for n in lab.client().list(NODES)["items"]}
    cp, worker = lab.control_plane_nodes[0], lab.worker_nodes[0]
    for here, there in ((cp, worker), (worker, cp)):
        cidr = nodes[there.name]["spec"]["podCIDR"]
        until(
            lambda h=here, c=cidr: c in h.sh("ip route show proto 201"),  # type: ignore[misc]
            f"{here.name}'s route to {there.name}'s pods ({cidr})",
            timeout=60,
        )


ECHO = """
apiVersion: v1
kind: Pod
metadata:
  name: echo
  labels: {app: echo}
spec:
  containers:
  - name: httpd
    image: busybox
    command:
    - sh
    - -c
    - mkdir -p /www && echo hello-through-the-service > /www/index.html &&
      exec httpd -f -p 8080 -h /www
    ports: [{containerPort: 8080}]
---
apiVersion: v1
kind: Service
metadata:
  name: echo
spec:
  selector: {app: echo}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Pod
metadata:
  name: client
spec:
  containers:
  - name: sh
    image: busybox
    command: ["sleep", "3600"]
"""


def test_a_service_answers_at_its_cluster_ip(lab: Lab) -> None:
    """kube-proxy (labadm's kube-proxy add-on) carries a pod's request to the Service's
    ClusterIP to the pod behind it."""
    kubectl(lab, "apply", "-f", "-", stdin=ECHO)
    ip = kubectl(lab, "get", "service", "echo", "-o", "jsonpath={.spec.clusterIP}")
    fetch = ("exec", "client", "--", "timeout", "5", "wget", "-qO-", f"http://{ip}/")
    until(
        lambda: "hello-through-the-service" in kubectl(lab, *fetch, check=False),
        f"the echo pod through {ip}",
        timeout=120,
    )


def test_a_reset_worker_joins_again(lab: Lab) -> None:
    """Last in this file: `labadm reset` undoes the worker, and the same join command
    brings it back (a new certificate for the same Node)."""
    worker = lab.worker_nodes[0]
    python = "/opt/kubelab/venv/bin/python"
    worker.exec(python, "-m", "lab.labadm", "reset", "-f", timeout=120)
    assert worker.sh("ls /etc/kubelab").strip() == ""
    assert worker.sh("ip route show proto 201").strip() == ""
    join = [*lab.join_command, f"--node-name={worker.name}", f"--node-ip={worker.ip}"]
    out = worker.exec(python, "-m", "lab.labadm", *join, timeout=120).stdout.decode()
    assert "This node has joined the cluster" in out
    kubectl(lab, "apply", "-f", "-", stdin=HELLO.replace("hello-world", "hello-again"))
    until(
        lambda: "Hello Kubernetes!" in kubectl(lab, "logs", "hello-again", check=False),
        "a pod on the worker after it joined again",
        timeout=120,
    )
