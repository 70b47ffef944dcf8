"""A scale-down waits for its deletion costs: while the pods the ReplicaSet would remove are not the least needed by
a runtime's new ranking, and the writes that fix it are still to come, `modelmesh_desired_replicas` may rise but not
fall below what runs (docs/design.md, "Choosing the pod to remove").

Why: the HPA lowers the replicas as soon as it reads the lower value, and the ReplicaSet then removes the pod with
the lowest `controller.kubernetes.io/pod-deletion-cost`. The writer patches the costs on its own task, apart from the
refresh: a PATCH refused (503, 403), a `Retry-After` pausing the writer, or a fleet-wide drop queueing thousands of
patches (20 a second) left the lower value served while the cluster still ranked the pod now most needed lowest,
and that pod was removed. So, as for missing data ("never signal a scale-down on missing data"), the served
value is held where it would remove a pod (`ceil` of it below both what was served before and the current replicas)
that the ranking does not count among the least needed (`autoscaler.actuation.removal_order`).

The order, not the values: waiting until every pod carried exactly this refresh's cost held scale-downs under
ordinary load noise (a bucket moved, and the writer puts a changed bucket off for its per-pod minute) until the cap,
then blamed RBAC. A held runtime's writes are urgent, so the hold usually lasts one refresh: the refresh that lowers
the value hands the writer the new ranking, which it writes within the next 15 s.

A ranking that turns after the value fell (the load moves onto a pod carrying a low cost) is not held: holding a
value already served, at every refresh below what runs, held scale-downs back under ordinary noise. Where it
turned clearly (beyond `autoscaler.policies.load_noise`), the writer writes it at its next pass, not at each pod's
minute, in time for an HPA without scale-down stabilization. The log names such a turn once, until it is over.

Until the first refresh past `COST_HOLD_MAX_S` held (75 s, five HPA syncs, at a 15 s refresh): a lasting failure
(a Role without `patch` on `pods`) must not stop scale-downs for good. Past it the value falls with the costs as
they are, and a warning says what the writes wait on and how long it held. The log says it only when it lasts
longer than a refresh (the writer had its chance), once per runtime and spell, a fleet's runtimes in one line. A
data outage within the hold stops its clock (`scale_down_hold._Spell.pause`), and the refresh after it holds at
least once more (once a hold): the HPA keeps its replicas meanwhile, so the time a value is held with data stays
bounded, the bound and two refreshes at most. The refresh after an outage is judged as if it had not been there:
by the value served and the ranking handed to the writer before it (`RankingHold._handed_to`), so outages every few
refreshes under load noise do not hold each return, which kept the replicas that run in the HPA's window and
stopped scale-downs. Every replica holds and goes ahead, but only the one leading counts `expired`: the alert sums
the replicas. Each replica times its own hold, so a hand-over between live replicas within a hold's last refresh
may count it 0 or 2 times; the log names every one.

This module holds what the hold and the deletion-cost writer tell each other (`HoldReason`, `CostsPending`,
`RankingWrites`) and which pods a scale-down removes (`pods_removed`); `autoscaler.scale_down_hold.RankingHold`
holds the values.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Protocol

from autoscaler.forgetting import ForgetsRuntimes
from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey, RuntimeView

COST_HOLD_MAX_S: Final = 60.0
"""How long a scale-down waits for its deletion costs (seconds, held with data), until the first refresh past it:
the writer's backoff cap, so that a failing PATCH is tried again at least once meanwhile."""

NAMED_PODS: Final = 3
"""How many pods `held` names before it counts the rest: enough to find the PATCH to look at."""

RBAC_HINT: Final = "a 403 is a Role without the verb patch on pods in that namespace"


class HoldReason(StrEnum):
    """What a held scale-down's writes wait on, as `modelmesh_autoscaler_scale_down_holds_total` counts it: a
    single word an alert or a dashboard can split on, the most telling of the pods' causes (a refusal over a
    queue). The listed order is that precedence, strongest first."""

    REFUSED = "refused"
    """A PATCH refused (403: a Role without `patch` on pods; 4xx, 5xx: a webhook, the API server)."""
    THROTTLED = "throttled"
    """The API server answered 429 or `Retry-After`: the writer pauses."""
    NO_ANSWER = "no_answer"
    """A PATCH that got no answer (timeout, connection)."""
    LEADER = "leader"
    """A replica not leading: the leader writes the costs, and its log says why not yet."""
    OVERWRITTEN = "overwritten"
    """Another writer (`kubectl annotate`, another tool) set the pod's cost after this replica's write, or removed
    it: written again at once, then at the pod's minute while that writer keeps putting its value back."""
    QUEUED = "queued"
    """Nothing failed: the writer has not had its turn yet, or its write is not yet shown by the pod watch (the
    usual hold, one refresh)."""

    @classmethod
    def strongest(cls, reasons: Iterable[HoldReason]) -> HoldReason:
        """The one to count for a hold whose pods wait on several."""
        order = list(cls)
        return min(reasons, key=order.index, default=cls.QUEUED)


