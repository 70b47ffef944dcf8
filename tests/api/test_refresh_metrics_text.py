"""The refresh process's part of `/metrics` keeps each per-runtime series' text between refreshes
(`autoscaler.runtime_gauges`): what Prometheus scrapes must be what `prometheus_client` would write, whatever
the label values, and follow every change of value, new runtime and runtime gone."""

from __future__ import annotations

import dataclasses
import math

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.api.selfmetrics_split import FamilyFilter, _family_names, render_refresh_metrics
from autoscaler.model import RuntimeKey
from autoscaler.runtime_gauges import RuntimeGauge
from autoscaler.selfmetrics import AdapterMetrics
from tests.api.builders import runtime_view

label = st.text(max_size=12)  # quotes, backslashes, newlines, non-ASCII
value = st.one_of(st.integers(-5, 5), st.floats(allow_nan=True, allow_infinity=True))
series = st.dictionaries(st.tuples(label, label), value, max_size=8)


@settings(max_examples=150, deadline=None)
@given(refreshes=st.lists(series, min_size=1, max_size=4))
def test_the_kept_text_is_what_prometheus_client_writes(refreshes: list[dict[tuple[str, ...], float]]) -> None:
    gauge = RuntimeGauge("mm_runtime_value", 'A "value"\nwith \\ escapes.', ("namespace", "deployment"))
    registry = CollectorRegistry()
    registry.register(gauge)
    for current in refreshes:
        gauge.update(current)
        assert gauge.exposition() == generate_latest(registry)


def test_labels_are_written_in_name_order_and_values_as_prometheus_does() -> None:
    gauge = RuntimeGauge("mm_served", "Served.", ("namespace", "deployment", "metric"))
    gauge.update({("ml", 'triton "a"', "modelmesh_gpu_busy"): 1, ("ml", "b", "x"): math.inf})
    assert gauge.exposition() == (
        b"# HELP mm_served Served.\n# TYPE mm_served gauge\n"
        b'mm_served{deployment="triton \\"a\\"",metric="modelmesh_gpu_busy",namespace="ml"} 1.0\n'
        b'mm_served{deployment="b",metric="x",namespace="ml"} +Inf\n')
    gauge.update({("ml", "b", "x"): 2.5})
    assert gauge.exposition() == (
        b"# HELP mm_served Served.\n# TYPE mm_served gauge\n"
        b'mm_served{deployment="b",metric="x",namespace="ml"} 2.5\n')


def lines(text: bytes) -> set[bytes]:
    return set(text.splitlines())


def everything_but_serving(metrics: AdapterMetrics) -> bytes:
    """The refresh side's families rendered the plain way, by `generate_latest` over the registry."""
    from autoscaler.api.selfmetrics_split import SERVING_ATTRIBUTES

    return generate_latest(FamilyFilter(metrics.registry, _family_names(metrics, SERVING_ATTRIBUTES), keep=False))


def test_the_refresh_metrics_sent_to_workers_are_the_registrys_across_refreshes() -> None:
    metrics = AdapterMetrics()
    a, b, c = (RuntimeKey("ml", name) for name in ("a", "b", "c"))
    first = [runtime_view(a), runtime_view(b, fresh=False)]
    second = [dataclasses.replace(runtime_view(a), consecutive_misses=3), runtime_view(c)]  # b gone, c new
    for views in (first, second, second):
        metrics.publish_runtimes(views)
        sent = render_refresh_metrics(metrics)
        assert lines(sent) == lines(everything_but_serving(metrics))
        assert len(sent.splitlines()) == len(lines(sent))  # no family or series twice
    assert b'modelmesh_autoscaler_runtime_consecutive_misses{deployment="a",namespace="ml"} 3.0' in sent
    assert b'deployment="b"' not in sent
    assert metrics.registry.get_sample_value("modelmesh_autoscaler_runtime_values_known",
                                             {"namespace": "ml", "deployment": "c"}) == 1.0
