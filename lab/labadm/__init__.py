"""labadm: kubeadm's role for kubelab, run on a node (`labadm init|join|reset|token`).

`workflow` is kubeadm's phase runner; `init` and `join` are phase lists over it;
`layout` says where files go on a node; `tokens` handles bootstrap tokens and the
public cluster-info; `reset` undoes a node; `cli` is the command line.
"""
