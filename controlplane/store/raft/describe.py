"""Human-readable one-line renderings of Raft values, in etcd-io/raft's notation.

Used by the transcript tests (their expected output is made of these lines) and by the
runtime's debug logs, so that a message in a log reads the same as in a test:

    1->2 MsgApp Term:1 Log:1/3 Commit:3 Entries:[1/4 EntryNormal "foo"]
"""

from __future__ import annotations

from controlplane.store.raft import confchange
from controlplane.store.raft.types import (
    ConfChange,
    Entry,
    EntryType,
    HardState,
    Message,
    MessageType,
    Ready,
    Snapshot,
    SoftState,
)


def describe_entry(e: Entry) -> str:
    if e.type is EntryType.CONF_CHANGE:
        cc = ConfChange.decode(e.data)
        prefix = {0: "v", 1: "r", 2: "l"}[int(cc.type)]
        return f"{e.term}/{e.index} EntryConfChange {prefix}{cc.node_id}"
    return f"{e.term}/{e.index} EntryNormal {_quote(e.data)}"


def _quote(data: bytes) -> str:
    try:
        text = data.decode()
    except UnicodeDecodeError:
        return data.hex()
    return '"' + text.replace('"', '\\"') + '"'


def describe_snapshot(s: Snapshot) -> str:
    m = s.metadata
    return f"Index:{m.index} Term:{m.term} ConfState:{confchange.describe(m.conf_state)}"


def describe_message(m: Message) -> str:
    s = f"{m.frm:x}->{m.to:x} {m.type.wire_name} Term:{m.term} Log:{m.log_term}/{m.index}"
    if m.reject:
        s += f" Rejected (Hint: {m.reject_hint})"
    if m.commit:
        s += f" Commit:{m.commit}"
    if m.entries:
        s += " Entries:[" + ", ".join(describe_entry(e) for e in m.entries) + "]"
    if m.snapshot is not None:
        s += " Snapshot: " + describe_snapshot(m.snapshot)
    if m.context and m.type is not MessageType.APP:
        s += f" Context:{_quote(m.context)}"
    return s


def describe_hard_state(hs: HardState) -> str:
    return f"Term:{hs.term} Vote:{hs.vote:x} Commit:{hs.commit}"


def describe_soft_state(ss: SoftState) -> str:
    return f"Lead:{ss.lead:x} State:{ss.raft_state.value}"


def describe_ready(rd: Ready) -> list[str]:
    """The lines of a Ready, omitting empty parts."""
    lines = [f"Ready MustSync={str(rd.must_sync).lower()}:"]
    if rd.soft_state is not None:
        lines.append(describe_soft_state(rd.soft_state))
    if rd.hard_state is not None:
        lines.append("HardState " + describe_hard_state(rd.hard_state))
    if rd.read_states:
        lines.append("ReadStates:")
        lines += [f"  Index:{r.index} Ctx:{_quote(r.request_ctx)}" for r in rd.read_states]
    if rd.entries:
        lines.append("Entries:")
        lines += ["  " + describe_entry(e) for e in rd.entries]
    if rd.snapshot is not None:
        lines.append("Snapshot " + describe_snapshot(rd.snapshot))
    if rd.committed_entries:
        lines.append("CommittedEntries:")
        lines += ["  " + describe_entry(e) for e in rd.committed_entries]
    if rd.messages:
        lines.append("Messages:")
        lines += ["  " + describe_message(m) for m in rd.messages]
    return lines