EXPIRED: Final = "expired"
"""The `reason` counted when a hold reaches `COST_HOLD_MAX_S` and the value falls with the costs as they are."""


@dataclass(frozen=True, slots=True)
class CostsPending:
    """Why a scale-down waits, as the writer knows it."""

    unwritten: tuple[str, ...]
    """The pods whose cost in this ranking is not on them yet."""
    misplaced: tuple[str, ...]
    """The pods the ReplicaSet would remove now that the ranking does not count among the least needed."""
    causes: tuple[str, ...]
    """What the writes wait on: `refused with 503`, `throttled by the API server (...)`, `queued`, ..."""
    reason: HoldReason = HoldReason.QUEUED
    """The most telling of `causes`, in one word, for the hold counter."""

    def describe(self) -> str:
        """`deletion costs of pod-b not written (refused with 503)`: the pods and why, for /debug and the log."""
        return (f"deletion costs of {few(self.unwritten, NAMED_PODS)} not written "
                f"({', '.join(self.causes)}); the ReplicaSet would remove {few(self.misplaced, NAMED_PODS)}")


class RankingWrites(ForgetsRuntimes, Protocol):
    """What the hold needs from the deletion-cost writer (`DeletionCostWriter` has it), without importing it; it
    forgets a runtime gone or created again with the refresher's other memories (`autoscaler.forgetting`)."""

    def offer(self, views: Mapping[RuntimeKey, RuntimeView]) -> None:
        """Take the refresh's views as decided, before any hold: the writer must see the scale-down to hurry.
        Called after `misordered` was asked of every runtime of the refresh."""

    def misordered(self, key: RuntimeKey, view: RuntimeView, removing: int,
                   handed: RuntimeView | None) -> CostsPending | None:
        """What waits to be written while the `removing` pods the ReplicaSet would remove are not the least
        needed by `view`'s ranking; None when they are, or nothing the writer was handed is left to write that
        would change it. `handed`: the view of the last refresh that decided this scale-down, whose ranking the
        writer had its turn to write; None where the scale-down starts (or grows) at this refresh, so the writer
        has not had a ranking for it yet. A runtime it answers for has its writes made at once."""

    def on_pods(self, key: RuntimeKey, view: RuntimeView) -> dict[str, int | None]:
        """The deletion cost each of `view`'s pods carries (None: none), for /debug beside the cost wanted; empty
        where the writer knows nothing of them."""

    def unwritten(self, key: RuntimeKey, view: RuntimeView) -> tuple[str, ...]:
        """The pods whose cost in `view`'s ranking they do not carry (as the writer knows them: what it wrote while
        leading, else the pod watch's); empty where nothing is written or can be known. Asked as a hold ends, so
        that "deletion costs written" is said only where they are."""

    def hurry_turned(self, key: RuntimeKey, view: RuntimeView, removing: int, slack: Callable[[], float]) -> bool:
        """Make the runtime's writes urgent, holding nothing, when the `removing` pods the ReplicaSet would remove
        include one whose need in `view` is more than `slack()` above that of a pod that stays (asked only where
        the costs are misplaced: it reads every pod); True when it did."""


def pods_removed(view: RuntimeView, current: int, target: int) -> int:
    """How many of `view`'s pods to count as removed when the replicas go from `current` to `target`, as
    `removal_order` counts them (its not-Ready pods first): its not-Ready pods and the Ready pods that go, those of
    the Ready ones or the replicas, the fewer, beyond `target`; 0 where no Ready pod goes.

    Not the Deployment's replicas less `target`: a Deployment at 6 whose ReplicaSet runs 4 pods (two never created:
    a quota, an admission webhook, a full node pool) removes 2 when asked for 2, not 4; counted as 4, every pod
    went, "no choice to get wrong", and the value fell while the busy pod carried the lowest cost (s57 on-call,
    rt4). Nor all the pods less `target`: mid-rollout with surge a Deployment at 3 runs 5 Ready pods (its old and
    new ReplicaSets'), and asked for 2 it removes one or two of them, each ReplicaSet by the costs of its own pods;
    counted as 3, the three tied at the lowest cost all went, and the value fell at once while the busiest of them
    could go (s57 rvh, `rollout_hidden`). The fewer is the cautious count: with the ReplicaSets' split unknown, any
    of the pods carrying the lowest costs may be the one to go. A not-Ready pod (starting, or terminating: the view
    does not tell which) is not counted among the Ready ones, so a terminating pod never hides a Ready one going."""
    ready = sum(1 for _, is_ready, _, _ in view.pods.deletion_costs() if is_ready)
    going = min(current, ready) - target
    return going + (len(view.pods) - ready) if going > 0 else 0
