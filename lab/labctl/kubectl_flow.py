"""`kubectl flow KIND/NAME [-n NS] [-o json]`: `labctl trace` as a kubectl plugin (the
console script `kubectl-flow`; kubectl runs any `kubectl-<name>` it finds on PATH).

kubectl hands a plugin the words after the plugin's name and its own environment
(`KUBECONFIG` included); it refuses flags before the name (`kubectl -n web flow ...` is
"flags cannot be placed before plugin name"). So the plugin takes kubectl's
`-n/--namespace`, `--context` and `--kubeconfig` after the object, and without `-n` it
looks where kubectl would: the namespace of the current context (or `--context`'s) of
the kubeconfig kubectl would read, "default" when the context names none. The lab is
the one that context reaches, too: `labctl up` names its context `kubelab-<name>`
(`lab.kubeconfigs`), so without `--name` a context of that form picks the lab `<name>`
(under `--dir`, default `.lab/`), and any other context leaves labctl's default lab.
Everything else is `labctl trace`'s (`cli.run_trace`): the same arguments (the lab's
options included), the same collector (the lab's, unless --collector or
$KUBELAB_COLLECTOR names another), the same output.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from kubelab.cli import trace
from kubelab.cli.output import EXIT_ERROR
from kubelab.client.kubeconfig import KubeconfigError, load_kubeconfig
from lab import kubeconfigs

from . import cli


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="kubectl flow", description=trace.DESCRIPTION, parents=[cli.lab_options()]
    )
    trace.add_arguments(parser)
    parser.add_argument("--context", help="the kubeconfig context (default: the current one)")
    parser.add_argument("--kubeconfig", help="the kubeconfig (default: kubectl's)")
    parser.set_defaults(namespace=None)  # None: the context's (module docstring)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the plugin; return the exit status (`labctl trace`'s)."""
    args = parse_args(argv)
    try:
        config = load_kubeconfig(args.kubeconfig, context=args.context)
    except KubeconfigError as e:
        if args.namespace is None:
            print(
                f"error: cannot tell the namespace from your kubeconfig ({e}); name it with -n",
                file=sys.stderr,
            )
            return EXIT_ERROR
    else:
        if args.namespace is None:
            args.namespace = config.namespace
        lab = kubeconfigs.lab_name(config.context)
        if lab and not hasattr(args, "cluster_name"):
            args.cluster_name = lab
    return cli.run_trace(args)
