"""Which models a pod served recently: `modelmesh_pod_model_last_served_timestamp_seconds{model_id}` on /metrics.

With `per_model_metrics=true` in ModelMesh's MM_METRICS, its invoke histogram carries `modelId` (and `vModelId`);
the exporter publishes, per model, when a read last saw that model's request count rise, so the adapter can
tell which models only this pod served (docs/design.md, Choosing the pod to remove). The ModelMesh side is
`modelmesh_wire` (the real container's text: label order, escaping, restarts); the exporter side is its real
collector and HTTP app, read over HTTP as a scraper does and linted with `promtool check metrics`. One stepped
clock drives ModelMesh and the exporter, so every timestamp below is exact.
"""

from __future__ import annotations

import logging
import subprocess
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client.parser import text_string_to_metric_families

from exporter import names
from exporter.collectors.health import CollectorHealth
from exporter.collectors.modelmesh import ModelMeshCollector
from tests.exporter.conftest import Clock, ExporterPod
from tests.exporter.modelmesh_wire import ModelMeshContainer
from tests.fakes.prometheus import PROMTOOL_BIN

INTERVAL_S = 5.0
ODD_ID = 'team "a"\\models\nresnet'
"""A model id with a double quote, a backslash and a newline: ModelMesh escapes them, so must we."""


@dataclass
class Scraped:
    """One /metrics answer: the per-model times, and the last-success time of the ModelMesh collector."""

    served: dict[str, float]
    last_success: float | None
    has_family: bool
    horizon_s: float | None = None
    """`modelmesh_exporter_model_recency_horizon_seconds`; None when it is not published."""


class Pod(ExporterPod):
    """A pod whose ModelMesh has per-model metrics on, read as its per-model times (promtool-clean)."""

    async def read(self, seconds: float = INTERVAL_S) -> Scraped:
        """`seconds` pass, the exporter reads ModelMesh once; what /metrics serves then."""
        await self.read_modelmesh(seconds)
        return await self.scrape()

    async def scrape(self) -> Scraped:
        text = await self.metrics_text()
        linted = subprocess.run([PROMTOOL_BIN, "check", "metrics"], input=text, capture_output=True, text=True,
                                timeout=30, check=False)
        assert (linted.returncode, (linted.stdout + linted.stderr).strip()) == (0, ""), text
        families = {family.name: family for family in text_string_to_metric_families(text)}
        family = families.get(names.MODEL_LAST_SERVED_TIMESTAMP)
        served = {} if family is None else {s.labels[names.MODEL_ID_LABEL]: s.value for s in family.samples}
        assert family is None or all(set(s.labels) == {names.MODEL_ID_LABEL} for s in family.samples)
        success = [s.value for s in families[names.LAST_SUCCESS_TIMESTAMP].samples
                   if s.labels == {"collector": names.COLLECTOR_MODELMESH}]
        horizon = families.get(names.MODEL_RECENCY_HORIZON)
        return Scraped(served, success[0] if success else None, family is not None,
                       None if horizon is None else horizon.samples[0].value)


PodFactory = Callable[..., Awaitable[Pod]]


@pytest.fixture
def pod_class() -> type[Pod]:
    return Pod


@pytest.fixture
def pod_factory(pod_factory: Callable[..., Awaitable[Pod]]) -> PodFactory:
    """Pods with per-model metrics on; `horizon_s` is the exporter's --model-recency-horizon."""

    async def build(*, per_model: bool = True, horizon_s: float = 3600.0) -> Pod:
        return await pod_factory(per_model=per_model, model_recency_horizon_s=horizon_s)

    return build


async def test_each_model_is_stamped_at_the_last_read_that_saw_it_served(pod_factory: PodFactory) -> None:
    pod = await pod_factory()
    await pod.read()  # the baseline read: nothing served yet
    pod.container.serve(10, model="resnet")
    pod.container.serve(3, model="bert", method="ModelMetadata", code="NOT_FOUND")
    first = await pod.read()
    assert first.served == {"resnet": first.last_success, "bert": first.last_success}

    pod.container.serve(1, model="resnet", code="UNAVAILABLE")  # a new series of a model seen before
    second = await pod.read()
    assert second.served == {"resnet": second.last_success, "bert": first.last_success}

    pod.container.serve(2, model="bert", vmodel="bert-isvc")  # through its virtual model: still bert
    third = await pod.read()
    assert third.served == {"resnet": second.last_success, "bert": third.last_success}
    assert (await pod.read()).served == third.served  # nothing served: the times stay where they were


