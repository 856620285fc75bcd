"""`labctl store`: etcdctl for the lab's store, the store commands of `labctl`.

``labctl store ...`` has etcdctl's verbs, flags, ID notation (hex) and output formats,
so that etcd's documentation and habits carry over, and so a session can be compared
line by line with etcdctl against a real etcd. It goes through `kubelab.storeclient`,
i.e. the v3 JSON gateway, which both speak.

The command itself is `lab.labctl`, one `labctl` over the store and the lab; this
module, the library's part, gives it the ``store`` parser (`add_parser`, with the
store's options from `options`) and runs the verb parsed (`run`). It imports the client
library only, so ``labctl store put`` loads neither the store's runtime nor the lab's.

    labctl store put greeting hello
    labctl store get greeting -w json
    labctl store watch --prefix /registry/pods/ --rev 1
    labctl store member list -w table
    labctl store endpoint status --cluster -w table

Departures from etcdctl, each for a reason:

* ``-w json`` prints the gateway's JSON with 64-bit integers as numbers, which is what
  etcdctl prints for most verbs; for the few where etcdctl dumps Go structs (txn, watch,
  lease) the gateway's shape is kept rather than imitating Go's field names.
* ``snapshot save`` accepts several endpoints and streams from the first that answers
  (etcdctl insists on exactly one); the member used is named on stderr.
* ``snapshot status`` and ``snapshot restore`` work on files, not on a running store:
  they are `labutl`'s (`controlplane.store.labutl`), as etcdutl took them from etcdctl,
  so labctl never loads the store's runtime; labctl names the command to run.
* ``defrag`` does nothing: kubelab's store has no bbolt file to defragment.
* Errors print ``Error: <message>`` and exit 1; an unreachable store says which
  endpoints were tried and why. Usage errors exit 2 (argparse's convention), Ctrl-C
  exits 130 (the shell's), both without a traceback.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn, TextIO

from kubelab import pki
from kubelab.cli.offline import add_restore_arguments, add_status_arguments, labutl_command
from kubelab.cli.output import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    CommandError,
    ascii_table,
    emit,
    human_bytes,
)
from kubelab.storeclient import (
    Alarm,
    CompactedError,
    Compare,
    CompareOp,
    Delete,
    DeleteResult,
    Get,
    GrpcCode,
    KeyValue,
    Member,
    NotFound,
    Op,
    Put,
    PutResult,
    RangeResult,
    SortOrder,
    SortTarget,
    StoreClient,
    StoreError,
    TxnResult,
    Unavailable,
    Unreachable,
    WatchResponse,
    prefix_end,
)

DEFAULT_ENDPOINTS = "http://127.0.0.1:12379,http://127.0.0.1:22379,http://127.0.0.1:32379"
"""Where `make up` puts the local three-member store."""

# -- output ------------------------------------------------------------------------------


_INT64_FIELDS = frozenset(
    {
        "cluster_id",
        "member_id",
        "revision",
        "raft_term",
        "create_revision",
        "mod_revision",
        "version",
        "lease",
        "count",
        "deleted",
        "compact_revision",
        "watch_id",
        "ID",
        "TTL",
        "grantedTTL",
        "dbSize",
        "dbSizeInUse",
        "leader",
        "raftIndex",
        "raftTerm",
        "raftAppliedIndex",
        "memberID",
    }
)
_DECIMAL = re.compile(r"-?\d+")


def _etcdctl_json(value: Any) -> Any:
    """The gateway's JSON with its int64 strings as numbers, as etcdctl prints them.

    Only fields known to be int64 are converted: a member named "42" or a status
    ``version`` of "3.4.23" stays a string.
    """
    if isinstance(value, dict):
        return {
            k: int(v)
            if k in _INT64_FIELDS and isinstance(v, str) and _DECIMAL.fullmatch(v)
            else _etcdctl_json(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_etcdctl_json(v) for v in value]
    return value


def _emit_json(value: Any) -> None:
    emit(json.dumps(_etcdctl_json(value), separators=(",", ":")))


def _report(ctx: Context, raw: Any, *lines: str) -> int:
    """A command's answer: the raw response with -w json, else etcdctl's text lines."""
    if ctx.json:
        _emit_json(raw)
    else:
        emit(*lines)
    return 0


def go_duration(ns: int) -> str:
    """A duration below a minute as Go prints one ("870.994µs", "1.141291ms", "2.5s")."""
    if ns < 1_000:
        return f"{ns}ns"
    unit, places = ("µs", 3) if ns < 1_000_000 else ("ms", 6) if ns < 10**9 else ("s", 9)
    whole, frac = divmod(ns, 10**places)
    digits = f"{frac:0{places}d}".rstrip("0")
    return f"{whole}.{digits}{unit}" if digits else f"{whole}{unit}"


def _emit_kv(kv: KeyValue, value_only: bool = False) -> None:
    if value_only:
        emit(kv.value)
    else:
        emit(kv.key, kv.value)


def _emit_put(result: PutResult) -> None:
    emit("OK")
    if result.prev_kv is not None:
        _emit_kv(result.prev_kv)


def _emit_range(result: RangeResult, value_only: bool = False) -> None:
    for kv in result.kvs:
        _emit_kv(kv, value_only)


def _emit_delete(result: DeleteResult) -> None:
    emit(str(result.deleted))
    for kv in result.prev_kvs:
        _emit_kv(kv)


def _emit_txn(result: TxnResult) -> None:
    emit("SUCCESS" if result.succeeded else "FAILURE")
    for response in result.responses:
        emit("")
        if isinstance(response, PutResult):
            _emit_put(response)
        elif isinstance(response, RangeResult):
            _emit_range(response)
        elif isinstance(response, DeleteResult):
            _emit_delete(response)
        else:
            _emit_txn(response)


def _emit_events(response: WatchResponse) -> None:
    for event in response.events:
        emit(event.type)
        if event.prev_kv is not None:
            _emit_kv(event.prev_kv)
        _emit_kv(event.kv)


# -- input -------------------------------------------------------------------------------


def _hex_id(text: str, what: str) -> int:
    try:
        return int(text, 16)
    except ValueError:
        raise CommandError(f"bad {what} ID arg ({text!r}), expecting ID in hex") from None


def _duration(text: str) -> float:
    """Seconds from "5s", "500ms", "1m" (etcdctl's flag syntax) or a plain number."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m)?", text.strip())
    if not match:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 5s or 500ms")
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, None: 1.0}[match[2]]
    return float(match[1]) * scale


