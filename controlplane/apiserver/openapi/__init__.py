"""OpenAPI documents for the built-in resources: `/openapi/v2` and `/openapi/v3` (and,
in v3, for the custom resources of the CRDs an apiserver serves: `OpenAPIService`).

The modules: `models` (the client's models and Kubernetes' definition names), `schemas`
(definitions built from them), `paths` (a resource's operations), `v2` (the Swagger 2.0
document), `gnostic` (its protobuf encoding), `v3` (the per-group-version documents and
their index) and `documents` (encoded documents and their HTTP answers).

What kubectl 1.37 fetches, and why both versions are served
-----------------------------------------------------------
* OpenAPI v3 is what kubectl reads first. `/openapi/v3` is an index of group versions,
  each with a `serverRelativeURL` carrying `?hash=<sha512 of the document>`; the client
  caches the per-group-version documents by that URL, so the hash must change whenever
  the content does. A request whose hash is stale is redirected (301) to the current URL,
  a matching one is marked immutable. kubectl uses these documents for:
    - `kubectl explain` (the default output): it finds the GVK on a path operation for
      the resource, then the component schema carrying that GVK in
      `x-kubernetes-group-version-kind` (a list), and walks `properties`, `items`,
      `additionalProperties` and single-entry `allOf` wrappers around `$ref`s;
    - field validation: kubectl looks for a PATCH operation with the object's GVK and a
      `fieldValidation` query parameter. Found, validation is left to the server and the
      client-side schema check below is skipped;
    - client-side `kubectl apply`: a PATCH operation whose request body accepts
      `application/strategic-merge-patch+json` makes kubectl compute the patch from the
      component schemas' `x-kubernetes-patch-strategy` / `x-kubernetes-patch-merge-key`.
* OpenAPI v2 is still fetched, as protobuf only: kubectl sends
  `Accept: application/com.github.proto-openapi.spec.v2@v1.0+protobuf` and feeds the body
  straight to a protobuf decoder (gnostic's `openapi.v2.Document`); it reads the
  definitions and their `x-kubernetes-group-version-kind`, and the PATCH `consumes`.
  Checked against kubectl 1.37.1, it needs v2 for:
    - client-side validation, which runs when v3 does not show `fieldValidation` for the
      object's GVK, for every `kind: List` (so `kubectl create -f` of a list, or of what
      `kubectl get -o yaml` printed) and whenever `/openapi/v3` is unavailable;
    - `kubectl explain --output plaintext-openapiv2`;
    - client-side `kubectl apply` when v3 cannot build the patch.
  There is no fallback: a JSON body fails with "proto: cannot parse invalid wire-format
  data", a 404 or 406 is reported as is, and for create/apply/replace the command stops
  with "error validating data: ...; turn validation off with --validate=false". A single
  object passes with v2 missing, because v3 hands validation to the server. So
  `/openapi/v2` answers protobuf to a client that asks for it and JSON to everyone else
  (curl, schemathesis). The response's Content-Type must be the dotted spelling
  `...spec.v2.v1.0+protobuf`: Go cannot parse the "@" form, and client-go then fails the
  request ("mime: unexpected content after media subtype").

Where the schemas come from
---------------------------
Field names, types, required flags and descriptions are read from the official
`kubernetes` Python client's generated models (`openapi_types`, `attribute_map` and the
pydantic field descriptions), walking from each served kind. What the generator lost is
restored here: definition names (`io.k8s.api.core.v1.Pod`, which explain prints as
`<Pod>`), int-or-string and quantity fields (plain `object`/`str` in the client), the
GVK markers and the strategic-merge-patch directives of the well-known lists. A kind the
client has no model for is published as an object that keeps unknown fields.

The documents are built on first use (about a second) and then kept as encoded bytes;
nothing here touches the network.
"""

from .documents import JSON_CONTENT_TYPE
from .models import INT_OR_STRING, QUANTITY, TIME
from .v2 import PROTOBUF_V2, PROTOBUF_V2_RESPONSE, openapi_v2, openapi_v2_protobuf, serve_v2
from .v3 import OpenAPIService

__all__ = [
    "INT_OR_STRING",
    "JSON_CONTENT_TYPE",
    "PROTOBUF_V2",
    "PROTOBUF_V2_RESPONSE",
    "QUANTITY",
    "TIME",
    "OpenAPIService",
    "openapi_v2",
    "openapi_v2_protobuf",
    "serve_v2",
]