async def test_the_horizon_is_published_beside_the_models_so_that_a_longer_window_learns_it_counts_fewer(
    pod_factory: PodFactory,
) -> None:
    """The adapter counts models served within `target_lru_age_s`; the exporter keeps them for its horizon only,
    and says how long, with the per-model family: none without per-model metrics (there is nothing it bounds),
    nor with the series off."""
    pod = await pod_factory(horizon_s=120.0)
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(1, model="resnet")
    assert (await pod.read()).horizon_s == 120.0
    gone = await pod.read(200.0)  # nothing served for longer than the horizon: no model left, the horizon still said
    assert (gone.served, gone.horizon_s) == ({}, 120.0)
    without = await pod_factory(per_model=False)
    assert (await without.read()).horizon_s is None
    off = await pod_factory(horizon_s=0.0)
    off.container.serve(1, model="resnet")
    assert (await off.read()).horizon_s is None


async def test_a_restarted_exporter_says_it_does_not_know_yet_rather_than_that_every_model_was_just_served(
    pod_factory: PodFactory, caplog: pytest.LogCaptureFixture,
) -> None:
    """An outside review: after the sidecar alone restarted, every model ModelMesh had counted in its container's
    life (up to some 80,000 on a pod at the cap) was published as served at the exporter's first read, for a whole
    horizon: the models used within `target_lru_age_s` (the cache need) and the series count inflated, where the
    pod had served two models in the last hour. When ModelMesh served what it counted before that read is unknown:
    the family is left out (per-model use missing, which the adapter holds on, never "none served"), until each
    of those models is served again or the horizon has passed since that read; then only what the exporter saw
    served is there."""
    pod = await pod_factory(horizon_s=600.0)
    await pod.read()  # the baseline read: nothing served yet
    for model in ("resnet", "bert", "old-0", "old-1"):
        pod.container.serve(3, model=model)
    first = await pod.read()
    assert set(first.served) == {"resnet", "bert", "old-0", "old-1"}

    pod.clock.now += 3000.0  # the old models go unused for longer than the horizon; resnet and bert stay busy
    pod.container.serve(1, model="resnet")
    pod.container.serve(1, model="bert")
    await pod.start_exporter()  # the sidecar restarts; ModelMesh keeps its counts
    with caplog.at_level(logging.INFO, logger="exporter"):
        restarted = await pod.read()
    assert (restarted.has_family, restarted.horizon_s) == (False, None)  # not: all four served just now
    assert restarted.last_success is not None
    said = [r.getMessage() for r in caplog.records if names.MODEL_LAST_SERVED_TIMESTAMP in r.getMessage()]
    assert len(said) == 1 and "4 models" in said[0] and "600 s" in said[0], said

    for _ in range(3):  # resnet and bert served again: still two models nothing is known of
        pod.container.serve(1, model="resnet")
        pod.container.serve(1, model="bert")
        assert not (await pod.read()).has_family
    caplog.clear()
    with caplog.at_level(logging.INFO, logger="exporter"):
        known = await pod.read(600.0)  # the horizon has passed since the first read: what is left is known
    assert (known.has_family, known.served, known.horizon_s) == (
        True, {"resnet": restarted.last_success + 15.0, "bert": restarted.last_success + 15.0}, 600.0)
    assert any(names.MODEL_LAST_SERVED_TIMESTAMP in r.getMessage() for r in caplog.records)


async def test_after_a_restart_the_models_it_counted_are_known_once_each_is_served_again(
    pod_factory: PodFactory,
) -> None:
    """A busy pod's models are all served again within a read or two of the sidecar's restart: known from then
    on, not an hour later."""
    pod = await pod_factory()
    pod.container.serve(10, model="resnet")
    pod.container.serve(10, model="bert")
    assert not (await pod.read()).has_family  # the exporter's first read: when were they served?
    pod.container.serve(1, model="resnet")
    assert not (await pod.read()).has_family  # bert's time still unknown
    pod.container.serve(1, model="bert")
    known = await pod.read()
    assert known.last_success is not None
    assert known.served == {"resnet": known.last_success - INTERVAL_S, "bert": known.last_success}


