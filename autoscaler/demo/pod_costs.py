"""The deletion cost on each of the demo's pods: what its table shows and its ReplicaSet removes pods by.

The adapter's /debug lists each pod's `deletion_cost`, the cost the adapter would write, for a pod it does not
write one on too: a pod a scale-up started, Ready and in the targets but without a fresh rate yet, is listed at 0,
and the table showed `0` for it where a pod still starting shows `-`. The adapter writes a cost only on a Ready pod
with fresh data, in a runtime whose values are known (`autoscaler.actuation.deletion_cost_plan.plan_patches`), and
a cost it wrote stays on the pod whatever /debug lists later: so here (the demo has no cluster to write to, and
plays the ReplicaSet from this).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from autoscaler.demo.removals import Ranking


def costs_on_pods(debug: Mapping[str, Any], before: Ranking) -> dict[str, tuple[int, int | None]]:
    """The costs on the pods after the adapter's refresh that `debug` (its /debug document) shows, given those on
    them `before`: each pod it writes a cost on takes it (with its unique models as listed now), each other pod it
    lists keeps the cost it had; a pod no longer listed has gone."""
    writes = debug.get("known") is True
    on = {}
    for pod in debug.get("pods", []):
        name, cost = pod.get("name"), pod.get("deletion_cost")
        if writes and cost is not None and pod.get("ready") and pod.get("fresh"):
            on[name] = (cost, pod.get("unique_models"))
        elif name in before:
            on[name] = before[name]
    return on
