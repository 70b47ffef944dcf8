"""Discovery says when a pod it saw Ready stopped being Ready: the decision counts such a pod as missing data for a
while (`policies.unready_pods`), never a pod that is starting or terminating."""

from __future__ import annotations

import asyncio
import time

import pytest

from autoscaler.sources.kube_pods import KubePodDiscovery
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import LABELS, NS, kube, pods, running
from tests.support.waiting import eventually

__all__ = ["kube", "running"]  # the fixtures, taken from their module: discovery over the fake API, started


async def test_a_pod_seen_ready_that_fails_its_probe_says_since_when_until_ready_again_or_terminating(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    kube.add_pod(NS, "hot", labels=LABELS)
    await eventually(lambda: "hot" in pods(running) and pods(running)["hot"].ready)
    assert pods(running)["hot"].unready_since is None

    before = time.time()
    kube.set_ready(NS, "hot", False)
    await eventually(lambda: not pods(running)["hot"].ready)
    since = pods(running)["hot"].unready_since
    assert since is not None and int(before) <= since <= time.time()  # lastTransitionTime: whole seconds

    kube.set_pod_ip(NS, "hot", "10.1.2.3")  # another change while it stays not Ready: the same since
    await eventually(lambda: "10.1.2.3" in (pods(running)["hot"].url or ""))
    assert pods(running)["hot"].unready_since == since

    kube.set_ready(NS, "hot", True)
    await eventually(lambda: pods(running)["hot"].ready)
    assert pods(running)["hot"].unready_since is None

    kube.set_ready(NS, "hot", False)
    await eventually(lambda: pods(running)["hot"].unready_since is not None)
    kube.delete_pod(NS, "hot", graceful=True)  # terminating: the ReplicaSet counts it gone; so does the decision
    await eventually(lambda: pods(running)["hot"].unready_since is None)
    assert not pods(running)["hot"].ready


async def test_a_pod_never_seen_ready_says_nothing(kube: FakeKubeApi, running: KubePodDiscovery) -> None:
    kube.add_pod(NS, "starting", labels=LABELS, phase="Pending", ready=False)
    await eventually(lambda: "starting" in pods(running))
    kube.set_pod_ip(NS, "starting", "10.1.2.4")
    kube.set_pod_phase(NS, "starting", "Running")
    await eventually(lambda: "10.1.2.4" in (pods(running)["starting"].url or ""))
    assert (pods(running)["starting"].ready, pods(running)["starting"].unready_since) == (False, None)


async def test_a_fresh_list_after_410_keeps_since_when_a_pod_is_not_ready(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    kube.add_pod(NS, "hot", labels=LABELS)
    await eventually(lambda: "hot" in pods(running) and pods(running)["hot"].ready)
    kube.set_ready(NS, "hot", False)
    await eventually(lambda: pods(running)["hot"].unready_since is not None)
    since = pods(running)["hot"].unready_since

    kube.end_watches()
    kube.add_pod(NS, "during", labels=LABELS)
    kube.compact()
    await eventually(lambda: "during" in pods(running))
    assert pods(running)["hot"].unready_since == since


@pytest.mark.parametrize("history_kept", [False, True], ids=["relisted-after-410", "watch-resumed"])
async def test_a_pod_that_went_not_ready_during_a_watch_outage_is_timed_from_its_ready_condition(
    kube: FakeKubeApi, running: KubePodDiscovery, history_kept: bool
) -> None:
    """The pod watch is down for two minutes, and the hot pod fails its probe early in them: its not-Ready time is
    its Ready condition's `lastTransitionTime`, as the kubelet wrote it, not the time discovery caught up (then the
    hold lasted up to the outage's length past its 5 minutes). A pod never seen Ready stays without one."""
    kube.add_pod(NS, "hot", labels=LABELS)
    kube.add_pod(NS, "starting", labels=LABELS, ready=False)
    await eventually(lambda: "starting" in pods(running) and "hot" in pods(running) and pods(running)["hot"].ready)

    lost = time.time()
    kube.fail(r"/pods$", status=503, times=None)
    kube.end_watches()
    await eventually(lambda: not running.healthy)
    await asyncio.sleep(1.0)  # the outage lasts: a pod timed from the catch-up would read that much later
    went = float(int(time.time()))  # metav1.Time has whole seconds
    kube.clock = lambda: went
    kube.set_ready(NS, "hot", False)
    kube.set_pod_ip(NS, "starting", "10.1.2.5")
    kube.clock = time.time
    await asyncio.sleep(1.0)
    if not history_kept:
        kube.compact()
    caught_up = time.time()
    kube.clear_faults()

    await eventually(lambda: running.healthy and not pods(running)["hot"].ready
                     and "10.1.2.5" in (pods(running)["starting"].url or ""))
    # a second after the watch lost touch (whole seconds: still after it), a second before the catch-up
    assert pods(running)["hot"].unready_since == went, (lost, went, caught_up)
    assert pods(running)["starting"].unready_since is None


@pytest.mark.parametrize("history_kept", [False, True], ids=["relisted-after-410", "watch-resumed"])
async def test_a_node_clock_behind_never_times_a_change_caught_up_before_the_outage(
    kube: FakeKubeApi, running: KubePodDiscovery, history_kept: bool
) -> None:
    """The kubelet writes `lastTransitionTime` on its node's clock: on a node 6 minutes behind, a pod that failed
    its probe during a watch outage would read not Ready for 6 minutes already, past the hold. It is timed from no
    earlier than when the watch lost touch."""
    kube.add_pod(NS, "hot", labels=LABELS)
    await eventually(lambda: "hot" in pods(running) and pods(running)["hot"].ready)
    lost = time.time()
    kube.fail(r"/pods$", status=503, times=None)
    kube.end_watches()
    await eventually(lambda: not running.healthy)
    kube.node_clock_off_s = -360.0
    kube.set_ready(NS, "hot", False)
    if not history_kept:
        kube.compact()
    kube.clear_faults()

    await eventually(lambda: running.healthy and not pods(running)["hot"].ready)
    since = pods(running)["hot"].unready_since
    assert since is not None and lost <= since <= time.time(), (lost, since)


async def test_a_pod_on_a_node_whose_clock_is_behind_is_timed_from_when_it_failed(
    kube: FakeKubeApi, running: KubePodDiscovery
) -> None:
    """The kubelet writes `lastTransitionTime` on its own clock. On a node 6 minutes behind, the hot pod that fails
    its probe now read as not Ready for 6 minutes already: past the 5 minutes of the hold, its load left the values
    at once. A change the watch sees as it happens is timed from then, however the node's clock reads."""
    kube.node_clock_off_s = -360.0
    kube.add_pod(NS, "hot", labels=LABELS)
    await eventually(lambda: "hot" in pods(running) and pods(running)["hot"].ready)

    before = time.time()
    kube.set_ready(NS, "hot", False)
    await eventually(lambda: not pods(running)["hot"].ready)
    since = pods(running)["hot"].unready_since
    assert since is not None and int(before) - 1 <= since <= time.time(), (before, since)