async def test_a_modelmesh_restart_is_neither_served_nor_negative(pod_factory: PodFactory) -> None:
    pod = await pod_factory()
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(100, model="resnet")
    pod.container.serve(100, model="bert")
    before = await pod.read()

    pod.container.restart()  # a new JVM: no request series until its first request
    pod.container.publish(models=0, lru_time_s=None)
    assert (await pod.read()).served == before.served
    pod.container.serve(4, model="bert")  # fewer than the old container counted, and served all the same
    after = await pod.read()
    assert after.served == {"resnet": before.last_success, "bert": after.last_success}
    assert (await pod.read()).served == after.served  # the new container's counts stand still: not served

    pod.container.restart()  # again, and this time the new container served before the exporter read it
    pod.container.serve(1, model="resnet")
    pod.container.serve(1, model="bert")
    latest = await pod.read()
    assert latest.served == {"resnet": latest.last_success, "bert": latest.last_success}


async def test_a_model_not_served_within_the_horizon_leaves_the_output(pod_factory: PodFactory) -> None:
    pod = await pod_factory(horizon_s=60.0)
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(5, model="resnet")
    pod.container.serve(5, model="bert")
    stamped = (await pod.read()).served["resnet"]
    for _ in range(11):  # 55 s more
        pod.container.serve(1, model="bert")
        await pod.read()
    assert (await pod.read()).served["resnet"] == stamped  # exactly 60 s ago: still in
    pod.container.serve(1, model="bert")
    gone = await pod.read()
    assert set(gone.served) == {"bert"}  # 65 s ago: out
    pod.container.serve(1, model="resnet")
    back = await pod.read()
    assert back.served["resnet"] == back.last_success


async def test_a_horizon_of_zero_turns_the_series_off(pod_factory: PodFactory) -> None:
    pod = await pod_factory(horizon_s=0.0)
    pod.container.serve(5, model="resnet")
    for _ in range(2):
        assert not (await pod.read()).has_family


async def test_without_per_model_metrics_the_series_is_absent(pod_factory: PodFactory) -> None:
    pod = await pod_factory(per_model=False)
    for _ in range(3):
        pod.container.serve(40)
        scraped = await pod.read()
        assert not scraped.has_family  # no family at all: not an empty label, not 0
        assert scraped.last_success == pod.clock.now


async def test_a_modelmesh_that_never_ran_a_request_says_it_served_none(pod_factory: PodFactory) -> None:
    """ModelMesh puts models on a few pods; the others (and pods a scale-up just added) may run no request at
    all, and with per-model metrics on its histograms have no series before their first use. Such a pod served
    no model: the family is declared with no sample, the horizon beside it, as for a pod whose models all left
    the horizon. Before, it published no family at all, read by the adapter as "per-model use missing", which
    held the runtime's cache term up for as long as the pod stayed idle."""
    pod = await pod_factory(horizon_s=120.0)
    pod.container.publish(models=2, lru_time_s=pod.clock.now)  # models placed here, none used
    for _ in range(3):
        idle = await pod.read()
        assert (idle.has_family, idle.served, idle.horizon_s) == (True, {}, 120.0)
    pod.container.queued(1, model="resnet")  # a request still running: not served yet, per model all the same
    assert (await pod.read()).served == {}
    pod.container.serve(1, model="resnet")
    served = await pod.read()
    assert served.served == {"resnet": served.last_success}


async def test_without_per_model_metrics_an_idle_pod_says_nothing_from_its_first_read(pod_factory: PodFactory) -> None:
    """ModelMesh without per-model metrics serves its unlabelled queue-delay and cache-miss histograms at 0 from
    its start: the exporter knows then that no model served here will be known, and a pod that has run no
    request is no different from one that ran many (the family absent), over a ModelMesh restart too."""
    pod = await pod_factory(per_model=False)
    pod.container.publish(models=2, lru_time_s=pod.clock.now)
    assert not (await pod.read()).has_family
    pod.container.serve(3)
    assert not (await pod.read()).has_family
    pod.container.restart()
    for _ in range(2):
        assert not (await pod.read()).has_family


