"""Storage on the Docker lab with the real kubectl, as on kind: the default StorageClass
`standard` that `labadm init` installs; a claim that names no class is provisioned by
the local-path provisioner on the node its first pod is scheduled to; the data a pod
wrote there is read back by a replacement pod, which goes to the same node; a
StatefulSet's volumeClaimTemplates get Bound claims; deleting the claims deletes their
volumes (reclaim policy Delete, a helper pod removing the directories)."""

from __future__ import annotations

import json
from typing import Any

from lab.cluster import Lab
from tests.e2e.test_seeds import kubectl
from tests.waiting import until

CLAIM = """
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: notes}
spec:
  accessModes: [ReadWriteOnce]
  resources: {requests: {storage: 64Mi}}
"""

POD = """
apiVersion: v1
kind: Pod
metadata: {name: NAME}
spec:
  restartPolicy: Never
  containers:
  - name: main
    image: busybox
    command: ["sh", "-c", "COMMAND"]
    volumeMounts: [{name: notes, mountPath: /notes}]
  volumes:
  - name: notes
    persistentVolumeClaim: {claimName: notes}
"""

STATEFUL_SET = """
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  serviceName: db
  replicas: 2
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      terminationGracePeriodSeconds: 1
      containers:
      - name: db
        image: busybox
        command: ["sh", "-c", "hostname > /var/lib/db/owner; exec sleep 3600"]
        volumeMounts: [{name: data, mountPath: /var/lib/db}]
  volumeClaimTemplates:
  - metadata: {name: data}
    spec:
      accessModes: [ReadWriteOnce]
      resources: {requests: {storage: 32Mi}}
"""


def get(*args: str) -> Any:
    return json.loads(kubectl("get", *args, "-o", "json"))


def pod(name: str, command: str) -> str:
    return POD.replace("NAME", name).replace("COMMAND", command)


def phase(kind: str, name: str) -> str:
    found = json.loads(kubectl("get", kind, name, "-o", "json", "--ignore-not-found") or "{}")
    return str((found.get("status") or {}).get("phase") or "")


def test_a_replacement_pod_reads_what_the_first_wrote_on_the_same_node(lab: Lab) -> None:
    classes = kubectl("get", "storageclass")
    assert "standard (default)" in classes and "rancher.io/local-path" in classes
    assert "WaitForFirstConsumer" in classes

    kubectl("apply", "-f", "-", stdin=CLAIM)
    assert phase("pvc", "notes") == "Pending"  # until a pod uses it
    kubectl("apply", "-f", "-", stdin=pod("writer", "echo kept across pods > /notes/note"))
    until(lambda: phase("pod", "writer") == "Succeeded", "the writer done", timeout=180)
    claim = get("pvc", "notes")
    assert claim["status"]["phase"] == "Bound"
    assert claim["spec"]["storageClassName"] == "standard"
    node = get("pod", "writer")["spec"]["nodeName"]
    assert claim["metadata"]["annotations"]["volume.kubernetes.io/selected-node"] == node
    volume = get("pv", claim["spec"]["volumeName"])
    assert volume["spec"]["hostPath"]["path"].startswith("/var/lib/kubelab/local-path/")

    kubectl("delete", "pod", "writer")
    kubectl("apply", "-f", "-", stdin=pod("reader", "cat /notes/note"))
    until(lambda: phase("pod", "reader") == "Succeeded", "the reader done", timeout=180)
    assert get("pod", "reader")["spec"]["nodeName"] == node
    assert kubectl("logs", "reader").strip() == "kept across pods"

    kubectl("delete", "pod", "reader")
    kubectl("delete", "pvc", "notes")
    until(
        lambda: not kubectl("get", "pv", volume["metadata"]["name"], "--ignore-not-found"),
        "the volume deleted with its claim",
        timeout=120,
    )


def test_a_stateful_sets_claim_templates_get_bound_claims(lab: Lab) -> None:
    kubectl("apply", "-f", "-", stdin=STATEFUL_SET)
    kubectl("rollout", "status", "statefulset/db", "--timeout=240s")
    volumes = []
    for ordinal in (0, 1):
        claim = get("pvc", f"data-db-{ordinal}")
        volumes.append(claim["spec"]["volumeName"])
        assert claim["status"]["phase"] == "Bound"
        node = get("pod", f"db-{ordinal}")["spec"]["nodeName"]
        volume = get("pv", claim["spec"]["volumeName"])
        term = volume["spec"]["nodeAffinity"]["required"]["nodeSelectorTerms"][0]
        assert term["matchExpressions"][0]["values"] == [node]
    # Deleting the claims first: they wait (pvc-protection) for the pods to be gone.
    kubectl("delete", "pvc", "data-db-0", "data-db-1", "--wait=false")
    assert get("pvc", "data-db-0")["metadata"]["deletionTimestamp"]
    kubectl("delete", "statefulset", "db")
    until(
        lambda: not kubectl("get", "pv", *volumes, "--ignore-not-found"),
        "the set's volumes deleted once its pods and claims are gone",
        timeout=120,
    )
