"""The pod network agent (kindnetd's role): routes between nodes' pod CIDRs, forwarding
and masquerade rules; see `agents.network.agent`."""
