"""Pod discovery's log when many runtimes come, go or scale to zero between two resyncs, as the platform engineer
reads it: one line a kind for the lot, not one per runtime.

A runtime whose pods go to none or come from none has its Deployment read by name at once, not at the resync
(`DeploymentResync.reread`, `discover_soon`). Each such read logged its own line, so a GitOps prune of an
application's 40 runtimes, or 40 runtimes applied together, wrote 40 lines, one every few hundredths of a second,
until the resync (30 s) found the rest in one line."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.log_lists import NAMED
from autoscaler.model import RuntimeKey
from autoscaler.sources.kube_pods import KubePodDiscovery
from autoscaler.sources.reread_news import RereadNews
from tests.fakes.kube import FakeKubeApi

NS = "fleet"
RUNTIMES = 40
LONGEST_LINE = 2_000
ALONE = "rereads-news"
"""The property test's namespace, which no other test's discovery logs about (the logger is the process's)."""


def runtime(number: int) -> str:
    return f"modelmesh-serving-rt{number}"


@pytest.fixture
async def kube() -> AsyncIterator[FakeKubeApi]:
    async with FakeKubeApi() as kube:
        yield kube


async def discovering(kube: FakeKubeApi) -> KubePodDiscovery:
    """Discovery of namespace `NS` whose resync waits an hour: what is said is what the reads by name say."""
    subject = KubePodDiscovery(kube.client_configuration(), runtimes=[], discover=True, namespaces=[NS],
                               resync_interval_s=3600, reread_interval_s=0.5, request_timeout_s=5.0)
    await subject.start()
    return subject


async def until(condition: object, seconds: float = 20.0) -> None:
    assert callable(condition)
    async with asyncio.timeout(seconds):
        while not condition():
            await asyncio.sleep(0.02)


def discovery_lines(caplog: pytest.LogCaptureFixture, word: str) -> list[str]:
    return [r.getMessage() for r in caplog.records
            if r.name == "autoscaler.sources.kube_pods" and word in r.getMessage()]


async def test_forty_runtimes_deleted_together_are_one_line(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    pods = {number: kube.add_modelmesh_runtime(NS, runtime(number), replicas=2) for number in range(RUNTIMES)}
    subject = await discovering(kube)
    try:
        caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
        for number, names in pods.items():  # an application pruned: its Deployments, then their pods
            kube.delete_deployment(NS, runtime(number))
            for pod in names:
                kube.delete_pod(NS, pod)
        await until(lambda: not subject.inventory())
        await until(lambda: discovery_lines(caplog, "removed"))  # once no read is queued for a read interval
    finally:
        await subject.close()
    removed = discovery_lines(caplog, "removed")
    assert len(removed) == 1, removed
    assert removed[0].startswith(f"Kubernetes discovery: {RUNTIMES} runtimes removed (their Deployments are "
                                 f"gone): {NS}/modelmesh-serving-rt")
    assert removed[0].endswith(f" and {RUNTIMES - NAMED} more")
    assert len(removed[0]) < LONGEST_LINE


async def test_forty_runtimes_applied_together_are_one_line(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    kube.add_modelmesh_runtime(NS, "modelmesh-serving-first", replicas=1)
    caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
    subject = await discovering(kube)
    try:
        # the first runtime known, and anything said of it, before the forty come: under load a first inventory
        # that timed out found it with theirs (41 added)
        await until(lambda: len(subject.inventory()) == 1)
        # its line said, however long a loaded machine takes (it was a sleep of two rereads, 0.5 s each)
        await until(lambda: discovery_lines(caplog, "added"))
        caplog.clear()
        for number in range(RUNTIMES):
            kube.add_modelmesh_runtime(NS, runtime(number), replicas=2)
        await until(lambda: len(subject.inventory()) == RUNTIMES + 1)
        await until(lambda: discovery_lines(caplog, "added"))
    finally:
        await subject.close()
    added = discovery_lines(caplog, "added")
    assert len(added) == 1, added
    assert added[0].startswith(f"Kubernetes discovery: {RUNTIMES} runtimes added (their pods appeared): ")
    assert len(added[0]) < LONGEST_LINE


async def test_one_runtime_deleted_is_said_at_once_by_name(
    kube: FakeKubeApi, caplog: pytest.LogCaptureFixture,
) -> None:
    pods = kube.add_modelmesh_runtime(NS, runtime(0), replicas=2)
    kube.add_modelmesh_runtime(NS, runtime(1), replicas=2)
    subject = await discovering(kube)
    try:
        caplog.set_level(logging.INFO, logger="autoscaler.sources.kube_pods")
        kube.delete_deployment(NS, runtime(0))
        for pod in pods:
            kube.delete_pod(NS, pod)
        await until(lambda: RuntimeKey(NS, runtime(0)) not in subject.inventory())
        await until(lambda: discovery_lines(caplog, "removed"))
    finally:
        await subject.close()
    assert discovery_lines(caplog, "removed") == [
        f"Kubernetes discovery: runtime {NS}/{runtime(0)} removed (its Deployment is gone)"]


@settings(max_examples=50, deadline=None)
@given(kinds=st.lists(st.sampled_from(["added", "removed", "rescaled"]), max_size=3 * NAMED + 5))
def test_every_finding_is_counted_once_and_a_kind_is_one_line_beyond_ten(kinds: list[str]) -> None:
    """Whatever one flush holds: a kind with at most `NAMED` runtimes has a line each naming it; a kind with more
    has one line counting all of them and naming `NAMED`."""
    news = RereadNews()
    for number, kind in enumerate(kinds):
        key = RuntimeKey(ALONE, runtime(number))
        if kind == "rescaled":
            news.rescaled(key, 2, 0)
        else:
            getattr(news, kind)(key)
    lines: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(record.getMessage())

    handler, logger = Keep(logging.INFO), logging.getLogger("autoscaler.sources.kube_pods")
    logger.addHandler(handler)
    # setLevel, not `.level =`: it clears the cached answer of a logger asked before at another level
    level = logger.level
    logger.setLevel(logging.INFO)
    try:
        news.flush()
        news.flush()  # nothing twice
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    for kind, one, many in (("added", "added (its pods", "runtimes added"),
                            ("removed", "removed (its Deployment", "runtimes removed"),
                            ("rescaled", "replicas 2 -> 0", "runtimes' replicas changed")):
        count = kinds.count(kind)
        said = [line for line in lines if (one in line or many in line) and f"{ALONE}/" in line]
        if count <= NAMED:
            assert len(said) == count
            assert all(f"runtime {ALONE}/" in line for line in said)
        else:
            [line] = said
            assert line.startswith(f"Kubernetes discovery: {count} ")
            assert line.count(f"{ALONE}/") == NAMED and line.endswith(f" and {count - NAMED} more")
    ours = [line for line in lines if line.startswith("Kubernetes discovery: ") and f"{ALONE}/" in line]
    assert len(ours) == sum(kinds.count(kind) if kinds.count(kind) <= NAMED else 1
                            for kind in ("added", "removed", "rescaled"))
