"""`labadm join --control-plane`: another control-plane node joins a serving cluster
(kubeadm's control-plane-prepare and control-plane-join phases).

Prepare, before the kubelet starts: the shared CAs and the service-account keys are
downloaded from `kube-system/kubeadm-certs` with the bootstrap token and decrypted with
`--certificate-key` (`lab.labadm.certs_upload`); this node's own certificates (its
apiserver's, with its address and the control-plane endpoint; its store member's
server and peer pairs; the store and kubelet client pairs) are issued from them by the
same phases `labadm init` runs; the admin, controller-manager and scheduler kubeconfigs
and the static pods of the apiserver, controller-manager and scheduler are written. The
apiserver reaches its own store member first and the other members after it; the
controller-manager and the scheduler elect leaders, so the cluster keeps one of each.

Join, once the kubelet runs: the store member is added to the store as a learner
(through the members' client ports, with the apiserver's store-client certificate),
its static pod starts it with `--initial-cluster-state=existing` and every member
listed, and it is promoted to a voter once it has caught up (the store refuses a
promotion until then, so it is retried). Only then is the quorum larger: control-plane
nodes may join one after another while the cluster serves, never two voters added at
once. Last, the node is labelled and tainted as control plane.

`labadm reset` on a control-plane node removes its member first (`leave_store`), so
the remaining members' quorum no longer counts it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import yaml

from kubelab.client import ClientConfig, RestClient, resource_for
from kubelab.grpccodes import GrpcCode
from kubelab.storeclient import FailedPrecondition, StoreClient, StoreError, Unavailable
from lab.labadm import certs_upload, tokens
from lab.labadm.init import (
    CERTS,
    CONTROL_PLANE,
    KUBECONFIGS,
    STORE,
    InitData,
    mark_control_plane,
    port_in_use,
    wait_control_plane,
)
from lab.labadm.layout import (
    CONTROL_PLANE_LABEL,
    STORE_CLIENT_PORT,
    STORE_PEER_PORT,
    Layout,
    admin_client,
)
from lab.labadm.workflow import Phase, PhaseError, Workflow, say

if TYPE_CHECKING:
    from lab.labadm.join import JoinData

NODES = resource_for("v1", "Node")
T = TypeVar("T")
PROMOTE_TIMEOUT = 120.0


def _control_plane_only(run: Callable[[JoinData], None]) -> Callable[[JoinData], None]:
    """A phase of a control-plane join: nothing on a worker's."""

    def phase(data: JoinData) -> None:
        if data.control_plane is not None:
            run(data)

    return phase


def _plane(data: JoinData) -> InitData:
    """The control-plane half of the join's data (set by `--control-plane`)."""
    assert data.control_plane is not None
    return data.control_plane


def problems(data: JoinData) -> list[str]:
    """What stops this node from joining as control plane, for join's preflight."""
    if data.control_plane is None:
        return []
    failed: list[str] = []
    try:
        certs_upload._aead(data.control_plane.certificate_key)
    except PhaseError as exc:
        failed.append(str(exc))
    if not data.dry_run:
        failed += [
            f"port {p} is in use" for p in (6443, STORE_CLIENT_PORT, STORE_PEER_PORT)
            if port_in_use(p)
        ]  # fmt: skip
    return failed


def download_certs(data: JoinData) -> None:
    plane = _plane(data)
    say("download-certs", f'Downloading the certificates in Secret "{certs_upload.SECRET_NAME}"')
    if data.dry_run:
        return
    client = RestClient(
        ClientConfig(server=data.server, ca_data=data.ca_pem, token=data.token), qps=None
    )
    try:
        certs_upload.download(client, data.layout.pki, plane.certificate_key)
        settings = tokens.read_cluster_config(client)
    finally:
        client.close()
    # The controller-manager's flags need the cluster's ranges now, before TLS bootstrap.
    data.pod_subnet = plane.pod_subnet = settings.get("podSubnet", plane.pod_subnet)
    plane.service_cidr = settings.get("serviceSubnet", plane.service_cidr)
    plane.load_balancer_ip_range = settings.get("loadBalancerIPRange", "")
    endpoint = plane.tracing_endpoint or settings.get("tracingEndpoint", "")
    data.tracing_endpoint = plane.tracing_endpoint = endpoint


def own_certs(data: JoinData) -> None:
    """init's certificate phases: the downloaded CAs and keys are kept ("Using
    existing"), this node's own pairs are issued from them."""
    Workflow((CERTS,)).run(_plane(data))


