"""`kubelab-store`: one member of the replicated store, as a daemon.

Flags follow etcd's (`--name`, `--data-dir`, `--listen-client-urls`,
`--initial-cluster`, ...) so that anyone who has run etcd can run this, and so that
`labadm` can write the same static pod manifest for either.

The client API is a subset of etcd's v3 JSON gateway: same paths, same JSON shapes
(base64 keys and values, 64-bit integers as strings), same error bodies. Writes go
through Raft; reads are linearizable (ReadIndex) unless `serializable` is set.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import binascii
import json
import logging
import signal
import ssl
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from aiohttp import web

from controlplane.store import kv
from controlplane.store.node import ClusterState, NodeConfig, RaftNode, StoreTimeoutError
from controlplane.store.raft import ProposalDroppedError
from controlplane.store.wal import StoreStorageError
from kubelab import pki

log = logging.getLogger("kubelab.store.server")

MAX_REQUEST_BYTES = int(1.5 * 1024 * 1024)  # etcd's --max-request-bytes default

# gRPC status codes, as etcd's gateway reports them in error bodies.
GRPC_INVALID_ARGUMENT = 3
GRPC_DEADLINE_EXCEEDED = 4
GRPC_UNAVAILABLE = 14
GRPC_INTERNAL = 13


class GatewayError(Exception):
    def __init__(self, http_status: int, grpc_code: int, message: str) -> None:
        super().__init__(message)
        self.http_status = http_status
        self.grpc_code = grpc_code


def _error_response(err: GatewayError) -> web.Response:
    body = {"error": str(err), "code": err.grpc_code, "message": str(err)}
    return web.json_response(body, status=err.http_status)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _unb64(field: str, value: Any) -> bytes:
    if not isinstance(value, str):
        raise GatewayError(400, GRPC_INVALID_ARGUMENT, f"{field} must be a base64 string")
    try:
        return base64.b64decode(value, validate=True)
    except binascii.Error:
        raise GatewayError(
            400, GRPC_INVALID_ARGUMENT, f"{field} is not valid base64: encode keys and values"
        ) from None


def _kv_json(item: kv.KeyValue) -> dict[str, Any]:
    return {
        "key": _b64(item.key),
        "value": _b64(item.value),
        "create_revision": str(item.create_revision),
        "mod_revision": str(item.mod_revision),
        "version": str(item.version),
    }


class StoreServer:
    def __init__(self, node: RaftNode, sm: kv.KVStateMachine) -> None:
        self.node = node
        self.sm = sm

    def _header(self) -> dict[str, str]:
        st = self.node.status()
        return {
            "cluster_id": str(0),
            "member_id": str(self.node.id),
            "revision": str(self.sm.revision),
            "raft_term": str(st.term),
        }

    async def _body(self, request: web.Request, allowed: set[str]) -> dict[str, Any]:
        raw = await request.read()
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            raise GatewayError(
                400, GRPC_INVALID_ARGUMENT, f"malformed JSON body: {exc.msg} at {exc.pos}"
            ) from None
        if not isinstance(body, dict):
            raise GatewayError(400, GRPC_INVALID_ARGUMENT, "the body must be a JSON object")
        unknown = set(body) - allowed
        if unknown:
            raise GatewayError(
                400,
                GRPC_INVALID_ARGUMENT,
                f"unknown field(s) {sorted(unknown)}; allowed: {sorted(allowed)}",
            )
        return body

    async def _write(self, command: bytes) -> kv.WriteResult:
        try:
            result: kv.WriteResult = await self.node.propose(command)
        except ProposalDroppedError as exc:
            raise GatewayError(503, GRPC_UNAVAILABLE, f"etcdserver: no leader ({exc})") from None
        except StoreTimeoutError as exc:
            raise GatewayError(
                504, GRPC_DEADLINE_EXCEEDED, f"etcdserver: request timed out ({exc})"
            ) from None
        return result

    async def put(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"key", "value", "prev_kv"})
        key = _unb64("key", body.get("key"))
        if not key:
            raise GatewayError(400, GRPC_INVALID_ARGUMENT, "etcdserver: key is not provided")
        value = _unb64("value", body.get("value", ""))
        res = await self._write(kv.put_command(key, value))
        out: dict[str, Any] = {"header": self._header()}
        if body.get("prev_kv") and res.prev is not None:
            out["prev_kv"] = _kv_json(res.prev)
        return web.json_response(out)

    async def range(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"key", "serializable"})
        key = _unb64("key", body.get("key"))
        if not body.get("serializable"):
            try:
                await self.node.read_index()
            except ProposalDroppedError as exc:
                raise GatewayError(
                    503, GRPC_UNAVAILABLE, f"etcdserver: no leader ({exc})"
                ) from None
            except StoreTimeoutError as exc:
                raise GatewayError(
                    504, GRPC_DEADLINE_EXCEEDED, f"etcdserver: request timed out ({exc})"
                ) from None
        item = self.sm.get(key)
        out: dict[str, Any] = {"header": self._header()}
        if item is not None:
            out["kvs"] = [_kv_json(item)]
            out["count"] = "1"
        return web.json_response(out)

    async def delete_range(self, request: web.Request) -> web.Response:
        body = await self._body(request, {"key", "prev_kv"})
        key = _unb64("key", body.get("key"))
        res = await self._write(kv.delete_command(key))
        out: dict[str, Any] = {"header": self._header(), "deleted": str(res.deleted)}
        if body.get("prev_kv") and res.prev is not None:
            out["prev_kvs"] = [_kv_json(res.prev)]
        return web.json_response(out)

    async def status(self, request: web.Request) -> web.Response:
        await self._body(request, set())
        st = self.node.status()
        return web.json_response(
            {
                "header": self._header(),
                "version": "3.4.0-kubelab",
                "leader": str(st.leader),
                "raftIndex": str(st.commit),
                "raftTerm": str(st.term),
                "raftAppliedIndex": str(st.applied),
                "isLearner": self.node.id in st.learners,
                "dbSize": str(len(self.sm.snapshot())),
            }
        )

    async def member_list(self, request: web.Request) -> web.Response:
        await self._body(request, {"linearizable"})
        st = self.node.status()
        members = []
        for mid, (host, port) in sorted(st.members.items()):
            members.append(
                {
                    "ID": str(mid),
                    "name": self.node.config.name if mid == self.node.id else "",
                    "peerURLs": [f"https://{host}:{port}"],
                    "isLearner": mid in st.learners,
                }
            )
        return web.json_response({"header": self._header(), "members": members})

    async def health(self, request: web.Request) -> web.Response:
        st = self.node.status()
        healthy = st.leader != 0
        reason = "" if healthy else "RAFT NO LEADER"
        return web.json_response(
            {"health": "true" if healthy else "false", "reason": reason},
            status=200 if healthy else 503,
        )

    def app(self) -> web.Application:
        @web.middleware
        async def errors(
            request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
        ) -> web.StreamResponse:
            try:
                return await handler(request)
            except GatewayError as err:
                return _error_response(err)
            except web.HTTPRequestEntityTooLarge:
                return _error_response(
                    GatewayError(400, GRPC_INVALID_ARGUMENT, "etcdserver: request is too large")
                )
            except StoreStorageError as exc:
                log.error("store: storage failure: %s", exc)
                return _error_response(GatewayError(500, GRPC_INTERNAL, str(exc)))

        app = web.Application(middlewares=[errors], client_max_size=MAX_REQUEST_BYTES)
        app.router.add_post("/v3/kv/put", self.put)
        app.router.add_post("/v3/kv/range", self.range)
        app.router.add_post("/v3/kv/deleterange", self.delete_range)
        app.router.add_post("/v3/maintenance/status", self.status)
        app.router.add_post("/v3/cluster/member/list", self.member_list)
        app.router.add_get("/health", self.health)
        return app


def _host_port(url: str, flag: str) -> tuple[str, int]:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or not parts.port:
        raise SystemExit(f"kubelab-store: {flag}: {url!r} must look like https://HOST:PORT")
    return parts.hostname, parts.port


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="kubelab-store", description="A member of kubelab's Raft-replicated store."
    )
    p.add_argument("--name", default="default", help="human-readable name of this member")
    p.add_argument("--data-dir", type=Path, help="where the WAL and snapshots live")
    p.add_argument("--listen-client-urls", default="http://127.0.0.1:2379")
    p.add_argument("--advertise-client-urls", default=None)
    p.add_argument("--listen-peer-urls", default="https://127.0.0.1:2380")
    p.add_argument("--initial-advertise-peer-urls", default=None)
    p.add_argument(
        "--initial-cluster",
        default=None,
        help="every initial member as name=https://host:port, comma-separated",
    )
    p.add_argument("--initial-cluster-state", choices=["new", "existing"], default="new")
    p.add_argument("--initial-cluster-token", default="kubelab-store")
    p.add_argument("--heartbeat-interval", type=int, default=100, help="milliseconds")
    p.add_argument("--election-timeout", type=int, default=1000, help="milliseconds")
    p.add_argument("--snapshot-count", type=int, default=10_000)
    p.add_argument(
        "--experimental-snapshot-catchup-entries",
        type=int,
        default=5_000,
        help="entries kept after a snapshot so slow followers get appends, not snapshots",
    )
    p.add_argument("--cert-file", type=Path)
    p.add_argument("--key-file", type=Path)
    p.add_argument("--trusted-ca-file", type=Path)
    p.add_argument("--client-cert-auth", action="store_true")
    p.add_argument("--peer-cert-file", type=Path)
    p.add_argument("--peer-key-file", type=Path)
    p.add_argument("--peer-trusted-ca-file", type=Path)
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p.parse_args(argv)


def build_config(args: argparse.Namespace) -> NodeConfig:
    data_dir = args.data_dir or Path(f"{args.name}.kubelab-store")
    peer_listen = _host_port(args.listen_peer_urls, "--listen-peer-urls")
    advertise = args.initial_advertise_peer_urls or args.listen_peer_urls
    initial = args.initial_cluster or f"{args.name}={advertise}"
    cluster: dict[str, tuple[str, int]] = {}
    for item in initial.split(","):
        name, sep, url = item.partition("=")
        if not sep:
            raise SystemExit(
                f"kubelab-store: --initial-cluster: {item!r} must be name=https://host:port"
            )
        cluster[name.strip()] = _host_port(url.strip(), "--initial-cluster")
    if args.election_timeout < 5 * args.heartbeat_interval:
        raise SystemExit(
            "kubelab-store: --election-timeout must be at least 5x --heartbeat-interval "
            f"(got {args.election_timeout} and {args.heartbeat_interval})"
        )
    peer_files = (args.peer_cert_file, args.peer_key_file, args.peer_trusted_ca_file)
    server_ssl = client_ssl = None
    if any(peer_files):
        if not all(peer_files):
            raise SystemExit(
                "kubelab-store: peer TLS needs --peer-cert-file, --peer-key-file and "
                "--peer-trusted-ca-file together"
            )
        server_ssl = pki.server_ssl_context(
            args.peer_trusted_ca_file, args.peer_cert_file, args.peer_key_file
        )
        client_ssl = pki.client_ssl_context(
            args.peer_trusted_ca_file, args.peer_cert_file, args.peer_key_file
        )
    return NodeConfig(
        name=args.name,
        data_dir=data_dir,
        peer_listen=peer_listen,
        initial_cluster=cluster,
        initial_cluster_state=ClusterState(args.initial_cluster_state),
        peer_server_ssl=server_ssl,
        peer_client_ssl=client_ssl,
        tick_interval=args.heartbeat_interval / 1000,
        election_ticks=max(2, args.election_timeout // args.heartbeat_interval),
        snapshot_count=args.snapshot_count,
        catch_up_entries=args.experimental_snapshot_catchup_entries,
        cluster_token=args.initial_cluster_token,
    )


def client_ssl_context(args: argparse.Namespace) -> ssl.SSLContext | None:
    if not args.cert_file:
        return None
    if not (args.key_file and args.trusted_ca_file):
        raise SystemExit("kubelab-store: client TLS needs --key-file and --trusted-ca-file")
    return pki.server_ssl_context(
        args.trusted_ca_file,
        args.cert_file,
        args.key_file,
        require_client_cert=args.client_cert_auth,
    )


async def serve(args: argparse.Namespace) -> None:
    sm = kv.KVStateMachine()
    node = RaftNode(build_config(args), sm)
    await node.start()
    runner = web.AppRunner(StoreServer(node, sm).app(), access_log=None)
    await runner.setup()
    ssl_ctx = client_ssl_context(args)
    for url in args.listen_client_urls.split(","):
        host, port = _host_port(url, "--listen-client-urls")
        await web.TCPSite(runner, host, port, ssl_context=ssl_ctx).start()
        log.info("store[%s]: serving clients on %s", args.name, url)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("store[%s]: shutting down", args.name)
    await runner.cleanup()
    await node.stop()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    logging.basicConfig(
        level=args.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        asyncio.run(serve(args))
    except StoreStorageError as exc:
        log.critical("%s", exc)
        raise SystemExit(1) from None


if __name__ == "__main__":
    main()