def _normalize_endpoint(endpoint: str, tls: bool) -> str:
    """etcdctl takes "127.0.0.1:2379" too; the scheme then follows whether TLS is set up."""
    endpoint = endpoint.strip()
    if "://" not in endpoint:
        endpoint = ("https://" if tls else "http://") + endpoint
    return endpoint


_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|\S+')


def _unquote(token: str) -> str:
    if token.startswith('"'):
        try:
            text: str = json.loads(token)
        except ValueError:
            raise CommandError(f"malformed quoted string {token}") from None
        return text
    return token


def _split(line: str) -> list[str]:
    """etcdctl's txn tokenising: whitespace-separated words or double-quoted strings."""
    return [_unquote(t) for t in _TOKEN.findall(line)]


_COMPARE_LINE = re.compile(
    r'\s*(\w+)\s*\(\s*("(?:[^"\\]|\\.)*")\s*\)\s*(==|=|!=|<|>)\s*("(?:[^"\\]|\\.)*")\s*'
)


_COMPARE_OPS: dict[str, CompareOp] = {"=": "=", "==": "=", "!=": "!=", "<": "<", ">": ">"}


def parse_compare(line: str) -> Compare:
    """One line of a txn's compare section: ``mod("k") > "0"``, ``value("k") = "v"``.

    Targets as etcdctl spells them: ver/version, c/create, m/mod, val/value, lease (an ID
    in hex, like every lease ID on this command line).
    """
    match = _COMPARE_LINE.fullmatch(line)
    if not match:
        raise CommandError(f'malformed comparison: {line} (want e.g. mod("key") > "0")')
    target, key, op_text, operand = match[1], _unquote(match[2]), match[3], _unquote(match[4])
    op = _COMPARE_OPS[op_text]
    if target in ("val", "value"):
        return Compare.value(key, op, operand)
    if target == "lease":
        return Compare.lease(key, op, _hex_id(operand, "lease"))
    numeric: dict[str, Callable[[str, CompareOp, int], Compare]] = {
        "ver": Compare.version,
        "version": Compare.version,
        "c": Compare.create,
        "create": Compare.create,
        "m": Compare.mod,
        "mod": Compare.mod,
    }
    if target not in numeric:
        raise CommandError(f"malformed comparison: {line} (unknown target {target})")
    try:
        number = int(operand)
    except ValueError:
        raise CommandError(f"malformed comparison: {line} ({operand!r} is not a number)") from None
    return numeric[target](key, op, number)


