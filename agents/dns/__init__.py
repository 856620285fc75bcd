"""Cluster DNS (CoreDNS's role for `cluster.local`): records from Services and
EndpointSlices (`agents.dns.records`) served with dnslib (`agents.dns.server`)."""
