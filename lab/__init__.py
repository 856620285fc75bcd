"""Lab tooling, the layer over the components: what brings a cluster up and down around
them (the local plane, the local store cluster, the in-process test apiserver, images,
the Docker lab, labadm and labctl). It may import every component; no component imports
it, only the benchmarks (`bench`, the layer above).
"""
