"""The metric answers written from a byte template are the bytes `json.dumps` gave (hypothesis).

`handlers.metric_answer` once encoded the whole ExternalMetricValueList with `json.dumps`; it now fills a
template. Here the old encoding is the oracle, on random runtimes: names with quotes, backslashes, non-ASCII
and the servingruntime prefix, any value a quantity can take, old and future timestamps, odd windows, and
unknown values (503).
"""

from __future__ import annotations

import dataclasses
import json

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.handlers import metric_answer, metric_answers
from autoscaler.api.quantity import milli_quantity
from autoscaler.api.snapshot import METRICS
from autoscaler.kube.timestamps import rfc3339
from autoscaler.model import RuntimeKey, RuntimeView, ServedValue
from autoscaler.names import GROUP_VERSION, ServedMetric, runtime_labels
from tests.api.builders import NOW, runtime_view


def dumped_answer(view: RuntimeView, metric: ServedMetric) -> bytes:
    """The body as the plain encoding made it."""
    served = view.values[metric]
    assert served.value is not None and served.timestamp is not None
    item = {
        "metricName": metric.value,
        "metricLabels": runtime_labels(view.key.deployment),
        "timestamp": rfc3339(served.timestamp),
        "window": round(view.window_s),
        "value": milli_quantity(served.value),
    }
    return json.dumps({"kind": "ExternalMetricValueList", "apiVersion": GROUP_VERSION, "metadata": {},
                       "items": [item]}).encode()


names = st.one_of(
    st.text(min_size=1, max_size=30),
    st.sampled_from(["modelmesh-serving-triton", "modelmesh-serving-", 'a"b\\c', "ünïcode-☃", "x\ny"]),
)
values = st.one_of(st.none(), st.floats(min_value=0.0, max_value=1e12), st.sampled_from([0.0, 0.0005, 2.5, 1e15]))
stamps = st.one_of(st.none(), st.floats(min_value=0.0, max_value=4e9))


@settings(max_examples=300, deadline=None)
@given(namespace=names, deployment=names, known=st.booleans(), window=st.floats(min_value=0.0, max_value=1e6),
       served=st.lists(st.tuples(values, stamps), min_size=4, max_size=4), fresh_at=stamps)
def test_templated_answers_are_the_bytes_json_dumps_gave(
    namespace: str, deployment: str, known: bool, window: float,
    served: list[tuple[float | None, float | None]], fresh_at: float | None,
) -> None:
    view = dataclasses.replace(
        runtime_view(), key=RuntimeKey(namespace, deployment), known=known, window_s=window,
        fresh_sample_at=fresh_at,
        values={metric: ServedValue(value, value, stamp)
                for metric, (value, stamp) in zip(METRICS, served, strict=True)},
    )
    together = metric_answers(view, METRICS)
    for metric, answer in zip(METRICS, together, strict=True):
        assert answer == metric_answer(view, metric)
        status, body, age = answer
        value, stamp = view.values[metric].value, view.values[metric].timestamp
        if not known or value is None or stamp is None:
            assert status == 503
            continue
        assert status == 200
        assert body == dumped_answer(view, metric)
        # The age the freshness histogram counts: the fresh samples' (the source's lag), the timestamp's where
        # the view does not say.
        assert age == max(0.0, view.refreshed_at - (stamp if fresh_at is None else fresh_at))
        assert json.loads(body)["items"][0]["metricLabels"]["deployment"] == deployment


def test_a_served_runtime_s_answer_reads_as_the_hpa_expects() -> None:
    status, body, _ = metric_answer(runtime_view(), ServedMetric.DESIRED_REPLICAS)
    assert status == 200
    document = json.loads(body)
    assert document["kind"] == "ExternalMetricValueList" and document["apiVersion"] == GROUP_VERSION
    (item,) = document["items"]
    assert item["metricName"] == "modelmesh_desired_replicas"
    assert item["metricLabels"] == {"deployment": "modelmesh-serving-triton", "servingruntime": "triton"}
    assert item["window"] == 30 and item["timestamp"] == rfc3339(NOW - 5.0)
