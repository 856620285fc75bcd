"""The controller-manager's cluster controllers against a real apiserver, run in-process
with short timings (`incluster_controllers`), driven with the real kubectl; the tests
play the kubelets (node Leases, pod phases and readiness)."""

from __future__ import annotations

import base64
import datetime
import json
import subprocess
import threading
import time
import uuid
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from kubelab import pki
from lab.localplane import LocalControlPlane
from tests.integration.controlplane_fixture import KUBECTL, Lab
from tests.integration.incluster_controllers import Cluster, cluster, controllers

__all__ = ["cluster"]  # pytest fixtures used below


def _node(name: str, **spec: Any) -> str:
    return json.dumps(
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": spec}
    )


def _pod_cidr(lab: Cluster, node: str) -> str:
    r = lab.api("GET", f"/api/v1/nodes/{node}")
    return str(r.json().get("spec", {}).get("podCIDR") or "") if r.status_code == 200 else ""


def _events(lab: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items = lab.kubectl_json(
        "get", "events", "-n", namespace, "--field-selector", f"involvedObject.name={name}"
    )["items"]
    return list(items)


def test_node_ipam_gives_each_node_its_own_range_and_reuses_a_deleted_nodes(
    cluster: Cluster,
) -> None:
    lab = cluster
    prefix = f"ipam-{uuid.uuid4().hex[:6]}"
    names = [f"{prefix}-{i}" for i in range(5)]
    flags = (
        "--controllers=node-ipam-controller",
        "--allocate-node-cidrs",
        "--cluster-cidr=10.250.0.0/22",
        "--node-cidr-mask-size=24",
    )
    # A node that already has a range (given by an earlier controller-manager): the new
    # term must not hand it out again.
    lab.kubectl(
        "create",
        "-f",
        "-",
        input=_node(names[0], podCIDR="10.250.1.0/24", podCIDRs=["10.250.1.0/24"]),
    )
    with controllers(lab, *flags):
        for name in names[1:4]:
            lab.kubectl("create", "-f", "-", input=_node(name))
        for name in names[1:4]:
            lab.until(lambda n=name: _pod_cidr(lab, n), f"node {name} to get a podCIDR")
        cidrs = {n: _pod_cidr(lab, n) for n in names[:4]}
        assert sorted(cidrs.values()) == [f"10.250.{i}.0/24" for i in range(4)], cidrs
        node = lab.kubectl_json("get", "node", names[1])
        assert node["spec"]["podCIDRs"] == [node["spec"]["podCIDR"]]

        # The range is full: the fifth node waits, with a Warning that says why.
        lab.kubectl("create", "-f", "-", input=_node(names[4]))
        lab.until(
            lambda: any(
                e["reason"] == "CIDRNotAvailable" for e in _events(lab, "default", names[4])
            ),
            "a CIDRNotAvailable event",
        )
        event = next(
            e for e in _events(lab, "default", names[4]) if e["reason"] == "CIDRNotAvailable"
        )
        assert event["type"] == "Warning"
        assert f"Node {names[4]} status is now: CIDRNotAvailable" in event["message"]
        assert not _pod_cidr(lab, names[4])

        # A deleted node's range goes to the waiting one.
        freed = cidrs[names[2]]
        lab.kubectl("delete", "node", names[2])
        lab.until(
            lambda: _pod_cidr(lab, names[4]) == freed, f"{names[4]} to get {freed}", timeout=60
        )
    for name in names:
        lab.kubectl("delete", "node", name, "--ignore-not-found")


# -- Endpoints and EndpointSlices ----------------------------------------------------------

MERGE = {"Content-Type": "application/merge-patch+json"}


def _pod(name: str, port: int, *, labels: dict[str, str] | None = None) -> str:
    return json.dumps(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "labels": labels or {"app": "web"}},
            "spec": {
                "nodeName": "node-a",
                "terminationGracePeriodSeconds": 30,
                "containers": [
                    {
                        "name": "web",
                        "image": "nginx:1.27",
                        "ports": [{"name": "http", "containerPort": port}],
                    }
                ],
            },
        }
    )


def _kubelet_reports(lab: Cluster, namespace: str, pod: str, ip: str, *, ready: bool) -> None:
    """Play the kubelet: the pod runs at `ip`, ready or not."""
    status = {
        "status": {
            "phase": "Running",
            "podIP": ip,
            "podIPs": [{"ip": ip}],
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
        }
    }
    r = lab.api(
        "PATCH",
        f"/api/v1/namespaces/{namespace}/pods/{pod}/status",
        data=json.dumps(status),
        headers=MERGE,
    )
    assert r.status_code == 200, r.text


def _endpoints(lab: Cluster, namespace: str, name: str) -> dict[str, Any]:
    r = lab.api("GET", f"/api/v1/namespaces/{namespace}/endpoints/{name}")
    return dict(r.json()) if r.status_code == 200 else {}


def _subsets(
    lab: Cluster, namespace: str, name: str
) -> list[tuple[list[str], list[str], list[int]]]:
    return [
        (
            sorted(a["ip"] for a in s.get("addresses", [])),
            sorted(a["ip"] for a in s.get("notReadyAddresses", [])),
            [p["port"] for p in s.get("ports", [])],
        )
        for s in _endpoints(lab, namespace, name).get("subsets") or []
    ]


def _slices(lab: Cluster, namespace: str, service: str) -> list[dict[str, Any]]:
    found = lab.kubectl_json(
        "get", "endpointslices", "-n", namespace, "-l", f"kubernetes.io/service-name={service}"
    )
    return list(found["items"])


def _slice_endpoints(
    lab: Cluster, namespace: str, service: str
) -> dict[str, tuple[bool, bool, bool]]:
    """address -> (ready, serving, terminating) over the service's slices."""
    return {
        e["addresses"][0]: (
            e["conditions"].get("ready"),
            e["conditions"].get("serving"),
            e["conditions"].get("terminating"),
        )
        for s in _slices(lab, namespace, service)
        for e in s.get("endpoints") or []
    }


SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: web, labels: {tier: front}}
spec:
  selector: {app: web}
  ports: [{name: http, port: 80, targetPort: http}]
"""

ENDPOINT_FLAGS = "--controllers=endpoints-controller,endpointslice-controller"


def test_endpoints_and_slices_follow_pods_readiness_and_named_ports(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()
    with controllers(lab, ENDPOINT_FLAGS):
        lab.kubectl("apply", "-n", ns, "-f", "-", input=SERVICE)
        # Two versions serve "http" on different numbers; a pod of another app is not
        # selected.
        lab.kubectl("create", "-n", ns, "-f", "-", input=_pod("web-1", 8080))
        lab.kubectl("create", "-n", ns, "-f", "-", input=_pod("web-2", 9090))
        lab.kubectl("create", "-n", ns, "-f", "-", input=_pod("db", 5432, labels={"app": "db"}))
        _kubelet_reports(lab, ns, "web-1", "10.244.0.11", ready=True)
        _kubelet_reports(lab, ns, "web-2", "10.244.0.12", ready=False)
        _kubelet_reports(lab, ns, "db", "10.244.0.13", ready=True)
        expected = [(["10.244.0.11"], [], [8080]), ([], ["10.244.0.12"], [9090])]
        lab.until(lambda: _subsets(lab, ns, "web") == expected, "endpoints of web")
        eps = _endpoints(lab, ns, "web")
        assert eps["metadata"]["labels"] == {"tier": "front"}
        lab.until(
            lambda: (
                _slice_endpoints(lab, ns, "web")
                == {
                    "10.244.0.11": (True, True, False),
                    "10.244.0.12": (False, False, False),
                }
            ),
            "slices of web",
        )
        slices = _slices(lab, ns, "web")
        assert len(slices) == 2, "one slice per port number"
        for s in slices:
            labels = s["metadata"]["labels"]
            assert labels["endpointslice.kubernetes.io/managed-by"] == (
                "endpointslice-controller.k8s.io"
            )
            assert labels["tier"] == "front"
            assert s["metadata"]["ownerReferences"][0]["kind"] == "Service"
            assert s["addressType"] == "IPv4"
        assert sorted(p["port"] for s in slices for p in s["ports"]) == [8080, 9090]

        # web-2 becomes ready.
        _kubelet_reports(lab, ns, "web-2", "10.244.0.12", ready=True)
        lab.until(
            lambda: (
                _subsets(lab, ns, "web")
                == [(["10.244.0.11"], [], [8080]), (["10.244.0.12"], [], [9090])]
            ),
            "web-2 ready in the endpoints",
        )
        # web-1 is deleted: it is bound to a node, so it lingers until its kubelet
        # confirms; meanwhile the slices keep it, terminating and still serving, and the
        # Endpoints drop it.
        lab.kubectl("delete", "pod", "web-1", "-n", ns, "--wait=false")
        lab.until(
            lambda: _slice_endpoints(lab, ns, "web").get("10.244.0.11") == (False, True, True),
            "web-1 terminating in the slices",
        )
        lab.until(
            lambda: _subsets(lab, ns, "web") == [(["10.244.0.12"], [], [9090])],
            "web-1 gone from the endpoints",
        )
        # The kubelet confirms: it is gone from the slices too, and its slice with it.
        lab.kubectl("delete", "pod", "web-1", "-n", ns, "--grace-period=0", "--force")
        lab.until(
            lambda: list(_slice_endpoints(lab, ns, "web")) == ["10.244.0.12"],
            "web-1 gone from the slices",
        )
        lab.until(lambda: len(_slices(lab, ns, "web")) == 1, "web-1's slice deleted")


def test_publish_not_ready_headless_selectorless_and_slices_of_at_most_n(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()
    with controllers(lab, ENDPOINT_FLAGS, "--max-endpoints-per-slice=2"):
        lab.kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "peers"},
                    "spec": {
                        "clusterIP": "None",
                        "publishNotReadyAddresses": True,
                        "selector": {"app": "web"},
                    },
                }
            ),
        )
        # A Service without a selector: its Endpoints are the user's.
        lab.kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "external"},
                    "spec": {"ports": [{"port": 5432}]},
                }
            ),
        )
        for i in range(5):
            lab.kubectl("create", "-n", ns, "-f", "-", input=_pod(f"web-{i}", 8080))
            _kubelet_reports(lab, ns, f"web-{i}", f"10.244.1.{i + 1}", ready=False)
        ips = sorted(f"10.244.1.{i + 1}" for i in range(5))
        lab.until(lambda: _subsets(lab, ns, "peers") == [(ips, [], [])], "endpoints of peers")
        assert _endpoints(lab, ns, "peers")["metadata"]["labels"] == {
            "service.kubernetes.io/headless": ""
        }
        lab.until(lambda: len(_slice_endpoints(lab, ns, "peers")) == 5, "slices of peers")
        slices = _slices(lab, ns, "peers")
        assert sorted(len(s["endpoints"]) for s in slices) == [1, 2, 2]
        assert all(s["ports"] == [] for s in slices)
        assert all(c[0] for c in _slice_endpoints(lab, ns, "peers").values()), "all ready"

        # Deleting the Service deletes its Endpoints (the slices go with their owner,
        # through the garbage collector, which does not run here).
        lab.kubectl("delete", "service", "peers", "-n", ns)
        lab.until(lambda: not _endpoints(lab, ns, "peers"), "peers' endpoints to go")
        assert not _endpoints(lab, ns, "external")
        assert not _slices(lab, ns, "external")


def test_endpoints_of_a_service_without_selector_are_mirrored_to_slices(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()

    def endpoints(*ips: str, labels: dict[str, str] | None = None) -> str:
        return json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": "db", "labels": labels or {"tier": "data"}},
                "subsets": [
                    {
                        "addresses": [{"ip": ip} for ip in ips],
                        "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
                    }
                ],
            }
        )

    with controllers(lab, "--controllers=endpointslicemirroring"):
        lab.kubectl(
            "apply",
            "-n",
            ns,
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "db"},
                    "spec": {"ports": [{"name": "pg", "port": 5432}]},
                }
            ),
        )
        lab.kubectl("apply", "-n", ns, "-f", "-", input=endpoints("192.0.2.1", "192.0.2.2"))
        lab.until(
            lambda: set(_slice_endpoints(lab, ns, "db")) == {"192.0.2.1", "192.0.2.2"},
            "the mirrored slice",
        )
        (mirrored,) = _slices(lab, ns, "db")
        labels = mirrored["metadata"]["labels"]
        assert labels["endpointslice.kubernetes.io/managed-by"] == (
            "endpointslicemirroring-controller.k8s.io"
        )
        assert labels["tier"] == "data"
        assert mirrored["ports"] == [{"name": "pg", "port": 5432, "protocol": "TCP"}]
        assert mirrored["metadata"]["ownerReferences"][0]["kind"] == "Service"

        lab.kubectl("apply", "-n", ns, "-f", "-", input=endpoints("192.0.2.3"))
        lab.until(
            lambda: list(_slice_endpoints(lab, ns, "db")) == ["192.0.2.3"], "the slice updated"
        )
        skip = {"endpointslice.kubernetes.io/skip-mirror": "true"}
        lab.kubectl("apply", "-n", ns, "-f", "-", input=endpoints("192.0.2.3", labels=skip))
        lab.until(lambda: not _slices(lab, ns, "db"), "the slice removed when skipped")


# -- node lifecycle --------------------------------------------------------------------------


class Kubelet:
    """Plays a node's kubelet: registers the Node, renews its Lease every 0.3 s while
    `alive`, and posts Ready."""

    def __init__(self, lab: Cluster, node: str) -> None:
        self.lab = lab
        self.node = node
        self.alive = threading.Event()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, daemon=True)

    def _now(self) -> str:
        return datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")

    def start(self) -> None:
        self.lab.kubectl("create", "-f", "-", input=_node(self.node))
        lease = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.node, "namespace": "kube-node-lease"},
            "spec": {
                "holderIdentity": self.node,
                "leaseDurationSeconds": 40,
                "renewTime": self._now(),
            },
        }
        r = self.lab.api(
            "POST", "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases", json=lease
        )
        assert r.status_code == 201, r.text
        self.post_ready()
        self.alive.set()
        self._thread.start()

    def post_ready(self) -> None:
        now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        status = {
            "status": {
                "conditions": [
                    {
                        "type": "Ready",
                        "status": "True",
                        "reason": "KubeletReady",
                        "message": "kubelet is posting ready status",
                        "lastHeartbeatTime": now,
                        "lastTransitionTime": now,
                    }
                ]
            }
        }
        r = self.lab.api(
            "PATCH", f"/api/v1/nodes/{self.node}/status", data=json.dumps(status), headers=MERGE
        )
        assert r.status_code == 200, r.text

    def _renew(self) -> None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{self.node}"
        while not self._stop.wait(0.3):
            if self.alive.is_set():
                patch = {"spec": {"renewTime": self._now()}}
                self.lab.api("PATCH", path, data=json.dumps(patch), headers=MERGE)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)


def _taints(lab: Cluster, node: str) -> set[tuple[str, str]]:
    spec = lab.kubectl_json("get", "node", node)["spec"]
    return {(t["key"], t["effect"]) for t in spec.get("taints") or []}


def _conditions(obj: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in obj.get("status", {}).get("conditions") or []}


def _pod_json(lab: Cluster, ns: str, name: str) -> dict[str, Any]:
    r = lab.api("GET", f"/api/v1/namespaces/{ns}/pods/{name}")
    return dict(r.json()) if r.status_code == 200 else {}


def _pod_on(node: str, name: str, tolerations: list[dict[str, Any]] | None = None) -> str:
    spec: dict[str, Any] = {
        "nodeName": node,
        "containers": [{"name": "c", "image": "nginx:1.27"}],
    }
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return json.dumps({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec})


UNREACHABLE = {
    ("node.kubernetes.io/unreachable", "NoSchedule"),
    ("node.kubernetes.io/unreachable", "NoExecute"),
}


def test_a_quiet_node_is_marked_unknown_tainted_its_pods_evicted_and_it_comes_back(
    cluster: Cluster,
) -> None:
    lab = cluster
    ns = lab.new_namespace()
    node = f"quiet-{uuid.uuid4().hex[:6]}"
    kubelet = Kubelet(lab, node)
    kubelet.start()
    exists = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
    # One pod tolerates the unreachable taint for 2 s, one for the default 300 s (added
    # by the DefaultTolerationSeconds admission), one for ever.
    lab.kubectl(
        "create",
        "-n",
        ns,
        "-f",
        "-",
        input=_pod_on(node, "brief", [{**exists, "tolerationSeconds": 2}]),
    )
    lab.kubectl("create", "-n", ns, "-f", "-", input=_pod_on(node, "default"))
    lab.kubectl("create", "-n", ns, "-f", "-", input=_pod_on(node, "forever", [exists]))
    defaults = lab.kubectl_json("get", "pod", "default", "-n", ns)["spec"]["tolerations"]
    assert {
        "key": "node.kubernetes.io/unreachable",
        "operator": "Exists",
        "effect": "NoExecute",
        "tolerationSeconds": 300,
    } in defaults
    for pod in ("brief", "default", "forever"):
        _kubelet_reports(lab, ns, pod, "10.244.3.4", ready=True)
    try:
        with controllers(
            lab,
            "--controllers=node-lifecycle-controller,taint-eviction-controller",
            "--node-monitor-grace-period=2s",
        ):
            # Alive: no taints.
            time.sleep(1)
            assert not _taints(lab, node)

            kubelet.alive.clear()
            lab.until(lambda: _taints(lab, node) == UNREACHABLE, "the unreachable taints")
            conditions = _conditions(lab.kubectl_json("get", "node", node))
            assert conditions["Ready"]["status"] == "Unknown"
            assert conditions["Ready"]["reason"] == "NodeStatusUnknown"
            assert conditions["Ready"]["message"] == "Kubelet stopped posting node status."
            assert conditions["MemoryPressure"]["status"] == "Unknown"
            status = lab.kubectl("get", "node", node).stdout
            assert "NotReady" in status, status
            lab.until(
                lambda: _conditions(_pod_json(lab, ns, "default"))["Ready"]["status"] == "False",
                "the pods marked not ready",
            )

            # The pod that tolerates it for 2 s is evicted, marked as the taint manager
            # marks it; the others stay.
            lab.until(
                lambda: _pod_json(lab, ns, "brief")["metadata"].get("deletionTimestamp"),
                "the eviction of brief",
            )
            target = _conditions(_pod_json(lab, ns, "brief"))["DisruptionTarget"]
            assert (target["status"], target["reason"]) == ("True", "DeletionByTaintManager")
            events = _events(lab, ns, "brief")
            assert any(e["reason"] == "TaintManagerEviction" for e in events), events
            for pod in ("default", "forever"):
                assert not _pod_json(lab, ns, pod)["metadata"].get("deletionTimestamp"), pod

            # The kubelet comes back and posts Ready: the taints go.
            kubelet.alive.set()
            kubelet.post_ready()
            lab.until(lambda: not _taints(lab, node), "the taints to go")
            for pod in ("default", "forever"):
                assert not _pod_json(lab, ns, pod)["metadata"].get("deletionTimestamp"), pod
    finally:
        kubelet.stop()
        lab.kubectl("delete", "node", node, "--ignore-not-found")


# -- node bootstrap: CSR approving and signing, the token cleaner ------------------------------


def _csr_pem(cn: str, orgs: list[str]) -> tuple[bytes, bytes]:
    """A PKCS#10 request for `cn`/`orgs` and its private key, both PEM."""
    key = ec.generate_private_key(ec.SECP256R1())
    attrs = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in orgs]
    attrs.append(x509.NameAttribute(NameOID.COMMON_NAME, cn))
    request = (
        x509.CertificateSigningRequestBuilder()
        .subject_name(x509.Name(attrs))
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    return request.public_bytes(serialization.Encoding.PEM), key_pem


def _csr(name: str, request: bytes, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "certificates.k8s.io/v1",
            "kind": "CertificateSigningRequest",
            "metadata": {"name": name},
            "spec": {
                "request": base64.b64encode(request).decode(),
                "signerName": "kubernetes.io/kube-apiserver-client-kubelet",
                "usages": ["digital signature", "client auth"],
                **spec,
            },
        }
    )


