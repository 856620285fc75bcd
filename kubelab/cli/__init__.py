"""kubelab's command-line tools: `labctl` (talk to a running lab)."""
