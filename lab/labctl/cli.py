"""The `labctl` command line: the store's commands and the lab's, in one parser.

    labctl store put greeting hello        the store (etcd's role), with etcdctl's verbs
    labctl up --config cluster.yaml        the Docker lab: up, down, status
    labctl nodes add                       a running lab: stop, start, nodes add|remove,
    labctl ssh cp1 -- uname -a             load-image, kubeconfig, ssh
    labctl trace deployment/nginx          an object's path through the components (from
                                           the lab's trace collector)
    labctl flows                           the seeds' operations, measured: their table

``store`` and its verbs are the library's (`kubelab.cli.store`, which parses and runs
them); the lab's commands are named here, with their help and arguments, and run
`lab.cluster`'s `Lab` and `lab.lifecycle`'s functions in this process. Each group's
options may also come before the command (``labctl -w json store get k``, ``labctl
--dir /tmp/labs status``); an option of one group given to the other's command is a
usage error, not ignored.

The lab's modules are imported when a lab command runs, not when labctl starts: they
load Docker's SDK and fabric, most of a second that ``labctl store get`` has no use for
(tests/unit/test_labctl_offline.py checks that the store's commands load neither). The
imports sit in functions, where import-linter sees them as it sees any other.

Exit status: 0; 1 after an error, printed as ``Error: ...`` by the store's commands (as
etcdctl does) and as ``error: ...`` by the lab's; 2 for a usage error (argparse's); 130
after Ctrl-C (the shell's).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from kubelab.cli import flows, store, trace
from kubelab.cli.output import EXIT_ERROR, EXIT_INTERRUPTED

if TYPE_CHECKING:
    from lab.cluster import Lab

DEFAULT_DIR = Path(".lab")
"""Where the labs' files go, one folder per lab (`--dir`)."""


def lab_options() -> argparse.ArgumentParser:
    """The lab's options, accepted before the command and after it, as a parent parser.

    Their defaults are suppressed, so that a lower level never resets what a higher one
    set and only the options given are in the parsed arguments (`run_lab_command` fills
    in the rest); their destinations are their own, not the flag's name, because the
    store's verbs have a ``--prefix`` and a ``--name`` of their own.
    """
    options = argparse.ArgumentParser(add_help=False)
    g = options.add_argument_group("lab options")
    s = argparse.SUPPRESS
    g.add_argument(
        "--config",
        dest="cluster_config",
        type=Path,
        default=s,
        metavar="FILE",
        help="cluster config (YAML, like kind's; default 3 control-plane nodes, 2 workers)",
    )
    g.add_argument(
        "--name",
        dest="cluster_name",
        default=s,
        metavar="NAME",
        help="the cluster's name (overrides the config's)",
    )
    g.add_argument(
        "--dir",
        dest="lab_dir",
        type=Path,
        default=s,
        metavar="DIR",
        help=f"where the labs' files go (default {DEFAULT_DIR})",
    )
    g.add_argument(
        "--prefix",
        dest="docker_prefix",
        default=s,
        metavar="PREFIX",
        help="name prefix of the lab's Docker objects (default kubelab-<name>)",
    )
    return options


