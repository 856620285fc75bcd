"""kubelab's kube-scheduler: a scheduling queue, a framework of small plugins (one module
each, in `plugins/`), a cache of nodes and placed pods, and binding through the
`pods/binding` subresource. `python -m controlplane.scheduler` runs it (`server.py`)."""