class _RaisingParser(argparse.ArgumentParser):
    """A parser for txn lines: errors become `CommandError`, never an exit."""

    def error(self, message: str) -> NoReturn:
        raise CommandError(f"{self.prog}: {message}")


def _add_put_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("value")
    p.add_argument("--lease", default="0", help="lease ID (in hex) to attach the key to")
    p.add_argument("--prev-kv", action="store_true", help="return the previous key-value")


def _add_get_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("range_end", nargs="?", default="")
    p.add_argument("--prefix", action="store_true", help="get keys with this prefix")
    p.add_argument("--from-key", action="store_true", help="get keys >= the given key")
    p.add_argument("--keys-only", action="store_true", help="get only the keys")
    p.add_argument("--count-only", action="store_true", help="get only the count")
    p.add_argument("--rev", type=int, default=0, help="read at this revision")
    p.add_argument("--limit", type=int, default=0, help="maximum number of results")
    p.add_argument(
        "--consistency",
        choices=["l", "s"],
        default="l",
        help="linearizable (l) or serializable (s)",
    )
    p.add_argument("--order", choices=["ASCEND", "DESCEND"], help="order of results")
    p.add_argument(
        "--sort-by", choices=["CREATE", "KEY", "MODIFY", "VALUE", "VERSION"], help="sort target"
    )
    p.add_argument("--print-value-only", action="store_true", help="print only values")


def _add_del_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("key")
    p.add_argument("range_end", nargs="?", default="")
    p.add_argument("--prefix", action="store_true", help="delete keys with this prefix")
    p.add_argument("--from-key", action="store_true", help="delete keys >= the given key")
    p.add_argument("--prev-kv", action="store_true", help="return the deleted key-values")


def _key_range(args: argparse.Namespace) -> tuple[bytes, bytes]:
    key = args.key.encode()
    if args.prefix and args.from_key:
        raise CommandError("--prefix and --from-key cannot be set at the same time, choose one")
    if args.prefix:
        return key or b"\0", prefix_end(key)
    if args.from_key:
        return key or b"\0", b"\0"
    return key, args.range_end.encode()


def _put_request(args: argparse.Namespace) -> Put:
    return Put(args.key.encode(), args.value.encode(), _hex_id(args.lease, "lease"), args.prev_kv)


def _get_request(args: argparse.Namespace) -> Get:
    key, end = _key_range(args)
    sort_order: SortOrder | None = args.order
    sort_target: SortTarget | None = "MOD" if args.sort_by == "MODIFY" else args.sort_by
    return Get(
        key,
        end,
        limit=args.limit,
        revision=args.rev,
        keys_only=args.keys_only,
        count_only=args.count_only,
        serializable=args.consistency == "s",
        sort_order=sort_order,
        sort_target=sort_target,
    )


def _delete_request(args: argparse.Namespace) -> Delete:
    key, end = _key_range(args)
    return Delete(key, end, args.prev_kv)


_OP_PARSERS: dict[str, tuple[Callable[[argparse.ArgumentParser], None], Callable[..., Op]]] = {
    "put": (_add_put_args, _put_request),
    "get": (_add_get_args, _get_request),
    "del": (_add_del_args, _delete_request),
}


def parse_op(line: str) -> Op:
    """One line of a txn's success or failure section: ``put k v``, ``get k --prefix``..."""
    words = _split(line)
    if not words or words[0] not in _OP_PARSERS:
        raise CommandError(f"malformed request: {line} (expected get, put or del)")
    add_args, build = _OP_PARSERS[words[0]]
    parser = _RaisingParser(prog=words[0], add_help=False)
    add_args(parser)
    op: Op = build(parser.parse_args(words[1:]))
    return op


def _read_section(stdin: TextIO, prompt: str | None) -> list[str]:
    """Lines up to a blank line or the end of input."""
    if prompt is not None:
        emit(prompt)
    lines = []
    for raw in stdin:
        line = raw.strip()
        if not line:
            break
        lines.append(line)
    return lines


