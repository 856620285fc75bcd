"""Kubernetes API machinery shared by the apiserver, the client library and the agents:
the resource table, Status errors, selectors, quantities, patches, defaulting and
validation."""
