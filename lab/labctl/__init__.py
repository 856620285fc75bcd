"""labctl: one command over the lab's library, as kind is one command over its own.

`cli` is the command line: the store's commands (``labctl store``, etcdctl's verbs, the
library's `kubelab.cli.store`) and the lab's (up, down, status, stop, start, nodes,
load-image, kubeconfig, ssh: `lab.cluster` and `lab.lifecycle`), dispatched in-process.
"""
