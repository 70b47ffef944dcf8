"""With `--per-runtime-metrics off` the series of each RuntimeScale whose status is stale is not on /metrics, so
`ModelMeshRuntimeScaleStatusStale` could never fire there: the adapter publishes instead how many of each namespace
are stale (`modelmesh_autoscaler_runtime_scales_status_stale`), which the page reads as the alert does."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import generate_latest

from autoscaler.api.selfmetrics_split import render_refresh_metrics
from autoscaler.selfmetrics import AdapterMetrics

COUNT = "modelmesh_autoscaler_runtime_scales_status_stale"

seen_events = st.lists(st.tuples(st.sampled_from(["ml", "team"]), st.sampled_from(["a", "b", "c"]), st.booleans()),
                       max_size=30)


def page(metrics: AdapterMetrics) -> dict[str, float]:
    """The count's samples on /metrics, by namespace."""
    found: dict[str, float] = {}
    for line in generate_latest(metrics.registry).decode().splitlines():
        if line.startswith(COUNT + "{"):
            labels, value = line.rsplit(" ", 1)
            found[labels.split('namespace="')[1].split('"')[0]] = float(value)
    return found


@given(seen_events)
def test_the_page_counts_the_stale_runtime_scales_of_each_namespace_and_shows_none_where_none_is(
        events: list[tuple[str, str, bool]]) -> None:
    metrics = AdapterMetrics(per_runtime=False)
    last: dict[tuple[str, str], bool] = {}
    for namespace, name, stale in events:
        metrics.runtime_scale_status_seen(namespace, name, stale)
        last[namespace, name] = stale
    stale_by_namespace: dict[str, float] = {}
    for (namespace, _), stale in last.items():
        if stale:
            stale_by_namespace[namespace] = stale_by_namespace.get(namespace, 0) + 1
    assert page(metrics) == stale_by_namespace
    assert "modelmesh_autoscaler_runtime_scale_status_stale{" not in generate_latest(metrics.registry).decode()


def test_with_per_runtime_metrics_on_the_runtime_scales_are_named_and_not_counted() -> None:
    metrics = AdapterMetrics()
    metrics.runtime_scale_status_seen("ml", "triton", True)
    text = generate_latest(metrics.registry).decode()
    assert 'modelmesh_autoscaler_runtime_scale_status_stale{namespace="ml",runtimescale="triton"} 1.0' in text
    assert page(metrics) == {}
    assert COUNT.encode() not in render_refresh_metrics(metrics)  # the page of --workers N too
