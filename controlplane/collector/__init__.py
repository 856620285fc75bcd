"""kubelab's trace collector (issue 23): an OTLP/HTTP receiver built on
`opentelemetry-proto`'s messages (`otlp`), keeping the lab's recent traces on disk within
a bound (`storage`), with the query API `labctl trace` reads (`server`).

It is a component like the others: it imports only `kubelab`, and it runs as a static
pod on the first control-plane node, where every component of the lab reaches it on the
node network (docs/architecture.md, "Tracing"). The standard `OTEL_EXPORTER_OTLP_ENDPOINT`
sends the components' spans to another backend (Jaeger, Tempo) instead.
"""
