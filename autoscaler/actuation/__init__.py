"""Acting on the cluster: what the adapter writes, and only from the leader.

- `deletion_cost_plan`: pure rules for when a pod's `controller.kubernetes.io/pod-deletion-cost` is due.
- `deletion_cost`: the writer: merge patches with retries and backoff, off the serving path.
- `cluster_pods`: what the writer reads of the pod objects (annotation, uid) through discovery's pod watch.
- `leader`: `coordination.k8s.io/v1` Lease election, in the style of client-go.
- `actuator`: wires the writer and the elector into `serve` from its settings.

May import `kube`, `policies`, `model`, `names`, `selfmetrics`, `settings` and `refresher`; never `api`.
"""
