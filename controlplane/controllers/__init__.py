"""The controller-manager (kube-controller-manager's role) and its controllers.

`manager` is the process: flags, leader election, shared informers, the controllers'
lifetime. `base` holds what every controller is made of (the worker loop over a work
queue, the shared informers, the context a controller is built from). One module per
controller, or per pair of closely related ones:

* `garbagecollector`: ownerReferences; background, foreground and orphan deletion;
* `namespace`: emptying and finalizing a namespace that is being deleted;
* `serviceaccounts`: the `default` ServiceAccount and the `kube-root-ca.crt` ConfigMap
  in every namespace;
* `nodeipam`: each node's pod range (spec.podCIDR) from the cluster's;
* `endpoints`, `endpointslice`, `endpointslicemirroring`: Services' Endpoints and
  EndpointSlices from their pods, and slices mirroring hand-written Endpoints;
* `nodelifecycle`: quiet nodes marked Unknown and tainted, pods evicted by taints;
* `podgc`: pods no kubelet will finish deleting (a deleted node's, unscheduled ones) and
  terminated pods beyond the threshold, force-deleted;
* `certificates`: kubelet CSRs approved and signed, expired bootstrap tokens removed;
* `bootstrapsigner`: `kube-public/cluster-info` signed with the bootstrap tokens;
* `job`, `cronjob`: Jobs run to completion, CronJobs' schedules, TTL after finished;
* `resourcequota`: quotas' status.used; `disruption`: disruption budgets' status;
* `servicelb`: LoadBalancer Services' addresses from the lab's pool.
"""
