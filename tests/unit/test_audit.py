"""The apiserver's audit log."""

from __future__ import annotations

import json
from pathlib import Path

from controlplane.apiserver.audit import AuditLog
from controlplane.apiserver.authn import UserInfo
from controlplane.apiserver.requestinfo import parse


def test_a_request_ending_after_close_is_not_recorded_and_does_not_fail(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "audit.log")
    info = parse("GET", "/api/v1/namespaces/default/pods", {"watch": "1"})
    user = UserInfo("alice", groups=("system:authenticated",))
    log.record("id-1", info, user, 200, "127.0.0.1", "kubectl")
    log.close()
    log.record("id-2", info, user, 200, "127.0.0.1", "kubectl")  # a watch outliving stop()
    lines = (tmp_path / "audit.log").read_text().splitlines()
    assert [json.loads(line)["auditID"] for line in lines] == ["id-1"]
