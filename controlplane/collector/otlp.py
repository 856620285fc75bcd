"""OTLP/HTTP trace requests decoded (`decode`), and their spans turned into the public
shape that the query API and `labctl trace -o json` give (`public_spans`).

A request body is an `ExportTraceServiceRequest` in binary protobuf
(`application/x-protobuf`) or in OTLP's JSON (`application/json`), optionally gzip- or
deflate-compressed (`Content-Encoding`). OTLP's JSON is protobuf's JSON mapping with two
departures the specification makes: trace and span ids are hex strings, not base64, and
enums are integers (protobuf's parser takes integers already). So ids are turned into
base64 before `json_format` parses the rest. Anything malformed is a `BadRequest` naming
what is wrong; the whole request is refused, so nothing of it is stored.
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from datetime import UTC, datetime
from typing import Any

from google.protobuf import json_format
from google.protobuf.message import DecodeError
from google.rpc.status_pb2 import Status
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.trace.v1.trace_pb2 import Span

from kubelab import tracing

PROTOBUF = "application/x-protobuf"
JSON = "application/json"

Public = dict[str, Any]
"""A span in the public shape (docs/architecture.md, "Tracing")."""


class BadRequest(ValueError):
    """A request the collector refuses with 400; the message says what is wrong."""


def decode(body: bytes, content_type: str, content_encoding: str = "") -> ExportTraceServiceRequest:
    """The request in `body` (module docstring)."""
    body = _decompress(body, content_encoding.strip().lower())
    media_type = content_type.split(";")[0].strip().lower()
    if media_type == PROTOBUF:
        request = ExportTraceServiceRequest()
        try:
            request.ParseFromString(body)
        except DecodeError as e:
            raise BadRequest(f"the body is not an OTLP ExportTraceServiceRequest: {e}") from e
    elif media_type == JSON:
        request = _from_json(body)
    else:
        raise BadRequest(
            f"unsupported Content-Type {content_type!r}: send {PROTOBUF} or {JSON} (OTLP/HTTP)"
        )
    _check_ids(request)
    return request


def _decompress(body: bytes, encoding: str) -> bytes:
    try:
        if encoding == "gzip":
            return gzip.decompress(body)
        if encoding == "deflate":
            return zlib.decompress(body)
    except (OSError, EOFError, zlib.error) as e:
        raise BadRequest(f"the body is not valid {encoding} data: {e}") from e
    if encoding not in ("", "identity"):
        raise BadRequest(f"unsupported Content-Encoding {encoding!r}: use gzip, deflate or none")
    return body


def _from_json(body: bytes) -> ExportTraceServiceRequest:
    try:
        document = json.loads(body)
    except (UnicodeDecodeError, ValueError) as e:
        raise BadRequest(f"the body is not JSON: {e}") from e
    if not isinstance(document, dict):
        raise BadRequest("the body is not a JSON object (an ExportTraceServiceRequest)")
    try:
        for resource_spans in document.get("resourceSpans") or ():
            for scope_spans in resource_spans.get("scopeSpans") or ():
                for span in scope_spans.get("spans") or ():
                    _hex_ids_to_base64(span)
                    for link in span.get("links") or ():
                        _hex_ids_to_base64(link)
        request = ExportTraceServiceRequest()
        json_format.ParseDict(document, request)
        return request
    except (AttributeError, TypeError, json_format.ParseError) as e:
        raise BadRequest(f"the body is not an OTLP ExportTraceServiceRequest: {e}") from e


def _hex_ids_to_base64(value: dict[str, Any]) -> None:
    for key in ("traceId", "spanId", "parentSpanId"):
        if value.get(key):
            try:
                value[key] = base64.b64encode(bytes.fromhex(value[key])).decode()
            except (TypeError, ValueError) as e:
                raise BadRequest(f"{key} {value[key]!r} is not a hex string (OTLP/JSON)") from e


def _check_ids(request: ExportTraceServiceRequest) -> None:
    for resource_spans in request.resource_spans:
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                where = f"span {span.name!r}"
                if len(span.trace_id) != 16 or not any(span.trace_id):
                    raise BadRequest(f"{where}: trace_id must be 16 bytes, not all zero")
                if len(span.span_id) != 8 or not any(span.span_id):
                    raise BadRequest(f"{where}: span_id must be 8 bytes, not all zero")
                if span.parent_span_id and len(span.parent_span_id) != 8:
                    raise BadRequest(f"{where}: parent_span_id must be 8 bytes or empty")
                for link in span.links:
                    if len(link.trace_id) != 16 or len(link.span_id) != 8:
                        raise BadRequest(f"{where}: a link's ids must be 16 and 8 bytes")


def public_spans(request: ExportTraceServiceRequest) -> list[Public]:
    """The request's spans in the public shape, each with its Resource's component and
    node."""
    spans: list[Public] = []
    for resource_spans in request.resource_spans:
        resource = _attributes(resource_spans.resource.attributes)
        component = str(resource.get(tracing.SERVICE_NAME, ""))
        node = str(resource.get(tracing.NODE_NAME) or resource.get(tracing.HOST_NAME) or "")
        for scope_spans in resource_spans.scope_spans:
            spans.extend(_public(span, component, node) for span in scope_spans.spans)
    return spans


def _public(span: Span, component: str, node: str) -> Public:
    attributes = _attributes(span.attributes)
    has_object = any(key.startswith("k8s.object.") for key in attributes)
    return {
        "trace_id": span.trace_id.hex(),
        "span_id": span.span_id.hex(),
        "parent_span_id": span.parent_span_id.hex() or None,
        "links": [
            {"trace_id": ln.trace_id.hex(), "span_id": ln.span_id.hex()} for ln in span.links
        ],
        "name": span.name,
        "component": component,
        "node": node,
        "start": rfc3339(span.start_time_unix_nano),
        "end": rfc3339(span.end_time_unix_nano),
        "object": {
            "kind": attributes.get(tracing.OBJECT_KIND, ""),
            "namespace": attributes.get(tracing.OBJECT_NAMESPACE, ""),
            "name": attributes.get(tracing.OBJECT_NAME, ""),
            "uid": attributes.get(tracing.OBJECT_UID, ""),
        }
        if has_object
        else None,
        "attributes": attributes,
    }


def rfc3339(unix_nano: int) -> str:
    """A time as the public shape writes it: RFC 3339, UTC, with microseconds."""
    seconds, nanos = divmod(unix_nano, 10**9)
    when = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanos // 1000)
    return when.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _attributes(pairs: Any) -> dict[str, Any]:
    return {pair.key: _value(pair.value) for pair in pairs if isinstance(pair, KeyValue)}


def _value(value: AnyValue) -> Any:
    which = value.WhichOneof("value")
    if which == "array_value":
        return [_value(v) for v in value.array_value.values]
    if which == "kvlist_value":
        return _attributes(value.kvlist_value.values)
    if which == "bytes_value":
        return value.bytes_value.hex()
    return getattr(value, which) if which else None


def error_body(message: str, content_type: str) -> tuple[bytes, str]:
    """A 400's body as OTLP/HTTP specifies it: a `google.rpc.Status` (code 3,
    INVALID_ARGUMENT) in the request's encoding, JSON when that is unknown."""
    status = Status(code=3, message=message)
    if content_type.split(";")[0].strip().lower() == PROTOBUF:
        return status.SerializeToString(), PROTOBUF
    return json_format.MessageToJson(status).encode(), JSON
