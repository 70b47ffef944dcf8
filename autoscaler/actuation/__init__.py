"""Acting on the cluster: what the adapter writes, and only from the leader.

- `deletion_cost_plan`: pure rules for when a pod's `controller.kubernetes.io/pod-deletion-cost` is due.
- `deletion_cost`: the writer's loop, off the serving path; its parts: `deletion_cost_memory` (what was written,
  and the pod watch's echo of it), `deletion_cost_foreign` (another writer's cost), `deletion_cost_due` (which
  patches a pass sends), `deletion_cost_writes` (the merge patches, with retries and backoff),
  `deletion_cost_news` (its lines on failed writes), `deletion_cost_hold` (what the ranking hold asks of it).
- `cluster_pods`: what the writer reads of the pod objects (annotation, uid) through discovery's pod watch.
- `leader`: `coordination.k8s.io/v1` Lease election, in the style of client-go; its parts: `lease_timing` (the
  three durations, their margin and the client timeout it leaves), `lease_record` (the Lease on the wire, and
  as this replica last saw it), `lease_news` and `lease_said` (what the log says of a failover, in which words).
- `bridge`: the RuntimeScale → `ServingRuntime.spec.replicas` bridge's loop; `bridge_handovers` is its hand-over
  queue (an HPA's write, a runtime set behind its back), `bridge_pass` its full pass (three lists a namespace, the
  hand-overs' turns between its RuntimeScales), and `bridge_reconcile`, `bridge_status`, `bridge_watch`,
  `bridge_runtime_watch`, `bridge_owners`, `bridge_memory`, `bridge_retries`, `bridge_news` its other parts, as
  the README's module table says.
- `actuator`: wires the writer and the elector into `serve` from its settings.

May import `kube`, `policies`, `model`, `names`, `selfmetrics`, `settings` and `refresher`; never `api`.
"""
