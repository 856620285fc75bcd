"""The peer transport over real loopback sockets, with real mutual TLS from kubelab.pki."""

from __future__ import annotations

import asyncio
import logging
import socket
import ssl
import struct
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from controlplane.store.codec import encode_message
from controlplane.store.raft.types import (
    ConfState,
    Entry,
    EntryType,
    Message,
    MessageType,
    Snapshot,
    SnapshotMetadata,
)
from controlplane.store.transport import PeerTransport
from kubelab import pki

HOST = "127.0.0.1"
LOGGER = "controlplane.store.transport"


@dataclass
class Certs:
    """Files of the cluster CA, member certificates and a rogue CA's certificate."""

    ca: Path
    pairs: dict[str, tuple[Path, Path]]
    rogue_ca: Path

    def server(self, name: str) -> ssl.SSLContext:
        return pki.server_ssl_context(self.ca, *self.pairs[name])

    def client(self, name: str, ca: Path | None = None) -> ssl.SSLContext:
        return pki.client_ssl_context(ca or self.ca, *self.pairs[name])


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    directory = tmp_path_factory.mktemp("pki")
    ca = pki.new_ca("kubelab-store-ca")
    ca_file, _ = pki.write_pair(ca, directory, "ca")
    pairs = {
        f"node{i}": pki.write_pair(
            pki.issue(ca, f"node{i}", ip_addresses=[HOST], server=True, client=True),
            directory,
            f"node{i}",
        )
        for i in (1, 2, 3)
    }
    rogue_ca = pki.new_ca("kubelab-store-ca")  # same name, different key
    rogue_ca_file, _ = pki.write_pair(rogue_ca, directory, "rogue-ca")
    pairs["rogue"] = pki.write_pair(
        pki.issue(rogue_ca, "node9", ip_addresses=[HOST], server=True, client=True),
        directory,
        "rogue",
    )
    return Certs(ca_file, pairs, rogue_ca_file)


@dataclass
class Node:
    transport: PeerTransport
    received: list[Message] = field(default_factory=list)
    unreachable: list[int] = field(default_factory=list)


def make_node(
    node_id: int,
    server_ssl: ssl.SSLContext | None,
    client_ssl: ssl.SSLContext | None,
    port: int = 0,
    **kwargs: Any,
) -> Node:
    received: list[Message] = []
    unreachable: list[int] = []
    kwargs.setdefault("backoff_initial", 0.05)
    kwargs.setdefault("backoff_max", 0.2)
    transport = PeerTransport(
        node_id,
        (HOST, port),
        server_ssl,
        client_ssl,
        received.append,
        unreachable.append,
        **kwargs,
    )
    return Node(transport, received, unreachable)


def tls_node(certs: Certs, node_id: int, port: int = 0, **kwargs: Any) -> Node:
    name = f"node{node_id}"
    return make_node(node_id, certs.server(name), certs.client(name), port, **kwargs)


def connect_all(nodes: list[Node]) -> None:
    for a in nodes:
        for b in nodes:
            if a is not b:
                a.transport.add_peer(b.transport.node_id, HOST, b.transport.port)


def run(make: Callable[[], Coroutine[Any, Any, None]], timeout: float = 10.0) -> None:
    """Run a test coroutine in a fresh event loop, bounded in time."""

    async def bounded() -> None:
        async with asyncio.timeout(timeout):
            await make()

    asyncio.run(bounded())


async def eventually(check: Callable[[], bool], timeout: float = 3.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.01)


async def stop_all(*nodes: Node) -> None:
    await asyncio.gather(*(n.transport.stop() for n in nodes))


def free_port() -> int:
    with socket.socket() as s:
        s.bind((HOST, 0))
        port: int = s.getsockname()[1]
        return port


def app(frm: int, to: int, index: int, data: bytes = b"x") -> Message:
    return Message(
        MessageType.APP,
        to=to,
        frm=frm,
        term=3,
        log_term=2,
        index=index,
        entries=(
            Entry(term=3, index=index + 1, data=data),
            Entry(term=3, index=index + 2, type=EntryType.CONF_CHANGE, data=b"\x00" * 9),
        ),
        commit=index,
    )