# -- commands ----------------------------------------------------------------------------


@dataclass
class Context:
    """What every command needs: the parsed flags and a client made on first use."""

    args: argparse.Namespace
    endpoints: list[str]
    write_out: str
    timeout: float
    tls_files: tuple[str | None, str | None, str | None]
    _client: StoreClient | None = field(default=None, init=False)

    @property
    def client(self) -> StoreClient:
        if self._client is None:
            ca, cert, key = self.tls_files
            self._client = StoreClient(
                self.endpoints, ca_file=ca, cert_file=cert, key_file=key, timeout=self.timeout
            )
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()

    @property
    def json(self) -> bool:
        return self.write_out == "json"

    @property
    def table(self) -> bool:
        return self.write_out == "table"


def cmd_put(ctx: Context) -> int:
    req = _put_request(ctx.args)
    result = ctx.client.put(req.key, req.value, req.lease, req.prev_kv)
    if ctx.json:
        _emit_json(result.raw)
    else:
        _emit_put(result)
    return 0


def cmd_get(ctx: Context) -> int:
    result = ctx.client.range(_get_request(ctx.args))
    if ctx.json:
        _emit_json(result.raw)
    elif ctx.args.count_only:
        emit(str(result.count))
    else:
        _emit_range(result, ctx.args.print_value_only)
    return 0


def cmd_del(ctx: Context) -> int:
    req = _delete_request(ctx.args)
    result = ctx.client.delete(req.key, req.range_end, prev_kv=req.prev_kv)
    if ctx.json:
        _emit_json(result.raw)
    else:
        _emit_delete(result)
    return 0


def cmd_txn(ctx: Context) -> int:
    interactive = ctx.args.interactive
    compares = _read_section(sys.stdin, "compares:" if interactive else None)
    success = _read_section(sys.stdin, "success requests (get, put, del):" if interactive else None)
    failure = _read_section(sys.stdin, "failure requests (get, put, del):" if interactive else None)
    result = ctx.client.txn(
        [parse_compare(line) for line in compares],
        [parse_op(line) for line in success],
        [parse_op(line) for line in failure],
    )
    if ctx.json:
        _emit_json(result.raw)
    else:
        _emit_txn(result)
    return 0


def _watch_canceled(response: WatchResponse) -> StoreError:
    if response.compact_revision:
        return CompactedError(
            GrpcCode.OUT_OF_RANGE,
            "watch canceled: etcdserver: mvcc: required revision has been compacted "
            f"(history starts at revision {response.compact_revision})",
        )
    reason = response.cancel_reason or "no reason given"
    return StoreError(GrpcCode.CANCELLED, f"watch canceled by the server: {reason}")


def cmd_watch(ctx: Context) -> int:
    """Print events until Ctrl-C.

    Once the watch is established, a member going away does not end it: like etcd's
    client, it re-watches from the revision after the last event seen, on whichever
    endpoint answers, so no event is lost or repeated.
    """
    args = ctx.args
    key, end = _key_range(args)
    next_rev = args.rev
    established = False
    while True:
        try:
            with ctx.client.watch(key, end, start_revision=next_rev, prev_kv=args.prev_kv) as w:
                for response in w:
                    if response.canceled:
                        raise _watch_canceled(response)
                    if response.created and next_rev == 0:
                        next_rev = response.header.revision + 1
                    established = True
                    if response.events:
                        next_rev = response.events[-1].kv.mod_revision + 1
                        if ctx.json:
                            _emit_json(response.raw)
                        else:
                            _emit_events(response)
        except Unavailable as exc:
            if not established:
                raise
            print(f"watch: {exc}; re-watching from revision {next_rev}", file=sys.stderr)
            time.sleep(1.0)


def cmd_compaction(ctx: Context) -> int:
    result = ctx.client.compact(ctx.args.revision, physical=ctx.args.physical)
    return _report(ctx, result.raw, f"compacted revision {ctx.args.revision}")


def cmd_lease_grant(ctx: Context) -> int:
    result = ctx.client.lease_grant(ctx.args.ttl)
    return _report(ctx, result.raw, f"lease {result.id:016x} granted with TTL({result.ttl}s)")


def cmd_lease_revoke(ctx: Context) -> int:
    lease_id = _hex_id(ctx.args.id, "lease")
    result = ctx.client.lease_revoke(lease_id)
    return _report(ctx, result.raw, f"lease {lease_id:016x} revoked")


