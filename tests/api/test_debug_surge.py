"""/debug of a runtime mid-rollout: its idle surge pods raise no replica count, and are named (reviewer finding).

4 pods at 9 req/s with 10 a pod serve 4 replicas. A rolling update's 3 new pods, Ready and idle beyond the
Deployment's 4 replicas, made it 5 (a request load of 47.6), and after the rollout /debug read `value 5, raw 4`,
falling for about 683 s more. Now it serves 4 throughout, nothing falls after, and the reason names the surge pods.
"""

from __future__ import annotations

from autoscaler.model import PodSample, RuntimeSnapshot
from tests.api.builders import KEY
from tests.api.test_debug_slow_fall import DESIRED, INTERVAL_S, PODS, Runtime

SURGE = 3


async def test_a_rollout_serves_4_throughout_names_its_surge_pods_and_has_nothing_to_fall_from() -> None:
    runtime = Runtime(tau_s=300.0, rps=36.0)
    for _ in range(3):
        steady = await runtime.after(INTERVAL_S)
    assert steady["values"][DESIRED]["value"] == 4
    real_collect = runtime.source.collect

    async def with_surge(now: float) -> list[RuntimeSnapshot]:
        [snapshot] = await real_collect(now)
        new = tuple(PodSample(name=f"new-{i}", sampled_at=now - 1, requests_per_second=0.0, queue_delay_s=0.0,
                              lru_age_s=900.0, cache_used_ratio=0.0, models_loaded=0.0, created_at=now - 20 + i)
                    for i in range(SURGE))
        return [RuntimeSnapshot(KEY, snapshot.pods + new, now, replicas=PODS)]

    runtime.source.collect = with_surge  # type: ignore[method-assign]
    during = [await runtime.after(INTERVAL_S) for _ in range(4)]
    runtime.source.collect = real_collect  # type: ignore[method-assign]
    after = await runtime.after(INTERVAL_S)

    assert [d["values"][DESIRED]["value"] for d in during] == [4, 4, 4, 4]  # was 5
    assert "left out as surge: new-2, new-1, new-0" in during[-1]["reason"], during[-1]["reason"]
    assert len(during[-1]["pods"]) == PODS + SURGE
    assert after["values"][DESIRED]["value"] == 4 and not after.get("falling"), after.get("falling")