def test_two_members_exchange_entries_and_a_large_snapshot(certs: Certs) -> None:
    snapshot = Snapshot(
        SnapshotMetadata(index=1000, term=4, conf_state=ConfState(voters=(1, 2), learners=(3,))),
        data=bytes(range(256)) * 32 * 1024,  # 8 MiB: many TLS records and reader refills
    )
    snap = Message(MessageType.SNAP, to=1, frm=2, term=4, snapshot=snapshot)
    to_b = [app(1, 2, i, data=f"entry-{i}".encode()) for i in range(200)]

    async def main() -> None:
        a, b = tls_node(certs, 1), tls_node(certs, 2)
        await a.transport.start()
        await b.transport.start()
        connect_all([a, b])
        a.transport.send(to_b)
        b.transport.send([snap, Message(MessageType.HEARTBEAT, to=1, frm=2, term=4)])
        await eventually(lambda: len(b.received) == len(to_b) and len(a.received) == 2)
        assert b.received == to_b  # content intact, and in order
        assert a.received[0] == snap
        assert a.received[1].type == MessageType.HEARTBEAT
        assert a.transport.frames_sent == b.transport.frames_received == len(to_b)
        assert a.transport.bytes_sent == b.transport.bytes_received
        assert b.transport.bytes_sent > len(snapshot.data)
        assert a.unreachable == b.unreachable == []
        assert a.transport.send_drops == b.transport.send_drops == 0
        await stop_all(a, b)

    run(main)


def test_three_members_full_mesh(certs: Certs) -> None:
    async def main() -> None:
        nodes = [tls_node(certs, i) for i in (1, 2, 3)]
        for n in nodes:
            await n.transport.start()
        connect_all(nodes)
        for n in nodes:
            me = n.transport.node_id
            n.transport.send(
                app(me, peer, index=10 * me + k)
                for peer in (1, 2, 3)
                if peer != me
                for k in range(5)
            )
        await eventually(lambda: all(len(n.received) == 10 for n in nodes))
        for n in nodes:
            me = n.transport.node_id
            for peer in (1, 2, 3):
                if peer != me:
                    from_peer = [m for m in n.received if m.frm == peer]
                    assert from_peer == [app(peer, me, index=10 * peer + k) for k in range(5)]
        await stop_all(*nodes)

    run(main)