def cmd_lease_keepalive(ctx: Context) -> int:
    """Refresh the lease a third of its TTL apart (as etcd's client does) until Ctrl-C."""
    lease_id = _hex_id(ctx.args.id, "lease")
    while True:
        try:
            result = ctx.client.lease_keepalive_once(lease_id)
        except NotFound:
            if ctx.args.once:
                raise
            emit(f"lease {lease_id:016x} expired or revoked.")
            return 0
        if ctx.json:
            _emit_json(result.raw)
        else:
            emit(f"lease {result.id:016x} keepalived with TTL({result.ttl})")
        if ctx.args.once:
            return 0
        time.sleep(max(result.ttl / 3, 0.5))


def cmd_lease_timetolive(ctx: Context) -> int:
    result = ctx.client.lease_timetolive(_hex_id(ctx.args.id, "lease"), keys=ctx.args.keys)
    if ctx.json:
        _emit_json(result.raw)
    elif result.ttl == -1 and result.granted_ttl == 0:
        emit(f"lease {result.id:016x} already expired")
    else:
        text = f"lease {result.id:016x} granted with TTL({result.granted_ttl}s), "
        text += f"remaining({result.ttl}s)"
        if ctx.args.keys:
            names = " ".join(k.decode(errors="replace") for k in result.keys)
            text += f", attached keys([{names}])"
        emit(text)
    return 0


def cmd_lease_list(ctx: Context) -> int:
    result = ctx.client.lease_leases()
    return _report(
        ctx, result.raw, f"found {len(result.ids)} leases", *(f"{i:016x}" for i in result.ids)
    )


def _member_rows(members: Sequence[Member]) -> list[list[str]]:
    return [
        [
            f"{m.id:x}",
            "started" if m.name else "unstarted",
            m.name,
            ",".join(m.peer_urls),
            ",".join(m.client_urls),
            str(m.is_learner).lower(),
        ]
        for m in members
    ]


def cmd_member_list(ctx: Context) -> int:
    result = ctx.client.member_list()
    rows = _member_rows(result.members)
    if ctx.json:
        _emit_json(result.raw)
    elif ctx.table:
        header = ["ID", "STATUS", "NAME", "PEER ADDRS", "CLIENT ADDRS", "IS LEARNER"]
        emit(ascii_table(header, rows))
    else:
        emit(*(", ".join(row) for row in rows))
    return 0


def cmd_member_add(ctx: Context) -> int:
    peer_urls = [u.strip() for u in ctx.args.peer_urls.split(",") if u.strip()]
    if not peer_urls:
        raise CommandError("member peer urls not provided (--peer-urls)")
    result = ctx.client.member_add(peer_urls, is_learner=ctx.args.learner)
    if ctx.json:
        _emit_json(result.raw)
        return 0
    new = result.member
    learner = " as learner " if new.is_learner else " "
    initial = [
        f"{ctx.args.name if m.id == new.id else m.name}={url}"
        for m in result.members
        for url in m.peer_urls
    ]
    emit(
        f"Member {new.id:16x} added{learner}to cluster {result.header.cluster_id:16x}",
        "",
        f'ETCD_NAME="{ctx.args.name}"',
        f'ETCD_INITIAL_CLUSTER="{",".join(initial)}"',
        f'ETCD_INITIAL_ADVERTISE_PEER_URLS="{",".join(peer_urls)}"',
        'ETCD_INITIAL_CLUSTER_STATE="existing"',
    )
    return 0


def cmd_member_remove(ctx: Context) -> int:
    member_id = _hex_id(ctx.args.id, "member")
    result = ctx.client.member_remove(member_id)
    return _report(
        ctx,
        result.raw,
        f"Member {member_id:16x} removed from cluster {result.header.cluster_id:16x}",
    )


def cmd_member_promote(ctx: Context) -> int:
    member_id = _hex_id(ctx.args.id, "member")
    result = ctx.client.member_promote(member_id)
    return _report(
        ctx,
        result.raw,
        f"Member {member_id:16x} promoted in cluster {result.header.cluster_id:16x}",
    )


def _target_endpoints(ctx: Context) -> list[str]:
    """The endpoints given, or with --cluster every member's client URLs."""
    if not ctx.args.cluster:
        return ctx.endpoints
    urls = [u for m in ctx.client.member_list().members for u in m.client_urls]
    return list(dict.fromkeys(urls))


