"""The arguments of the offline snapshot verbs, which `labutl` runs and `labctl` names.

`labutl snapshot status|restore` (`controlplane.store.labutl`) work on files with the
store's own state machine and WAL; `labctl store snapshot status|restore`, which may not
load them, accepts the same arguments and answers with the labutl command line to run.
Both take their flags from here, so the two cannot drift apart.
"""

from __future__ import annotations

import argparse

RESTORE_OPTIONS: tuple[tuple[str, str | None, str], ...] = (
    ("--name", "default", "the member to build the data dir for"),
    ("--data-dir", None, "where to build it (default NAME.kubelab-store)"),
    (
        "--initial-cluster",
        "default=https://127.0.0.1:2380",
        "every member of the new cluster as name=https://host:port",
    ),
    ("--initial-cluster-token", "kubelab-store", "the new cluster's token"),
)
"""Each flag of `snapshot restore`, its default and its help, as etcdutl spells them."""


def add_status_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a snapshot file (labctl store snapshot save)")


def add_restore_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("file", help="a snapshot file (labctl store snapshot save)")
    for flag, default, text in RESTORE_OPTIONS:
        p.add_argument(flag, default=default, help=text)


def labutl_command(verb: str, args: argparse.Namespace, write_out: str = "simple") -> list[str]:
    """The labutl command line that does what `args` asked of `snapshot <verb>`."""
    argv = ["labutl", "snapshot", verb, args.file]
    if verb == "restore":
        for flag, default, _ in RESTORE_OPTIONS:
            value = getattr(args, flag.removeprefix("--").replace("-", "_"))
            if value != default:
                argv += [flag, value]
    elif write_out != "simple":
        argv += ["-w", write_out]
    return argv