def test_member_with_a_cert_from_another_ca_cannot_deliver(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def main() -> None:
        a = tls_node(certs, 1)
        await a.transport.start()
        # The rogue trusts the cluster CA, so it accepts a's certificate; a must refuse its.
        rogue = make_node(9, certs.server("rogue"), certs.client("rogue"))
        # This one also trusts only its own CA, so it refuses a's certificate too.
        stranger = make_node(8, certs.server("rogue"), certs.client("rogue", ca=certs.rogue_ca))
        for n in (rogue, stranger):
            await n.transport.start()
            n.transport.add_peer(1, HOST, a.transport.port)
        for _ in range(20):
            for n in (rogue, stranger):
                n.transport.send([app(n.transport.node_id, 1, 0)])
            await asyncio.sleep(0.02)
        await eventually(lambda: bool(rogue.unreachable) and bool(stranger.unreachable))
        assert a.received == []
        assert a.transport.frames_received == 0
        assert a.transport.connection_errors >= 1
        await stop_all(a, rogue, stranger)

    run(main)
    refusals = [r.getMessage() for r in caplog.records if "refused connection from" in r.message]
    assert refusals and all(
        m.startswith("transport[1]: refused connection from 127.0.0.1:") for m in refusals
    )


def test_client_without_certificate_is_refused_at_handshake(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def main() -> None:
        a = tls_node(certs, 1)
        await a.transport.start()
        anonymous = pki.client_ssl_context(certs.ca, None, None)
        refused = False
        try:
            reader, writer = await asyncio.open_connection(HOST, a.transport.port, ssl=anonymous)
            payload = encode_message(app(2, 1, 0))
            writer.write(struct.pack(">I", len(payload)) + payload)
            await writer.drain()
            refused = await reader.read(1) == b""
            writer.close()
        except (ssl.SSLError, ConnectionError):
            refused = True
        assert refused
        await eventually(lambda: a.transport.connection_errors == 1)
        assert a.received == []
        await a.transport.stop()

    run(main)
    assert any(
        r.levelno == logging.WARNING and "refused connection from 127.0.0.1" in r.getMessage()
        for r in caplog.records
    )


async def raw_connection(
    certs: Certs, port: int
) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    """A connection with a valid member certificate, driven by hand."""
    return await asyncio.open_connection(HOST, port, ssl=certs.client("node2"))


async def closed_by_peer(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(1), 2.0) == b""
    except (ssl.SSLError, ConnectionError):
        return True


def test_oversized_length_prefix_closes_only_that_connection(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def main() -> None:
        a, b = tls_node(certs, 1, max_frame_size=1024), tls_node(certs, 2)
        await a.transport.start()
        await b.transport.start()
        connect_all([a, b])
        b.transport.send([app(2, 1, 0)])
        await eventually(lambda: len(a.received) == 1)

        reader, writer = await raw_connection(certs, a.transport.port)
        writer.write(struct.pack(">I", 0xFFFFFFF0))
        await writer.drain()
        assert await closed_by_peer(reader)
        writer.close()

        b.transport.send([app(2, 1, 1)])  # the member's own connection is unaffected
        await eventually(lambda: len(a.received) == 2)
        assert b.transport.connection_errors == 0
        await stop_all(a, b)

    run(main)
    assert any("exceeds the 1024-byte limit" in r.getMessage() for r in caplog.records)


def test_sender_drops_a_message_too_large_for_a_frame(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def main() -> None:
        a = make_node(1, None, None, max_frame_size=1024)
        b = make_node(2, None, None, max_frame_size=1024)
        await a.transport.start()
        await b.transport.start()
        connect_all([a, b])
        b.transport.send([app(2, 1, 0, data=b"x" * 2048), app(2, 1, 1)])
        await eventually(lambda: len(a.received) == 1)
        assert a.received[0].index == 1  # the connection survived; only the big one was lost
        assert b.unreachable == [1]
        assert b.transport.send_drops == 1
        assert a.transport.connection_errors == 0
        await stop_all(a, b)

    run(main)
    assert any(
        "dropping APP to peer 1" in r.getMessage()
        and "exceed the 1024-byte frame limit" in r.getMessage()
        for r in caplog.records
    )


def test_undecodable_frame_closes_the_connection(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def main() -> None:
        a = tls_node(certs, 1)
        await a.transport.start()
        reader, writer = await raw_connection(certs, a.transport.port)
        misrouted = encode_message(app(2, 7, 0))  # well formed, but not for node 1
        good = encode_message(app(2, 1, 0))
        junk = b"\xc1 not msgpack"
        for payload in (misrouted, good, junk, good):
            writer.write(struct.pack(">I", len(payload)) + payload)
        await writer.drain()
        assert await closed_by_peer(reader)
        writer.close()
        assert a.received == [app(2, 1, 0)]  # the frame after the junk was never read
        await a.transport.stop()

    run(main)
    messages = [r.getMessage() for r in caplog.records]
    assert any("ignoring APP for node 7" in m for m in messages)
    assert any("closing connection from 127.0.0.1" in m and "decode" in m for m in messages)


def test_down_peer_is_reported_and_delivery_resumes_when_it_starts(certs: Certs) -> None:
    async def main() -> None:
        port = free_port()
        a = tls_node(certs, 1)
        await a.transport.start()
        a.transport.add_peer(2, HOST, port)
        a.transport.send([app(1, 2, 0)])
        await eventually(lambda: a.unreachable == [2])
        assert a.transport.send_drops == 1
        assert a.transport.connection_errors == 1

        b = tls_node(certs, 2, port=port)
        await b.transport.start()
        index = 1
        while not b.received:  # bounded by run()'s timeout
            a.transport.send([app(1, 2, index)])
            index += 1
            await asyncio.sleep(0.02)
        await eventually(lambda: b.received[-1].index == index - 1)

        # It goes away again (a restart): the break is reported, then it comes back.
        await b.transport.stop()
        reported = len(a.unreachable)
        while len(a.unreachable) == reported:
            a.transport.send([app(1, 2, index)])
            await asyncio.sleep(0.02)
        b2 = tls_node(certs, 2, port=port)
        await b2.transport.start()
        while not b2.received:
            a.transport.send([app(1, 2, index)])
            await asyncio.sleep(0.02)
        await stop_all(a, b2)

    run(main)


def test_full_queue_drops_and_reports_without_blocking() -> None:
    async def main() -> None:
        a = make_node(1, None, None, queue_size=3)
        await a.transport.start()
        a.transport.add_peer(2, HOST, free_port())
        a.transport.add_peer(3, HOST, free_port())
        a.transport.send([app(1, 2, i) for i in range(10)] + [app(1, 3, 0)])
        # Dropped at once; reported from a later loop callback, not from inside send().
        assert a.transport.send_drops == 7
        assert a.unreachable == []
        await asyncio.sleep(0)
        assert 2 in a.unreachable
        await a.transport.stop()

    run(main)


def test_unknown_peer_and_membership_changes(
    certs: Certs, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger=LOGGER)

    async def main() -> None:
        a, b = tls_node(certs, 1), tls_node(certs, 2)
        await a.transport.start()
        await b.transport.start()
        a.transport.send([app(1, 5, 0)])
        assert a.transport.send_drops == 1
        with pytest.raises(ValueError):
            a.transport.add_peer(1, HOST, 1)

        connect_all([a, b])
        with pytest.raises(ValueError, match="update_peer"):
            a.transport.add_peer(2, HOST, 1)
        a.transport.send([app(1, 2, 0)])
        await eventually(lambda: len(b.received) == 1)

        # b moves to a new port: after update_peer, a dials the new address.
        await b.transport.stop()
        b2 = tls_node(certs, 2)
        await b2.transport.start()
        a.transport.update_peer(2, HOST, b2.transport.port)
        assert a.transport.peers == {2: (HOST, b2.transport.port)}
        while not b2.received:
            a.transport.send([app(1, 2, 1)])
            await asyncio.sleep(0.02)

        a.transport.remove_peer(2)
        a.transport.remove_peer(2)  # idempotent
        assert a.transport.peers == {}
        await stop_all(a, b2)

    run(main)
    assert any("dropping APP for unknown peer 5" in r.getMessage() for r in caplog.records)


def test_plain_tcp_mode_for_tests_only() -> None:
    with pytest.raises(ValueError, match="both"):
        PeerTransport(1, (HOST, 0), None, ssl.create_default_context(), print, print)

    async def main() -> None:
        a, b = make_node(1, None, None), make_node(2, None, None)
        await a.transport.start()
        await b.transport.start()
        connect_all([a, b])
        a.transport.send([app(1, 2, 0)])
        b.transport.send([app(2, 1, 0)])
        await eventually(lambda: len(a.received) == len(b.received) == 1)
        await stop_all(a, b)

    run(main)


def test_stop_is_clean(certs: Certs, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="asyncio")

    async def main() -> None:
        nodes = [tls_node(certs, i) for i in (1, 2, 3)]
        for n in nodes:
            await n.transport.start()
        connect_all(nodes)
        for n in nodes:
            me = n.transport.node_id
            n.transport.send(app(me, p, 0) for p in (1, 2, 3) if p != me)
        await eventually(lambda: all(len(n.received) == 2 for n in nodes))
        started = time.monotonic()
        await stop_all(*nodes)
        assert time.monotonic() - started < 2.0
        assert asyncio.all_tasks() == {asyncio.current_task()}
        await nodes[0].transport.stop()  # stopping twice is harmless
        with pytest.raises(RuntimeError):
            nodes[0].transport.send([app(1, 2, 0)])

    run(main)
    assert [r for r in caplog.records if r.name == "asyncio" and r.levelno >= logging.WARNING] == []
