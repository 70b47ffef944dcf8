"""A scale-down held for its deletion costs when a data outage starts (every exporter's scrape fails, the API
answers 503 and the HPA keeps its replicas): the outage is not the hold's time. Ran on, the hold of every runtime
held when a Prometheus outage started ran out during it, and all went ahead together at the first refresh with
data, before the writer had that refresh's ranking. The real refresher, writer and API over the fake Kubernetes
API (the fixture of test_deletion_cost_hold), time stepped; the test reads what the HPA reads, /metrics and the
log."""

from __future__ import annotations

import pytest

from autoscaler.names import ServedMetric
from tests.actuation.test_deletion_cost_hold import AFTER, DESIRED, Cluster, cluster

__all__ = ["cluster"]

OUTAGE_REFRESHES = 20  # 300 s at 15 s


async def _outage(cluster: Cluster) -> None:
    cluster.source.scrapes_failing = frozenset({"pod-a", "pod-b", "pod-c"})
    for _ in range(OUTAGE_REFRESHES):
        await cluster.refresh()
        assert (await cluster.api.get(DESIRED)).status == 503  # nothing decided: the HPA keeps its replicas
    cluster.source.scrapes_failing = frozenset()


async def _held_refresh(cluster: Cluster) -> None:
    """A refresh that holds the scale-down, returning once the writer has sent the PATCH of pod-b it makes for it
    (the next refresh steps the clock only once its answer is taken in: `Cluster.refresh`)."""
    tries = cluster.patched("pod-b")
    await cluster.refresh()
    assert await cluster.served() == 3.0
    await cluster.until(lambda: cluster.patched("pod-b") > tries, "tried this refresh's raise of pod-b")


def _said(caplog: pytest.LogCaptureFixture, words: str) -> list[str]:
    return [r.getMessage() for r in caplog.records if words in r.getMessage()]


@pytest.mark.parametrize("held_before", [2, 5])
async def test_a_hold_open_when_data_stops_still_holds_when_it_returns(cluster: Cluster, held_before: int) -> None:
    """PATCHes 503 from the hold's start (held at `held_before` refreshes: 5 reach the bound, 60 s), then 300 s
    without data; data and API server come back together."""
    cluster.kube.fail(r"/pods/", status=503, times=None, method="PATCH")
    cluster.source.load = AFTER
    for _ in range(held_before):
        await _held_refresh(cluster)
    await _outage(cluster)
    cluster.kube.clear_faults()
    await cluster.refresh()
    # The ReplicaSet would still remove pod-b, now the most needed: the writer gets this ranking only now.
    assert await cluster.served() == 3.0, (await cluster.debug())["reason"]
    # The writer has not tried since the outage; what it met before it is the cause to look at.
    held = (await cluster.debug())["held"][ServedMetric.DESIRED_REPLICAS.value]
    assert "refused with 503" in held, held
    await cluster.until(lambda: cluster.least_needed_in_cluster() == ["pod-a"], "wrote the new ranking")
    await cluster.refresh()
    assert await cluster.served() == 2.0, (await cluster.debug())["reason"]
    assert "expired" not in await cluster.holds_counted()


async def test_a_lasting_refusal_goes_ahead_after_its_held_time_not_counting_the_outage(
        cluster: Cluster, caplog: pytest.LogCaptureFixture) -> None:
    """PATCHes refused 403 throughout (a Role without `patch`): the scale-down still goes ahead, once, after the
    time it was held with data, and the log says how long that was and what the writes wait on."""
    cluster.kube.fail(r"/pods/", status=403, times=None, method="PATCH")
    cluster.source.load = AFTER
    served = []
    for _ in range(3):
        await cluster.refresh()
        served.append(await cluster.served())
        await cluster.until(lambda: cluster.patched("pod-b") >= 2, "tried pod-b's raise")
    await _outage(cluster)
    served += await cluster.served_over(6)
    assert 2.0 in served and served == sorted(served, reverse=True), served
    held_s = 15 * served.index(2.0)  # the refreshes held, with data, before the one that let it fall
    assert served.index(2.0) > 3, f"went ahead at the first refresh after the outage: {served}"
    went = _said(caplog, "goes ahead with stale deletion costs")
    assert len(went) == 1, went
    assert f"for {held_s} s" in went[0] and "300 s without data" in went[0], went
    assert "refused with 403" in went[0] and "Role without the verb patch" in went[0], went
    assert (await cluster.holds_counted())["expired"] == 1.0
