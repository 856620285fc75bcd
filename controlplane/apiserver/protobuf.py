"""Kubernetes protobuf request bodies, decoded to the JSON the same object would have.

Why the apiserver needs this: kubectl 1.37 sends the objects of its typed commands as
`Content-Type: application/vnd.kubernetes.protobuf`, because it builds them with
client-go's typed clients: `kubectl create` of a serviceaccount, namespace, configmap,
secret, deployment, job, cronjob, service, role, clusterrole, (cluster)rolebinding, quota,
priorityclass, poddisruptionbudget or ingress, `kubectl create token` (a TokenRequest),
`kubectl auth can-i` (a SelfSubjectAccessReview, or with --list a SelfSubjectRulesReview),
`kubectl auth whoami` (a SelfSubjectReview), `kubectl auth reconcile`, `kubectl autoscale`
(an autoscaling/v2 HorizontalPodAutoscaler), `kubectl certificate approve|deny` (a PUT of
the CertificateSigningRequest) and `kubectl debug node/...` (a Pod). A 415 answer is shown
to the user as an error: kubectl does not retry with JSON. Other commands send JSON or
JSON patches (`kubectl run`, `expose`, `scale`, `cordon`, `drain`'s evictions, `delete`,
`apply`, `create -f`). The apiserver works on JSON dicts, and it may keep answering JSON
(client-go reads a response by its Content-Type), so only request bodies are decoded
here, into the dict a JSON client would have sent.

The wire format. A body is the 4 bytes `k8s\\x00` followed by a `runtime.Unknown`
message: field 1 `typeMeta` (1 `apiVersion`, 2 `kind`), field 2 `raw` (the object's own
message), 3 `contentEncoding` and 4 `contentType` (both empty in practice). The object
message carries no type information of its own, which is why `decode` puts the envelope's
`kind` and `apiVersion` first in the result, as the JSON encoder does.

The schemas. `_SPEC` holds one line of fields per message, in the order of the Go struct
(so the dicts come out in the key order `kubectl -o json` prints), written
`jsonName=number:type`:

* `s` string, `b` bool, `i` integer (int32 and int64 alike: varints), `y` []byte (a
  base64 string in JSON); or a message name, relative to the message's own package or
  qualified (`meta/v1.ObjectMeta`);
* `[T` a repeated field, `{T` a map with string keys, and `{[s` a map whose values are
  Go's named string slices (`ExtraValue`), which protobuf wraps in a message of one
  repeated field 1;
* `!` after a scalar: keep it in the JSON even when it is zero. That is the case for Go
  pointers (`replicas: 0` is not an absent `replicas`, which would default to 1) and for
  fields without `omitempty`; other zero scalars are dropped, as the JSON encoder drops
  them. An empty JSON name marks a Go embedded struct whose fields are inlined into the
  parent's JSON (`Volume` and its `VolumeSource`);
* four messages have a JSON form of their own and are decoded by code: `meta/v1.Time`
  (RFC 3339 in UTC, whole seconds), `resource.Quantity` (its string as sent, which from
  kubectl is the canonical form), `intstr.IntOrString` (an int or a string) and
  `meta/v1.FieldsV1` (raw JSON).

`SCHEMA` is that table parsed: message name -> {field number: `Field`}. It was derived
from the kubectl 1.37 binary itself, whose Go runtime type data keeps every API struct
with its field types and its `json` and `protobuf` struct tags: they give the field
numbers, the JSON names, pointer-ness and `omitempty`. (The wire type comes from the Go
type, not from the tag, which says `varint` for DeleteOptions' string
`propagationPolicy`.) It covers every message reachable from the kinds in `KINDS`, status
included. It was checked against kubectl: the bodies kubectl sends for the commands above
were captured and decoded, and where kubectl has `--dry-run=client -o json` the result
equals what it prints for the same arguments (tests/unit/test_protobuf.py keeps many of
them as fixtures, among them a Job copied from a CronJob that uses most of PodSpec).

Absent fields stay absent: a Go decoder would fill in zero values, and the JSON encoder
would then write `null` for lists, maps and times without `omitempty`
(ClusterRole.rules), but none of those carry information, and leaving them out lets the
apiserver's defaulting see the same object a JSON client sends.
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

from controlplane.apiserver import protowire

PROTOBUF = "application/vnd.kubernetes.protobuf"
MAGIC = b"k8s\x00"


class ProtobufError(ValueError):
    """The body is not a well-formed Kubernetes protobuf message (the apiserver: 400)."""


class UnsupportedProtobuf(ProtobufError):
    """The body may be fine, but its kind is not in the table (the apiserver: 415)."""


class Kind(StrEnum):
    """How a field's value is read from the wire and written to JSON."""

    STRING = "string"
    BOOL = "bool"
    INT = "int"
    BYTES = "bytes"
    MESSAGE = "message"
    # Messages with a JSON form of their own.
    TIME = "time"
    QUANTITY = "quantity"
    INT_OR_STRING = "intorstring"
    FIELDS_V1 = "fieldsv1"
    # A named string slice: a message whose field 1 holds the items (map values only).
    STRINGS = "strings"


class Shape(StrEnum):
    """Whether a field holds one value, a list of them or a map from strings to them."""

    ONE = "one"
    LIST = "list"
    MAP = "map"


class Field(NamedTuple):
    """One field of a message: where its value goes in the JSON and how to read it."""

    name: str  # the JSON name; "" for an embedded struct inlined into its parent
    kind: Kind
    message: str | None  # the message name, for Kind.MESSAGE
    shape: Shape
    keep_zero: bool  # a Go pointer or a field without omitempty: zero is a value


_SCALARS = {"s": Kind.STRING, "b": Kind.BOOL, "i": Kind.INT, "y": Kind.BYTES}
_SPECIALS = {
    "meta/v1.Time": Kind.TIME,
    "resource.Quantity": Kind.QUANTITY,
    "intstr.IntOrString": Kind.INT_OR_STRING,
    "meta/v1.FieldsV1": Kind.FIELDS_V1,
}
_SCALAR_KINDS = (Kind.STRING, Kind.BOOL, Kind.INT, Kind.BYTES)
_WIRE_NAMES = {1: "fixed64", 3: "start group", 4: "end group", 5: "fixed32"}
# API group -> the Go package of its types, which names the table's messages.
_PACKAGES = {
    "": "core",
    "apps": "apps",
    "autoscaling": "autoscaling",
    "batch": "batch",
    "policy": "policy",
    "authentication.k8s.io": "authentication",
    "authorization.k8s.io": "authorization",
    "certificates.k8s.io": "certificates",
    "networking.k8s.io": "networking",
    "rbac.authorization.k8s.io": "rbac",
    "scheduling.k8s.io": "scheduling",
}


def decode(data: bytes) -> dict[str, Any]:
    """Decode a whole request body: the magic, the `runtime.Unknown` envelope, the object.

    Raises `UnsupportedProtobuf` for a kind the table does not know, so that the client
    can be told to send JSON instead, and `ProtobufError` for anything malformed.
    """
    if not data.startswith(MAGIC):
        raise ProtobufError("protobuf body does not start with the Kubernetes magic k8s\\x00")
    envelope = "runtime.Unknown"
    api_version = kind = ""
    raw = b""
    for number, value in _scan(data[len(MAGIC) :], envelope):
        if number == 1:
            api_version, kind = _type_meta(_bytes(value, envelope, 1))
        elif number == 2:
            raw = _bytes(value, envelope, 2)
        elif number == 3:
            if _bytes(value, envelope, 3):
                raise UnsupportedProtobuf(
                    "protobuf bodies with a contentEncoding are not supported"
                )
        elif number == 4:
            content_type = _text(_bytes(value, envelope, 4))
            if content_type not in ("", PROTOBUF):
                raise UnsupportedProtobuf(f"unsupported envelope content type {content_type!r}")
        else:
            raise ProtobufError(f"{envelope} has no field {number}")
    message = _message_for(api_version, kind)
    return {"kind": kind, "apiVersion": api_version} | decode_message(message, raw)


def decode_message(name: str, data: bytes) -> dict[str, Any]:
    """Decode one message of the table (`"core/v1.PodSpec"`) to its JSON dict."""
    fields = SCHEMA.get(name)
    if fields is None:
        raise UnsupportedProtobuf(f"no protobuf schema for {name}")
    values: dict[int, Any] = {}
    # A singular message may arrive in several pieces, which protobuf merges; the
    # concatenated bytes of the pieces decode to that merge.
    pieces: dict[int, bytearray] = {}
    for number, value in _scan(data, name):
        field = fields.get(number)
        if field is None:
            raise ProtobufError(f"{name} has no field {number} (not in the schema table)")
        if field.shape is Shape.MAP:
            key, item = _map_entry(field, _bytes(value, name, number), name, number)
            values.setdefault(number, {})[key] = item
        elif field.shape is Shape.LIST:
            values.setdefault(number, []).extend(_repeated(field, value, name, number))
        elif field.kind in _SCALAR_KINDS:
            values[number] = _scalar(field.kind, value, name, number)
        else:
            pieces.setdefault(number, bytearray()).extend(_bytes(value, name, number))
    for number, body in pieces.items():
        values[number] = _message_value(fields[number], bytes(body))
    out: dict[str, Any] = {}
    for number, field in fields.items():
        result = values.get(number)
        if result is None or (not field.keep_zero and result in ("", 0)):
            continue  # absent, null in Go's JSON, or a zero that omitempty drops
        if field.name:
            out[field.name] = result
        else:
            out.update(result)
    return out


def _message_for(api_version: str, kind: str) -> str:
    """The table's message for an envelope's type: `Role` in `rbac.authorization.k8s.io/v1`
    is `rbac/v1.Role`, `Pod` in the core group's `v1` is `core/v1.Pod`. Go registers the
    option kinds (`DeleteOptions`) in every group version, so those are looked up in
    `meta/v1` whatever the group.
    """
    group, _, version = api_version.rpartition("/")
    candidates = [f"meta/v1.{kind}"]
    if group in _PACKAGES:
        candidates.insert(0, f"{_PACKAGES[group]}/{version}.{kind}")
    for name in candidates:
        if name in KINDS:
            return name
    raise UnsupportedProtobuf(
        f"protobuf bodies of kind {kind or '(none)'} in {api_version or '(no apiVersion)'}"
        f" are not supported: send the object as application/json"
    )