def kubeconfigs(data: JoinData) -> None:
    """admin, controller-manager and scheduler (the kubelet's comes from TLS bootstrap,
    super-admin stays on the first node, as kubeadm does)."""
    skip = ("kubeconfig/super-admin", "kubeconfig/kubelet")
    Workflow((KUBECONFIGS,)).run(_plane(data), skip=skip)


def _store_client(layout: Layout, endpoints: list[str]) -> StoreClient:
    return StoreClient(
        endpoints,
        ca_file=layout.store_pki / "ca.crt",
        cert_file=layout.pki / "apiserver-store-client.crt",
        key_file=layout.pki / "apiserver-store-client.key",
        timeout=10.0,
    )


def _on_leader(layout: Layout, endpoints: list[str]) -> StoreClient:
    """A client of the store's leader: membership changes must be proposed there (the
    store answers FailedPrecondition elsewhere, as etcd does)."""
    with _store_client(layout, endpoints) as any_member:
        leader = any_member.status().leader
        urls = next((m.client_urls for m in any_member.member_list().members if m.id == leader), [])
    if not urls:
        raise Unavailable(
            GrpcCode.UNAVAILABLE, f"no leader among {', '.join(endpoints)} (an election?)"
        )
    return _store_client(layout, urls[:1])


def _with_leader(layout: Layout, endpoints: list[str], change: Callable[[StoreClient], T]) -> T:
    """`change` on the leader, again on a new leader if it moved meanwhile."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with _on_leader(layout, endpoints) as leader:
                return change(leader)
        except (FailedPrecondition, Unavailable) as exc:
            moved = "leader" in str(exc) or isinstance(exc, Unavailable)
            if not moved or time.monotonic() > deadline:
                raise
        time.sleep(0.5)


def _control_plane_ips(data: JoinData) -> list[str]:
    """The addresses of the control-plane nodes that have joined (their store members'
    hosts), read with admin.conf."""
    client = admin_client(data.layout)
    try:
        nodes = client.list(NODES, label_selector=CONTROL_PLANE_LABEL)["items"]
    finally:
        client.close()
    ips = [
        a["address"]
        for n in nodes
        for a in (n.get("status") or {}).get("addresses") or []
        if a.get("type") == "InternalIP"
    ]
    if not ips:
        raise PhaseError(
            f"no Node labelled {CONTROL_PLANE_LABEL} with an InternalIP: is the first "
            "control-plane node initialized (labadm init)?"
        )
    return ips


def control_plane_manifests(data: JoinData) -> None:
    """The apiserver (reaching the store's members: their client URLs, learnt from the
    control-plane Nodes), controller-manager and scheduler static pods."""
    plane = _plane(data)
    if not data.dry_run:
        members = [f"https://{ip}:{STORE_CLIENT_PORT}" for ip in _control_plane_ips(data)]
        own = f"//{plane.advertise_address}:"
        plane.store_peers = tuple(m for m in members if own not in m)
    Workflow((CONTROL_PLANE,)).run(plane)


def join_store(data: JoinData) -> None:
    """Add this node's member as a learner, start it, promote it once caught up."""
    plane = _plane(data)
    peer_url = f"https://{plane.advertise_address}:{STORE_PEER_PORT}"
    say("control-plane-join", f"Adding {plane.node_name} ({peer_url}) to the store as a learner")
    if data.dry_run:
        Workflow((STORE,)).run(plane)
        return
    endpoints = list(plane.store_peers)
    store = _store_client(data.layout, endpoints)
    try:
        existing = {m.id: m for m in store.member_list().members}
        mine = next((m for m in existing.values() if peer_url in m.peer_urls), None)
        if mine is None:
            added = _with_leader(
                data.layout, endpoints, lambda c: c.member_add([peer_url], is_learner=True)
            )
            member_id, members = added.member.id, added.members
        else:  # a rerun after a failure: the member is there already
            member_id, members = mine.id, list(existing.values())
        plane.store_initial_cluster = ",".join(
            f"{m.name or plane.node_name}={m.peer_urls[0]}"
            for m in members
            if m.peer_urls and (m.name or m.id == member_id)
        )
        Workflow((STORE,)).run(plane)
        say("control-plane-join", f"Waiting for member {member_id:x} to catch up, to promote it")
        target = store.status().raft_index
        own = _store_client(data.layout, [f"https://{plane.advertise_address}:{STORE_CLIENT_PORT}"])
        with own:
            _wait_caught_up(own, member_id, target, plane.image)
        try:
            _with_leader(data.layout, endpoints, lambda c: c.member_promote(member_id))
        except FailedPrecondition as exc:
            if "can only promote a learner" not in str(exc):
                raise
            # promoted by an earlier try whose answer was lost
        say("control-plane-join", f"Member {member_id:x} promoted to a voting member")
    except StoreError as exc:
        raise PhaseError(f"the store refused the new member: {exc}") from None
    finally:
        store.close()