def _bootstrap_token(lab: Cluster, token_id: str, expires_in: float) -> str:
    secret = "0123456789abcdef"
    expiration = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=expires_in)
    lab.kubectl(
        "create",
        "-f",
        "-",
        input=json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
                "type": "bootstrap.kubernetes.io/token",
                "stringData": {
                    "token-id": token_id,
                    "token-secret": secret,
                    "usage-bootstrap-authentication": "true",
                    "auth-extra-groups": "system:bootstrappers:kubeadm:default-node-token",
                    "expiration": expiration.strftime("%Y-%m-%dT%H:%M:%SZ"),
                },
            }
        ),
    )
    return f"{token_id}.{secret}"


def _as(lab: Cluster, who: list[str], *args: str, input: str | None = None) -> str:
    """kubectl as another user (`who`: --token, or --client-certificate and
    --client-key); its output."""
    assert KUBECTL is not None
    ca = str(lab.ca_dir / "ca.crt")
    base = [KUBECTL, "--kubeconfig", "/dev/null", "--server", lab.server]
    done = subprocess.run(
        [*base, "--certificate-authority", ca, *who, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _cert_flags(cert: Path, key: Path) -> list[str]:
    return ["--client-certificate", str(cert), "--client-key", str(key)]


def _csr_status(lab: Cluster, name: str) -> dict[str, Any]:
    return dict(lab.kubectl_json("get", "csr", name).get("status") or {})


def test_kubelet_bootstrap_csrs_are_approved_signed_and_work(
    cluster: Cluster, tmp_path: Path
) -> None:
    lab = cluster
    suffix = uuid.uuid4().hex[:6]
    node = f"system:node:boot-{suffix}"
    # What kubeadm binds: bootstrappers may ask for certificates, and have them approved.
    for binding, role in (
        (f"kubelet-bootstrap-{suffix}", "system:node-bootstrapper"),
        (
            f"node-autoapprove-bootstrap-{suffix}",
            "system:certificates.k8s.io:certificatesigningrequests:nodeclient",
        ),
    ):
        lab.kubectl(
            "create",
            "clusterrolebinding",
            binding,
            f"--clusterrole={role}",
            "--group=system:bootstrappers",
        )
    # Someone who may ask, but whose requests are not approved by themselves.
    mallory = pki.issue(pki.load_pair(lab.ca_dir, "ca"), f"mallory-{suffix}", client=True)
    mallory_files = pki.write_pair(mallory, tmp_path, "mallory")
    lab.kubectl(
        "create",
        "clusterrolebinding",
        f"mallory-{suffix}",
        "--clusterrole=system:node-bootstrapper",
        f"--user=mallory-{suffix}",
    )
    token = _bootstrap_token(lab, uuid.uuid4().hex[:6], 3600)
    flags = (
        "--controllers=csrapproving,csrsigning",
        f"--cluster-signing-cert-file={lab.ca_dir / 'ca.crt'}",
        f"--cluster-signing-key-file={lab.ca_dir / 'ca.key'}",
        "--cluster-signing-duration=2h",
    )
    with controllers(lab, *flags):
        request, _ = _csr_pem(f"system:node:m-{suffix}", ["system:nodes"])
        _as(
            lab,
            _cert_flags(*mallory_files),
            "create",
            "-f",
            "-",
            input=_csr(f"mallory-{suffix}", request),
        )
        # A kubelet client request that is not one (another organization), approved by
        # a human: the signer refuses it.
        wrong, _ = _csr_pem(f"system:node:w-{suffix}", ["system:masters"])
        lab.kubectl("create", "-f", "-", input=_csr(f"wrong-{suffix}", wrong))
        lab.kubectl("certificate", "approve", f"wrong-{suffix}")

        # The bootstrapping kubelet.
        request, key_pem = _csr_pem(node, ["system:nodes"])
        _as(lab, ["--token", token], "create", "-f", "-", input=_csr(f"boot-{suffix}", request))
        lab.until(lambda: _csr_status(lab, f"boot-{suffix}").get("certificate"), "the certificate")
        csr = lab.kubectl_json("get", "csr", f"boot-{suffix}")
        assert csr["spec"]["username"].startswith("system:bootstrap:")
        assert "system:bootstrappers" in csr["spec"]["groups"]
        approved = {c["type"]: c for c in csr["status"]["conditions"]}["Approved"]
        assert approved["reason"] == "AutoApproved"
        assert "Approved,Issued" in lab.kubectl("get", "csr", f"boot-{suffix}").stdout

        cert = x509.load_pem_x509_certificate(base64.b64decode(csr["status"]["certificate"]))
        ca = pki.load_cert(lab.ca_dir / "ca.crt")
        assert cert.issuer == ca.subject
        cert.verify_directly_issued_by(ca)
        assert cert.subject.rfc4514_string() == f"CN={node},O=system:nodes"
        lifetime = cert.not_valid_after_utc - cert.not_valid_before_utc
        assert datetime.timedelta(hours=2) <= lifetime <= datetime.timedelta(hours=2, minutes=6)
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.CLIENT_AUTH]

        # The kubelet is now the node, to the apiserver.
        (tmp_path / "kubelet.crt").write_bytes(base64.b64decode(csr["status"]["certificate"]))
        (tmp_path / "kubelet.key").write_bytes(key_pem)
        whoami = _as(
            lab,
            _cert_flags(tmp_path / "kubelet.crt", tmp_path / "kubelet.key"),
            *("auth", "whoami", "-o", "json"),
        )
        assert json.loads(whoami)["status"]["userInfo"]["username"] == node

        lab.until(
            lambda: any(
                c["type"] == "Failed"
                for c in _csr_status(lab, f"wrong-{suffix}").get("conditions", [])
            ),
            "the wrong request to fail",
        )
        failed = {c["type"]: c for c in _csr_status(lab, f"wrong-{suffix}")["conditions"]}["Failed"]
        assert failed["reason"] == "SignerValidationFailure"
        assert "system:nodes" in failed["message"]
        assert not _csr_status(lab, f"wrong-{suffix}").get("certificate")
        # Mallory's request was looked at before the kubelet's, and left for a human.
        assert not _csr_status(lab, f"mallory-{suffix}").get("conditions")


def test_the_token_cleaner_deletes_expired_bootstrap_tokens(cluster: Cluster) -> None:
    lab = cluster
    short, long = uuid.uuid4().hex[:6], uuid.uuid4().hex[:6]
    _bootstrap_token(lab, short, 2)
    _bootstrap_token(lab, long, 3600)
    with controllers(lab, "--controllers=tokencleaner"):
        lab.wait_gone(f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{short}")
        r = lab.api("GET", f"/api/v1/namespaces/kube-system/secrets/bootstrap-token-{long}")
        assert r.status_code == 200


# -- Job and TTL after finished -----------------------------------------------------------------


def _job(name: str, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name},
            "spec": {
                "template": {
                    "spec": {
                        "restartPolicy": "Never",
                        "containers": [{"name": "c", "image": "busybox:1.36"}],
                    }
                },
                **spec,
            },
        }
    )