def _type_meta(data: bytes) -> tuple[str, str]:
    """The envelope's `runtime.TypeMeta`: (apiVersion, kind)."""
    found = {1: "", 2: ""}
    for number, value in _scan(data, "runtime.TypeMeta"):
        if number not in found:
            raise ProtobufError(f"runtime.TypeMeta has no field {number}")
        found[number] = _text(_bytes(value, "runtime.TypeMeta", number))
    return found[1], found[2]


def _scan(data: bytes, name: str) -> list[tuple[int, int | bytes]]:
    """Split a message into (field number, value) in wire order: an int for a varint,
    bytes for a length-delimited field. No Kubernetes field uses the fixed-size or group
    wire types, so those are errors."""
    out: list[tuple[int, int | bytes]] = []
    pos, end = 0, len(data)
    while pos < end:
        key, pos = _varint(data, pos, name)
        number, wire = key >> 3, key & 7
        if number == 0:
            raise ProtobufError(f"{name}: field number 0 is not valid")
        if wire == protowire.VARINT:
            value, pos = _varint(data, pos, name)
            out.append((number, value))
        elif wire == protowire.LENGTH_DELIMITED:
            size, pos = _varint(data, pos, name)
            if size > end - pos:
                raise ProtobufError(f"{name}: field {number} runs past the end of the message")
            out.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise ProtobufError(
                f"{name}: field {number} has wire type {_WIRE_NAMES.get(wire, str(wire))},"
                " which no Kubernetes API field uses"
            )
    return out


def _varint(data: bytes, pos: int, name: str) -> tuple[int, int]:
    """Read a varint; returns (value, next position)."""
    try:
        return protowire.decode_varint(data, pos)
    except protowire.WireError as error:
        raise ProtobufError(f"{name}: {error}") from None


def _bytes(value: int | bytes, name: str, number: int) -> bytes:
    """The payload of a length-delimited field, refusing a varint in its place."""
    if not isinstance(value, bytes):
        raise ProtobufError(f"{name}: field {number} should be length-delimited, not a varint")
    return value


def _int(value: int | bytes, name: str, number: int) -> int:
    """A varint as Go reads an int32 or int64: negative numbers are sent as 64-bit two's
    complement."""
    if isinstance(value, bytes):
        raise ProtobufError(f"{name}: field {number} should be a varint, not length-delimited")
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(data: bytes) -> str:
    """A protobuf string. Go does not check its UTF-8, and Go's JSON encoder writes each
    invalid byte as U+FFFD, which is what errors="replace" does."""
    return data.decode("utf-8", errors="replace")


def _scalar(kind: Kind, value: int | bytes, name: str, number: int) -> Any:
    """A string, bool, integer or []byte (base64 text, as Go's JSON encoder writes it)."""
    if kind is Kind.STRING:
        return _text(_bytes(value, name, number))
    if kind is Kind.BYTES:
        return base64.b64encode(_bytes(value, name, number)).decode("ascii")
    integer = _int(value, name, number)
    return integer != 0 if kind is Kind.BOOL else integer


def _repeated(field: Field, value: int | bytes, name: str, number: int) -> list[Any]:
    """The items one occurrence of a repeated field adds. Go writes integers one per
    occurrence, but protobuf also allows them packed into one length-delimited run."""
    if field.kind in (Kind.INT, Kind.BOOL) and isinstance(value, bytes):
        items: list[int | bytes] = []
        pos = 0
        while pos < len(value):
            item, pos = _varint(value, pos, name)
            items.append(item)
        return [_scalar(field.kind, item, name, number) for item in items]
    if field.kind in _SCALAR_KINDS:
        return [_scalar(field.kind, value, name, number)]
    return [_message_value(field, _bytes(value, name, number))]


def _map_entry(field: Field, data: bytes, name: str, number: int) -> tuple[str, Any]:
    """A map entry is a message of key (1) and value (2); either may be missing, and a
    missing one is the zero value."""
    key = ""
    raw: int | bytes = b""
    for entry_number, value in _scan(data, f"{name} field {number} entry"):
        if entry_number == 1:
            key = _text(_bytes(value, name, number))
        elif entry_number == 2:
            raw = value
        else:
            raise ProtobufError(f"{name}: map field {number} entry has no field {entry_number}")
    if field.kind in _SCALAR_KINDS:
        return key, _scalar(field.kind, raw, name, number)
    return key, _message_value(field, _bytes(raw, name, number))


def _message_value(field: Field, data: bytes) -> Any:
    """A message-typed value in its JSON form; None where Go's JSON would write null."""
    if field.kind is Kind.MESSAGE:
        assert field.message is not None
        return decode_message(field.message, data)
    if field.kind is Kind.TIME:
        return _time(data)
    if field.kind is Kind.QUANTITY:
        return _quantity(data)
    if field.kind is Kind.INT_OR_STRING:
        return _int_or_string(data)
    if field.kind is Kind.FIELDS_V1:
        return _fields_v1(data)
    return _strings(data)


def _time(data: bytes) -> str | None:
    """`metav1.Time`: a Timestamp of 1 seconds and 2 nanos. Go writes nothing for the
    zero time, which its JSON calls null, and reads only the seconds: JSON shows whole
    seconds."""
    name = "meta/v1.Time"
    if not data:
        return None
    seconds = 0
    for number, value in _scan(data, name):
        if number == 1:
            seconds = _int(value, name, 1)
        elif number == 2:
            _int(value, name, 2)  # checked, but dropped as Go drops it
        else:
            raise ProtobufError(f"{name} has no field {number}")
    try:
        moment = datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError) as error:
        raise ProtobufError(f"{name}: {seconds} seconds is out of range") from error
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def _quantity(data: bytes) -> str:
    """`resource.Quantity`: field 1 is its canonical string; Go's zero Quantity is "0"."""
    name = "resource.Quantity"
    texts = [_text(_bytes(value, name, 1)) for _, value in _only_field_1(data, name)]
    return texts[-1] if texts else "0"


def _int_or_string(data: bytes) -> int | str:
    """`intstr.IntOrString`: 1 type (0 int, 1 string), 2 intVal, 3 strVal."""
    name = "intstr.IntOrString"
    type_, int_value, str_value = 0, 0, ""
    for number, value in _scan(data, name):
        if number == 1:
            type_ = _int(value, name, 1)
        elif number == 2:
            int_value = _int(value, name, 2)
        elif number == 3:
            str_value = _text(_bytes(value, name, 3))
        else:
            raise ProtobufError(f"{name} has no field {number}")
    if type_ not in (0, 1):
        raise ProtobufError(f"{name}: type {type_} is neither 0 (int) nor 1 (string)")
    return str_value if type_ == 1 else int_value


def _fields_v1(data: bytes) -> Any:
    """`metav1.FieldsV1` (in managedFields): field 1 holds a JSON document, which is
    what the JSON form shows (null when there is none)."""
    name = "meta/v1.FieldsV1"
    found = [_bytes(value, name, 1) for _, value in _only_field_1(data, name)]
    raw = found[-1] if found else b""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError as error:
        raise ProtobufError(f"{name} does not hold JSON: {error}") from error


def _strings(data: bytes) -> list[str]:
    """A named string slice (`ExtraValue`): its items are the repeated field 1."""
    name = "string list"
    return [_text(_bytes(value, name, 1)) for _, value in _only_field_1(data, name)]


def _only_field_1(data: bytes, name: str) -> list[tuple[int, int | bytes]]:
    """The occurrences of field 1, the only field the message may have."""
    found = _scan(data, name)
    for number, _ in found:
        if number != 1:
            raise ProtobufError(f"{name} has no field {number}")
    return found


def _parse_spec(message: str, spec: str) -> dict[int, Field]:
    """One `_SPEC` line to its fields (the notation is in the module docstring)."""
    package = message.rsplit(".", 1)[0]
    fields: dict[int, Field] = {}
    for token in spec.split():
        name, _, rest = token.partition("=")
        number, _, type_ = rest.partition(":")
        keep_zero = type_.endswith("!")
        type_ = type_.removesuffix("!")
        shape = Shape.ONE
        if type_.startswith("["):
            shape, type_ = Shape.LIST, type_[1:]
        elif type_.startswith("{"):
            shape, type_ = Shape.MAP, type_[1:]
        nested: str | None = None
        if shape is Shape.MAP and type_ == "[s":
            kind = Kind.STRINGS
        elif type_ in _SCALARS:
            kind = _SCALARS[type_]
        else:
            qualified = type_ if "." in type_ else f"{package}.{type_}"
            kind = _SPECIALS.get(qualified, Kind.MESSAGE)
            nested = qualified if kind is Kind.MESSAGE else None
        fields[int(number)] = Field(name, kind, nested, shape, keep_zero)
    return fields


# The schema table, generated from the kubectl 1.37 binary's struct tags (see above).
_CONTAINER_FIELDS = (
    "name=1:s! image=2:s command=3:[s args=4:[s workingDir=5:s ports=6:[ContainerPort"
    " envFrom=19:[EnvFromSource env=7:[EnvVar resources=8:ResourceRequirements"
    " resizePolicy=23:[ContainerResizePolicy restartPolicy=24:s!"
    " restartPolicyRules=25:[ContainerRestartRule volumeMounts=9:[VolumeMount"
    " volumeDevices=21:[VolumeDevice livenessProbe=10:Probe readinessProbe=11:Probe"
    " startupProbe=22:Probe lifecycle=12:Lifecycle terminationMessagePath=13:s"
    " terminationMessagePolicy=20:s imagePullPolicy=14:s securityContext=15:SecurityContext"
    " stdin=16:b stdinOnce=17:b tty=18:b"
)
"""Container and EphemeralContainerCommon: the same fields, as in Go."""

