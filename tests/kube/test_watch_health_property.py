"""Whatever the API server answers, the watch-failure counter keeps a fixed few series: one per loop and cause.

A label taken from the error (its message, its status code) would grow one series per distinct answer for as
long as the adapter runs; the causes are a fixed set (`autoscaler.kube.watch_health.FailureReason`)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.kube.errors import KubeApiError, WatchExpiredError
from autoscaler.kube.watch_health import FailureReason, LoopHealth, Watched
from autoscaler.selfmetrics import AdapterMetrics

ERRORS = st.one_of(
    st.builds(KubeApiError, st.text(max_size=40), st.one_of(st.none(), st.integers(min_value=100, max_value=599)),
              st.text(max_size=20)),
    st.builds(WatchExpiredError, st.text(max_size=40), st.just(410)),
    st.builds(RuntimeError, st.text(max_size=40)),
    st.builds(ValueError, st.text(max_size=40)),
)


def failure_series(metrics: AdapterMetrics) -> dict[tuple[str, str], float]:
    return {(sample.labels["watch"], sample.labels["reason"]): sample.value
            for family in metrics.watch_failures.collect() for sample in family.samples}


@given(st.lists(st.tuples(st.sampled_from(list(Watched)), ERRORS), max_size=60))
def test_any_failures_leave_one_series_per_loop_and_cause_and_count_each_once(
    failures: list[tuple[Watched, Exception]],
) -> None:
    metrics = AdapterMetrics()
    for watch in Watched:
        LoopHealth(metrics, watch).started("ml")
    for watch, error in failures:
        LoopHealth(metrics, watch).failed(error)
    series = failure_series(metrics)
    assert set(series) == {(watch.value, reason.value) for watch in Watched for reason in FailureReason}
    assert sum(series.values()) == len(failures)
    expired = sum(1 for _, error in failures
                  if isinstance(error, WatchExpiredError) or getattr(error, "status", None) == 410)
    assert sum(value for (_, reason), value in series.items() if reason == "expired") == expired