async def test_with_per_model_metrics_a_restarted_modelmesh_still_says_served_none(pod_factory: PodFactory) -> None:
    pod = await pod_factory(horizon_s=60.0)
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(5, model="resnet", code="INTERNAL")  # failed, but ran here: served, and per model
    failed = await pod.read()
    assert failed.served == {"resnet": failed.last_success}
    pod.container.restart()  # a new container: no series at all, as a new pod's
    for _ in range(14):  # 70 s: past the horizon, nothing left, still declared
        restarted = await pod.read()
    assert (restarted.has_family, restarted.served) == (True, {})


async def test_a_request_without_a_model_id_is_no_model(pod_factory: PodFactory) -> None:
    pod = await pod_factory()
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(5, model="")  # ModelMesh labels a request it has no model id for with ""
    pod.container.serve(5, model="resnet")
    scraped = await pod.read()
    assert scraped.served == {"resnet": scraped.last_success}


async def test_model_ids_with_quotes_backslashes_and_newlines_come_through_unchanged(pod_factory: PodFactory) -> None:
    pod = await pod_factory()
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(5, model=ODD_ID)
    scraped = await pod.read()  # promtool checks the escaping of what the exporter serves
    assert scraped.served == {ODD_ID: scraped.last_success}


@pytest.mark.parametrize("fault", ["refused", "garbage"])
async def test_a_failed_read_keeps_the_last_good_times(pod_factory: PodFactory, fault: str) -> None:
    pod = await pod_factory(horizon_s=60.0)
    await pod.read()  # the baseline read: the exporter reads ModelMesh before its first request
    pod.container.serve(5, model="resnet")
    good = await pod.read()
    if fault == "refused":
        await pod.port.down()
    else:
        pod.port.garbage = True
    pod.container.serve(5, model="bert")
    for _ in range(20):  # 100 s of failed reads, past the horizon: nothing is known, nothing changes
        failed = await pod.read()
        assert (failed.served, failed.last_success) == (good.served, good.last_success)
    if fault == "refused":
        await pod.port.up()
    pod.port.garbage = False
    healed = await pod.read()
    assert healed.served == {"bert": healed.last_success}  # resnet: 105 s ago, past the horizon


# One read: seconds since the last, then what ModelMesh did meanwhile: (model index, requests) served, and
# whether its container restarted first.
READS = st.lists(st.tuples(st.sampled_from([1.0, 5.0, 30.0]),
                           st.lists(st.tuples(st.integers(0, 3), st.integers(1, 5)), max_size=3),
                           st.booleans()), min_size=1, max_size=15)


@settings(max_examples=60, deadline=None)
@given(READS)
def test_times_never_go_back_never_pass_the_read_and_stand_still_for_a_model_not_served(
    reads: list[tuple[float, list[tuple[int, int]], bool]],
) -> None:
    clock = Clock()
    container = ModelMeshContainer(clock, per_model=True)
    container.publish(models=4, lru_time_s=clock.now)
    collector = ModelMeshCollector(CollectorHealth(clock=clock), "http://127.0.0.1:1/metrics", clock=clock,
                                   wall_clock=clock, model_recency_horizon_s=60.0)
    collector.ingest(container.render(), clock.now)  # the baseline: read before ModelMesh's first request
    before: dict[str, float] = {}
    restarted = False
    for seconds, served, restart in reads:
        restarted |= restart
        if restart:
            container.restart()
        for model, requests in served:
            container.serve(requests, model=f"m{model}")
        clock.now += seconds
        collector.ingest(container.render(), clock.now)
        family = {f.name: f for f in collector.collect()}.get(names.MODEL_LAST_SERVED_TIMESTAMP)
        now = {s.labels[names.MODEL_ID_LABEL]: s.value for s in family.samples} if family else {}
        assert all(clock.now - 60.0 <= at <= clock.now for at in now.values())
        assert all(at >= before[model] for model, at in now.items() if model in before)
        # A restart shows only once a count of the new container is below the old one's; from then on every model
        # of the new container with a count is new, served since the last read the exporter trusted.
        if before and not restarted:
            quiet = {f"m{index}" for index in range(4)} - {f"m{model}" for model, _ in served}
            assert all(now[model] == before[model] for model in quiet & before.keys() if model in now)
        before = now