def _wait_caught_up(own: StoreClient, member_id: int, target: int, image: str) -> None:
    """Until the new member serves and has applied the log up to `target` (the
    cluster's index when it was added): promoted earlier, a member that never starts
    would count in the quorum (the store itself does not refuse that promotion)."""
    deadline = time.monotonic() + PROMOTE_TIMEOUT
    applied = -1
    while time.monotonic() < deadline:
        try:
            applied = own.status().raft_applied_index
            if applied >= target:
                return
        except StoreError:
            pass  # its static pod is still starting
        time.sleep(0.5)
    if applied < 0:
        raise PhaseError(
            f"the store member {member_id:x} never answered in {PROMOTE_TIMEOUT:.0f}s: its "
            f"static pod did not start. Is its image {image} on this node or pullable "
            "(`docker images`, --image)? The kubelet's log says why: /var/log/kubelet.log"
        )
    raise PhaseError(
        f"the store member {member_id:x} had applied index {applied} of {target} after "
        f"{PROMOTE_TIMEOUT:.0f}s: see `docker logs` of its kubelab-store container on this node"
    )


def wait_apiserver(data: JoinData) -> None:
    wait_control_plane(_plane(data))


def mark(data: JoinData) -> None:
    mark_control_plane(_plane(data))


def leave_store(layout: Layout) -> None:
    """Remove this node's store member through the other members (reset's first step).
    It is found by its static pod's `--name` or, a learner that never started having no
    name yet, its peer URL; the store is reached here or, this member being down, at
    the members its manifest's `--initial-cluster` names. Nothing to do on a worker, for
    the only member, or if the member is gone already."""
    manifest = layout.manifests / "kubelab-store.yaml"
    if not manifest.exists():
        return
    command = yaml.safe_load(manifest.read_text())["spec"]["containers"][0]["command"]
    flags = dict(
        a.removeprefix("--").split("=", 1) for a in command if a.startswith("--") and "=" in a
    )
    node_name, peer_url = flags.get("name", ""), flags.get("listen-peer-urls", "")
    endpoints = [f"https://127.0.0.1:{STORE_CLIENT_PORT}"] + [
        _client_url(url)
        for member in flags.get("initial-cluster", "").split(",")
        if (url := member.partition("=")[2]) and url != peer_url
    ]
    store = _store_client(layout, endpoints)
    try:
        members = store.member_list().members
        mine = next((m for m in members if m.name == node_name or peer_url in m.peer_urls), None)
        others = [url for m in members if m is not mine for url in m.client_urls]
        if mine is None:
            say("reset", f"No store member named {node_name}: nothing to remove")
            return
        if not others:
            say("reset", "This is the store's only member: its data goes with the node")
            return
        say("reset", f"Removing the store member {mine.id:x} ({node_name})")
        _with_leader(layout, others, lambda c: c.member_remove(mine.id))
    except StoreError as exc:
        raise PhaseError(
            f"could not remove this node's store member ({exc}); the other members still "
            "count it: remove it with `labctl store member remove` from another node"
        ) from None
    finally:
        store.close()


def _client_url(peer_url: str) -> str:
    """A member's client URL from its peer URL: the same host, the client port."""
    host = peer_url.removeprefix("https://").rsplit(":", 1)[0]
    return f"https://{host}:{STORE_CLIENT_PORT}"


def _phase(name: str, help: str, run: Callable[[JoinData], None]) -> Phase[JoinData]:
    return Phase(name, help, _control_plane_only(run))


PREPARE: Phase[JoinData] = Phase(
    "control-plane-prepare",
    "The shared certs, this node's own certs, kubeconfigs and control-plane manifests",
    phases=(
        _phase("download-certs", "The shared CAs and keys, decrypted", download_certs),
        _phase("certs", "This node's certificates", own_certs),
        _phase("kubeconfig", "admin, controller-manager and scheduler", kubeconfigs),
        _phase("control-plane", "The control plane's static pods", control_plane_manifests),
    ),
)
JOIN: Phase[JoinData] = Phase(
    "control-plane-join",
    "The store member, added and promoted; the node marked as control plane",
    phases=(
        _phase("store", "A store member, added as a learner and promoted", join_store),
        _phase("wait-apiserver", "This node's apiserver ready", wait_apiserver),
        _phase("mark-control-plane", "Labels and taints the node", mark),
    ),
)
