"""What each of the demo's reports prints of its own reading: a pod's row of the table, what an HPA on the pods'
average rate would do, and a value the adapter served."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from autoscaler.demo.scenario import TARGET_RPS_PER_POD
from autoscaler.log_lists import in_words
from autoscaler.names import ServedMetric
from autoscaler.simulation.hpa_metrics import count_per_pod
from autoscaler.simulation.hpa_spec import HpaPod, HpaSpec, MetricSpec

POD_COLUMNS = ("true req/s", "exporter req/s", "deletion cost", "models only it served")
POD_TABLE_HEADER = "  pod     " + "".join(f"   {heading}" for heading in POD_COLUMNS)


STARTING = " (starting)"
"""After a pod's name, where it is not Ready yet: in the blanks before its first value (`pod_table_row`)."""


def pod_table_row(name: str, true_rps: float, exporter_rps: float | None, cost: int | None, unique: int | None,
                  ready: bool) -> str:
    """One pod's line of the table, each value right-aligned under the end of its heading; `-` for what is not
    known yet (an exporter that has not answered, a pod the adapter has not ranked). A pod not Ready yet says so
    after its name, in the blanks before its first value: said after the last column, its row ran to 92 columns
    where the table is 80, and an 80-column terminal put `(starting)` on a line of its own, read as a row."""
    cells = (f"{true_rps:.0f}", "-" if exporter_rps is None else f"{exporter_rps:.1f}",
             "-" if cost is None else str(cost), "-" if unique is None else str(unique))
    row = f"  {name:8}" + "".join(f"   {cell:>{len(heading)}}" for cell, heading in zip(cells, POD_COLUMNS,
                                                                                          strict=True))
    if ready:
        return row
    after_name = 2 + len(name)
    said = row[:after_name] + STARTING
    if row[after_name:len(said) + 1].strip():  # a first value too wide to leave the room (never at 0 req/s)
        return f"{row} {STARTING}"
    return said + row[len(said):]


RATE_PER_POD = MetricSpec("modelmesh_pod_requests_per_second", "Pods", "AverageValue", TARGET_RPS_PER_POD)
"""The comparison the demo prints: an HPA on the exporters' per-pod request rate, a `Pods` metric."""


def average_hpa_line(pods: Sequence[HpaPod], rates: Mapping[str, float], spec: HpaSpec) -> str | None:
    """What an HPA on the pods' average rate would do, as the Kubernetes HPA counts it (`count_per_pod`): a Ready
    pod without a rate yet and a pod still starting count as 0 on a scale-up, and where that turns the scale-up
    into a scale-down the HPA keeps its replicas; held to the demo HPA's minReplicas and maxReplicas (which the
    adapter's value is held to as well). The mean is the one the count used, over the pods it names, so the
    number of pods follows from it; it averaged only the pods with a rate, and right after a scale-up said
    "would want 7 pods (mean 136 req/s per pod, target 100)" at 8 replicas. None while no Ready pod has a rate."""
    count = count_per_pod(RATE_PER_POD, rates, len(pods), pods, spec.tolerances)
    if count is None:
        return None
    wants = min(spec.max_replicas, max(spec.min_replicas, count.proposal))
    target = RATE_PER_POD.target
    starting = {p.name for p in pods if not p.ready}
    counted = count.counted
    mean = f"{count.ratio * target:.0f} req/s per pod"
    if count.filled or len(counted) < len(pods):
        mean += f" over {len(counted)} pods"
        # One value for all that are filled in: 0 on a scale-up, the target on a scale-down.
        if count.filled:
            mean += f", {_pods_named(list(count.filled), starting)} counted as {max(count.filled.values()):.0f}"
        if left_out := [p.name for p in pods if p.name not in counted]:
            mean += f", {_pods_named(left_out, starting)} left out"
    said = [f"mean {mean}"]
    if count.held == "reversed":
        measured = sum(count.measured.values()) / len(count.measured)
        said = [f"mean {measured:.0f} req/s per pod over the {len(count.measured)} with a rate, but {mean}: no "
                f"{'scale-up' if measured > target else 'scale-down'} then, so the HPA keeps the replicas"]
    elif count.held == "tolerance" and math.ceil(count.ratio * len(counted) - 1e-9) != count.proposal:
        said.append(f"within the HPA's tolerance of the target, so it keeps {count.proposal}")
    said.append(f"target {target:.0f}, replicas {spec.min_replicas}..{spec.max_replicas}")
    return (f"  an HPA on the average would {'keep' if count.held == 'reversed' else 'want'} {wants} "
            f"pod{'' if wants == 1 else 's'} ({('; ' if ',' in said[0] or len(said) > 2 else ', ').join(said)})")


def _pods_named(names: list[str], starting: set[str]) -> str:
    """`demo-5, demo-6 (no rate yet) and demo-7 (starting)`: why each pod has no rate of its own."""
    groups = [(f"{', '.join(group)} ({why})") for why, group in (
        ("no rate yet", [n for n in names if n not in starting]), ("starting", [n for n in names if n in starting]))
        if group]
    return in_words(groups)


def served_value(metric: ServedMetric, answered: tuple[int, dict[str, Any]] | None) -> tuple[str, float | None]:
    """(what to print, the value or None when the API did not serve one) from its answer (`Demo.answer`)."""
    if answered is None:
        return "starting", None
    status, body = answered
    if status == 503 and metric is ServedMetric.GPU_BUSY:
        return "n/a (no GPU on the fake pods)", None
    if status != 200:
        return f"{status} {body.get('reason', '')}", None
    raw = str(body["items"][0]["value"])
    value = int(raw.removesuffix("m")) / 1000 if raw.endswith("m") else float(raw)
    return f"{value:g}", value