def cmd_endpoint_status(ctx: Context) -> int:
    rows: list[list[str]] = []
    raw: list[dict[str, Any]] = []
    failed = 0
    for endpoint in _target_endpoints(ctx):
        try:
            st = ctx.client.for_endpoint(endpoint).status()
        except StoreError as exc:
            print(f"Failed to get the status of endpoint {endpoint} ({exc})", file=sys.stderr)
            failed += 1
            continue
        raw.append({"Endpoint": endpoint, "Status": st.raw})
        rows.append(
            [
                endpoint,
                f"{st.header.member_id:x}",
                st.version,
                human_bytes(st.db_size),
                str(st.is_leader).lower(),
                str(st.is_learner).lower(),
                str(st.raft_term),
                str(st.raft_index),
                str(st.raft_applied_index),
                ", ".join(st.errors),
            ]
        )
    if ctx.json:
        _emit_json(raw)
    elif ctx.table:
        header = [
            "ENDPOINT",
            "ID",
            "VERSION",
            "DB SIZE",
            "IS LEADER",
            "IS LEARNER",
            "RAFT TERM",
            "RAFT INDEX",
            "RAFT APPLIED INDEX",
            "ERRORS",
        ]
        emit(ascii_table(header, rows))
    else:
        emit(*(", ".join(row) for row in rows))
    return EXIT_ERROR if failed else 0


def cmd_endpoint_health(ctx: Context) -> int:
    checks: list[tuple[str, bool, str, str]] = []
    for endpoint in _target_endpoints(ctx):
        start = time.perf_counter_ns()
        try:
            health = ctx.client.for_endpoint(endpoint).health()
            error = "" if health.healthy else (health.reason or "unhealthy")
        except StoreError as exc:
            error = str(exc)
        took = go_duration(time.perf_counter_ns() - start)
        checks.append((endpoint, not error, took, error))
    if ctx.json:
        _emit_json(
            [
                {"endpoint": ep, "health": ok, "took": took, **({"error": err} if err else {})}
                for ep, ok, took, err in checks
            ]
        )
    elif ctx.table:
        rows = [[ep, str(ok).lower(), took, err] for ep, ok, took, err in checks]
        emit(ascii_table(["ENDPOINT", "HEALTH", "TOOK", "ERROR"], rows))
    else:
        for ep, ok, took, err in checks:
            if ok:
                emit(f"{ep} is healthy: successfully committed proposal: took = {took}")
            else:
                print(f"{ep} is unhealthy: failed to commit proposal: {err}", file=sys.stderr)
    if all(ok for _, ok, _, _ in checks):
        return 0
    raise CommandError("unhealthy cluster")


def cmd_snapshot_save(ctx: Context) -> int:
    saved = ctx.client.snapshot_save(ctx.args.file)
    print(f"fetched snapshot from {saved.endpoint} ({saved.size} bytes)", file=sys.stderr)
    emit(f"Snapshot saved at {saved.path}")
    return 0


def cmd_snapshot_status(ctx: Context) -> int:
    raise _moved_to_labutl(ctx, "status")


def cmd_snapshot_restore(ctx: Context) -> int:
    raise _moved_to_labutl(ctx, "restore")


def _moved_to_labutl(ctx: Context, verb: str) -> CommandError:
    """`snapshot status` and `snapshot restore` read and write files with the store's own
    state machine and WAL, which labctl does not load (etcd moved them from etcdctl to
    etcdutl for the same reason): say which command does it, with the arguments given."""
    command = shlex.join(labutl_command(verb, ctx.args, ctx.write_out))
    return CommandError(
        f"`labctl store snapshot {verb}` works on files offline and moved to labutl "
        f"(as etcdctl's moved to etcdutl): run `{command}`"
    )


def cmd_defrag(ctx: Context) -> int:
    emit(
        "defrag: nothing to do: kubelab's store keeps no bbolt database file to defragment "
        "(its WAL and snapshots are trimmed as it goes); this command is a no-op"
    )
    return 0


def cmd_alarm_list(ctx: Context) -> int:
    result = ctx.client.alarm_list()
    _emit_alarms(ctx, result.raw, result.alarms)
    return 0


