"""A runtime back from zero whose Deployment read still says 0 replicas: never served below what runs.

Pods appear within a second of modelmesh-serving scaling a runtime back up, while the adapter's last Deployment
read can still say `spec.replicas: 0` (docs/design.md, After a restart: warming up). The runtime has no memory (it was
dropped at zero), so it warms up seeded at what runs (`autoscaler.policies.warmup.replica_floor`): with the
Deployment's 0 that seed must be the Ready pods, not 0, or the first complete refresh serves what the load
alone asks for, below the pods that run, and the HPA scales the runtime it just started down.
"""

from __future__ import annotations

from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from tests.test_refresher_scaled_to_zero import IdleSource, answers


async def test_pods_back_before_the_deployment_read_are_not_served_below_what_runs() -> None:
    clock = [1_700_000_000.0]
    source = IdleSource(replicas=0, pods=0)
    refresher = Refresher(source, PolicyBook(RuntimePolicy(warmup_grace_s=30.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    await refresher.refresh_once()
    assert "scaled to zero" in answers(refresher)[ServedMetric.DESIRED_REPLICAS.value][1]

    clock[0] += 15.0
    source.pods = source.fresh = 4  # four Ready, fresh, at 0.6 GPU: 3 pods of demand; replicas still 0
    await refresher.refresh_once()

    assert answers(refresher)[ServedMetric.DESIRED_REPLICAS.value] == (200, "4000m")
