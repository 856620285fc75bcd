"""`labutl`: work on a store member's files offline, as etcdutl does for etcd.

etcd split etcdutl out of etcdctl so that the client (which only speaks the network API)
need not link the server's storage engine. kubelab splits the same way: `labctl store`
imports the client library only, and the verbs that read a snapshot file or write a member's
data dir live here, with the store whose WAL and state machine they need.

    labutl snapshot status backup.snap -w table
    labutl snapshot restore backup.snap --name m1 --data-dir m1.kubelab-store \\
        --initial-cluster m1=https://10.0.0.1:2380,m2=https://10.0.0.2:2380,...

This is the "etcd backup" flow of the seeds: `labctl store snapshot save` against the
running cluster, then `labutl snapshot restore` once per member of a new cluster (the
same --initial-cluster for all), then start them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from controlplane.store.node import NodeConfig, restore_data_dir
from controlplane.store.server import parse_url
from controlplane.store.service import (
    SnapshotFileError,
    StoreStateMachine,
    read_snapshot_file,
    snapshot_file_status,
)
from controlplane.store.wal import StoreStorageError
from kubelab.cli.offline import add_restore_arguments, add_status_arguments
from kubelab.cli.output import EXIT_ERROR, CommandError, ascii_table, emit, human_bytes


@dataclass(frozen=True)
class SnapshotStatus:
    hash: int
    revision: int
    total_keys: int
    total_size: int


def read_snapshot_status(path: Path) -> SnapshotStatus:
    """The status of a kubelab store snapshot file (`controlplane.store.service`)."""
    try:
        st = snapshot_file_status(path)
    except (OSError, SnapshotFileError) as exc:
        raise CommandError(str(exc)) from None
    return SnapshotStatus(
        int(st["hash"], 16), int(st["revision"]), int(st["totalKey"]), int(st["totalSize"])
    )


def cmd_snapshot_status(args: argparse.Namespace) -> int:
    """Hash, revision, keys and size of a snapshot file, in etcdutl's three formats."""
    st = read_snapshot_status(Path(args.file))
    if args.write_out == "json":
        obj = {
            "hash": st.hash,
            "revision": st.revision,
            "totalKey": st.total_keys,
            "totalSize": st.total_size,
        }
        emit(json.dumps(obj, separators=(",", ":")))
        return 0
    row = [f"{st.hash:x}", str(st.revision), str(st.total_keys), human_bytes(st.total_size)]
    if args.write_out == "table":
        emit(ascii_table(["HASH", "REVISION", "TOTAL KEYS", "TOTAL SIZE"], [row]))
    else:
        emit(", ".join(row))
    return 0


def cmd_snapshot_restore(args: argparse.Namespace) -> int:
    """Build a new member's data dir from a snapshot, as `etcdutl snapshot restore`:
    run it for every member of the new cluster with the same --initial-cluster."""
    try:
        state = read_snapshot_file(Path(args.file))
        cluster = {}
        for item in args.initial_cluster.split(","):
            name, _, url = item.partition("=")
            cluster[name] = parse_url(url, "--initial-cluster")
        config = NodeConfig(
            name=args.name,
            data_dir=Path(args.data_dir or f"{args.name}.kubelab-store"),
            peer_listen=cluster.get(args.name, ("127.0.0.1", 2380)),
            initial_cluster=cluster,
            cluster_token=args.initial_cluster_token,
        )
        restore_data_dir(config, StoreStateMachine(), state)
    except (OSError, ValueError, SnapshotFileError, StoreStorageError) as exc:
        raise CommandError(str(exc)) from None
    emit(f"restored snapshot {args.file} into {config.data_dir} for member {args.name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="labutl", description="Work on a kubelab store member's files offline."
    )
    groups = parser.add_subparsers(dest="group", required=True, metavar="GROUP")
    snapshot = groups.add_parser("snapshot", help="snapshot files").add_subparsers(
        dest="verb", required=True, metavar="VERB"
    )
    p = snapshot.add_parser("status", help="hash, revision, keys and size of a snapshot file")
    p.set_defaults(func=cmd_snapshot_status)
    add_status_arguments(p)
    p.add_argument(
        "-w",
        "--write-out",
        choices=["simple", "json", "table"],
        default="simple",
        help="output format (default simple)",
    )
    p = snapshot.add_parser("restore", help="build a new member's data dir from a snapshot")
    p.set_defaults(func=cmd_snapshot_restore)
    add_restore_arguments(p)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run labutl; return the exit status (0, or 1 after printing ``Error: ...``)."""
    args = build_parser().parse_args(argv)
    try:
        status: int = args.func(args)
    except CommandError as exc:
        print(f"Error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return status


if __name__ == "__main__":
    sys.exit(main())
