"""The library's part of kubelab's command-line tools: `store` (``labctl store``,
etcdctl's verbs; the `labctl` command is `lab.labctl`), and `output` and `offline`, what
labctl and labutl share."""
