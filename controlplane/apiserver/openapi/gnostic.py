"""gnostic's openapi.v2 messages, encoded by hand for the fields the v2 document uses
(kubectl reads `/openapi/v2` only as this protobuf). An unknown key is an error rather
than silently dropped, so the JSON and protobuf forms cannot drift apart unnoticed.
Vendor extensions travel as YAML text (JSON is YAML).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..protowire import length_delimited_field as _len_field
from ..protowire import varint_field

JSONDict = dict[str, Any]


def _pb_string(number: int, value: str) -> bytes:
    return _len_field(number, value.encode())


def _pb_strings(number: int, values: list[str]) -> bytes:
    return b"".join(_pb_string(number, v) for v in values)


def _pb_bool(number: int, value: bool) -> bytes:
    return varint_field(number, int(value))


def _pb_any(number: int, value: Any) -> bytes:
    return _len_field(number, _pb_string(2, json.dumps(value)))  # Any.yaml


def _pb_named(number: int, mapping: JSONDict, encode: Callable[[Any], bytes]) -> bytes:
    """A map as gnostic spells it: repeated Named* {name = 1, value = 2}."""
    return b"".join(
        _len_field(number, _pb_string(1, name) + _len_field(2, encode(value)))
        for name, value in mapping.items()
    )


_Encoder = Callable[[int, Any], bytes]


def _pb_message(node: JSONDict, fields: dict[str, tuple[int, _Encoder]], extensions: int) -> bytes:
    out = bytearray()
    for key, value in node.items():
        if key.startswith("x-"):
            out += _len_field(extensions, _pb_string(1, key) + _pb_any(2, value))
        elif key in fields:
            number, encode = fields[key]
            out += encode(number, value)
        else:
            raise ValueError(f"no protobuf field for {key!r} in {sorted(node)}")
    return bytes(out)


def _sub(encode: Callable[[Any], bytes]) -> _Encoder:
    return lambda number, value: _len_field(number, encode(value))


def _pb_schema(schema: JSONDict) -> bytes:
    return _pb_message(schema, _SCHEMA_FIELDS, 31)


_SCHEMA_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "$ref": (1, _pb_string),
    "format": (2, _pb_string),
    "description": (4, _pb_string),
    "required": (19, _pb_strings),
    "additionalProperties": (21, _sub(lambda s: _len_field(1, _pb_schema(s)))),  # oneof
    "type": (22, _sub(lambda t: _pb_string(1, t))),  # TypeItem
    "items": (23, _sub(lambda s: _len_field(1, _pb_schema(s)))),  # ItemsItem
    "properties": (25, _sub(lambda props: _pb_named(1, props, _pb_schema))),
}

# QueryParameterSubSchema and PathParameterSubSchema number the same fields differently.
_QUERY_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "required": (1, _pb_bool),
    "in": (2, _pb_string),
    "description": (3, _pb_string),
    "name": (4, _pb_string),
    "type": (6, _pb_string),
    "uniqueItems": (20, _pb_bool),
    "enum": (21, lambda n, values: b"".join(_pb_any(n, v) for v in values)),
}
_PATH_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "required": (1, _pb_bool),
    "in": (2, _pb_string),
    "description": (3, _pb_string),
    "name": (4, _pb_string),
    "type": (5, _pb_string),
    "uniqueItems": (19, _pb_bool),
}
_BODY_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "name": (2, _pb_string),
    "in": (3, _pb_string),
    "required": (4, _pb_bool),
    "schema": (5, _sub(_pb_schema)),
}


def _pb_parameters_item(param: JSONDict) -> bytes:
    """ParametersItem{parameter = 1: Parameter{body = 1 | non_body = 2: {query = 3 |
    path = 4}}}."""
    if param["in"] == "body":
        parameter = _len_field(1, _pb_message(param, _BODY_FIELDS, 6))
    elif param["in"] == "query":
        parameter = _len_field(2, _len_field(3, _pb_message(param, _QUERY_FIELDS, 23)))
    else:
        parameter = _len_field(2, _len_field(4, _pb_message(param, _PATH_FIELDS, 22)))
    return _len_field(1, parameter)


def _pb_response(response: JSONDict) -> bytes:
    """ResponseValue{response = 1: Response{description = 1, schema = 2: SchemaItem}}."""
    out = _pb_string(1, response["description"])
    if "schema" in response:
        out += _len_field(2, _len_field(1, _pb_schema(response["schema"])))
    return _len_field(1, out)


def _pb_parameters(number: int, params: list[JSONDict]) -> bytes:
    return b"".join(_len_field(number, _pb_parameters_item(p)) for p in params)


_OPERATION_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "tags": (1, _pb_strings),
    "description": (3, _pb_string),
    "operationId": (5, _pb_string),
    "produces": (6, _pb_strings),
    "consumes": (7, _pb_strings),
    "parameters": (8, _pb_parameters),
    "responses": (9, _sub(lambda codes: _pb_named(1, codes, _pb_response))),
    "schemes": (10, _pb_strings),
}
_METHODS = {"get": 2, "put": 3, "post": 4, "delete": 5, "patch": 8}


def _pb_path_item(item: JSONDict) -> bytes:
    out = bytearray()
    for key, value in item.items():
        if key == "parameters":
            out += _pb_parameters(9, value)
        else:
            out += _len_field(_METHODS[key], _pb_message(value, _OPERATION_FIELDS, 13))
    return bytes(out)


def _pb_security_scheme(scheme: JSONDict) -> bytes:
    """SecurityDefinitionsItem{api_key_security = 2}: the only kind published here."""
    fields: dict[str, tuple[int, _Encoder]] = {
        "type": (1, _pb_string),
        "name": (2, _pb_string),
        "in": (3, _pb_string),
        "description": (4, _pb_string),
    }
    return _len_field(2, _pb_message(scheme, fields, 5))


def _pb_security(number: int, requirements: list[dict[str, list[str]]]) -> bytes:
    """repeated SecurityRequirement{NamedStringArray{name, StringArray{value}}}."""
    return b"".join(
        _len_field(number, _pb_named(1, req, lambda scopes: _pb_strings(1, scopes)))
        for req in requirements
    )


_DOCUMENT_FIELDS: dict[str, tuple[int, _Encoder]] = {
    "swagger": (1, _pb_string),
    "info": (2, _sub(lambda info: _pb_string(1, info["title"]) + _pb_string(2, info["version"]))),
    "paths": (8, _sub(lambda paths: _pb_named(2, paths, _pb_path_item))),
    "definitions": (9, _sub(lambda defs: _pb_named(1, defs, _pb_schema))),
    "security": (12, _pb_security),
    "securityDefinitions": (13, _sub(lambda d: _pb_named(1, d, _pb_security_scheme))),
}


def encode_document(document: JSONDict) -> bytes:
    return _pb_message(document, _DOCUMENT_FIELDS, 16)