# One read: seconds since the last; whether requests ran, were only queued, or the container restarted first.
STEPS = st.lists(st.tuples(st.sampled_from([1.0, 5.0]), st.sampled_from(["idle", "served", "queued", "restart"])),
                 min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(st.booleans(), STEPS)
def test_the_family_is_there_at_every_read_with_per_model_metrics_and_at_none_without(
    per_model: bool, steps: list[tuple[float, str]],
) -> None:
    """Whatever ModelMesh did (nothing yet, requests still running or ended, restarts): with per-model metrics the
    pod can always say which models it served, "none" included; without, never, not even before its first
    request."""
    clock = Clock()
    container = ModelMeshContainer(clock, per_model=per_model)
    container.publish(models=2, lru_time_s=clock.now)
    collector = ModelMeshCollector(CollectorHealth(clock=clock), "http://127.0.0.1:1/metrics", clock=clock,
                                   wall_clock=clock, model_recency_horizon_s=60.0)
    collector.ingest(container.render(), clock.now)  # the baseline: read before ModelMesh's first request
    for seconds, step in steps:
        if step == "restart":
            container.restart()
        elif step == "served":
            container.serve(2, model="resnet")
        elif step == "queued":
            container.queued(1, model="bert")
        clock.now += seconds
        collector.ingest(container.render(), clock.now)
        published = {family.name for family in collector.collect()}
        assert (names.MODEL_LAST_SERVED_TIMESTAMP in published) is per_model, (step, published)
        assert (names.MODEL_RECENCY_HORIZON in published) is per_model


# What ModelMesh counted before the exporter's first read (model indexes), then per read: seconds since the last,
# and the (model index, requests) served meanwhile.
COUNTED_BEFORE = st.sets(st.integers(0, 4))
READS_AFTER = st.lists(st.tuples(st.sampled_from([1.0, 5.0, 30.0]),
                                 st.lists(st.tuples(st.integers(0, 4), st.integers(1, 3)), max_size=3)),
                       min_size=1, max_size=20)


@settings(max_examples=80, deadline=None)
@given(COUNTED_BEFORE, READS_AFTER)
def test_a_restarted_exporter_never_makes_an_old_model_look_fresh_nor_leaves_out_one_it_saw_served(
    counted_before: set[int], reads: list[tuple[float, list[tuple[int, int]]]],
) -> None:
    """Whatever ModelMesh counted before the exporter's first read and served after it: every model published
    was served after that read, no later than its time; every model served after it within the horizon is
    published (the family is left out rather than say fewer); and the family is there again once the horizon has
    passed since that read, at once where nothing was counted before it."""
    clock = Clock()
    container = ModelMeshContainer(clock, per_model=True)
    container.publish(models=5, lru_time_s=clock.now)
    for model in counted_before:
        container.serve(4, model=f"m{model}")
    clock.now += 100_000.0  # served long before: outside any horizon
    collector = ModelMeshCollector(CollectorHealth(clock=clock), "http://127.0.0.1:1/metrics", clock=clock,
                                   wall_clock=clock, model_recency_horizon_s=60.0)
    collector.ingest(container.render(), clock.now)
    first = clock.now
    last_served: dict[str, float] = {}  # per model, when it was last served after the first read
    for seconds, served in reads:
        for model, requests in served:
            container.serve(requests, model=f"m{model}")
            last_served[f"m{model}"] = clock.now
        clock.now += seconds
        collector.ingest(container.render(), clock.now)
        family = {f.name: f for f in collector.collect()}.get(names.MODEL_LAST_SERVED_TIMESTAMP)
        if family is None:
            assert counted_before and clock.now - first <= 60.0
            continue
        published = {s.labels[names.MODEL_ID_LABEL]: s.value for s in family.samples}
        assert all(model in last_served and last_served[model] <= at for model, at in published.items())
        assert {model for model, at in last_served.items() if at >= clock.now - 60.0} <= published.keys()
