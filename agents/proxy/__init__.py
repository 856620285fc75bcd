"""kube-proxy in iptables mode: Services and EndpointSlices as NAT rules on every node;
see `agents.proxy.rules` (the rules) and `agents.proxy.proxier` (applying them)."""
