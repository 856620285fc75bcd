"""SPDY/3.1 framing, as Kubernetes' streaming protocols use it (moby/spdystream on the Go
side): kubectl before 1.31, and any client with ``KUBECTL_PORT_FORWARD_WEBSOCKETS=false``
or ``KUBECTL_REMOTE_COMMAND_WEBSOCKETS=false``, upgrades the HTTP connection to
``SPDY/3.1``; kubectl 1.31+ port-forward sends the same SPDY bytes inside WebSocket
binary messages (subprotocol ``SPDY/3.1+portforward.k8s.io``).

No well-kept Python library speaks it (PyPI has ``spdy-py`` 0.2.0 from 2021 and
``python-spdylay``, bindings from 2012), so this is a small pure codec: bytes in,
frames out, and frames in, bytes out. It does no I/O and keeps no stream state; the
kubelet's streaming server (``agents.kubelet.spdystreams``) owns both.

The wire format (the SPDY/3 draft, sections 2.2 to 2.6):

* every frame has an 8-byte header. A control frame starts with bit 1, the version
  (15 bits, 3) and its type (16 bits); a data frame starts with bit 0 and its stream id
  (31 bits). Then 8 bits of flags (FIN 0x01, and UNIDIRECTIONAL 0x02 on SYN_STREAM) and
  a 24-bit payload length;
* SYN_STREAM, SYN_REPLY and HEADERS carry a header block: a 32-bit pair count, then
  each name and value with a 32-bit length (several values of one name joined by NUL).
  Each direction of a connection compresses its header blocks with ONE zlib stream
  that starts from SPDY's fixed dictionary and is flushed (Z_SYNC_FLUSH) after every
  block, so blocks must be encoded and decoded in the order they travel;
* flow control (WINDOW_UPDATE, SETTINGS' initial window) is parsed but not enforced:
  spdystream does not enforce it either.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import Final

VERSION: Final = 3

SYN_STREAM: Final = 1
SYN_REPLY: Final = 2
RST_STREAM: Final = 3
SETTINGS: Final = 4
PING: Final = 6
GOAWAY: Final = 7
HEADERS: Final = 8
WINDOW_UPDATE: Final = 9

FLAG_FIN: Final = 0x01
FLAG_UNIDIRECTIONAL: Final = 0x02

# RST_STREAM status codes used here.
PROTOCOL_ERROR: Final = 1
INVALID_STREAM: Final = 2
REFUSED_STREAM: Final = 3
CANCEL: Final = 5
INTERNAL_ERROR: Final = 6

MAX_LENGTH: Final = (1 << 24) - 1
_STREAM_MASK: Final = 0x7FFFFFFF


def _dictionary() -> bytes:
    """SPDY/3's header compression dictionary (draft 3, section 2.6.10.1): common header
    names and values, each with a 32-bit length, then a run of status codes, reasons,
    dates and media types without lengths. 1423 bytes. ("200|OK" is the one word with a
    space.)"""
    names = (
        "options head post put delete trace accept accept-charset accept-encoding "
        "accept-language accept-ranges age allow authorization cache-control connection "
        "content-base content-encoding content-language content-length content-location "
        "content-md5 content-range content-type date etag expect expires from host "
        "if-match if-modified-since if-none-match if-range if-unmodified-since "
        "last-modified location max-forwards pragma proxy-authenticate proxy-authorization "
        "range referer retry-after server te trailer transfer-encoding upgrade user-agent "
        "vary via warning www-authenticate method get status 200|OK version HTTP/1.1 url "
        "public set-cookie keep-alive origin"
    )
    words = [w.replace("|", " ").encode() for w in names.split()]
    out = b"".join(struct.pack("!I", len(w)) + w for w in words)
    tail = (
        "100101201202205206300302303304305306307402405406407408409410411412413414415416"
        "417502504505203 Non-Authoritative Information204 No Content301 Moved Permanently"
        "400 Bad Request401 Unauthorized403 Forbidden404 Not Found500 Internal Server "
        "Error501 Not Implemented503 Service UnavailableJan Feb Mar Apr May Jun Jul Aug "
        "Sept Oct Nov Dec 00:00:00 Mon, Tue, Wed, Thu, Fri, Sat, Sun, GMTchunked,"
        "text/html,image/png,image/jpg,image/gif,application/xml,application/xhtml+xml,"
        "text/plain,text/javascript,publicprivatemax-age=gzip,deflate,sdchcharset=utf-8"
        "charset=iso-8859-1,utf-,*,enq=0."
    )
    return out + tail.encode()


DICTIONARY: Final = _dictionary()

Headers = dict[str, list[str]]


class ProtocolError(Exception):
    """The peer sent something that is not SPDY/3: the connection cannot go on."""


@dataclass(frozen=True)
class SynStream:
    stream_id: int
    headers: Headers
    associated_to: int = 0
    priority: int = 0
    fin: bool = False
    unidirectional: bool = False


@dataclass(frozen=True)
class SynReply:
    stream_id: int
    headers: Headers = field(default_factory=dict)
    fin: bool = False


@dataclass(frozen=True)
class RstStream:
    stream_id: int
    status: int


@dataclass(frozen=True)
class Settings:
    entries: tuple[tuple[int, int, int], ...]  # (flags, id, value)


@dataclass(frozen=True)
class Ping:
    ping_id: int


@dataclass(frozen=True)
class GoAway:
    last_good_stream_id: int
    status: int = 0


@dataclass(frozen=True)
class HeadersFrame:
    stream_id: int
    headers: Headers
    fin: bool = False


@dataclass(frozen=True)
class WindowUpdate:
    stream_id: int
    delta: int


@dataclass(frozen=True)
class Data:
    stream_id: int
    data: bytes
    fin: bool = False


Frame = (
    SynStream | SynReply | RstStream | Settings | Ping | GoAway | HeadersFrame | WindowUpdate | Data
)


class Codec:
    """One end of a SPDY/3.1 connection's framing: `feed` what arrives and get whole
    frames; `encode` what to send. Not thread-safe: header blocks share one zlib stream
    per direction, so the caller serializes `encode` (and, separately, `feed`)."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._inflate = zlib.decompressobj(zdict=DICTIONARY)
        self._deflate = zlib.compressobj(zlib.Z_DEFAULT_COMPRESSION, zdict=DICTIONARY)

    # -- reading ----------------------------------------------------------------------------

    def feed(self, data: bytes) -> list[Frame]:
        """The frames that `data` completes (a partial frame waits for more bytes)."""
        self._buffer += data
        frames: list[Frame] = []
        while len(self._buffer) >= 8:
            length = int.from_bytes(self._buffer[5:8], "big")
            if len(self._buffer) < 8 + length:
                break
            head = bytes(self._buffer[:8])
            payload = bytes(self._buffer[8 : 8 + length])
            del self._buffer[: 8 + length]
            frame = self._decode(head, payload)
            if frame is not None:
                frames.append(frame)
        return frames

    def _decode(self, head: bytes, payload: bytes) -> Frame | None:
        first, second = struct.unpack("!HH", head[:4])
        flags = head[4]
        if not first & 0x8000:
            stream_id = ((first << 16) | second) & _STREAM_MASK
            return Data(stream_id, payload, bool(flags & FLAG_FIN))
        version, kind = first & 0x7FFF, second
        if version != VERSION:
            raise ProtocolError(f"SPDY version {version} is not spoken here (only 3)")
        fin = bool(flags & FLAG_FIN)
        try:
            if kind == SYN_STREAM:
                sid, assoc = struct.unpack("!II", payload[:8])
                return SynStream(
                    sid & _STREAM_MASK,
                    self._headers(payload[10:]),
                    assoc & _STREAM_MASK,
                    payload[8] >> 5,
                    fin,
                    bool(flags & FLAG_UNIDIRECTIONAL),
                )
            if kind == SYN_REPLY:
                (sid,) = struct.unpack("!I", payload[:4])
                return SynReply(sid & _STREAM_MASK, self._headers(payload[4:]), fin)
            if kind == HEADERS:
                (sid,) = struct.unpack("!I", payload[:4])
                return HeadersFrame(sid & _STREAM_MASK, self._headers(payload[4:]), fin)
            if kind == RST_STREAM:
                sid, status = struct.unpack("!II", payload[:8])
                return RstStream(sid & _STREAM_MASK, status)
            if kind == SETTINGS:
                (count,) = struct.unpack("!I", payload[:4])
                entries = []
                for i in range(count):
                    word, value = struct.unpack("!II", payload[4 + 8 * i : 12 + 8 * i])
                    entries.append((word >> 24, word & 0xFFFFFF, value))
                return Settings(tuple(entries))
            if kind == PING:
                return Ping(struct.unpack("!I", payload[:4])[0])
            if kind == GOAWAY:
                sid, status = struct.unpack("!II", payload[:8])
                return GoAway(sid & _STREAM_MASK, status)
            if kind == WINDOW_UPDATE:
                sid, delta = struct.unpack("!II", payload[:8])
                return WindowUpdate(sid & _STREAM_MASK, delta & _STREAM_MASK)
        except (struct.error, IndexError) as exc:
            raise ProtocolError(f"a SPDY control frame of type {kind} is truncated") from exc
        return None  # unknown control frames are ignored, as the draft asks

    def _headers(self, block: bytes) -> Headers:
        try:
            raw = self._inflate.decompress(block)
        except zlib.error as exc:
            raise ProtocolError(f"a SPDY header block does not decompress: {exc}") from exc
        try:
            (count,) = struct.unpack("!I", raw[:4])
            at = 4
            headers: Headers = {}
            for _ in range(count):
                (n,) = struct.unpack("!I", raw[at : at + 4])
                name = raw[at + 4 : at + 4 + n].decode("latin-1").lower()
                at += 4 + n
                (n,) = struct.unpack("!I", raw[at : at + 4])
                value = raw[at + 4 : at + 4 + n].decode("latin-1")
                at += 4 + n
                headers.setdefault(name, []).extend(value.split("\x00"))
        except struct.error as exc:
            raise ProtocolError("a SPDY header block is truncated") from exc
        return headers

    # -- writing ----------------------------------------------------------------------------

    def encode(self, frame: Frame) -> bytes:
        """The bytes of `frame` (header blocks compressed in this call's order)."""
        if isinstance(frame, Data):
            if len(frame.data) > MAX_LENGTH:
                raise ValueError(f"a SPDY data frame holds at most {MAX_LENGTH} bytes")
            word = frame.stream_id & _STREAM_MASK
            flags = FLAG_FIN if frame.fin else 0
            return struct.pack("!II", word, flags << 24 | len(frame.data)) + frame.data
        fin = FLAG_FIN if getattr(frame, "fin", False) else 0
        if isinstance(frame, SynStream):
            flags = fin | (FLAG_UNIDIRECTIONAL if frame.unidirectional else 0)
            payload = struct.pack(
                "!IIBB", frame.stream_id, frame.associated_to, (frame.priority & 7) << 5, 0
            ) + self._block(frame.headers)
            return self._control(SYN_STREAM, flags, payload)
        if isinstance(frame, SynReply):
            payload = struct.pack("!I", frame.stream_id) + self._block(frame.headers)
            return self._control(SYN_REPLY, fin, payload)
        if isinstance(frame, HeadersFrame):
            payload = struct.pack("!I", frame.stream_id) + self._block(frame.headers)
            return self._control(HEADERS, fin, payload)
        if isinstance(frame, RstStream):
            return self._control(RST_STREAM, 0, struct.pack("!II", frame.stream_id, frame.status))
        if isinstance(frame, Settings):
            body = b"".join(
                struct.pack("!II", flags << 24 | sid, value) for flags, sid, value in frame.entries
            )
            return self._control(SETTINGS, 0, struct.pack("!I", len(frame.entries)) + body)
        if isinstance(frame, Ping):
            return self._control(PING, 0, struct.pack("!I", frame.ping_id))
        if isinstance(frame, GoAway):
            payload = struct.pack("!II", frame.last_good_stream_id, frame.status)
            return self._control(GOAWAY, 0, payload)
        payload = struct.pack("!II", frame.stream_id, frame.delta)
        return self._control(WINDOW_UPDATE, 0, payload)

    @staticmethod
    def _control(kind: int, flags: int, payload: bytes) -> bytes:
        return struct.pack("!HHI", 0x8000 | VERSION, kind, flags << 24 | len(payload)) + payload

    def _block(self, headers: Headers) -> bytes:
        raw = [struct.pack("!I", len(headers))]
        for name, values in headers.items():
            key, value = name.lower().encode("latin-1"), "\x00".join(values).encode("latin-1")
            raw += [struct.pack("!I", len(key)), key, struct.pack("!I", len(value)), value]
        return self._deflate.compress(b"".join(raw)) + self._deflate.flush(zlib.Z_SYNC_FLUSH)
