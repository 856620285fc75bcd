"""The ingress controller add-on: nginx configured from Ingresses (docs/architecture.md,
"Ingress")."""