_SPEC: dict[str, str] = {
    # meta/v1
    "meta/v1.Condition": (
        "type=1:s! status=2:s! observedGeneration=3:i lastTransitionTime=4:meta/v1.Time"
        " reason=5:s! message=6:s!"
    ),
    "meta/v1.DeleteOptions": (
        "gracePeriodSeconds=1:i! preconditions=2:Preconditions orphanDependents=3:b!"
        " propagationPolicy=4:s! dryRun=5:[s ignoreStoreReadErrorWithClusterBreakingPotential=6:b!"
    ),
    "meta/v1.FieldSelectorRequirement": "key=1:s! operator=2:s! values=3:[s",
    "meta/v1.LabelSelector": "matchLabels=1:{s matchExpressions=2:[LabelSelectorRequirement",
    "meta/v1.LabelSelectorRequirement": "key=1:s! operator=2:s! values=3:[s",
    "meta/v1.ManagedFieldsEntry": (
        "manager=1:s operation=2:s apiVersion=3:s time=4:meta/v1.Time fieldsType=6:s"
        " fieldsV1=7:meta/v1.FieldsV1 subresource=8:s"
    ),
    "meta/v1.ObjectMeta": (
        "name=1:s generateName=2:s namespace=3:s selfLink=4:s uid=5:s resourceVersion=6:s"
        " generation=7:i creationTimestamp=8:meta/v1.Time deletionTimestamp=9:meta/v1.Time"
        " deletionGracePeriodSeconds=10:i! labels=11:{s annotations=12:{s"
        " ownerReferences=13:[OwnerReference finalizers=14:[s managedFields=17:[ManagedFieldsEntry"
    ),
    "meta/v1.OwnerReference": (
        "apiVersion=5:s! kind=1:s! name=3:s! uid=4:s! controller=6:b! blockOwnerDeletion=7:b!"
    ),
    "meta/v1.Preconditions": "uid=1:s! resourceVersion=2:s!",
    # apps/v1
    "apps/v1.DaemonSet": (
        "metadata=1:meta/v1.ObjectMeta spec=2:DaemonSetSpec status=3:DaemonSetStatus"
    ),
    "apps/v1.DaemonSetCondition": (
        "type=1:s! status=2:s! lastTransitionTime=3:meta/v1.Time reason=4:s message=5:s"
    ),
    "apps/v1.DaemonSetSpec": (
        "selector=1:meta/v1.LabelSelector template=2:core/v1.PodTemplateSpec"
        " updateStrategy=3:DaemonSetUpdateStrategy minReadySeconds=4:i revisionHistoryLimit=6:i!"
    ),
    "apps/v1.DaemonSetStatus": (
        "currentNumberScheduled=1:i! numberMisscheduled=2:i! desiredNumberScheduled=3:i!"
        " numberReady=4:i! observedGeneration=5:i updatedNumberScheduled=6:i numberAvailable=7:i"
        " numberUnavailable=8:i collisionCount=9:i! conditions=10:[DaemonSetCondition"
    ),
    "apps/v1.DaemonSetUpdateStrategy": "type=1:s rollingUpdate=2:RollingUpdateDaemonSet",
    "apps/v1.Deployment": (
        "metadata=1:meta/v1.ObjectMeta spec=2:DeploymentSpec status=3:DeploymentStatus"
    ),
    "apps/v1.DeploymentCondition": (
        "type=1:s! status=2:s! lastUpdateTime=6:meta/v1.Time lastTransitionTime=7:meta/v1.Time"
        " reason=4:s message=5:s"
    ),
    "apps/v1.DeploymentSpec": (
        "replicas=1:i! selector=2:meta/v1.LabelSelector template=3:core/v1.PodTemplateSpec"
        " strategy=4:DeploymentStrategy minReadySeconds=5:i revisionHistoryLimit=6:i! paused=7:b"
        " progressDeadlineSeconds=9:i!"
    ),
    "apps/v1.DeploymentStatus": (
        "observedGeneration=1:i replicas=2:i updatedReplicas=3:i readyReplicas=7:i"
        " availableReplicas=4:i unavailableReplicas=5:i terminatingReplicas=9:i!"
        " conditions=6:[DeploymentCondition collisionCount=8:i!"
    ),
    "apps/v1.DeploymentStrategy": "type=1:s rollingUpdate=2:RollingUpdateDeployment",
    "apps/v1.ReplicaSet": (
        "metadata=1:meta/v1.ObjectMeta spec=2:ReplicaSetSpec status=3:ReplicaSetStatus"
    ),
    "apps/v1.ReplicaSetCondition": (
        "type=1:s! status=2:s! lastTransitionTime=3:meta/v1.Time reason=4:s message=5:s"
    ),
    "apps/v1.ReplicaSetSpec": (
        "replicas=1:i! minReadySeconds=4:i selector=2:meta/v1.LabelSelector"
        " template=3:core/v1.PodTemplateSpec"
    ),
    "apps/v1.ReplicaSetStatus": (
        "replicas=1:i! fullyLabeledReplicas=2:i readyReplicas=4:i availableReplicas=5:i"
        " terminatingReplicas=7:i! observedGeneration=3:i conditions=6:[ReplicaSetCondition"
    ),
    "apps/v1.RollingUpdateDaemonSet": (
        "maxUnavailable=1:intstr.IntOrString maxSurge=2:intstr.IntOrString"
    ),
    "apps/v1.RollingUpdateDeployment": (
        "maxUnavailable=1:intstr.IntOrString maxSurge=2:intstr.IntOrString"
    ),
    "apps/v1.RollingUpdateStatefulSetStrategy": (
        "partition=1:i! maxUnavailable=2:intstr.IntOrString"
    ),
    "apps/v1.StatefulSet": (
        "metadata=1:meta/v1.ObjectMeta spec=2:StatefulSetSpec status=3:StatefulSetStatus"
    ),
    "apps/v1.StatefulSetCondition": (
        "type=1:s! status=2:s! lastTransitionTime=3:meta/v1.Time reason=4:s message=5:s"
    ),
    "apps/v1.StatefulSetOrdinals": "start=1:i!",
    "apps/v1.StatefulSetPersistentVolumeClaimRetentionPolicy": "whenDeleted=1:s whenScaled=2:s",
    "apps/v1.StatefulSetSpec": (
        "replicas=1:i! selector=2:meta/v1.LabelSelector template=3:core/v1.PodTemplateSpec"
        " volumeClaimTemplates=4:[core/v1.PersistentVolumeClaim serviceName=5:s!"
        " podManagementPolicy=6:s updateStrategy=7:StatefulSetUpdateStrategy"
        " revisionHistoryLimit=8:i! minReadySeconds=9:i"
        " persistentVolumeClaimRetentionPolicy=10:StatefulSetPersistentVolumeClaimRetentionPolicy"
        " ordinals=11:StatefulSetOrdinals"
    ),
    "apps/v1.StatefulSetStatus": (
        "observedGeneration=1:i replicas=2:i! readyReplicas=3:i currentReplicas=4:i"
        " updatedReplicas=5:i currentRevision=6:s updateRevision=7:s collisionCount=9:i!"
        " conditions=10:[StatefulSetCondition availableReplicas=11:i!"
    ),
    "apps/v1.StatefulSetUpdateStrategy": (
        "type=1:s rollingUpdate=2:RollingUpdateStatefulSetStrategy"
    ),
    # authentication/v1
    "authentication/v1.BoundObjectReference": "kind=1:s apiVersion=2:s name=3:s uid=4:s",
    "authentication/v1.SelfSubjectReview": (
        "metadata=1:meta/v1.ObjectMeta status=2:SelfSubjectReviewStatus"
    ),
    "authentication/v1.SelfSubjectReviewStatus": "userInfo=1:UserInfo",
    "authentication/v1.TokenRequest": (
        "metadata=1:meta/v1.ObjectMeta spec=2:TokenRequestSpec status=3:TokenRequestStatus"
    ),
    "authentication/v1.TokenRequestSpec": (
        "audiences=1:[s expirationSeconds=4:i! boundObjectRef=3:BoundObjectReference"
        " attestations=5:{[s"
    ),
    "authentication/v1.TokenRequestStatus": "token=1:s! expirationTimestamp=2:meta/v1.Time",
    "authentication/v1.TokenReview": (
        "metadata=1:meta/v1.ObjectMeta spec=2:TokenReviewSpec status=3:TokenReviewStatus"
    ),
    "authentication/v1.TokenReviewSpec": "token=1:s audiences=2:[s",
    "authentication/v1.TokenReviewStatus": (
        "authenticated=1:b user=2:UserInfo audiences=4:[s error=3:s"
    ),
    "authentication/v1.UserInfo": "username=1:s uid=2:s groups=3:[s extra=4:{[s",
    # authorization/v1
    "authorization/v1.FieldSelectorAttributes": (
        "rawSelector=1:s requirements=2:[meta/v1.FieldSelectorRequirement"
    ),
    "authorization/v1.LabelSelectorAttributes": (
        "rawSelector=1:s requirements=2:[meta/v1.LabelSelectorRequirement"
    ),
    "authorization/v1.LocalSubjectAccessReview": (
        "metadata=1:meta/v1.ObjectMeta spec=2:SubjectAccessReviewSpec"
        " status=3:SubjectAccessReviewStatus"
    ),
    "authorization/v1.NonResourceAttributes": "path=1:s verb=2:s",
    "authorization/v1.NonResourceRule": "verbs=1:[s nonResourceURLs=2:[s",
    "authorization/v1.ResourceAttributes": (
        "namespace=1:s verb=2:s group=3:s version=4:s resource=5:s subresource=6:s name=7:s"
        " fieldSelector=8:FieldSelectorAttributes labelSelector=9:LabelSelectorAttributes"
    ),
    "authorization/v1.ResourceRule": "verbs=1:[s apiGroups=2:[s resources=3:[s resourceNames=4:[s",
    "authorization/v1.SelfSubjectAccessReview": (
        "metadata=1:meta/v1.ObjectMeta spec=2:SelfSubjectAccessReviewSpec"
        " status=3:SubjectAccessReviewStatus"
    ),
    "authorization/v1.SelfSubjectAccessReviewSpec": (
        "resourceAttributes=1:ResourceAttributes nonResourceAttributes=2:NonResourceAttributes"
    ),
    "authorization/v1.SelfSubjectRulesReview": (
        "metadata=1:meta/v1.ObjectMeta spec=2:SelfSubjectRulesReviewSpec"
        " status=3:SubjectRulesReviewStatus"
    ),
    "authorization/v1.SelfSubjectRulesReviewSpec": "namespace=1:s",
    "authorization/v1.SubjectAccessReview": (
        "metadata=1:meta/v1.ObjectMeta spec=2:SubjectAccessReviewSpec"
        " status=3:SubjectAccessReviewStatus"
    ),
    "authorization/v1.SubjectAccessReviewSpec": (
        "resourceAttributes=1:ResourceAttributes nonResourceAttributes=2:NonResourceAttributes"
        " user=3:s groups=4:[s extra=5:{[s uid=6:s"
    ),
    "authorization/v1.SubjectAccessReviewStatus": (
        "allowed=1:b! denied=4:b reason=2:s evaluationError=3:s"
    ),
    "authorization/v1.SubjectRulesReviewStatus": (
        "resourceRules=1:[ResourceRule nonResourceRules=2:[NonResourceRule incomplete=3:b!"
        " evaluationError=4:s"
    ),
    # autoscaling/v1
    "autoscaling/v1.CrossVersionObjectReference": "kind=1:s! name=2:s! apiVersion=3:s",
    "autoscaling/v1.HorizontalPodAutoscaler": (
        "metadata=1:meta/v1.ObjectMeta spec=2:HorizontalPodAutoscalerSpec"
        " status=3:HorizontalPodAutoscalerStatus"
    ),
    "autoscaling/v1.HorizontalPodAutoscalerSpec": (
        "scaleTargetRef=1:CrossVersionObjectReference minReplicas=2:i! maxReplicas=3:i!"
        " targetCPUUtilizationPercentage=4:i!"
    ),
    "autoscaling/v1.HorizontalPodAutoscalerStatus": (
        "observedGeneration=1:i! lastScaleTime=2:meta/v1.Time currentReplicas=3:i!"
        " desiredReplicas=4:i! currentCPUUtilizationPercentage=5:i!"
    ),
    "autoscaling/v1.Scale": "metadata=1:meta/v1.ObjectMeta spec=2:ScaleSpec status=3:ScaleStatus",
    "autoscaling/v1.ScaleSpec": "replicas=1:i",
    "autoscaling/v1.ScaleStatus": "replicas=1:i! selector=2:s",
    # autoscaling/v2
    "autoscaling/v2.ContainerResourceMetricSource": (
        "name=1:s! target=2:MetricTarget container=3:s!"
    ),
    "autoscaling/v2.ContainerResourceMetricStatus": (
        "name=1:s! current=2:MetricValueStatus container=3:s!"
    ),
    "autoscaling/v2.CrossVersionObjectReference": "kind=1:s! name=2:s! apiVersion=3:s",
    "autoscaling/v2.ExternalMetricSource": "metric=1:MetricIdentifier target=2:MetricTarget",
    "autoscaling/v2.ExternalMetricStatus": "metric=1:MetricIdentifier current=2:MetricValueStatus",
    "autoscaling/v2.HPAScalingPolicy": "type=1:s! value=2:i! periodSeconds=3:i!",
    "autoscaling/v2.HPAScalingRules": (
        "stabilizationWindowSeconds=3:i! selectPolicy=1:s! policies=2:[HPAScalingPolicy"
        " tolerance=4:resource.Quantity"
    ),
    "autoscaling/v2.HorizontalPodAutoscaler": (
        "metadata=1:meta/v1.ObjectMeta spec=2:HorizontalPodAutoscalerSpec"
        " status=3:HorizontalPodAutoscalerStatus"
    ),
    "autoscaling/v2.HorizontalPodAutoscalerBehavior": (
        "scaleUp=1:HPAScalingRules scaleDown=2:HPAScalingRules"
    ),
    "autoscaling/v2.HorizontalPodAutoscalerCondition": (
        "type=1:s! status=2:s! lastTransitionTime=3:meta/v1.Time reason=4:s message=5:s"
        " observedGeneration=6:i!"
    ),
    "autoscaling/v2.HorizontalPodAutoscalerSpec": (
        "scaleTargetRef=1:CrossVersionObjectReference minReplicas=2:i! maxReplicas=3:i!"
        " metrics=4:[MetricSpec behavior=5:HorizontalPodAutoscalerBehavior"
    ),
    "autoscaling/v2.HorizontalPodAutoscalerStatus": (
        "observedGeneration=1:i! lastScaleTime=2:meta/v1.Time currentReplicas=3:i"
        " desiredReplicas=4:i! currentMetrics=5:[MetricStatus"
        " conditions=6:[HorizontalPodAutoscalerCondition"
    ),
    "autoscaling/v2.MetricIdentifier": "name=1:s! selector=2:meta/v1.LabelSelector",
    "autoscaling/v2.MetricSpec": (
        "type=1:s! object=2:ObjectMetricSource pods=3:PodsMetricSource"
        " resource=4:ResourceMetricSource containerResource=7:ContainerResourceMetricSource"
        " external=5:ExternalMetricSource"
    ),
    "autoscaling/v2.MetricStatus": (
        "type=1:s! object=2:ObjectMetricStatus pods=3:PodsMetricStatus"
        " resource=4:ResourceMetricStatus containerResource=7:ContainerResourceMetricStatus"
        " external=5:ExternalMetricStatus"
    ),
    "autoscaling/v2.MetricTarget": (
        "type=1:s! value=2:resource.Quantity averageValue=3:resource.Quantity"
        " averageUtilization=4:i!"
    ),
    "autoscaling/v2.MetricValueStatus": (
        "value=1:resource.Quantity averageValue=2:resource.Quantity averageUtilization=3:i!"
    ),
    "autoscaling/v2.ObjectMetricSource": (
        "describedObject=1:CrossVersionObjectReference target=2:MetricTarget"
        " metric=3:MetricIdentifier"
    ),
    "autoscaling/v2.ObjectMetricStatus": (
        "metric=1:MetricIdentifier current=2:MetricValueStatus"
        " describedObject=3:CrossVersionObjectReference"
    ),
    "autoscaling/v2.PodsMetricSource": "metric=1:MetricIdentifier target=2:MetricTarget",
    "autoscaling/v2.PodsMetricStatus": "metric=1:MetricIdentifier current=2:MetricValueStatus",
    "autoscaling/v2.ResourceMetricSource": "name=1:s! target=2:MetricTarget",
    "autoscaling/v2.ResourceMetricStatus": "name=1:s! current=2:MetricValueStatus",
    # batch/v1
    "batch/v1.CronJob": "metadata=1:meta/v1.ObjectMeta spec=2:CronJobSpec status=3:CronJobStatus",
    "batch/v1.CronJobSpec": (
        "schedule=1:s! timeZone=8:s! startingDeadlineSeconds=2:i! concurrencyPolicy=3:s"
        " suspend=4:b! jobTemplate=5:JobTemplateSpec successfulJobsHistoryLimit=6:i!"
        " failedJobsHistoryLimit=7:i!"
    ),
    "batch/v1.CronJobStatus": (
        "active=1:[core/v1.ObjectReference lastScheduleTime=4:meta/v1.Time"
        " lastSuccessfulTime=5:meta/v1.Time"
    ),
    "batch/v1.Job": "metadata=1:meta/v1.ObjectMeta spec=2:JobSpec status=3:JobStatus",
    "batch/v1.JobCondition": (
        "type=1:s! status=2:s! lastProbeTime=3:meta/v1.Time lastTransitionTime=4:meta/v1.Time"
        " reason=5:s message=6:s"
    ),
    "batch/v1.JobSchedulingConfiguration": (
        "schedulingPolicy=1:scheduling/v1alpha3.WorkloadPodGroupSchedulingPolicy"
        " schedulingConstraints=2:scheduling/v1alpha3.WorkloadPodGroupSchedulingConstraints"
        " disruptionMode=3:scheduling/v1alpha3.WorkloadPodGroupDisruptionMode"
        " resourceClaims=4:[scheduling/v1alpha3.WorkloadPodGroupResourceClaim"
    ),
    "batch/v1.JobSpec": (
        "parallelism=1:i! completions=2:i! activeDeadlineSeconds=3:i!"
        " podFailurePolicy=11:PodFailurePolicy successPolicy=16:SuccessPolicy backoffLimit=7:i!"
        " backoffLimitPerIndex=12:i! maxFailedIndexes=13:i! selector=4:meta/v1.LabelSelector"
        " manualSelector=5:b! template=6:core/v1.PodTemplateSpec ttlSecondsAfterFinished=8:i!"
        " completionMode=9:s! suspend=10:b! podReplacementPolicy=14:s! managedBy=15:s!"
        " scheduling=17:JobSchedulingConfiguration"
    ),
    "batch/v1.JobStatus": (
        "conditions=1:[JobCondition startTime=2:meta/v1.Time completionTime=3:meta/v1.Time"
        " active=4:i succeeded=5:i failed=6:i terminating=11:i! completedIndexes=7:s"
        " failedIndexes=10:s! uncountedTerminatedPods=8:UncountedTerminatedPods ready=9:i!"
    ),
    "batch/v1.JobTemplateSpec": "metadata=1:meta/v1.ObjectMeta spec=2:JobSpec",
    "batch/v1.PodFailurePolicy": "rules=1:[PodFailurePolicyRule",
    "batch/v1.PodFailurePolicyOnExitCodesRequirement": (
        "containerName=1:s! operator=2:s! values=3:[i"
    ),
    "batch/v1.PodFailurePolicyOnPodConditionsPattern": "type=1:s! status=2:s!",
    "batch/v1.PodFailurePolicyRule": (
        "action=1:s! onExitCodes=2:PodFailurePolicyOnExitCodesRequirement"
        " onPodConditions=3:[PodFailurePolicyOnPodConditionsPattern"
    ),
    "batch/v1.SuccessPolicy": "rules=1:[SuccessPolicyRule",
    "batch/v1.SuccessPolicyRule": "succeededIndexes=1:s! succeededCount=2:i!",
    "batch/v1.UncountedTerminatedPods": "succeeded=1:[s failed=2:[s",
    # certificates/v1
    "certificates/v1.CertificateSigningRequest": (
        "metadata=1:meta/v1.ObjectMeta spec=2:CertificateSigningRequestSpec"
        " status=3:CertificateSigningRequestStatus"
    ),
    "certificates/v1.CertificateSigningRequestCondition": (
        "type=1:s! status=6:s! reason=2:s message=3:s lastUpdateTime=4:meta/v1.Time"
        " lastTransitionTime=5:meta/v1.Time"
    ),
    "certificates/v1.CertificateSigningRequestSpec": (
        "request=1:y! signerName=7:s! expirationSeconds=8:i! usages=5:[s username=2:s uid=3:s"
        " groups=4:[s extra=6:{[s"
    ),
    "certificates/v1.CertificateSigningRequestStatus": (
        "conditions=1:[CertificateSigningRequestCondition certificate=2:y"
    ),
    # core/v1
    "core/v1.AWSElasticBlockStoreVolumeSource": (
        "volumeID=1:s! fsType=2:s partition=3:i readOnly=4:b"
    ),
    "core/v1.Affinity": (
        "nodeAffinity=1:NodeAffinity podAffinity=2:PodAffinity podAntiAffinity=3:PodAntiAffinity"
    ),
    "core/v1.AppArmorProfile": "type=1:s! localhostProfile=2:s!",
    "core/v1.AttachedVolume": "name=1:s! devicePath=2:s!",
    "core/v1.AzureDiskVolumeSource": (
        "diskName=1:s! diskURI=2:s! cachingMode=3:s! fsType=4:s! readOnly=5:b! kind=6:s!"
    ),
    "core/v1.AzureFileVolumeSource": "secretName=1:s! shareName=2:s! readOnly=3:b",
    "core/v1.Binding": "metadata=1:meta/v1.ObjectMeta target=2:ObjectReference",
    "core/v1.CSIVolumeSource": (
        "driver=1:s! readOnly=2:b! fsType=3:s! volumeAttributes=4:{s"
        " nodePublishSecretRef=5:LocalObjectReference"
    ),
    "core/v1.Capabilities": "add=1:[s drop=2:[s",
    "core/v1.CephFSVolumeSource": (
        "monitors=1:[s path=2:s user=3:s secretFile=4:s secretRef=5:LocalObjectReference"
        " readOnly=6:b"
    ),
    "core/v1.CinderVolumeSource": (
        "volumeID=1:s! fsType=2:s readOnly=3:b secretRef=4:LocalObjectReference"
    ),
    "core/v1.ClientIPConfig": "timeoutSeconds=1:i!",
    "core/v1.ClusterTrustBundleProjection": (
        "name=1:s! signerName=2:s! labelSelector=3:meta/v1.LabelSelector optional=5:b! path=4:s!"
        " user=6:i!"
    ),
    "core/v1.ConfigMap": "metadata=1:meta/v1.ObjectMeta immutable=4:b! data=2:{s binaryData=3:{y",
    "core/v1.ConfigMapEnvSource": "=1:LocalObjectReference optional=2:b!",
    "core/v1.ConfigMapKeySelector": "=1:LocalObjectReference key=2:s! optional=3:b!",
    "core/v1.ConfigMapNodeConfigSource": (
        "namespace=1:s! name=2:s! uid=3:s resourceVersion=4:s kubeletConfigKey=5:s!"
    ),
    "core/v1.ConfigMapProjection": "=1:LocalObjectReference items=2:[KeyToPath optional=4:b!",
    "core/v1.ConfigMapVolumeSource": (
        "=1:LocalObjectReference items=2:[KeyToPath defaultMode=3:i! optional=4:b! defaultUser=5:i!"
    ),
    "core/v1.Container": _CONTAINER_FIELDS,
    "core/v1.ContainerExtendedResourceRequest": (
        "containerName=1:s! resourceName=2:s! requestName=3:s!"
    ),
    "core/v1.ContainerImage": "names=1:[s sizeBytes=2:i",
    "core/v1.ContainerPort": "name=1:s hostPort=2:i containerPort=3:i! protocol=4:s hostIP=5:s",
    "core/v1.ContainerResizePolicy": "resourceName=1:s! restartPolicy=2:s!",
    "core/v1.ContainerRestartRule": "action=1:s exitCodes=2:ContainerRestartRuleOnExitCodes",
    "core/v1.ContainerRestartRuleOnExitCodes": "operator=1:s values=2:[i",
    "core/v1.ContainerState": (
        "waiting=1:ContainerStateWaiting running=2:ContainerStateRunning"
        " terminated=3:ContainerStateTerminated"
    ),
    "core/v1.ContainerStateRunning": "startedAt=1:meta/v1.Time",
    "core/v1.ContainerStateTerminated": (
        "exitCode=1:i! signal=2:i reason=3:s message=4:s startedAt=5:meta/v1.Time"
        " finishedAt=6:meta/v1.Time containerID=7:s"
    ),
    "core/v1.ContainerStateWaiting": "reason=1:s message=2:s",
    "core/v1.ContainerStatus": (
        "name=1:s! state=2:ContainerState lastState=3:ContainerState ready=4:b! restartCount=5:i!"
        " image=6:s! imageID=7:s! containerID=8:s started=9:b!"
        " allocatedResources=10:{resource.Quantity resources=11:ResourceRequirements"
        " volumeMounts=12:[VolumeMountStatus user=13:ContainerUser"
        " allocatedResourcesStatus=14:[ResourceStatus stopSignal=15:s!"
    ),
    "core/v1.ContainerUser": "linux=1:LinuxContainerUser",
    "core/v1.DaemonEndpoint": "Port=1:i!",
    "core/v1.DownwardAPIProjection": "items=1:[DownwardAPIVolumeFile",
    "core/v1.DownwardAPIVolumeFile": (
        "path=1:s! fieldRef=2:ObjectFieldSelector resourceFieldRef=3:ResourceFieldSelector"
        " mode=4:i! user=5:i!"
    ),
    "core/v1.DownwardAPIVolumeSource": (
        "items=1:[DownwardAPIVolumeFile defaultMode=2:i! defaultUser=3:i!"
    ),
    "core/v1.EmptyDirVolumeSource": "medium=1:s sizeLimit=2:resource.Quantity mode=3:i!",
    "core/v1.EndpointAddress": "ip=1:s! hostname=3:s nodeName=4:s! targetRef=2:ObjectReference",
    "core/v1.EndpointPort": "name=1:s port=2:i! protocol=3:s appProtocol=4:s!",
    "core/v1.EndpointSubset": (
        "addresses=1:[EndpointAddress notReadyAddresses=2:[EndpointAddress ports=3:[EndpointPort"
    ),
    "core/v1.Endpoints": "metadata=1:meta/v1.ObjectMeta subsets=2:[EndpointSubset",
    "core/v1.EnvFromSource": (
        "prefix=1:s configMapRef=2:ConfigMapEnvSource secretRef=3:SecretEnvSource"
    ),
    "core/v1.EnvVar": "name=1:s! value=2:s valueFrom=3:EnvVarSource",
    "core/v1.EnvVarSource": (
        "fieldRef=1:ObjectFieldSelector resourceFieldRef=2:ResourceFieldSelector"
        " configMapKeyRef=3:ConfigMapKeySelector secretKeyRef=4:SecretKeySelector"
        " fileKeyRef=5:FileKeySelector"
    ),
    "core/v1.EphemeralContainer": "=1:EphemeralContainerCommon targetContainerName=2:s",
    "core/v1.EphemeralContainerCommon": _CONTAINER_FIELDS,
    "core/v1.EphemeralVolumeSource": "volumeClaimTemplate=1:PersistentVolumeClaimTemplate",
    "core/v1.EvictionResponder": "name=1:s! priority=2:i!",
    "core/v1.ExecAction": "command=1:[s",
    "core/v1.FCVolumeSource": "targetWWNs=1:[s lun=2:i! fsType=3:s readOnly=4:b wwids=5:[s",
    "core/v1.FileKeySelector": "volumeName=1:s! path=2:s! key=3:s! optional=4:b!",
    "core/v1.FlexVolumeSource": (
        "driver=1:s! fsType=2:s secretRef=3:LocalObjectReference readOnly=4:b options=5:{s"
    ),
    "core/v1.FlockerVolumeSource": "datasetName=1:s datasetUUID=2:s",
    "core/v1.GCEPersistentDiskVolumeSource": "pdName=1:s! fsType=2:s partition=3:i readOnly=4:b",
    "core/v1.GRPCAction": "port=1:i! service=2:s! mode=3:s!",
    "core/v1.GitRepoVolumeSource": "repository=1:s! revision=2:s directory=3:s",
    "core/v1.GlusterfsVolumeSource": "endpoints=1:s! path=2:s! readOnly=3:b",
    "core/v1.HTTPGetAction": (
        "path=1:s port=2:intstr.IntOrString host=3:s scheme=4:s httpHeaders=5:[HTTPHeader"
        " protocol=6:s!"
    ),
    "core/v1.HTTPHeader": "name=1:s! value=2:s!",
    "core/v1.HostAlias": "ip=1:s! hostnames=2:[s",
    "core/v1.HostIP": "ip=1:s!",
    "core/v1.HostPathVolumeSource": "path=1:s! type=2:s!",
    "core/v1.ISCSIVolumeSource": (
        "targetPortal=1:s! iqn=2:s! lun=3:i! iscsiInterface=4:s fsType=5:s readOnly=6:b"
        " portals=7:[s chapAuthDiscovery=8:b chapAuthSession=11:b"
        " secretRef=10:LocalObjectReference initiatorName=12:s!"
    ),
    "core/v1.ImageVolumeSource": "reference=1:s pullPolicy=2:s",
    "core/v1.ImageVolumeStatus": "imageRef=1:s",
    "core/v1.KeyToPath": "key=1:s! path=2:s! mode=3:i! user=4:i!",
    "core/v1.Lifecycle": "postStart=1:LifecycleHandler preStop=2:LifecycleHandler stopSignal=3:s!",
    "core/v1.LifecycleHandler": (
        "exec=1:ExecAction httpGet=2:HTTPGetAction tcpSocket=3:TCPSocketAction sleep=4:SleepAction"
    ),
    "core/v1.LimitRange": "metadata=1:meta/v1.ObjectMeta spec=2:LimitRangeSpec",
    "core/v1.LimitRangeItem": (
        "type=1:s! max=2:{resource.Quantity min=3:{resource.Quantity default=4:{resource.Quantity"
        " defaultRequest=5:{resource.Quantity maxLimitRequestRatio=6:{resource.Quantity"
    ),
    "core/v1.LimitRangeSpec": "limits=1:[LimitRangeItem",
    "core/v1.LinuxContainerUser": "uid=1:i! gid=2:i! supplementalGroups=3:[i",
    "core/v1.LoadBalancerIngress": "ip=1:s hostname=2:s ipMode=3:s! ports=4:[PortStatus",
    "core/v1.LoadBalancerStatus": "ingress=1:[LoadBalancerIngress",
    "core/v1.LocalObjectReference": "name=1:s",
    "core/v1.ModifyVolumeStatus": "targetVolumeAttributesClassName=1:s status=2:s!",
    "core/v1.NFSVolumeSource": "server=1:s! path=2:s! readOnly=3:b",
    "core/v1.Namespace": (
        "metadata=1:meta/v1.ObjectMeta spec=2:NamespaceSpec status=3:NamespaceStatus"
    ),
    "core/v1.NamespaceCondition": (
        "type=1:s! status=2:s! lastTransitionTime=4:meta/v1.Time reason=5:s message=6:s"
    ),
    "core/v1.NamespaceSpec": "finalizers=1:[s",
    "core/v1.NamespaceStatus": "phase=1:s conditions=2:[NamespaceCondition",
    "core/v1.Node": "metadata=1:meta/v1.ObjectMeta spec=2:NodeSpec status=3:NodeStatus",
    "core/v1.NodeAddress": "type=1:s! address=2:s!",
    "core/v1.NodeAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution=1:NodeSelector"
        " preferredDuringSchedulingIgnoredDuringExecution=2:[PreferredSchedulingTerm"
    ),
    "core/v1.NodeAllocatableMappedResources": "name=1:s! quantity=2:resource.Quantity",
    "core/v1.NodeAllocatableOverheadResources": (
        "name=1:s! perPod=2:resource.Quantity perContainer=3:resource.Quantity"
    ),
    "core/v1.NodeAllocatableResourceClaimStatus": (
        "resourceClaimName=1:s! containers=2:[s mapping=4:[NodeAllocatableMappedResources"
        " overhead=5:[NodeAllocatableOverheadResources"
    ),
    "core/v1.NodeCondition": (
        "type=1:s! status=2:s! lastHeartbeatTime=3:meta/v1.Time lastTransitionTime=4:meta/v1.Time"
        " reason=5:s message=6:s"
    ),
    "core/v1.NodeConfigSource": "configMap=2:ConfigMapNodeConfigSource",
    "core/v1.NodeConfigStatus": (
        "assigned=1:NodeConfigSource active=2:NodeConfigSource lastKnownGood=3:NodeConfigSource"
        " error=4:s"
    ),
    "core/v1.NodeDaemonEndpoints": "kubeletEndpoint=1:DaemonEndpoint",
    "core/v1.NodeFeatures": "supplementalGroupsPolicy=1:b!",
    "core/v1.NodePodPreemptionPolicy": "disableResizePreemption=1:[s",
    "core/v1.NodeRuntimeHandler": "name=1:s! features=2:NodeRuntimeHandlerFeatures",
    "core/v1.NodeRuntimeHandlerFeatures": "recursiveReadOnlyMounts=1:b! userNamespaces=2:b!",
    "core/v1.NodeSelector": "nodeSelectorTerms=1:[NodeSelectorTerm",
    "core/v1.NodeSelectorRequirement": "key=1:s! operator=2:s! values=3:[s",
    "core/v1.NodeSelectorTerm": (
        "matchExpressions=1:[NodeSelectorRequirement matchFields=2:[NodeSelectorRequirement"
    ),
    "core/v1.NodeSpec": (
        "podCIDR=1:s podCIDRs=7:[s providerID=3:s unschedulable=4:b taints=5:[Taint"
        " configSource=6:NodeConfigSource externalID=2:s"
        " podPreemptionPolicy=8:NodePodPreemptionPolicy"
    ),
    "core/v1.NodeStatus": (
        "capacity=1:{resource.Quantity allocatable=2:{resource.Quantity phase=3:s"
        " conditions=4:[NodeCondition addresses=5:[NodeAddress"
        " daemonEndpoints=6:NodeDaemonEndpoints nodeInfo=7:NodeSystemInfo images=8:[ContainerImage"
        " volumesInUse=9:[s volumesAttached=10:[AttachedVolume config=11:NodeConfigStatus"
        " runtimeHandlers=12:[NodeRuntimeHandler features=13:NodeFeatures declaredFeatures=14:[s"
    ),
    "core/v1.NodeSwapStatus": "capacity=1:i!",
    "core/v1.NodeSystemInfo": (
        "machineID=1:s! systemUUID=2:s! bootID=3:s! kernelVersion=4:s! osImage=5:s!"
        " containerRuntimeVersion=6:s! kubeletVersion=7:s! kubeProxyVersion=8:s!"
        " operatingSystem=9:s! architecture=10:s! swap=11:NodeSwapStatus"
        " runningInUserNamespace=12:b!"
    ),
    "core/v1.ObjectFieldSelector": "apiVersion=1:s fieldPath=2:s!",
    "core/v1.ObjectReference": (
        "kind=1:s namespace=2:s name=3:s uid=4:s apiVersion=5:s resourceVersion=6:s fieldPath=7:s"
    ),
    "core/v1.PersistentVolumeClaim": (
        "metadata=1:meta/v1.ObjectMeta spec=2:PersistentVolumeClaimSpec"
        " status=3:PersistentVolumeClaimStatus"
    ),
    "core/v1.PersistentVolumeClaimCondition": (
        "type=1:s! status=2:s! lastProbeTime=3:meta/v1.Time lastTransitionTime=4:meta/v1.Time"
        " reason=5:s message=6:s"
    ),
    "core/v1.PersistentVolumeClaimSpec": (
        "accessModes=1:[s selector=4:meta/v1.LabelSelector resources=2:VolumeResourceRequirements"
        " volumeName=3:s storageClassName=5:s! volumeMode=6:s!"
        " dataSource=7:TypedLocalObjectReference dataSourceRef=8:TypedObjectReference"
        " volumeAttributesClassName=9:s!"
    ),
    "core/v1.PersistentVolumeClaimStatus": (
        "phase=1:s accessModes=2:[s capacity=3:{resource.Quantity"
        " conditions=4:[PersistentVolumeClaimCondition allocatedResources=5:{resource.Quantity"
        " allocatedResourceStatuses=7:{s currentVolumeAttributesClassName=8:s!"
        " modifyVolumeStatus=9:ModifyVolumeStatus healthStatus=10:VolumeHealthStatus"
    ),
    "core/v1.PersistentVolumeClaimTemplate": (
        "metadata=1:meta/v1.ObjectMeta spec=2:PersistentVolumeClaimSpec"
    ),
    "core/v1.PersistentVolumeClaimVolumeSource": "claimName=1:s! readOnly=2:b",
    "core/v1.PhotonPersistentDiskVolumeSource": "pdID=1:s! fsType=2:s",
    "core/v1.Pod": "metadata=1:meta/v1.ObjectMeta spec=2:PodSpec status=3:PodStatus",
    "core/v1.PodAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution=1:[PodAffinityTerm"
        " preferredDuringSchedulingIgnoredDuringExecution=2:[WeightedPodAffinityTerm"
    ),
    "core/v1.PodAffinityTerm": (
        "labelSelector=1:meta/v1.LabelSelector namespaces=2:[s topologyKey=3:s!"
        " namespaceSelector=4:meta/v1.LabelSelector matchLabelKeys=5:[s mismatchLabelKeys=6:[s"
    ),
    "core/v1.PodAntiAffinity": (
        "requiredDuringSchedulingIgnoredDuringExecution=1:[PodAffinityTerm"
        " preferredDuringSchedulingIgnoredDuringExecution=2:[WeightedPodAffinityTerm"
    ),
    "core/v1.PodCertificateProjection": (
        "signerName=1:s keyType=2:s maxExpirationSeconds=3:i! credentialBundlePath=4:s"
        " keyPath=5:s certificateChainPath=6:s userAnnotations=7:{s user=8:i!"
    ),
    "core/v1.PodCondition": (
        "type=1:s! observedGeneration=7:i status=2:s! lastProbeTime=3:meta/v1.Time"
        " lastTransitionTime=4:meta/v1.Time reason=5:s message=6:s"
    ),
    "core/v1.PodDNSConfig": "nameservers=1:[s searches=2:[s options=3:[PodDNSConfigOption",
    "core/v1.PodDNSConfigOption": "name=1:s value=2:s!",
    "core/v1.PodExtendedResourceClaimStatus": (
        "requestMappings=1:[ContainerExtendedResourceRequest resourceClaimName=2:s!"
    ),
    "core/v1.PodIP": "ip=1:s!",
    "core/v1.PodOS": "name=1:s!",
    "core/v1.PodReadinessGate": "conditionType=1:s!",
    "core/v1.PodResourceClaim": "name=1:s! resourceClaimName=3:s! resourceClaimTemplateName=4:s!",
    "core/v1.PodResourceClaimStatus": "name=1:s! resourceClaimName=2:s!",
    "core/v1.PodSchedulingGate": "name=1:s!",
    "core/v1.PodSchedulingGroup": "podGroupName=1:s!",
    "core/v1.PodSecurityContext": (
        "seLinuxOptions=1:SELinuxOptions windowsOptions=8:WindowsSecurityContextOptions"
        " runAsUser=2:i! runAsGroup=6:i! runAsNonRoot=3:b! supplementalGroups=4:[i"
        " supplementalGroupsPolicy=12:s! fsGroup=5:i! sysctls=7:[Sysctl fsGroupChangePolicy=9:s!"
        " seccompProfile=10:SeccompProfile appArmorProfile=11:AppArmorProfile"
        " seLinuxChangePolicy=13:s!"
    ),
    "core/v1.PodSpec": (
        "volumes=1:[Volume initContainers=20:[Container containers=2:[Container"
        " ephemeralContainers=34:[EphemeralContainer restartPolicy=3:s"
        " terminationGracePeriodSeconds=4:i! activeDeadlineSeconds=5:i! dnsPolicy=6:s"
        " nodeSelector=7:{s serviceAccountName=8:s serviceAccount=9:s"
        " automountServiceAccountToken=21:b! nodeName=10:s hostNetwork=11:b hostPID=12:b"
        " hostIPC=13:b shareProcessNamespace=27:b! securityContext=14:PodSecurityContext"
        " imagePullSecrets=15:[LocalObjectReference hostname=16:s subdomain=17:s"
        " affinity=18:Affinity schedulerName=19:s tolerations=22:[Toleration"
        " hostAliases=23:[HostAlias priorityClassName=24:s priority=25:i!"
        " dnsConfig=26:PodDNSConfig readinessGates=28:[PodReadinessGate runtimeClassName=29:s!"
        " enableServiceLinks=30:b! preemptionPolicy=31:s! overhead=32:{resource.Quantity"
        " topologySpreadConstraints=33:[TopologySpreadConstraint setHostnameAsFQDN=35:b!"
        " os=36:PodOS hostUsers=37:b! schedulingGates=38:[PodSchedulingGate"
        " resourceClaims=39:[PodResourceClaim resources=40:ResourceRequirements"
        " hostnameOverride=41:s! schedulingGroup=43:PodSchedulingGroup"
        " evictionResponders=44:[EvictionResponder"
    ),
    "core/v1.PodStatus": (
        "observedGeneration=17:i phase=1:s conditions=2:[PodCondition message=3:s reason=4:s"
        " nominatedNodeName=11:s hostIP=5:s hostIPs=16:[HostIP podIP=6:s podIPs=12:[PodIP"
        " startTime=7:meta/v1.Time initContainerStatuses=10:[ContainerStatus"
        " containerStatuses=8:[ContainerStatus qosClass=9:s"
        " ephemeralContainerStatuses=13:[ContainerStatus resize=14:s"
        " resourceClaimStatuses=15:[PodResourceClaimStatus"
        " extendedResourceClaimStatus=18:PodExtendedResourceClaimStatus"
        " allocatedResources=19:{resource.Quantity resources=20:ResourceRequirements"
        " nodeAllocatableResourceClaimStatuses=21:[NodeAllocatableResourceClaimStatus"
        " volumeHealth=22:[PodVolumeHealth"
    ),
    "core/v1.PodTemplate": "metadata=1:meta/v1.ObjectMeta template=2:PodTemplateSpec",
    "core/v1.PodTemplateSpec": "metadata=1:meta/v1.ObjectMeta spec=2:PodSpec",
    "core/v1.PodVolumeHealth": (
        "name=1:s! healthConditions=2:[VolumeHealthCondition lastTransitionTime=3:meta/v1.Time"
    ),
    "core/v1.PortStatus": "port=1:i! protocol=2:s! error=3:s!",
    "core/v1.PortworxVolumeSource": "volumeID=1:s! fsType=2:s readOnly=3:b",
    "core/v1.PreferredSchedulingTerm": "weight=1:i! preference=2:NodeSelectorTerm",
    "core/v1.Probe": (
        "=1:ProbeHandler initialDelaySeconds=2:i timeoutSeconds=3:i periodSeconds=4:i"
        " successThreshold=5:i failureThreshold=6:i terminationGracePeriodSeconds=7:i!"
    ),
    "core/v1.ProbeHandler": (
        "exec=1:ExecAction httpGet=2:HTTPGetAction tcpSocket=3:TCPSocketAction grpc=4:GRPCAction"
    ),
    "core/v1.ProjectedVolumeSource": (
        "sources=1:[VolumeProjection defaultMode=2:i! defaultUser=3:i!"
    ),
    "core/v1.QuobyteVolumeSource": (
        "registry=1:s! volume=2:s! readOnly=3:b user=4:s group=5:s tenant=6:s"
    ),
    "core/v1.RBDVolumeSource": (
        "monitors=1:[s image=2:s! fsType=3:s pool=4:s user=5:s keyring=6:s"
        " secretRef=7:LocalObjectReference readOnly=8:b"
    ),
    "core/v1.ReplicationController": (
        "metadata=1:meta/v1.ObjectMeta spec=2:ReplicationControllerSpec"
        " status=3:ReplicationControllerStatus"
    ),
    "core/v1.ReplicationControllerCondition": (
        "type=1:s! status=2:s! lastTransitionTime=3:meta/v1.Time reason=4:s message=5:s"
    ),
    "core/v1.ReplicationControllerSpec": (
        "replicas=1:i! minReadySeconds=4:i selector=2:{s template=3:PodTemplateSpec"
    ),
    "core/v1.ReplicationControllerStatus": (
        "replicas=1:i! fullyLabeledReplicas=2:i readyReplicas=4:i availableReplicas=5:i"
        " observedGeneration=3:i conditions=6:[ReplicationControllerCondition"
    ),
    "core/v1.ResourceClaim": "name=1:s! request=2:s",
    "core/v1.ResourceFieldSelector": "containerName=1:s resource=2:s! divisor=3:resource.Quantity",
    "core/v1.ResourceHealth": "resourceID=1:s! health=2:s message=6:s!",
    "core/v1.ResourceQuota": (
        "metadata=1:meta/v1.ObjectMeta spec=2:ResourceQuotaSpec status=3:ResourceQuotaStatus"
    ),
    "core/v1.ResourceQuotaSpec": (
        "hard=1:{resource.Quantity scopes=2:[s scopeSelector=3:ScopeSelector"
    ),
    "core/v1.ResourceQuotaStatus": "hard=1:{resource.Quantity used=2:{resource.Quantity",
    "core/v1.ResourceRequirements": (
        "limits=1:{resource.Quantity requests=2:{resource.Quantity claims=3:[ResourceClaim"
    ),
    "core/v1.ResourceStatus": "name=1:s! resources=2:[ResourceHealth",
    "core/v1.SELinuxOptions": "user=1:s role=2:s type=3:s level=4:s",
    "core/v1.ScaleIOVolumeSource": (
        "gateway=1:s! system=2:s! secretRef=3:LocalObjectReference sslEnabled=4:b"
        " protectionDomain=5:s storagePool=6:s storageMode=7:s volumeName=8:s fsType=9:s"
        " readOnly=10:b"
    ),
    "core/v1.ScopeSelector": "matchExpressions=1:[ScopedResourceSelectorRequirement",
    "core/v1.ScopedResourceSelectorRequirement": "scopeName=1:s! operator=2:s! values=3:[s",
    "core/v1.SeccompProfile": "type=1:s! localhostProfile=2:s!",
    "core/v1.Secret": (
        "metadata=1:meta/v1.ObjectMeta immutable=5:b! data=2:{y stringData=4:{s type=3:s"
    ),
    "core/v1.SecretEnvSource": "=1:LocalObjectReference optional=2:b!",
    "core/v1.SecretKeySelector": "=1:LocalObjectReference key=2:s! optional=3:b!",
    "core/v1.SecretProjection": "=1:LocalObjectReference items=2:[KeyToPath optional=4:b!",
    "core/v1.SecretVolumeSource": (
        "secretName=1:s items=2:[KeyToPath defaultMode=3:i! optional=4:b! defaultUser=5:i!"
    ),
    "core/v1.SecurityContext": (
        "capabilities=1:Capabilities privileged=2:b! seLinuxOptions=3:SELinuxOptions"
        " windowsOptions=10:WindowsSecurityContextOptions runAsUser=4:i! runAsGroup=8:i!"
        " runAsNonRoot=5:b! readOnlyRootFilesystem=6:b! allowPrivilegeEscalation=7:b!"
        " procMount=9:s! seccompProfile=11:SeccompProfile appArmorProfile=12:AppArmorProfile"
    ),
    "core/v1.Service": "metadata=1:meta/v1.ObjectMeta spec=2:ServiceSpec status=3:ServiceStatus",
    "core/v1.ServiceAccount": (
        "metadata=1:meta/v1.ObjectMeta secrets=2:[ObjectReference"
        " imagePullSecrets=3:[LocalObjectReference automountServiceAccountToken=4:b!"
    ),
    "core/v1.ServiceAccountTokenProjection": (
        "audience=1:s expirationSeconds=2:i! path=3:s! user=4:i!"
    ),
    "core/v1.ServicePort": (
        "name=1:s protocol=2:s appProtocol=6:s! port=3:i! targetPort=4:intstr.IntOrString"
        " nodePort=5:i"
    ),
    "core/v1.ServiceSpec": (
        "ports=1:[ServicePort selector=2:{s clusterIP=3:s clusterIPs=18:[s type=4:s"
        " externalIPs=5:[s sessionAffinity=7:s loadBalancerIP=8:s loadBalancerSourceRanges=9:[s"
        " externalName=10:s externalTrafficPolicy=11:s healthCheckNodePort=12:i"
        " publishNotReadyAddresses=13:b sessionAffinityConfig=14:SessionAffinityConfig"
        " ipFamilies=19:[s ipFamilyPolicy=17:s! allocateLoadBalancerNodePorts=20:b!"
        " loadBalancerClass=21:s! internalTrafficPolicy=22:s! trafficDistribution=23:s!"
    ),
    "core/v1.ServiceStatus": "loadBalancer=1:LoadBalancerStatus conditions=2:[meta/v1.Condition",
    "core/v1.SessionAffinityConfig": "clientIP=1:ClientIPConfig",
    "core/v1.SleepAction": "seconds=1:i!",
    "core/v1.StorageOSVolumeSource": (
        "volumeName=1:s volumeNamespace=2:s fsType=3:s readOnly=4:b"
        " secretRef=5:LocalObjectReference"
    ),
    "core/v1.Sysctl": "name=1:s! value=2:s!",
    "core/v1.TCPSocketAction": "port=1:intstr.IntOrString host=2:s",
    "core/v1.Taint": "key=1:s! value=2:s effect=3:s! timeAdded=4:meta/v1.Time",
    "core/v1.Toleration": "key=1:s operator=2:s value=3:s effect=4:s tolerationSeconds=5:i!",
    "core/v1.TopologySpreadConstraint": (
        "maxSkew=1:i! topologyKey=2:s! whenUnsatisfiable=3:s!"
        " labelSelector=4:meta/v1.LabelSelector minDomains=5:i! nodeAffinityPolicy=6:s!"
        " nodeTaintsPolicy=7:s! matchLabelKeys=8:[s"
    ),
    "core/v1.TypedLocalObjectReference": "apiGroup=1:s! kind=2:s! name=3:s!",
    "core/v1.TypedObjectReference": "apiGroup=1:s! kind=2:s! name=3:s! namespace=4:s!",
    "core/v1.Volume": "name=1:s! =2:VolumeSource",
    "core/v1.VolumeDevice": "name=1:s! devicePath=2:s!",
    "core/v1.VolumeHealthCondition": "status=1:s! reason=2:s! message=3:s",
    "core/v1.VolumeHealthStatus": (
        "healthConditions=1:[VolumeHealthCondition lastTransitionTime=2:meta/v1.Time"
    ),
    "core/v1.VolumeMount": (
        "name=1:s! readOnly=2:b recursiveReadOnly=7:s! mountPath=3:s! subPath=4:s"
        " mountPropagation=5:s! subPathExpr=6:s bindMountOptions=8:[s"
    ),
    "core/v1.VolumeMountStatus": (
        "name=1:s! mountPath=2:s! readOnly=3:b recursiveReadOnly=4:s! volumeStatus=5:VolumeStatus"
    ),
    "core/v1.VolumeProjection": (
        "secret=1:SecretProjection downwardAPI=2:DownwardAPIProjection"
        " configMap=3:ConfigMapProjection serviceAccountToken=4:ServiceAccountTokenProjection"
        " clusterTrustBundle=5:ClusterTrustBundleProjection"
        " podCertificate=6:PodCertificateProjection"
    ),
    "core/v1.VolumeResourceRequirements": (
        "limits=1:{resource.Quantity requests=2:{resource.Quantity"
    ),
    "core/v1.VolumeSource": (
        "hostPath=1:HostPathVolumeSource emptyDir=2:EmptyDirVolumeSource"
        " gcePersistentDisk=3:GCEPersistentDiskVolumeSource"
        " awsElasticBlockStore=4:AWSElasticBlockStoreVolumeSource gitRepo=5:GitRepoVolumeSource"
        " secret=6:SecretVolumeSource nfs=7:NFSVolumeSource iscsi=8:ISCSIVolumeSource"
        " glusterfs=9:GlusterfsVolumeSource"
        " persistentVolumeClaim=10:PersistentVolumeClaimVolumeSource rbd=11:RBDVolumeSource"
        " flexVolume=12:FlexVolumeSource cinder=13:CinderVolumeSource cephfs=14:CephFSVolumeSource"
        " flocker=15:FlockerVolumeSource downwardAPI=16:DownwardAPIVolumeSource"
        " fc=17:FCVolumeSource azureFile=18:AzureFileVolumeSource"
        " configMap=19:ConfigMapVolumeSource vsphereVolume=20:VsphereVirtualDiskVolumeSource"
        " quobyte=21:QuobyteVolumeSource azureDisk=22:AzureDiskVolumeSource"
        " photonPersistentDisk=23:PhotonPersistentDiskVolumeSource"
        " projected=26:ProjectedVolumeSource portworxVolume=24:PortworxVolumeSource"
        " scaleIO=25:ScaleIOVolumeSource storageos=27:StorageOSVolumeSource csi=28:CSIVolumeSource"
        " ephemeral=29:EphemeralVolumeSource image=30:ImageVolumeSource"
    ),
    "core/v1.VolumeStatus": "image=1:ImageVolumeStatus",
    "core/v1.VsphereVirtualDiskVolumeSource": (
        "volumePath=1:s! fsType=2:s storagePolicyName=3:s storagePolicyID=4:s"
    ),
    "core/v1.WeightedPodAffinityTerm": "weight=1:i! podAffinityTerm=2:PodAffinityTerm",
    "core/v1.WindowsSecurityContextOptions": (
        "gmsaCredentialSpecName=1:s! gmsaCredentialSpec=2:s! runAsUserName=3:s! hostProcess=4:b!"
    ),
    # networking/v1
    "networking/v1.HTTPIngressPath": "path=1:s pathType=3:s! backend=2:IngressBackend",
    "networking/v1.HTTPIngressRuleValue": "paths=1:[HTTPIngressPath",
    "networking/v1.IPBlock": "cidr=1:s! except=2:[s",
    "networking/v1.Ingress": (
        "metadata=1:meta/v1.ObjectMeta spec=2:IngressSpec status=3:IngressStatus"
    ),
    "networking/v1.IngressBackend": (
        "service=4:IngressServiceBackend resource=3:core/v1.TypedLocalObjectReference"
    ),
    "networking/v1.IngressClass": "metadata=1:meta/v1.ObjectMeta spec=2:IngressClassSpec",
    "networking/v1.IngressClassParametersReference": (
        "apiGroup=1:s! kind=2:s! name=3:s! scope=4:s! namespace=5:s!"
    ),
    "networking/v1.IngressClassSpec": "controller=1:s parameters=2:IngressClassParametersReference",
    "networking/v1.IngressLoadBalancerIngress": "ip=1:s hostname=2:s ports=4:[IngressPortStatus",
    "networking/v1.IngressLoadBalancerStatus": "ingress=1:[IngressLoadBalancerIngress",
    "networking/v1.IngressPortStatus": "port=1:i! protocol=2:s! error=3:s!",
    "networking/v1.IngressRule": "host=1:s =2:IngressRuleValue",
    "networking/v1.IngressRuleValue": "http=1:HTTPIngressRuleValue",
    "networking/v1.IngressServiceBackend": "name=1:s! port=2:ServiceBackendPort",
    "networking/v1.IngressSpec": (
        "ingressClassName=4:s! defaultBackend=1:IngressBackend tls=2:[IngressTLS"
        " rules=3:[IngressRule"
    ),
    "networking/v1.IngressStatus": "loadBalancer=1:IngressLoadBalancerStatus",
    "networking/v1.IngressTLS": "hosts=1:[s secretName=2:s",
    "networking/v1.NetworkPolicy": "metadata=1:meta/v1.ObjectMeta spec=2:NetworkPolicySpec",
    "networking/v1.NetworkPolicyEgressRule": "ports=1:[NetworkPolicyPort to=2:[NetworkPolicyPeer",
    "networking/v1.NetworkPolicyIngressRule": (
        "ports=1:[NetworkPolicyPort from=2:[NetworkPolicyPeer"
    ),
    "networking/v1.NetworkPolicyPeer": (
        "podSelector=1:meta/v1.LabelSelector namespaceSelector=2:meta/v1.LabelSelector"
        " ipBlock=3:IPBlock"
    ),
    "networking/v1.NetworkPolicyPort": "protocol=1:s! port=2:intstr.IntOrString endPort=3:i!",
    "networking/v1.NetworkPolicySpec": (
        "podSelector=1:meta/v1.LabelSelector ingress=2:[NetworkPolicyIngressRule"
        " egress=3:[NetworkPolicyEgressRule policyTypes=4:[s"
    ),
    "networking/v1.ServiceBackendPort": "name=1:s number=2:i",
    # policy/v1
    "policy/v1.Eviction": "metadata=1:meta/v1.ObjectMeta deleteOptions=2:meta/v1.DeleteOptions",
    "policy/v1.PodDisruptionBudget": (
        "metadata=1:meta/v1.ObjectMeta spec=2:PodDisruptionBudgetSpec"
        " status=3:PodDisruptionBudgetStatus"
    ),
    "policy/v1.PodDisruptionBudgetSpec": (
        "minAvailable=1:intstr.IntOrString selector=2:meta/v1.LabelSelector"
        " maxUnavailable=3:intstr.IntOrString unhealthyPodEvictionPolicy=4:s!"
    ),
    "policy/v1.PodDisruptionBudgetStatus": (
        "observedGeneration=1:i disruptedPods=2:{meta/v1.Time disruptionsAllowed=3:i!"
        " currentHealthy=4:i! desiredHealthy=5:i! expectedPods=6:i!"
        " conditions=7:[meta/v1.Condition"
    ),
    # rbac/v1
    "rbac/v1.AggregationRule": "clusterRoleSelectors=1:[meta/v1.LabelSelector",
    "rbac/v1.ClusterRole": (
        "metadata=1:meta/v1.ObjectMeta rules=2:[PolicyRule aggregationRule=3:AggregationRule"
    ),
    "rbac/v1.ClusterRoleBinding": (
        "metadata=1:meta/v1.ObjectMeta subjects=2:[Subject roleRef=3:RoleRef"
    ),
    "rbac/v1.PolicyRule": (
        "verbs=1:[s apiGroups=2:[s resources=3:[s resourceNames=4:[s nonResourceURLs=5:[s"
    ),
    "rbac/v1.Role": "metadata=1:meta/v1.ObjectMeta rules=2:[PolicyRule",
    "rbac/v1.RoleBinding": "metadata=1:meta/v1.ObjectMeta subjects=2:[Subject roleRef=3:RoleRef",
    "rbac/v1.RoleRef": "apiGroup=1:s! kind=2:s! name=3:s!",
    "rbac/v1.Subject": "kind=1:s! apiGroup=2:s name=3:s! namespace=4:s",
    # scheduling/v1
    "scheduling/v1.PriorityClass": (
        "metadata=1:meta/v1.ObjectMeta value=2:i! globalDefault=3:b description=4:s"
        " preemptionPolicy=5:s!"
    ),
    # scheduling/v1alpha3
    "scheduling/v1alpha3.TopologyConstraint": "key=1:s!",
    "scheduling/v1alpha3.WorkloadPodGroupAllDisruptionMode": "",
    "scheduling/v1alpha3.WorkloadPodGroupBasicSchedulingPolicy": "",
    "scheduling/v1alpha3.WorkloadPodGroupDisruptionMode": (
        "single=1:WorkloadPodGroupSingleDisruptionMode all=2:WorkloadPodGroupAllDisruptionMode"
    ),
    "scheduling/v1alpha3.WorkloadPodGroupGangSchedulingPolicy": "minCount=1:i!",
    "scheduling/v1alpha3.WorkloadPodGroupResourceClaim": (
        "name=1:s! resourceClaimName=2:s! resourceClaimTemplateName=3:s!"
    ),
    "scheduling/v1alpha3.WorkloadPodGroupSchedulingConstraints": "topology=1:[TopologyConstraint",
    "scheduling/v1alpha3.WorkloadPodGroupSchedulingPolicy": (
        "basic=1:WorkloadPodGroupBasicSchedulingPolicy gang=2:WorkloadPodGroupGangSchedulingPolicy"
    ),
    "scheduling/v1alpha3.WorkloadPodGroupSingleDisruptionMode": "",
}

