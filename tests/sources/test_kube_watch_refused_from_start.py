"""The log of pod discovery when its watch fails from its very start (the Role lacks `list` on pods), as the
platform engineer reads it.

`FailingSpell` started the pod watch as failing, so that its first success is said (`established`); its first failure
was then no news, and a watch refused from the start said nothing above DEBUG until it worked: an operator saw
neither the watch nor the namespace nor the 403, only, much later, `established`. Its first WARNING then said
`broken, keeping last inventory; its runtimes hold their values`, of a watch that had neither: it says now that
the watch fails since the start, its runtimes not served until it works, and what a 403 asks for."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest

from autoscaler.source_problems import DiscoveryOutage
from tests.fakes.kube import FakeKubeApi
from tests.sources.test_kube_pods import discovery
from tests.sources.test_kube_watch_flapping import watch_lines
from tests.support.waiting import eventually


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as server:
        yield server


async def test_a_pod_watch_refused_from_its_start_warns_naming_the_namespace_and_the_refusal(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    kube.forbid("list", "pods")
    subject = discovery(kube)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)
        kube.clear_faults()
        await eventually(lambda: len(watch_lines(caplog)) == 2)
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    # no "broken, keeping last inventory; its runtimes hold their values": there is neither yet
    assert lines[0][1].startswith("Kubernetes discovery: pod watch of namespace modelmesh-serving failing since the "
                                  "start, no inventory of it yet: its runtimes are not served until it works"), lines
    assert "keeping last inventory" not in lines[0][1] and "list and watch on pods" in lines[0][1], lines
    assert "403" in lines[0][1] and "list pods in namespace modelmesh-serving" in lines[0][1], lines
    assert lines[1][1] == "Kubernetes discovery: pod watch of namespace modelmesh-serving established", lines


async def test_a_pod_watch_whose_list_works_but_watch_is_refused_never_says_established_and_names_watch(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    """A Role with `list` but not `watch` on pods: the list is taken, every watch is refused with 403. The log said
    `established` (the list worked) and at once `broken ...: watch pods ... 403`, and its hint, where it had one,
    asked for list and watch. The watch never opened: it says the inventory listed is kept and that `watch` is what
    the Role lacks, and `established` once a watch works."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    kube.forbid("watch", "pods")
    subject = discovery(kube)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) >= 1)
        await asyncio.sleep(1.5)  # nothing else said while it is refused
        kube.clear_faults()
        await eventually(lambda: watch_lines(caplog)[-1][0] == "INFO" and len(watch_lines(caplog)) > 1, timeout=10)
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert lines[0][1].startswith("Kubernetes discovery: pod watch of namespace modelmesh-serving broken, keeping last "
                                  "inventory; its runtimes are unknown (503) until it recovers, the HPA holding their "
                                  "replicas (no scale-up, no scale-down): "), lines  # it said they held their values
    assert "watch pods in namespace modelmesh-serving: 403" in lines[0][1], lines
    assert "grant the adapter watch on pods there" in lines[0][1], lines
    assert lines[1][1] == "Kubernetes discovery: pod watch of namespace modelmesh-serving established", lines


async def test_debug_of_a_namespace_whose_pod_list_is_refused_from_the_start_says_its_pods_are_unknown(
    kube: FakeKubeApi,
) -> None:
    """/debug of a runtime there showed `pod discovery is out of date (...403...); values cannot fall until it
    recovers`: there is no inventory to be out of date and no value to hold; its pods are unknown, the list refused."""
    kube.forbid("list", "pods")
    subject = discovery(kube)
    await subject.start()
    try:
        await eventually(lambda: bool(subject.problems))
        outage = DiscoveryOutage()
        outage.note(subject.healthy_for, ["modelmesh-serving"], 0.0, subject.problems)
        [problem] = outage.problems("modelmesh-serving")
    finally:
        await subject.close()
    assert problem.detail.startswith("the pods of namespace modelmesh-serving are unknown: its pod list is refused "
                                     "(list pods in namespace modelmesh-serving: 403"), problem.detail
    assert "out of date" not in problem.detail and "until it recovers" not in problem.detail, problem.detail
    assert "grant the adapter list and watch on pods there" in problem.detail, problem.detail


async def test_a_pod_watch_whose_api_server_refuses_connections_from_the_start_asks_for_no_grant(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    """The API server down as the adapter starts (a control-plane upgrade): its WARNING added "(a 403: grant the
    adapter list and watch on pods there, manifests/base)" to a refused connection, sending the on-call engineer to
    the Role for an outage. The hint comes with a 403 alone."""
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    await kube.pause()
    subject = discovery(kube, start_timeout_s=1.0)
    await subject.start()
    try:
        await eventually(lambda: len(watch_lines(caplog)) == 1)
        await kube.resume()
        await eventually(lambda: len(watch_lines(caplog)) == 2, timeout=10)
    finally:
        await subject.close()
    lines = watch_lines(caplog)
    assert [level for level, _ in lines] == ["WARNING", "INFO"], lines
    assert lines[0][1].startswith("Kubernetes discovery: pod watch of namespace modelmesh-serving failing since the "
                                  "start, no inventory of it yet: its runtimes are not served until it works"), lines
    assert "list pods in namespace modelmesh-serving" in lines[0][1], lines
    assert "403" not in lines[0][1] and "grant" not in lines[0][1], lines