def build_parser() -> argparse.ArgumentParser:
    store_options, lab = store.options(), lab_options()
    parser = argparse.ArgumentParser(
        prog="labctl",
        description="Operate kubelab: its store, and the Docker lab (kind's role).",
        epilog="`labctl COMMAND --help` describes a command and its options.",
        parents=[store_options, lab],
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    store.add_parser(commands, store_options).set_defaults(run=store.run)
    text = trace.DESCRIPTION
    traced = commands.add_parser("trace", parents=[lab], help=text, description=text)
    trace.add_arguments(traced)
    traced.set_defaults(run=run_trace)
    text = flows.DESCRIPTION
    flowed = commands.add_parser("flows", parents=[lab], help=text, description=text)
    flows.add_arguments(flowed)
    flowed.set_defaults(run=run_flows)

    def command(
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, text: str
    ) -> argparse.ArgumentParser:
        """One of the lab's commands. What it does is `lab_actions`' entry named by its
        words after ``labctl`` ("status", "nodes add")."""
        p = subparsers.add_parser(name, parents=[lab], help=text, description=text)
        p.set_defaults(run=run_lab_command, lab_action=p.prog.removeprefix("labctl "))
        return p

    command(
        commands,
        "up",
        "create the lab: images, registry mirror, node containers, labadm init and joins; "
        "wait until every node is Ready and merge its context into your kubeconfig",
    )
    command(
        commands,
        "down",
        "remove the lab: its containers, volumes, network and files, and its context",
    )
    command(commands, "status", "each node's role, address, container and readiness")
    command(commands, "stop", "stop every container of the lab (`start` brings it back)")
    command(commands, "start", "start a stopped lab's containers: the same cluster back")
    text = "add or remove a worker"
    nodes = commands.add_parser(
        "nodes",
        parents=[lab],
        help=text,
        description=text,
        usage="%(prog)s add | remove <name> [options]",
    ).add_subparsers(dest="nodes_verb", required=True, metavar="VERB", prog="labctl nodes")
    command(nodes, "add", "start a worker and join it (the next free workerN)")
    command(
        nodes,
        "remove",
        "drain a worker (evictions), labadm reset it, delete its Node and container",
    ).add_argument("node", metavar="name", help="the worker's name (labctl status lists them)")
    command(
        commands,
        "load-image",
        "a local image into the lab (kind's load docker-image): docker.io names through "
        "the lab's registry mirror, others into every node",
    ).add_argument("image", help="an image of this machine's Docker Engine (docker images)")
    command(commands, "kubeconfig", "print the admin kubeconfig's path")
    ssh = command(
        commands,
        "ssh",
        "OpenSSH to a node with the lab's SSH config (its key, the pinned host keys)",
    )
    ssh.add_argument("node", help="the node's name (labctl status lists them)")
    ssh.add_argument(
        "ssh_command",
        nargs=argparse.REMAINDER,
        metavar="command",
        help="what to run instead of a login shell: everything after the node, options "
        "included (a -- before it is dropped)",
    )
    return parser


LabAction = Callable[["Lab"], object]


def lab_actions(args: argparse.Namespace) -> dict[str, LabAction]:
    """What each of the lab's commands does, by its words after ``labctl``, given the
    parsed arguments. The lab's modules are imported here (see the module's docstring)."""
    from lab import lifecycle
    from lab.cluster import Lab

    return {
        "up": Lab.up,
        "down": Lab.down,
        "status": Lab.status,
        "stop": lifecycle.stop,
        "start": lifecycle.start,
        "nodes add": lifecycle.add_worker,
        "nodes remove": lambda lab: lifecycle.remove_worker(lab, args.node),
        "load-image": lambda lab: lifecycle.load_image(lab, args.image),
        "kubeconfig": lifecycle.print_kubeconfig,
        "ssh": lambda lab: lifecycle.ssh(lab, args.node, args.ssh_command),
    }


def run_lab_command(args: argparse.Namespace) -> int:
    """Run the lab's command `args` names on the lab its options name; return the exit
    status (0, 1 after printing ``error: ...``, 130 after Ctrl-C)."""
    return with_lab(args, lab_actions(args)[args.lab_action])


def with_lab(args: argparse.Namespace, action: LabAction) -> int:
    """Run `action` on the lab `args`' options name; return the exit status (as
    `run_lab_command`)."""
    import docker.errors

    from lab.cluster import ClusterConfig, Lab, LabError
    from lab.nodes import NodeError
    from lab.registry import RegistryError
    from lab.ssh import SSHError

    try:
        config = ClusterConfig.load(getattr(args, "cluster_config", None))
        name = getattr(args, "cluster_name", "")
        if name:
            config = ClusterConfig.parse(
                {
                    "name": name,
                    "nodes": [{"role": r} for r in config.roles],
                    "networking": {"loadBalancerPool": config.load_balancer_pool},
                    "tracing": config.tracing,
                }
            )
        directory: Path = getattr(args, "lab_dir", DEFAULT_DIR)
        action(Lab(config, directory / config.name, prefix=getattr(args, "docker_prefix", "")))
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    except (LabError, NodeError, RegistryError, SSHError, docker.errors.DockerException) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_ERROR
    return 0


def with_collector(args: argparse.Namespace, run: Callable[[argparse.Namespace, str], int]) -> int:
    """Run `labctl trace` or `labctl flows` (`run`, given the arguments and what to say
    when the collector does not answer) with the lab's trace collector (its state.json
    names it) unless --collector or $KUBELAB_COLLECTOR names another."""
    if args.collector:
        return run(args, trace.START_HINT)
    from lab import lifecycle

    found: list[str] = []
    status = with_lab(args, lambda lab: found.append(lifecycle.collector(lab)))
    if status != 0:
        return status
    args.collector = found[0]
    return run(args, lifecycle.COLLECTOR_HINT)


def run_trace(args: argparse.Namespace) -> int:
    """`labctl trace`, from the lab's collector (`with_collector`)."""
    return with_collector(args, trace.run)


def run_flows(args: argparse.Namespace) -> int:
    """`labctl flows`, with the lab's collector (`with_collector`)."""
    return with_collector(args, flows.run)


def _given(options: argparse.ArgumentParser, args: argparse.Namespace) -> list[str]:
    """The flags of `options` (a parent parser of suppressed defaults) given in `args`."""
    return [a.option_strings[-1] for a in options._actions if hasattr(args, a.dest)]


def main(argv: Sequence[str] | None = None) -> int:
    """Run labctl; return the exit status (usage errors exit 2 from argparse)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "store":
        misplaced, owner = _given(lab_options(), args), "the lab's commands"
    else:
        misplaced, owner = _given(store.options(), args), "`labctl store`"
    if misplaced:
        parser.error(
            f"{', '.join(misplaced)}: an option of {owner}, not of `labctl {args.command}`"
        )
    status: int = args.run(args)
    return status
