"""The peer transport: Raft messages between store members over TCP with mutual TLS.

Wire format. A connection carries a stream of frames, each a 4-byte big-endian unsigned
length followed by that many bytes of `encode_message` output. Nothing else is ever sent:
no handshake of our own (TLS already tells each side who the other is), no acknowledgements
(Raft has its own). A receiver refuses a length above `max_frame_size` before allocating
anything, and closes a connection whose payload does not decode: a peer that breaks framing
once cannot be trusted to be at a frame boundary afterwards.

One connection per direction. Each member dials every peer it sends to and only ever writes
to that connection; it only ever reads from connections that peers dialled to it. So every
connection has exactly one owner and one job: there is no race to resolve when two members
dial each other at the same moment, no request/response correlation, and a member that is
slow to read never holds up what it writes. Between two members that means two TCP
connections, which is nothing at the scale of a store cluster (etcd's peer transport,
too, keeps a separate stream for each direction).

Why drop instead of block. `send` is called from the Raft loop, which must keep ticking,
voting and heartbeating whatever one peer's network does. So `send` never waits: a message
goes onto a bounded per-peer queue, and when that is full, or the peer is known to be down,
the message is dropped and `on_unreachable` reports the peer. Raft is built for lossy
networks: the leader retransmits what a follower did not acknowledge, and the unreachable
report makes it fall back from optimistic pipelining to probing that follower. Blocking, or
queueing without bound for a dead peer, would instead stall the whole member or grow memory
until it dies, and deliver a backlog of stale messages when the peer returns.

Writers. Each peer has one writer task. It connects lazily (on the first message queued),
writes everything queued as one batch of frames and drains once per batch, so a burst costs
one flush and not one per message. On a failed connect, everything queued is dropped and
reported, and the writer backs off (exponentially, capped); while it backs off, `send`
drops that peer's messages at once. A connection that breaks is reported the same way. The
backoff resets only after a connection has stayed up for `backoff_max`, so a peer that
accepts and immediately hangs up (say, because it rejects our certificate) is retried slowly.
A dialled connection is also watched for end-of-file, which is how a TLS 1.3 client learns
that the server refused its certificate after the handshake seemed to succeed.

Readers. The listener accepts plain TCP and performs the TLS handshake itself
(`StreamWriter.start_tls`) so that a refused handshake (no client certificate, or one not
signed by the cluster CA) is logged with the peer's address; asyncio's own TLS listener
would only report it in debug mode. Each accepted connection is read by its own task, which
hands every decoded message addressed to this member to `on_message`.

`on_unreachable` is invoked from a writer task or from an event-loop callback, never from
inside `send`, so the Raft runtime is not re-entered while it is still handing over a Ready.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import struct
from collections import deque
from collections.abc import Callable, Iterable

from controlplane.store.codec import CodecError, decode_message, encode_message
from controlplane.store.raft.types import LOCAL_MESSAGES, Message

logger = logging.getLogger(__name__)

_HEADER = struct.Struct(">I")

DEFAULT_MAX_FRAME_SIZE = 64 * 1024 * 1024
"""Largest frame payload accepted or sent, in bytes (a snapshot travels as one frame)."""

DEFAULT_QUEUE_SIZE = 4096
"""Messages that may wait for one peer before further ones are dropped."""

_BATCH_BYTES = 1024 * 1024
"""A writer stops adding frames to a batch once it holds this many bytes."""

_READ_BUFFER = 1024 * 1024
"""Stream buffer size for incoming connections: fewer pause/resume cycles on big frames."""

_CLOSE_TIMEOUT = 1.0
"""Seconds to wait for a graceful (TLS close_notify) shutdown before aborting."""


def _describe(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


def _format_address(address: object) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        return f"{address[0]}:{address[1]}"
    return str(address)


async def _close_stream(writer: asyncio.StreamWriter) -> None:
    """Close a connection, gracefully if the peer cooperates quickly, else by aborting it."""
    writer.close()
    try:
        await asyncio.wait_for(writer.wait_closed(), _CLOSE_TIMEOUT)
    except (OSError, TimeoutError):
        writer.transport.abort()
    except asyncio.CancelledError:
        writer.transport.abort()
        raise


class _Peer:
    """Where a peer listens, and the state of the writer that feeds it."""

    __slots__ = ("backing_off", "failures", "host", "id", "outbox", "port", "task", "wakeup")

    def __init__(self, peer_id: int, host: str, port: int) -> None:
        self.id = peer_id
        self.host = host
        self.port = port
        self.outbox: deque[Message] = deque()
        self.wakeup = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.backing_off = False
        self.failures = 0  # consecutive connections that failed or did not last

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


class PeerTransport:
    """Sends Raft messages to peers and receives theirs; see the module docstring.

    Member ids appear in hexadecimal in logs, as elsewhere in the store. All methods must
    be called from the event loop the transport was started in. The counters
    (`frames_sent`, `frames_received`, `bytes_sent`, `bytes_received`, `send_drops`,
    `connection_errors`) are plain integers; read them at will.
    """

    def __init__(
        self,
        node_id: int,
        listen: tuple[str, int],
        server_ssl: ssl.SSLContext | None,
        client_ssl: ssl.SSLContext | None,
        on_message: Callable[[Message], None],
        on_unreachable: Callable[[int], None],
        *,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        max_frame_size: int = DEFAULT_MAX_FRAME_SIZE,
        connect_timeout: float = 5.0,
        handshake_timeout: float = 10.0,
        backoff_initial: float = 0.1,
        backoff_max: float = 3.0,
    ) -> None:
        """Create a stopped transport for member `node_id`, to listen on `listen`.

        `server_ssl` and `client_ssl` (see `kubelab.pki`) are both given, for mutual TLS, or
        both None for unauthenticated plain TCP, which only tests should use. Port 0 in
        `listen` picks a free port, readable from `port` once started.
        """
        if (server_ssl is None) != (client_ssl is None):
            raise ValueError("server_ssl and client_ssl must both be set (mutual TLS) or both None")
        if node_id <= 0:
            raise ValueError(f"node id must be positive, got {node_id}")
        if queue_size <= 0 or max_frame_size <= 0:
            raise ValueError("queue_size and max_frame_size must be positive")
        if not 0 < backoff_initial <= backoff_max:
            raise ValueError("need 0 < backoff_initial <= backoff_max")
        self.node_id = node_id
        self._listen = listen
        self._server_ssl = server_ssl
        self._client_ssl = client_ssl
        self._on_message = on_message
        self._on_unreachable = on_unreachable
        self._queue_size = queue_size
        self._max_frame_size = max_frame_size
        self._connect_timeout = connect_timeout
        self._handshake_timeout = handshake_timeout
        self._backoff_initial = backoff_initial
        self._backoff_max = backoff_max
        self._log = f"transport[{node_id:x}]"

        self._peers: dict[int, _Peer] = {}
        self._server: asyncio.Server | None = None
        self._port: int | None = None
        self._writers: set[asyncio.Task[None]] = set()
        self._readers: set[asyncio.Task[None]] = set()

        self.frames_sent = 0
        self.frames_received = 0
        self.bytes_sent = 0
        self.bytes_received = 0
        self.send_drops = 0
        self.connection_errors = 0

    # Lifecycle ---------------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self._server is not None

    @property
    def port(self) -> int:
        """The port the listener is bound to (the real one when `listen` asked for 0)."""
        if self._port is None:
            raise RuntimeError(f"{self._log}: not started")
        return self._port

    async def start(self) -> None:
        """Listen for peers and start a writer for every peer added so far."""
        if self._server is not None:
            raise RuntimeError(f"{self._log}: already started")
        host, port = self._listen
        self._server = await asyncio.start_server(self._accept, host, port, limit=_READ_BUFFER)
        self._port = self._server.sockets[0].getsockname()[1]
        for peer in self._peers.values():
            self._spawn_writer(peer)
        if self._server_ssl is None:
            logger.warning(
                "%s: listening on %s:%d over plain TCP: peers are NOT authenticated",
                self._log,
                host,
                self._port,
            )
        else:
            logger.info("%s: listening on %s:%d (mutual TLS)", self._log, host, self._port)

    async def stop(self) -> None:
        """Close the listener and every connection, and wait for all tasks to finish.

        Queued messages are discarded. The transport may be started again afterwards.
        """
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        tasks = [*self._writers, *self._readers]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await server.wait_closed()
        for peer in self._peers.values():
            peer.task = None
            peer.outbox.clear()
            peer.backing_off = False
        logger.info("%s: stopped", self._log)

    # Membership --------------------------------------------------------------------------

    @property
    def peers(self) -> dict[int, tuple[str, int]]:
        """A copy of the peer table: id -> (host, port)."""
        return {p.id: (p.host, p.port) for p in self._peers.values()}

    def add_peer(self, peer_id: int, host: str, port: int) -> None:
        """Make `peer_id` reachable at host:port. Raises ValueError if it is already known."""
        if peer_id == self.node_id or peer_id <= 0:
            raise ValueError(f"{self._log}: invalid peer id {peer_id:x}")
        if peer_id in self._peers:
            raise ValueError(f"{self._log}: peer {peer_id:x} already added; use update_peer")
        peer = _Peer(peer_id, host, port)
        self._peers[peer_id] = peer
        if self.running:
            self._spawn_writer(peer)

    def update_peer(self, peer_id: int, host: str, port: int) -> None:
        """Move a known peer to a new address; the next message dials the new address.

        A batch being written to the old address when this is called may be lost.
        """
        peer = self._peers[peer_id]
        if (peer.host, peer.port) == (host, port):
            return
        peer.host, peer.port = host, port
        if peer.task is not None:
            peer.task.cancel()
            self._spawn_writer(peer)

    def remove_peer(self, peer_id: int) -> None:
        """Forget a peer, closing its connection and dropping what is queued for it.

        Removing an unknown peer does nothing (a configuration change may be re-applied).
        """
        peer = self._peers.pop(peer_id, None)
        if peer is None:
            return
        self.send_drops += len(peer.outbox)
        peer.outbox.clear()
        if peer.task is not None:
            peer.task.cancel()
            peer.task = None

    # Sending -----------------------------------------------------------------------------

    def send(self, messages: Iterable[Message]) -> None:
        """Queue messages for their peers (`Message.to`) without ever blocking.

        A message to an unknown peer is dropped with a warning. A message to a peer whose
        queue is full, or whose writer is backing off after a failure, is dropped and the
        peer is reported to `on_unreachable` (once per call, from a loop callback).
        """
        if self._server is None:
            raise RuntimeError(f"{self._log}: send() before start()")
        unreachable: set[int] = set()
        for message in messages:
            peer = self._peers.get(message.to)
            if peer is None:
                self.send_drops += 1
                logger.warning(
                    "%s: dropping %s for unknown peer %x",
                    self._log,
                    message.type.name,
                    message.to,
                )
            elif peer.backing_off or len(peer.outbox) >= self._queue_size:
                self.send_drops += 1
                unreachable.add(peer.id)
            else:
                peer.outbox.append(message)
                peer.wakeup.set()
        loop = asyncio.get_running_loop()
        for peer_id in sorted(unreachable):
            loop.call_soon(self._report_unreachable, peer_id)

    def _report_unreachable(self, peer_id: int) -> None:
        if not self.running:
            return
        try:
            self._on_unreachable(peer_id)
        except Exception:
            logger.exception("%s: on_unreachable(%x) failed", self._log, peer_id)

    def _spawn_writer(self, peer: _Peer) -> None:
        peer.wakeup = asyncio.Event()  # a fresh one: a restart may run in another loop
        task = asyncio.create_task(self._run_writer(peer), name=f"{self._log}-writer-{peer.id:x}")
        peer.task = task
        self._writers.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        self._writers.discard(task)
        self._readers.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            logger.error("%s: task %s crashed", self._log, task.get_name(), exc_info=exc)

    def _connection_failed(self, peer: _Peer, what: str, reason: str, retry_in: float) -> None:
        """Count and log a failure, drop what is queued for the peer, and report it.

        Only the first failure of a streak is a warning: a member that is down for an hour
        must not flood the log. The streak ends when a connection lasts (see `_run_writer`).
        """
        self.connection_errors += 1
        peer.failures += 1
        first = peer.failures == 1
        logger.log(
            logging.WARNING if first else logging.DEBUG,
            "%s: %s peer %x at %s: %s (retrying in %.2fs%s)",
            self._log,
            what,
            peer.id,
            peer.address,
            reason,
            retry_in,
            "; until it works, further failures are logged at debug level" if first else "",
        )
        self.send_drops += len(peer.outbox)
        peer.outbox.clear()
        self._report_unreachable(peer.id)

    async def _run_writer(self, peer: _Peer) -> None:
        backoff = self._backoff_initial
        loop = asyncio.get_running_loop()
        while True:
            while not peer.outbox:
                peer.wakeup.clear()
                await peer.wakeup.wait()
            try:
                reader, writer = await asyncio.wait_for(
                    asyncio.open_connection(peer.host, peer.port, ssl=self._client_ssl),
                    self._connect_timeout,
                )
            except (OSError, TimeoutError) as exc:  # ssl.SSLError is an OSError
                self._connection_failed(peer, "cannot connect to", _describe(exc), backoff)
            else:
                logger.info("%s: connected to peer %x at %s", self._log, peer.id, peer.address)
                connected_at = loop.time()
                reason = await self._pump(peer, reader, writer)
                if loop.time() - connected_at >= self._backoff_max:
                    # It worked for a while: a new incident, not more of the same one.
                    backoff = self._backoff_initial
                    peer.failures = 0
                self._connection_failed(peer, "lost connection to", reason, backoff)
            peer.backing_off = True
            try:
                await asyncio.sleep(backoff)
            finally:
                peer.backing_off = False
            backoff = min(backoff * 2, self._backoff_max)

    async def _pump(
        self, peer: _Peer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> str:
        """Write the peer's queue to the connection until it fails; return why it failed."""
        # The peer never writes to this connection, so a completed read means it is gone.
        hangup = asyncio.create_task(reader.read(1))
        hangup.add_done_callback(lambda _: peer.wakeup.set())
        # Not awaited after cancel(), so that a stop() arriving meanwhile cannot be absorbed;
        # _close_stream below yields to the loop, which lets the cancellation complete.
        try:
            while True:
                while not peer.outbox and not hangup.done():
                    peer.wakeup.clear()
                    await peer.wakeup.wait()
                if hangup.done():
                    exc = hangup.exception()
                    if exc is not None:
                        return _describe(exc)
                    if hangup.result():
                        return "peer sent data on a send-only connection"
                    return "peer closed the connection"
                chunks, frames = self._take_batch(peer)
                if not chunks:
                    continue
                writer.writelines(chunks)
                await writer.drain()
                self.frames_sent += frames
                self.bytes_sent += sum(len(c) for c in chunks)
        except OSError as exc:
            return _describe(exc)
        finally:
            if hangup.done() and not hangup.cancelled():
                hangup.exception()  # mark it retrieved: the reason has been reported, or superseded
            hangup.cancel()
            await _close_stream(writer)

    def _take_batch(self, peer: _Peer) -> tuple[list[bytes], int]:
        """Encode queued messages into frames, up to about `_BATCH_BYTES`."""
        chunks: list[bytes] = []
        size = 0
        while peer.outbox and size < _BATCH_BYTES:
            message = peer.outbox.popleft()
            payload = encode_message(message)
            if len(payload) > self._max_frame_size:
                # The receiver would refuse it and hang up: never send it at all.
                self.send_drops += 1
                logger.warning(
                    "%s: dropping %s to peer %x: %d bytes exceed the %d-byte frame limit",
                    self._log,
                    message.type.name,
                    peer.id,
                    len(payload),
                    self._max_frame_size,
                )
                self._report_unreachable(peer.id)
                continue
            chunks.append(_HEADER.pack(len(payload)))
            chunks.append(payload)
            size += _HEADER.size + len(payload)
        return chunks, len(chunks) // 2

    # Receiving ---------------------------------------------------------------------------

    def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """Start a reader task for a new incoming connection.

        A plain callback rather than a coroutine, so that the task is ours: asyncio 3.11
        logs a spurious error when a connection task it created itself is cancelled.
        """
        if not self.running:
            writer.transport.abort()
            return
        remote = _format_address(writer.get_extra_info("peername"))
        task = asyncio.create_task(
            self._serve(reader, writer, remote), name=f"{self._log}-{remote}"
        )
        self._readers.add(task)
        task.add_done_callback(self._task_done)

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, remote: str
    ) -> None:
        """Handle one incoming connection: TLS handshake, then frames until it ends."""
        remote = _format_address(writer.get_extra_info("peername"))
        try:
            if self._server_ssl is not None:
                try:
                    await writer.start_tls(
                        self._server_ssl, ssl_handshake_timeout=self._handshake_timeout
                    )
                except (OSError, TimeoutError) as exc:
                    self.connection_errors += 1
                    logger.warning(
                        "%s: refused connection from %s: TLS handshake failed: %s",
                        self._log,
                        remote,
                        _describe(exc),
                    )
                    return
            logger.debug("%s: accepted connection from %s", self._log, remote)
            await self._read_frames(reader, remote)
        except OSError as exc:
            self.connection_errors += 1
            logger.warning("%s: connection from %s failed: %s", self._log, remote, _describe(exc))
        finally:
            await _close_stream(writer)

    async def _read_frames(self, reader: asyncio.StreamReader, remote: str) -> None:
        """Deliver frames until the connection ends or the peer breaks the protocol."""
        while True:
            try:
                header = await reader.readexactly(_HEADER.size)
            except asyncio.IncompleteReadError as exc:
                if exc.partial:
                    self._protocol_error(remote, "connection ended inside a frame header")
                else:
                    logger.debug("%s: connection from %s closed", self._log, remote)
                return
            (length,) = _HEADER.unpack(header)
            if length > self._max_frame_size:
                self._protocol_error(
                    remote, f"frame of {length} bytes exceeds the {self._max_frame_size}-byte limit"
                )
                return
            try:
                payload = await reader.readexactly(length)
            except asyncio.IncompleteReadError:
                self._protocol_error(remote, "connection ended inside a frame")
                return
            try:
                message = decode_message(payload)
            except CodecError as exc:
                self._protocol_error(remote, str(exc))
                return
            self.frames_received += 1
            self.bytes_received += _HEADER.size + length
            if message.to != self.node_id or message.type in LOCAL_MESSAGES:
                logger.warning(
                    "%s: ignoring %s for node %x from %s",
                    self._log,
                    message.type.name,
                    message.to,
                    remote,
                )
                continue
            try:
                self._on_message(message)
            except Exception:
                logger.exception("%s: on_message failed for %s", self._log, message.type.name)

    def _protocol_error(self, remote: str, what: str) -> None:
        self.connection_errors += 1
        logger.warning("%s: closing connection from %s: %s", self._log, remote, what)
