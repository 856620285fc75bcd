"""The protobuf wire format's primitives, shared by the apiserver's two protobuf codecs:
the decoder of kubectl's request bodies (`protobuf`) and the encoder of the OpenAPI v2
document (`openapi`, gnostic's messages).

A message is a run of fields, each a key (field number << 3 | wire type) followed by its
value: a base-128 varint, or a varint length and that many bytes. Kubernetes' API uses
only those two wire types.
"""

from __future__ import annotations

VARINT = 0
LENGTH_DELIMITED = 2
MAX_VARINT_BYTES = 10  # a 64-bit value, 7 bits a byte


class WireError(ValueError):
    """Bytes that are not a well-formed varint."""


def encode_varint(value: int) -> bytes:
    """A non-negative integer as a base-128 varint, low groups first."""
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        if not value:
            out.append(low)
            return bytes(out)
        out.append(low | 0x80)


def decode_varint(data: bytes, pos: int) -> tuple[int, int]:
    """The varint at `pos` (at most 10 bytes, kept to 64 bits) and the position after it."""
    value = shift = 0
    for index in range(pos, min(pos + MAX_VARINT_BYTES, len(data))):
        byte = data[index]
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value & 0xFFFF_FFFF_FFFF_FFFF, index + 1
        shift += 7
    raise WireError("truncated or overlong varint")


def varint_field(number: int, value: int) -> bytes:
    """A varint field: its key, then the value."""
    return encode_varint(number << 3 | VARINT) + encode_varint(value)


def length_delimited_field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (a string, bytes or a nested message): key, length, bytes."""
    return encode_varint(number << 3 | LENGTH_DELIMITED) + encode_varint(len(payload)) + payload