def cmd_alarm_disarm(ctx: Context) -> int:
    result = ctx.client.alarm_disarm()
    _emit_alarms(ctx, result.raw, result.alarms)
    return 0


def _emit_alarms(ctx: Context, raw: dict[str, Any], alarms: Sequence[Alarm]) -> None:
    if ctx.json:
        _emit_json(raw)
    else:
        emit(*(f"memberID:{a.member_id} alarm:{a.alarm}" for a in alarms))


# -- parser ------------------------------------------------------------------------------

Command = Callable[[Context], int]
_TABLE_VERBS = {cmd_member_list, cmd_endpoint_status, cmd_endpoint_health, cmd_snapshot_status}


def options() -> argparse.ArgumentParser:
    """The store's options, accepted at every level (``labctl -w json store get k``,
    ``labctl store -w json get k`` or ``... get k -w json``), as a parent parser. Their
    defaults are suppressed so a lower level never resets what a higher one set, and so
    that only the options given are in the parsed arguments; `run` fills in the rest."""
    common = argparse.ArgumentParser(add_help=False)
    g = common.add_argument_group("store options")
    s = argparse.SUPPRESS
    g.add_argument(
        "--endpoints", default=s, help=f"comma-separated store URLs (default {DEFAULT_ENDPOINTS})"
    )
    g.add_argument(
        "--cacert", default=s, metavar="FILE", help="verify the store's certificate with this CA"
    )
    # Not dest "key": that is the KEY argument of put, get, del and watch.
    g.add_argument(
        "--cert", dest="cert_file", default=s, metavar="FILE", help="client certificate (mTLS)"
    )
    g.add_argument("--key", dest="key_file", default=s, metavar="FILE", help="client key (mTLS)")
    g.add_argument(
        "-w",
        "--write-out",
        choices=["simple", "json", "table"],
        default=s,
        help="output format (default simple)",
    )
    g.add_argument(
        "--command-timeout",
        type=_duration,
        default=s,
        help="timeout of each request, e.g. 5s or 500ms (default 5s)",
    )
    return common