# The top-level kinds, the only messages a request body may carry in its envelope.
KINDS = frozenset(
    (
        "meta/v1.DeleteOptions",
        "apps/v1.DaemonSet",
        "apps/v1.Deployment",
        "apps/v1.ReplicaSet",
        "apps/v1.StatefulSet",
        "authentication/v1.SelfSubjectReview",
        "authentication/v1.TokenRequest",
        "authentication/v1.TokenReview",
        "authorization/v1.LocalSubjectAccessReview",
        "authorization/v1.SelfSubjectAccessReview",
        "authorization/v1.SelfSubjectRulesReview",
        "authorization/v1.SubjectAccessReview",
        "autoscaling/v1.HorizontalPodAutoscaler",
        "autoscaling/v1.Scale",
        "autoscaling/v2.HorizontalPodAutoscaler",
        "batch/v1.CronJob",
        "batch/v1.Job",
        "certificates/v1.CertificateSigningRequest",
        "core/v1.Binding",
        "core/v1.ConfigMap",
        "core/v1.Endpoints",
        "core/v1.LimitRange",
        "core/v1.Namespace",
        "core/v1.Node",
        "core/v1.PersistentVolumeClaim",
        "core/v1.Pod",
        "core/v1.PodTemplate",
        "core/v1.ReplicationController",
        "core/v1.ResourceQuota",
        "core/v1.Secret",
        "core/v1.Service",
        "core/v1.ServiceAccount",
        "networking/v1.Ingress",
        "networking/v1.IngressClass",
        "networking/v1.NetworkPolicy",
        "policy/v1.Eviction",
        "policy/v1.PodDisruptionBudget",
        "rbac/v1.ClusterRole",
        "rbac/v1.ClusterRoleBinding",
        "rbac/v1.Role",
        "rbac/v1.RoleBinding",
        "scheduling/v1.PriorityClass",
    )
)

SCHEMA: dict[str, dict[int, Field]] = {
    name: _parse_spec(name, spec) for name, spec in _SPEC.items()
}
