"""Lab tooling, the top layer: what brings a cluster up and down around the components
(the local plane, the local store cluster, the in-process test apiserver, images, the
Docker lab, labadm and labctl's lab verbs). It may import every component; no component
imports it.
"""