def _job_pods(lab: Cluster, ns: str, job: str) -> list[dict[str, Any]]:
    found = lab.kubectl_json("get", "pods", "-n", ns, "-l", f"batch.kubernetes.io/job-name={job}")
    return list(found["items"])


def _finish(lab: Cluster, ns: str, pod: str, phase: str) -> None:
    """Play the kubelet: the pod's container exited (0: Succeeded, else Failed)."""
    body = {"status": {"phase": phase}}
    r = lab.api(
        "PATCH", f"/api/v1/namespaces/{ns}/pods/{pod}/status", data=json.dumps(body), headers=MERGE
    )
    assert r.status_code == 200, r.text


def _job_status(lab: Cluster, ns: str, job: str) -> dict[str, Any]:
    return dict(lab.kubectl_json("get", "job", job, "-n", ns).get("status") or {})


def _running(lab: Cluster, ns: str, job: str) -> list[str]:
    return [
        p["metadata"]["name"]
        for p in _job_pods(lab, ns, job)
        if p["status"].get("phase") not in ("Succeeded", "Failed")
        and not p["metadata"].get("deletionTimestamp")
    ]


JOB_FLAGS = ("--controllers=job,ttl-after-finished", "--job-pod-failure-backoff=0s")


def test_a_job_runs_parallelism_pods_until_completions_succeed(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()
    with controllers(lab, *JOB_FLAGS):
        lab.kubectl("create", "-n", ns, "-f", "-", input=_job("work", completions=3, parallelism=2))
        lab.until(lambda: len(_running(lab, ns, "work")) == 2, "two pods")
        pod = _job_pods(lab, ns, "work")[0]
        assert pod["metadata"]["finalizers"] == ["batch.kubernetes.io/job-tracking"]
        assert pod["metadata"]["ownerReferences"][0]["kind"] == "Job"
        succeeded = 0
        while succeeded < 3:
            name = _running(lab, ns, "work")[0]
            _finish(lab, ns, name, "Succeeded")
            succeeded += 1
            lab.until(
                lambda n=succeeded: _job_status(lab, ns, "work").get("succeeded") == n,
                f"{succeeded} succeeded",
            )
            want = min(2, 3 - succeeded)
            lab.until(lambda w=want: len(_running(lab, ns, "work")) == w, f"{want} running")
        lab.kubectl("wait", "--for=condition=complete", "job/work", "-n", ns, "--timeout=30s")
        status = _job_status(lab, ns, "work")
        assert status["succeeded"] == 3 and not status.get("failed")
        assert status["completionTime"] and status["startTime"]
        # Counted pods are let go: no finalizer holds them.
        assert all(not p["metadata"].get("finalizers") for p in _job_pods(lab, ns, "work"))
        # Deleting a counted pod does not change the count.
        lab.kubectl("delete", "pod", _job_pods(lab, ns, "work")[0]["metadata"]["name"], "-n", ns)
        time.sleep(0.5)
        assert _job_status(lab, ns, "work")["succeeded"] == 3


def test_a_job_fails_past_its_backoff_limit_counting_each_failure_once(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()
    with controllers(lab, *JOB_FLAGS):
        lab.kubectl("create", "-n", ns, "-f", "-", input=_job("flaky", backoffLimit=2))
        for failures in (1, 2):
            lab.until(lambda: len(_running(lab, ns, "flaky")) == 1, "a pod")
            _finish(lab, ns, _running(lab, ns, "flaky")[0], "Failed")
            lab.until(
                lambda f=failures: _job_status(lab, ns, "flaky").get("failed") == f,
                f"{failures} failed",
            )
        # A pod deleted before it finished counts as failed too: the third failure.
        lab.until(lambda: len(_running(lab, ns, "flaky")) == 1, "a third pod")
        lab.kubectl("delete", "pod", _running(lab, ns, "flaky")[0], "-n", ns, "--wait=false")
        lab.kubectl("wait", "--for=condition=failed", "job/flaky", "-n", ns, "--timeout=30s")
        status = _job_status(lab, ns, "flaky")
        assert status["failed"] == 3
        failed = {c["type"]: c for c in status["conditions"]}["Failed"]
        assert failed["reason"] == "BackoffLimitExceeded"
        assert not _running(lab, ns, "flaky")


def test_active_deadline_and_ttl_after_finished(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()
    with controllers(lab, *JOB_FLAGS):
        lab.kubectl(
            "create",
            "-n",
            ns,
            "-f",
            "-",
            input=_job("slow", activeDeadlineSeconds=1, ttlSecondsAfterFinished=2),
        )
        lab.kubectl("wait", "--for=condition=failed", "job/slow", "-n", ns, "--timeout=30s")
        failed = {c["type"]: c for c in _job_status(lab, ns, "slow")["conditions"]}["Failed"]
        assert failed["reason"] == "DeadlineExceeded"
        lab.until(lambda: not _running(lab, ns, "slow"), "the pod to go")
        # Two seconds after it finished, the Job is deleted.
        lab.wait_gone(f"/apis/batch/v1/namespaces/{ns}/jobs/slow")


# -- CronJob ---------------------------------------------------------------------------------------


def _cronjob(name: str, **spec: Any) -> str:
    return json.dumps(
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "metadata": {"name": name},
            "spec": {
                "schedule": "* * * * *",
                "timeZone": "Europe/Paris",
                "suspend": True,
                "jobTemplate": {
                    "metadata": {"labels": {"app": "backup"}},
                    "spec": {
                        "template": {
                            "spec": {
                                "restartPolicy": "Never",
                                "containers": [{"name": "c", "image": "busybox:1.36"}],
                            }
                        }
                    },
                },
                **spec,
            },
        }
    )


def _patch(lab: Cluster, path: str, body: dict[str, Any]) -> None:
    r = lab.api("PATCH", path, data=json.dumps(body), headers=MERGE)
    assert r.status_code == 200, r.text


def _minutes_ago(minutes: int) -> str:
    when = datetime.datetime.now(datetime.UTC) - datetime.timedelta(minutes=minutes)
    return when.strftime("%Y-%m-%dT%H:%M:%SZ")


def _jobs_of(lab: Cluster, ns: str) -> list[dict[str, Any]]:
    return list(lab.kubectl_json("get", "jobs", "-n", ns)["items"])


def test_a_cronjob_runs_the_most_recent_missed_time_once_and_keeps_its_history(
    cluster: Cluster,
) -> None:
    lab = cluster
    ns = lab.new_namespace()
    path = f"/apis/batch/v1/namespaces/{ns}/cronjobs/backup"
    with controllers(lab, "--controllers=cronjob"):
        lab.kubectl(
            "create",
            "-n",
            ns,
            "-f",
            "-",
            input=_cronjob("backup", concurrencyPolicy="Forbid", successfulJobsHistoryLimit=0),
        )
        # As if the controller-manager had been down for five minutes: five times are
        # due, one Job starts, for the most recent.
        _patch(lab, path + "/status", {"status": {"lastScheduleTime": _minutes_ago(5)}})
        lab.kubectl("patch", "cronjob", "backup", "-n", ns, "-p", '{"spec":{"suspend":false}}')
        lab.until(lambda: len(_jobs_of(lab, ns)) == 1, "a job")
        time.sleep(0.5)
        jobs = _jobs_of(lab, ns)
        assert len(jobs) == 1, [j["metadata"]["name"] for j in jobs]
        job = jobs[0]
        scheduled = job["metadata"]["annotations"][
            "batch.kubernetes.io/cronjob-scheduled-timestamp"
        ]
        minute = int(datetime.datetime.fromisoformat(scheduled.replace("Z", "+00:00")).timestamp())
        assert job["metadata"]["name"] == f"backup-{minute // 60}"
        assert job["metadata"]["labels"] == {"app": "backup"}
        assert job["metadata"]["ownerReferences"][0]["kind"] == "CronJob"
        lab.until(
            lambda: lab.kubectl_json("get", "cronjob", "backup", "-n", ns)["status"].get("active"),
            "the job listed as active",
        )
        status = lab.kubectl_json("get", "cronjob", "backup", "-n", ns)["status"]
        assert status["lastScheduleTime"] == scheduled
        assert [a["name"] for a in status["active"]] == [job["metadata"]["name"]]

        # Forbid: the same time due again while the Job runs starts nothing.
        _patch(lab, path + "/status", {"status": {"lastScheduleTime": _minutes_ago(3)}})
        lab.until(
            lambda: any(e["reason"] == "JobAlreadyActive" for e in _events(lab, ns, "backup")),
            "JobAlreadyActive",
        )
        assert len(_jobs_of(lab, ns)) == 1
        _patch(lab, path + "/status", {"status": {"lastScheduleTime": scheduled}})

        # The Job completes (as its controller would say): it leaves the active list,
        # sets lastSuccessfulTime, and, beyond a history of 0, is deleted.
        done = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        _patch(
            lab,
            f"/apis/batch/v1/namespaces/{ns}/jobs/{job['metadata']['name']}/status",
            {
                "status": {
                    "startTime": done,
                    "completionTime": done,
                    "succeeded": 1,
                    "conditions": [
                        {
                            "type": "SuccessCriteriaMet",
                            "status": "True",
                            "lastTransitionTime": done,
                        },
                        {"type": "Complete", "status": "True", "lastTransitionTime": done},
                    ],
                }
            },
        )
        lab.until(
            lambda: (
                lab.kubectl_json("get", "cronjob", "backup", "-n", ns)["status"].get(
                    "lastSuccessfulTime"
                )
                == done
            ),
            "lastSuccessfulTime",
        )
        lab.until(
            lambda: (
                job["metadata"]["name"] not in [j["metadata"]["name"] for j in _jobs_of(lab, ns)]
            ),
            "the completed job deleted",
        )
        events = {e["reason"] for e in _events(lab, ns, "backup")}
        assert {"SuccessfulCreate", "SawCompletedJob", "SuccessfulDelete"} <= events


# -- ResourceQuota --------------------------------------------------------------------------------


def _quota_status(lab: Cluster, ns: str, name: str) -> dict[str, Any]:
    return dict(lab.kubectl_json("get", "resourcequota", name, "-n", ns).get("status") or {})


def test_racing_creates_cannot_share_the_last_unit_and_the_controller_recounts(
    cluster: Cluster,
) -> None:
    lab = cluster
    ns = lab.new_namespace()
    with controllers(lab, "--controllers=resourcequota"):
        lab.kubectl(
            "create", "quota", "one-pod", "-n", ns, "--hard=pods=1,count/deployments.apps=2"
        )
        lab.until(
            lambda: (
                _quota_status(lab, ns, "one-pod").get("used")
                == {"pods": "0", "count/deployments.apps": "0"}
            ),
            "the quota's status",
        )
        assert _quota_status(lab, ns, "one-pod")["hard"] == {
            "pods": "1",
            "count/deployments.apps": "2",
        }
        racers = 8
        barrier = threading.Barrier(racers)
        codes: list[int] = []

        def create(i: int) -> None:
            body = json.loads(_pod_on("node-a", f"racer-{i}"))
            barrier.wait(10)
            r = lab.api("POST", f"/api/v1/namespaces/{ns}/pods", json=body)
            codes.append(r.status_code)
            if r.status_code != 201:
                assert "exceeded quota: one-pod" in r.json()["message"], r.text

        threads = [threading.Thread(target=create, args=(i,)) for i in range(racers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert sorted(codes) == [201] + [403] * (racers - 1), codes
        assert len(lab.kubectl_json("get", "pods", "-n", ns)["items"]) == 1
        assert _quota_status(lab, ns, "one-pod")["used"]["pods"] == "1"

        # The pod goes (its kubelet confirms at once): the recount gives the unit back,
        # and the next create passes.
        pod = lab.kubectl_json("get", "pods", "-n", ns)["items"][0]["metadata"]["name"]
        lab.kubectl("delete", "pod", pod, "-n", ns, "--grace-period=0", "--force")
        lab.until(lambda: _quota_status(lab, ns, "one-pod")["used"]["pods"] == "0", "the recount")
        lab.kubectl("create", "-n", ns, "-f", "-", input=_pod_on("node-a", "after"))
        described = lab.kubectl("describe", "quota", "one-pod", "-n", ns).stdout
        assert "pods" in described and "1" in described


# -- PodDisruptionBudget and eviction --------------------------------------------------------------


class ConfirmingKubelet:
    """Plays the kubelets of a namespace's pods: confirms each deletion at once."""

    def __init__(self, lab: Cluster, ns: str) -> None:
        self.lab, self.ns = lab, ns
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> ConfirmingKubelet:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)

    def _run(self) -> None:
        path = f"/api/v1/namespaces/{self.ns}/pods"
        while not self._stop.wait(0.2):
            for pod in self.lab.api("GET", path).json().get("items") or []:
                if pod["metadata"].get("deletionTimestamp"):
                    self.lab.api(
                        "DELETE",
                        f"{path}/{pod['metadata']['name']}",
                        json={"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0},
                    )


def _owned_pod(name: str, node: str, owner: dict[str, Any]) -> str:
    pod = json.loads(_pod_on(node, name))
    pod["metadata"]["labels"] = {"app": "web"}
    pod["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "name": owner["metadata"]["name"],
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
    ]
    return json.dumps(pod)


def _budget(lab: Cluster, ns: str) -> dict[str, Any]:
    return dict(lab.kubectl_json("get", "pdb", "web", "-n", ns).get("status") or {})


def _evict(lab: Cluster, ns: str, pod: str) -> Any:
    body = {"apiVersion": "policy/v1", "kind": "Eviction", "metadata": {"name": pod}}
    return lab.api("POST", f"/api/v1/namespaces/{ns}/pods/{pod}/eviction", json=body)


def test_drain_and_evictions_respect_the_disruption_budget(cluster: Cluster) -> None:
    lab = cluster
    ns = lab.new_namespace()
    node = f"drained-{uuid.uuid4().hex[:6]}"
    lab.kubectl("create", "-f", "-", input=_node(node))
    rs = json.loads(
        lab.kubectl(
            "create",
            "-n",
            ns,
            "-o",
            "json",
            "-f",
            "-",
            input=json.dumps(
                {
                    "apiVersion": "apps/v1",
                    "kind": "ReplicaSet",
                    "metadata": {"name": "web"},
                    "spec": {
                        "replicas": 3,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
                        },
                    },
                }
            ),
        ).stdout
    )
    try:
        with controllers(lab, "--controllers=disruption"), ConfirmingKubelet(lab, ns):
            for i in range(3):
                lab.kubectl("create", "-n", ns, "-f", "-", input=_owned_pod(f"web-{i}", node, rs))
                _kubelet_reports(lab, ns, f"web-{i}", f"10.244.7.{i + 1}", ready=True)
            lab.kubectl(
                "create", "pdb", "web", "-n", ns, "--selector=app=web", "--max-unavailable=1"
            )
            lab.until(lambda: _budget(lab, ns).get("disruptionsAllowed") == 1, "the budget")
            status = _budget(lab, ns)
            assert (status["expectedPods"], status["currentHealthy"], status["desiredHealthy"]) == (
                3,
                3,
                2,
            )
            assert status["observedGeneration"] == 1

            # Drain evicts one pod, then the budget holds the others.
            done = lab.kubectl(
                "drain", node, "--force", "--ignore-daemonsets", "--timeout=8s", check=False
            )
            assert done.returncode != 0
            assert "Cannot evict pod as it would violate the pod's disruption budget" in (
                done.stderr
            ), done.stderr
            assert lab.kubectl_json("get", "node", node)["spec"].get("unschedulable") is True
            left = lab.kubectl_json("get", "pods", "-n", ns)["items"]
            assert len(left) == 2, [p["metadata"]["name"] for p in left]
            lab.until(lambda: _budget(lab, ns).get("currentHealthy") == 2, "the recount")
            assert _budget(lab, ns)["disruptionsAllowed"] == 0

            # A replacement elsewhere becomes ready: one more disruption, and of two
            # evictions racing for it exactly one passes.
            lab.kubectl("create", "-n", ns, "-f", "-", input=_owned_pod("web-3", "node-x", rs))
            _kubelet_reports(lab, ns, "web-3", "10.244.8.1", ready=True)
            lab.until(lambda: _budget(lab, ns).get("disruptionsAllowed") == 1, "one allowed")
            codes: list[int] = []
            barrier = threading.Barrier(2)

            def evict(pod: str) -> None:
                barrier.wait(10)
                codes.append(_evict(lab, ns, pod).status_code)

            racers = [threading.Thread(target=evict, args=(p["metadata"]["name"],)) for p in left]
            for thread in racers:
                thread.start()
            for thread in racers:
                thread.join(30)
            assert sorted(codes) == [201, 429], codes
    finally:
        lab.kubectl("delete", "node", node, "--ignore-not-found")


def test_the_kubernetes_service_has_endpoints_and_a_slice(tmp_path: Path) -> None:
    """kube-apiserver writes both for its own Service (a documentation address here:
    nothing is sent to it)."""
    control = LocalControlPlane(
        tmp_path,
        store_members=1,
        controller_manager=False,
        extra_args=["--advertise-address", "192.0.2.10"],
    )
    try:
        control.start(timeout=90)
        lab = Lab(control)
        eps = lab.kubectl_json("get", "endpoints", "kubernetes", "-n", "default")
        assert eps["subsets"][0]["addresses"] == [{"ip": "192.0.2.10"}]
        slices = lab.kubectl_json(
            "get", "endpointslices", "-n", "default", "-l", "kubernetes.io/service-name=kubernetes"
        )["items"]
        assert len(slices) == 1
        assert slices[0]["addressType"] == "IPv4"
        assert slices[0]["endpoints"] == [
            {"addresses": ["192.0.2.10"], "conditions": {"ready": True}}
        ]
        assert slices[0]["ports"] == [{"name": "https", "port": control.port, "protocol": "TCP"}]
    finally:
        control.stop()


def test_pods_of_a_deleted_node_are_force_deleted_and_their_namespace_goes(
    cluster: Cluster,
) -> None:
    """The issue's case: pods bound to a Node that was deleted stay Terminating (no
    kubelet confirms), and keep their namespace Terminating, until PodGC removes them."""
    lab = cluster
    ns = lab.new_namespace()
    node = f"gone-{uuid.uuid4().hex[:6]}"
    lab.kubectl("create", "-f", "-", input=_node(node))
    lab.kubectl("create", "-n", ns, "-f", "-", input=_pod_on(node, "web"))
    lab.kubectl("delete", "pod", "web", "-n", ns, "--wait=false")
    lab.kubectl("delete", "node", node)
    lab.kubectl("delete", "namespace", ns, "--wait=false")
    assert "Terminating" in lab.kubectl("get", "pod", "web", "-n", ns).stdout
    with controllers(
        lab,
        "--controllers=pod-garbage-collector-controller,namespace-controller",
        "--pod-gc-quarantine=1s",
    ):
        lab.until(
            lambda: lab.kubectl("get", "namespace", ns, check=False).returncode != 0,
            f"namespace {ns} to go with its orphaned pod",
            timeout=60,
        )