def add_parser(
    commands: argparse._SubParsersAction[argparse.ArgumentParser], common: argparse.ArgumentParser
) -> argparse.ArgumentParser:
    """Add ``store`` and its verbs to `commands` (labctl's); `common` is `options()`.

    Each verb's parser names its function (``func``), which `run` calls.
    """
    store = commands.add_parser(
        "store",
        parents=[common],
        help="the store (etcd's role), with etcdctl's verbs",
        description="Talk to the store through its etcd v3 JSON API, like etcdctl.",
    )
    verbs = store.add_subparsers(dest="verb", required=True, metavar="VERB")

    def verb(
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser],
        name: str,
        func: Command,
        text: str,
    ) -> argparse.ArgumentParser:
        p = subparsers.add_parser(name, parents=[common], help=text, description=text)
        p.set_defaults(func=func)
        return p

    def group(name: str, text: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        p = verbs.add_parser(name, parents=[common], help=text, description=text)
        return p.add_subparsers(dest=f"{name}_verb", required=True, metavar="VERB")

    _add_put_args(verb(verbs, "put", cmd_put, "put a key"))
    _add_get_args(verb(verbs, "get", cmd_get, "get a key or a range of keys"))
    _add_del_args(verb(verbs, "del", cmd_del, "delete a key or a range of keys"))

    p = verb(verbs, "watch", cmd_watch, "watch a key or range for events (Ctrl-C ends)")
    p.add_argument("key")
    p.add_argument("range_end", nargs="?", default="")
    p.add_argument("--prefix", action="store_true", help="watch keys with this prefix")
    p.add_argument("--from-key", action="store_true", help="watch keys >= the given key")
    p.add_argument("--rev", type=int, default=0, help="revision to start watching from")
    p.add_argument("--prev-kv", action="store_true", help="also print the previous key-value")

    p = verb(
        verbs,
        "txn",
        cmd_txn,
        "run a transaction read from stdin: compares, a blank line, success requests, "
        "a blank line, failure requests",
    )
    p.add_argument("-i", "--interactive", action="store_true", help="prompt for each section")

    p = verb(verbs, "compaction", cmd_compaction, "discard history before a revision")
    p.add_argument("revision", type=int)
    p.add_argument("--physical", action="store_true", help="wait until it is purged")

    lease = group("lease", "lease commands")
    verb(lease, "grant", cmd_lease_grant, "create a lease").add_argument("ttl", type=int)
    verb(lease, "revoke", cmd_lease_revoke, "revoke a lease (deletes its keys)").add_argument("id")
    p = verb(lease, "keep-alive", cmd_lease_keepalive, "keep a lease alive (Ctrl-C ends)")
    p.add_argument("id")
    p.add_argument("--once", action="store_true", help="refresh once and exit")
    p = verb(lease, "timetolive", cmd_lease_timetolive, "a lease's TTL and keys")
    p.add_argument("id")
    p.add_argument("--keys", action="store_true", help="also list the attached keys")
    verb(lease, "list", cmd_lease_list, "list all leases")

    member = group("member", "membership commands")
    verb(member, "list", cmd_member_list, "list the members")
    p = verb(member, "add", cmd_member_add, "add a member")
    p.add_argument("name")
    p.add_argument("--peer-urls", required=True, help="comma-separated peer URLs")
    p.add_argument("--learner", action="store_true", help="add it as a learner")
    verb(member, "remove", cmd_member_remove, "remove a member").add_argument("id")
    verb(member, "promote", cmd_member_promote, "promote a learner").add_argument("id")

    endpoint = group("endpoint", "per-endpoint checks")
    for name, func, text in (
        ("status", cmd_endpoint_status, "status of each endpoint"),
        ("health", cmd_endpoint_health, "health of each endpoint"),
    ):
        p = verb(endpoint, name, func, text)
        p.add_argument(
            "--cluster", action="store_true", help="every member's endpoints, not just --endpoints"
        )

    snapshot = group("snapshot", "snapshot commands")
    p = verb(snapshot, "save", cmd_snapshot_save, "stream a member's snapshot to a file")
    p.add_argument("file")
    text = "moved to `labutl snapshot {}` (works on files offline)"
    add_status_arguments(verb(snapshot, "status", cmd_snapshot_status, text.format("status")))
    add_restore_arguments(verb(snapshot, "restore", cmd_snapshot_restore, text.format("restore")))

    verb(verbs, "defrag", cmd_defrag, "no-op: kubelab's store has nothing to defragment")

    alarm = group("alarm", "alarm commands")
    verb(alarm, "list", cmd_alarm_list, "list raised alarms")
    verb(alarm, "disarm", cmd_alarm_disarm, "disarm every raised alarm")
    return store


def _context(args: argparse.Namespace) -> Context:
    cacert = getattr(args, "cacert", None)
    cert, key = getattr(args, "cert_file", None), getattr(args, "key_file", None)
    if (cert is None) != (key is None):
        raise CommandError("--cert and --key must be given together")
    raw = getattr(args, "endpoints", DEFAULT_ENDPOINTS)
    endpoints = [_normalize_endpoint(e, cacert is not None) for e in raw.split(",") if e.strip()]
    if not endpoints:
        raise CommandError("--endpoints is empty")
    return Context(
        args,
        endpoints,
        getattr(args, "write_out", "simple"),
        getattr(args, "command_timeout", 5.0),
        (cacert, cert, key),
    )


def _unreachable_hint(ctx: Context | None) -> str:
    if ctx is not None and ",".join(ctx.endpoints) == DEFAULT_ENDPOINTS:
        return "; is the local plane up? `make up-local` starts it (or point --endpoints elsewhere)"
    return "; check --endpoints and that the store is running"


def run(args: argparse.Namespace) -> int:
    """Run the store verb `args` names (parsed by `add_parser`'s parsers); return the exit
    status: 0, 1 after printing ``Error: ...``, or 130 after Ctrl-C."""
    ctx: Context | None = None
    try:
        ctx = _context(args)
        func: Command = args.func
        if ctx.table and func not in _TABLE_VERBS:
            raise CommandError("table not supported as output format")
        return func(ctx)
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`labctl store watch ... | head`): stop quietly, and keep
        # Python from complaining when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_ERROR
    except Unreachable as exc:
        print(f"Error: {exc}{_unreachable_hint(ctx)}", file=sys.stderr)
    except (StoreError, CommandError, pki.PKIError, OSError) as exc:
        print(f"Error: {exc}", file=sys.stderr)
    finally:
        if ctx is not None:
            ctx.close()
    return EXIT_ERROR
