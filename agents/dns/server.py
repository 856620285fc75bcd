"""The cluster DNS server: answers from the current `Zone` over UDP and TCP with dnslib,
and forwards every other name to the upstream servers it was given, or refuses it when
there are none (the lab has no resolver beyond this machine).

Answers for names in the zone are authoritative (`aa`), with the zone's TTL; a name in
the cluster domain that does not exist is NXDOMAIN, a name that exists without records
of the type asked is an empty NOERROR (NODATA), as resolvers expect for search-path
expansion to move on to the next suffix.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, field

from dnslib import CNAME, QTYPE, RCODE, RR, SRV, A, DNSRecord  # type: ignore[import-untyped]
from dnslib.server import BaseResolver, DNSLogger, DNSServer  # type: ignore[import-untyped]
from opentelemetry import trace

from agents.dns.records import Zone, build_zone
from kubelab.client import RestClient, SharedInformer, resource_for
from kubelab.nodeagent import SyncLoop, SyncTracing

log = logging.getLogger("kubelab.dns")

SERVICES = resource_for("v1", "Service")
ENDPOINT_SLICES = resource_for("discovery.k8s.io/v1", "EndpointSlice")


@dataclass
class Resolver(BaseResolver):  # type: ignore[misc]
    """dnslib's resolver interface over a swappable `Zone`."""

    zone: Zone
    ttl: int = 30
    upstreams: list[tuple[str, int]] = field(default_factory=list)
    timeout: float = 2.0

    def set_zone(self, zone: Zone) -> None:
        self.zone = zone  # one reference assignment: queries see the old or the new one

    def resolve(self, request: DNSRecord, handler: object) -> DNSRecord:
        zone = self.zone
        reply = request.reply()
        qname = str(request.q.qname).rstrip(".").lower()
        qtype = QTYPE[request.q.qtype]
        if not zone.in_zone(qname) and not zone.exists(qname):
            return self._forward(request, reply, qname)
        reply.header.aa = 1
        pod_ip = zone.pod_address(qname)
        if pod_ip is not None:
            if qtype in ("A", "ANY"):
                reply.add_answer(RR(qname, QTYPE.A, rdata=A(pod_ip), ttl=self.ttl))
            return reply
        if not zone.exists(qname):
            reply.header.rcode = RCODE.NXDOMAIN
            return reply
        target = zone.cname.get(qname)
        if target is not None:
            reply.add_answer(RR(qname, QTYPE.CNAME, rdata=CNAME(target + "."), ttl=self.ttl))
            return reply
        if qtype in ("A", "ANY"):
            for ip in zone.a.get(qname, []):
                reply.add_answer(RR(qname, QTYPE.A, rdata=A(ip), ttl=self.ttl))
        if qtype in ("SRV", "ANY"):
            for srv in zone.srv.get(qname, []):
                rdata = SRV(priority=0, weight=100, port=srv.port, target=srv.target + ".")
                reply.add_answer(RR(qname, QTYPE.SRV, rdata=rdata, ttl=self.ttl))
                for ip in zone.a.get(srv.target, []):
                    reply.add_ar(RR(srv.target, QTYPE.A, rdata=A(ip), ttl=self.ttl))
        return reply

    def _forward(self, request: DNSRecord, reply: DNSRecord, qname: str) -> DNSRecord:
        for host, port in self.upstreams:
            try:
                return DNSRecord.parse(request.send(host, port, timeout=self.timeout))
            except OSError as err:  # timeouts included
                log.warning("dns: upstream %s:%d failed for %s: %s", host, port, qname, err)
        reply.header.rcode = RCODE.SERVFAIL if self.upstreams else RCODE.REFUSED
        return reply


class _QuietLogger(DNSLogger):  # type: ignore[misc]
    """dnslib's per-query prints go to our logger at debug level."""

    def __init__(self) -> None:
        super().__init__(log="-request,-reply", prefix=False, logf=lambda text: log.debug(text))


@dataclass
class DNS:
    """UDP and TCP servers on (address, port) sharing one resolver."""

    resolver: Resolver
    address: str = "0.0.0.0"
    port: int = 53
    _servers: list[DNSServer] = field(default_factory=list)

    def start(self) -> DNS:
        udp = DNSServer(self.resolver, self.address, self.port, logger=_QuietLogger())
        # Port 0: the TCP server takes the port the UDP one was given.
        self.port = udp.server.server_address[1]
        tcp = DNSServer(self.resolver, self.address, self.port, tcp=True, logger=_QuietLogger())
        self._servers = [udp, tcp]
        for server in self._servers:
            threading.Thread(target=server.start, name="dns", daemon=True).start()
        log.info("dns: serving %s on %s:%d", self.resolver.zone.domain, self.address, self.port)
        return self

    def stop(self) -> None:
        for server in self._servers:
            server.server.shutdown()
            server.server.server_close()
        self._servers = []


class ClusterDNS:
    """The whole server: informers on Services and EndpointSlices, a zone rebuilt after
    each change (`kubelab.nodeagent.SyncLoop`, traced as `DNS.sync` with a
    `DNS.updateRecords` per changed object when given a `tracer`), and the UDP/TCP
    listeners."""

    def __init__(
        self,
        client: RestClient,
        *,
        domain: str = "cluster.local",
        ttl: int = 30,
        upstreams: list[tuple[str, int]] | None = None,
        tracer: trace.Tracer | None = None,
    ) -> None:
        self.domain = domain
        self.services = SharedInformer(client, SERVICES)
        self.slices = SharedInformer(client, ENDPOINT_SLICES)
        self.resolver = Resolver(build_zone([], [], domain), ttl, upstreams or [])
        self.loop = SyncLoop(
            "dns",
            self._rebuild,
            resync=300.0,
            sync_tracing=(
                None if tracer is None else SyncTracing(tracer, "DNS.sync", "DNS.updateRecords")
            ),
        )
        self.loop.watch(self.services)
        self.loop.watch(self.slices)
        self.port = 0
        """The UDP and TCP port, once serving (asked for 0, the one it got)."""

    def _rebuild(self) -> None:
        zone = build_zone(self.services.indexer.list(), self.slices.indexer.list(), self.domain)
        self.resolver.set_zone(zone)
        log.debug("dns: zone rebuilt: %d A names, %d SRV names", len(zone.a), len(zone.srv))

    def run(self, address: str, port: int, stop: threading.Event) -> None:
        """Serve on (address, port) until `stop` is set."""
        self.services.start(stop)
        self.slices.start(stop)
        server = DNS(self.resolver, address, port).start()
        self.port = server.port
        try:
            self.loop.run([self.services, self.slices], stop)
        finally:
            server.stop()
