"""When to write a pod's `controller.kubernetes.io/pod-deletion-cost` (docs/design.md): pure, so the rules can
be read and tested apart from the I/O of `autoscaler.actuation.deletion_cost`, which calls `plan_patches` every pass.

A pod is written:
- only Ready pods with fresh data in a runtime whose values are known: a cost computed from stale or missing
  data is not worth a write, and the ReplicaSet removes not-Ready pods first anyway;
- the first time this replica sees it while leading (another leader may have written something else);
- when its cost bucket changed, at most once per `min_interval_s` (a minute) per pod, so a pod whose need hovers
  at a bucket edge cannot flood the API;
- at once, whatever the minute says, in an `urgent` runtime: the writer marks one so when its served
  recommendation newly falls below its current replicas (or falls by a further whole replica, or a pod went
  meanwhile), as the costs must be right before the HPA acts (`scale_down_pending` gives the pair it compares).
  Not at every small step of the slow scale-down: the served value falls a little at every refresh for
  minutes, and marking each step urgent wrote every changed cost every 15 s and logged every runtime's fall
  at every refresh. A runtime whose scale-down the refresh holds for its costs (`autoscaler.ranking_hold`) is
  urgent too, for as long as it is held: else the hold waited out the minute; and one whose ranking clearly
  turned after its value fell, at that refresh (`DeletionCostWriter.hurry_turned`);
- again every `max_interval_s` (5 minutes) even when unchanged, to repair hand edits and lost writes (the writer
  drops the rewrite where discovery's pod watch shows the pod still carrying the cost);
- after a failed write, when its backoff has passed (a retry continues a write that was due; the minute counts
  from the last write that succeeded).

Patches come out in the order to send them: urgent ones first; then changed and retried ones (known to be
wrong in the cluster) taking turns with first writes (a new pod, or any pod at the start of a term, most likely
right already from the previous leader), so that neither waits for the other's backlog; then periodic
refreshes. Within each kind, the pod written longest ago first. When more are due than the API is given (a
fleet at the writer's qps limit, a new leader's first writes of 50,000 pods), the backlog is worked off oldest
first: sorted by name, the pods of namespaces late in the alphabet were written less often for as long as the
overload lasted, and a changed cost waited behind a new term's every first write.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from itertools import zip_longest

from autoscaler.kube.backoff import FailuresInARow
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.names import ServedMetric

PodId = tuple[str, str]  # (namespace, pod name)
PERIODIC = 3
"""The priority of a rewrite of an unchanged cost, due every `max_interval_s`."""


@dataclass(frozen=True, slots=True, order=True)
class PodPatch:
    """One wanted write: urgent (0), changed or retried (1), first write (2), periodic refresh (3). Sorted by
    kind, then the pod whose last write is oldest (never written: first); `plan_patches` interleaves 1 and 2."""

    priority: int
    written_at: float
    namespace: str
    pod: str
    cost: int
    runtime: RuntimeKey = field(compare=False)


@dataclass(slots=True)
class PodRecord:
    """What this replica last wrote on a pod, and when it may try again after a failure."""

    cost: int | None = None
    written_at: float = -math.inf
    in_a_row: FailuresInARow = field(default_factory=FailuresInARow)
    """The failed writes in a row since the last that went through, and those the server answered: what the retry's
    backoff counts (`deletion_cost_writes`)."""
    retry_at: float = -math.inf
    uid: str | None = None
    """The `metadata.uid` of the pod object written, as the pod watch showed it (None: not known)."""
    refused: int | str | None = None
    """The HTTP status (or "no answer") of the last failed write, until one succeeds: what a held scale-down
    waits on (`DeletionCostWriter.misordered`)."""
    echoed: bool = False
    """Whether the pod watch has shown `cost` on the pod since this replica wrote it (the write's echo): until
    then what the watch shows is the pod as it was before (the watch behind, or relisting), for at most
    `ECHO_WAIT_S`; after it, another value is another writer's (`ForeignCosts.foreign`)."""
    sending: int | None = None
    """The cost of the PATCH under way (None: none): the watch may show it before the PATCH's answer comes, and
    that is its echo (`sent_echoed`)."""
    sent_echoed: bool = False
    """Whether the pod watch showed `sending` while the PATCH was under way."""
    unanswered: tuple[int, ...] = ()
    """The costs of PATCHes that got no answer (a timeout, a connection lost) since the last one answered: the API
    server may have committed them after all, and the pod watch showing one is this replica's write landing late,
    not another writer's (`ForeignCosts.foreign`)."""
    fought: bool = False
    """Written again for another writer's value, and not yet seen keeping this replica's for `min_interval_s`:
    written again at most once a pod's minute, even for a runtime whose writes are hurried, and said once."""

    @property
    def failures(self) -> int:
        """The failed writes in a row (0: the last went through, or none was made)."""
        return self.in_a_row.failures


def plan_patches(
    views: Mapping[RuntimeKey, RuntimeView],
    records: Mapping[PodId, PodRecord],
    urgent: set[RuntimeKey],
    now: float,
    *,
    min_interval_s: float = 60.0,
    max_interval_s: float = 300.0,
) -> list[PodPatch]:
    """The writes due at `now`, in the order to make them. `urgent` runtimes are about to be scaled down;
    a changed cost waits `min_interval_s` after the pod's last write, an unchanged one `max_interval_s`."""
    patches: list[PodPatch] = []
    for key, view in views.items():
        if not view.known:
            continue
        hurry = key in urgent
        for name, ready, fresh, cost in view.pods.deletion_costs():
            if cost is None or not ready or not fresh:
                continue
            record = records.get((key.namespace, name))
            if record is not None and record.retry_at > now:
                continue
            if record is None or record.cost is None:
                priority = 0 if hurry else 2  # never written by this replica (or its first write failed)
            elif record.failures:
                priority = 0 if hurry else 1  # a write that failed and is due again
            elif record.cost != cost:
                if not (hurry or now - record.written_at >= min_interval_s):
                    continue
                priority = 0 if hurry else 1
            elif now - record.written_at >= max_interval_s:
                priority = PERIODIC
            else:
                continue
            written_at = record.written_at if record is not None else -math.inf
            patches.append(PodPatch(priority, written_at, key.namespace, name, cost, key))
    patches.sort()
    by_kind: list[list[PodPatch]] = [[], [], [], []]
    for patch in patches:
        by_kind[patch.priority].append(patch)
    urgent_patches, changed, first, periodic = by_kind
    turns = [patch for pair in zip_longest(changed, first) for patch in pair if patch is not None]
    return urgent_patches + turns + periodic


def scale_down_pending(view: RuntimeView) -> tuple[int, int] | None:
    """(replicas the served recommendation asks for, current replicas) while the first is below the second,
    else None. The served value is rounded up as the HPA rounds it (`ceil(value / target)`, target 1), so the
    pair changes only when a whole replica more is to go, not at every small step of a slow fall; and a value
    below the replicas by less than one (3.7 for 4, where most scale-ups settle) removes no pod: marked urgent,
    it logged "recommendation 4 is below 4 replicas" and wrote changed costs ahead of their minute."""
    served = view.values.get(ServedMetric.DESIRED_REPLICAS)
    desired = served.value if served is not None else None
    current = view.current_replicas
    if desired is None or current is None or not math.ceil(desired) < current:
        return None
    return math.ceil(desired), current
