"""`python -m agents.network`: the pod network agent, a service of every node.

--kubeconfig FILE   the apiserver, and who we are to it (default: as kubectl finds
                    one, then the pod's service account)
--node-name NAME    this node (default: the hostname)
--resync SECONDS    repair drift this often (default 30)
--cleanup           remove the agent's routes and chains, then exit (labadm reset)
-v N                4 and more: debug logs
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
import threading

from agents.network.agent import HAIRPIN_INTERVAL, NetworkAgent
from kubelab.client import RestClient, SharedInformer, load_config, resource_for
from kubelab.nodeagent import SyncLoop
from kubelab.process import configure_logging, stop_on_signals

NODES = resource_for("v1", "Node")


def _hairpin_loop(agent: NetworkAgent, stop: threading.Event) -> None:
    """New pods' bridge ports get hairpin mode within a second, apart from the resync."""
    while not stop.wait(HAIRPIN_INTERVAL):
        try:
            agent.hairpin()
        except Exception as exc:
            logging.getLogger("kubelab.network").warning("hairpin mode: %s; retrying", exc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agents.network", description=__doc__)
    parser.add_argument("--kubeconfig")
    parser.add_argument("--node-name", default=socket.gethostname())
    parser.add_argument("--resync", type=float, default=30.0)
    parser.add_argument("--bridge", default="cbr0")
    parser.add_argument("--cleanup", action="store_true")
    parser.add_argument("-v", "--v", type=int, default=1)
    args = parser.parse_args(argv)
    configure_logging(args.v)
    agent = NetworkAgent(args.node_name, bridge=args.bridge)
    if args.cleanup:
        agent.cleanup()
        return 0
    client = RestClient(load_config(args.kubeconfig), user_agent="kubelab-network")
    nodes = SharedInformer(client, NODES)
    loop = SyncLoop("network", lambda: agent.sync(nodes.indexer.list()), resync=args.resync)
    loop.watch(nodes)
    stop = stop_on_signals(logging.getLogger("kubelab.network"))
    nodes.start(stop)
    threading.Thread(target=_hairpin_loop, args=(agent, stop), name="hairpin", daemon=True).start()
    logging.getLogger("kubelab.network").info(
        "network agent for node %s: watching nodes at %s", args.node_name, client.config.server
    )
    loop.run([nodes], stop)
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
